"""Hosted v1 subtitles (spec 2.9, 4.3, 6 and 8; issue 15): ``/api/v1/subtitles*`` on the job machinery
(:mod:`dragoman.service.subtitle_jobs`, :mod:`dragoman.service.media_store`).

* ``POST /api/v1/subtitles/upload``: the raw media bytes as the body (any ``Content-Type``; 200 MB, 413
  past it), headers ``x-filename`` (the client's file name; percent-encoding is decoded) and ``x-video-mime``
  (declared type: recorded, not trusted: the content is probed). Answers ``video_id``, ``duration_seconds``
  (probed), ``size_bytes`` (and ``filename``, ``expires_at``). 415 ``unsupported_media`` for a body that is
  not media, 422 ``no_audio_stream`` / ``empty_media``.
* ``POST /api/v1/subtitles/create``: JSON ``videoId``, ``durationSeconds`` (must match the probed duration
  within max(1 s, 2 %): 400 ``duration_mismatch``), ``sourceLang`` (``auto`` or BCP-47, default ``auto``),
  ``targetLangs`` (empty: caption-only), ``originalFileName`` (download names), ``webhook`` (optional
  override). 202 with ``batchId``, ``jobIds``, ``mode``, ``perChild``, ``totalCredits`` (and
  ``captionCredits``, ``durationSeconds``, ``pollUrls``). 404 ``media_not_found`` for an unknown upload or
  another account's; 402 when the batch cannot be paid in full.
* ``GET /api/v1/subtitles/{job_id}/status``: :class:`SubtitleStatus` (the spec leaves it open).
* ``GET /api/v1/subtitles/{job_id}/download/{fmt}?lang=``: the file, ``Content-Disposition: attachment;
  filename="<stem>.<lang>.<ext>"`` from ``originalFileName`` (``<stem>.<src>-<tgt>.srt`` for bilingual_srt);
  one byte range (``Range``) gets a 206, past the end a 416, ``HEAD`` the headers alone (:mod:`._ranges`).
* ``POST /api/v1/subtitles``: upload and create in one call: the raw body and headers of ``upload``, the
  fields of ``create`` as query parameters (``sourceLang``, ``targetLangs`` comma-separated,
  ``originalFileName`` (default ``x-filename``), ``durationSeconds`` (optional: checked when given),
  ``webhook``). 202 with the create answer plus ``video_id``, ``duration_seconds``, ``size_bytes``. When the
  batch is refused (400, 402) the upload is deleted again.

Every POST takes ``Idempotency-Key`` (the fingerprint of an upload is its bytes' sha256 with its headers and
query). Cancel a child with ``DELETE /api/v1/jobs/{id}`` (its reservation refunded; siblings continue).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote

import anyio
import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from dragoman.errors import FileTooLarge, InvalidRequest
from dragoman.limits import MAX_FILE_BYTES
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
from dragoman.service import idempotency, jobs, media_store, subtitle_jobs
from dragoman.service.usage import iso_ms

if TYPE_CHECKING:
    from dragoman.service.accounts import KeyInfo
    from dragoman.service.db import Database
    from dragoman.service.media_store import MediaRecord
    from dragoman.service.storage import Storage

_CREATE_EXAMPLE = '{"videoId": "<video_id>", "durationSeconds": 12.5, "targetLangs": ["es"]}'
#: Bytes an upload may have (spec 8: 200 MB; 413 past it).
MAX_UPLOAD_BYTES = MAX_FILE_BYTES
#: Bytes written to the spool file at a time (the body arrives in chunks of ~64 KB).
_SPOOL_CHUNK = 1024 * 1024


# ----- wire models --------------------------------------------------------------------------------------
class UploadResponse(BaseModel):
    """The upload (spec 2.9): reusable by subtitle and dub jobs of the account for 7 days."""

    video_id: str
    duration_seconds: float = Field(description="probed duration: what credits use")
    size_bytes: int
    filename: str = Field(description="x-filename as recorded (base name, control characters removed)")
    has_video: bool
    expires_at: str = Field(description="ISO 8601 UTC: the upload is deleted after this")


class CreateRequest(BaseModel):
    """The body of ``POST /api/v1/subtitles/create`` (spec 4.3)."""

    model_config = ConfigDict(strict=True, extra="forbid", populate_by_name=False)

    video_id: str = Field(alias="videoId", max_length=100, description="an upload's video_id")
    duration_seconds: float | int = Field(
        alias="durationSeconds", description="the media's duration; must match the probe within max(1 s, 2%)"
    )
    source_lang: str = Field("auto", alias="sourceLang", max_length=40, description="'auto' or BCP-47")
    target_langs: list[str] | None = Field(
        None, alias="targetLangs", max_length=64, description="BCP-47 codes; empty or omitted: caption-only"
    )
    original_file_name: str | None = Field(
        None, alias="originalFileName", max_length=1000, description="used in downloaded file names"
    )
    webhook: str | None = Field(None, max_length=2048, description="overrides the key's webhook URL")


class CreateResponse(BaseModel):
    """202: the batch is queued (spec 2.9); poll any child (``pollUrls``) or await the webhooks."""

    model_config = ConfigDict(populate_by_name=True)

    batch_id: str = Field(alias="batchId")
    job_ids: list[str] = Field(alias="jobIds", description="the children: one per target, or one caption job")
    mode: Literal["caption", "translate"]
    per_child: int = Field(alias="perChild", description="credits each child reserves")
    total_credits: int = Field(alias="totalCredits", description="all the batch reserves")
    caption_credits: int = Field(alias="captionCredits", description="the recognition charge (30/min)")
    duration_seconds: float = Field(alias="durationSeconds", description="the probed duration billed")
    source_lang: str = Field(alias="sourceLang")
    target_langs: list[str] = Field(alias="targetLangs")
    poll_urls: list[str] = Field(alias="pollUrls", description="status URL of each child")


class OneCallResponse(CreateResponse):
    """202 of ``POST /api/v1/subtitles``: the create answer and the upload's fields."""

    video_id: str
    size_bytes: int


class SubtitleStatus(BaseModel):
    """A subtitle job (spec 2.9: "fields not shown"; this is the contract). Polling any child reflects the
    whole batch: while the child is pending, ``status``, ``stage`` and ``progress_percent`` are the batch's
    (the shared recognition run); once it ended they are its own.

    ``stage``: queued, recognising, captioning, translating, then done / failed / canceled. ``source_lang``
    is the detected language once recognised (the given one before, null for ``auto``). ``credits`` is null
    until the job ends (charged when done; 0 when refunded). ``downloads`` maps each format to its URL once
    done (``?lang=`` picks the source or the target language)."""

    job_id: str
    batch_id: str | None
    status: Literal["queued", "active", "done", "failed", "canceled"]
    mode: Literal["caption", "translate"]
    stage: str
    progress_percent: int = Field(ge=0, le=100)
    source_lang: str | None
    target_lang: str | None
    language_probability: float | None = None
    duration_seconds: float
    credits: int | None
    credits_reserved: int
    error: str | None = None
    downloads: dict[str, str] = Field(default_factory=dict)
    languages: list[str] = Field(default_factory=list, description="languages downloadable (?lang=)")
    batch: dict[str, int] = Field(default_factory=dict, description="children by status")
    original_file_name: str | None = None
    created_at: str
    elapsed_seconds: float


# ----- reading the raw body -----------------------------------------------------------------------------
@dataclass
class Spooled:
    """A raw body spooled to a private temporary file while it arrived (bounded, hashed)."""

    path: Path
    size: int
    sha256: str
    filename: str
    declared_mime: str

    def close(self) -> None:
        self.path.unlink(missing_ok=True)


def _header_name(request: Request) -> str:
    raw = request.headers.get("x-filename") or ""
    try:
        decoded = unquote(raw, errors="strict")
    except UnicodeDecodeError:
        decoded = raw
    return media_store.clean_filename(decoded)


async def spool_body(request: Request, limit: int | None = None) -> Spooled:
    """The raw body in a temporary file under the app's ``tmp_dir``: 413 past ``limit`` (default
    :data:`MAX_UPLOAD_BYTES`; at once when the Content-Length says so), 400 for an empty body or a client
    that left."""
    limit = MAX_UPLOAD_BYTES if limit is None else limit
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise FileTooLarge(f"the upload is over the {limit:,} byte limit (200 MB)")
    tmp_dir: Path = request.app.state.tmp_dir
    tmp_dir.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix="media-", dir=tmp_dir)
    path = Path(name)
    digest = hashlib.sha256()
    size = 0
    pending: list[bytes] = []
    pending_size = 0
    try:
        with os.fdopen(handle, "wb") as out:
            async for chunk in request.stream():
                if not chunk:
                    continue
                size += len(chunk)
                if size > limit:
                    raise FileTooLarge(f"the upload is over the {limit:,} byte limit (200 MB)")
                digest.update(chunk)
                pending.append(chunk)
                pending_size += len(chunk)
                if pending_size >= _SPOOL_CHUNK:
                    block, pending, pending_size = b"".join(pending), [], 0
                    await anyio.to_thread.run_sync(out.write, block)
            if pending:
                await anyio.to_thread.run_sync(out.write, b"".join(pending))
    except ClientDisconnect:
        path.unlink(missing_ok=True)
        raise InvalidRequest("the client went away before the upload ended") from None
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    if size == 0:
        path.unlink(missing_ok=True)
        raise InvalidRequest("the body is empty: send the media file's bytes as the request body")
    mime = media_store.clean_mime(request.headers.get("x-video-mime"))
    return Spooled(path, size, digest.hexdigest(), _header_name(request), mime)


def _upload_print(request: Request, spooled: Spooled, extra: Any = None) -> str:
    parts = {
        "sha256": spooled.sha256,
        "filename": spooled.filename,
        "mime": spooled.declared_mime,
        "query": sorted(request.query_params.multi_items()),
        "extra": extra,
    }
    return idempotency.fingerprint(request.method, request.url.path, json.dumps(parts).encode())


def _store(request: Request, key: KeyInfo, spooled: Spooled) -> MediaRecord:
    state = request.app.state
    return media_store.store_upload(
        state.db,
        state.storage,
        key,
        spooled.path,
        filename=spooled.filename,
        declared_mime=spooled.declared_mime,
        settings=state.settings.hosted,
    )


def _upload_response(record: MediaRecord) -> UploadResponse:
    return UploadResponse(
        video_id=record.id,
        duration_seconds=record.duration_seconds,
        size_bytes=record.size_bytes,
        filename=record.filename,
        has_video=bool(record.info.get("has_video")),
        expires_at=iso_ms(record.expires_ms),
    )


# ----- POST /api/v1/subtitles/upload ------------------------------------------------------------------------
async def upload(request: Request) -> Response:
    """Upload media (raw body; x-filename, x-video-mime): video_id, probed duration_seconds, size_bytes."""
    key = await authenticate(request)
    spooled = await spool_body(request)
    try:

        async def run(reservation: Reservation | None) -> Response:
            record = await anyio.to_thread.run_sync(_store, request, key, spooled)
            return model_response(_upload_response(record))

        return await idempotent(request, key, _upload_print(request, spooled), run)
    finally:
        await anyio.to_thread.run_sync(spooled.close)


# ----- POST /api/v1/subtitles/create ------------------------------------------------------------------------
def status_url(request: Request, job_id: str) -> str:
    return f"{base_url(request)}/api/v1/subtitles/{job_id}/status"


def _create(
    request: Request,
    key: KeyInfo,
    record: MediaRecord,
    fields: CreateRequest,
    webhook: str | None,
    reservation: Reservation | None,
    extra: dict[str, Any] | None = None,
) -> Response:
    state = request.app.state
    db: Database = state.db
    with db.write() as conn:
        made = subtitle_jobs.submit(
            conn,
            db,
            key,
            record,
            duration_seconds=fields.duration_seconds,
            source_lang=fields.source_lang,
            target_langs=fields.target_langs,
            original_filename=fields.original_file_name or record.filename,
            webhook_url=webhook,
            base_url=base_url(request),
        )
        state.dispatch.submitted(conn, [made.engine])
        answer: dict[str, Any] = {
            "batchId": made.batch_id,
            "jobIds": [child.id for child in made.children],
            "mode": made.mode,
            "perChild": made.quote.per_child,
            "totalCredits": made.quote.total,
            "captionCredits": made.quote.caption,
            "durationSeconds": record.duration_seconds,
            "sourceLang": str(made.engine.params.get("source_lang")),
            "targetLangs": list(made.engine.params.get("targets") or []),
            "pollUrls": [status_url(request, child.id) for child in made.children],
        }
        body: BaseModel
        if extra is not None:
            body = OneCallResponse.model_validate({**answer, **extra})
        else:
            body = CreateResponse.model_validate(answer)
        response = accepted(conn, body, reservation)
    state.dispatch.committed()
    return response


async def create(request: Request) -> Response:
    """Create subtitle jobs for an upload: batchId, jobIds, mode, perChild, totalCredits (202)."""
    key = await authenticate(request)
    body = await read_limited(request, MAX_SMALL_BODY_BYTES)
    body_print = idempotency.fingerprint(request.method, request.url.path, body)

    async def run(reservation: Reservation | None) -> Response:
        fields = parse_model(CreateRequest, body, _CREATE_EXAMPLE)
        webhook = await anyio.to_thread.run_sync(check_webhook, request, fields.webhook)
        record = await anyio.to_thread.run_sync(
            media_store.get, request.app.state.db, key.account_id, fields.video_id
        )
        return await anyio.to_thread.run_sync(_create, request, key, record, fields, webhook, reservation)

    return await idempotent(request, key, body_print, run)


# ----- POST /api/v1/subtitles (one call) --------------------------------------------------------------------
_ONE_CALL_QUERY = ("sourceLang", "targetLangs", "originalFileName", "durationSeconds", "webhook")


def _one_call_fields(request: Request, filename: str) -> CreateRequest:
    query = request.query_params
    unknown = sorted(set(query) - set(_ONE_CALL_QUERY))
    if unknown:
        raise InvalidRequest(
            f"unknown query parameter {unknown[0][:40]!r}; allowed: {', '.join(_ONE_CALL_QUERY)}"
        )
    targets = [t.strip() for item in query.getlist("targetLangs") for t in item.split(",") if t.strip()]
    duration: float = -1.0
    raw = query.get("durationSeconds")
    if raw is not None:
        try:
            duration = float(raw)
        except ValueError:
            duration = -1.0
        if not duration >= 0:  # NaN too
            raise InvalidRequest(f"durationSeconds must be a number of seconds, not {raw[:40]!r}")
    fields = {
        "videoId": "-",
        "durationSeconds": duration,
        "sourceLang": query.get("sourceLang") or "auto",
        "targetLangs": targets,
        "originalFileName": query.get("originalFileName") or filename or None,
        "webhook": query.get("webhook"),
    }
    return CreateRequest.model_validate(fields)


async def one_call(request: Request) -> Response:
    """Upload and create in one call: raw body as for upload, create's fields as query parameters (202)."""
    key = await authenticate(request)
    try:
        fields = _one_call_fields(request, _header_name(request))
        subtitle_jobs.languages(fields.source_lang, fields.target_langs)  # 400 before the body is read
    except InvalidRequest:
        raise
    except Exception as exc:  # pydantic's ValidationError: a bad query value
        raise InvalidRequest(f"invalid query parameters: {exc}"[:500]) from None
    webhook = await anyio.to_thread.run_sync(check_webhook, request, fields.webhook)
    spooled = await spool_body(request)
    try:

        async def run(reservation: Reservation | None) -> Response:
            record = await anyio.to_thread.run_sync(_store, request, key, spooled)
            given = fields.duration_seconds if fields.duration_seconds >= 0 else record.duration_seconds
            chosen = fields.model_copy(update={"duration_seconds": given})
            extra = {"video_id": record.id, "size_bytes": record.size_bytes}
            try:
                return await anyio.to_thread.run_sync(
                    _create, request, key, record, chosen, webhook, reservation, extra
                )
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(_forget, request, record)
                raise

        return await idempotent(request, key, _upload_print(request, spooled), run)
    finally:
        await anyio.to_thread.run_sync(spooled.close)


def _forget(request: Request, record: MediaRecord) -> None:
    """Delete an upload whose batch was refused (the one-call route: the client never saw its id)."""
    state = request.app.state
    media_store.delete(state.db, state.storage, record)


# ----- GET /api/v1/subtitles/{job_id}/status ---------------------------------------------------------------
def _status(request: Request, key: KeyInfo) -> SubtitleStatus:
    found = subtitle_jobs.view(request.app.state.db, key.key_id, request.path_params["job_id"])
    job = found.job
    mode = str(job.params.get("mode") or subtitle_jobs.CAPTION)
    done = job.status == jobs.DONE
    summary = subtitle_jobs.summary(job) or (subtitle_jobs.summary(found.engine) if found.engine else {})
    probability = summary.get("language_probability")
    base = f"{base_url(request)}/api/v1/subtitles/{job.id}/download"
    formats = [f for f in subtitle_jobs.FORMATS if f != "bilingual_srt" or job.params.get("target_lang")]
    counts: dict[str, int] = {}
    for child in found.children:
        counts[child.status] = counts.get(child.status, 0) + 1
    langs = sorted({name.split(":", 1)[1] for name in job.artifacts if ":" in name}) if done else []
    return SubtitleStatus(
        job_id=job.id,
        batch_id=job.batch_id,
        status=found.status,  # type: ignore[arg-type]
        mode=mode,  # type: ignore[arg-type]
        stage=found.stage,
        progress_percent=found.progress_percent,
        source_lang=found.source_lang,
        target_lang=job.params.get("target_lang"),
        language_probability=probability if isinstance(probability, int | float) else None,
        duration_seconds=int(job.params.get("duration_ms") or 0) / 1000,
        credits=job.credits,
        credits_reserved=job.credits_reserved,
        error=job.error if job.status == jobs.FAILED else None,
        downloads={f: f"{base}/{f}" for f in formats} if done else {},
        languages=langs,
        batch=counts,
        original_file_name=job.params.get("original_filename"),
        created_at=iso_ms(job.created_ms),
        elapsed_seconds=round(job.elapsed_seconds(), 3),
    )


async def status(request: Request) -> Response:
    """A subtitle job: the batch's stage and progress while pending, then its own end and downloads."""
    key = await authenticate(request)
    return model_response(await anyio.to_thread.run_sync(_status, request, key))


# ----- GET /api/v1/subtitles/{job_id}/download/{fmt} --------------------------------------------------------
async def download(request: Request) -> Response:
    """A done subtitle job's file: srt, vtt, txt or bilingual_srt (?lang= source or target)."""
    key = await authenticate(request)
    state = request.app.state
    unknown = sorted(set(request.query_params) - {"lang"})
    if unknown:
        raise InvalidRequest(f"unknown query parameter {unknown[0][:40]!r}; allowed: lang")
    job = await anyio.to_thread.run_sync(jobs.get, state.db, key.key_id, request.path_params["job_id"])
    if job.kind != subtitle_jobs.KIND or job.params.get("role") == subtitle_jobs.ROLE_ENGINE:
        from dragoman.errors import JobNotFound

        raise JobNotFound(f"no subtitle job {job.id}")
    fmt = request.path_params["fmt"]
    stored, lang = subtitle_jobs.artifact(job, fmt, request.query_params.get("lang"))
    name = subtitle_jobs.download_name(job, fmt, lang)
    storage: Storage = state.storage
    try:
        size = await anyio.to_thread.run_sync(storage.size, stored)
    except FileNotFoundError:
        from dragoman.errors import JobNotFound

        raise JobNotFound(f"the {fmt} file of job {job.id} is no longer kept (results: 30 days)") from None
    return file_response(  # one byte range gets a 206, past the end a 416 (see _ranges, as the dub files)
        request,
        storage,
        stored,
        size,
        media_type=subtitle_jobs.MEDIA_TYPES[fmt],
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


# ----- POST /api/v1/quote with product "caption" -----------------------------------------------------------
#: ``product`` values that ask ``/api/v1/quote`` for a subtitle batch.
CAPTION_PRODUCTS = frozenset({"caption", "subtitle", "subtitles"})


class CaptionQuoteRequest(BaseModel):
    """``POST /api/v1/quote`` for subtitles: what a batch over media of ``durationSeconds`` reserves (the
    job bills the probed duration, which must agree within max(1 s, 2 %))."""

    model_config = ConfigDict(strict=True, extra="forbid", populate_by_name=False)

    product: Literal["caption", "subtitle", "subtitles"]
    duration_seconds: float | int = Field(alias="durationSeconds", ge=0, le=10 * 24 * 3600)
    target_langs: list[str] | None = Field(None, alias="targetLangs", max_length=64)
    source_lang: str = Field("auto", alias="sourceLang", max_length=40)


def caption_quote(body: bytes) -> bytes | None:
    """The quote of a subtitle batch when ``body`` asks for one (``product`` caption); None otherwise (a
    translation quote). 400 for a bad caption request."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("product") not in CAPTION_PRODUCTS:
        return None
    req = parse_model(CaptionQuoteRequest, body, '{"product": "caption", "durationSeconds": 90}')
    _, targets = subtitle_jobs.languages(req.source_lang, req.target_langs)
    quote = subtitle_jobs.subtitle_quote(round(float(req.duration_seconds) * 1000), len(targets))
    return json.dumps(quote.to_dict()).encode()


# ----- the route table's entries (:data:`dragoman.server.hosted.app.ROUTES`) --------------------------------
def _routes() -> list[ApiRoute]:
    from dragoman.errors import (
        DurationMismatch,
        EmptyMedia,
        IdempotencyConflict,
        IdempotencyMismatch,
        InsufficientCredits,
        InvalidWebhookUrl,
        JobNotFound,
        LimitExceeded,
        MediaFormatError,
        MediaNotFound,
        MonthlyCapReached,
        NoAudioStream,
        PlanWithoutApi,
        RateLimited,
        Unauthorized,
        UnknownLanguage,
    )

    auth = (Unauthorized, PlanWithoutApi, RateLimited)
    media_errors = (InvalidRequest, FileTooLarge, MediaFormatError, NoAudioStream, EmptyMedia)
    create_errors = (
        InvalidRequest,
        DurationMismatch,
        UnknownLanguage,
        LimitExceeded,
        InvalidWebhookUrl,
        MediaNotFound,
        InsufficientCredits,
        MonthlyCapReached,
    )
    idem = (IdempotencyConflict, IdempotencyMismatch)
    return [
        ApiRoute(
            "/api/v1/subtitles/upload",
            upload,
            method="POST",
            response=UploadResponse,
            response_description="the upload: video_id, probed duration_seconds, size_bytes",
            errors=(*auth, *idem, *media_errors),
        ),
        ApiRoute(
            "/api/v1/subtitles/create",
            create,
            method="POST",
            request=CreateRequest,
            response=CreateResponse,
            response_description="202: batchId, jobIds, mode, perChild, totalCredits",
            errors=(*auth, *idem, *create_errors),
        ),
        ApiRoute(
            "/api/v1/subtitles",
            one_call,
            method="POST",
            response=OneCallResponse,
            response_description="202: the upload and the batch in one answer",
            errors=(*auth, *idem, *media_errors, *create_errors),
            query=[
                QueryParam("sourceLang", str, "'auto' (default) or a BCP-47 code"),
                QueryParam("targetLangs", str, "comma-separated BCP-47 codes; none: caption-only"),
                QueryParam("originalFileName", str, "used in download names (default: x-filename)"),
                QueryParam("durationSeconds", float, "optional; checked against the probe when given"),
                QueryParam("webhook", str, "overrides the key's webhook URL"),
            ],
        ),
        ApiRoute(
            "/api/v1/subtitles/{job_id}/status",
            status,
            method="GET",
            response=SubtitleStatus,
            response_description="the job: the batch's stage while pending, then its end and downloads",
            errors=(*auth, JobNotFound),
        ),
        ApiRoute(
            "/api/v1/subtitles/{job_id}/download/{fmt}",
            download,
            method="GET",
            response=bytes,
            response_description="the subtitle file (Content-Disposition: attachment)",
            errors=(*auth, InvalidRequest, UnknownLanguage, JobNotFound, RANGE_NOT_SATISFIABLE),
            query=[QueryParam("lang", str, "the source or the target language (default: the job's own)")],
        ),
    ]


ROUTES = _routes()

#: ``(path, method)`` of the routes above that need a bearer key (all of them), for the OpenAPI document.
BEARER_ROUTES = frozenset((route.path, route.method.lower()) for route in ROUTES)


def openapi_fixups(paths: dict[str, Any]) -> None:
    """The raw bodies, headers, 202s, path parameters and file answers the route table cannot state."""
    raw = {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}
    headers = [
        {"name": "x-filename", "in": "header", "required": False, "schema": {"type": "string"},
         "description": "the file's name (percent-encode non-ASCII)"},
        {"name": "x-video-mime", "in": "header", "required": False, "schema": {"type": "string"},
         "description": "the declared type (recorded; the content is probed)"},
    ]  # fmt: skip
    idem = {
        "name": "Idempotency-Key",
        "in": "header",
        "required": False,
        "description": "run this POST once within 24 hours (per key)",
        "schema": {"type": "string", "minLength": 1, "maxLength": idempotency.MAX_KEY_CHARS},
    }
    for path in ("/api/v1/subtitles/upload", "/api/v1/subtitles"):
        operation = paths[path]["post"]
        operation["requestBody"] = {"required": True, "content": dict(raw)}
        operation.setdefault("parameters", []).extend([*headers, idem])
    paths["/api/v1/subtitles/create"]["post"].setdefault("parameters", []).append(idem)
    for path in ("/api/v1/subtitles/create", "/api/v1/subtitles"):
        responses = paths[path]["post"]["responses"]
        if "200" in responses:
            responses["202"] = responses.pop("200")
    quote = paths["/api/v1/quote"]["post"]
    quote["description"] = (
        quote.get("description", "")
        + '\n\nSubtitles: send `{"product": "caption", "durationSeconds": 90, "targetLangs": ["es"]}`; the '
        "answer's breakdown has mode, captionCredits, perChild and targets (spec 8: 30 credits a minute for "
        "captions, 60 a minute per target, pro-rata per second rounded up; bilingual SRT free)."
    )
    download_op = paths["/api/v1/subtitles/{job_id}/download/{fmt}"]["get"]
    download_op.setdefault("parameters", []).append(
        {"name": "fmt", "in": "path", "required": True, "schema": {"enum": list(subtitle_jobs.FORMATS)}}
    )
    answer = download_op["responses"]["200"]
    answer["content"] = {
        mime.split(";")[0]: {"schema": {"type": "string"}}
        for mime in dict.fromkeys(subtitle_jobs.MEDIA_TYPES.values())
    }
    answer.setdefault("headers", {})["Content-Disposition"] = {
        "description": "attachment; filename=<stem>.<lang>.<ext> (from originalFileName)",
        "schema": {"type": "string"},
    }
    openapi_ranged(download_op, answer["content"])


__all__ = [
    "BEARER_ROUTES",
    "ROUTES",
    "CreateRequest",
    "CreateResponse",
    "OneCallResponse",
    "SubtitleStatus",
    "UploadResponse",
    "create",
    "download",
    "one_call",
    "status",
    "upload",
]
