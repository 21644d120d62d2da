"""Hosted v1 dubbing (spec 1, 2.9, 4.3, 6 and 8; issue 16): ``/api/v1/dub*`` on the job machinery
(:mod:`dragoman.service.dub_jobs`, uploads of :mod:`dragoman.service.media_store`).

* ``POST /api/v1/dub``: JSON :class:`DubCreateRequest`: the media as ``videoId`` (an upload of
  ``POST /api/v1/subtitles/upload``) or ``url`` (fetched LATER by the dub's engine job through the webhooks'
  SSRF guard, 200 MB, then stored as an upload of the account: the job's ``video_id`` once fetched);
  ``targetLang`` (one dub) or ``targets`` (a batch); ``voiceId`` (default aria), ``voiceMode`` (preset,
  match, clone; default clone when ``cloneId`` is given, else preset), ``cloneId`` (one of the key's voice
  clones), ``sourceLang`` ('auto' or BCP-47), ``webhook``. 202 :class:`DubAccepted` at once (a URL is not
  downloaded inside the request). 404 ``media_not_found`` for an unknown upload or another account's, 404
  ``clone_not_found``, 400 ``invalid_media_url`` for a URL the guard refuses without connecting (scheme,
  host, an address that is or resolves to loopback, private, link-local or metadata unless the operator
  allows private addresses), 402 when every target cannot be paid (a URL: when the balance holds less than
  one credit per target). A URL that fails later (unreachable, refused on a redirect, over 200 MB, not
  media, too long, not paid for once probed) ends the job ``failed`` with its code first in ``error``
  (``error_code``: ``invalid_media_url``, ``media_fetch_failed``, ``file_too_large``,
  ``unsupported_media``, ``no_audio_stream``, ``empty_media``, ``limit_exceeded``,
  ``insufficient_credits``, ``monthly_cap_reached``), refunded, with ``dub.failed``.
* ``GET /api/v1/dub/{job_id}``: :class:`DubStatus` (spec 2.9: "Dub job: fields not shown"; this is the
  contract).
* ``GET /api/v1/dub/{job_id}/srt|vtt|txt|bilingual-srt`` (``?lang=`` the target (default) or the source
  language), ``/video`` and ``/audio``: the done child's files, at no credit cost. Each takes one
  ``Range: bytes=a-b`` / ``bytes=a-`` / ``bytes=-n`` (206 with ``Content-Range``; 416 with
  ``Content-Range: bytes */size`` past the end; several ranges get the whole file): :mod:`._ranges`.

Credits: 150 a minute per target language on the probed duration (``dub_jobs``' notes; a URL dub reserves
once its engine job has fetched and probed the media, so its 202 says null); quote with
``POST /api/v1/quote`` ``{"product": "dub", "durationSeconds": 90, "targets": ["es"]}``. Webhooks:
``dub.done``, ``dub.failed`` per child and ``batch.completed`` per batch. Cancel a child with
``DELETE /api/v1/jobs/{id}`` (refunded; its siblings continue).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import Response

from dragoman.errors import InvalidRequest, JobNotFound
from dragoman.server._http import ApiRoute, QueryParam, model_response
from dragoman.server.hosted._common import (
    MAX_SMALL_BODY_BYTES,
    accepted,
    base_url,
    check_webhook,
    read_limited,
)
from dragoman.server.hosted._gate import Reservation, authenticate, idempotent
from dragoman.server.hosted._models import parse_model
from dragoman.server.hosted._ranges import RANGE_NOT_SATISFIABLE, file_response, openapi_ranged
from dragoman.service import dub_jobs, engine_batches, idempotency, jobs, media_store
from dragoman.service.usage import iso_ms

if TYPE_CHECKING:
    from dragoman.service.accounts import KeyInfo
    from dragoman.service.db import Database
    from dragoman.service.media_store import MediaRecord
    from dragoman.service.storage import Storage

_EXAMPLE = '{"videoId": "<video_id>", "targetLang": "es"}'


# ----- wire models --------------------------------------------------------------------------------------
class DubCreateRequest(BaseModel):
    """The body of ``POST /api/v1/dub`` (spec 4.3 "submit a URL or an upload, choose target language and
    voice mode"; the fields are this contract)."""

    model_config = ConfigDict(strict=True, extra="forbid", populate_by_name=False)

    video_id: str | None = Field(None, alias="videoId", max_length=100, description="an upload's video_id")
    url: str | None = Field(
        None, max_length=2048, description="http(s) URL of the media, fetched by the service (200 MB)"
    )
    target_lang: str | None = Field(None, alias="targetLang", max_length=40, description="one target")
    targets: list[str] | None = Field(
        None, max_length=dub_jobs.MAX_TARGETS, description="several targets: a batch (one child each)"
    )
    voice_id: str | None = Field(None, alias="voiceId", max_length=40, description="a voice; default aria")
    voice_mode: Literal["preset", "match", "clone"] | None = Field(
        None, alias="voiceMode", description="default: clone with a cloneId, else preset"
    )
    clone_id: str | None = Field(None, alias="cloneId", max_length=100, description="one of the key's clones")
    source_lang: str = Field("auto", alias="sourceLang", max_length=40, description="'auto' or BCP-47")
    webhook: str | None = Field(None, max_length=2048, description="overrides the key's webhook URL")


class DubAccepted(BaseModel):
    """202: the dub is queued. ``jobIds``: one child per target (poll ``pollUrls`` or await webhooks);
    ``batchId`` null for one ``targetLang``."""

    model_config = ConfigDict(populate_by_name=True)

    batch_id: str | None = Field(alias="batchId")
    job_ids: list[str] = Field(alias="jobIds")
    video_id: str | None = Field(
        alias="videoId", description="the upload dubbed; null for a url (the job's video_id once fetched)"
    )
    duration_seconds: float | None = Field(
        alias="durationSeconds", description="the probed duration billed; null for a url (not fetched yet)"
    )
    source_lang: str = Field(alias="sourceLang")
    targets: list[str]
    voice_id: str = Field(alias="voiceId")
    voice_mode: str = Field(alias="voiceMode")
    clone_id: str | None = Field(alias="cloneId")
    per_target: int | None = Field(
        alias="perTarget",
        description="credits each child reserves (150 a minute); null for a url: reserved once probed",
    )
    total_credits: int | None = Field(alias="totalCredits", description="null for a url (as perTarget)")
    poll_urls: list[str] = Field(alias="pollUrls")


class DubStatus(BaseModel):
    """A dub job (spec 2.9: "fields not shown"; this is the contract). While the job is pending, ``status``,
    ``stage`` and ``progress_percent`` are its batch's (the shared run): ``stage`` queued, fetching (a
    ``url``'s media is downloaded; ``video_id`` and ``duration_seconds`` are null until then), recognising,
    waiting (a sibling is being dubbed), dubbing, then done / failed / canceled. Once done: ``outputs`` (the
    download URLs: video (absent for audio-only media), audio, srt, vtt, txt, bilingual-srt), ``lines``,
    ``lines_beyond_natural`` (indexes of lines compressed beyond the natural speech speed range),
    ``lines_overlapping``, ``share_natural``, ``stage_seconds`` (probe, recognise (the shared run),
    translate, voices, synthesise, fit, mix, mux) and ``warnings``. ``credits``: null until the job ends.
    Once failed: ``error`` and, when the failure is typed, ``error_code`` (also the start of ``error``)."""

    job_id: str
    batch_id: str | None
    status: Literal["queued", "active", "done", "failed", "canceled"]
    stage: str
    progress_percent: int = Field(ge=0, le=100)
    video_id: str | None
    source_lang: str | None
    target_lang: str
    language_probability: float | None = None
    voice_id: str
    voice_mode: str
    clone_id: str | None = None
    duration_seconds: float | None
    credits: int | None
    credits_reserved: int
    error: str | None = None
    error_code: str | None = None
    outputs: dict[str, str] = Field(default_factory=dict)
    lines: int | None = None
    lines_beyond_natural: list[int] = Field(default_factory=list)
    lines_overlapping: list[int] = Field(default_factory=list)
    share_natural: float | None = None
    voices: list[str] = Field(default_factory=list)
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    batch: dict[str, int] = Field(default_factory=dict, description="children by status")
    created_at: str
    elapsed_seconds: float


# ----- POST /api/v1/dub -----------------------------------------------------------------------------------
def status_url(request: Request, job_id: str) -> str:
    return f"{base_url(request)}/api/v1/dub/{job_id}"


def _check_url(request: Request, url: str) -> str:
    """400 ``invalid_media_url`` for a URL the guard refuses without connecting (a name is resolved)."""
    return dub_jobs.check_media_url(url, allow_private=request.app.state.media_fetch_allow_private)


def _create(
    request: Request,
    key: KeyInfo,
    media: MediaRecord | str,
    wanted: dub_jobs.DubRequest,
    webhook: str | None,
    reservation: Reservation | None,
) -> Response:
    """Write the dub of ``media`` (an upload, or a checked URL its engine job fetches) and answer 202."""
    state = request.app.state
    db: Database = state.db
    with db.write() as conn:
        if isinstance(media, str):
            made = dub_jobs.submit_url(
                conn, db, key, media, wanted, webhook_url=webhook, base_url=base_url(request)
            )
            record = None
        else:
            made = dub_jobs.submit(
                conn, db, key, media, wanted, webhook_url=webhook, base_url=base_url(request)
            )
            record = media
        state.dispatch.submitted(conn, [made.engine])
        body = DubAccepted(
            batchId=made.batch_id,
            jobIds=[child.id for child in made.children],
            videoId=None if record is None else record.id,
            durationSeconds=None if record is None else record.duration_seconds,
            sourceLang=wanted.source,
            targets=list(wanted.targets),
            voiceId=wanted.voice,
            voiceMode=wanted.voice_mode,
            cloneId=wanted.clone_id,
            perTarget=None if record is None else made.quote.per_target,
            totalCredits=None if record is None else made.quote.total,
            pollUrls=[status_url(request, child.id) for child in made.children],
        )
        response = accepted(conn, body, reservation)
    state.dispatch.committed()
    return response


async def create(request: Request) -> Response:
    """Dub a video (an upload's videoId or a URL) into targetLang or targets: 202 with the child jobs."""
    key = await authenticate(request)
    body = await read_limited(request, MAX_SMALL_BODY_BYTES)
    body_print = idempotency.fingerprint(request.method, request.url.path, body)

    async def run(reservation: Reservation | None) -> Response:
        fields = parse_model(DubCreateRequest, body, _EXAMPLE)
        if (fields.video_id is None) == (fields.url is None):
            raise InvalidRequest("give videoId (an upload) or url (media the service fetches), not both")
        wanted = dub_jobs.check_request(
            source_lang=fields.source_lang,
            target_lang=fields.target_lang,
            targets=fields.targets,
            voice_id=fields.voice_id,
            voice_mode=fields.voice_mode,
            clone_id=fields.clone_id,
        )
        webhook = await anyio.to_thread.run_sync(check_webhook, request, fields.webhook)
        state = request.app.state
        media: MediaRecord | str
        if fields.url is None:
            assert fields.video_id is not None
            db = state.db
            media = await anyio.to_thread.run_sync(media_store.get, db, key.account_id, fields.video_id)
        else:  # checked now (no connection); the engine job fetches it after the 202
            media = await anyio.to_thread.run_sync(_check_url, request, fields.url)
        return await anyio.to_thread.run_sync(_create, request, key, media, wanted, webhook, reservation)

    return await idempotent(request, key, body_print, run)


# ----- GET /api/v1/dub/{job_id} --------------------------------------------------------------------------
def _float_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _status(request: Request, key: KeyInfo) -> DubStatus:
    found = dub_jobs.view(request.app.state.db, key.key_id, request.path_params["job_id"])
    job = found.job
    if found.is_engine:
        raise JobNotFound(f"no dub job {job.id}")
    info = engine_batches.summary(job) or engine_batches.summary(found.engine)
    done = job.status == jobs.DONE
    stages = info.get("stage_seconds") if done else None
    return DubStatus(
        job_id=job.id,
        batch_id=job.batch_id,
        status=found.status,  # type: ignore[arg-type]
        stage=found.stage,
        progress_percent=found.progress_percent,
        video_id=None if job.params.get("video_id") is None else str(job.params.get("video_id")),
        source_lang=found.source_lang,
        target_lang=str(job.params.get("target_lang")),
        language_probability=_float_or_none(info.get("language_probability")),
        voice_id=str(job.params.get("voice_id") or "aria"),
        voice_mode=str(job.params.get("voice_mode") or "preset"),
        clone_id=job.params.get("clone_id"),
        duration_seconds=None
        if job.params.get("duration_ms") is None
        else int(job.params.get("duration_ms") or 0) / 1000,
        credits=job.credits,
        credits_reserved=job.credits_reserved,
        error=job.error if job.status == jobs.FAILED else None,
        error_code=dub_jobs.error_code(job.error) if job.status == jobs.FAILED else None,
        outputs=dub_jobs.output_urls(job),
        lines=info.get("lines") if done else None,
        lines_beyond_natural=list(info.get("lines_beyond_natural") or []) if done else [],
        lines_overlapping=list(info.get("lines_overlapping") or []) if done else [],
        share_natural=_float_or_none(info.get("share_natural")) if done else None,
        voices=list(info.get("voices") or []) if done else [],
        stage_seconds=dict(stages) if isinstance(stages, dict) else {},
        warnings=list(info.get("warnings") or []) if done else [],
        batch=found.counts(),
        created_at=iso_ms(job.created_ms),
        elapsed_seconds=round(job.elapsed_seconds(), 3),
    )


async def status(request: Request) -> Response:
    """A dub job: the batch's stage and progress while pending, then its outputs, lines and stage timings."""
    key = await authenticate(request)
    return model_response(await anyio.to_thread.run_sync(_status, request, key))


# ----- GET /api/v1/dub/{job_id}/<artifact> -----------------------------------------------------------------
#: The download routes' last segment → the artifact's name.
ARTIFACTS = {segment: name for name, segment in dub_jobs.DOWNLOADS.items()}


def _download_for(segment: str) -> Any:
    name = ARTIFACTS[segment]
    subtitle = name in dub_jobs.SUBTITLE_FORMATS

    async def download(request: Request) -> Response:
        key = await authenticate(request)
        state = request.app.state
        allowed = {"lang"} if subtitle else set()
        unknown = sorted(set(request.query_params) - allowed)
        if unknown:
            listed = ", ".join(sorted(allowed)) or "none"
            raise InvalidRequest(f"unknown query parameter {unknown[0][:40]!r}; allowed: {listed}")
        job = await anyio.to_thread.run_sync(jobs.get, state.db, key.key_id, request.path_params["job_id"])
        if job.kind != dub_jobs.KIND:
            raise JobNotFound(f"no dub job {job.id}")
        stored = dub_jobs.artifact(job, name, request.query_params.get("lang"))
        storage: Storage = state.storage
        try:
            size = await anyio.to_thread.run_sync(storage.size, stored)
        except FileNotFoundError:
            raise JobNotFound(f"the {segment} of dub job {job.id} is no longer kept (30 days)") from None
        filename = Path(stored).name
        return file_response(  # Range: one byte range gets a 206 (a video element seeking), see _ranges
            request,
            storage,
            stored,
            size,
            media_type=dub_jobs.media_type(name, stored),
            headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        )

    what = {
        "video": "The dubbed video (the video stream copied, the dubbed audio first, subtitles muxed)",
        "audio": "The dubbed audio alone (M4A)",
        "bilingual_srt": "The bilingual SRT (source line over its translation), free",
    }.get(name, f"The {name.upper()} subtitles (target language; ?lang= the source), free")
    download.__doc__ = f"{what}."
    download.__name__ = f"dub_{name}"
    return download


# ----- POST /api/v1/quote with product "dub" ----------------------------------------------------------------
class DubQuoteRequest(BaseModel):
    """``POST /api/v1/quote`` for a dub: what it reserves over media of ``durationSeconds`` (the job bills
    the probed duration)."""

    model_config = ConfigDict(strict=True, extra="forbid", populate_by_name=False)

    product: Literal["dub"]
    duration_seconds: float | int = Field(alias="durationSeconds", ge=0, le=10 * 24 * 3600)
    target_lang: str | None = Field(None, alias="targetLang", max_length=40)
    targets: list[str] | None = Field(None, max_length=dub_jobs.MAX_TARGETS)
    source_lang: str = Field("auto", alias="sourceLang", max_length=40)


def dub_quote(body: bytes) -> bytes | None:
    """The quote of a dub when ``body`` asks for one (``product`` dub); None otherwise. 400 for a bad one."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("product") != "dub":
        return None
    req = parse_model(DubQuoteRequest, body, '{"product": "dub", "durationSeconds": 90, "targetLang": "es"}')
    wanted = dub_jobs.check_request(
        source_lang=req.source_lang,
        target_lang=req.target_lang,
        targets=req.targets,
        voice_id=None,
        voice_mode=None,
        clone_id=None,
    )
    quote = dub_jobs.dub_quote(round(float(req.duration_seconds) * 1000), len(wanted.targets))
    return json.dumps(quote.to_dict()).encode()


# ----- the route table's entries ----------------------------------------------------------------------------
def _routes() -> list[ApiRoute]:
    from dragoman.errors import (
        CloneNotFound,
        IdempotencyConflict,
        IdempotencyMismatch,
        InsufficientCredits,
        InvalidMediaUrl,
        InvalidWebhookUrl,
        LimitExceeded,
        MediaNotFound,
        MonthlyCapReached,
        PlanWithoutApi,
        RateLimited,
        Unauthorized,
        UnknownLanguage,
    )

    auth = (Unauthorized, PlanWithoutApi, RateLimited)
    routes = [
        ApiRoute(
            "/api/v1/dub",
            create,
            method="POST",
            request=DubCreateRequest,
            response=DubAccepted,
            response_description="202: the child jobs (one per target), the batch, the credits reserved",
            errors=(
                *auth,
                IdempotencyConflict,
                IdempotencyMismatch,
                InvalidRequest,
                UnknownLanguage,
                LimitExceeded,
                InvalidWebhookUrl,
                InvalidMediaUrl,
                MediaNotFound,
                CloneNotFound,
                InsufficientCredits,
                MonthlyCapReached,
            ),
        ),
        ApiRoute(
            "/api/v1/dub/{job_id}",
            status,
            method="GET",
            response=DubStatus,
            response_description="the dub job: the batch's stage while pending, then outputs and timings",
            errors=(*auth, JobNotFound),
        ),
    ]
    for segment, name in ARTIFACTS.items():
        subtitle = name in dub_jobs.SUBTITLE_FORMATS and name != "bilingual_srt"
        routes.append(
            ApiRoute(
                f"/api/v1/dub/{{job_id}}/{segment}",
                _download_for(segment),
                method="GET",
                response=bytes,
                response_description=f"the {segment} file (Content-Disposition: attachment)",
                errors=(*auth, InvalidRequest, UnknownLanguage, JobNotFound, RANGE_NOT_SATISFIABLE),
                query=[QueryParam("lang", str, "the target (default) or the source language")]
                if subtitle
                else [],
            )
        )
    return routes


ROUTES = _routes()

#: ``(path, method)`` of the routes above (all need a bearer key), for the OpenAPI document.
BEARER_ROUTES = frozenset((route.path, route.method.lower()) for route in ROUTES)


def openapi_fixups(paths: dict[str, Any]) -> None:
    """The 202, the Idempotency-Key header, the file answers and the quote's dub form."""
    operation = paths["/api/v1/dub"]["post"]
    operation.setdefault("parameters", []).append(
        {
            "name": "Idempotency-Key",
            "in": "header",
            "required": False,
            "description": "run this POST once within 24 hours (per key)",
            "schema": {"type": "string", "minLength": 1, "maxLength": idempotency.MAX_KEY_CHARS},
        }
    )
    operation["description"] = (
        "Credits: 150 per minute of media per target language, on the probed duration, pro-rata per "
        "second rounded up (recognition 30 + translation 60 + voice 60); each target's child reserves its "
        "share and is refunded if it fails or is canceled. The subtitle files of a dub are free. Webhooks: "
        "dub.done and dub.failed per child, batch.completed once per batch (targets). A url is not fetched "
        "in this request: the 202 comes at once (videoId, durationSeconds, perTarget and totalCredits null), "
        "the job downloads the media (stage fetching), reserves on its probed duration, and a failure there "
        "ends each child failed with error_code (invalid_media_url, media_fetch_failed, file_too_large, "
        "unsupported_media, insufficient_credits, ...), refunded."
    )
    responses = operation["responses"]
    if "200" in responses:
        responses["202"] = responses.pop("200")
    for segment, name in ARTIFACTS.items():
        operation = paths[f"/api/v1/dub/{{job_id}}/{segment}"]["get"]
        answer = operation["responses"]["200"]
        if name in dub_jobs.SUBTITLE_FORMATS:
            types = [dub_jobs.MEDIA_TYPES[name].split(";")[0]]
        elif name == "video":
            types = ["video/mp4", "video/x-matroska", "video/webm", "video/quicktime"]
        else:
            types = ["audio/mp4"]
        answer["content"] = {t: {"schema": {"type": "string", "format": "binary"}} for t in types}
        answer.setdefault("headers", {})["Content-Disposition"] = {
            "description": "attachment; filename=<name>.<lang>.<ext>",
            "schema": {"type": "string"},
        }
        openapi_ranged(operation, answer["content"])
    quote = paths["/api/v1/quote"]["post"]
    quote["description"] = (
        quote.get("description", "")
        + '\n\nDubbing: send `{"product": "dub", "durationSeconds": 90, "targets": ["es", "fr"]}` (or '
        "`targetLang`); the answer's breakdown has perTarget, targets and perMinute (150 credits a "
        "minute per target: caption 30 + translation 60 + voice 60, pro-rata per second rounded up)."
    )


__all__ = [
    "BEARER_ROUTES",
    "ROUTES",
    "DubAccepted",
    "DubCreateRequest",
    "DubStatus",
    "create",
    "dub_quote",
    "status",
]
