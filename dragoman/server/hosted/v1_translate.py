"""Hosted v1 ``POST /api/v1/translate``: a text (JSON) translated in the request when it has at most 500
characters (``sync: true``), else a job; a document (multipart ``file``) or several targets (a batch) become
jobs of the runner (202 and an absolute ``poll_url``). Past :mod:`._gate`'s checks and Idempotency-Key."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response

from dragoman.errors import DocumentFormatError, InvalidRequest
from dragoman.limits import MAX_FILE_BYTES, SYNC_TEXT_CHARS
from dragoman.server._http import EnginePool, model_response
from dragoman.server.hosted._common import (
    Upload,
    check_webhook,
    chunks,
    job_url,
    read_limited,
    read_multipart,
)
from dragoman.server.hosted._gate import Reservation, authenticate, idempotent
from dragoman.server.hosted._models import (
    AcceptedResponse,
    BatchAcceptedResponse,
    SyncTranslateResponse,
    V1TranslateRequest,
    parse_translate_v1,
    target_list,
)
from dragoman.service import billing, idempotency, jobs
from dragoman.service.db import Database
from dragoman.service.storage import Storage, safe_name

if TYPE_CHECKING:
    from dragoman.service.accounts import KeyInfo
    from dragoman.service.jobs import Handler, JobRecord

#: Bytes of a v1 JSON translate body: a text of 1,000,000 characters (spec 8: 1 MB) may take up to 6 bytes
#: a character once JSON-escaped, plus a glossary.
MAX_V1_JSON_BYTES = 8 * 1024 * 1024


def _title(text: str) -> str:
    line = " ".join(text.split())
    return line[:77] + "..." if len(line) > 80 else line


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
    webhook = await anyio.to_thread.run_sync(check_webhook, request, req.webhook)
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


def _file_jobs(request: Request, key: KeyInfo, upload: Upload, reservation: Reservation | None) -> Response:
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
    webhook = check_webhook(request, fields.get("webhook"))
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
    storage.put_stream(key_name, chunks(upload.path), MAX_FILE_BYTES)
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
        upload, body_print = await read_multipart(request, state.tmp_dir)
        try:

            async def run_file(reservation: Reservation | None) -> Response:
                return await anyio.to_thread.run_sync(_file_jobs, request, key, upload, reservation)

            return await idempotent(request, key, body_print, run_file)
        finally:
            upload.close()
    body = await read_limited(request, MAX_V1_JSON_BYTES)
    body_print = idempotency.fingerprint(request.method, request.url.path, body)

    async def run_text(reservation: Reservation | None) -> Response:
        return await _translate_text(request, key, body, reservation)

    return await idempotent(request, key, body_print, run_text)
