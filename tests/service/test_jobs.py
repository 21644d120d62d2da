"""The job state machine (dragoman.service.jobs): reservations with the submit, compare-and-set transitions
with their ledger entries and webhook events, retries, cancel, leases, batches, and HOSTED.md's races."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from jobs_support import HOOK, balance, entries, events, ledger_sum, paying_key, service_db, spent
from sqlalchemy import select

from dragoman.errors import BackendError, InsufficientCredits, InvalidRequest, JobFinished, JobNotFound
from dragoman.progress import JobContext
from dragoman.service import jobs
from dragoman.service.accounts import KeyInfo
from dragoman.service.db import Database, batches, now_ms
from dragoman.service.db import jobs as jobs_table
from dragoman.service.jobs import JobOutcome, JobRecord
from dragoman.service.storage import Storage

TEXT = {"text": "hello", "src": "eng_Latn", "tgt": "fra_Latn"}


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    database = service_db(db_url)
    yield database
    database.dispose()


@pytest.fixture
def key(db: Database) -> KeyInfo:
    return paying_key(db, credits=1_000)


def _submit(db: Database, key: KeyInfo, credits: int = 10, **kw: Any) -> JobRecord:
    return jobs.submit(db, key, kind="translate", params=TEXT, title="t", credits=credits, **kw)


def _claimed(db: Database, key: KeyInfo, owner: str = "w1", credits: int = 10) -> JobRecord:
    job = _submit(db, key, credits)
    claimed = jobs.claim(db, owner, 30)
    assert claimed is not None and claimed.id == job.id
    return claimed


def _race(*calls: Callable[[], Any]) -> list[Any]:
    """Run ``calls`` at once on threads (released together by a barrier); their results or exceptions."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(i: int, call: Callable[[], Any]) -> None:
        barrier.wait()
        try:
            results[i] = call()
        except Exception as exc:  # collected and asserted on by the caller
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def _books_balance(db: Database, key: KeyInfo) -> None:
    """Every movement of the balance has its ledger entry, and no job is both charged and refunded."""
    assert balance(db, key.account_id) == ledger_sum(db, key.account_id)


# ----- submit -----------------------------------------------------------------------------------------
def test_submit_reserves_in_the_same_transaction(db: Database, key: KeyInfo) -> None:
    job = _submit(db, key, 25)
    assert job.status == "queued" and job.credits is None and job.credits_reserved == 25 and not job.sync
    assert balance(db, key.account_id) == 975
    assert entries(db, job.id) == {"reserve": 1}
    _books_balance(db, key)


def test_submit_that_cannot_pay_writes_nothing(db: Database, key: KeyInfo) -> None:
    with pytest.raises(InsufficientCredits):
        _submit(db, key, 5_000)
    assert jobs.list_jobs(db, key.key_id) == ([], 0)
    assert balance(db, key.account_id) == 1_000


def test_submit_inside_the_callers_transaction_rolls_back_with_it(db: Database, key: KeyInfo) -> None:
    with pytest.raises(RuntimeError), db.write() as conn:
        _submit(db, key, 10, conn=conn)
        raise RuntimeError("the caller's later write failed")
    assert jobs.list_jobs(db, key.key_id)[1] == 0
    assert balance(db, key.account_id) == 1_000


def test_submit_batch_is_all_or_nothing(db: Database, key: KeyInfo) -> None:
    children = [({**TEXT, "tgt": t}, t, 400) for t in ("fra_Latn", "deu_Latn", "spa_Latn")]
    with pytest.raises(InsufficientCredits):
        jobs.submit_batch(db, key, "translate", children, HOOK)
    with db.read() as conn:
        assert conn.execute(select(batches.c.id)).first() is None
        assert conn.execute(select(jobs_table.c.id)).first() is None
    assert balance(db, key.account_id) == 1_000
    batch_id, made = jobs.submit_batch(db, key, "translate", children[:2], HOOK)
    assert [j.batch_id for j in made] == [batch_id, batch_id]
    assert balance(db, key.account_id) == 200
    assert [j.id for j in jobs.batch_children(db, key.key_id, batch_id)] == [j.id for j in made]


# ----- the worker's transitions -----------------------------------------------------------------------
def test_claim_complete_charges_and_sends_job_done(db: Database, key: KeyInfo) -> None:
    job = _claimed(db, key, credits=30)
    assert job.status == "active" and job.attempts == 1 and job.lease_owner == "w1"
    assert jobs.claim(db, "w2", 30) is None
    assert jobs.complete(db, job.id, "w2", JobOutcome(result="bonjour")) is None  # not its lease
    done = jobs.complete(db, job.id, "w1", JobOutcome(result="bonjour", credits=12))
    assert done is not None and done.status == "done" and done.credits == 12 and done.progress_percent == 100
    assert done.result == "bonjour" and done.lease_owner is None and done.finished_ms is not None
    assert entries(db, job.id) == {"reserve": 1, "charge": 1, "release": 1}
    assert spent(db, job.id) == 12 and balance(db, key.account_id) == 988
    (payload,) = events(db, "job.done")
    assert {k: payload[k] for k in ("event", "job_id", "status", "result", "credits")} == {
        "event": "job.done",
        "job_id": job.id,
        "status": "done",
        "result": "bonjour",
        "credits": 12,
    }
    assert isinstance(payload["elapsed_seconds"], float) and "batch_id" not in payload
    assert jobs.complete(db, job.id, "w1", JobOutcome(result="again")) is None  # once
    assert entries(db, job.id)["charge"] == 1
    _books_balance(db, key)


def test_a_charge_never_exceeds_the_reservation(db: Database, key: KeyInfo) -> None:
    job = _claimed(db, key, credits=10)
    done = jobs.complete(db, job.id, "w1", JobOutcome(result="x", credits=500))
    assert done is not None and done.credits == 10 and balance(db, key.account_id) == 990


def test_no_webhook_url_no_event(db: Database) -> None:
    quiet = paying_key(db, webhook_url=None)
    job = _claimed(db, quiet)
    assert jobs.complete(db, job.id, "w1", JobOutcome(result="x")) is not None
    assert events(db) == []
    loud = _claimed(db, quiet, owner="w2")
    # a per-request webhook overrides the key's (none here)
    jobs.cancel(db, quiet.key_id, loud.id)
    job = _submit(db, quiet, webhook_url="https://elsewhere.example.com/h")
    assert jobs.claim(db, "w3", 30) is not None
    jobs.complete(db, job.id, "w3", JobOutcome(result="y"))
    assert [e["job_id"] for e in events(db, "job.done")] == [job.id]


def test_retryable_failure_requeues_with_back_off_then_fails_with_refund(db: Database, key: KeyInfo) -> None:
    job = _claimed(db, key, credits=40)
    again = jobs.fail(db, job.id, "w1", "engine exploded", retryable=True, max_attempts=2, retry_base_s=60)
    assert again is not None and again.status == "queued" and again.lease_owner is None
    assert again.run_after_ms > now_ms() + 30_000  # 60 s ± 25% back-off
    assert jobs.claim(db, "w1", 30) is None  # not due yet
    assert entries(db, job.id) == {"reserve": 1} and events(db) == []
    with db.write() as conn:  # the back-off has passed
        conn.execute(jobs_table.update().where(jobs_table.c.id == job.id).values(run_after_ms=0))
    second = jobs.claim(db, "w2", 30)
    assert second is not None and second.attempts == 2
    failed = jobs.fail(db, job.id, "w2", "engine exploded again", retryable=True, max_attempts=2)
    assert failed is not None and failed.status == "failed" and failed.error == "engine exploded again"
    assert entries(db, job.id) == {"reserve": 1, "refund": 1}
    assert balance(db, key.account_id) == 1_000
    (payload,) = events(db, "job.failed")
    assert payload["job_id"] == job.id and payload["error"] == "engine exploded again"
    _books_balance(db, key)


def test_a_failure_that_is_not_retryable_fails_at_once(db: Database, key: KeyInfo) -> None:
    job = _claimed(db, key)
    failed = jobs.fail(db, job.id, "w1", "unsupported document", retryable=False, max_attempts=5)
    assert failed is not None and failed.status == "failed" and failed.attempts == 1
    assert balance(db, key.account_id) == 1_000


def test_progress_and_heartbeat_hold_only_for_the_lease_owner(db: Database, key: KeyInfo) -> None:
    job = _claimed(db, key)
    assert jobs.set_progress(db, job.id, "w1", 40)
    assert jobs.set_progress(db, job.id, "w1", 20)  # still ours; never goes back
    assert jobs.get(db, key.key_id, job.id).progress_percent == 40
    assert not jobs.set_progress(db, job.id, "other", 60)
    assert jobs.heartbeat(db, job.id, "w1", 30) and not jobs.heartbeat(db, job.id, "other", 30)
    jobs.cancel(db, key.key_id, job.id)
    assert not jobs.heartbeat(db, job.id, "w1", 30)
    assert not jobs.set_progress(db, job.id, "w1", 80)


# ----- cancel -------------------------------------------------------------------------------------------
def test_cancel_refunds_at_once_then_409_and_404(db: Database, key: KeyInfo) -> None:
    job = _submit(db, key, 70)
    assert balance(db, key.account_id) == 930
    assert jobs.cancel(db, key.key_id, job.id) == 70
    assert balance(db, key.account_id) == 1_000
    assert jobs.get(db, key.key_id, job.id).status == "canceled"
    with pytest.raises(JobFinished) as finished:
        jobs.cancel(db, key.key_id, job.id)
    assert finished.value.status == 409 and finished.value.to_dict()["status"] == "canceled"
    other = paying_key(db)
    for job_id, key_id in ((job.id, other.key_id), ("no-such-job", key.key_id)):
        with pytest.raises(JobNotFound) as missing:
            jobs.cancel(db, key_id, job_id)
        assert missing.value.status == 404
    with pytest.raises(JobNotFound):
        jobs.get(db, other.key_id, job.id)
    assert entries(db, job.id) == {"reserve": 1, "refund": 1} and events(db) == []


def test_cancel_of_a_running_job_wins_over_its_later_completion(db: Database, key: KeyInfo) -> None:
    job = _claimed(db, key, credits=20)
    assert jobs.cancel(db, key.key_id, job.id) == 20
    assert jobs.complete(db, job.id, "w1", JobOutcome(result="late")) is None
    assert jobs.fail(db, job.id, "w1", "late", retryable=True) is None
    assert entries(db, job.id) == {"reserve": 1, "refund": 1} and events(db) == []
    with pytest.raises(JobFinished):
        jobs.cancel(db, key.key_id, job.id)


def test_cancel_racing_completion_neither_double_charges_nor_double_refunds(
    db: Database, key: KeyInfo
) -> None:
    rounds = 25
    for i in range(rounds):
        job = _claimed(db, key, owner=f"w{i}", credits=7)
        done, refunded = _race(
            partial(jobs.complete, db, job.id, f"w{i}", JobOutcome(result="r")),
            partial(jobs.cancel, db, key.key_id, job.id),
        )
        counted = entries(db, job.id)
        if isinstance(done, JobRecord):  # completion won: charged once, cancel saw a finished job
            assert isinstance(refunded, JobFinished)
            assert counted == {"reserve": 1, "charge": 1} and spent(db, job.id) == 7
        else:  # cancel won: refunded once, the completion lost its compare-and-set
            assert done is None and refunded == 7
            assert counted == {"reserve": 1, "refund": 1} and spent(db, job.id) == 0
    all_jobs, total = jobs.list_jobs(db, key.key_id, limit=200)
    assert total == rounds
    charged = sum(j.credits or 0 for j in all_jobs)
    assert balance(db, key.account_id) == 1_000 - charged
    assert len(events(db, "job.done")) == sum(j.status == "done" for j in all_jobs)
    _books_balance(db, key)


# ----- leases -------------------------------------------------------------------------------------------
def test_an_expired_lease_is_requeued_and_charged_once(db: Database, key: KeyInfo) -> None:
    job = _submit(db, key, 15)
    first = jobs.claim(db, "dead-runner", 0.05)
    assert first is not None
    time.sleep(0.1)
    assert jobs.requeue_expired(db, max_attempts=3) == 1
    assert jobs.get(db, key.key_id, job.id).status == "queued"
    second = jobs.claim(db, "new-runner", 30)
    assert second is not None and second.id == job.id and second.attempts == 2
    assert jobs.complete(db, job.id, "dead-runner", JobOutcome(result="stale")) is None
    assert jobs.complete(db, job.id, "new-runner", JobOutcome(result="ok")) is not None
    assert entries(db, job.id) == {"reserve": 1, "charge": 1} and spent(db, job.id) == 15
    assert jobs.requeue_expired(db) == 0
    _books_balance(db, key)


def test_a_job_that_kills_its_worker_every_time_ends_failed_and_refunded(db: Database, key: KeyInfo) -> None:
    job = _submit(db, key, 15)
    for attempt in (1, 2):
        assert jobs.claim(db, f"r{attempt}", 30) is not None
        assert jobs.requeue_expired(db, max_attempts=2, now=now_ms() + 60_000) == 1
    record = jobs.get(db, key.key_id, job.id)
    assert record.status == "failed" and "stopped 2 times" in (record.error or "")
    assert entries(db, job.id) == {"reserve": 1, "refund": 1}
    assert [e["job_id"] for e in events(db, "job.failed")] == [job.id]


def test_forty_concurrent_claimers_claim_each_job_once(db: Database, key: KeyInfo) -> None:
    made = {_submit(db, key, 1).id for _ in range(80)}
    claimed: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    barrier = threading.Barrier(40)

    def claimer(n: int) -> None:
        barrier.wait()
        try:
            while (job := jobs.claim(db, f"c{n}", 30)) is not None:
                with lock:
                    claimed.append(job.id)
        except BaseException as exc:  # "database is locked" would land here
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=claimer, args=(n,)) for n in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert sorted(claimed) == sorted(made)  # every job claimed, none twice


# ----- batches ------------------------------------------------------------------------------------------
def _batch_of_two(db: Database, key: KeyInfo, tag: str) -> tuple[str, list[JobRecord]]:
    children = [({**TEXT, "tgt": t}, t, 3) for t in ("fra_Latn", "deu_Latn")]
    batch_id, _ = jobs.submit_batch(db, key, "translate", children, None)
    claimed = [jobs.claim(db, f"{tag}-{n}", 30) for n in (0, 1)]
    assert all(c is not None and c.batch_id == batch_id for c in claimed)
    return batch_id, [c for c in claimed if c is not None]


def test_the_last_two_children_finishing_together_send_one_batch_completed(
    db: Database, key: KeyInfo
) -> None:
    batches_made = []
    for i in range(15):
        batch_id, (a, b) = _batch_of_two(db, key, f"r{i}")
        finish_b: Callable[[], Any]
        if i % 3 == 0:
            finish_b = partial(jobs.fail, db, b.id, f"r{i}-1", "no", retryable=False)
        elif i % 3 == 1:
            finish_b = partial(jobs.cancel, db, key.key_id, b.id)
        else:
            finish_b = partial(jobs.complete, db, b.id, f"r{i}-1", JobOutcome(result="b"))
        _race(partial(jobs.complete, db, a.id, f"r{i}-0", JobOutcome(result="a")), finish_b)
        batches_made.append(batch_id)
    completed = events(db, "batch.completed")
    assert sorted(e["batch_id"] for e in completed) == sorted(batches_made)  # exactly one each
    first = next(e for e in completed if e["batch_id"] == batches_made[0])
    assert first["target_count"] == 2 and first["done_count"] == 1 and first["failed_count"] == 1
    assert [c["tgt"] for c in first["children"]] == ["fra_Latn", "deu_Latn"]
    assert first["totals"]["credits"] == 3
    with db.read() as conn:
        assert conn.execute(select(batches.c.id).where(batches.c.completed_ms.is_(None))).first() is None
    _books_balance(db, key)


def test_a_child_waiting_for_a_retry_keeps_its_batch_open(db: Database, key: KeyInfo) -> None:
    batch_id, (a, b) = _batch_of_two(db, key, "w")
    jobs.complete(db, a.id, "w-0", JobOutcome(result="a"))
    jobs.fail(db, b.id, "w-1", "flaky", retryable=True, max_attempts=3, retry_base_s=0)
    assert events(db, "batch.completed") == []
    again = jobs.claim(db, "w-2", 30)
    assert again is not None and again.id == b.id
    jobs.complete(db, b.id, "w-2", JobOutcome(result="b"))
    (completed,) = events(db, "batch.completed")
    assert completed["batch_id"] == batch_id and completed["done_count"] == 2
    assert [e["batch_id"] for e in events(db, "job.done")] == [batch_id, batch_id]


# ----- synchronous jobs and queries ---------------------------------------------------------------------
def _echo(job: JobRecord, ctx: JobContext, storage: Storage) -> JobOutcome:
    return JobOutcome(result=str(job.params["text"]).upper())


def _broken(job: JobRecord, ctx: JobContext, storage: Storage) -> JobOutcome:
    raise BackendError("the engine failed")


def test_run_sync_records_a_done_job_charged_at_once(db: Database, key: KeyInfo, tmp_path: Path) -> None:
    storage = Storage.local(tmp_path / "files")
    job = jobs.run_sync(db, key, _echo, storage, kind="translate", params=TEXT, title="s", credits=4)
    assert job.status == "done" and job.sync and job.result == "HELLO" and job.credits == 4
    assert balance(db, key.account_id) == 996 and events(db) == []  # the answer was the response
    with pytest.raises(BackendError):
        jobs.run_sync(db, key, _broken, storage, kind="translate", params=TEXT, title="s", credits=4)
    items, total = jobs.list_jobs(db, key.key_id)
    assert total == 2 and items[0].status == "failed" and items[0].error == "the engine failed"
    assert balance(db, key.account_id) == 996
    assert jobs.claim(db, "w", 30) is None  # never claimed by a worker
    _books_balance(db, key)


def test_an_abandoned_sync_job_fails_with_a_refund(db: Database, key: KeyInfo) -> None:
    job = _submit(db, key, 9, sync=True)
    assert job.status == "active" and job.lease_owner == jobs.SYNC_OWNER
    assert jobs.requeue_expired(db, now=now_ms() + int(jobs.SYNC_LEASE_S * 1000) + 1) == 1
    assert jobs.get(db, key.key_id, job.id).status == "failed" and balance(db, key.account_id) == 1_000


def test_list_jobs_most_recent_first_with_total_and_bounds(db: Database, key: KeyInfo) -> None:
    made = [_submit(db, key, 1).id for _ in range(7)]
    other = paying_key(db)
    _submit(db, other, 1)
    items, total = jobs.list_jobs(db, key.key_id, limit=3, offset=2)
    assert total == 7 and [j.id for j in items] == made[::-1][2:5]
    assert len(jobs.list_jobs(db, key.key_id, limit=10_000)[0]) == 7
    assert len(jobs.list_jobs(db, key.key_id, limit=0)[0]) == 1
    with pytest.raises(JobNotFound):
        jobs.batch_children(db, other.key_id, "nope")


def test_elapsed_seconds_stops_at_the_end(db: Database, key: KeyInfo) -> None:
    job = _claimed(db, key)
    assert job.elapsed_seconds(job.created_ms + 1_500) == 1.5
    done = jobs.complete(db, job.id, "w1", JobOutcome(result="x"))
    assert done is not None and done.finished_ms is not None
    assert done.elapsed_seconds(done.finished_ms + 99_000) == (done.finished_ms - done.created_ms) / 1000


def test_negative_credits_are_refused(db: Database, key: KeyInfo) -> None:
    with pytest.raises((ValueError, InvalidRequest)):
        _submit(db, key, -1)
