"""Which speech engines are installed here: probed once per process (``shutil.which`` for the programs, an
import check for py-nanotts and onnxruntime), lazily, thread-safe. Nothing is started until an engine is
used; Piper's voice list (and the embedded voice's install on first use) waits for its first ``voices()``.

Engines come best first (Kokoro, Piper, Pico, festival, flite, espeak-ng); each voice carries its own quality
rank, so the voices layer picks per language by that rank, not by this order. Kokoro's voice list is read from
the model store on first use, and again whenever the store changes.
"""

from __future__ import annotations

import threading
from pathlib import Path

from dragoman.models.voices import voices_root
from dragoman.settings import Settings
from dragoman.speech.tts.engines import espeak, festival, flite, kokoro, pico, piper
from dragoman.speech.tts.engines.base import TtsEngine

_lock = threading.Lock()
_engines: dict[Path, list[TtsEngine]] = {}


def probe(settings: Settings) -> list[TtsEngine]:
    """The engines installed now (no cache)."""
    found: list[TtsEngine] = []
    espeak_engine = espeak.EspeakEngine() if espeak.available() else None
    if espeak_engine is not None and kokoro.available():
        found.append(kokoro.KokoroEngine(settings, espeak_engine))
    if espeak_engine is not None and piper.available():
        found.append(piper.PiperEngine(settings, espeak_engine))
    if pico.available():
        found.append(pico.PicoEngine())
    if festival.available():
        found.append(festival.FestivalEngine())
    if flite.available():
        found.append(flite.FliteEngine())
    if espeak_engine is not None:
        found.append(espeak_engine)
    return found


def installed_engines(settings: Settings) -> list[TtsEngine]:
    """The installed engines, probed once per process (per voice store) and shared."""
    key = voices_root(settings)
    with _lock:
        if key not in _engines:
            _engines[key] = probe(settings)
        return list(_engines[key])


def forget() -> None:
    """Probe afresh next time (tests; after installing a system package)."""
    with _lock:
        _engines.clear()
