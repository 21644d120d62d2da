"""What the hosted routes share (:mod:`.app`'s route modules): absolute URLs, bounded bodies, webhook URLs,
the multipart upload spooled to a temporary file while it arrives, and a create route's 202 stored for its
Idempotency-Key."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive

from dragoman.errors import BodyTooLarge, DragomanError, FileTooLarge, InvalidRequest
from dragoman.limits import MAX_FILE_BYTES
from dragoman.server._http import read_body
from dragoman.service import idempotency, netguard

if TYPE_CHECKING:
    from pydantic import BaseModel

    from dragoman.server.hosted._gate import Reservation

#: Bytes of a quote body, and of each non-file field of a multipart form.
MAX_SMALL_BODY_BYTES = 64 * 1024
#: Bytes of a multipart body: the file (200 MB) and its few fields.
MAX_MULTIPART_BYTES = MAX_FILE_BYTES + 1024 * 1024
COPY_CHUNK = 1024 * 1024


def base_url(request: Request) -> str:
    """Where absolute URLs start: ``DRAGOMAN_BASE_URL``, else the URL this request came to."""
    configured = request.app.state.settings.hosted.base_url
    return (configured or str(request.base_url)).rstrip("/")


def job_url(request: Request, job_id: str) -> str:
    return f"{base_url(request)}/api/v1/jobs/{job_id}"


async def read_limited(request: Request, limit: int) -> bytes:
    try:
        return await read_body(request, limit)
    except BodyTooLarge:
        raise BodyTooLarge(f"the body is over this route's {limit:,} byte limit; send less") from None


def accepted(conn: Any, body: BaseModel, reservation: Reservation | None) -> Response:
    """A create route's 202: ``body`` as JSON (by alias), stored for the request's Idempotency-Key (when it
    has one) inside ``conn``'s transaction, the one that wrote the jobs, so a replay answers the same."""
    response = Response(body.model_dump_json(by_alias=True), status_code=202, media_type="application/json")
    if reservation is not None:
        reservation.complete_in(conn, response)
    return response


def check_webhook(request: Request, url: str | None) -> str | None:
    if url is None:
        return None
    return netguard.check_url(url, allow_private=request.app.state.settings.hosted.webhooks_allow_private)


@dataclass
class Upload:
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


async def read_multipart(request: Request, tmp_dir: Path) -> tuple[Upload, str]:
    """The form's file (spooled to ``tmp_dir``) and fields, and the request's fingerprint (of its parts)."""
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
                while block := file.file.read(COPY_CHUNK):
                    digest.update(block)
                    out.write(block)
            return digest.hexdigest()

        try:
            file_sha = await anyio.to_thread.run_sync(copy)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        upload = Upload(path, file.filename or "document", file.content_type, fields)
    finally:
        await form.close()
    # The parts, not the raw body: a client's retry may choose another multipart boundary.
    parts = {"file_sha256": file_sha, "filename": upload.filename, "fields": sorted(upload.fields.items())}
    body_print = idempotency.fingerprint(request.method, request.url.path, json.dumps(parts).encode())
    return upload, body_print


def chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while block := handle.read(COPY_CHUNK):
            yield block
