"""Byte ranges on the hosted file downloads (RFC 9110 section 14; issue 16): a browser's video element, or
a download manager resuming, asks for part of a dub's video or audio with ``Range``.

- ``Range: bytes=a-b`` (b past the end is cut to the end), ``bytes=a-`` (from a to the end) and
  ``bytes=-n`` (the last n bytes) answer **206** with ``Content-Range: bytes a-b/size`` and ``Content-Length``
  of the slice; ``bytes=0-`` is a 206 of the whole file (what a video element sends first).
- A range that starts at or past the end (``bytes=size-``), ``bytes=-0``, or any range of an empty file
  answers **416** ``range_not_satisfiable`` with ``Content-Range: bytes */size``.
- **Ignored** (200 with the whole file, as RFC 9110 allows): several ranges in one header (``bytes=0-1,5-9``;
  no multipart answers), a malformed or reversed range (``bytes=9-5``, ``bytes=x``), another unit
  (``items=0-5``), a header over :data:`MAX_RANGE_HEADER_CHARS`, and any request with ``If-Range`` (these
  answers carry no validator to compare it with).
- ``HEAD`` answers what ``GET`` would (status, Content-Length, Content-Range, the route's headers) with no
  body and without reading the store.
- Every answer says ``Accept-Ranges: bytes``. The body streams from the store in chunks of 1 MiB, a ranged
  read of the store (a local file read from the first byte, an S3 ``Range`` GET), so memory stays bounded
  whatever the size or the slice.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from dragoman.server._http import ErrorDoc, model_response
from dragoman.server._wire import ErrorBody

if TYPE_CHECKING:
    from dragoman.service.storage import Storage

#: Characters of a ``Range`` header read; a longer one is ignored (the whole file is sent).
MAX_RANGE_HEADER_CHARS = 200
#: The 416 answer, as the OpenAPI document states it.
RANGE_NOT_SATISFIABLE = ErrorDoc(
    416,
    "range_not_satisfiable",
    "The Range starts at or past the end of the file (Content-Range: bytes */size says its size).",
)

_SPEC = re.compile(r"\s*(\d{0,19})\s*-\s*(\d{0,19})\s*")


@dataclass(frozen=True)
class ByteRange:
    """Bytes ``start`` to ``end`` (exclusive) of a file of ``size`` bytes."""

    start: int
    end: int
    size: int

    @property
    def content_range(self) -> str:
        return f"bytes {self.start}-{self.end - 1}/{self.size}"


class _Unsatisfiable:
    """The Range cannot be served (416)."""


UNSATISFIABLE: Final = _Unsatisfiable()


def byte_range(header: str | None, size: int) -> ByteRange | _Unsatisfiable | None:
    """The slice a ``Range`` header asks of a file of ``size`` bytes; None to send the whole file (no header,
    or one that is ignored: see the module's notes); :data:`UNSATISFIABLE` for a 416."""
    if header is None or len(header) > MAX_RANGE_HEADER_CHARS:
        return None
    unit, sep, specs = header.partition("=")
    if not sep or unit.strip().lower() != "bytes" or "," in specs:
        return None
    found = _SPEC.fullmatch(specs)
    if found is None:
        return None
    first, last = found.groups()
    if first:
        start = int(first)
        if last and int(last) < start:
            return None  # reversed: invalid, ignored
        if start >= size:
            return UNSATISFIABLE
        return ByteRange(start, min(size, int(last) + 1) if last else size, size)
    if not last:
        return None  # "bytes=-"
    suffix = int(last)
    if suffix == 0 or size == 0:
        return UNSATISFIABLE
    return ByteRange(max(0, size - suffix), size, size)


def file_response(
    request: Request,
    storage: Storage,
    key: str,
    size: int,
    *,
    media_type: str,
    headers: Mapping[str, str],
) -> Response:
    """The stored file ``key`` (``size`` bytes) as the answer to ``request``: 200 with all of it, 206 with
    the slice its ``Range`` asks for, or 416 (see the module's notes). ``headers`` go on the 200 and 206."""
    wanted = None if "if-range" in request.headers else byte_range(request.headers.get("range"), size)
    if isinstance(wanted, _Unsatisfiable):
        body = ErrorBody(
            error=f"the range {request.headers.get('range', '')[:60]!r} is outside the file ({size} bytes)",
            code=RANGE_NOT_SATISFIABLE.code,
        )
        return model_response(
            body, RANGE_NOT_SATISFIABLE.status, {"Content-Range": f"bytes */{size}", "Accept-Ranges": "bytes"}
        )
    answer = {**headers, "Accept-Ranges": "bytes"}
    head = request.method == "HEAD"
    if wanted is None:
        answer["Content-Length"] = str(size)
        if head:
            return Response(b"", media_type=media_type, headers=answer)

        def whole() -> Iterator[bytes]:
            yield from storage.open_stream(key)

        return StreamingResponse(whole(), media_type=media_type, headers=answer)
    start, end = wanted.start, wanted.end
    answer["Content-Range"] = wanted.content_range
    answer["Content-Length"] = str(end - start)
    if head:
        return Response(b"", status_code=206, media_type=media_type, headers=answer)

    def part() -> Iterator[bytes]:
        yield from storage.open_range(key, start, end)

    return StreamingResponse(part(), status_code=206, media_type=media_type, headers=answer)


#: The OpenAPI answers and header of a ranged download (added by the routes' ``openapi_fixups``).
RANGE_PARAMETER = {
    "name": "Range",
    "in": "header",
    "required": False,
    "description": "one byte range: bytes=a-b, bytes=a- or bytes=-n (206); several ranges get the whole "
    "file (200); HEAD answers the same status and headers without the body",
    "schema": {"type": "string", "maxLength": MAX_RANGE_HEADER_CHARS},
}


def openapi_ranged(operation: dict[str, object], content: Mapping[str, object]) -> None:
    """Document a ranged download on ``operation``: the Range header, the 206 (``content`` as the 200's)
    and Accept-Ranges."""
    parameters = operation.setdefault("parameters", [])
    assert isinstance(parameters, list)
    parameters.append(dict(RANGE_PARAMETER))
    responses = operation["responses"]
    assert isinstance(responses, dict)
    responses["206"] = {
        "description": "the slice the Range asks for (Content-Range: bytes a-b/size)",
        "content": dict(content),
        "headers": {
            "Content-Range": {"description": "bytes a-b/size", "schema": {"type": "string"}},
            "Accept-Ranges": {"description": "bytes", "schema": {"type": "string"}},
        },
    }
    ok = responses.get("200")
    if isinstance(ok, dict):
        ok.setdefault("headers", {})["Accept-Ranges"] = {"description": "bytes", "schema": {"type": "string"}}
