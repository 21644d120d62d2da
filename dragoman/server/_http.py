"""The daemon's gate and engine pool: what every request passes before and while the engine works.

:class:`Gate` is pure ASGI (cheap on the hot path). It refuses, in order: a ``Host`` that is not a
loopback name (DNS rebinding), an ``Origin`` not in the allowed list (CORS is closed by default;
preflights of allowed origins are answered here, without the token, as browsers send none), a missing or
wrong bearer token when one is set (constant-time compare), and a ``Content-Length`` over 2 MB. It writes
the access log: method, path, status and milliseconds, never bodies or query strings.

:class:`EnginePool` runs engine calls on a fixed set of threads. Requests in flight beyond
``workers + queue_limit`` get 503 with ``Retry-After``; a call past its timeout gets 504 while its thread
finishes the work (the result is dropped, and the thread counts as busy until it is done).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dragoman.errors import (
    BodyTooLarge,
    DragomanError,
    EngineTimeout,
    HostNotAllowed,
    InvalidRequest,
    OriginNotAllowed,
    Saturated,
    Unauthorized,
)
from dragoman.limits import MAX_LOCAL_BODY_BYTES

access_log = logging.getLogger("dragoman.server.access")

T = TypeVar("T")
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def error_response(exc: DragomanError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(exc.to_dict(), status_code=exc.status, headers=headers)


class EnginePool:
    """A fixed set of engine threads and a bounded count of requests waiting for one."""

    def __init__(self, workers: int, queue_limit: int) -> None:
        if workers < 1 or queue_limit < 0:
            raise InvalidRequest(
                f"workers must be >= 1 and queue_limit >= 0; got {workers} and {queue_limit}"
            )
        self.workers = workers
        self.queue_limit = queue_limit
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dragoman-engine")
        self._lock = threading.Lock()
        self._busy = 0  # admitted and not finished, including work abandoned after a timeout
        self._mean = 0.5  # moving mean of engine seconds per request, for Retry-After

    @property
    def in_flight(self) -> int:
        return self._busy

    def _release(self, _future: Future[Any]) -> None:
        with self._lock:
            self._busy -= 1

    def _timed(self, fn: Callable[[], T]) -> T:
        started = time.perf_counter()
        try:
            return fn()
        finally:
            spent = time.perf_counter() - started
            with self._lock:
                self._mean = 0.8 * self._mean + 0.2 * spent

    async def run(self, fn: Callable[[], T], timeout: float) -> T:
        with self._lock:
            waiting = self._busy - self.workers
            if waiting >= self.queue_limit:
                retry = max(1, math.ceil(self._mean * (waiting + 1) / self.workers))
                raise Saturated(
                    f"the daemon is saturated: {self._busy} requests in flight for {self.workers} engine "
                    f"thread(s) and {self.queue_limit} queue places; retry after {retry} s, or send batches "
                    "(texts) instead of many single requests",
                    retry,
                )
            self._busy += 1
        try:
            future = self._executor.submit(self._timed, fn)
        except RuntimeError as exc:  # the executor is shut down: the daemon is stopping
            with self._lock:
                self._busy -= 1
            raise Saturated("the daemon is shutting down; retry once it is restarted", 1) from exc
        future.add_done_callback(self._release)
        try:
            async with asyncio.timeout(
                timeout
            ):  # on expiry the wrapped future is cancelled: queued work never starts
                return await asyncio.wrap_future(future)
        except TimeoutError as exc:
            raise EngineTimeout(
                f"translation took longer than {timeout:g} s and was abandoned; send shorter texts or "
                "smaller batches, use tier 'fast', or start the daemon with a larger --timeout"
            ) from exc

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def host_name(value: str) -> str:
    """The name part of a ``Host`` header value, lower-cased, without port, brackets or final dot."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        name = value[1:end] if end > 0 else value[1:]
    elif value.count(":") == 1:
        name = value.split(":", 1)[0]
    else:
        name = value
    return name.rstrip(".")


class Gate:
    def __init__(
        self, app: ASGIApp, *, hosts: Iterable[str], origins: Iterable[str], token: str | None
    ) -> None:
        self.app = app
        self.hosts = frozenset(host_name(h) for h in hosts) | LOOPBACK_NAMES
        self.origins = frozenset(o.strip().rstrip("/").lower() for o in origins if o.strip())
        self.token = token.encode("utf-8") if token else None

    def _check(self, method: str, headers: Mapping[bytes, bytes]) -> tuple[Response | None, str | None]:
        """A refusal (or a preflight answer) and the origin to echo in CORS headers."""
        host = headers.get(b"host", b"").decode("latin-1")
        if host_name(host) not in self.hosts:
            shown = host or "(none)"
            return error_response(
                HostNotAllowed(
                    f"Host {shown!r} is not a loopback name; the daemon answers only to localhost, "
                    "127.0.0.1 and [::1] (DNS-rebinding protection): call it as http://127.0.0.1:PORT"
                )
            ), None
        origin_raw = headers.get(b"origin")
        origin = None
        if origin_raw is not None:
            origin = origin_raw.decode("latin-1").strip()
            if origin.rstrip("/").lower() not in self.origins:
                return error_response(
                    OriginNotAllowed(
                        f"Origin {origin!r} is not allowed to call this daemon (CORS is closed by "
                        f"default); the user can allow it with `dragoman serve --allowed-origin {origin}`"
                    )
                ), None
            if method == "OPTIONS" and b"access-control-request-method" in headers:
                return Response(
                    status_code=204,
                    headers={  # Access-Control-Allow-Origin is added on the way out, as for every answer
                        "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
                        "Access-Control-Allow-Headers": "Authorization, Content-Type",
                        "Access-Control-Max-Age": "600",
                        **(
                            {"Access-Control-Allow-Private-Network": "true"}
                            if b"access-control-request-private-network" in headers
                            else {}
                        ),
                    },
                ), origin
        if self.token is not None:
            auth = headers.get(b"authorization", b"")
            scheme, _, given = auth.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(given.strip(), self.token):
                return error_response(Unauthorized("unauthorized"), {"WWW-Authenticate": "Bearer"}), origin
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > MAX_LOCAL_BODY_BYTES:
            return error_response(body_too_large(int(length))), origin
        return None, origin

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0
        headers = dict(scope["headers"])
        refusal, origin = self._check(scope["method"], headers)

        async def send_logged(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                if origin is not None:  # an allowed origin: let it read the answer, errors included
                    extra = [(k.lower().encode(), v.encode()) for k, v in _cors_headers(origin).items()]
                    message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        try:
            if refusal is not None:
                await refusal(scope, receive, send_logged)
            else:
                await self.app(scope, receive, send_logged)
        finally:
            ms = (time.perf_counter() - started) * 1000
            access_log.info("%s %s %d %.1fms", scope["method"], scope["path"], status, ms)


def _cors_headers(origin: str) -> dict[str, str]:
    return {"Access-Control-Allow-Origin": origin, "Vary": "Origin"}


def body_too_large(size: int | None = None) -> BodyTooLarge:
    got = f" (got {size} bytes)" if size is not None else ""
    return BodyTooLarge(
        f"the body is over the daemon's {MAX_LOCAL_BODY_BYTES} byte limit{got}; "
        "split the texts over several requests"
    )


async def read_body(request: Request, limit: int = MAX_LOCAL_BODY_BYTES) -> bytes:
    """The body, counted while it streams in (chunked bodies have no Content-Length): 413 past ``limit``."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise body_too_large()
        chunks.append(chunk)
    return b"".join(chunks)
