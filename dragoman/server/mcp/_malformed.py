"""Answers for lines the stdio wire cannot use: JSON-RPC 2.0 says a server replies, the SDK does not.

The SDK's stdio transport turns a line it cannot validate into an exception on the read stream, and its
dispatcher drops that at debug level: a client that sent ``id: 7`` nested too deep, cut off, or not valid
JSON at all waits for an answer forever. :class:`AnsweringReadStream` sits between the transport and the
server, answers each such line on the write stream, and passes every other message through unchanged:

* not JSON (or nested deeper than the parser's limit, or longer than :data:`MAX_LINE_BYTES`):
  ``-32700 Parse error``;
* JSON but not a JSON-RPC message: ``-32600 Invalid Request``.

The reply carries the request's ``id`` when it can be read without parsing the rest: from the parsed object,
or from the first top-level key of an unparsable line when nothing nested comes before it. Otherwise the
``id`` is ``null``, as the JSON-RPC specification asks.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any

import anyio
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

log = logging.getLogger("dragoman.mcp")

#: Longest line (one JSON-RPC message) the stdio server reads: a 1,000,000-character text written with
#: JSON escapes for astral characters (12 bytes each) plus a full glossary fits several times over.
MAX_LINE_BYTES = 32 * 1024 * 1024
#: What :class:`~dragoman.server.mcp._stdio.PipeLines` hands on instead of a line over the limit: not JSON
#: (so the SDK refuses it), followed by the line's first bytes (so the reply can carry its ``id``).
TOO_LONG_MARKER = "\x00dragoman:line-too-long:"
#: Bytes of an over-long line kept after the marker.
TOO_LONG_PREFIX_BYTES = 256

# The "id" member when it comes before anything nested: `{"jsonrpc": "2.0", "id": 7, ...`. The scan is
# bounded (a prefix of the line) and the pattern has no nested quantifiers, so it is linear.
_LEADING_ID = re.compile(r'\A\s*\{[^{}\[\]]{0,512}?"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,256}")\s*[,}]')


def _leading_id(text: str) -> int | str | None:
    found = _LEADING_ID.match(text[:2048])
    if found is None:
        return None
    try:
        value = json.loads(found.group(1))
    except ValueError:
        return None
    return value if isinstance(value, int | str) else None


def _parsed_id(details: list[Any]) -> int | str | None:
    """The ``id`` of the message when one of the errors shows it whole (pydantic gives each error's input)."""
    for detail in details:
        value = detail.get("input")
        if isinstance(value, dict):
            candidate = value.get("id")
            if isinstance(candidate, int | str) and not isinstance(candidate, bool):
                return candidate
    return None


def reply_to(error: ValidationError, line: str | None = None) -> JSONRPCError:
    """The JSON-RPC error that answers the line ``error`` refused (``line`` itself, when the transport kept
    it, helps find the ``id``)."""
    details: list[Any] = list(error.errors(include_url=False))
    first: dict[str, Any] = dict(details[0]) if details else {}
    raw = first.get("input")
    if first.get("type") == "json_invalid" and isinstance(raw, str):
        if raw.startswith(TOO_LONG_MARKER):
            message = f"Parse error: message longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB"
            request_id = _leading_id(raw[len(TOO_LONG_MARKER) :])
        else:
            reason = str(first.get("msg", "invalid JSON")).removeprefix("Invalid JSON: ")
            message = f"Parse error: {reason}"
            request_id = _leading_id(raw)
        return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=PARSE_ERROR, message=message))
    message = "Invalid Request: not a JSON-RPC 2.0 request, notification or response"
    request_id = _parsed_id(details)
    if request_id is None and line is not None:
        request_id = _leading_id(line)
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=INVALID_REQUEST, message=message))


class AnsweringReadStream:
    """The transport's read stream, less the lines it could not validate, which are answered on ``write``."""

    def __init__(self, inner: Any, write: Any, last_line: Callable[[], str | None] = lambda: None) -> None:
        self._inner = inner
        self._write = write
        self._last_line = last_line  # the line the transport read last: the one refused, when it refuses

    @property
    def last_context(self) -> Any:
        """The sender's context of the last message (the SDK's dispatcher reads it when present)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, ValidationError):
                return item
            reply = reply_to(item, self._last_line())
            log.warning("refused a malformed message: %s", reply.error.message)
            await self._write.send(SessionMessage(reply))

    def __aiter__(self) -> AnsweringReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> AnsweringReadStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
