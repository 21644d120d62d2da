"""SVOX Pico through py-nanotts (Apache-2.0, in process): six female voices at 16 kHz.

Pico takes its own markup (``<speed level="…">``, ``<pitch …>``): py-nanotts wraps the text in those tags for
speed, pitch and volume, and Pico would read tags inside the text as commands, so ``<`` and ``>`` in the
text become spaces (the voices layer has already escaped SSML-like markup). Rate, pitch ratio and volume map
onto Pico's speed (0.2-5), pitch (0.5-2: ±12 st; beyond, the rest is shifted after synthesis) and volume.
The library keeps global state: renders are serialised by a lock (each takes ~15 ms a second of speech).

py-nanotts mallocs Pico's 2.5 MB memory pool for every render, and Pico reads part of it before writing it:
on reused heap memory a render depended on what the process had freed before (one text, three different
renders in one process). :func:`_zeroed_pools` makes glibc take blocks of that size straight from the system
(mmap: zero-filled pages), so the same text and settings always give the same samples.
"""

from __future__ import annotations

import ctypes
import importlib.util
import math
import threading
from typing import Any

import numpy as np

from dragoman.errors import SpeechEngineError, VoiceNotInstalled
from dragoman.media.audio import Audio, pitch_shift
from dragoman.speech.tts.engines.base import (
    NEUTRAL,
    QUALITY_PICO,
    EngineOutput,
    EngineVoice,
    Prosody,
    clean_text,
)

RATE = 16000
#: Pico's voices: locale and the speaker its lingware names (all female).
LOCALES = ("en-US", "en-GB", "de-DE", "es-ES", "fr-FR", "it-IT")
_lock = threading.Lock()


#: glibc's mallopt parameter, and the size from which it then maps blocks from the system (fixed: by default
#: the threshold starts at 128 KiB and rises up to 32 MiB as mapped blocks are freed, which would put the pool
#: back on reused heap memory).
_M_MMAP_THRESHOLD = -3
_MMAP_FROM_BYTES = 1 << 20
#: glibc's M_PERTURB: while it is 0xFF every block malloc hands out is filled with zeros (its complement),
#: wherever it comes from (a free list or the heap's top, which the mmap threshold alone does not rule out
#: in a long-lived process); set only around a render, under the render lock.
_M_PERTURB = -6
_zeroed = False
_libc: Any = None


def _zeroed_pools() -> None:
    """Blocks of a megabyte or more come from mmap (zero-filled), Pico's pool included; once per process.
    Only on glibc: elsewhere nothing changes (and renders may then vary as described above)."""
    global _zeroed
    if _zeroed:
        return
    _zeroed = True
    global _libc
    try:
        _libc = ctypes.CDLL("libc.so.6")
        _libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_FROM_BYTES)
    except (OSError, AttributeError):
        _libc = None


def _perturb(byte: int) -> None:
    if _libc is not None:
        _libc.mallopt(_M_PERTURB, byte)


def available() -> bool:
    return importlib.util.find_spec("py_nanotts") is not None


class PicoEngine:
    name = "pico"

    def __init__(self) -> None:
        self._tts: Any = None

    def voices(self) -> list[EngineVoice]:
        return [
            EngineVoice("pico", loc, loc[:2], "female", QUALITY_PICO, RATE, loc, f"SVOX Pico {loc}")
            for loc in LOCALES
        ]

    def _engine(self) -> Any:
        if self._tts is None:
            try:
                import py_nanotts
            except ImportError as exc:
                raise VoiceNotInstalled("SVOX Pico needs py-nanotts: pip install py-nanotts==0.1.1") from exc
            _zeroed_pools()
            self._tts = py_nanotts.NanoTTS()
        return self._tts

    def synthesize(self, text: str, voice_id: str, prosody: Prosody = NEUTRAL) -> EngineOutput:
        if voice_id not in LOCALES:
            raise VoiceNotInstalled(f"SVOX Pico has no voice {voice_id!r}; it has {', '.join(LOCALES)}")
        clean = clean_text(text).replace("<", " ").replace(">", " ")
        ratio = prosody.pitch_ratio
        pico_pitch = min(2.0, max(0.5, ratio))
        left_st = 12 * math.log2(ratio / pico_pitch)
        if not clean.strip():
            return EngineOutput(Audio(np.zeros(0, dtype=np.float32), RATE), None)
        tts = self._engine()
        try:
            with _lock:
                _perturb(0xFF)  # Pico's pool (and all it mallocs) zero-filled during the render
                try:
                    pcm = tts.speak(
                        clean,
                        voice=voice_id,
                        speed=min(5.0, max(0.2, prosody.rate)),
                        pitch=pico_pitch,
                        volume=min(5.0, max(0.0, prosody.volume)),
                    )
                finally:
                    _perturb(0)
        except (RuntimeError, ValueError, MemoryError) as exc:
            raise SpeechEngineError(f"SVOX Pico ({voice_id}) failed: {exc}") from exc
        samples = np.frombuffer(pcm[: len(pcm) - len(pcm) % 2], dtype="<i2").astype(np.float32) / 32768.0
        audio = Audio(samples, RATE)
        if abs(left_st) > 0.05:
            audio = pitch_shift(audio, left_st)
        return EngineOutput(audio, None)
