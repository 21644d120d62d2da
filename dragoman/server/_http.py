"""What every HTTP front door shares (the local daemon now, the hosted app later).

* JSON answers serialised through the wire models (:func:`model_response`), and the app's
  ``exception_handlers`` (:func:`exception_handlers`): a :class:`~dragoman.errors.DragomanError` is its
  status and ``{"error", "code"}`` (503 :class:`~dragoman.errors.Saturated` adds ``Retry-After``), a 404 or
  405 of the router is JSON too, and any other exception is a 502 JSON body (never an empty translation).
* :class:`ApiRoute` (a Starlette route that states its request and response models, the errors it may
  answer, its query parameters) and :func:`openapi_document`, which generates the OpenAPI 3.1 document from
  those routes and the models' JSON schemas: no schema is written beside the models.
* :func:`read_body`: the body counted while it streams in (chunked bodies have no ``Content-Length``).
* :class:`EnginePool`: engine calls, ``workers`` of them doing engine work at once. Requests in flight
  beyond ``workers + queue_limit`` get 503 with ``Retry-After``; a call past its timeout gets 504, and its
  work stops at its next check (its :class:`~dragoman.progress.JobContext` carries the deadline, and its
  token is cancelled once the request is abandoned), which frees the thread. Every admitted request has a
  thread, but waits for one of the ``workers`` places before its engine work starts; while it waits in the
  engine's dynamic batcher (or runs a batch there) it gives its place up, so concurrent requests meet in the
  batcher and are merged into one backend call (:mod:`dragoman.translation.batcher`).
* :class:`Gate`: pure ASGI (cheap on the hot path). It refuses, in order: a ``Host`` that is not a loopback
  name (DNS rebinding), an ``Origin`` not in the allowed list (CORS is closed by default; preflights of
  allowed origins are answered here, without the token, as browsers send none), a missing or wrong bearer
  token when one is set (constant-time compare), and a ``Content-Length`` over 2 MB. It writes the access
  log: method, path, status and milliseconds, never bodies or query strings.
"""

from __future__ import annotations

import asyncio
import hmac
import inspect
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, ExceptionHandler, Message, Receive, Scope, Send

from dragoman.errors import (
    BackendError,
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
from dragoman.progress import JobContext
from dragoman.server._wire import ErrorBody
from dragoman.translation.batcher import holding

access_log = logging.getLogger("dragoman.server.access")

T = TypeVar("T")
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
#: Where the gate leaves an allowed ``Origin`` in the scope, for answers made outside it.
CORS_ORIGIN = "dragoman.cors_origin"
JSON = "application/json"


# ----- JSON answers -----------------------------------------------------------------------------------
def model_response(
    model: BaseModel, status_code: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """``model`` serialised by pydantic (its schema is the one the OpenAPI document states)."""
    return Response(model.model_dump_json(), status_code=status_code, headers=headers, media_type=JSON)


def adapter_response(adapter: TypeAdapter[T], value: T) -> Response:
    """``value`` serialised through ``adapter`` (a list of wire models, say)."""
    return Response(adapter.dump_json(value), media_type=JSON)


def error_response(exc: DragomanError, headers: Mapping[str, str] | None = None) -> Response:
    return model_response(ErrorBody.from_error(exc), exc.status, headers)


def cors_headers(origin: str) -> dict[str, str]:
    return {"Access-Control-Allow-Origin": origin, "Vary": "Origin"}


@dataclass(frozen=True)
class ErrorDoc:
    """An error answer as the OpenAPI document states it: status, code and what it means."""

    status: int
    code: str
    text: str

    @classmethod
    def of(cls, error: type[DragomanError] | ErrorDoc) -> ErrorDoc:
        if isinstance(error, ErrorDoc):
            return error
        text = (inspect.getdoc(error) or error.__name__).split("\n\n", 1)[0]
        return cls(error.status, error.code, text.replace("\n", " ").replace("``", "`"))


NOT_FOUND = ErrorDoc(404, "not_found", "No such route.")
METHOD_NOT_ALLOWED = ErrorDoc(405, "method_not_allowed", "The route does not take this method.")
UNEXPECTED = ErrorDoc(
    BackendError.status, BackendError.code, "The server failed unexpectedly (a bug): see its log."
)


def exception_handlers(server: str) -> dict[Any, ExceptionHandler]:
    """The app's ``exception_handlers``; ``server`` names whose log an unexpected failure points to."""

    async def dragoman_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, DragomanError)
        return error_response(exc)

    async def saturated(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Saturated)
        return error_response(exc, {"Retry-After": str(exc.retry_after)})

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            routes = ", ".join(_describe(r) for r in request.app.routes)
            body = ErrorBody(error=f"no route {request.url.path}; routes: {routes}", code=NOT_FOUND.code)
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
            body = ErrorBody(error=message, code=METHOD_NOT_ALLOWED.code)
        else:
            body = ErrorBody(error=str(exc.detail), code="http_error")
        return model_response(body, exc.status_code, exc.headers)

    async def unexpected(request: Request, exc: Exception) -> Response:
        # Starlette answers this outside the gate (hence the CORS headers here) and re-raises, so that the
        # server logs the traceback and then closes the connection: the answer says so to the client.
        error = BackendError(
            f"the engine failed unexpectedly ({type(exc).__name__}: {exc}); see the {server} log, "
            "and report it"
        )
        origin = request.scope.get(CORS_ORIGIN)
        headers = {"Connection": "close", **(cors_headers(origin) if origin is not None else {})}
        return error_response(error, headers)

    return {
        Saturated: saturated,
        DragomanError: dragoman_error,
        HTTPException: http_error,
        Exception: unexpected,
    }


def _describe(route: BaseRoute) -> str:
    if isinstance(route, ApiRoute):
        return f"{route.method} {route.path}"
    if isinstance(route, Route):
        return f"{','.join(sorted((route.methods or set()) - {'HEAD'}))} {route.path}"
    return repr(route)


# ----- routes that state their contract, and the OpenAPI document made from them ------------------------
@dataclass(frozen=True)
class QueryParam:
    """A query parameter: its name, its type (its schema comes from it) and what it means."""

    name: str
    type: Any
    description: str
    required: bool = False


class ApiRoute(Route):
    """A route with its OpenAPI operation: one method, the request body model (validation schema), the
    response type (serialisation schema), the errors it may answer and its query parameters. The summary
    is the first line of the endpoint's docstring."""

    def __init__(
        self,
        path: str,
        endpoint: Callable[[Request], Any],
        *,
        method: str,
        response: Any,
        response_description: str,
        request: type[BaseModel] | None = None,
        errors: Sequence[type[DragomanError] | ErrorDoc] = (),
        query: Sequence[QueryParam] = (),
    ) -> None:
        super().__init__(path, endpoint, methods=[method])
        self.method = method
        self.request = request
        self.response = response
        self.response_description = response_description
        self.errors = tuple(ErrorDoc.of(e) for e in errors)
        self.query = tuple(query)

    @property
    def summary(self) -> str:
        return (inspect.getdoc(self.endpoint) or self.name).split("\n", 1)[0].rstrip(".")


def _errors_by_status(docs: Iterable[ErrorDoc]) -> dict[str, Any]:
    by_status: dict[int, list[ErrorDoc]] = {}
    for doc in docs:
        listed = by_status.setdefault(doc.status, [])
        if all(d.code != doc.code for d in listed):
            listed.append(doc)
    error = {"$ref": "#/components/schemas/ErrorBody"}
    return {
        str(status): {
            "description": " ".join(f"`{d.code}`: {d.text}" for d in listed),
            "content": {JSON: {"schema": error}},
        }
        for status, listed in sorted(by_status.items())
    }


def openapi_document(
    routes: Sequence[BaseRoute],
    *,
    title: str,
    version: str,
    description: str,
    common_errors: Sequence[type[DragomanError] | ErrorDoc] = (),
    bearer: bool = False,
) -> dict[str, Any]:
    """OpenAPI 3.1 for every :class:`ApiRoute` of ``routes``, schemas generated from their models.

    ``common_errors`` are answered on every route (the gate's refusals, 404/405, an unexpected failure);
    ``bearer`` states an optional bearer token."""
    api = [r for r in routes if isinstance(r, ApiRoute)]
    inputs: list[tuple[Any, Any, TypeAdapter[Any]]] = [(("error",), "serialization", TypeAdapter(ErrorBody))]
    for i, route in enumerate(api):
        inputs.append(((i, "response"), "serialization", TypeAdapter(route.response)))
        if route.request is not None:
            inputs.append(((i, "request"), "validation", TypeAdapter(route.request)))
        inputs += [((i, q.name), "validation", TypeAdapter(q.type)) for q in route.query]
    schemas, top = TypeAdapter.json_schemas(inputs, ref_template="#/components/schemas/{model}")
    common = [ErrorDoc.of(e) for e in common_errors]
    paths: dict[str, Any] = {}
    for i, route in enumerate(api):
        operation: dict[str, Any] = {"operationId": route.name, "summary": route.summary}
        if route.query:
            operation["parameters"] = [
                {
                    "name": q.name,
                    "in": "query",
                    "required": q.required,
                    "description": q.description,
                    "schema": schemas[((i, q.name), "validation")],
                }
                for q in route.query
            ]
        if route.request is not None:
            operation["requestBody"] = {
                "required": True,
                "content": {JSON: {"schema": schemas[((i, "request"), "validation")]}},
            }
        operation["responses"] = {
            "200": {
                "description": route.response_description,
                "content": {JSON: {"schema": schemas[((i, "response"), "serialization")]}},
            },
            **_errors_by_status([*route.errors, *common]),
        }
        paths.setdefault(route.path, {})[route.method.lower()] = operation
    components: dict[str, Any] = {"schemas": top.get("$defs", {})}
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version, "description": description},
        "paths": paths,
        "components": components,
    }
    if bearer:
        components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{}, {"bearer": []}]
    return document


# ----- request bodies ---------------------------------------------------------------------------------
def body_too_large(size: int | None = None) -> BodyTooLarge:
    got = f" (got {size} bytes)" if size is not None else ""
    return BodyTooLarge(
        f"the body is over the daemon's {MAX_LOCAL_BODY_BYTES} byte limit{got}; "
        "split the texts over several requests"
    )


async def read_body(request: Request, limit: int = MAX_LOCAL_BODY_BYTES) -> bytes:
    """The body, counted while it streams in (chunked bodies have no Content-Length): 413 past ``limit``;
    a client that leaves before the body ends is a 400 (nobody reads it, but the log says what happened
    instead of showing a traceback). Its JSON is read by :func:`dragoman.server._json.loads` (400s only)."""
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise body_too_large()
            chunks.append(chunk)
    except ClientDisconnect as exc:
        raise InvalidRequest(
            f"the client closed the connection after {size} bytes, before the body ended; send it whole"
        ) from exc
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


# ----- admission ------------------------------------------------------------------------------------
#: How often a request waiting for an engine place checks its context (cancelled, past its deadline).
PLACE_CHECK_SECONDS = 0.05


class _Places:
    """``count`` places for engine work. New requests take one in arrival order; a thread coming back from
    the batcher (its request is nearly done) goes before them.

    A place given back wakes one thread: the first of those coming back, else the first in line (each
    waits on a condition of its own over one lock). Waking every waiter at each change cost CPU that grew
    with the queue; a waiter still wakes every :data:`PLACE_CHECK_SECONDS` to check its context."""

    def __init__(self, count: int) -> None:
        self._lock = threading.Lock()
        self._free = count
        self._back = 0  # threads waiting to take a place back
        self._backs = threading.Condition(self._lock)
        self._line: deque[threading.Condition] = deque()  # new requests waiting, in arrival order

    def _wake(self) -> None:
        """Wake the thread that may take a free place now (the lock held)."""
        if self._free <= 0:
            return
        if self._back:
            self._backs.notify()
        elif self._line:
            self._line[0].notify()

    def enter(self, context: JobContext) -> None:
        """Wait for a place (first come, first served); raises when ``context`` stops meanwhile."""
        ticket = threading.Condition(self._lock)
        with self._lock:
            self._line.append(ticket)
            try:
                while True:
                    context.check()
                    if self._free > 0 and not self._back and self._line[0] is ticket:
                        self._free -= 1
                        return
                    ticket.wait(PLACE_CHECK_SECONDS)
            finally:
                self._line.remove(ticket)
                self._wake()  # the next in line may go (or may no longer be blocked by this one)

    def back(self) -> None:
        """Wait for a place, before any new request."""
        with self._lock:
            self._back += 1
            try:
                while self._free <= 0:
                    self._backs.wait()
            finally:
                self._back -= 1
            self._free -= 1
            self._wake()

    def give(self) -> None:
        with self._lock:
            self._free += 1
            self._wake()


class _Place:
    """One request's place (a :class:`~dragoman.translation.batcher.Place`): given up while it waits in the
    batcher, taken back after."""

    __slots__ = ("held", "places")

    def __init__(self, places: _Places) -> None:
        self.places = places
        self.held = False

    def leave(self) -> None:
        if self.held:
            self.held = False
            self.places.give()

    def take_back(self) -> None:
        if not self.held:
            self.places.back()
            self.held = True


class EnginePool:
    """``workers`` places for engine work, a thread for each admitted request, and a bounded count of
    requests waiting (for a place, or in the engine's batcher)."""

    def __init__(self, workers: int, queue_limit: int, timeout: float) -> None:
        if workers < 1 or queue_limit < 0 or not timeout > 0:
            raise InvalidRequest(
                f"workers must be >= 1, queue_limit >= 0 and timeout > 0; "
                f"got {workers}, {queue_limit} and {timeout}"
            )
        self.workers = workers
        self.queue_limit = queue_limit
        self.timeout = timeout
        # A thread per admitted request (made as needed): one waiting in the batcher costs no CPU, and the
        # places bound the engine work done at once.
        self._executor = ThreadPoolExecutor(
            max_workers=workers + queue_limit, thread_name_prefix="dragoman-engine"
        )
        self._places = _Places(workers)
        self._lock = threading.Lock()
        self._busy = 0  # admitted and not finished, including work abandoned after a timeout
        self._mean = 0.5  # moving mean of engine seconds per request, for Retry-After

    @property
    def in_flight(self) -> int:
        return self._busy

    def _release(self, _future: Future[Any]) -> None:
        with self._lock:
            self._busy -= 1

    def _timed(self, fn: Callable[[JobContext], T], context: JobContext) -> T:
        place = _Place(self._places)
        self._places.enter(context)
        place.held = True
        started = time.perf_counter()
        try:
            with holding(place):
                return fn(context)
        finally:
            place.leave()
            spent = time.perf_counter() - started
            with self._lock:
                self._mean = 0.8 * self._mean + 0.2 * spent

    def _timeout(self) -> EngineTimeout:
        return EngineTimeout(
            f"translation took longer than {self.timeout:g} s and was abandoned; send shorter texts or "
            "smaller batches, use tier 'fast', or start the daemon with a larger --timeout"
        )

    async def run(self, fn: Callable[[JobContext], T]) -> T:
        """``fn(context)`` on an engine thread; ``context`` carries the deadline the pool answers 504 at,
        and its token is cancelled when the request is abandoned (the timeout, or the request's task
        cancelled), so abandoned work stops at its next check and frees its thread."""
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
        context = JobContext.of(timeout=self.timeout)
        try:
            future = self._executor.submit(self._timed, fn, context)
        except RuntimeError as exc:  # the executor is shut down: the daemon is stopping
            with self._lock:
                self._busy -= 1
            raise Saturated("the daemon is shutting down; retry once it is restarted", 1) from exc
        future.add_done_callback(self._release)
        try:
            # On expiry the future is cancelled (work not started never starts) and so is the context (a
            # request waiting for a place or in the batcher leaves at its next check).
            async with asyncio.timeout(self.timeout):
                return await asyncio.wrap_future(future)
        except TimeoutError as exc:
            raise self._timeout() from exc
        except EngineTimeout as exc:  # the engine met the deadline before the timer fired: the same answer
            if type(exc) is EngineTimeout and context.deadline is not None:
                if time.monotonic() >= context.deadline:
                    raise self._timeout() from exc
            raise
        finally:
            if not future.done():  # abandoned (timeout, request cancelled, daemon stopping): stop the work
                context.cancel.cancel("the request was abandoned (timeout or cancellation)")

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


# ----- the log --------------------------------------------------------------------------------------
class BatchedLogHandler(logging.Handler):
    """Writes formatted records to ``stream`` in batches: every ``interval`` seconds from its own thread,
    at once for a warning or worse, when ``capacity`` records wait, and on flush or close.

    The access log writes a line per request; written one by one, each line was a write on the event
    loop's thread, which let an engine thread take the GIL and made the loop wait for it back (measured:
    0.1 ms of CPU a request, a tenth of the daemon's HTTP path). Records are kept, not formatted, until
    they are written, so the loop only pays for making them."""

    def __init__(self, stream: Any, *, interval: float = 0.5, capacity: int = 512) -> None:
        super().__init__()
        self.stream = stream
        self.interval = interval
        self.capacity = capacity
        self._records: list[logging.LogRecord] = []
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dragoman-log", daemon=True)
        self._thread.start()

    def emit(self, record: logging.LogRecord) -> None:  # called with self.lock held
        self._records.append(record)
        if record.levelno >= logging.WARNING or len(self._records) >= self.capacity:
            self._write()

    def _write(self) -> None:
        records, self._records = self._records, []
        if not records:
            return
        lines: list[str] = []
        for record in records:
            try:
                lines.append(self.format(record) + "\n")
            except Exception:
                self.handleError(record)
        try:
            self.stream.write("".join(lines))
            self.stream.flush()
        except Exception:
            self.handleError(records[-1])

    def flush(self) -> None:
        self.acquire()
        try:
            self._write()
        finally:
            self.release()

    def _run(self) -> None:
        while not self._closed.wait(self.interval):
            self.flush()

    def close(self) -> None:
        self._closed.set()
        self.flush()
        super().close()


# ----- the gate -------------------------------------------------------------------------------------
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
        refusal, origin = self._check(scope["method"], dict(scope["headers"]))
        if origin is not None:
            scope[CORS_ORIGIN] = origin
            extra = [(k.lower().encode(), v.encode()) for k, v in cors_headers(origin).items()]

        async def send_logged(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                if origin is not None:  # an allowed origin: let it read the answer, errors included
                    message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        try:
            if refusal is not None:
                await refusal(scope, receive, send_logged)
            else:
                await self.app(scope, receive, send_logged)
        except Exception:
            if status == 0:  # the app's handler for unexpected exceptions answers, outside this gate
                status = UNEXPECTED.status
            raise
        finally:
            ms = (time.perf_counter() - started) * 1000
            access_log.info("%s %s %d %.1fms", scope["method"], scope["path"], status, ms)
