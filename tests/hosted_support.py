"""The hosted service's test helpers (the fixtures are in ``tests/hosted/conftest.py``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from db_support import BACKENDS, DbBackend
from support import isolated_settings

from dragoman.server.hosted.app import create_app
from dragoman.service import accounts, migrate
from dragoman.service.db import Database
from dragoman.settings import Settings
from dragoman.testing.daemon import BackgroundDaemon

if TYPE_CHECKING:
    from dragoman.testing.postgres import PostgresServer
    from dragoman.testing.s3_server import S3Server
    from dragoman.translation.engine import Engine


@dataclass
class Hosted:
    """A running hosted service and what a test needs to talk to it."""

    url: str
    db: Database
    settings: Settings
    daemon: BackgroundDaemon
    app: Any
    account_id: str
    key: str
    key_id: str
    made: list[str] = field(default_factory=list)
    worker: WorkerThread | None = None  # the scaled mode's Procrastinate worker

    def client(self, key: str | None = None, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key or self.key}"} if key != "" else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60, **kwargs)

    def new_key(self, *, credits: int | None = None, plan: str = "pro", **options: Any) -> tuple[str, str]:
        """A key (and its id) of a fresh account with ``credits`` live credits (default plenty)."""
        account = accounts.create_account(
            self.db, plan=plan, credits=100_000 if credits is None else credits, test_credits=1_000
        )
        made = accounts.create_key(self.db, account.id, **options)
        return made.key, made.key_id

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.stop()
        self.daemon.stop()


StartHosted = Callable[..., Hosted]


def start_service(
    engine: Engine,
    root: Path,
    data_dir: Path,
    *,
    rate: int = 60,
    workers: bool = True,
    recognizer: Any = None,
    asr_model: str | None = None,
    synthesizer: Any = None,
    dubber: Any = None,
    **values: Any,
) -> Hosted:
    """A hosted service over ``engine`` (whose packs are under ``root``) with its data in ``data_dir`` (the
    same folder again: a restart on the same database), a test account and a key; running until stopped.
    ``recognizer`` and ``asr_model``: what subtitle jobs recognise with (the tiny Whisper in tests)."""
    settings = isolated_settings(root, apertium=True).replace(
        data_dir=data_dir, webhooks_allow_private=True, **values
    )
    db = Database.from_settings(settings.hosted)
    migrate.upgrade(db)
    app = create_app(
        settings,
        engine,
        db=db,
        rate_per_minute=rate,
        request_timeout=60,
        start_workers=workers,
        recognizer=recognizer,
        asr_model=asr_model,
        synthesizer=synthesizer,
        dubber=dubber,
    )
    daemon = BackgroundDaemon(app).__enter__()
    account = accounts.create_account(db, name="test", plan="pro", credits=100_000, test_credits=5_000)
    made = accounts.create_key(db, account.id)
    return Hosted(daemon.url, db, settings, daemon, app, account.id, made.key, made.key_id)


def make_engine(root: Path) -> Engine:
    """The tests' engine (provenance 'server'): Apertium eng<->spa and a tiny CTranslate2 pack en->de built
    under ``root/packs``; close it when done."""
    from dragoman.testing.tinypack import build_argos_pack
    from dragoman.translation.engine import Engine

    build_argos_pack(root / "packs" / "translate-en_de", "en", "de")
    return Engine(isolated_settings(root, apertium=True), provenance="server")


class Receiver:
    """A webhook receiver on loopback recording each delivery's headers and raw body."""

    def __init__(self) -> None:
        received: list[tuple[dict[str, str], bytes]] = []
        self.received = received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                received.append((dict(self.headers.items()), self.rfile.read(length)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait(self, count: int = 1, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(self.received) >= count, "no webhook delivered"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# ----- the scaled mode (issue 13): PostgreSQL + Procrastinate + Redis + S3 ----------------------------------
class ScaledBackend(DbBackend):
    """``db_backend``'s ``scaled`` mode (tests marked ``scaled``; tests/hosted/conftest.py): the session's
    PostgreSQL, and for the service ``DRAGOMAN_DISPATCH=procrastinate`` with a Procrastinate worker in a
    thread of the test process (:class:`WorkerThread`), the limiter on the session's Redis and the files in a
    fresh bucket of the session's moto S3 server."""

    def __init__(self, server: PostgresServer, redis_url: str, s3: S3Server) -> None:
        super().__init__("postgresql", server)
        self.redis_url = redis_url
        self.s3 = s3

    def service_options(self, db_url: str) -> dict[str, Any]:
        """The settings of a scaled service over ``db_url`` (Procrastinate's schema applied to it)."""
        from dragoman.service import dispatch

        db = Database(db_url)
        try:
            dispatch.apply_schema(db)
        finally:
            db.dispose()
        return {
            "dispatch": "procrastinate",
            "ratelimit_uri": self.redis_url,
            "store_url": f"s3://{self.s3.create_bucket()}/svc",
            "s3_endpoint": self.s3.endpoint,
            "s3_region": "us-east-1",
        }


class WorkerThread:
    """A ``dragoman hosted worker`` inside the test process: :class:`dragoman.service.worker.HostedWorker`
    over the service's database, store and handlers (the session's engine), its Procrastinate worker on an
    event loop of its own thread; :meth:`stop` cancels it (Procrastinate's graceful stop). It serves every
    queue (translate, tts, subtitle, dub, webhooks, maintenance) with the app's own handlers (the recognizer,
    dubber and synthesizer the test gave the service)."""

    QUEUES = ("translate", "tts", "subtitle", "dub", "webhooks", "maintenance")

    def __init__(self, hosted: Hosted) -> None:
        from dragoman.service.worker import HostedWorker

        state = hosted.app.state
        handlers = dict(state.job_handlers)
        self.worker = HostedWorker(
            hosted.settings, self.QUEUES, handlers=handlers, db=hosted.db, storage=state.storage, stalled_s=30
        )
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="dragoman-test-worker", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        import asyncio
        import contextlib

        async def work() -> None:
            async with self.worker.app.open_async():
                task = asyncio.ensure_future(
                    self.worker.app.run_worker_async(
                        queues=list(self.QUEUES),
                        name=self.worker.owner,
                        install_signal_handlers=False,
                        delete_jobs="successful",
                        shutdown_graceful_timeout=5,
                        fetch_job_polling_interval=0.5,
                    )
                )
                while not self._stop.is_set() and not task.done():
                    await asyncio.sleep(0.05)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

        self.worker.runner.start()
        if self.worker.dispatcher is not None:
            self.worker.dispatcher.start()
        try:
            asyncio.run(work())
        except BaseException as exc:  # reported by stop()
            self.error = exc
        finally:
            self.worker.close()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive(), "the test worker did not stop"
        assert self.error is None, repr(self.error)


# ----- one started service per mode, for the function-scoped fixtures and the module-scoped fuzz suite -----
#: The hosted tests' third mode (besides :data:`db_support.BACKENDS`): PostgreSQL, Procrastinate, Redis, S3.
SCALED = "scaled"


def hosted_modes(*, scaled: bool) -> list[Any]:
    """The modes a hosted test runs in: ``sqlite`` and ``postgresql``, and ``scaled`` (marked slow) when
    ``scaled``; the parameters of ``db_backend`` (tests/hosted/conftest.py) and of the fuzz suite's
    fixture."""
    modes: list[Any] = list(BACKENDS)
    if scaled:
        modes.append(pytest.param(SCALED, marks=pytest.mark.slow))
    return modes


def backend_for_mode(request: pytest.FixtureRequest, mode: str, env: pytest.MonkeyPatch) -> DbBackend:
    """The backend of ``mode`` (one of :func:`hosted_modes`): the session's PostgreSQL server is started
    (or the test skipped, saying why) for ``postgresql`` and ``scaled``, and for ``scaled`` the session's
    Redis and moto S3 server too (``scaled_services``), their AWS_* credentials set through ``env``."""
    if mode == SCALED:
        redis_url, s3 = request.getfixturevalue("scaled_services")
        backend: DbBackend = ScaledBackend(request.getfixturevalue("postgres_server"), redis_url, s3)
        for name, value in s3.environ.items():  # S3 credentials come from the standard AWS_* variables
            env.setenv(name, value)
        return backend
    server = request.getfixturevalue("postgres_server") if mode == "postgresql" else None
    return DbBackend(mode, server)


def start_on_backend(
    backend: DbBackend, engine: Engine, root: Path, data_dir: Path, **options: Any
) -> Hosted:
    """:func:`start_service` on ``backend`` (its database for ``data_dir`` unless ``db_url`` is given); on
    a :class:`ScaledBackend` with the scaled settings and, unless ``workers=False``, a
    :class:`WorkerThread` (stopped by :meth:`Hosted.stop`)."""
    if backend.is_postgres and options.get("db_url") is None:
        options["db_url"] = backend.url(data_dir)
    scaled = isinstance(backend, ScaledBackend)
    if isinstance(backend, ScaledBackend):
        options = {**backend.service_options(options["db_url"]), **options}
    service = start_service(engine, root, data_dir, **options)
    if scaled and options.get("workers", True):
        try:
            service.worker = WorkerThread(service)
        except BaseException:
            service.stop()
            service.db.dispose()
            raise
    return service
