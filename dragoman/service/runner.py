"""The in-process job runner of one machine (HOSTED.md: ``DRAGOMAN_DISPATCH=inprocess``), for every job kind.

``JobRunner(db, handlers, storage, settings)`` runs ``runner_workers`` worker threads. Each claims the oldest
due job of a kind it has a handler for (:func:`jobs.claim`: a lease of ``lease_seconds``), runs the handler
with a :class:`~dragoman.progress.JobContext`, and records its end (:func:`jobs.complete`, :func:`jobs.fail`).
One keeper thread watches the running jobs:

- every ``lease_seconds / 3`` it renews their leases (:func:`jobs.heartbeat`); twice a second it reads their
  rows. A job canceled by its client, or whose lease was lost, has its cancel token set: the handler stops
  at its next :meth:`JobContext.check` (between chunks) and its completion, if it still comes, loses the
  compare-and-set (nothing charged). Files it stored are deleted.
- it re-queues jobs whose lease expired (a worker that died or hung; also once at start: a restart loses
  nothing), and starts the retention purge every hour (on a thread of its own).

Progress: ``ctx.progress(done, total, message)`` becomes ``progress_percent`` (at most 99 until done),
written when it changes and at most every :data:`PROGRESS_EVERY_S`; a write that finds the job no longer
ours cancels the work at once.

Errors: a :class:`~dragoman.errors.DragomanError` with a status below 500 (the input is at fault: 400, 413,
415 …) fails the job at once; anything else (engine errors, timeouts, bugs) is retried with back-off until
``job_attempts`` attempts are made, then fails it (refunded). :meth:`wake` starts work on a job just
submitted without waiting for the next poll; :meth:`stop` cancels running handlers and puts their jobs back
in the queue without counting the attempt.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dragoman.errors import Cancelled, DragomanError
from dragoman.progress import CancelToken, JobContext
from dragoman.service import jobs, retention
from dragoman.service.db import Database, now_ms
from dragoman.service.jobs import Handler, JobOutcome, JobRecord
from dragoman.service.storage import Storage

if TYPE_CHECKING:
    from dragoman.settings import HostedSettings, Settings

__all__ = ["Handler", "JobOutcome", "JobRecord", "JobRunner"]

log = logging.getLogger(__name__)

#: Seconds an idle worker waits before looking for due jobs again (a submit wakes it at once).
POLL_S = 1.0
#: Seconds between the keeper's reads of the running jobs' rows (how soon a cancel reaches the handler).
WATCH_S = 0.5
#: Least seconds between two progress writes of one job.
PROGRESS_EVERY_S = 0.5
#: Seconds between retention purges.
PURGE_EVERY_S = 3600.0

CANCELED_REASON = "the job was canceled"
LOST_REASON = "the job's lease was lost"
STOPPING_REASON = "the job runner is stopping"


@dataclass
class _Running:
    job: JobRecord
    owner: str
    token: CancelToken
    last_progress: float = 0.0
    percent: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class JobRunner:
    """Worker threads over the jobs table (see the module's notes)."""

    def __init__(
        self,
        db: Database,
        handlers: Mapping[str, Handler],
        storage: Storage,
        settings: HostedSettings | Settings,
        owner: str | None = None,
        *,
        poll_s: float = POLL_S,
        watch_s: float = WATCH_S,
        purge_every_s: float | None = PURGE_EVERY_S,
        retry_base_s: float = jobs.RETRY_BASE_S,
        workers: int | None = None,
    ) -> None:
        hosted = retention.hosted_of(settings)
        self.db = db
        self.handlers = dict(handlers)
        self.storage = storage
        self.settings = hosted
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        #: Worker threads; 0: the keeper alone, jobs being run by :meth:`run_claimed` (Procrastinate tasks).
        self.workers = hosted.runner_workers if workers is None else max(0, workers)
        self.lease_s = hosted.lease_seconds
        self.max_attempts = hosted.job_attempts
        self.poll_s = poll_s
        self.watch_s = min(watch_s, self.lease_s / 3)
        self.purge_every_s = purge_every_s  # None: no purge (a periodic task does it)
        self.retry_base_s = retry_base_s
        self._stopping = threading.Event()
        self._wake = threading.Condition()
        self._wakes = 0
        self._idle = 0  # worker threads asleep in their poll wait (under _wake)
        self._threads: list[threading.Thread] = []
        #: Runs by (job id, worker): one runner may hold a job twice for a moment (its own lease expired under
        #: load and another of its workers claimed it again); each run must stay reachable to be cancelled.
        self._running: dict[tuple[str, str], _Running] = {}
        self._running_lock = threading.Lock()
        self._purger: threading.Thread | None = None

    # ----- life -----------------------------------------------------------------------------------------
    def start(self) -> None:
        """Re-queue jobs whose lease expired (this process's predecessor died), then start the threads."""
        if self._threads:
            return
        self._stopping.clear()
        self.requeue_expired()
        for i in range(self.workers):
            thread = threading.Thread(
                target=self._work, args=(f"{self.owner}/{i}",), name=f"job-worker-{i}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        keeper = threading.Thread(target=self._keep, name="job-keeper", daemon=True)
        keeper.start()
        self._threads.append(keeper)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop: running handlers are cancelled and their jobs put back in the queue."""
        self._stopping.set()
        with self._running_lock:
            running = list(self._running.values())
        for run in running:
            run.token.cancel(STOPPING_REASON)
        self.wake()
        deadline = time.monotonic() + timeout
        for thread in [*self._threads, *([self._purger] if self._purger else [])]:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._threads = []

    def wake(self) -> None:
        """Look for work now (a job was just submitted)."""
        with self._wake:
            self._wakes += 1
            self._wake.notify_all()

    def __enter__(self) -> JobRunner:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def idle_workers(self) -> int:
        """Worker threads that found no due job and sleep until the next poll or a :meth:`wake`."""
        with self._wake:
            return self._idle

    @property
    def running(self) -> list[str]:
        """Ids of the jobs being worked on now."""
        with self._running_lock:
            return [job_id for job_id, _ in self._running]

    def run_claimed(self, job: JobRecord, owner: str) -> None:
        """Run ``job``, claimed by the caller under ``owner``'s lease (a Procrastinate task), as a worker
        thread would: the keeper renews its lease and watches for its cancellation while it runs."""
        self._run(job, owner)

    def cancel_run(self, job_id: str, owner: str, reason: str = CANCELED_REASON) -> bool:
        """Set the cancel token of ``owner``'s run of ``job_id`` (its handler stops at its next chunk);
        ``STOPPING_REASON`` puts the job back in the queue. Whether such a run was found."""
        with self._running_lock:
            run = self._running.get((job_id, owner))
        if run is None:
            return False
        run.token.cancel(reason)
        return True

    def requeue_expired(self) -> int:
        try:
            return jobs.requeue_expired(self.db, max_attempts=self.max_attempts)
        except Exception:
            log.exception("re-queueing expired jobs failed")
            return 0

    # ----- workers --------------------------------------------------------------------------------------
    def _work(self, owner: str) -> None:
        kinds = sorted(self.handlers)
        while not self._stopping.is_set():
            with self._wake:
                seen = self._wakes
            try:
                job = jobs.claim(self.db, owner, self.lease_s, kinds)
            except Exception:
                log.exception("claiming a job failed")
                job = None
            if job is None:
                with self._wake:
                    if self._wakes == seen and not self._stopping.is_set():
                        self._idle += 1
                        try:
                            self._wake.wait(self.poll_s)
                        finally:
                            self._idle -= 1
                continue
            self._run(job, owner)

    def _run(self, job: JobRecord, owner: str) -> None:
        run = _Running(job, owner, CancelToken())
        with self._running_lock:
            # stop() sets _stopping, then cancels what it finds here under this lock: a job claimed while it
            # ran (one that a sibling just put back, say) is seen here and goes back unstarted
            stopping = self._stopping.is_set()
            if not stopping:
                self._running[job.id, owner] = run
        if stopping:
            jobs.release(self.db, job.id, owner)
            return
        ctx = JobContext(
            progress=lambda done, total, message: self._progress(run, done, total), cancel=run.token
        )
        try:
            outcome = self.handlers[job.kind](job, ctx, self.storage)
        except Cancelled as exc:
            self._cancelled(run, exc)
        except DragomanError as exc:
            self._failed(run, exc.message, retryable=exc.status >= 500)
        except Exception as exc:
            log.exception("job %s (%s) raised", job.id, job.kind)
            self._failed(run, f"internal error: {type(exc).__name__}: {exc}"[:500], retryable=True)
        else:
            self._completed(run, outcome)
        finally:
            with self._running_lock:
                self._running.pop((job.id, owner), None)

    def _completed(self, run: _Running, outcome: JobOutcome) -> None:
        try:
            done = jobs.complete(self.db, run.job.id, run.owner, outcome)
        except Exception:
            log.exception("recording the end of job %s failed", run.job.id)
            self._failed(run, "internal error while recording the result", retryable=True)
            return
        if done is None:  # canceled meanwhile, or the lease was lost: what it stored is nobody's
            self._discard(run.job, outcome)

    def _failed(self, run: _Running, message: str, *, retryable: bool) -> None:
        if run.token.cancelled:  # the error is the cancellation showing up as something else
            self._cancelled(run, Cancelled(run.token.reason))
            return
        try:
            jobs.fail(
                self.db,
                run.job.id,
                run.owner,
                message,
                retryable=retryable,
                max_attempts=self.max_attempts,
                retry_base_s=self.retry_base_s,
            )
        except Exception:
            log.exception("recording the failure of job %s failed", run.job.id)

    def _cancelled(self, run: _Running, exc: Cancelled) -> None:
        if not run.token.cancelled:  # raised by the work itself, not by us: a failure of the job
            self._failed_plain(run, exc.message)
        elif run.token.reason == STOPPING_REASON:
            jobs.release(self.db, run.job.id, run.owner)
        # canceled by the client (already refunded) or lease lost (re-queued by whoever took it): nothing
        self._discard(run.job, None)

    def _failed_plain(self, run: _Running, message: str) -> None:
        jobs.fail(self.db, run.job.id, run.owner, message, retryable=False, max_attempts=self.max_attempts)

    def _discard(self, job: JobRecord, outcome: JobOutcome | None) -> None:
        """Delete what an abandoned run stored (its outcome's artifacts; ``exports/<job>/`` when the job is
        no longer active, so a run that took over is not robbed)."""
        try:
            for key in outcome.artifacts.values() if outcome else ():
                self.storage.delete(key)
            if jobs.status_of(self.db, job.id) in jobs.TERMINAL:
                self.storage.delete_prefix(f"exports/{job.id}")
        except Exception:
            log.warning("deleting the files of job %s failed", job.id, exc_info=True)

    def _progress(self, run: _Running, done: int, total: int) -> None:
        percent = max(0, min(99, (done * 100) // total)) if total > 0 else 0
        now = time.monotonic()
        with run.lock:
            if percent <= run.percent or now - run.last_progress < PROGRESS_EVERY_S:
                return
            run.percent, run.last_progress = percent, now
        try:
            ours = jobs.set_progress(self.db, run.job.id, run.owner, percent)
        except Exception:
            log.warning("progress of job %s not recorded", run.job.id, exc_info=True)
            return
        if not ours:
            self._lost(run)

    def _lost(self, run: _Running) -> None:
        status = jobs.status_of(self.db, run.job.id)
        run.token.cancel(CANCELED_REASON if status == jobs.CANCELED else LOST_REASON)

    # ----- the keeper -----------------------------------------------------------------------------------
    def _keep(self) -> None:
        heartbeat_every = self.lease_s / 3
        requeue_every = max(self.lease_s / 2, self.watch_s)
        last_beat = last_requeue = time.monotonic()
        next_purge = time.monotonic()  # a purge soon after start, then hourly
        while not self._stopping.wait(self.watch_s):
            now = time.monotonic()
            try:
                if now - last_beat >= heartbeat_every:
                    last_beat = now
                    self._heartbeat()
                else:
                    self._watch()
                if now - last_requeue >= requeue_every:
                    last_requeue = now
                    self.requeue_expired()
                if (
                    self.purge_every_s is not None
                    and now >= next_purge
                    and (self._purger is None or not self._purger.is_alive())
                ):
                    next_purge = now + self.purge_every_s
                    # on its own thread: a long purge must not delay the heartbeats (leases would expire)
                    self._purger = threading.Thread(target=self._purge, name="job-retention", daemon=True)
                    self._purger.start()
            except Exception:
                log.exception("the job keeper's round failed")

    def _purge(self) -> None:
        try:
            retention.purge(self.db, self.storage, self.settings, now_ms())
        except Exception:
            log.exception("the retention purge failed")

    def _snapshot(self) -> list[_Running]:
        with self._running_lock:
            return [r for r in self._running.values() if not r.token.cancelled]

    def _heartbeat(self) -> None:
        for run in self._snapshot():
            if not jobs.heartbeat(self.db, run.job.id, run.owner, self.lease_s):
                self._lost(run)

    def _watch(self) -> None:
        running = self._snapshot()
        if not running:
            return
        rows = jobs.lease_holders(self.db, [r.job.id for r in running])
        for run in running:
            status, owner = rows.get(run.job.id, (None, None))
            if status != jobs.ACTIVE or owner != run.owner:
                run.token.cancel(CANCELED_REASON if status == jobs.CANCELED else LOST_REASON)
