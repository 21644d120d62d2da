"""The Procrastinate worker of the scaled deployment (``DRAGOMAN_DISPATCH=procrastinate``; ``dragoman hosted
worker --queues …``): :func:`make_app` builds the Procrastinate app and its tasks, :class:`HostedWorker`
holds what a worker process runs with, :func:`run_worker` runs one until SIGTERM/SIGINT.

**Jobs** (queues translate, tts, subtitle, dub; :mod:`dragoman.service.dispatch` defers them in the
submitting transaction). Task ``dragoman.run_job(job_id)`` claims that job by the same compare-and-set as
the in-process runner (:func:`dragoman.service.jobs.claim`, a lease of ``lease_seconds``) and runs it through
the same :class:`~dragoman.service.runner.JobRunner` code (:meth:`~JobRunner.run_claimed`: the same handlers,
the same ``complete``/``fail``/``release`` transitions, the same keeper thread renewing leases and watching
for cancellation). The jobs table stays the source of truth for status and credits; Procrastinate only
carries the work. A Procrastinate job whose job is no longer ``queued`` (canceled, done, run by another
worker) does nothing, so a duplicate never runs the work twice and nothing is charged twice. When the run
leaves the job ``queued`` (an automatic retry after its back-off; a worker stopping) the task defers it
again, scheduled for its ``run_after``.

**Cancellation**: ``DELETE /api/v1/jobs/{id}`` sets ``canceled`` (refunded at once); the keeper sees it
within half a second and sets the run's cancel token, so the handler stops at its next chunk and its
completion loses the compare-and-set. Procrastinate's own abort (``procrastinate_jobs.abort_requested``,
``JobContext.should_abort()``) is mapped onto it: a user's abort cancels our job the same way (refunded);
a worker's shutdown past ``shutdown_graceful_timeout`` puts the job back in the queue (attempt not counted).

**A worker killed** (kill -9, a lost machine): its lease runs out and the periodic ``dragoman.maintain``
task (queue ``maintenance``, every ``maintenance_s`` seconds, deferred once per tick whichever workers are
running) re-queues the job (:func:`jobs.requeue_expired`: the lost run counts as an attempt), retries
Procrastinate's stalled jobs (those of workers without a heartbeat for ``stalled_s``: ``retry_job``, or
failed when a newer one already waits), and defers every queued job that has no waiting Procrastinate job
(:func:`dispatch.defer_orphans`). The job then finishes on another worker, charged once (its completion is
a compare-and-set on the lease; the dead run never completes).

**Retention**: the periodic ``dragoman.purge`` task (queue ``maintenance``, every ``purge_s``, default
hourly) runs :func:`dragoman.service.retention.purge` (results, exports, uploads, idempotency rows, old
webhook events).

**Webhooks** (a choice, documented here): delivery is not one Procrastinate task per event. A worker serving
the ``webhooks`` queue runs the :class:`~dragoman.service.webhooks.WebhookDispatcher` in its process, over
the same outbox as the embedded mode: its claims are leases (compare-and-set), so any number of workers
deliver without sending one attempt twice, and its per-host bound, back-off, delivery log and SSRF guard
stay one piece of code for both modes. Run at least one worker with ``webhooks`` (the default, all queues).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from dragoman.errors import ConfigError, JobFinished, JobNotFound
from dragoman.service import dispatch, jobs, retention
from dragoman.service.db import Database, now_ms
from dragoman.service.runner import CANCELED_REASON, STOPPING_REASON, JobRunner

if TYPE_CHECKING:
    import procrastinate
    from procrastinate.job_context import JobContext as TaskContext

    from dragoman.service.jobs import Handler
    from dragoman.service.storage import Storage
    from dragoman.service.webhooks import WebhookDispatcher
    from dragoman.settings import Settings

log = logging.getLogger(__name__)

MAINTAIN_TASK = "dragoman.maintain"
PURGE_TASK = "dragoman.purge"
#: Seconds between maintenance rounds (re-queue expired leases, retry stalled jobs, defer orphans).
MAINTENANCE_S = 10
#: Seconds between retention purges.
PURGE_S = 3600
#: Seconds without a heartbeat after which a Procrastinate worker is taken for dead (its jobs stalled), and
#: between a worker's heartbeats.
STALLED_S = 30.0
HEARTBEAT_S = 10.0
#: Seconds a stopping worker waits for its running jobs before aborting them (they go back to the queue).
GRACEFUL_S = 30.0
#: Seconds before Procrastinate's worker is started again after it lost the database (PostgreSQL restarted:
#: its listener fails and it stops), doubled after each failure up to the maximum; a run that lasted
#: RESTART_RESET_S starts the count again.
RESTART_FIRST_S = 0.5
RESTART_MAX_S = 10.0
RESTART_RESET_S = 60.0
#: Seconds between two looks at Procrastinate's abort flag of a running job.
ABORT_POLL_S = 0.5


def cron_every(seconds: int) -> str:
    """A cron line that fires every ``seconds`` (1–59 dividing 60, or whole minutes dividing 60, or whole
    hours dividing 24); Procrastinate's cron takes seconds as a sixth field."""
    if seconds <= 0:
        raise ConfigError(f"a period must be positive, not {seconds}")
    if seconds < 60 and 60 % seconds == 0:
        return f"* * * * * */{seconds}"
    if seconds % 60 == 0 and seconds < 3600 and 60 % (seconds // 60) == 0:
        return f"*/{seconds // 60} * * * *"
    if seconds % 3600 == 0 and 24 % (seconds // 3600) == 0:
        return f"0 */{seconds // 3600} * * *"
    raise ConfigError(f"a period of {seconds} s does not divide a minute, an hour or a day")


class HostedWorker:
    """What one worker process runs with: the database, the file store, the handlers, a keeper-only
    :class:`JobRunner` (leases, cancellation), the Procrastinate app and, when it serves the ``webhooks``
    queue, the webhook dispatcher."""

    def __init__(
        self,
        settings: Settings,
        queues: Iterable[str] | None = None,
        *,
        handlers: Mapping[str, Handler] | None = None,
        db: Database | None = None,
        storage: Storage | None = None,
        maintenance_s: int = MAINTENANCE_S,
        purge_s: int = PURGE_S,
        stalled_s: float = STALLED_S,
    ) -> None:
        from dragoman.service.storage import Storage

        hosted = settings.hosted
        if hosted.dispatch != dispatch.PROCRASTINATE:
            raise ConfigError("dragoman hosted worker needs DRAGOMAN_DISPATCH=procrastinate")
        self.settings = settings
        self.queues = list(queues) if queues is not None else list(dispatch.QUEUES)
        self.conninfo = dispatch.conninfo(hosted.database_url)
        self.db = db or Database.from_settings(hosted)
        self.storage = storage or Storage.from_settings(hosted)
        self.owns_engine = False
        self._engine: Any = None
        self.handlers = dict(handlers) if handlers is not None else self._default_handlers()
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease_s = hosted.lease_seconds
        self.max_attempts = hosted.job_attempts
        self.stalled_s = stalled_s
        self.runner = JobRunner(
            self.db, self.handlers, self.storage, hosted, self.owner, workers=0, purge_every_s=None
        )
        self.dispatcher: WebhookDispatcher | None = None
        if dispatch.WEBHOOKS_QUEUE in self.queues:
            from dragoman.service.webhooks import WebhookDispatcher

            self.dispatcher = WebhookDispatcher(self.db, hosted)
        self.app = make_app(self, maintenance_s=maintenance_s, purge_s=purge_s)

    def _default_handlers(self) -> dict[str, Handler]:
        handlers: dict[str, Handler] = {}
        if "tts" in self.queues:  # speech (issue 14): the synthesizer probes its engines on first use
            from dragoman.service.tts_jobs import make_tts_handler
            from dragoman.speech.tts.synth import Synthesizer

            handlers["tts"] = make_tts_handler(Synthesizer(self.settings))
        if not {"translate", "subtitle", "dub"} & set(self.queues):
            return handlers
        from dragoman.service.translation_jobs import make_translate_handler
        from dragoman.translation.engine import Engine

        self._engine = Engine(self.settings, provenance="server")
        self.owns_engine = True
        if "translate" in self.queues:
            handlers["translate"] = make_translate_handler(self._engine)
        if "subtitle" in self.queues:  # issue 15: recognition (models loaded on first use) + the engine
            from dragoman.service.subtitle_jobs import make_subtitle_handler
            from dragoman.speech.asr import Recognizer

            handlers["subtitle"] = make_subtitle_handler(
                self.db,
                Recognizer(self.settings),
                self._engine,
                max_attempts=self.settings.hosted.job_attempts,
            )
        if "dub" in self.queues:  # issue 16: recognition once per batch, the dub pipeline per target
            from dragoman.service.dub_jobs import make_dub_handler
            from dragoman.speech.asr import Recognizer as DubRecognizer
            from dragoman.speech.tts.synth import Synthesizer as DubSynthesizer

            handlers["dub"] = make_dub_handler(
                self.db,
                DubRecognizer(self.settings),
                self._engine,
                DubSynthesizer(self.settings),
                max_attempts=self.settings.hosted.job_attempts,
                allow_private=self.settings.hosted.webhooks_allow_private,  # a URL's fetch: the SSRF guard
                hosted=self.settings.hosted,
            )
        return handlers

    # ----- the tasks' work ----------------------------------------------------------------------------
    def run_job(self, context: TaskContext, job_id: str) -> None:
        """Task ``dragoman.run_job``: claim ``job_id`` and run it (see the module's notes)."""
        from procrastinate.exceptions import JobAborted

        owner = f"{self.owner}/{context.job.id}"
        job = jobs.claim(self.db, owner, self.lease_s, job_id=job_id)
        if job is None:  # canceled, finished, run elsewhere; or queued but not due yet: defer it for then
            dispatch.defer_if_waiting(self.db, job_id)
            return
        if job.kind not in self.handlers:
            jobs.release(self.db, job.id, owner)
            raise ConfigError(f"this worker has no handler for {job.kind} jobs (queues {self.queues})")
        stop = threading.Event()
        aborted: list[str] = []
        watcher = threading.Thread(
            target=self._watch_abort,
            args=(context, job, owner, stop, aborted),
            name=f"abort-watch-{job.id[:8]}",
            daemon=True,
        )
        watcher.start()
        try:
            self.runner.run_claimed(job, owner)
        finally:
            stop.set()
            watcher.join()
        if jobs.status_of(self.db, job.id) == jobs.QUEUED:  # a retry after its back-off, or put back
            dispatch.defer_if_waiting(self.db, job.id)
        if aborted == ["user"]:
            raise JobAborted(f"job {job.id} was aborted")

    def _watch_abort(
        self, context: TaskContext, job: jobs.JobRecord, owner: str, stop: threading.Event, aborted: list[str]
    ) -> None:
        """Map Procrastinate's abort of the running task onto our cancellation (see the module's notes)."""
        from procrastinate.job_context import AbortReason

        while not stop.wait(ABORT_POLL_S):
            reason = context.abort_reason()
            if reason is None:
                continue
            if reason == AbortReason.SHUTDOWN:
                aborted.append("shutdown")
                self.runner.cancel_run(job.id, owner, STOPPING_REASON)
            else:
                aborted.append("user")
                try:
                    jobs.cancel(self.db, job.key_id, job.id)  # canceled and refunded, as by DELETE
                except (JobFinished, JobNotFound):
                    pass
                self.runner.cancel_run(job.id, owner, CANCELED_REASON)
            return

    async def maintain(self, context: TaskContext) -> dict[str, int]:
        """Task ``dragoman.maintain``: re-queue expired leases, retry stalled Procrastinate jobs, defer
        orphans (see the module's notes)."""
        from procrastinate import jobs as procrastinate_jobs

        requeued = await asyncio.to_thread(jobs.requeue_expired, self.db, max_attempts=self.max_attempts)
        manager = self.app.job_manager
        retried = 0
        for stalled in await manager.get_stalled_jobs(seconds_since_heartbeat=self.stalled_s):
            if stalled.id == context.job.id:
                continue
            try:
                await manager.retry_job(stalled)
                retried += 1
            except Exception:  # a newer Procrastinate job for it already waits (its queueing lock)
                await manager.finish_job(stalled, status=procrastinate_jobs.Status.FAILED, delete_job=False)
        orphans = await asyncio.to_thread(dispatch.defer_orphans, self.db)
        report = {"requeued": requeued, "stalled_retried": retried, "orphans_deferred": orphans}
        if requeued or retried or orphans:
            log.info("maintenance: %s", report)
        return report

    def purge(self) -> dict[str, int]:
        """Task ``dragoman.purge``: the retention purge."""
        report = retention.purge(self.db, self.storage, self.settings.hosted, now_ms())
        return {name: int(value) for name, value in vars(report).items()}

    # ----- life -----------------------------------------------------------------------------------------
    def run(
        self,
        *,
        concurrency: int = 1,
        graceful_s: float = GRACEFUL_S,
        heartbeat_s: float = HEARTBEAT_S,
        install_signal_handlers: bool = True,
    ) -> None:
        """Work until SIGTERM/SIGINT (Procrastinate's graceful stop: running jobs get ``graceful_s``)."""
        import psycopg
        from procrastinate.exceptions import ConnectorException
        from psycopg_pool import PoolTimeout

        self.runner.start()
        if self.dispatcher is not None:
            self.dispatcher.start()
        watch = _SideTaskFailed()
        logging.getLogger("procrastinate").addHandler(watch)
        pause = RESTART_FIRST_S
        # Between two runs of Procrastinate's worker (which handles the signals while it runs), SIGTERM and
        # SIGINT end the back-off and the worker.
        stopping = threading.Event()
        previous: dict[signal.Signals, Any] = {}
        if install_signal_handlers and threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                previous[signum] = signal.signal(signum, lambda *_: stopping.set())
        try:
            while not stopping.is_set():  # Procrastinate's worker stops when it loses the database: again
                watch.seen = False
                started = time.monotonic()
                try:
                    self.app.run_worker(
                        queues=self.queues,
                        concurrency=concurrency,
                        name=self.owner,
                        shutdown_graceful_timeout=graceful_s,
                        update_heartbeat_interval=heartbeat_s,
                        stalled_worker_timeout=self.stalled_s,
                        delete_jobs="successful",
                        install_signal_handlers=install_signal_handlers,
                    )
                except (ConnectorException, PoolTimeout, psycopg.OperationalError) as exc:  # database away
                    cause = f"{type(exc.__cause__ or exc).__name__}"
                else:
                    if not watch.seen:
                        return  # stopped by SIGTERM/SIGINT
                    cause = "a side task failed"
                if time.monotonic() - started > RESTART_RESET_S:
                    pause = RESTART_FIRST_S
                log.warning(
                    "worker %s lost the database (%s): Procrastinate's worker starts again in %.1f s",
                    self.owner,
                    cause,
                    pause,
                )
                if stopping.wait(pause):
                    return
                pause = min(RESTART_MAX_S, pause * 2)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            logging.getLogger("procrastinate").removeHandler(watch)
            self.close()

    def close(self) -> None:
        self.runner.stop()
        if self.dispatcher is not None:
            self.dispatcher.stop()
        if self.owns_engine and self._engine is not None:
            self._engine.close()
            self._engine = None


class _SideTaskFailed(logging.Handler):
    """Notes Procrastinate's "side task failed, stopping worker" (its listener or heartbeat lost the
    database), which ends ``run_worker`` as a signal does."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.seen = False

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "action", None) == "side_task_failed":
            self.seen = True


def make_app(
    worker: HostedWorker, *, maintenance_s: int = MAINTENANCE_S, purge_s: int = PURGE_S
) -> procrastinate.App:
    """The Procrastinate app of ``worker``: its connector (psycopg, the service's database) and tasks."""
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=worker.conninfo))

    @app.task(name=dispatch.RUN_JOB_TASK, pass_context=True)
    def run_job(context: TaskContext, job_id: str) -> None:
        worker.run_job(context, job_id)

    @app.periodic(cron=cron_every(maintenance_s), periodic_id="maintain")
    @app.task(
        name=MAINTAIN_TASK, queue=dispatch.MAINTENANCE_QUEUE, queueing_lock=MAINTAIN_TASK, pass_context=True
    )
    async def maintain(context: TaskContext, timestamp: int) -> dict[str, int]:
        return await worker.maintain(context)

    @app.periodic(cron=cron_every(purge_s), periodic_id="purge")
    @app.task(name=PURGE_TASK, queue=dispatch.MAINTENANCE_QUEUE, queueing_lock=PURGE_TASK)
    def purge(timestamp: int) -> dict[str, int]:
        return worker.purge()

    return app


def run_worker(
    settings: Settings,
    queues: Iterable[str] | None = None,
    *,
    concurrency: int = 1,
    maintenance_s: int = MAINTENANCE_S,
    purge_s: int = PURGE_S,
    stalled_s: float = STALLED_S,
    heartbeat_s: float = HEARTBEAT_S,
    graceful_s: float = GRACEFUL_S,
    handlers: Mapping[str, Handler] | None = None,
) -> int:
    """Run a worker on ``queues`` (all by default) until SIGTERM/SIGINT; the exit status (0)."""
    worker = HostedWorker(
        settings, queues, handlers=handlers, maintenance_s=maintenance_s, purge_s=purge_s, stalled_s=stalled_s
    )
    log.info(
        "dragoman hosted worker %s on queues %s (concurrency %d)",
        worker.owner,
        ",".join(worker.queues),
        concurrency,
    )
    try:
        worker.run(concurrency=concurrency, graceful_s=graceful_s, heartbeat_s=heartbeat_s)
    finally:
        worker.db.dispose()
    log.info("dragoman hosted worker %s stopped", worker.owner)
    return 0
