"""The in-process job runner (dragoman.service.runner) with stand-in handlers (no engine): leases and
heartbeats, progress, cancellation between chunks, retries, a runner that died mid-job, stop, wake."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jobs_support import balance, entries, events, ledger_sum, paying_key, service_db, spent

from dragoman.errors import BackendError, Cancelled, DocumentFormatError
from dragoman.progress import JobContext
from dragoman.service import jobs, retention
from dragoman.service.accounts import KeyInfo
from dragoman.service.db import Database, now_ms
from dragoman.service.db import jobs as jobs_table
from dragoman.service.jobs import JobOutcome, JobRecord
from dragoman.service.runner import JobRunner
from dragoman.service.storage import Storage
from dragoman.settings import HostedSettings

BOUND_S = 20.0  # "answers within": many times what each wait needs on an idle machine


def _until(condition: Callable[[], bool], bound: float = BOUND_S) -> bool:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


class Stage:
    """What the stand-in handlers did, for the test to read and to steer them."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.calls: list[str] = []
        self.chunks_done: dict[str, int] = {}
        self.stopped: dict[str, str] = {}
        self.lock = threading.Lock()

    def chunked(self, job: JobRecord, ctx: JobContext, storage: Storage) -> JobOutcome:
        """``params.chunks`` chunks of ``params.delay`` s each, reporting progress and stopping between them
        when cancelled; ``params.hold`` waits for :attr:`release` half way; stores an export first."""
        with self.lock:
            self.calls.append(job.id)
        total, delay = int(job.params.get("chunks", 4)), float(job.params.get("delay", 0.0))
        storage.put_bytes(f"exports/{job.id}/out.txt", b"partial")
        self.started.set()
        try:
            for i in range(total):
                if job.params.get("hold") and i == total // 2:
                    while not self.release.wait(0.01):
                        ctx.check()
                time.sleep(delay)
                with self.lock:
                    self.chunks_done[job.id] = i + 1
                ctx.report(i + 1, total, "chunk")
        except Cancelled as exc:
            with self.lock:
                self.stopped[job.id] = exc.message
            raise
        return JobOutcome(result=f"done {total}", artifacts={"text": f"exports/{job.id}/out.txt"})

    def flaky(self, job: JobRecord, ctx: JobContext, storage: Storage) -> JobOutcome:
        """Fails with an engine error until ``params.fail_times`` calls have failed."""
        with self.lock:
            self.calls.append(job.id)
            n = self.calls.count(job.id)
        if n <= int(job.params["fail_times"]):
            raise BackendError(f"engine failure {n}")
        return JobOutcome(result="finally")

    def refused(self, job: JobRecord, ctx: JobContext, storage: Storage) -> JobOutcome:
        with self.lock:
            self.calls.append(job.id)
        raise DocumentFormatError("not a document we read")


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    database = service_db(db_url)
    yield database
    database.dispose()


@pytest.fixture
def key(db: Database) -> KeyInfo:
    return paying_key(db, credits=1_000)


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    return Storage.local(tmp_path / "files")


@pytest.fixture
def stage() -> Stage:
    return Stage()


def _runner(
    db: Database, stage: Stage, storage: Storage, tmp_path: Path, *, lease: float = 3.0, **kw: Any
) -> JobRunner:
    settings = HostedSettings(data_dir=tmp_path, runner_workers=2, lease_seconds=lease, job_attempts=3)
    handlers = {"chunky": stage.chunked, "flaky": stage.flaky, "refused": stage.refused}
    return JobRunner(db, handlers, storage, settings, retry_base_s=0.01, poll_s=0.2, **kw)


def _submit(db: Database, key: KeyInfo, kind: str = "chunky", credits: int = 10, **params: Any) -> JobRecord:
    return jobs.submit(db, key, kind=kind, params=params, title=kind, credits=credits)


def _status(db: Database, key: KeyInfo, job: JobRecord) -> str:
    return jobs.get(db, key.key_id, job.id).status


def _books(db: Database, key: KeyInfo) -> None:
    assert balance(db, key.account_id) == ledger_sum(db, key.account_id)


def test_a_job_runs_to_done_with_progress_moving(
    db: Database, key: KeyInfo, storage: Storage, stage: Stage, tmp_path: Path
) -> None:
    job = _submit(db, key, chunks=10, delay=0.0, hold=True)
    with _runner(db, stage, storage, tmp_path):
        assert stage.started.wait(BOUND_S)
        assert _until(lambda: jobs.get(db, key.key_id, job.id).progress_percent > 0)
        middle = jobs.get(db, key.key_id, job.id)
        assert middle.status == "active" and 0 < middle.progress_percent < 100
        stage.release.set()
        assert _until(lambda: _status(db, key, job) == "done")
    done = jobs.get(db, key.key_id, job.id)
    assert done.result == "done 10" and done.progress_percent == 100 and done.credits == 10
    assert storage.get_bytes(done.artifacts["text"]) == b"partial"
    assert entries(db, job.id) == {"reserve": 1, "charge": 1}
    assert [e["job_id"] for e in events(db, "chunky.done")] == [job.id]  # <kind>.done
    _books(db, key)


def test_wake_starts_a_submitted_job_without_waiting_for_the_poll(
    db: Database, key: KeyInfo, storage: Storage, stage: Stage, tmp_path: Path
) -> None:
    settings = HostedSettings(data_dir=tmp_path, runner_workers=1, lease_seconds=30, job_attempts=3)
    runner = JobRunner(db, {"chunky": stage.chunked}, storage, settings, poll_s=300)
    with runner:
        assert _until(lambda: runner.idle_workers == 1)  # the worker found nothing and sleeps for 300 s
        job = _submit(db, key, chunks=1)
        runner.wake()
        assert _until(lambda: _status(db, key, job) == "done")


def test_engine_failures_are_retried_then_failed_with_a_refund(
    db: Database, key: KeyInfo, storage: Storage, stage: Stage, tmp_path: Path
) -> None:
    always = _submit(db, key, "flaky", credits=30, fail_times=99)
    once = _submit(db, key, "flaky", credits=20, fail_times=1)
    with _runner(db, stage, storage, tmp_path):
        assert _until(lambda: _status(db, key, always) == "failed" and _status(db, key, once) == "done")
    failed = jobs.get(db, key.key_id, always.id)
    assert failed.attempts == 3 and stage.calls.count(always.id) == 3
    assert failed.error == "engine failure 3"
    assert entries(db, always.id) == {"reserve": 1, "refund": 1}
    recovered = jobs.get(db, key.key_id, once.id)
    assert recovered.attempts == 2 and recovered.result == "finally"
    assert entries(db, once.id) == {"reserve": 1, "charge": 1} and spent(db, once.id) == 20
    assert balance(db, key.account_id) == 980
    assert [e["job_id"] for e in events(db, "flaky.failed")] == [always.id]
    _books(db, key)


def test_a_client_error_fails_at_once(
    db: Database, key: KeyInfo, storage: Storage, stage: Stage, tmp_path: Path
) -> None:
    job = _submit(db, key, "refused")
    with _runner(db, stage, storage, tmp_path):
        assert _until(lambda: _status(db, key, job) == "failed")
    record = jobs.get(db, key.key_id, job.id)
    assert record.attempts == 1 and record.error == "not a document we read" and stage.calls == [job.id]
    assert balance(db, key.account_id) == 1_000


def test_cancellation_stops_the_handler_between_chunks(
    db: Database, key: KeyInfo, storage: Storage, stage: Stage, tmp_path: Path
) -> None:
    job = _submit(db, key, chunks=2_000, delay=0.005, credits=50)
    with _runner(db, stage, storage, tmp_path):
        assert stage.started.wait(BOUND_S)
        assert _until(lambda: stage.chunks_done.get(job.id, 0) >= 3)
        assert jobs.cancel(db, key.key_id, job.id) == 50
        assert _until(lambda: job.id in stage.stopped)
        assert _until(lambda: storage.list(f"exports/{job.id}") == [])  # what it stored is deleted
    assert stage.stopped[job.id] == "the job was canceled"
    assert stage.chunks_done[job.id] < 2_000
    assert _status(db, key, job) == "canceled"
    assert entries(db, job.id) == {"reserve": 1, "refund": 1} and events(db) == []
    assert balance(db, key.account_id) == 1_000
    _books(db, key)


def test_a_lost_lease_stops_the_handler_and_records_nothing(
    db: Database, key: KeyInfo, storage: Storage, stage: Stage, tmp_path: Path
) -> None:
    job = _submit(db, key, chunks=4, hold=True)
    with _runner(db, stage, storage, tmp_path):
        assert stage.started.wait(BOUND_S)
        with db.write() as conn:  # another worker took it over (as after an expiry and a re-queue)
            conn.execute(
                jobs_table.update().where(jobs_table.c.id == job.id).values(lease_owner="someone-else")
            )
        assert _until(lambda: job.id in stage.stopped)
    assert stage.stopped[job.id] == "the job's lease was lost"
    record = jobs.get(db, key.key_id, job.id)
    assert record.status == "active" and record.lease_owner == "someone-else" and record.result is None
    assert entries(db, job.id) == {"reserve": 1}


def test_a_run_whose_lease_expired_under_load_is_stopped_when_the_job_is_claimed_again(
    db: Database, key: KeyInfo, storage: Storage, stage: Stage, tmp_path: Path
) -> None:
    job = _submit(db, key, chunks=4, hold=True, credits=12)
    with _runner(db, stage, storage, tmp_path):
        assert stage.started.wait(BOUND_S)
        with db.write() as conn:  # its heartbeats came too late: the lease ran out
            conn.execute(jobs_table.update().where(jobs_table.c.id == job.id).values(lease_expires_ms=0))
        assert jobs.requeue_expired(db) == 1
        assert _until(lambda: len(stage.calls) == 2)  # the runner's other worker claimed it again
        assert _until(lambda: job.id in stage.stopped)  # and the first run, no longer the job's, stopped
        stage.release.set()
        assert _until(lambda: _status(db, key, job) == "done")
    assert stage.stopped[job.id] == "the job's lease was lost"
    assert jobs.get(db, key.key_id, job.id).attempts == 2
    assert entries(db, job.id) == {"reserve": 1, "charge": 1} and spent(db, job.id) == 12
    _books(db, key)


def test_a_runner_killed_mid_job_loses_nothing_and_charges_once(
    db: Database, key: KeyInfo, storage: Storage, stage: Stage, tmp_path: Path
) -> None:
    job = _submit(db, key, chunks=3, credits=25)
    dead = jobs.claim(db, "killed-runner/0", 0.3)  # claimed, then the process died: no heartbeat again
    assert dead is not None and dead.id == job.id
    jobs.set_progress(db, job.id, "killed-runner/0", 60)
    with _runner(db, stage, storage, tmp_path, lease=2.0):  # restarted before the old lease ran out
        assert _until(lambda: _status(db, key, job) == "done")
    assert jobs.complete(db, job.id, "killed-runner/0", JobOutcome(result="ghost")) is None
    record = jobs.get(db, key.key_id, job.id)
    assert record.attempts == 2 and record.result == "done 3" and stage.calls == [job.id]
    assert entries(db, job.id) == {"reserve": 1, "charge": 1} and spent(db, job.id) == 25
    assert len(events(db, "chunky.done")) == 1
    _books(db, key)


def test_stop_puts_running_jobs_back_without_counting_the_attempt(
    db: Database, key: KeyInfo, storage: Storage, stage: Stage, tmp_path: Path
) -> None:
    job = _submit(db, key, chunks=4, hold=True)
    runner = _runner(db, stage, storage, tmp_path)
    runner.start()
    assert stage.started.wait(BOUND_S)
    runner.stop()
    record = jobs.get(db, key.key_id, job.id)
    assert record.status == "queued" and record.attempts == 0 and record.lease_owner is None
    assert stage.stopped[job.id] == "the job runner is stopping"
    stage.release.set()
    with _runner(db, stage, storage, tmp_path):
        assert _until(lambda: _status(db, key, job) == "done")
    assert jobs.get(db, key.key_id, job.id).attempts == 1
    assert entries(db, job.id) == {"reserve": 1, "charge": 1}


def test_many_jobs_on_several_workers_each_run_once(
    db: Database, key: KeyInfo, storage: Storage, stage: Stage, tmp_path: Path
) -> None:
    made = [_submit(db, key, chunks=2, credits=1) for _ in range(30)]
    settings = HostedSettings(data_dir=tmp_path, runner_workers=4, lease_seconds=5, job_attempts=3)
    with JobRunner(db, {"chunky": stage.chunked}, storage, settings, poll_s=0.1):
        assert _until(lambda: all(_status(db, key, j) == "done" for j in made), bound=60)
    assert sorted(stage.calls) == sorted(j.id for j in made)
    assert balance(db, key.account_id) == 970
    _books(db, key)


def test_the_retention_purge_runs_from_the_keeper(
    db: Database, storage: Storage, stage: Stage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def counted(*args: Any) -> retention.PurgeReport:
        calls.append(now_ms())
        return retention.PurgeReport()

    monkeypatch.setattr(retention, "purge", counted)
    with _runner(db, stage, storage, tmp_path, purge_every_s=0.3):
        assert _until(lambda: len(calls) >= 2)
