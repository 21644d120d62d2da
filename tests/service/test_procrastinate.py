"""Procrastinate as the job engine (issue 13; dragoman.service.dispatch and dragoman.service.worker) on a
throwaway PostgreSQL (dragoman.testing.postgres): the Procrastinate job is deferred in the transaction that
inserts the job's row; worker processes (``dragoman hosted worker``, or tests/procrastinate_support.py with
a slow stand-in handler) run jobs to ``done`` charged once, stop a canceled job between chunks, finish the job
of a worker killed with SIGKILL on another worker (charged once), and purge on schedule."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from db_support import DbBackend
from jobs_support import balance, entries, paying_key
from sqlalchemy import insert, select, text
from support import needs_apertium

from dragoman.errors import ConfigError
from dragoman.service import dispatch, jobs, migrate, worker
from dragoman.service.db import Database, idempotency, now_ms
from dragoman.testing.postgres import PostgresServer

REPO = Path(__file__).resolve().parents[2]
SUPPORT_SCRIPT = REPO / "tests" / "procrastinate_support.py"


@pytest.fixture
def pg_url(postgres_server: PostgresServer, tmp_path: Path) -> Iterator[str]:
    """A fresh migrated PostgreSQL database (the session's server: tests/conftest.py), with Procrastinate's
    schema (Procrastinate runs on PostgreSQL only: these tests have no SQLite side)."""
    backend = DbBackend("postgresql", postgres_server)
    url = backend.url(tmp_path)
    db = Database(url)
    try:
        assert dispatch.apply_schema(db) is True
    finally:
        db.dispose()
    yield url
    backend.close()


@pytest.fixture
def db(pg_url: str) -> Iterator[Database]:
    database = Database(pg_url)
    yield database
    database.dispose()


@pytest.fixture
def worker_env(pg_url: str, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DRAGOMAN_DB_URL": pg_url,
        "DRAGOMAN_DISPATCH": "procrastinate",
        "DRAGOMAN_HOSTED_DIR": str(tmp_path / "hosted"),
        "DRAGOMAN_LEASE_SECONDS": "3",
        "DRAGOMAN_PACKS_DIR": str(tmp_path / "packs"),
        "DRAGOMAN_GLOSSARY": str(tmp_path / "config" / "glossary.json"),
        "DRAGOMAN_STATE_DIR": str(tmp_path / "state"),
        "DRAGOMAN_APERTIUM": "1",
        "PYTHONPATH": str(REPO),
    }


StartWorker = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture
def start_worker(worker_env: dict[str, str], tmp_path: Path) -> Iterator[StartWorker]:
    """Starts a worker process: ``start("--queues", …)`` runs ``dragoman hosted worker``; ``slow=True`` runs
    tests/procrastinate_support.py (the slow stand-in handler). Every one is stopped at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def start(*args: str, slow: bool = False) -> subprocess.Popen[bytes]:
        n = len(started)
        if slow:
            command = [sys.executable, str(SUPPORT_SCRIPT), *args]
        else:
            command = [sys.executable, "-m", "dragoman.cli", "hosted", "worker", *args]
        log = open(tmp_path / f"worker-{n}.log", "wb")  # noqa: SIM115 (closed with the process)
        process = subprocess.Popen(command, env=worker_env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        log.close()
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for n, process in enumerate(started):
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.returncode not in (0, -signal.SIGKILL):
            print((tmp_path / f"worker-{n}.log").read_text(errors="replace")[-3000:])


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def procrastinate_rows(db: Database, job_id: str) -> list[dict[str, Any]]:
    with db.read() as conn:
        rows = conn.execute(
            text(
                "SELECT id, queue_name, task_name, queueing_lock, args, status "
                "FROM procrastinate_jobs WHERE queueing_lock = :id ORDER BY id"
            ),
            {"id": job_id},
        ).mappings()
        return [dict(r) for r in rows]


def submit(db: Database, key: Any, params: dict[str, Any], credits: int = 5) -> jobs.JobRecord:
    """What the front door does: the job row, its reservation and its Procrastinate job in one transaction."""
    with db.write() as conn:
        job = jobs.submit(db, key, kind="translate", params=params, title="t", credits=credits, conn=conn)
        dispatch.ProcrastinateDispatch().submitted(conn, [job])
    return job


def marks(path: Path) -> list[tuple[int, int]]:
    if not path.exists():
        return []
    return [(int(a), int(b)) for a, b in (line.split() for line in path.read_text().splitlines() if line)]


# ----- the defer shares the job's transaction -----------------------------------------------------------
def test_a_commit_keeps_the_job_and_its_procrastinate_job(db: Database) -> None:
    key = paying_key(db)
    job = submit(db, key, {"text": "Hello", "src": "eng_Latn", "tgt": "spa_Latn"})
    rows = procrastinate_rows(db, job.id)
    assert len(rows) == 1
    row = rows[0]
    assert row["queue_name"] == "translate" and row["task_name"] == dispatch.RUN_JOB_TASK
    assert row["args"] == {"job_id": job.id} and row["status"] == "todo"


def test_a_rollback_leaves_neither_the_job_nor_its_procrastinate_job(db: Database) -> None:
    key = paying_key(db, credits=100)
    made: list[jobs.JobRecord] = []

    class Boom(Exception):
        pass

    with pytest.raises(Boom), db.write() as conn:
        job = jobs.submit(
            db, key, kind="translate", params={"text": "x", "tgt": "spa_Latn"}, credits=5, conn=conn
        )
        made.append(job)
        ids = dispatch.defer_jobs(conn, [job])
        assert len(ids) == 1  # it was there, inside the transaction
        raise Boom
    assert jobs.status_of(db, made[0].id) is None
    assert procrastinate_rows(db, made[0].id) == []
    assert balance(db, key.account_id) == 100  # the reservation went with it


def test_a_queued_job_without_a_procrastinate_job_is_deferred_once(db: Database) -> None:
    key = paying_key(db)
    job = jobs.submit(db, key, kind="translate", params={"text": "x", "tgt": "spa_Latn"}, credits=1)
    assert procrastinate_rows(db, job.id) == []
    assert dispatch.defer_orphans(db) == 1
    assert dispatch.defer_orphans(db) == 0  # its queueing lock: one waiting Procrastinate job per job
    assert len(procrastinate_rows(db, job.id)) == 1


def test_the_schema_is_applied_once_and_migrate_reports_it(
    pg_url: str, db: Database, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert dispatch.apply_schema(db) is False  # the fixture applied it
    from dragoman.cli.main import main

    monkeypatch.setenv("DRAGOMAN_DB_URL", pg_url)
    monkeypatch.setenv("DRAGOMAN_DISPATCH", "procrastinate")
    assert main(["hosted", "migrate", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["procrastinate_schema"] == "present" and answer["to"] == migrate.head()


# ----- workers -------------------------------------------------------------------------------------------
@needs_apertium
@pytest.mark.slow
def test_a_worker_process_runs_a_text_job_to_done_charged_once(
    db: Database, start_worker: StartWorker
) -> None:
    key = paying_key(db, credits=100)
    job = submit(db, key, {"text": "Hello", "src": "eng_Latn", "tgt": "spa_Latn"}, credits=5)
    start_worker("--queues", "translate,maintenance")
    done = wait_for(lambda: (j := jobs.get(db, key.key_id, job.id)).terminal and j, 90, "the job to finish")
    assert done.status == jobs.DONE, done.error
    assert done.result and "hola" in done.result.lower()
    assert entries(db, job.id) == {"reserve": 1, "charge": 1}
    assert balance(db, key.account_id) == 100 - 5
    assert done.attempts == 1


@pytest.mark.slow
def test_cancel_stops_a_running_job_between_chunks(
    db: Database, start_worker: StartWorker, tmp_path: Path
) -> None:
    key = paying_key(db, credits=100)
    trace = tmp_path / "marks.txt"
    job = submit(
        db, key, {"text": "t", "tgt": "spa_Latn", "chunks": 100, "chunk_s": 0.1, "marks": str(trace)}
    )
    start_worker("translate", slow=True)
    wait_for(lambda: len(marks(trace)) >= 3, 60, "the job to be running")
    assert jobs.cancel(db, key.key_id, job.id) == 5  # refunded at once
    time.sleep(2.0)  # the keeper looks every 0.5 s; the handler stops at its next chunk
    seen = len(marks(trace))
    time.sleep(1.0)
    assert len(marks(trace)) == seen < 100  # no chunk after the cancellation reached it
    record = jobs.get(db, key.key_id, job.id)
    assert record.status == jobs.CANCELED and record.result is None
    assert entries(db, job.id) == {"reserve": 1, "refund": 1}
    assert balance(db, key.account_id) == 100


@pytest.mark.slow
def test_a_job_whose_worker_is_killed_finishes_on_another_charged_once(
    db: Database, start_worker: StartWorker, tmp_path: Path
) -> None:
    key = paying_key(db, credits=100)
    trace = tmp_path / "marks.txt"
    job = submit(db, key, {"text": "k", "tgt": "spa_Latn", "chunks": 30, "chunk_s": 0.1, "marks": str(trace)})
    first = start_worker("translate,maintenance", slow=True)
    wait_for(lambda: len(marks(trace)) >= 3, 60, "the job to be running on the first worker")
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    assert jobs.status_of(db, job.id) == jobs.ACTIVE  # left behind under a dead lease
    second = start_worker("translate,maintenance", slow=True)
    done = wait_for(
        lambda: (j := jobs.get(db, key.key_id, job.id)).terminal and j, 90, "the job to finish elsewhere"
    )
    assert done.status == jobs.DONE and done.result == "slow:k"
    assert done.attempts == 2  # the killed run counted
    assert {pid for pid, _ in marks(trace)} == {first.pid, second.pid}
    assert [n for pid, n in marks(trace) if pid == second.pid] == list(range(30))  # the whole job again
    assert entries(db, job.id) == {"reserve": 1, "charge": 1}
    assert balance(db, key.account_id) == 100 - 5


@pytest.mark.slow
def test_the_periodic_purge_runs(db: Database, start_worker: StartWorker) -> None:
    key = paying_key(db)
    old = now_ms() - 1000
    with db.write() as conn:
        conn.execute(
            insert(idempotency).values(
                key_id=key.key_id,
                idem_key="expired",
                fingerprint="0" * 64,
                state="done",
                created_ms=old - 86_400_000,
                expires_ms=old,
            )
        )

    def gone() -> bool:
        with db.read() as conn:
            return conn.execute(select(idempotency.c.idem_key)).first() is None

    start_worker("--queues", "maintenance", "--purge-every", "1", "--maintenance-every", "1")
    wait_for(gone, 60, "the purge to delete the expired idempotency row")


@pytest.mark.slow
def test_procrastinate_abort_cancels_the_job_refunded(
    db: Database, start_worker: StartWorker, tmp_path: Path
) -> None:
    key = paying_key(db, credits=100)
    trace = tmp_path / "marks.txt"
    job = submit(
        db, key, {"text": "a", "tgt": "spa_Latn", "chunks": 100, "chunk_s": 0.1, "marks": str(trace)}
    )
    start_worker("translate", slow=True)
    wait_for(lambda: len(marks(trace)) >= 3, 60, "the job to be running")
    (running,) = [r for r in procrastinate_rows(db, job.id) if r["status"] == "doing"]
    with db.write() as conn:  # what `procrastinate jobs cancel --abort` / JobManager.cancel_job_by_id do
        conn.execute(text("SELECT procrastinate_cancel_job_v1(:id, true, false)"), {"id": running["id"]})
    wait_for(lambda: jobs.status_of(db, job.id) == jobs.CANCELED, 30, "the abort to cancel the job")
    seen = len(marks(trace))
    time.sleep(1.5)
    assert len(marks(trace)) <= seen + 1 < 100  # stopped at its next chunk
    assert entries(db, job.id) == {"reserve": 1, "refund": 1}
    assert balance(db, key.account_id) == 100
    wait_for(
        lambda: [r["status"] for r in procrastinate_rows(db, job.id)] == ["aborted"],
        30,
        "Procrastinate's status",
    )


def test_the_worker_command_needs_procrastinate_dispatch_and_postgresql(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dragoman.cli.main import main

    assert main(["hosted", "worker"]) == 2
    assert "DRAGOMAN_DISPATCH=procrastinate" in capsys.readouterr().err
    monkeypatch.setenv("DRAGOMAN_DISPATCH", "procrastinate")
    assert main(["hosted", "worker", "--queues", "translate"]) == 2  # the default database is SQLite
    assert "PostgreSQL" in capsys.readouterr().err
    monkeypatch.setenv("DRAGOMAN_DB_URL", "postgresql+psycopg://u@127.0.0.1:1/x")
    assert main(["hosted", "worker", "--queues", "translate,nope"]) == 2
    assert "unknown queue(s) nope" in capsys.readouterr().err


def test_queues_and_periods() -> None:
    assert dispatch.parse_queues(None) == list(dispatch.QUEUES)
    assert dispatch.parse_queues(" translate, webhooks,translate") == ["translate", "webhooks"]
    assert [dispatch.queue_for(k) for k in ("translate", "tts", "subtitle", "dub")] == list(
        dispatch.PRODUCT_QUEUES
    )
    with pytest.raises(ValueError):
        dispatch.queue_for("webhooks")
    assert worker.cron_every(1) == "* * * * * */1" and worker.cron_every(10) == "* * * * * */10"
    assert worker.cron_every(300) == "*/5 * * * *" and worker.cron_every(3600) == "0 */1 * * *"
    for bad in (0, 7, 90, 7200 * 5):
        with pytest.raises(ConfigError):
            worker.cron_every(bad)


@pytest.mark.slow
def test_a_stopping_worker_puts_its_job_back_and_another_finishes_it(
    db: Database, start_worker: StartWorker, tmp_path: Path
) -> None:
    key = paying_key(db, credits=100)
    trace = tmp_path / "marks.txt"
    job = submit(
        db, key, {"text": "s", "tgt": "spa_Latn", "chunks": 150, "chunk_s": 0.1, "marks": str(trace)}
    )
    first = start_worker("translate", slow=True)  # shutdown_graceful_timeout 5 s
    wait_for(lambda: len(marks(trace)) >= 3, 60, "the job to be running")
    first.send_signal(signal.SIGTERM)
    assert first.wait(60) == 0
    assert jobs.status_of(db, job.id) == jobs.QUEUED  # put back at once, not left to its lease
    assert len([r for r in procrastinate_rows(db, job.id) if r["status"] == "todo"]) == 1  # deferred again
    second = start_worker("translate", slow=True)
    done = wait_for(lambda: (j := jobs.get(db, key.key_id, job.id)).terminal and j, 90, "the job to finish")
    assert done.status == jobs.DONE and done.attempts == 1  # the interrupted run was not the job's fault
    assert [n for pid, n in marks(trace) if pid == second.pid] == list(range(150))
    assert entries(db, job.id) == {"reserve": 1, "charge": 1}


def test_migrate_applies_procrastinate_schema_once_even_when_racing(
    postgres_server: PostgresServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from dragoman.cli.main import main

    backend = DbBackend("postgresql", postgres_server)
    try:
        monkeypatch.setenv("DRAGOMAN_DB_URL", backend.url(tmp_path / "a", empty=True))
        monkeypatch.setenv("DRAGOMAN_DISPATCH", "procrastinate")
        assert main(["hosted", "migrate", "--json"]) == 0
        first = json.loads(capsys.readouterr().out)
        assert first["from"] is None and first["procrastinate_schema"] == "applied"
        assert main(["hosted", "migrate"]) == 0
        assert "Procrastinate's schema present" in capsys.readouterr().out

        url = backend.url(tmp_path / "b")  # migrated, without Procrastinate's schema
        dbs = [Database(url) for _ in range(4)]
        try:
            with ThreadPoolExecutor(4) as pool:
                applied = list(pool.map(dispatch.apply_schema, dbs))
            assert sorted(applied) == [False, False, False, True]
            assert dispatch.schema_applied(dbs[0])
        finally:
            for d in dbs:
                d.dispose()
    finally:
        backend.close()


def test_a_job_due_later_is_deferred_for_then(db: Database) -> None:
    key = paying_key(db)
    job = jobs.submit(db, key, kind="translate", params={"text": "x", "tgt": "spa_Latn"}, credits=1)
    later = now_ms() + 60_000
    with db.write() as conn:
        conn.execute(text("UPDATE jobs SET run_after_ms = :t WHERE id = :id"), {"t": later, "id": job.id})
    assert dispatch.defer_if_waiting(db, job.id) is True
    assert dispatch.defer_if_waiting(db, job.id) is False
    with db.read() as conn:
        at = conn.execute(
            text("SELECT extract(epoch FROM scheduled_at) FROM procrastinate_jobs WHERE queueing_lock = :id"),
            {"id": job.id},
        ).scalar_one()
    assert abs(float(at) * 1000 - later) < 1000


@pytest.mark.slow
def test_an_engine_error_is_retried_through_procrastinate_after_its_back_off(
    db: Database, start_worker: StartWorker, tmp_path: Path
) -> None:
    key = paying_key(db, credits=100)
    job = submit(db, key, {"text": "r", "tgt": "spa_Latn", "chunks": 2, "chunk_s": 0.05, "fail_attempts": 1})
    start_worker("translate", slow=True)
    done = wait_for(lambda: (j := jobs.get(db, key.key_id, job.id)).terminal and j, 90, "the job to finish")
    assert done.status == jobs.DONE and done.attempts == 2 and done.result == "slow:r"
    assert entries(db, job.id) == {"reserve": 1, "charge": 1}
