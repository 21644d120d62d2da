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
"""

from __future__ import annotations

import functools
import json
import logging
import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread
from pydantic import TypeAdapter
from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Message, Receive

from dragoman import __version__
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
)
from dragoman.languages import catalogue
from dragoman.limits import MAX_FILE_BYTES, MAX_LOCAL_BODY_BYTES, RATE_PER_MINUTE, SYNC_TEXT_CHARS
from dragoman.server._http import (
    JSON,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    UNEXPECTED,
    ApiRoute,
    EnginePool,
    QueryParam,
    exception_handlers,
    model_response,
    openapi_document,
    read_body,
)
from dragoman.server._wire import (
    BatchResponse,
    LanguageRow,
    TranslateRequest,
    TranslationResultModel,
    glossary_entries,
    parse_translate,
)
from dragoman.server.daemon.app import AllFlag, _checked
from dragoman.server.daemon.app import languages as daemon_languages
from dragoman.server.hosted._gate import HostedMiddleware, RequestTally, Reservation, authenticate, idempotent
from dragoman.server.hosted._models import (
    AcceptedResponse,
    BatchAcceptedResponse,
    CancelResponse,
    DailyQuota,
    HostedErrorBody,
    JobListItem,
    JobListResponse,
    JobResponse,
    QuoteBreakdown,
    QuoteRequest,
    QuoteResponse,
    RateLimitHeadroom,
    SyncTranslateResponse,
    UsageDay,
    UsageResponse,
    V1LanguageRow,
    V1TranslateRequest,
    parse_quote,
    parse_translate_v1,
    target_list,
)
from dragoman.service import accounts, billing, idempotency, jobs, netguard, usage
from dragoman.service.db import Database, now_ms
from dragoman.service.ratelimit import RateLimiter
from dragoman.service.storage import Storage, safe_name
from dragoman.service.usage import iso_ms
from dragoman.translation.types import TranslateOptions

if TYPE_CHECKING:
    from dragoman.service.accounts import KeyInfo
    from dragoman.service.jobs import Handler, JobRecord
    from dragoman.settings import Settings
    from dragoman.translation.engine import Engine

log = logging.getLogger("dragoman.server.hosted")

#: Bytes of a v1 JSON translate body: a text of 1,000,000 characters (spec 8: 1 MB) may take up to 6 bytes
#: a character once JSON-escaped, plus a glossary.
MAX_V1_JSON_BYTES = 8 * 1024 * 1024
#: Bytes of a quote body, and of each non-file field of a multipart form.
MAX_SMALL_BODY_BYTES = 64 * 1024
#: Bytes of a multipart body: the file (200 MB) and its few fields.
MAX_MULTIPART_BYTES = MAX_FILE_BYTES + 1024 * 1024
_COPY_CHUNK = 1024 * 1024

EXPORT_TYPES: Mapping[str, str] = {
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pdf": "application/pdf",
}


# ----- helpers -----------------------------------------------------------------------------------------
def base_url(request: Request) -> str:
    """Where absolute URLs start: ``DRAGOMAN_BASE_URL``, else the URL this request came to."""
    configured = request.app.state.settings.hosted.base_url
    return (configured or str(request.base_url)).rstrip("/")


def job_url(request: Request, job_id: str) -> str:
    return f"{base_url(request)}/api/v1/jobs/{job_id}"


def job_response(request: Request, job: JobRecord) -> JobResponse:
    url = job_url(request, job.id)
    done = job.status == jobs.DONE
    return JobResponse(
        job_id=job.id,
        status=job.status,  # type: ignore[arg-type]
        sync=job.sync,
        poll_url=url,
        progress_percent=100 if done else job.progress_percent,
        credits=job.credits,
        elapsed_seconds=round(job.elapsed_seconds(), 3),
        title=job.title,
        created_at=iso_ms(job.created_ms),
        result=job.result if done else None,
        error=job.error if job.status == jobs.FAILED else None,
        export_docx=f"{url}/export/docx" if done and "docx" in job.artifacts else None,
        export_pdf=f"{url}/export/pdf" if done and "pdf" in job.artifacts else None,
        batch_id=job.batch_id,
    )


def _title(text: str) -> str:
    line = " ".join(text.split())
    return line[:77] + "..." if len(line) > 80 else line


async def _read(request: Request, limit: int) -> bytes:
    try:
        return await read_body(request, limit)
    except BodyTooLarge:
        raise BodyTooLarge(f"the body is over this route's {limit:,} byte limit; send less") from None


def _check_webhook(request: Request, url: str | None) -> str | None:
    if url is None:
        return None
    return netguard.check_url(url, allow_private=request.app.state.settings.hosted.webhooks_allow_private)


# ----- v2 (spec 4.4): the daemon's contract, provenance 'server', a key and a daily quota ------------------
@dataclass(frozen=True)
class _V2Admitted:
    """A v2 request past its checks: the key, the parsed request, its texts and the quota characters taken
    (at ``taken_ms``, so that a failure gives them back to the same UTC day)."""

    key: KeyInfo
    req: TranslateRequest
    texts: list[str]
    chars: int
    taken_ms: int


def _v2_take(db: Database, key: KeyInfo, body: bytes) -> _V2Admitted:
    """400 (the body), then 429 (the day's quota: one atomic statement, :func:`usage.add_v2_chars`)."""
    req = parse_translate(body)
    texts = [req.text] if req.text is not None else list(req.texts or [])
    chars = sum(len(t) for t in texts)
    taken_ms = now_ms()
    usage.add_v2_chars(db, key, chars, at_ms=taken_ms)
    return _V2Admitted(key, req, texts, chars, taken_ms)


def _v2_key(state: Any, header: str | None) -> KeyInfo:
    """401, 403; the request is counted in the key's usage of the day."""
    key = accounts.authenticate(state.db, header)
    state.tally.add(key.key_id)
    return key


def _v2_admit(state: Any, header: str | None, body: bytes, unread: DragomanError | None) -> _V2Admitted:
    """The checks of a request without an Idempotency-Key, in the order they always have (401, 403, then
    the body's 413/400, then 429), in one hop to a worker thread instead of two."""
    key = _v2_key(state, header)
    if unread is not None:
        raise unread
    return _v2_take(state.db, key, body)


async def translate_v2(request: Request) -> Response:
    """Translate one text or a batch (the local daemon's contract; provenance 'server')."""
    state = request.app.state
    header = request.headers.get("authorization")
    if "idempotency-key" not in request.headers:
        # The body (at most MAX_LOCAL_BODY_BYTES) is read before the key is checked, so that key, body and
        # quota are checked in one thread hop; an error reading it is raised after the key's 401/403.
        body, unread = b"", None
        try:
            body = await _read(request, MAX_LOCAL_BODY_BYTES)
        except (BodyTooLarge, InvalidRequest) as exc:
            unread = exc
        admitted = await anyio.to_thread.run_sync(_v2_admit, state, header, body, unread)
        return await _translate_v2(request, admitted)
    key = await anyio.to_thread.run_sync(_v2_key, state, header)
    body = await _read(request, MAX_LOCAL_BODY_BYTES)
    body_print = idempotency.fingerprint(request.method, request.url.path, body)

    async def run(reservation: Reservation | None) -> Response:
        admitted = await anyio.to_thread.run_sync(_v2_take, state.db, key, body)
        return await _translate_v2(request, admitted)

    return await idempotent(request, key, body_print, run)


def _work_not_done(exc: BaseException) -> bool:
    """An engine failure answered with a 5xx (or an unexpected error, answered 502): no translation was
    handed out, so the quota's characters go back. Not a cancellation: the engine may still finish."""
    if isinstance(exc, DragomanError):
        return exc.status >= 500
    return isinstance(exc, Exception)


async def _translate_v2(request: Request, admitted: _V2Admitted) -> Response:
    state = request.app.state
    req, texts = admitted.req, admitted.texts
    engine: Engine = state.engine
    pool: EnginePool = state.pool
    try:
        options = TranslateOptions(
            req.target, req.source, req.tier, tuple(glossary_entries(req.glossary) or ())
        )
        if req.text is not None:
            text = req.text
            one = await pool.run(lambda context: engine.translate(text, options, context=context))
            _checked([text], [one])
            return model_response(TranslationResultModel.from_result(one))
        results = await pool.run(lambda context: engine.translate_batch(texts, options, context=context))
        _checked(texts, results)
        return model_response(BatchResponse.from_results(results))
    except BaseException as exc:
        if admitted.chars and _work_not_done(exc):
            give_back = functools.partial(
                usage.give_back_v2_chars, state.db, admitted.key, admitted.chars, at_ms=admitted.taken_ms
            )
            with anyio.CancelScope(shield=True):
                try:
                    await anyio.to_thread.run_sync(give_back)
                except Exception:  # the engine's error is the answer; this one is only logged
                    log.exception("v2 quota characters of a failed request could not be given back")
        raise


# ----- v1 languages and quote (no key) ---------------------------------------------------------------------
@cache
def _native_name(bcp47: str, name: str) -> str:
    try:
        import langcodes

        native = str(langcodes.Language.get(bcp47).autonym())
    except Exception:  # langcodes' data may lack a language: the English name stands in
        return name
    return native or name


@cache
def v1_language_rows() -> bytes:
    rows: list[V1LanguageRow] = []
    languages = catalogue.all_languages()
    by_lang3: dict[str, list[str]] = {}
    for lang in languages:
        by_lang3.setdefault(lang.flores[:3], []).append(lang.flores)
    for lang in languages:
        tier = billing.lang_tier(lang.flores)
        short = lang.bcp47.split("-", 1)[0]
        code = lang.bcp47 if len(by_lang3[lang.flores[:3]]) > 1 or len(short) != 2 else short
        rows.append(
            V1LanguageRow(
                code=code,
                flores=lang.flores,
                bcp47=lang.bcp47,
                name=lang.name,
                native_name=_native_name(lang.bcp47, lang.name),
                script=lang.flores.split("_", 1)[1],
                rtl=lang.rtl,
                variants=[f for f in by_lang3[lang.flores[:3]] if f != lang.flores],
                tier=tier,  # type: ignore[arg-type]
                credit_multiplier=tier,
            )
        )
    return TypeAdapter(list[V1LanguageRow]).dump_json(rows)


async def languages_v1(request: Request) -> Response:
    """Every language with its codes, native name, script variants and credit tier multiplier."""
    return Response(v1_language_rows(), media_type=JSON)


def _quote_sync(body: bytes) -> QuoteResponse:
    req = parse_quote(body)
    tgt = target_list(req.tgt, req.target, None)[0]
    chars = (
        req.chars if req.chars is not None else billing.estimate_chars(req.file_bytes or 0, req.mime or "")
    )
    quote = billing.translation_quote(chars, req.src, tgt)
    breakdown = QuoteBreakdown(chars=quote.chars, src=quote.src, tgt=quote.tgt, langTier=quote.lang_tier)
    return QuoteResponse(credits=quote.credits, breakdown=breakdown)


def _quote_file(upload: _Upload) -> QuoteResponse:
    """The quote of a file sent as multipart (``file``, ``src``, ``tgt``): its characters counted."""
    from dragoman.service.translation_jobs import count_document_chars

    fields = upload.fields
    unknown = sorted(set(fields) - {"src", "tgt", "target"})
    if unknown:
        raise InvalidRequest(f"unknown form field(s) {', '.join(unknown)}; allowed: file, src, tgt")
    src = fields.get("src")
    if not src:
        raise InvalidRequest("missing field 'src' (the source language, e.g. 'en')")
    tgt = target_list(fields.get("tgt"), fields.get("target"), None)[0]
    billing.translation_quote(0, src, tgt)  # 400 for an unknown language before the file is read
    chars = count_document_chars(upload.path, upload.declared_mime, source=None if src == "auto" else src)
    quote = billing.translation_quote(chars, src, tgt)
    breakdown = QuoteBreakdown(chars=quote.chars, src=quote.src, tgt=quote.tgt, langTier=quote.lang_tier)
    return QuoteResponse(credits=quote.credits, breakdown=breakdown)


async def quote_v1(request: Request) -> Response:
    """What a translation would reserve (1 credit per 100 characters, rounded up, times langTier; min 1).

    JSON ``{chars | fileBytes+mime, src, tgt}``, or multipart with the ``file`` itself (its characters are
    counted as the job would count them)."""
    if request.headers.get("content-type", "").lower().startswith("multipart/form-data"):
        upload, _ = await _read_multipart(request, request.app.state.tmp_dir)
        try:
            quote = await anyio.to_thread.run_sync(_quote_file, upload)
        finally:
            upload.close()
    else:
        body = await _read(request, MAX_SMALL_BODY_BYTES)
        quote = await anyio.to_thread.run_sync(_quote_sync, body)
    return Response(quote.dump(), media_type=JSON)


# ----- v1 translate -----------------------------------------------------------------------------------------
@dataclass
class _Upload:
    """A multipart upload spooled to a temporary file while it arrived (the body was hashed on the way)."""

    path: Path
    filename: str
    declared_mime: str | None
    fields: dict[str, str]

    def close(self) -> None:
        self.path.unlink(missing_ok=True)


def _bounded_receive(receive: Receive, limit: int) -> Receive:
    """``receive`` that stops the body past ``limit`` bytes (413)."""
    size = 0

    async def wrapped() -> Message:
        nonlocal size
        message = await receive()
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise FileTooLarge(f"the upload is over the {MAX_FILE_BYTES:,} byte limit (200 MB)")
        return message

    return wrapped


async def _read_multipart(request: Request, tmp_dir: Path) -> tuple[_Upload, str]:
    """The form's file (spooled to ``tmp_dir``) and fields, and the request's fingerprint (of its parts)."""
    import hashlib

    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > MAX_MULTIPART_BYTES:
        raise FileTooLarge(f"the upload is over the {MAX_FILE_BYTES:,} byte limit (200 MB)")
    counted = Request(request.scope, _bounded_receive(request.receive, MAX_MULTIPART_BYTES))
    try:
        form = await counted.form(max_files=1, max_fields=16, max_part_size=MAX_SMALL_BODY_BYTES)
    except DragomanError:
        raise
    except Exception as exc:  # Starlette's MultiPartException and HTTPException(400): a malformed form
        raise InvalidRequest(f"the multipart body could not be read: {getattr(exc, 'detail', exc)}") from None
    try:
        file = form.get("file")
        if not isinstance(file, UploadFile):
            raise InvalidRequest(
                "a multipart request needs a 'file' part (PDF, DOCX, PNG, JPG or TIFF) with src and tgt "
                "fields; send JSON for text"
            )
        fields = {k: v for k, v in form.multi_items() if isinstance(v, str)}
        tmp_dir.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix="upload-", dir=tmp_dir)
        path = Path(name)

        def copy() -> str:
            digest = hashlib.sha256()
            with os.fdopen(handle, "wb") as out:
                file.file.seek(0)
                while block := file.file.read(_COPY_CHUNK):
                    digest.update(block)
                    out.write(block)
            return digest.hexdigest()

        try:
            file_sha = await anyio.to_thread.run_sync(copy)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        upload = _Upload(path, file.filename or "document", file.content_type, fields)
    finally:
        await form.close()
    # The parts, not the raw body: a client's retry may choose another multipart boundary.
    parts = {"file_sha256": file_sha, "filename": upload.filename, "fields": sorted(upload.fields.items())}
    body_print = idempotency.fingerprint(request.method, request.url.path, json.dumps(parts).encode())
    return upload, body_print


def _chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while block := handle.read(_COPY_CHUNK):
            yield block


def _accepted(request: Request, job: JobRecord, *, target: str | None = None) -> AcceptedResponse:
    return AcceptedResponse(
        job_id=job.id,
        poll_url=job_url(request, job.id),
        credits_reserved=job.credits_reserved,
        batch_id=job.batch_id,
        target=target,
    )


def _submit_jobs(
    request: Request,
    key: KeyInfo,
    reservation: Reservation | None,
    children: list[tuple[dict[str, Any], str, int]],
    targets: list[str],
    webhook: str | None,
    batch: bool,
) -> Response:
    """Queues the job (or the batch) and stores the idempotent answer in the same transaction (402 here)."""
    state = request.app.state
    db: Database = state.db
    with db.write() as conn:
        if batch:
            batch_id, made = jobs.submit_batch(db, key, "translate", children, webhook, conn=conn)
            accepted = [_accepted(request, j, target=t) for j, t in zip(made, targets, strict=True)]
            body: Any = BatchAcceptedResponse(
                batch_id=batch_id,
                job_ids=[j.id for j in made],
                jobs=accepted,
                credits_reserved=sum(j.credits_reserved for j in made),
            )
        else:
            params, title, credits = children[0]
            job = jobs.submit(
                db,
                key,
                kind="translate",
                params=params,
                title=title,
                credits=credits,
                webhook_url=webhook,
                conn=conn,
            )
            body = _accepted(request, job)
            made = [job]
        state.dispatch.submitted(conn, made)  # Procrastinate: deferred in this transaction
        response = model_response(body, 202)
        if reservation is not None:
            reservation.complete_in(conn, response)
    state.dispatch.committed()  # in-process: wake the runner
    return response


async def _translate_text(
    request: Request, key: KeyInfo, body: bytes, reservation: Reservation | None
) -> Response:
    req: V1TranslateRequest = parse_translate_v1(body)
    targets = req.target_list()
    batch = req.targets is not None
    webhook = await anyio.to_thread.run_sync(_check_webhook, request, req.webhook)
    glossary = [g.model_dump(by_alias=True) for g in req.glossary] if req.glossary is not None else None
    title = req.title or _title(req.text)
    children: list[tuple[dict[str, Any], str, int]] = []
    for tgt in targets:
        quote = billing.translation_quote(len(req.text), req.src, tgt)  # 400 for an unknown language
        params: dict[str, Any] = {"text": req.text, "src": req.src, "tgt": tgt}
        if glossary is not None:
            params["glossary"] = glossary
        children.append((params, title, quote.credits))
    state = request.app.state
    if not batch and len(req.text) <= SYNC_TEXT_CHARS:
        params, title, credits = children[0]
        handler: Handler = state.handler
        pool: EnginePool = state.pool

        def run(context: Any) -> JobRecord:
            return jobs.run_sync(
                state.db,
                key,
                handler,
                state.storage,
                kind="translate",
                params=params,
                title=title,
                credits=credits,
                ctx=context,
            )

        job = await pool.run(run)
        return model_response(
            SyncTranslateResponse(
                job_id=job.id,
                credits=job.credits or 0,
                elapsed_seconds=round(job.elapsed_seconds(), 3),
                result=job.result or "",
            )
        )
    return await anyio.to_thread.run_sync(
        _submit_jobs, request, key, reservation, children, targets, webhook, batch
    )


def _file_jobs(request: Request, key: KeyInfo, upload: _Upload, reservation: Reservation | None) -> Response:
    """Validation (400, 415), counting, storing, then the job(s) (402)."""
    from dragoman.service.translation_jobs import count_document_chars, sniff_path

    fields = upload.fields
    unknown = sorted(set(fields) - {"src", "tgt", "target", "targets", "webhook", "title"})
    if unknown:
        raise InvalidRequest(
            f"unknown form field(s) {', '.join(unknown)}; allowed: file, src, tgt, targets, webhook"
        )
    src = fields.get("src")
    if not src:
        raise InvalidRequest("missing field 'src' (the source language, e.g. 'en')")
    targets_field = fields.get("targets")
    targets_list = [t.strip() for t in targets_field.split(",") if t.strip()] if targets_field else None
    targets = target_list(fields.get("tgt"), fields.get("target"), targets_list)
    webhook = _check_webhook(request, fields.get("webhook"))
    mime = sniff_path(upload.path)
    if mime is None:
        raise DocumentFormatError(
            f"{upload.filename}: the content is not PDF, DOCX, PNG, JPEG or TIFF (what translate accepts)"
        )
    quotes = [billing.translation_quote(0, src, t) for t in targets]  # 400 for an unknown language first
    chars = count_document_chars(upload.path, mime, source=None if src == "auto" else src)
    state = request.app.state
    storage: Storage = state.storage
    key_name = f"uploads/{uuid.uuid4()}/{safe_name(upload.filename, default='document')}"
    storage.put_stream(key_name, _chunks(upload.path), MAX_FILE_BYTES)
    title = fields.get("title") or upload.filename
    children: list[tuple[dict[str, Any], str, int]] = []
    for tgt, q in zip(targets, quotes, strict=True):
        credits = billing.translation_credits(chars, q.lang_tier)
        params = {"upload": key_name, "filename": upload.filename, "mime": mime, "src": src, "tgt": tgt}
        children.append((params, title[:200], credits))
    try:
        return _submit_jobs(request, key, reservation, children, targets, webhook, targets_list is not None)
    except BaseException:
        storage.delete(key_name)
        raise


async def translate_v1(request: Request) -> Response:
    """Translate a text (JSON) or a document (multipart file): at once up to 500 characters, else a job."""
    key = await authenticate(request)
    content_type = request.headers.get("content-type", "").lower()
    if content_type.startswith("multipart/form-data"):
        state = request.app.state
        upload, body_print = await _read_multipart(request, state.tmp_dir)
        try:

            async def run_file(reservation: Reservation | None) -> Response:
                return await anyio.to_thread.run_sync(_file_jobs, request, key, upload, reservation)

            return await idempotent(request, key, body_print, run_file)
        finally:
            upload.close()
    body = await _read(request, MAX_V1_JSON_BYTES)
    body_print = idempotency.fingerprint(request.method, request.url.path, body)

    async def run_text(reservation: Reservation | None) -> Response:
        return await _translate_text(request, key, body, reservation)

    return await idempotent(request, key, body_print, run_text)


# ----- v1 jobs ------------------------------------------------------------------------------------------
async def get_job(request: Request) -> Response:
    """A job: status, progress, credits, result or error, export URLs (poll every 2-5 s, or use webhooks)."""
    key = await authenticate(request)
    job = await anyio.to_thread.run_sync(
        jobs.get, request.app.state.db, key.key_id, request.path_params["job_id"]
    )
    return model_response(job_response(request, job))


async def cancel_job(request: Request) -> Response:
    """Cancel a queued or running job; its reserved credits are refunded at once."""
    key = await authenticate(request)
    job_id = request.path_params["job_id"]
    refunded = await anyio.to_thread.run_sync(jobs.cancel, request.app.state.db, key.key_id, job_id)
    return model_response(CancelResponse(job_id=job_id, credits_refunded=refunded))


def _int_query(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise InvalidRequest(f"{name} must be a whole number from {low} to {high}; got {raw[:40]!r}")
    return int(raw)


async def list_jobs_v1(request: Request) -> Response:
    """The key's jobs, most recent first (50 by default, at most 200), and their total."""
    key = await authenticate(request)
    unknown = sorted(set(request.query_params) - {"limit", "offset"})
    if unknown:
        raise InvalidRequest(f"unknown query parameter {unknown[0][:40]!r}; allowed: limit, offset")
    limit = _int_query(request, "limit", jobs.LIST_DEFAULT, 1, jobs.LIST_MAX)
    offset = _int_query(request, "offset", 0, 0, 10**9)
    items, total = await anyio.to_thread.run_sync(
        jobs.list_jobs, request.app.state.db, key.key_id, limit, offset
    )
    return model_response(
        JobListResponse(
            jobs=[
                JobListItem(
                    job_id=j.id,
                    status=j.status,  # type: ignore[arg-type]
                    title=j.title,
                    credits=j.credits,
                    created_at=iso_ms(j.created_ms),
                )
                for j in items
            ],
            total=total,
            limit=limit,
            offset=offset,
        )
    )


def _export_stream(storage: Storage, key: str) -> Iterator[bytes]:
    yield from storage.open_stream(key)


async def _export(request: Request, fmt: Literal["docx", "pdf"]) -> Response:
    key = await authenticate(request)
    state = request.app.state
    job_id = request.path_params["job_id"]
    job = await anyio.to_thread.run_sync(jobs.get, state.db, key.key_id, job_id)
    stored = job.artifacts.get(fmt)
    if job.status != jobs.DONE or not stored:
        why = "has no document source" if "upload" not in job.params else f"is {job.status}"
        raise JobNotFound(
            f"no {fmt} export of job {job_id}: the job {why} (exports exist for done document jobs)"
        )
    stem = Path(str(job.params.get("filename") or "document")).stem or "document"
    name = f"{safe_name(stem, default='document')}.{job.params.get('tgt', 'translated')}.{fmt}"
    size = await anyio.to_thread.run_sync(state.storage.size, stored)
    return StreamingResponse(
        _export_stream(state.storage, stored),
        media_type=EXPORT_TYPES[fmt],
        headers={"Content-Disposition": f'attachment; filename="{name}"', "Content-Length": str(size)},
    )


async def export_docx(request: Request) -> Response:
    """The formatted DOCX export of a done document job."""
    return await _export(request, "docx")


async def export_pdf(request: Request) -> Response:
    """The PDF export of a done document job."""
    return await _export(request, "pdf")


# ----- v1 usage -----------------------------------------------------------------------------------------
async def usage_v1(request: Request) -> Response:
    """The key's last 30 UTC days, balance, month spend by product, rate-limit and daily-quota headroom."""
    key = await authenticate(request)
    state = request.app.state
    await anyio.to_thread.run_sync(state.tally.flush)  # this request and those before it are in the report
    report = await anyio.to_thread.run_sync(usage.usage_report, state.db, key)
    window = await anyio.to_thread.run_sync(state.limiter.peek, key.key_id)  # Redis: I/O
    return model_response(
        UsageResponse(
            key_id=report.key_id,
            days=[
                UsageDay(day=d.day, requests=d.requests, credits_spent=d.credits_spent) for d in report.days
            ],
            mode=key.mode,
            balance=report.balance,
            live_balance=report.live_balance,
            test_balance=report.test_balance,
            month_spend=report.month_spend,
            monthly_cap=report.monthly_cap,
            month_resets_at=iso_ms(report.month_resets_at_ms),
            products=dict(report.products),
            rate_limit=RateLimitHeadroom(
                limit=window.limit, remaining=window.remaining, reset_seconds=window.reset_seconds()
            ),
            daily_quota=DailyQuota(
                limit=report.daily_quota,
                remaining=max(0, report.daily_quota - report.daily_chars_used),
                resets_at=iso_ms(report.daily_quota_resets_at_ms),
            ),
        )
    )


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
_JOB_ID = "job_id"

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
        errors=(*_AUTH_ERRORS, JobNotFound),
    ),
    ApiRoute(
        "/api/v1/jobs/{job_id}/export/pdf",
        export_pdf,
        method="GET",
        response=bytes,
        response_description="the PDF file (Content-Disposition: attachment)",
        errors=(*_AUTH_ERRORS, JobNotFound),
    ),
    ApiRoute(
        "/api/v1/usage",
        usage_v1,
        method="GET",
        response=UsageResponse,
        response_description="usage of the key",
        errors=_AUTH_ERRORS,
    ),
    ApiRoute(
        "/openapi.json", openapi, method="GET", response=dict[str, Any], response_description="OpenAPI 3.1"
    ),
]
COMMON_ERRORS = (NOT_FOUND, METHOD_NOT_ALLOWED, UNEXPECTED)
_BEARER_ROUTES = {
    ("/api/v2/translate", "post"),
    ("/api/v1/translate", "post"),
    ("/api/v1/jobs", "get"),
    ("/api/v1/jobs/{job_id}", "get"),
    ("/api/v1/jobs/{job_id}", "delete"),
    ("/api/v1/jobs/{job_id}/export/docx", "get"),
    ("/api/v1/jobs/{job_id}/export/pdf", "get"),
    ("/api/v1/usage", "get"),
}
_RATE_HEADERS_DOC = {
    "RateLimit-Limit": "requests a minute allowed to the key (fixed window)",
    "RateLimit-Remaining": "requests left in this window",
    "RateLimit-Reset": "seconds until the window ends",
}

DESCRIPTION = """\
The hosted translation service: v1 (jobs, quote, usage; spec 4.1) and v2 (the local daemon's translate
contract with provenance 'server'; spec 4.4).

Authentication: `Authorization: Bearer svc_live_…` (or `svc_test_…`, spending test credits) on every route but
`GET /api/v1/languages`, `POST /api/v1/quote`, `GET /api/v2/languages` and this document.

Errors: every error is JSON `{"error": "<what to do>", "code": "<stable name>", ...}`; some codes add fields:
`rate_limited` (429) `retry_after`, `limit`, `remaining`, `resets_at` and a `Retry-After` header;
`quota_exceeded` (429, v2; error 'daily character quota exceeded') `remaining`, `limit`, `resets_at`;
`insufficient_credits` (402) `balance`, `required`; `monthly_cap_reached` (402) `cap`, `spent`, `resets_at`;
`idempotency_in_progress` (409) `retry_after`; `job_finished` (409) `status`;
`rate_limiter_unavailable` (503: the shared rate limiter's Redis cannot be reached; the request is refused,
never served unmetered) and `storage_unavailable` (503: the file store cannot be reached) `retry_after` and a
`Retry-After` header.

Order of checks on v1 authenticated routes: 401 → 403 → 429 (60 requests a minute per key; job polls and
export downloads count: prefer webhooks) → Idempotency-Key → 400/413/415 → 402 → work.

Idempotency-Key (POST /api/v1/translate and /api/v2/translate; 24 hours, per key): the same key and request
replays the stored answer with `Idempotent-Replayed: true`; the same key with another request is 422; while
the first runs, 409 with `Retry-After`. Errors are not stored (a retry runs again).

Credits: 1 credit per 100 characters, rounded up, times the pair's language tier (1, 2 or 3), at least 1;
`POST /api/v1/quote` says exactly what a job reserves.
"""


@cache
def openapi_json() -> bytes:
    document = openapi_document(
        ROUTES,
        title="dragoman hosted service",
        version=__version__,
        description=DESCRIPTION,
        common_errors=COMMON_ERRORS,
        bearer=True,
    )
    schemas = document["components"]["schemas"]
    error_schema = TypeAdapter(HostedErrorBody).json_schema(ref_template="#/components/schemas/{model}")
    schemas["ErrorBody"] = error_schema
    paths = document["paths"]
    operations = [(path, method, op) for path, ops in paths.items() for method, op in ops.items()]
    for path, method, operation in operations:
        if (path, method) in _BEARER_ROUTES:
            operation["security"] = [{"bearer": []}]
        else:
            operation["security"] = [{}]
        if path.startswith("/api/v1/") and (path, method) in _BEARER_ROUTES:
            headers = {
                name: {"description": text, "schema": {"type": "integer"}}
                for name, text in _RATE_HEADERS_DOC.items()
            }
            for status, answer in operation["responses"].items():
                if status not in ("401", "403", "404", "405", "502"):
                    answer["headers"] = dict(headers)
            if "429" in operation["responses"]:
                operation["responses"]["429"]["headers"]["Retry-After"] = {
                    "description": "seconds to wait",
                    "schema": {"type": "integer"},
                }
        if "{job_id}" in path:
            operation.setdefault("parameters", []).append(
                {"name": _JOB_ID, "in": "path", "required": True, "schema": {"type": "string"}}
            )
        if path in ("/api/v1/translate", "/api/v2/translate"):
            operation.setdefault("parameters", []).append(
                {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": False,
                    "description": "run this POST once within 24 hours (per key)",
                    "schema": {"type": "string", "minLength": 1, "maxLength": idempotency.MAX_KEY_CHARS},
                }
            )
    translate = paths["/api/v1/translate"]["post"]
    translate["requestBody"]["content"]["multipart/form-data"] = {
        "schema": {
            "type": "object",
            "required": ["file", "src"],
            "properties": {
                "file": {
                    "type": "string",
                    "format": "binary",
                    "description": "PDF, DOCX, PNG, JPG or TIFF; 200 MB",
                },
                "src": {"type": "string"},
                "tgt": {"type": "string"},
                "target": {"type": "string", "description": "alias of tgt"},
                "targets": {"type": "string", "description": "comma-separated target languages: a batch"},
                "webhook": {"type": "string"},
                "title": {"type": "string"},
            },
        }
    }
    paths["/api/v1/quote"]["post"]["requestBody"]["content"]["multipart/form-data"] = {
        "schema": {
            "type": "object",
            "required": ["file", "src"],
            "properties": {
                "file": {"type": "string", "format": "binary", "description": "the document to count"},
                "src": {"type": "string"},
                "tgt": {"type": "string"},
                "target": {"type": "string", "description": "alias of tgt"},
            },
        }
    }
    accepted = TypeAdapter(AcceptedResponse | BatchAcceptedResponse).json_schema(
        ref_template="#/components/schemas/{model}", mode="serialization"
    )
    schemas.update(accepted.pop("$defs", {}))
    translate["responses"]["202"] = {
        "description": "a job (longer text, a file) or a batch (targets): poll poll_url or await the webhook",
        "content": {JSON: {"schema": accepted}},
        "headers": dict(translate["responses"]["200"].get("headers", {})),
    }
    for fmt, mime in EXPORT_TYPES.items():
        answer = paths[f"/api/v1/jobs/{{job_id}}/export/{fmt}"]["get"]["responses"]["200"]
        answer["content"] = {mime: {"schema": {"type": "string", "format": "binary"}}}
        answer.setdefault("headers", {})["Content-Disposition"] = {
            "description": "attachment; filename=…",
            "schema": {"type": "string"},
        }
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


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
) -> Starlette:
    """The hosted service's ASGI app. ``engine`` None: an Engine with provenance 'server' over ``settings``
    (closed with the app). ``start_workers``: the lifespan starts (and stops) the job runner and the webhook
    dispatcher. The database must be migrated (:func:`dragoman.service.migrate.upgrade`; ``serve`` does)."""
    from dragoman.service.dispatch import INPROCESS, make_dispatch
    from dragoman.service.translation_jobs import make_translate_handler
    from dragoman.service.webhooks import WebhookDispatcher

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
    state.dispatch = make_dispatch(hosted, db, {"translate": handler}, storage)
    state.runner = state.dispatch.runner
    state.dispatcher = WebhookDispatcher(db, hosted) if state.dispatch.mode == INPROCESS else None
    state.glossary = None  # v2 applies no user glossary file on the hosted service (spec 4.4)
    state.openapi = openapi_json()
    return app


__all__ = ["ROUTES", "create_app", "openapi_json"]
