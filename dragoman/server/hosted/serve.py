"""``dragoman hosted serve``: the hosted service on one machine (HOSTED.md's embedded default).

Migrates the database (Alembic, :func:`dragoman.service.migrate.upgrade`), builds the app
(:func:`~dragoman.server.hosted.app.create_app`, whose lifespan starts the in-process job runner — which
re-queues the jobs of a process that died — and the webhook dispatcher), and runs it under uvicorn with the
daemon's connection bounds (:mod:`dragoman.server.daemon._protocol`), until SIGTERM or SIGINT; in-flight
requests finish, the runner's workers stop between chunks (their jobs go back to the queue when their lease
runs out) and the dispatcher stops. With ``DRAGOMAN_DISPATCH=procrastinate`` (PostgreSQL) it also applies
Procrastinate's schema and starts neither the runner nor the dispatcher: each job is deferred to
Procrastinate in the transaction of its row and ``dragoman hosted worker`` processes run jobs and deliver
webhooks (:mod:`dragoman.service.worker`).

The hosted service is meant to be reachable (behind a proxy that terminates TLS): it listens where
``--host`` / ``DRAGOMAN_HOSTED_HOST`` says (default 127.0.0.1) and authenticates every v1 and v2 route that
costs something with API keys. A request's head and body must arrive within :data:`BODY_DEADLINE_SECONDS`
(a 200 MB upload at 1 MB/s fits).
"""

from __future__ import annotations

import logging
import os
import signal
from typing import TYPE_CHECKING

from dragoman.server.daemon._protocol import ConnectionLimits
from dragoman.server.daemon.app import _log_to_stderr, bind_socket, uvicorn_server
from dragoman.server.hosted.app import create_app
from dragoman.service import dispatch, migrate
from dragoman.service.db import Database

if TYPE_CHECKING:
    from dragoman.settings import Settings

log = logging.getLogger("dragoman.server")

#: Seconds a request's line, headers and body may take to arrive (the daemon's 10 s would cut uploads).
BODY_DEADLINE_SECONDS = 300.0
#: Connections held open at once.
MAX_CONNECTIONS = 1000
#: Seconds an engine call of a request may take (504 beyond).
REQUEST_TIMEOUT = 60.0


class _Stop(Exception):
    pass


def serve(settings: Settings, *, host: str | None = None, port: int | None = None) -> int:
    """Run the hosted service until SIGTERM/SIGINT; returns the exit status (0)."""
    hosted = settings.hosted
    host = host or hosted.hosted_host
    port = hosted.hosted_port if port is None else port
    handler = _log_to_stderr()
    db = Database.from_settings(hosted)
    revision = migrate.upgrade(db)
    if hosted.dispatch == dispatch.PROCRASTINATE:
        dispatch.apply_schema(db)  # idempotent; the jobs are run by `dragoman hosted worker` processes
    sock = bind_socket(host, port)
    bound = int(sock.getsockname()[1])
    # Engine threads as the local daemon's (DRAGOMAN_SERVE_WORKERS, default min(4, cores)), not the app's 2.
    app = create_app(settings, db=db, request_timeout=REQUEST_TIMEOUT, max_workers=settings.daemon.workers)
    limits = ConnectionLimits(max_connections=MAX_CONNECTIONS, header_timeout=BODY_DEADLINE_SECONDS)
    server = uvicorn_server(app, REQUEST_TIMEOUT, limits)

    def on_term(signum: int, frame: object) -> None:
        raise _Stop()

    previous = signal.signal(signal.SIGTERM, on_term)
    shown = f"[{host}]" if ":" in host else host
    try:
        log.info(
            "dragoman hosted service on http://%s:%d (pid %d, schema %s, data in %s)",
            shown,
            bound,
            os.getpid(),
            revision,
            hosted.data_dir,
        )
        if handler is not None:
            handler.flush()
        server.run(sockets=[sock])
    except (_Stop, KeyboardInterrupt):
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        sock.close()
        db.dispose()
        log.info("dragoman hosted service stopped")
        if handler is not None:
            handler.flush()
    return 0
