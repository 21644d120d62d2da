"""The local daemon (spec 4.4): ``POST /translate``, ``GET /health``, ``GET /languages`` on loopback.

A thin Starlette app over the shared engine, in Starlette's idiom: each route is a module-level function
reading ``request.app.state`` (engine, pool, glossary store, settings), errors are mapped by the app's
``exception_handlers`` (every error is JSON ``{"error", "code"}``), and the OpenAPI document is generated
from the route table (:data:`ROUTES`) and the wire models of :mod:`dragoman.server._wire`, through which
every answer is serialised. The gate, the engine pool (503 when saturated, 504 past the timeout), the body
limit and the error handlers are those of :mod:`dragoman.server._http`. :func:`serve` runs the app under
uvicorn on a loopback socket with a PID/port file (``dragoman.testing.daemon.BackgroundDaemon`` runs it in a
thread, for tests, benchmarks and examples), each connection bounded by :mod:`._protocol`: a read deadline,
a head size bound, a connection cap, and JSON answers for malformed HTTP.
"""

from __future__ import annotations

import errno
import importlib.util
import ipaddress
import json
import logging
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from functools import cache, partial
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args, runtime_checkable

import anyio.to_thread
import uvicorn
from pydantic import TypeAdapter
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp

from dragoman import __version__
from dragoman.errors import (
    BackendError,
    BodyTooLarge,
    DetectionUnavailable,
    EngineTimeout,
    GlossaryFileError,
    HeadersTooLarge,
    HostNotAllowed,
    InvalidRequest,
    LimitExceeded,
    OriginNotAllowed,
    PackNotInstalled,
    PipelineBroken,
    PipelineStuck,
    PortInUse,
    RequestTimeout,
    Saturated,
    Unauthorized,
    UnknownLanguage,
    UnsupportedPair,
)
from dragoman.languages.types import Language
from dragoman.limits import Provenance
from dragoman.progress import JobContext
from dragoman.server._http import (
    JSON,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    UNEXPECTED,
    ApiRoute,
    BatchedLogHandler,
    EnginePool,
    Gate,
    QueryParam,
    adapter_response,
    exception_handlers,
    host_name,
    model_response,
    openapi_document,
    read_body,
)
from dragoman.server._wire import (
    BatchingInfo,
    BatchResponse,
    LanguageRow,
    TranslateRequest,
    TranslationResultModel,
    glossary_entries,
    parse_translate,
)
from dragoman.server.daemon._models import Backends, EngineInfo, HealthResponse, QueueInfo
from dragoman.server.daemon._protocol import ConnectionLimits, guarded_protocol
from dragoman.server.daemon.portfile import daemon_file, remove_daemon_file, write_daemon_file
from dragoman.server.local_store import GlossaryStore
from dragoman.translation.types import TranslateOptions, TranslationResult

if TYPE_CHECKING:
    from dragoman.settings import Settings

log = logging.getLogger("dragoman.server")
DEFAULT_QUEUE_LIMIT = 64
DEFAULT_TIMEOUT = 60.0


class EngineLike(Protocol):
    """What the daemon needs of :class:`dragoman.translation.engine.Engine` (tests may pass a stub)."""

    @property
    def started(self) -> float: ...

    @property
    def provenance(self) -> Provenance: ...

    def pack_ids(self) -> list[str]: ...

    def loaded_packs(self) -> list[str]: ...

    def translate(
        self, text: str, options: TranslateOptions, *, context: JobContext | None = None
    ) -> TranslationResult: ...

    def translate_batch(
        self, texts: Sequence[str], options: TranslateOptions, *, context: JobContext | None = None
    ) -> list[TranslationResult]: ...

    def languages(self, *, installed_only: bool = True) -> list[Language]: ...


@runtime_checkable
class ReportsBatching(Protocol):
    """An engine with a dynamic batcher (the real one; test stubs may have none)."""

    def batching_status(self) -> dict[str, Any]: ...


def _checked(texts: Sequence[str], results: Sequence[TranslationResult]) -> None:
    """Never hand out an empty translation for a text that had words (spec 7.2)."""
    if len(results) != len(texts):
        raise BackendError(
            f"the engine returned {len(results)} results for {len(texts)} texts; see the daemon log"
        )
    for i, (text, result) in enumerate(zip(texts, results, strict=True)):
        if text.strip() and not result.translation.strip():
            raise BackendError(
                f"the engine returned an empty translation for text {i}; retry, or try the other tier"
            )


# ----- the routes -----------------------------------------------------------------------------------
async def translate(request: Request) -> Response:
    """Translate one text or a batch."""
    req = parse_translate(await read_body(request))
    state = request.app.state
    engine: EngineLike = state.engine
    pool: EnginePool = state.pool
    store: GlossaryStore | None = state.glossary
    requested = glossary_entries(req.glossary)

    def options() -> TranslateOptions:  # on the engine thread: the glossary file is read there
        entries = store.resolve(requested) if store is not None else (requested or ())
        return TranslateOptions(req.target, req.source, req.tier, tuple(entries))

    if req.text is not None:
        text = req.text
        one = await pool.run(lambda context: engine.translate(text, options(), context=context))
        _checked([text], [one])
        return model_response(TranslationResultModel.from_result(one))
    batch = req.texts
    assert batch is not None
    results = await pool.run(lambda context: engine.translate_batch(batch, options(), context=context))
    _checked(batch, results)
    return model_response(BatchResponse.from_results(results))


def _health(state: Any) -> HealthResponse:
    engine: EngineLike = state.engine
    pool: EnginePool = state.pool
    return HealthResponse(
        ok=True,
        engine=EngineInfo(
            version=__version__,
            provenance=engine.provenance,
            uptime_seconds=round(time.time() - engine.started, 3),
            packs_installed=engine.pack_ids(),
            packs_loaded=engine.loaded_packs(),
            backends=state.backends,
            queue=QueueInfo(
                workers=pool.workers,
                limit=pool.queue_limit,
                in_flight=pool.in_flight,
                timeout_seconds=pool.timeout,
            ),
            batching=(
                BatchingInfo.model_validate(engine.batching_status())
                if isinstance(engine, ReportsBatching)
                else None
            ),
            auth=state.auth,
        ),
    )


async def health(request: Request) -> Response:
    """Liveness and engine state."""
    return model_response(await anyio.to_thread.run_sync(_health, request.app.state))


#: The values of ``GET /languages?all=``, case-insensitive.
AllFlag = Literal["0", "1", "true", "false"]
_ROWS: TypeAdapter[list[LanguageRow]] = TypeAdapter(list[LanguageRow])


async def languages(request: Request) -> Response:
    """Languages the installed packs reach (spec 2.5 rows)."""
    flag = request.query_params.get("all", "0").lower()
    if flag not in get_args(AllFlag):
        raise InvalidRequest(f"all must be 0, 1, true or false; got {flag!r}")
    engine: EngineLike = request.app.state.engine
    rows = await anyio.to_thread.run_sync(partial(engine.languages, installed_only=flag in ("0", "false")))
    return adapter_response(_ROWS, [LanguageRow.from_language(row) for row in rows])


async def openapi(request: Request) -> Response:
    """This document."""
    return Response(request.app.state.openapi, media_type=JSON)


ROUTES = [
    ApiRoute(
        "/translate",
        translate,
        method="POST",
        request=TranslateRequest,
        response=TranslationResultModel | BatchResponse,
        response_description="one result for text; {results} for texts",
        errors=(
            InvalidRequest,
            LimitExceeded,
            UnknownLanguage,
            UnsupportedPair,
            PackNotInstalled,
            GlossaryFileError,
            BackendError,
            PipelineBroken,
            Saturated,
            DetectionUnavailable,
            EngineTimeout,
            PipelineStuck,
        ),
    ),
    ApiRoute(
        "/health", health, method="GET", response=HealthResponse, response_description="the daemon is up"
    ),
    ApiRoute(
        "/languages",
        languages,
        method="GET",
        response=list[LanguageRow],
        response_description="language rows",
        errors=(InvalidRequest,),
        query=[QueryParam("all", AllFlag, "'1' or 'true': the whole FLORES-200 catalogue instead")],
    ),
    ApiRoute(
        "/openapi.json", openapi, method="GET", response=dict[str, Any], response_description="OpenAPI 3.1"
    ),
]
#: Answered on every route: the gate's refusals, the router's 404 and 405, an unexpected failure, and the
#: connection's own (malformed HTTP, a head too large or too slow, too many connections; issue 9, item 4).
COMMON_ERRORS = (
    Unauthorized,
    HostNotAllowed,
    OriginNotAllowed,
    BodyTooLarge,
    InvalidRequest,
    RequestTimeout,
    HeadersTooLarge,
    Saturated,
    NOT_FOUND,
    METHOD_NOT_ALLOWED,
    UNEXPECTED,
)


@cache
def openapi_json() -> bytes:
    """The daemon's OpenAPI document, generated once per process from :data:`ROUTES`."""
    document = openapi_document(
        ROUTES,
        title="dragoman local daemon",
        version=__version__,
        description="On-device translation on loopback (spec 4.4); every error is {error, code}.",
        common_errors=COMMON_ERRORS,
        bearer=True,
    )
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    try:
        yield
    finally:
        app.state.pool.shutdown()


# ----- the app --------------------------------------------------------------------------------------
def create_app(
    engine: EngineLike,
    settings: Settings | None = None,
    *,
    token: str | None = None,
    allowed_origins: Iterable[str] = (),
    extra_hosts: Iterable[str] = (),
    max_workers: int = 2,
    queue_limit: int = DEFAULT_QUEUE_LIMIT,
    request_timeout: float = DEFAULT_TIMEOUT,
    glossary: GlossaryStore | None = None,
) -> Starlette:
    """The daemon's ASGI app over ``engine``. ``settings`` is kept for the routes' context (may be None).

    ``glossary`` is the user's glossary file, applied when a request carries no glossary (default: the
    file of ``settings``; none without settings)."""
    if glossary is None and settings is not None:
        glossary = GlossaryStore(settings.local.glossary_path)
    apertium_on = settings is None or settings.engine.apertium_enabled
    app = Starlette(
        routes=ROUTES,
        middleware=[Middleware(Gate, hosts=extra_hosts, origins=allowed_origins, token=token)],
        exception_handlers=exception_handlers("daemon"),
        lifespan=lifespan,
    )
    app.router.redirect_slashes = False  # "/translate/" is a JSON 404, not a redirect
    app.state.engine = engine
    app.state.pool = EnginePool(max_workers, queue_limit, request_timeout)
    app.state.settings = settings
    app.state.glossary = glossary
    app.state.auth = bool(token)
    app.state.backends = Backends(
        ctranslate2=importlib.util.find_spec("ctranslate2") is not None,
        apertium=apertium_on and shutil.which("lt-proc") is not None,
    )
    app.state.openapi = openapi_json()
    return app


# ----- running it -----------------------------------------------------------------------------------
def is_loopback(host: str) -> bool:
    name = host_name(host)
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free port), or :class:`PortInUse`."""
    name = "127.0.0.1" if host_name(host) == "localhost" else host_name(host)
    family = socket.AF_INET6 if ":" in name else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted connections only when the listening
    # socket says so, and without it every keep-alive answer waits ~40 ms (Nagle + delayed ACK).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((name, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        shown = f"[{name}]:{port}" if family == socket.AF_INET6 else f"{name}:{port}"
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(
                f"port {port} on {name} is already in use (a dragoman daemon already running? `dragoman "
                f"status` tells); stop it or choose another port with --port"
            ) from exc
        raise PortInUse(f"cannot listen on {shown}: {exc.strerror or exc}") from exc
    sock.setblocking(False)
    return sock


def uvicorn_server(app: ASGIApp, timeout: float, limits: ConnectionLimits | None = None) -> uvicorn.Server:
    """uvicorn over ``app`` on httptools with the daemon's connection bounds (:mod:`._protocol`): a read
    deadline for each request, a head size bound, a connection cap, JSON answers for malformed HTTP."""
    limits = limits or ConnectionLimits()
    config = uvicorn.Config(
        app,
        http=guarded_protocol(limits),
        ws="none",  # no websocket routes: an Upgrade header is an ordinary request
        timeout_keep_alive=max(1, round(limits.keep_alive)),  # the protocol keeps the exact float
        log_level="warning",
        access_log=False,  # our gate logs method, path, status and ms, never bodies
        proxy_headers=False,  # loopback, never behind a proxy: no X-Forwarded-* rewriting per request
        lifespan="on",
        server_header=False,
        timeout_graceful_shutdown=int(timeout) + 5,
    )
    return uvicorn.Server(config)


def _raise_open_files_limit(wanted: int) -> None:
    """Let the process hold ``wanted`` descriptors (each connection is one) if the hard limit allows:
    macOS starts processes at 256, under the connection cap plus models and pipelines."""
    try:
        import resource
    except ImportError:  # Windows
        return
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < wanted:
            ceiling = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
            resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, ceiling), hard))
    except (OSError, ValueError) as exc:
        log.debug("cannot raise the open files limit: %s", exc)


class _Stop(Exception):
    """Raised by our SIGTERM handler once uvicorn has shut down gracefully and re-raises the signal."""


def _log_to_stderr() -> logging.Handler | None:
    """Startup lines and the access log on stderr, whatever the root logger's level, written in batches
    (:class:`~dragoman.server._http.BatchedLogHandler`); the handler, or None when one was already set."""
    logger = logging.getLogger("dragoman.server")
    if logger.handlers:
        return None
    handler = BatchedLogHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return handler


def serve(
    settings: Settings,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    allowed_origins: Sequence[str] = (),
    workers: int | None = None,
    queue_limit: int | None = None,
    timeout: float | None = None,
    allow_non_loopback: bool = False,
    token: str | None = None,
) -> int:
    """Run the daemon until SIGTERM/SIGINT (in-flight requests finish); returns the exit status (0).

    Unset arguments come from the settings (``SERVICE_SERVE_TOKEN``, ``DRAGOMAN_PORT``,
    ``DRAGOMAN_SERVE_WORKERS``, ``DRAGOMAN_SERVE_QUEUE``, ``DRAGOMAN_SERVE_TIMEOUT``,
    ``DRAGOMAN_ALLOWED_ORIGINS``); the connection bounds from ``DRAGOMAN_SERVE_MAX_CONNECTIONS``,
    ``DRAGOMAN_SERVE_HEADER_TIMEOUT`` and ``DRAGOMAN_SERVE_KEEP_ALIVE``. Raises :class:`PortInUse` or
    :class:`InvalidRequest`.
    """
    from dragoman.translation.engine import Engine

    if not is_loopback(host) and not allow_non_loopback:
        raise InvalidRequest(
            f"refusing to listen on {host}: the daemon serves loopback only (127.0.0.1 or ::1), since "
            "anyone who can reach the port could use it. If you really mean it, pass --allow-non-loopback "
            "and set SERVICE_SERVE_TOKEN"
        )
    token = token if token is not None else settings.daemon.token
    if not is_loopback(host) and not token:
        log.warning(
            "listening on %s without SERVICE_SERVE_TOKEN: anyone who reaches the port can use it", host
        )
    origins = list(allowed_origins) or list(settings.daemon.allowed_origins)
    workers = workers or settings.daemon.workers
    queue_limit = queue_limit if queue_limit is not None else settings.daemon.queue
    timeout = timeout or settings.daemon.timeout
    handler = _log_to_stderr()
    sock = bind_socket(host, settings.daemon.port if port is None else port)
    bound_port = int(sock.getsockname()[1])
    name = "127.0.0.1" if host_name(host) == "localhost" else host_name(host)
    engine = Engine(settings)
    app = create_app(
        engine,
        settings,
        token=token,
        allowed_origins=origins,
        extra_hosts=[name],
        max_workers=workers,
        queue_limit=queue_limit,
        request_timeout=timeout,
    )
    limits = ConnectionLimits.from_settings(settings.daemon)
    _raise_open_files_limit(limits.max_connections + 256)
    server = uvicorn_server(app, timeout, limits)
    path = daemon_file(settings)
    shown = f"[{name}]" if ":" in name else name

    def on_term(signum: int, frame: object) -> None:
        raise _Stop()

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        write_daemon_file(path, host=name, port=bound_port)
        log.info(
            "dragoman daemon on http://%s:%d (pid %d, %d engine threads, queue %d, timeout %gs%s)",
            shown,
            bound_port,
            os.getpid(),
            workers,
            queue_limit,
            timeout,
            ", token required" if token else "",
        )
        if handler is not None:
            handler.flush()  # the startup line now, not at the first batch
        server.run(sockets=[sock])
    except (_Stop, KeyboardInterrupt):
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        remove_daemon_file(path)
        sock.close()
        engine.close()
        log.info("dragoman daemon stopped")
        if handler is not None:
            handler.flush()
    return 0
