"""The ``tts`` job kind of the hosted service (issue 14): text to speech on the shared synthesizer.

:func:`make_tts_handler` gives the job runner its :data:`~dragoman.service.jobs.Handler` for ``tts`` jobs;
:func:`tts_params` is what a front door stores as a job's params (and :func:`options_of` reads back).

**Params** (JSON): ``text``; ``options`` (:meth:`SynthesisOptions.to_dict`: voice, language, speed,
emotion_preset, emotion, studio, clone_id); ``clone`` (a voice match's analysis, when ``cloneId`` was given:
:class:`~dragoman.speech.tts.clones.Clone` as JSON); ``voice_id``, ``target_lang``, ``char_count`` as the
request gave them (the ``tts.done`` webhook's fields); ``base_url`` (where ``audio_url`` starts: the
service's configured base URL or the request's).

**Artifacts** (storage keys, under ``tts/<job id>/``):

=========== ============================ ===========================================================
artifact    key                          content
=========== ============================ ===========================================================
``audio``   ``tts/<id>/audio.wav``       the rendered WAV, 16-bit PCM mono, real RIFF sizes
``layout``  ``tts/<id>/layout.json``     the render's layout: ``options``, ``sentences`` (the text
                                         cut as rendered), ``engine``, ``engine_voice``, ``language``,
                                         ``sample_rate``, ``duration_seconds``, ``words`` (engine word
                                         timings, seconds into the audio; null where the engine has
                                         none) — what word alignment and per-word edits build on
=========== ============================ ===========================================================

**Result** (the job's ``result`` column): a JSON object with ``duration_seconds``, ``engine``,
``engine_voice``, ``language``, ``sample_rate``, ``sentences`` and ``notes`` (read by :func:`summary`).

Progress is reported after every sentence, and a canceled job stops before its next sentence
(:class:`~dragoman.errors.Cancelled`). Refusals of the text or options are :class:`InvalidRequest` (400: the
runner fails the job for good and refunds it); an engine's failure is retried by the runner.

Credits (spec 8) are :func:`dragoman.service.billing.tts_quote`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dragoman.errors import InvalidRequest
from dragoman.progress import JobContext
from dragoman.service.jobs import Handler, JobOutcome, JobRecord

if TYPE_CHECKING:
    from dragoman.service.storage import Storage
    from dragoman.speech.tts.synth import Synthesizer
    from dragoman.speech.tts.types import SynthesisOptions, SynthesisResult

log = logging.getLogger("dragoman.service.tts")

KIND = "tts"
AUDIO = "audio"
LAYOUT = "layout"


def audio_key(job_id: str) -> str:
    return f"tts/{job_id}/audio.wav"


def layout_key(job_id: str) -> str:
    return f"tts/{job_id}/layout.json"


def audio_url(base_url: str, job_id: str) -> str:
    """Where a done tts job's WAV is fetched (``GET /api/v1/tts/jobs/{id}/audio``)."""
    return f"{base_url.rstrip('/')}/api/v1/tts/jobs/{job_id}/audio"


def tts_params(
    text: str, options: SynthesisOptions, *, voice_id: str, target_lang: str, base_url: str
) -> dict[str, Any]:
    """A tts job's params (module docstring)."""
    return {
        "text": text,
        "options": options.to_dict(),
        "voice_id": voice_id,
        "target_lang": target_lang,
        "char_count": len(text),
        "base_url": base_url,
    }


def options_of(params: Mapping[str, Any]) -> SynthesisOptions:
    """The job's :class:`SynthesisOptions` (checked again: a row is data, not a promise)."""
    from dragoman.speech.tts.types import Emotion, SynthesisOptions

    raw = params.get("options")
    if not isinstance(raw, Mapping):
        raise InvalidRequest("the tts job has no options")
    emotion = raw.get("emotion")
    return SynthesisOptions(
        voice=raw.get("voice"),  # type: ignore[arg-type]
        language=raw.get("language"),  # type: ignore[arg-type]
        speed=raw.get("speed", 1.0),
        emotion_preset=raw.get("emotion_preset"),
        emotion=Emotion.from_mapping(emotion) if emotion is not None else None,
        studio=bool(raw.get("studio", False)),
        clone_id=raw.get("clone_id"),
    )


def layout(result: SynthesisResult, text: str) -> dict[str, Any]:
    """The render's layout (module docstring) for word alignment and edits."""
    from dragoman.speech.tts.text import prepare

    return {
        "options": result.options.to_dict(),
        "sentences": prepare(text, result.language),
        "engine": result.engine,
        "engine_voice": result.engine_voice,
        "language": result.language,
        "sample_rate": result.audio.rate,
        "duration_seconds": round(result.audio.duration, 3),
        "words": None
        if result.words is None
        else [{"word": w.word, "start": w.start, "end": w.end} for w in result.words],
    }


def result_summary(result: SynthesisResult) -> dict[str, Any]:
    return {
        "duration_seconds": round(result.audio.duration, 3),
        "engine": result.engine,
        "engine_voice": result.engine_voice,
        "language": result.language,
        "sample_rate": result.audio.rate,
        "sentences": result.sentences,
        "notes": list(result.notes),
    }


def summary(job: JobRecord) -> dict[str, Any]:
    """The job's result object (empty while it has none, or when it is not JSON)."""
    return job.result_object()


def done_payload(job: JobRecord) -> dict[str, Any]:
    """Spec 6, ``tts.done``: job_id, voice_id, target_lang, char_count, duration_seconds, audio_url (plus
    status and credits)."""
    params = job.params
    return {
        "job_id": job.id,
        "status": job.status,
        "voice_id": params.get("voice_id"),
        "target_lang": params.get("target_lang"),
        "char_count": params.get("char_count"),
        "duration_seconds": summary(job).get("duration_seconds"),
        "audio_url": audio_url(str(params.get("base_url") or ""), job.id),
        "credits": job.credits,
    }


def render(
    synthesizer: Synthesizer, job_id: str, params: Mapping[str, Any], context: JobContext, storage: Storage
) -> tuple[SynthesisResult, bytes, JobOutcome]:
    """Render a job's text, store its WAV and layout: (result, the WAV's bytes, the outcome)."""
    from dragoman.media.audio import wav_bytes

    text = params.get("text")
    if not isinstance(text, str):
        raise InvalidRequest("the tts job has no text")
    options = options_of(params)
    context.check()
    clone = params.get("clone")
    if isinstance(clone, Mapping):  # a voice match (dragoman.speech.tts.clones): the matched voice adapted
        from dragoman.speech.tts.clones import Clone, synthesize_with_clone

        result = synthesize_with_clone(synthesizer, text, options, Clone.from_dict(dict(clone)), context)
    else:
        result = synthesizer.synthesize(text, options, context)
    wav = wav_bytes(result.audio)
    storage.put_bytes(audio_key(job_id), wav)
    storage.put_bytes(layout_key(job_id), json.dumps(layout(result, text), ensure_ascii=False).encode())
    outcome = JobOutcome(
        result=json.dumps(result_summary(result), ensure_ascii=False),
        artifacts={AUDIO: audio_key(job_id), LAYOUT: layout_key(job_id)},
    )
    return result, wav, outcome


def make_tts_handler(synthesizer: Synthesizer) -> Handler:
    """The runner's handler of ``tts`` jobs over ``synthesizer`` (engines loaded once per process)."""

    def handle(job: JobRecord, context: JobContext, storage: Storage) -> JobOutcome:
        return render(synthesizer, job.id, job.params, context, storage)[2]

    return handle
