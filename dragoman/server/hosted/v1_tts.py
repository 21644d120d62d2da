"""Hosted v1 voice rendering (spec 4.2; issue 14): ``/api/v1/tts/*`` on the job machinery.

* ``POST /api/v1/tts/synth``: a text of at most 1,500 characters is rendered in the request and answered as
  WAV bytes (``audio/wav``, real RIFF sizes; headers ``X-Job-Id``, ``X-Credits``, ``X-Duration-Seconds``,
  ``X-Engine``); a longer one (up to 50,000) becomes a ``tts`` job: 202 with ``job_id``, ``poll_url``
  (``GET /api/v1/tts/jobs/{id}``) and ``credits_reserved``, then ``audio_url`` once done (and the
  ``tts.done`` webhook; ``tts.failed`` refunds).
* ``POST /api/v1/tts/synth/stream``: the same body, answered as chunked ``audio/wav`` whose RIFF sizes are
  ``0xFFFFFFFF``; the header and the first sentence's audio are sent as soon as that sentence is rendered,
  then one chunk per sentence. Charged like a render (a synchronous job: charged when the stream ends,
  refunded when it fails or the client goes away).
* ``GET /api/v1/tts/voices`` (no key): the ten voices, the 31 languages, the emotion presets, and per voice
  and language the engine voice serving it (standard and studio).
* ``GET /api/v1/tts/jobs/{id}``: a tts job (:class:`TtsJobResponse`: the spec leaves this open);
  ``GET /api/v1/tts/jobs/{id}/audio``: its WAV, streamed from the store; one byte range (``Range``) gets a
  206 and ``HEAD`` the headers alone, as every stored download (:mod:`._ranges`). The answers of
  ``/synth`` and ``/synth/stream`` are POSTs' results (the stream made as it is sent): no ranges there.

Validation (400): ``voiceId`` one of the ten; ``targetLang`` one of the 31 (two-letter); ``text`` 1 to
50,000 characters; ``mode`` ``standard`` or ``studio``; ``speed`` 0.5–1.8; ``emotionPreset`` one of the
seven; ``emotion`` the object of :mod:`dragoman.speech.tts.types` (its ranges). Credits: spec 8
(:func:`dragoman.service.billing.tts_quote`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread
import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from dragoman.errors import InvalidRequest, JobNotFound
from dragoman.limits import MAX_TTS_CHARS, MAX_TTS_INLINE_CHARS
from dragoman.server._http import JSON, EnginePool, model_response
from dragoman.server.hosted._common import base_url, check_webhook, read_limited
from dragoman.server.hosted._gate import Reservation, authenticate, idempotent
from dragoman.server.hosted._models import parse_model
from dragoman.server.hosted._ranges import file_response
from dragoman.service import billing, idempotency, jobs, tts_jobs
from dragoman.service.usage import iso_ms

if TYPE_CHECKING:
    from dragoman.media.audio import Audio
    from dragoman.service.accounts import KeyInfo
    from dragoman.service.db import Database
    from dragoman.service.jobs import JobRecord
    from dragoman.service.storage import Storage
    from dragoman.speech.tts.synth import Synthesizer
    from dragoman.speech.tts.types import SynthesisOptions

#: Bytes of a synth body: 50,000 characters at up to 6 bytes each once JSON-escaped, and the options.
MAX_TTS_JSON_BYTES = 6 * MAX_TTS_CHARS + 64 * 1024
WAV = "audio/wav"
_EXAMPLE = '{"voiceId": "aria", "targetLang": "en", "text": "Hello there."}'


class TtsRequest(BaseModel):
    """The body of ``POST /api/v1/tts/synth`` and ``/synth/stream`` (spec 4.2)."""

    model_config = ConfigDict(strict=True, extra="forbid", populate_by_name=False)

    voice_id: str = Field(alias="voiceId", description="one of the ten voices (tts/voices)")
    target_lang: str = Field(alias="targetLang", description="two-letter code, one of the 31 (tts/voices)")
    text: str = Field(min_length=1, max_length=MAX_TTS_CHARS, description="at most 50,000 characters")
    mode: Literal["standard", "studio"] = Field("standard", description="studio: 48 kHz, -16 LUFS, breaths")
    speed: float = Field(1.0, description="0.5 to 1.8, a multiplier")
    clone_id: str | None = Field(None, alias="cloneId", description="a voice match's id (overrides voiceId)")
    emotion: dict[str, Any] | None = Field(
        None, description="speed_ratio 0.5-2, pitch_delta_st -12..12, energy_ratio 0.25-4, pause_scale 0-3"
    )
    emotion_preset: str | None = Field(
        None, alias="emotionPreset", description="whisper, shout, sad, urgent, excited, warm, calm"
    )
    webhook: str | None = Field(None, description="overrides the key's webhook URL for this render")
    title: str | None = Field(None, max_length=200, description="shown in the job list")


class TtsAcceptedResponse(BaseModel):
    """202: the render is a job; poll ``poll_url`` (every 2 to 5 s) or await ``tts.done``."""

    job_id: str
    status: Literal["queued"] = "queued"
    sync: Literal[False] = False
    poll_url: str = Field(description="absolute URL of GET /api/v1/tts/jobs/{job_id}")
    credits_reserved: int


class TtsJobResponse(BaseModel):
    """A tts job (the spec leaves the TTS polling endpoint open; this is the contract).

    ``audio_url`` is present once ``status`` is done, ``error`` once it is failed; ``credits`` is null
    until the job ends (charged when done, 0 after a refund); ``duration_seconds`` is the audio's length
    once done."""

    job_id: str
    status: Literal["queued", "active", "done", "failed", "canceled"]
    sync: bool
    poll_url: str
    progress_percent: int = Field(ge=0, le=100)
    credits: int | None
    credits_reserved: int
    elapsed_seconds: float
    created_at: str
    voice_id: str | None
    target_lang: str | None
    char_count: int | None
    mode: str
    duration_seconds: float | None = None
    engine: str | None = None
    audio_url: str | None = None
    error: str | None = None


# ----- parsing ----------------------------------------------------------------------------------------------
def _options(req: TtsRequest) -> SynthesisOptions:
    """The request as synthesis options; every refusal is a 400 naming the range or the choices."""
    from dragoman.speech.tts.types import Emotion, SynthesisOptions
    from dragoman.speech.tts.voices import language_code

    code, tag = language_code(req.target_lang)
    if len(code) != 2 or tag != code:
        raise InvalidRequest(f"targetLang must be a two-letter code such as 'en', not {req.target_lang!r}")
    return SynthesisOptions(
        voice=req.voice_id,
        language=code,
        speed=req.speed,
        emotion_preset=req.emotion_preset,
        emotion=Emotion.from_mapping(req.emotion) if req.emotion is not None else None,
        studio=req.mode == "studio",
        clone_id=req.clone_id,
    )


def _title(text: str) -> str:
    line = " ".join(text.split())
    return line[:77] + "..." if len(line) > 80 else line


def _prepared(
    request: Request, body: bytes, key: KeyInfo
) -> tuple[TtsRequest, SynthesisOptions, dict[str, Any], int]:
    req = parse_model(TtsRequest, body, _EXAMPLE)
    options = _options(req)
    clone = None
    if options.clone_id is not None:  # a voice match of this key (404 otherwise) overrides voiceId
        from dataclasses import replace

        from dragoman.service import tts_voices

        clone = tts_voices.get_clone(request.app.state.db, key.key_id, options.clone_id)
        options = replace(options, voice=clone.persona)
    quote = billing.tts_quote(len(req.text), studio=options.studio, clone=options.clone_id is not None)
    params = tts_jobs.tts_params(
        req.text,
        options,
        voice_id=options.voice,
        target_lang=options.language,
        base_url=base_url(request),
    )
    if clone is not None:
        params["clone"] = clone.to_dict()  # the analysis the render adapts the voice to
    return req, options, params, quote.credits


# ----- POST /api/v1/tts/synth ---------------------------------------------------------------------------
def tts_job_url(request: Request, job_id: str) -> str:
    return f"{base_url(request)}/api/v1/tts/jobs/{job_id}"


def _wav_response(job: JobRecord, wav: bytes) -> Response:
    summary = tts_jobs.summary(job)
    return Response(
        wav,
        media_type=WAV,
        headers={
            "X-Job-Id": job.id,
            "X-Credits": str(job.credits or 0),
            "X-Duration-Seconds": str(summary.get("duration_seconds", "")),
            "X-Engine": f"{summary.get('engine', '')}:{summary.get('engine_voice', '')}",
        },
    )


def _submit(
    request: Request,
    key: KeyInfo,
    reservation: Reservation | None,
    params: dict[str, Any],
    title: str,
    credits: int,
    webhook: str | None,
) -> Response:
    state = request.app.state
    db: Database = state.db
    with db.write() as conn:
        job = jobs.submit(
            db, key, kind="tts", params=params, title=title, credits=credits, webhook_url=webhook, conn=conn
        )
        state.dispatch.submitted(conn, [job])
        body = TtsAcceptedResponse(
            job_id=job.id, poll_url=tts_job_url(request, job.id), credits_reserved=job.credits_reserved
        )
        response = model_response(body, 202)
        if reservation is not None:
            reservation.complete_in(conn, response)
    state.dispatch.committed()
    return response


async def _synth(request: Request, key: KeyInfo, body: bytes, reservation: Reservation | None) -> Response:
    req, _options_, params, credits = _prepared(request, body, key)
    webhook = await anyio.to_thread.run_sync(check_webhook, request, req.webhook)
    title = req.title or _title(req.text)
    state = request.app.state
    if len(req.text) > MAX_TTS_INLINE_CHARS:
        return await anyio.to_thread.run_sync(
            _submit, request, key, reservation, params, title, credits, webhook
        )
    pool: EnginePool = state.pool
    storage: Storage = state.storage

    def run(context: Any) -> tuple[JobRecord, bytes]:
        job = jobs.run_sync(
            state.db,
            key,
            state.tts_handler,
            storage,
            kind="tts",
            params=params,
            title=title,
            credits=credits,
            ctx=context,
        )
        return job, storage.get_bytes(job.artifacts[tts_jobs.AUDIO])

    job, wav = await pool.run(run)
    return _wav_response(job, wav)


async def synth(request: Request) -> Response:
    """Render speech: WAV bytes for a text of at most 1,500 characters, else a job (202, poll_url)."""
    key = await authenticate(request)
    body = await read_limited(request, MAX_TTS_JSON_BYTES)
    body_print = idempotency.fingerprint(request.method, request.url.path, body)

    async def run(reservation: Reservation | None) -> Response:
        return await _synth(request, key, body, reservation)

    return await idempotent(request, key, body_print, run)


# ----- POST /api/v1/tts/synth/stream --------------------------------------------------------------------
def _stream_body(
    state: Any, job: JobRecord, text: str, chunks: Iterator[Audio], rate: int, context: Any
) -> Iterator[bytes]:
    """The header with the first sentence's audio, then one chunk a sentence; the job is charged when the
    last chunk is sent (its WAV stored with real sizes), refunded when the render fails or the client
    leaves."""
    from dragoman.media.audio import Audio, pcm16, streaming_wav_header, wav_bytes

    sent: list[bytes] = []
    finished = False
    try:
        header = streaming_wav_header(rate)
        for chunk in chunks:
            data = pcm16(chunk)
            yield header + data if not sent else data
            sent.append(data)
        if not sent:
            yield header
        finished = True
    finally:
        if finished:
            pcm = b"".join(sent)
            samples = np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0
            audio = Audio(samples, rate)
            storage: Storage = state.storage
            storage.put_bytes(tts_jobs.audio_key(job.id), wav_bytes(audio))
            summary = {
                "duration_seconds": round(audio.duration, 3),
                "sample_rate": rate,
                "streamed": True,
            }
            jobs.finish_sync(
                state.db,
                job.id,
                jobs.JobOutcome(
                    result=json.dumps(summary), artifacts={tts_jobs.AUDIO: tts_jobs.audio_key(job.id)}
                ),
            )
        else:
            context.cancel.cancel("the stream ended early")
            jobs.fail_sync(state.db, job.id, "the stream ended before the render did")


async def synth_stream(request: Request) -> Response:
    """Render speech as a chunked audio/wav stream (RIFF sizes 0xFFFFFFFF), first sentence first."""
    from dragoman.progress import JobContext

    key = await authenticate(request)
    body = await read_limited(request, MAX_TTS_JSON_BYTES)
    body_print = idempotency.fingerprint(request.method, request.url.path, body)
    state = request.app.state
    synthesizer: Synthesizer = state.synthesizer

    async def run(reservation: Reservation | None) -> Response:
        req, options, params, credits = _prepared(request, body, key)
        context = JobContext.of()
        # refused before any byte is sent (voice, language, text) and before credits are reserved
        if "clone" in params:  # the matched voice (dragoman.speech.tts.clones)
            from dragoman.speech.tts.clones import Clone, stream_with_clone

            clone = Clone.from_dict(params["clone"])
            chunks = await anyio.to_thread.run_sync(
                stream_with_clone, synthesizer, req.text, options, clone, context
            )
        else:
            chunks = await anyio.to_thread.run_sync(synthesizer.stream, req.text, options, context)
        rate = await anyio.to_thread.run_sync(synthesizer.stream_rate, options)
        job = await anyio.to_thread.run_sync(
            lambda: jobs.submit(
                state.db,
                key,
                kind="tts",
                params=params,
                title=req.title or _title(req.text),
                credits=credits,
                sync=True,
            )
        )
        return StreamingResponse(
            _stream_body(state, job, req.text, chunks, rate, context),
            media_type=WAV,
            headers={"X-Job-Id": job.id, "X-Credits-Reserved": str(credits), "Cache-Control": "no-store"},
        )

    return await idempotent(request, key, body_print, run)


# ----- GET /api/v1/tts/voices ---------------------------------------------------------------------------
def _catalogue_json(state: Any) -> bytes:
    cached: bytes | None = getattr(state, "tts_catalogue", None)
    if cached is None:
        synthesizer: Synthesizer = state.synthesizer
        catalogue = synthesizer.catalogue()
        catalogue["limits"] = {
            "text_chars": MAX_TTS_CHARS,
            "inline_chars": MAX_TTS_INLINE_CHARS,
            "speed": [0.5, 1.8],
            "credits_per_1000_chars": dict(billing.TTS_CREDITS_PER_1000),
            "min_credits": billing.TTS_MIN_CREDITS,
        }
        cached = json.dumps(catalogue, ensure_ascii=False, separators=(",", ":")).encode()
        state.tts_catalogue = cached
    return cached


async def voices(request: Request) -> Response:
    """The ten voices, the 31 languages and the engine serving each voice in each language (no key)."""
    return Response(await anyio.to_thread.run_sync(_catalogue_json, request.app.state), media_type=JSON)


# ----- GET /api/v1/tts/jobs/{job_id} and /audio -------------------------------------------------------------
def _tts_job(request: Request, key: KeyInfo) -> JobRecord:
    job_id = request.path_params["job_id"]
    job = jobs.get(request.app.state.db, key.key_id, job_id)
    if job.kind != "tts":
        raise JobNotFound(f"no tts job {job_id} (a {job.kind} job is at /api/v1/jobs/{job_id})")
    return job


def tts_job_response(request: Request, job: JobRecord) -> TtsJobResponse:
    done = job.status == jobs.DONE
    summary = tts_jobs.summary(job) if done else {}
    options = job.params.get("options") or {}
    count = job.params.get("char_count")
    return TtsJobResponse(
        job_id=job.id,
        status=job.status,  # type: ignore[arg-type]
        sync=job.sync,
        poll_url=tts_job_url(request, job.id),
        progress_percent=100 if done else job.progress_percent,
        credits=job.credits,
        credits_reserved=job.credits_reserved,
        elapsed_seconds=round(job.elapsed_seconds(), 3),
        created_at=iso_ms(job.created_ms),
        voice_id=job.params.get("voice_id"),
        target_lang=job.params.get("target_lang"),
        char_count=count if isinstance(count, int) else None,
        mode="studio" if isinstance(options, dict) and options.get("studio") else "standard",
        duration_seconds=summary.get("duration_seconds"),
        engine=summary.get("engine"),
        audio_url=tts_jobs.audio_url(base_url(request), job.id)
        if done and tts_jobs.AUDIO in job.artifacts
        else None,
        error=job.error if job.status == jobs.FAILED else None,
    )


async def get_tts_job(request: Request) -> Response:
    """A tts job: status, progress, credits, duration and audio_url once done, or error."""
    key = await authenticate(request)
    job = await anyio.to_thread.run_sync(_tts_job, request, key)
    return model_response(tts_job_response(request, job))


async def get_tts_audio(request: Request) -> Response:
    """The WAV of a done tts job (real RIFF sizes; after a word edit, the edited audio). One byte range
    (``Range``) is answered 206, past the end 416 (:mod:`._ranges`, as the dub downloads)."""
    key = await authenticate(request)
    state = request.app.state
    job = await anyio.to_thread.run_sync(_tts_job, request, key)
    stored = job.artifacts.get(tts_jobs.AUDIO)
    if job.status != jobs.DONE or not stored:
        raise JobNotFound(f"no audio for tts job {job.id} yet: it is {job.status} (poll its poll_url)")
    storage: Storage = state.storage
    try:
        size = await anyio.to_thread.run_sync(storage.size, stored)
    except FileNotFoundError:
        raise JobNotFound(f"the audio of tts job {job.id} is no longer kept (results: 30 days)") from None
    return file_response(
        request,
        storage,
        stored,
        size,
        media_type=WAV,
        headers={"Content-Disposition": f'attachment; filename="{job.id}.wav"'},
    )


__all__ = [
    "TtsAcceptedResponse",
    "TtsJobResponse",
    "TtsRequest",
    "get_tts_audio",
    "get_tts_job",
    "synth",
    "synth_stream",
    "voices",
]
