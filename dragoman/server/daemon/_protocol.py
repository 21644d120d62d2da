"""The daemon's HTTP protocol: uvicorn's httptools protocol with the bounds uvicorn lacks (issue 9, 4 and 8).

uvicorn times out an idle keep-alive connection only after a response, never a connection that has not
finished its first request, and its ``limit_concurrency`` answers 503 only once headers are complete (in
plain text) while every idle socket keeps its file descriptor: 300 idle sockets made ``/health`` time out.
:class:`GuardedProtocol` adds, per connection:

* **a read deadline** (``header_timeout``): a request's line, headers and body must arrive within it, counted
  from the connection's opening or the request's first byte (slowloris, slow bodies). A head cut off gets
  408 JSON; a connection that sent nothing, or a body cut off, is closed.
* **a head size bound** (``max_head_bytes``): request line and headers over it get 431 JSON (httptools
  buffers a header without end in memory).
* **a connection cap** (``max_connections``): a connection over it closes the connection idle longest (no
  request in progress), or, when every connection is serving a request, is answered 503 JSON at once.
* **JSON errors**: a malformed request (request line, header, URL) is a 400 ``{"error", "code"}``, the shape
  of every other error (spec 7.2), instead of uvicorn's plain text.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from dragoman.errors import DragomanError, HeadersTooLarge, InvalidRequest, RequestTimeout, Saturated
from dragoman.limits import (
    DAEMON_HEADER_TIMEOUT,
    DAEMON_KEEP_ALIVE,
    DAEMON_MAX_CONNECTIONS,
    MAX_REQUEST_HEAD_BYTES,
)
from dragoman.server._wire import ErrorBody

if TYPE_CHECKING:
    import asyncio

    from dragoman.settings import DaemonSettings

log = logging.getLogger("dragoman.server")


@dataclass(frozen=True)
class ConnectionLimits:
    """The daemon's connection bounds (``DRAGOMAN_SERVE_MAX_CONNECTIONS``, ``..._HEADER_TIMEOUT``,
    ``..._KEEP_ALIVE``) and the largest request head."""

    max_connections: int = DAEMON_MAX_CONNECTIONS
    header_timeout: float = DAEMON_HEADER_TIMEOUT
    keep_alive: float = DAEMON_KEEP_ALIVE
    max_head_bytes: int = MAX_REQUEST_HEAD_BYTES

    @classmethod
    def from_settings(cls, daemon: DaemonSettings) -> ConnectionLimits:
        return cls(daemon.max_connections, daemon.header_timeout, daemon.keep_alive)


class _Refused(Exception):
    """Raised inside a parser callback to stop parsing; the refusal is in ``GuardedProtocol._refusal``."""


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a read deadline, a head bound, a connection cap and JSON errors."""

    limits: ClassVar[ConnectionLimits] = ConnectionLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timeout_keep_alive = self.limits.keep_alive  # type: ignore[assignment] # a float is fine
        self._read_timer: asyncio.TimerHandle | None = None
        self._in_head = True  # reading a request line and headers (or waiting for the first byte)
        self._in_body = False
        self._head_bytes = 0
        self._idle_since = 0.0  # when the connection last finished a response (or opened)
        self._refusal: DragomanError | None = None

    # ----- the connection cap ------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._idle_since = self.loop.time()
        self._arm()
        open_ = [
            c for c in self.connections if isinstance(c, GuardedProtocol) and not c.transport.is_closing()
        ]
        if len(open_) <= self.limits.max_connections:
            return
        idle = [c for c in open_ if c is not self and c.idle()]
        if idle:
            victim = min(idle, key=lambda c: c._idle_since)
            log.debug("closing an idle connection: %d connections are open (the most kept)", len(open_))
            victim.transport.close()
            return
        log.warning("refusing a connection: %d connections are open, all serving requests", len(open_))
        self._refuse(
            Saturated(
                f"the daemon holds {self.limits.max_connections} connections, all serving requests; retry "
                "in a second, or raise DRAGOMAN_SERVE_MAX_CONNECTIONS",
                retry_after=1,
            )
        )

    def idle(self) -> bool:
        """No request being served (waiting for one, or reading its head): may be closed for room."""
        return (
            (self.cycle is None or self.cycle.response_complete) and not self.pipeline and not self._in_body
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    # ----- the read deadline -------------------------------------------------------------------------
    def _arm(self) -> None:
        if self._read_timer is None:
            self._read_timer = self.loop.call_later(self.limits.header_timeout, self._read_timeout)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_timeout(self) -> None:
        self._read_timer = None
        if self.transport.is_closing():
            return
        seconds = f"{self.limits.header_timeout:g}"
        if self._in_head and self._head_bytes:
            log.info("408: a request's head did not arrive within %s s", seconds)
            self._refuse(
                RequestTimeout(
                    f"the request line and headers did not arrive within {seconds} s "
                    "(DRAGOMAN_SERVE_HEADER_TIMEOUT); send the whole request at once"
                )
            )
        else:  # nothing sent at all, or a body cut off while the route reads it: close
            log.info("closing a connection: no whole request within %s s", seconds)
            self.transport.close()

    # ----- parsing -----------------------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        if self._in_head:
            self._head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._unsupported_upgrade_warning()  # websockets are off (ws="none"): never upgraded
        except httptools.HttpParserError as exc:
            refusal, self._refusal = self._refusal, None
            if refusal is None:
                detail = str(exc).rstrip(".").lower() or "unreadable"
                refusal = InvalidRequest(
                    f"malformed HTTP request ({detail}); send an HTTP/1.1 request line, headers and body"
                )
            log.info("%d: %s", refusal.status, refusal.message)
            self._refuse(refusal)
            return
        if self._in_head and self._head_bytes > self.limits.max_head_bytes:
            self._refuse(self._too_large())

    def _too_large(self) -> HeadersTooLarge:
        return HeadersTooLarge(
            f"the request line and headers are over {self.limits.max_head_bytes} bytes; send fewer or "
            "shorter headers"
        )

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head, self._in_body = True, False
        self._arm()

    def on_headers_complete(self) -> None:
        size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if size > self.limits.max_head_bytes:
            self._refusal = self._too_large()
            raise _Refused
        self._in_head, self._in_body, self._head_bytes = False, True, 0
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_body = False
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        self._idle_since = self.loop.time()
        super().on_response_complete()

    # ----- refusals ----------------------------------------------------------------------------------
    def send_400_response(self, msg: str) -> None:
        self._refuse(InvalidRequest(f"malformed HTTP request: {msg}"))

    def _refuse(self, error: DragomanError) -> None:
        """Answer ``error`` as JSON ``{"error", "code"}`` and close, when no response has started."""
        self._disarm()
        if self.transport.is_closing():
            return
        if self.cycle is not None and self.cycle.response_started and not self.cycle.response_complete:
            self.transport.close()
            return
        body = ErrorBody.from_error(error).model_dump_json().encode("utf-8")
        content = [STATUS_LINE[error.status]]
        for name, value in self.server_state.default_headers:
            content += [name, b": ", value, b"\r\n"]
        if isinstance(error, Saturated):
            content.append(b"retry-after: %d\r\n" % error.retry_after)
        content += [
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            b"connection: close\r\n\r\n",
            body,
        ]
        self.transport.write(b"".join(content))
        self.transport.close()


def guarded_protocol(limits: ConnectionLimits) -> type[GuardedProtocol]:
    """A :class:`GuardedProtocol` class bound to ``limits`` (uvicorn makes one instance per connection)."""
    return type("GuardedProtocol", (GuardedProtocol,), {"limits": limits})
