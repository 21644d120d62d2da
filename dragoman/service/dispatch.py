"""How a queued job reaches a worker (HOSTED.md "jobs"; ``DRAGOMAN_DISPATCH``): the seam between the front
door (and anything else that submits jobs) and whatever runs them.

- ``inprocess`` (the embedded default): :class:`InProcessDispatch` owns the in-process
  :class:`~dragoman.service.runner.JobRunner`; a submission needs nothing in its transaction and wakes the
  runner after the commit.
- ``procrastinate`` (the scaled deployment, PostgreSQL only): :class:`ProcrastinateDispatch` defers one
  Procrastinate job per queued job **in the transaction that inserts the job's row**, by calling
  Procrastinate's own SQL function ``procrastinate_defer_jobs_v1`` on that SQLAlchemy connection (no second
  connection: commit keeps both rows, a rollback leaves neither). Workers (``dragoman hosted worker``,
  :mod:`dragoman.service.worker`) run them. The API process runs no job and no webhook delivery.

A Procrastinate job only *carries* the work: its arguments are ``{"job_id": …}``; its queue is the job's
product (:data:`QUEUES`: translate, tts, subtitle, dub; webhooks and maintenance hold the worker's own
tasks); its ``queueing_lock`` is the job id, so at most one of them waits (``todo``) per job. Status,
credits, leases and retries stay in the jobs table (:mod:`dragoman.service.jobs`): the task claims the job
by a compare-and-set, so a Procrastinate job that runs twice (a stalled one retried, a duplicate from
:func:`defer_orphans`) runs the work once. :func:`defer_orphans` (the worker's periodic maintenance) defers
every due ``queued`` job that has no waiting Procrastinate job: one whose worker died and whose lease was
re-queued, one submitted while dispatch was ``inprocess``, a retry whose re-deferral was lost.

:func:`apply_schema` creates Procrastinate's tables and functions (``dragoman hosted migrate`` runs it when
dispatch is ``procrastinate``), or brings an existing schema to the installed Procrastinate's version by the
migration scripts it lacks (:mod:`dragoman.service.procrastinate_schema` keeps the record): under an advisory
lock, nothing done when it is up to date.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from sqlalchemy import Connection, bindparam, text
from sqlalchemy.exc import IntegrityError

from dragoman.errors import ConfigError
from dragoman.service.db import Database, now_ms

if TYPE_CHECKING:
    from dragoman.service.jobs import Handler, JobRecord
    from dragoman.service.procrastinate_schema import SchemaChange
    from dragoman.service.runner import JobRunner
    from dragoman.service.storage import Storage
    from dragoman.settings import HostedSettings

log = logging.getLogger(__name__)

INPROCESS, PROCRASTINATE = "inprocess", "procrastinate"
#: Procrastinate queues: one per product, then the worker's own (webhook delivery, periodic maintenance).
PRODUCT_QUEUES = ("translate", "tts", "subtitle", "dub")
WEBHOOKS_QUEUE, MAINTENANCE_QUEUE = "webhooks", "maintenance"
QUEUES = (*PRODUCT_QUEUES, WEBHOOKS_QUEUE, MAINTENANCE_QUEUE)
#: The Procrastinate task that runs one of our jobs (:func:`dragoman.service.worker.make_app` registers it).
RUN_JOB_TASK = "dragoman.run_job"
#: Most orphans :func:`defer_orphans` defers in one call.
ORPHANS_PER_ROUND = 500
#: The advisory lock key under which :func:`apply_schema` runs (two migrating processes: one applies).
SCHEMA_LOCK_KEY = 0x64726167_6F6D616E & 0x7FFFFFFFFFFFFFFF  # procrastinate_schema.LOCK_KEY


def queue_for(kind: str) -> str:
    """The Procrastinate queue of a job kind (its product)."""
    if kind not in PRODUCT_QUEUES:
        raise ValueError(f"no queue for job kind {kind!r}")
    return kind


def parse_queues(text_value: str | None) -> list[str]:
    """``"translate,webhooks"`` → the queue names (all of :data:`QUEUES` for None or empty); unknown names
    are a :class:`ConfigError`."""
    if not text_value:
        return list(QUEUES)
    names = [name.strip() for name in text_value.split(",") if name.strip()]
    unknown = [name for name in names if name not in QUEUES]
    if unknown or not names:
        raise ConfigError(
            f"unknown queue(s) {', '.join(unknown) or '(none)'}; the queues: {', '.join(QUEUES)}"
        )
    return list(dict.fromkeys(names))


def conninfo(database_url: str) -> str:
    """The libpq connection string of a SQLAlchemy PostgreSQL URL (``postgresql+psycopg://…`` →
    ``postgresql://…``), for Procrastinate's psycopg connector."""
    from sqlalchemy.engine import make_url

    url = make_url(database_url)
    if url.get_backend_name() != "postgresql":
        raise ConfigError(
            "DRAGOMAN_DISPATCH=procrastinate needs PostgreSQL (DRAGOMAN_DB_URL=postgresql+psycopg://…), "
            f"not {url.get_backend_name()}"
        )
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


# ----- deferring, in the caller's transaction -----------------------------------------------------------
def _scheduled_at(run_after_ms: int, now: int) -> datetime | None:
    return datetime.fromtimestamp(run_after_ms / 1000, UTC) if run_after_ms > now else None


def defer(conn: Connection, items: Sequence[tuple[str, str, int]]) -> list[int]:
    """Defer a Procrastinate job for each ``(job_id, kind, run_after_ms)`` in ``conn``'s transaction (see
    the module's notes); returns their Procrastinate ids. Raises IntegrityError when one of these jobs
    already has a waiting Procrastinate job (its queueing lock)."""
    if not items:
        return []
    now = now_ms()
    rows = []
    params: dict[str, object] = {}
    for n, (job_id, kind, run_after_ms) in enumerate(items):
        rows.append(
            f"ROW(:q{n}, :t{n}, 0, NULL, :l{n}, CAST(:a{n} AS jsonb), CAST(:s{n} AS timestamptz))"
            "::procrastinate_job_to_defer_v1"
        )
        params |= {
            f"q{n}": queue_for(kind),
            f"t{n}": RUN_JOB_TASK,
            f"l{n}": job_id,
            f"a{n}": json.dumps({"job_id": job_id}),
            f"s{n}": _scheduled_at(run_after_ms, now),
        }
    statement = text(f"SELECT procrastinate_defer_jobs_v1(ARRAY[{', '.join(rows)}])")
    ids = conn.execute(statement, params).scalar()
    return [int(i) for i in ids or []]


def defer_jobs(conn: Connection, made: Sequence[JobRecord]) -> list[int]:
    """:func:`defer` for jobs just submitted in ``conn``'s transaction (synchronous ones are skipped: the
    front door runs them inline)."""
    return defer(conn, [(j.id, j.kind, j.run_after_ms) for j in made if not j.sync])


def defer_if_waiting(db: Database, job_id: str) -> bool:
    """Defer ``job_id`` again when it is ``queued`` (a retry after a back-off, a job put back by a stopping
    worker) and has no waiting Procrastinate job; whether one was deferred."""
    return bool(_defer_queued(db, job_id=job_id))


def defer_orphans(db: Database, *, limit: int = ORPHANS_PER_ROUND) -> int:
    """Defer every ``queued`` job that has no waiting Procrastinate job (see the module's notes); how
    many were deferred."""
    return _defer_queued(db, limit=limit)


def _defer_queued(db: Database, *, job_id: str | None = None, limit: int = 1) -> int:
    where = "AND j.id = :job_id" if job_id is not None else ""
    query = text(
        "SELECT j.id, j.kind, j.run_after_ms FROM jobs j "
        "WHERE j.status = 'queued' AND NOT j.sync AND j.lease_owner IS NULL "
        f"{where} "
        "AND NOT EXISTS (SELECT 1 FROM procrastinate_jobs p "
        "WHERE p.queueing_lock = j.id AND p.status = 'todo') "
        "ORDER BY j.created_ms LIMIT :limit"
    ).bindparams(bindparam("limit"))
    params: dict[str, object] = {"limit": limit}
    if job_id is not None:
        params["job_id"] = job_id
    deferred = 0
    with db.write() as conn:
        rows = conn.execute(query, params).all()
        for found, kind, run_after_ms in rows:
            if kind not in PRODUCT_QUEUES:
                continue
            try:
                with conn.begin_nested():  # a racing deferrer won the queueing lock: fine
                    defer(conn, [(str(found), str(kind), int(run_after_ms))])
                deferred += 1
            except IntegrityError:
                continue
    if deferred and job_id is None:
        log.info("deferred %d queued job(s) that had no Procrastinate job", deferred)
    return deferred


# ----- the schema ---------------------------------------------------------------------------------------
def schema_applied(db: Database) -> bool:
    """Whether Procrastinate's tables exist in ``db``."""
    with db.read() as conn:
        return conn.execute(text("SELECT to_regclass('procrastinate_jobs')")).scalar() is not None


def apply_schema(db: Database) -> bool:
    """Bring Procrastinate's schema to the installed version: create it when missing (``procrastinate schema
    --apply``), else apply the migration scripts it lacks
    (:func:`dragoman.service.procrastinate_schema.upgrade`); whether it was created now. Two processes
    migrating at once: an advisory lock lets one do it."""
    return migrate_schema(db).created


def migrate_schema(db: Database) -> SchemaChange:
    """What :func:`apply_schema` does, with what it did (created, scripts recorded, scripts applied)."""
    from dragoman.service import procrastinate_schema

    return procrastinate_schema.upgrade(db)


# ----- the seam -----------------------------------------------------------------------------------------
class Dispatch(Protocol):
    """What the front door calls: :meth:`submitted` inside the transaction that inserted the jobs,
    :meth:`committed` after it committed. ``runner``: the in-process runner to start and stop, if any."""

    mode: str
    runner: JobRunner | None

    def submitted(self, conn: Connection, made: Sequence[JobRecord]) -> None: ...

    def committed(self) -> None: ...


class InProcessDispatch:
    """The embedded default: the in-process runner claims queued jobs itself; a submission wakes it."""

    mode = INPROCESS

    def __init__(self, runner: JobRunner) -> None:
        self.runner: JobRunner | None = runner

    def submitted(self, conn: Connection, made: Sequence[JobRecord]) -> None:
        return None

    def committed(self) -> None:
        if self.runner is not None:
            self.runner.wake()


class ProcrastinateDispatch:
    """The scaled deployment: a Procrastinate job per queued job, deferred in the submitting transaction."""

    mode = PROCRASTINATE
    runner: JobRunner | None = None

    def submitted(self, conn: Connection, made: Sequence[JobRecord]) -> None:
        defer_jobs(conn, made)

    def committed(self) -> None:
        return None  # the insert's NOTIFY (Procrastinate's trigger) wakes the workers at the commit


def make_dispatch(
    settings: HostedSettings, db: Database, handlers: Mapping[str, Handler], storage: Storage
) -> Dispatch:
    """The dispatch ``settings.dispatch`` names (``procrastinate`` needs a PostgreSQL database)."""
    if settings.dispatch == PROCRASTINATE:
        if db.is_sqlite:
            raise ConfigError(
                "DRAGOMAN_DISPATCH=procrastinate needs PostgreSQL (DRAGOMAN_DB_URL=postgresql+psycopg://…)"
            )
        return ProcrastinateDispatch()
    from dragoman.service.runner import JobRunner

    return InProcessDispatch(JobRunner(db, handlers, storage, settings))
