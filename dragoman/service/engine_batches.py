"""Batches whose children share one **engine job** (issue 15's subtitles, issue 16's dubs): the machinery
both :mod:`dragoman.service.subtitle_jobs` and :mod:`dragoman.service.dub_jobs` use.

A batch of this shape is one engine job (params ``role: engine``; the only job a worker claims; it sends no
webhook of its own) and its child jobs (what the client sees: charged, refunded, polled, downloaded and
canceled one by one). While the engine job has not started, its children wait ``queued`` under the pseudo
lease owner ``<prefix><engine id>`` (a claim and Procrastinate's orphan sweep skip queued jobs with an
owner); the engine job moves them to ``active`` when it starts (no lease expiry: the expired-lease sweep
skips them) and ends each one through the ordinary compare-and-set transitions of :mod:`~dragoman.service.
jobs` under that owner. :class:`EngineBatch` holds the kind and the owner prefix of one product; everything
here is the same for every product.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, and_, func, select, update

from dragoman.errors import Cancelled, DragomanError, InvalidRequest, JobNotFound
from dragoman.progress import CancelToken, JobContext
from dragoman.service import jobs
from dragoman.service.db import Database, now_ms
from dragoman.service.db import jobs as jobs_table
from dragoman.service.jobs import Handler, JobOutcome, JobRecord

if TYPE_CHECKING:
    from dragoman.service.storage import Storage

log = logging.getLogger("dragoman.service.engine_batches")

ROLE_ENGINE, ROLE_CHILD = jobs.ENGINE_ROLE, "child"
QUEUED_STAGE = "queued"


def per_minute(duration_ms: int, credits_per_minute: int) -> int:
    """``ceil(credits_per_minute x seconds / 60)`` on whole milliseconds (exact; at least 1 for any media)."""
    if duration_ms <= 0:
        return 0
    return max(1, -(-duration_ms * credits_per_minute // 60_000))


def summary(job: JobRecord | None) -> dict[str, Any]:
    """A job's JSON ``result`` as a dict (empty when it has none)."""
    return job.result_object() if job is not None else {}


def scaled(context: JobContext, start: int, span: int) -> JobContext:
    """``context`` whose progress ``done/total`` lands in ``start .. start+span`` percent of the job."""

    def progress(done: int, total: int, message: str) -> None:
        share = (done * span) // total if total > 0 else 0
        context.progress(start + max(0, min(span, share)), 100, message)

    return JobContext(progress=progress, cancel=context.cancel, deadline=context.deadline)


def delete_keys(storage: Storage, keys: Iterable[str]) -> None:
    """Delete stored files, logging (not raising) a failure."""
    for key in keys:
        try:
            storage.delete(key)
        except Exception:
            log.warning("could not delete %s", key, exc_info=True)


def error_message(exc: BaseException) -> str:
    """What a job's ``error`` says of ``exc``: our message, or the type of an unexpected failure."""
    return exc.message if isinstance(exc, DragomanError) else f"internal error: {type(exc).__name__}"


@dataclass(frozen=True)
class EngineBatch:
    """The engine-job batches of one job ``kind``, whose children wait under ``owner_prefix + engine id``."""

    kind: str
    owner_prefix: str
    #: What the engine job does, as a failed child's error names it ("the batch's <run> ended ...").
    run_name: str = "shared run"

    def child_owner(self, engine_id: str) -> str:
        return f"{self.owner_prefix}{engine_id}"

    # ----- writing ------------------------------------------------------------------------------------------
    def park(self, conn: Connection, engine: JobRecord, child_ids: list[str], **params: Any) -> JobRecord:
        """Park the just-submitted children under ``engine`` (in ``conn``'s transaction) and record them (and
        ``params``) in the engine job's params; the engine job as it now is."""
        conn.execute(
            update(jobs_table)
            .where(jobs_table.c.id.in_(child_ids), jobs_table.c.status == jobs.QUEUED)
            .values(lease_owner=self.child_owner(engine.id), lease_expires_ms=None)
        )
        conn.execute(
            update(jobs_table)
            .where(jobs_table.c.id == engine.id)
            .values(params={**engine.params, **params, "children": child_ids})
        )
        return load(conn, engine.id)

    # ----- the engine job's side ----------------------------------------------------------------------------
    def activate_children(self, db: Database, engine_id: str) -> int:
        """``queued → active`` for the children parked under ``engine_id`` (its run starts, or it ended and
        they are to be failed); how many moved."""
        with db.write() as conn:
            now = now_ms()
            return int(
                conn.execute(
                    update(jobs_table)
                    .where(
                        jobs_table.c.lease_owner == self.child_owner(engine_id),
                        jobs_table.c.status == jobs.QUEUED,
                    )
                    .values(
                        status=jobs.ACTIVE,
                        attempts=jobs_table.c.attempts + 1,
                        started_ms=func.coalesce(jobs_table.c.started_ms, now),
                    )
                ).rowcount
                or 0
            )

    def pending_children(self, db: Database, engine: JobRecord) -> list[JobRecord]:
        """The children still to make (active under the engine job), in submission order."""
        with db.read() as conn:
            rows = (
                conn.execute(
                    select(jobs_table)
                    .where(
                        jobs_table.c.lease_owner == self.child_owner(engine.id),
                        jobs_table.c.status == jobs.ACTIVE,
                    )
                    .order_by(jobs_table.c.created_ms, jobs_table.c.id)
                )
                .mappings()
                .all()
            )
        return [JobRecord.from_row(r) for r in rows]

    def still_pending(self, db: Database, engine: JobRecord, child_id: str) -> bool:
        """Whether ``child_id`` is still the engine job's to make (not canceled meanwhile)."""
        with db.read() as conn:
            status = conn.execute(
                select(jobs_table.c.status).where(
                    and_(jobs_table.c.id == child_id, jobs_table.c.lease_owner == self.child_owner(engine.id))
                )
            ).scalar()
        return status == jobs.ACTIVE

    @contextlib.contextmanager
    def child_context(
        self, db: Database, engine: JobRecord, child_id: str, context: JobContext, *, every_s: float = 0.5
    ) -> Iterator[JobContext]:
        """``context`` for the work on one child that is also cancelled when the child is (canceled by its
        client: it is no longer pending under the engine job), looked at every ``every_s`` seconds by a
        watcher thread; the engine job's own cancellation passes through."""
        token = CancelToken()
        stop = threading.Event()

        def watch() -> None:
            while not stop.wait(every_s):
                if context.cancel.cancelled:
                    token.cancel(context.cancel.reason)
                    return
                try:
                    pending = self.still_pending(db, engine, child_id)
                except Exception:  # the database is busy: look again next time
                    continue
                if not pending:
                    token.cancel(f"job {child_id} was canceled")
                    return

        watcher = threading.Thread(target=watch, name=f"watch-{child_id[:8]}", daemon=True)
        watcher.start()
        try:
            yield JobContext(progress=context.progress, cancel=token, deadline=context.deadline)
        finally:
            stop.set()
            watcher.join(timeout=5)

    def set_stage(self, db: Database, engine: JobRecord, stage: str, **info: Any) -> None:
        """Record the batch's stage (and what is known) as the running engine job's ``result``."""
        state = {"stage": stage, **info}
        with db.write() as conn:
            conn.execute(
                update(jobs_table)
                .where(
                    jobs_table.c.id == engine.id,
                    jobs_table.c.status == jobs.ACTIVE,
                    jobs_table.c.lease_owner == engine.lease_owner,
                )
                .values(result=json.dumps(state, ensure_ascii=False))
            )

    def fail_children(self, db: Database, engine_id: str, error: str) -> int:
        """Fail every child still pending under ``engine_id`` (each refunded, its ``<kind>.failed`` event, and
        the batch completed by the last); how many."""
        owner = self.child_owner(engine_id)
        self.activate_children(db, engine_id)
        with db.read() as conn:
            ids = list(
                conn.execute(
                    select(jobs_table.c.id).where(
                        jobs_table.c.lease_owner == owner, jobs_table.c.status == jobs.ACTIVE
                    )
                ).scalars()
            )
        failed = 0
        for child_id in ids:
            failed += jobs.fail(db, child_id, owner, error, retryable=False) is not None
        return failed

    def reconcile(self, db: Database, engine_ids: Iterable[str] | None = None) -> int:
        """Fail the children whose engine job ended without producing them (canceled, or failed by the
        expired-lease sweep after its worker died on its last attempt); how many. ``engine_ids`` None: every
        batch of the kind (the hourly retention purge calls it so)."""
        with db.read() as conn:
            query = select(jobs_table.c.id, jobs_table.c.status).where(
                jobs_table.c.kind == self.kind, jobs_table.c.status.in_(sorted(jobs.TERMINAL))
            )
            if engine_ids is not None:
                wanted = sorted(set(engine_ids))
                if not wanted:
                    return 0
                query = query.where(jobs_table.c.id.in_(wanted))
            else:
                pending_owner = select(jobs_table.c.lease_owner).where(
                    jobs_table.c.kind == self.kind,
                    jobs_table.c.status.in_(sorted(jobs.PENDING)),
                    jobs_table.c.lease_owner.like(f"{self.owner_prefix}%"),
                )
                owners = {str(o)[len(self.owner_prefix) :] for o in conn.execute(pending_owner).scalars()}
                if not owners:
                    return 0
                query = query.where(jobs_table.c.id.in_(sorted(owners)))
            ended = conn.execute(query).all()
        moved = 0
        for engine_id, status in ended:
            moved += self.fail_children(
                db, str(engine_id), f"the batch's {self.run_name} ended ({status}) before this output"
            )
        return moved

    def handler(
        self,
        db: Database,
        run: Callable[[JobRecord, JobContext, Storage], JobOutcome],
        *,
        max_attempts: int,
    ) -> Handler:
        """The runner's handler of the kind's engine jobs around ``run``: a child run alone is refused; an
        engine job canceled by its client fails its children at once; a failure that will not be retried
        (a refusal, an unexpected error on the last attempt) fails every child still pending (refunded)."""

        def handle(job: JobRecord, context: JobContext, storage: Storage) -> JobOutcome:
            if job.params.get("role") != ROLE_ENGINE:
                raise InvalidRequest(
                    f"a {self.kind} child job is produced by its batch's engine job, not run alone"
                )
            try:
                return run(job, context, storage)
            except Cancelled:
                if jobs.status_of(db, job.id) in jobs.TERMINAL:  # canceled by its client: children fail now
                    self.reconcile(db, [job.id])
                raise
            except BaseException as exc:
                final = (
                    not isinstance(exc, Exception)
                    or (isinstance(exc, DragomanError) and exc.status < 500)
                    or job.attempts >= max_attempts
                )
                if final and not context.cancel.cancelled:
                    self.fail_children(db, job.id, error_message(exc))
                raise

        return handle

    # ----- reading ------------------------------------------------------------------------------------------
    def view(self, db: Database, key_id: str, job_id: str) -> BatchView:
        """The job ``job_id`` of ``key_id`` (of this kind) with its engine job and siblings (404 otherwise);
        an engine job that ended without its children first fails them (:meth:`reconcile`)."""
        job = jobs.get(db, key_id, job_id)
        if job.kind != self.kind:
            raise JobNotFound(f"no {self.kind} job {job_id} (a {job.kind} job is at /api/v1/jobs/{job_id})")
        engine_id = (
            job.id if job.params.get("role") == ROLE_ENGINE else str(job.params.get("engine_job") or "")
        )
        with db.read() as conn:
            row = conn.execute(select(jobs_table).where(jobs_table.c.id == engine_id)).mappings().first()
        engine = None if row is None else JobRecord.from_row(row)
        if engine is not None and engine.terminal and not job.terminal and self.reconcile(db, [engine.id]):
            job = jobs.get(db, key_id, job_id)
        batch_id = job.batch_id or (engine.params.get("batch_id") if engine is not None else None)
        children = jobs.batch_children(db, key_id, str(batch_id)) if batch_id else [job]
        return BatchView(job, engine, children)


def load(conn: Connection, job_id: str) -> JobRecord:
    row = conn.execute(select(jobs_table).where(jobs_table.c.id == job_id)).mappings().first()
    assert row is not None
    return JobRecord.from_row(row)


@dataclass(frozen=True)
class BatchView:
    """What a status poll of a child (or of the engine job) shows: the child, its engine job, its batch's
    children (just itself outside a batch)."""

    job: JobRecord
    engine: JobRecord | None
    children: list[JobRecord]

    @property
    def is_engine(self) -> bool:
        return self.job.params.get("role") == ROLE_ENGINE

    @property
    def status(self) -> str:
        """The child's own status once it ended; before, ``queued`` until the batch's engine job works on
        it (and again while that job waits for an automatic retry), then ``active``."""
        if self.job.terminal:
            return self.job.status
        waiting = self.engine is None or jobs.QUEUED in (self.engine.status, self.job.status)
        return jobs.QUEUED if waiting else jobs.ACTIVE

    def stage_or(self, running: str) -> str:
        """The batch's stage: the job's end once terminal, ``queued`` while waiting, else what the engine
        job recorded (``running`` before it recorded anything)."""
        if self.job.terminal:
            return self.job.status
        if self.status == jobs.QUEUED or self.engine is None:
            return QUEUED_STAGE
        found = summary(self.engine).get("stage")
        return str(found) if isinstance(found, str) else running

    @property
    def progress_percent(self) -> int:
        if self.job.status == jobs.DONE:
            return 100
        if self.job.terminal or self.engine is None:
            return self.job.progress_percent
        return 100 if self.engine.status == jobs.DONE else self.engine.progress_percent

    def counts(self) -> dict[str, int]:
        """The batch's children by status."""
        found: dict[str, int] = {}
        for child in self.children:
            found[child.status] = found.get(child.status, 0) + 1
        return found


__all__ = [
    "BatchView",
    "EngineBatch",
    "delete_keys",
    "error_message",
    "per_minute",
    "scaled",
    "summary",
]
