"""The local daemon (spec 4.4): ``POST /translate``, ``GET /health``, ``GET /languages`` on loopback.

A thin Starlette app over the shared engine: the gate of :mod:`._daemon_gate` in front of every route
(Host, Origin/CORS, token, body size, access log), engine work on its bounded pool (503 when saturated,
504 past the timeout), request and response models in :mod:`._daemon_models`. Every error is JSON
``{"error", "code"}``. :func:`serve` runs it under uvicorn on a loopback socket with a PID/port file;
:class:`BackgroundDaemon` runs it in a thread (tests, benchmarks, examples).
"""

from __future__ import annotations

import errno
import importlib.util
import ipaddress
import logging
import os
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import anyio.to_thread
import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from dragoman import __version__
from dragoman.errors import BackendError, DragomanError, InvalidRequest, PortInUse, Saturated
from dragoman.languages.types import Language
from dragoman.limits import Provenance
from dragoman.progress import JobContext
from dragoman.server._http import EnginePool, Gate, error_response, host_name, read_body
from dragoman.server.daemon._models import GlossaryItem, openapi_document, parse_translate
from dragoman.server.daemon.portfile import daemon_file, remove_daemon_file, write_daemon_file
from dragoman.server.local_store import GlossaryStore
from dragoman.translation.types import GlossaryEntry, TranslateOptions, TranslationResult

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


def _entries(items: list[GlossaryItem] | None) -> tuple[GlossaryEntry, ...] | None:
    if items is None:
        return None
    return tuple(GlossaryEntry(i.term, i.translation, case_sensitive=i.case_sensitive) for i in items)


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
    pool = EnginePool(max_workers, queue_limit)
    if glossary is None and settings is not None:
        glossary = GlossaryStore(settings.local.glossary_path)
    store = glossary
    openapi = openapi_document(__version__)
    has_ct2 = importlib.util.find_spec("ctranslate2") is not None
    apertium_on = settings is None or settings.engine.apertium_enabled
    apertium_on = apertium_on and shutil.which("lt-proc") is not None

    async def guarded(call: Callable[[], Awaitable[Response]]) -> Response:
        try:
            return await call()
        except Saturated as exc:
            return error_response(exc, {"Retry-After": str(exc.retry_after)})
        except DragomanError as exc:
            return error_response(exc)
        except Exception as exc:  # an engine bug must still answer JSON, never an empty translation
            log.exception("engine failure")
            return error_response(
                BackendError(
                    f"the engine failed unexpectedly ({type(exc).__name__}: {exc}); "
                    "see the daemon log, and report it"
                )
            )

    async def translate(request: Request) -> Response:
        async def run() -> Response:
            req = parse_translate(await read_body(request))
            requested = _entries(req.glossary)
            # engine work stops at the deadline too, so an abandoned request frees its engine thread
            context = JobContext.of(timeout=request_timeout)

            def options() -> TranslateOptions:  # on the engine thread: the glossary file is read there
                entries = store.resolve(requested) if store is not None else (requested or ())
                return TranslateOptions(req.target, req.source, req.tier, tuple(entries))

            if req.text is not None:
                texts = [req.text]
                text = req.text
                one = await pool.run(
                    lambda: engine.translate(text, options(), context=context), request_timeout
                )
                _checked(texts, [one])
                return JSONResponse(one.to_dict())
            assert req.texts is not None
            batch = req.texts
            results = await pool.run(
                lambda: engine.translate_batch(batch, options(), context=context), request_timeout
            )
            texts = batch
            _checked(texts, results)
            return JSONResponse({"results": [r.to_dict() for r in results]})

        return await guarded(run)

    def health_payload() -> dict[str, Any]:
        return {
            "ok": True,
            "engine": {
                "version": __version__,
                "provenance": engine.provenance,
                "uptime_seconds": round(time.time() - engine.started, 3),
                "packs_installed": engine.pack_ids(),
                "packs_loaded": engine.loaded_packs(),
                "backends": {"ctranslate2": has_ct2, "apertium": apertium_on},
                "queue": {
                    "workers": pool.workers,
                    "limit": pool.queue_limit,
                    "in_flight": pool.in_flight,
                    "timeout_seconds": request_timeout,
                },
                "auth": bool(token),
            },
        }

    async def health(request: Request) -> Response:
        async def run() -> Response:
            return JSONResponse(await anyio.to_thread.run_sync(health_payload))

        return await guarded(run)

    async def languages(request: Request) -> Response:
        async def run() -> Response:
            flag = request.query_params.get("all", "0").lower()
            if flag not in ("0", "1", "true", "false"):
                raise InvalidRequest(f"all must be 0, 1, true or false; got {flag!r}")
            rows = await anyio.to_thread.run_sync(
                partial(engine.languages, installed_only=flag in ("0", "false"))
            )
            return JSONResponse([asdict(row) for row in rows])

        return await guarded(run)

    async def openapi_json(request: Request) -> Response:
        return JSONResponse(openapi)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        message = {
            404: f"no route {request.url.path}; routes: POST /translate, GET /health, GET /languages, "
            "GET /openapi.json",
            405: f"{request.method} is not allowed on {request.url.path}",
        }.get(exc.status_code, str(exc.detail))
        return JSONResponse(
            {"error": message, "code": code}, status_code=exc.status_code, headers=exc.headers
        )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        try:
            yield
        finally:
            pool.shutdown()

    app = Starlette(
        routes=[
            Route("/translate", translate, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
            Route("/languages", languages, methods=["GET"]),
            Route("/openapi.json", openapi_json, methods=["GET"]),
        ],
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )
    app.router.redirect_slashes = False  # "/translate/" is a JSON 404, not a redirect
    app.add_middleware(Gate, hosts=extra_hosts, origins=allowed_origins, token=token)
    app.state.pool = pool
    app.state.settings = settings
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


def _uvicorn_server(app: ASGIApp, timeout: float) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,  # our gate logs method, path, status and ms, never bodies
        lifespan="on",
        server_header=False,
        timeout_graceful_shutdown=int(timeout) + 5,
    )
    return uvicorn.Server(config)


class BackgroundDaemon:
    """The daemon in a thread of this process, on a free loopback port: for tests, benchmarks, examples.

    ``with BackgroundDaemon(app) as daemon: httpx.get(daemon.url + "/health")``.
    """

    def __init__(
        self, app: ASGIApp, *, host: str = "127.0.0.1", port: int = 0, timeout: float = 30.0
    ) -> None:
        self._sock = bind_socket(host, port)
        self.port: int = self._sock.getsockname()[1]
        self.url = f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"
        self.server = _uvicorn_server(app, timeout)
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    def __enter__(self) -> BackgroundDaemon:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the background daemon did not start")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout)

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Stop(Exception):
    """Raised by our SIGTERM handler once uvicorn has shut down gracefully and re-raises the signal."""


def _log_to_stderr() -> None:
    """Startup lines and the access log on stderr, whatever the root logger's level."""
    logger = logging.getLogger("dragoman.server")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


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
    ``DRAGOMAN_ALLOWED_ORIGINS``). Raises :class:`PortInUse` or :class:`InvalidRequest`.
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
    _log_to_stderr()
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
    server = _uvicorn_server(app, timeout)
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
        server.run(sockets=[sock])
    except (_Stop, KeyboardInterrupt):
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        remove_daemon_file(path)
        sock.close()
        engine.close()
        log.info("dragoman daemon stopped")
    return 0
