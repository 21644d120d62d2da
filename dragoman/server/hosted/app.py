"""The hosted service's HTTP front door (spec 4.1, 4.4 hosted v2, 5, 7, 8, 9; HOSTED.md).

A Starlette app in the daemon's idiom (:mod:`dragoman.server.daemon.app`): each route is a module-level
function reading ``request.app.state`` (database, engine, engine pool, rate limiter, storage, job runner,
settings); errors are the app's ``exception_handlers`` (one JSON body ``{"error", "code", ...}`` whose extra
fields come from the error's ``to_dict()``); ``/openapi.json`` is generated from the route table
(:data:`ROUTES`) and the wire models (:mod:`._models` for v1, :mod:`dragoman.server._wire` for v2).

* **v2** ``POST /api/v2/translate`` is the daemon's contract (same request and result models,
  :func:`~dragoman.server._wire.parse_translate`) with provenance ``'server'``, a bearer API key and the
  key's daily character quota (429 ``daily character quota exceeded`` with ``remaining``, ``limit``,
  ``resets_at``); ``GET /api/v2/languages`` is the daemon's route itself (no key).
* **v1** routes pass the gate of :mod:`._gate` in HOSTED.md's order: 401 → 403 → 429 (60 a minute per key,
  ``RateLimit-*`` headers on every authenticated answer) → Idempotency-Key (POST) → validation (400, 413,
  415) → 402 (credits or monthly cap, taken when the job's reservation is made) → work. Texts of at most 500
  characters are translated in the request (``sync: true``); longer texts and files become jobs of the
  in-process runner (202 and an absolute ``poll_url``). ``GET /api/v1/languages`` and ``POST /api/v1/quote``
  need no key.

The domain (keys, credits, jobs, storage, webhooks) is :mod:`dragoman.service`; nothing here decides a
price, a state change or a limit value. :func:`create_app` builds the app (and, in its lifespan, starts the
job runner and the webhook dispatcher); :mod:`.serve` runs it under uvicorn.

The routes live in modules that each read in one sitting: :mod:`.v2` (v2 translate), :mod:`.v1_translate`
(v1 translate: JSON, multipart, batches, the sync path), :mod:`.v1_jobs` (jobs and their exports),
:mod:`.v1_misc` (languages, quote, usage), sharing :mod:`._common`; :mod:`._openapi` completes the OpenAPI
document. This module keeps the route table, the error handlers, the lifespan and :func:`create_app`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import cache
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response

from dragoman.errors import (
    BackendError,
    BodyTooLarge,
    DetectionUnavailable,
    DocumentFormatError,
    DragomanError,
    EngineTimeout,
    FileTooLarge,
    IdempotencyConflict,
    IdempotencyMismatch,
    InsufficientCredits,
    InvalidRequest,
    InvalidWebhookUrl,
    JobFinished,
    JobNotFound,
    LimitExceeded,
    MonthlyCapReached,
    PackNotInstalled,
    PipelineBroken,
    PipelineStuck,
    PlanWithoutApi,
    QuotaExceeded,
    RateLimited,
    Saturated,
    Unauthorized,
    UnknownLanguage,
    UnsupportedPair,
    VoiceNotInstalled,
)
from dragoman.limits import RATE_PER_MINUTE
from dragoman.server._http import (
    JSON,
    ApiRoute,
    EnginePool,
    QueryParam,
    exception_handlers,
)
from dragoman.server._wire import BatchResponse, LanguageRow, TranslateRequest, TranslationResultModel
from dragoman.server.daemon.app import AllFlag
from dragoman.server.daemon.app import languages as daemon_languages
from dragoman.server.hosted._gate import HostedMiddleware, RequestTally
from dragoman.server.hosted._models import (
    CancelResponse,
    JobListResponse,
    JobResponse,
    QuoteRequest,
    QuoteResponse,
    SyncTranslateResponse,
    UsageResponse,
    V1LanguageRow,
    V1TranslateRequest,
)
from dragoman.server.hosted._openapi import hosted_openapi
from dragoman.server.hosted._ranges import RANGE_NOT_SATISFIABLE
from dragoman.server.hosted.v1_dub import ROUTES as DUB_ROUTES
from dragoman.server.hosted.v1_jobs import (
    cancel_job,
    export_docx,
    export_pdf,
    get_job,
    list_jobs_v1,
)
from dragoman.server.hosted.v1_misc import languages_v1, quote_v1, usage_v1
from dragoman.server.hosted.v1_subtitles import ROUTES as SUBTITLE_ROUTES
from dragoman.server.hosted.v1_translate import translate_v1
from dragoman.server.hosted.v1_tts import (
    TtsJobResponse,
    TtsRequest,
    get_tts_audio,
    get_tts_job,
    synth,
    synth_stream,
    voices,
)
from dragoman.server.hosted.v1_tts_voices import ROUTES as TTS_VOICE_ROUTES
from dragoman.server.hosted.v2 import translate_v2
from dragoman.service import jobs
from dragoman.service.db import Database
from dragoman.service.ratelimit import RateLimiter
from dragoman.service.storage import Storage

if TYPE_CHECKING:
    from dragoman.service.dub_jobs import Dubber
    from dragoman.settings import Settings
    from dragoman.speech.asr import Recognizer
    from dragoman.speech.tts.synth import Synthesizer
    from dragoman.translation.engine import Engine


async def openapi(request: Request) -> Response:
    """This document."""
    return Response(openapi_json(), media_type=JSON)


# ----- the route table and its document ----------------------------------------------------------------
_V2_ERRORS = (
    IdempotencyConflict,
    IdempotencyMismatch,
    InvalidRequest,
    LimitExceeded,
    UnknownLanguage,
    UnsupportedPair,
    PackNotInstalled,
    BackendError,
    PipelineBroken,
    Saturated,
    DetectionUnavailable,
    EngineTimeout,
    PipelineStuck,
    Unauthorized,
    PlanWithoutApi,
    QuotaExceeded,
    BodyTooLarge,
)
_AUTH_ERRORS = (Unauthorized, PlanWithoutApi, RateLimited)


ROUTES = [
    ApiRoute(
        "/api/v2/translate",
        translate_v2,
        method="POST",
        request=TranslateRequest,
        response=TranslationResultModel | BatchResponse,
        response_description="one result for text; {results} for texts (provenance 'server')",
        errors=_V2_ERRORS,
    ),
    ApiRoute(
        "/api/v2/languages",
        daemon_languages,
        method="GET",
        response=list[LanguageRow],
        response_description="language rows (spec 2.5), the same as the local daemon's",
        errors=(InvalidRequest,),
        query=[QueryParam("all", AllFlag, "'1' or 'true': the whole FLORES-200 catalogue instead")],
    ),
    ApiRoute(
        "/api/v1/languages",
        languages_v1,
        method="GET",
        response=list[V1LanguageRow],
        response_description="every language with codes, native name, script variants and credit tier",
    ),
    ApiRoute(
        "/api/v1/quote",
        quote_v1,
        method="POST",
        request=QuoteRequest,
        response=QuoteResponse,
        response_description="credits and breakdown {chars, src, tgt, langTier}",
        errors=(InvalidRequest, UnknownLanguage, BodyTooLarge, FileTooLarge, DocumentFormatError),
    ),
    ApiRoute(
        "/api/v1/translate",
        translate_v1,
        method="POST",
        request=V1TranslateRequest,
        response=SyncTranslateResponse,
        response_description="a text of at most 500 characters, translated (202 for jobs: see below)",
        errors=(
            *_AUTH_ERRORS,
            IdempotencyConflict,
            IdempotencyMismatch,
            InvalidRequest,
            UnknownLanguage,
            UnsupportedPair,
            InvalidWebhookUrl,
            BodyTooLarge,
            FileTooLarge,
            DocumentFormatError,
            InsufficientCredits,
            MonthlyCapReached,
            BackendError,
            EngineTimeout,
            Saturated,
        ),
    ),
    ApiRoute(
        "/api/v1/jobs",
        list_jobs_v1,
        method="GET",
        response=JobListResponse,
        response_description="the key's jobs, most recent first, and their total",
        errors=(*_AUTH_ERRORS, InvalidRequest),
        query=[
            QueryParam("limit", int, f"jobs to list, 1 to {jobs.LIST_MAX} (default {jobs.LIST_DEFAULT})"),
            QueryParam("offset", int, "jobs to skip (default 0)"),
        ],
    ),
    ApiRoute(
        "/api/v1/jobs/{job_id}",
        get_job,
        method="GET",
        response=JobResponse,
        response_description="the job (spec 2.1)",
        errors=(*_AUTH_ERRORS, JobNotFound),
    ),
    ApiRoute(
        "/api/v1/jobs/{job_id}",
        cancel_job,
        method="DELETE",
        response=CancelResponse,
        response_description="canceled; credits_refunded",
        errors=(*_AUTH_ERRORS, JobNotFound, JobFinished),
    ),
    ApiRoute(
        "/api/v1/jobs/{job_id}/export/docx",
        export_docx,
        method="GET",
        response=bytes,
        response_description="the DOCX file (Content-Disposition: attachment)",
        errors=(*_AUTH_ERRORS, JobNotFound, RANGE_NOT_SATISFIABLE),
    ),
    ApiRoute(
        "/api/v1/jobs/{job_id}/export/pdf",
        export_pdf,
        method="GET",
        response=bytes,
        response_description="the PDF file (Content-Disposition: attachment)",
        errors=(*_AUTH_ERRORS, JobNotFound, RANGE_NOT_SATISFIABLE),
    ),
    ApiRoute(
        "/api/v1/usage",
        usage_v1,
        method="GET",
        response=UsageResponse,
        response_description="usage of the key",
        errors=_AUTH_ERRORS,
    ),
    # ----- voice rendering (spec 4.2; issue 14): :mod:`.v1_tts` -----
    ApiRoute(
        "/api/v1/tts/synth",
        synth,
        method="POST",
        request=TtsRequest,
        response=bytes,
        response_description="WAV bytes (audio/wav, real RIFF sizes) for at most 1,500 characters; else 202",
        errors=(
            *_AUTH_ERRORS,
            IdempotencyConflict,
            IdempotencyMismatch,
            InvalidRequest,
            InvalidWebhookUrl,
            BodyTooLarge,
            InsufficientCredits,
            MonthlyCapReached,
            VoiceNotInstalled,
            EngineTimeout,
            Saturated,
        ),
    ),
    ApiRoute(
        "/api/v1/tts/synth/stream",
        synth_stream,
        method="POST",
        request=TtsRequest,
        response=bytes,
        response_description="chunked audio/wav, RIFF sizes 0xFFFFFFFF, first sentence first",
        errors=(
            *_AUTH_ERRORS,
            InvalidRequest,
            BodyTooLarge,
            InsufficientCredits,
            MonthlyCapReached,
            VoiceNotInstalled,
        ),
    ),
    ApiRoute(
        "/api/v1/tts/voices",
        voices,
        method="GET",
        response=dict[str, Any],
        response_description="the ten voices, the 31 languages and the engine serving each (no key)",
    ),
    ApiRoute(
        "/api/v1/tts/jobs/{job_id}",
        get_tts_job,
        method="GET",
        response=TtsJobResponse,
        response_description="the tts job: status, progress, credits, duration, audio_url or error",
        errors=(*_AUTH_ERRORS, JobNotFound),
    ),
    ApiRoute(
        "/api/v1/tts/jobs/{job_id}/audio",
        get_tts_audio,
        method="GET",
        response=bytes,
        response_description="the WAV of a done tts job",
        errors=(*_AUTH_ERRORS, JobNotFound, RANGE_NOT_SATISFIABLE),
    ),
    # voice matches, word timings and edits (issue 14): :mod:`.v1_tts_voices`
    *TTS_VOICE_ROUTES,
    # subtitles (spec 4.3; issue 15): :mod:`.v1_subtitles`
    *SUBTITLE_ROUTES,
    # dubbing (spec 4.3; issue 16): :mod:`.v1_dub`
    *DUB_ROUTES,
    ApiRoute(
        "/openapi.json", openapi, method="GET", response=dict[str, Any], response_description="OpenAPI 3.1"
    ),
]


@cache
def openapi_json() -> bytes:
    """The hosted OpenAPI document (:mod:`._openapi`) of :data:`ROUTES`, built once."""
    return hosted_openapi(ROUTES)


# ----- errors ----------------------------------------------------------------------------------------------
def hosted_exception_handlers() -> dict[Any, Any]:
    """The shared handlers (404/405 JSON, unexpected failures as 502 JSON), with every DragomanError's body
    from its ``to_dict()`` (extra fields included) and its ``Retry-After`` when it has one."""
    handlers = exception_handlers("hosted service")

    async def dragoman_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, DragomanError)
        headers: dict[str, str] = {}
        retry_after = getattr(exc, "retry_after", None)
        if isinstance(retry_after, int):
            headers["Retry-After"] = str(retry_after)
        if isinstance(exc, Unauthorized):
            headers["WWW-Authenticate"] = "Bearer"
        body = json.dumps(exc.to_dict(), ensure_ascii=False, separators=(",", ":")).encode()
        return Response(body, status_code=exc.status, headers=headers, media_type=JSON)

    handlers[DragomanError] = dragoman_error
    handlers[Saturated] = dragoman_error
    return handlers


# ----- the app -------------------------------------------------------------------------------------------
@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    state = app.state
    state.tally.start()
    if state.start_workers:
        if state.runner is not None:
            state.runner.start()
        if state.dispatcher is not None:
            state.dispatcher.start()
    try:
        yield
    finally:
        if state.start_workers:
            if state.runner is not None:
                await anyio.to_thread.run_sync(state.runner.stop)
            if state.dispatcher is not None:
                await anyio.to_thread.run_sync(state.dispatcher.stop)
        state.pool.shutdown()
        await anyio.to_thread.run_sync(state.tally.stop)
        if state.owns_engine:
            state.engine.close()


def create_app(
    settings: Settings,
    engine: Engine | None = None,
    *,
    db: Database | None = None,
    storage: Storage | None = None,
    start_workers: bool = True,
    rate_per_minute: int = RATE_PER_MINUTE,
    max_workers: int = 2,
    queue_limit: int = 64,
    request_timeout: float = 60.0,
    recognizer: Recognizer | None = None,
    asr_model: str | None = None,
    synthesizer: Synthesizer | None = None,
    dubber: Dubber | None = None,
) -> Starlette:
    """The hosted service's ASGI app. ``engine`` None: an Engine with provenance 'server' over ``settings``
    (closed with the app). ``start_workers``: the lifespan starts (and stops) the job runner and the webhook
    dispatcher. The database must be migrated (:func:`dragoman.service.migrate.upgrade`; ``serve`` does).
    ``recognizer`` (None: one over ``settings``, models loaded on first use) and ``asr_model`` (None: the
    embedded Whisper base) serve subtitle jobs; tests pass a recognizer of the tiny Whisper. ``synthesizer``
    (None: one over ``settings``) serves tts and dub jobs; ``dubber`` (None: the dub pipeline) dubs."""
    from dragoman.service.dispatch import INPROCESS, make_dispatch
    from dragoman.service.translation_jobs import make_translate_handler
    from dragoman.service.tts_jobs import make_tts_handler
    from dragoman.service.webhooks import WebhookDispatcher
    from dragoman.speech.tts.synth import Synthesizer

    owns_engine = engine is None
    if engine is None:
        from dragoman.translation.engine import Engine

        engine = Engine(settings, provenance="server")
    hosted = settings.hosted
    db = db or Database.from_settings(hosted)
    storage = storage or Storage.from_settings(hosted)
    handler = make_translate_handler(engine)
    app = Starlette(
        routes=ROUTES,
        middleware=[Middleware(HostedMiddleware)],
        exception_handlers=hosted_exception_handlers(),
        lifespan=lifespan,
    )
    app.router.redirect_slashes = False
    state = app.state
    state.settings = settings
    state.engine = engine
    state.owns_engine = owns_engine
    state.db = db
    state.storage = storage
    state.handler = handler
    state.limiter = RateLimiter.from_settings(hosted, rate_per_minute)
    state.tally = RequestTally(db)
    state.pool = EnginePool(max_workers, queue_limit, request_timeout)
    state.tmp_dir = hosted.data_dir / "tmp"
    state.start_workers = start_workers
    # DRAGOMAN_DISPATCH=procrastinate: no job runner and no webhook dispatcher here (the workers run them)
    state.synthesizer = synthesizer or Synthesizer(settings)  # speech engines probed on first use, once
    state.tts_handler = make_tts_handler(state.synthesizer)
    state.tts_catalogue = None
    from dragoman.service.dub_jobs import make_dub_handler
    from dragoman.service.subtitle_jobs import make_subtitle_handler
    from dragoman.speech.asr import Recognizer

    state.recognizer = recognizer or Recognizer(settings)  # speech recognition (issue 15): lazy, once
    handlers = {
        "translate": handler,
        "tts": state.tts_handler,
        "subtitle": make_subtitle_handler(
            db, state.recognizer, engine, max_attempts=hosted.job_attempts, model=asr_model
        ),
        "dub": make_dub_handler(  # issue 16: recognition once per batch, then the dub pipeline per target
            db,
            state.recognizer,
            engine,
            state.synthesizer,
            max_attempts=hosted.job_attempts,
            model=asr_model,
            dubber=dubber,
            allow_private=lambda: bool(state.media_fetch_allow_private),
            hosted=hosted,
        ),
    }
    # what each job kind runs with: the in-process runner's, or a worker in this process (the tests' scaled
    # mode) serving the queues with the same handlers
    state.job_handlers = handlers
    # a dub's media URL is fetched (by its engine job) through the webhooks' SSRF guard, with its setting
    state.media_fetch_allow_private = hosted.webhooks_allow_private
    state.dispatch = make_dispatch(hosted, db, handlers, storage)
    state.runner = state.dispatch.runner
    state.dispatcher = WebhookDispatcher(db, hosted) if state.dispatch.mode == INPROCESS else None
    state.glossary = None  # v2 applies no user glossary file on the hosted service (spec 4.4)
    state.openapi = openapi_json()
    return app


__all__ = ["ROUTES", "create_app", "openapi_json"]
