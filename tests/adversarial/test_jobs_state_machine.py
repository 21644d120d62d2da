"""The hosted job state machine under random sequences of every transition (submit, batches, claim,
progress, complete, fail, cancel, expired leases; right and wrong owners and keys). After each step the books
balance: the balance is the ledger's sum, and what was credited is the balance plus open reservations plus
spending; a finished job is settled exactly once (done: charged; failed or canceled: refunded), a pending one
not at all; a finished job never changes again; each batch whose children all finished sent
batch.completed exactly once."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from jobs_support import balance, events, ledger_sum, paying_key, service_db
from sqlalchemy import func, select

from dragoman.errors import DragomanError, InsufficientCredits, JobFinished, JobNotFound
from dragoman.service import jobs
from dragoman.service.accounts import KeyInfo
from dragoman.service.db import Database, ledger, now_ms
from dragoman.service.jobs import JobOutcome, JobRecord

CREDITED = 400
STEPS = 70


def _settlements(db: Database) -> dict[str, Counter[str]]:
    with db.read() as conn:
        rows = conn.execute(select(ledger.c.job_id, ledger.c.entry).where(ledger.c.job_id.is_not(None))).all()
    found: dict[str, Counter[str]] = {}
    for job_id, entry in rows:
        found.setdefault(job_id, Counter())[entry] += 1
    return found


def _open_and_spent(db: Database, account_id: str) -> tuple[int, int]:
    with db.read() as conn:
        amount, spent = conn.execute(
            select(
                func.coalesce(func.sum(ledger.c.amount), 0), func.coalesce(func.sum(ledger.c.spent), 0)
            ).where(ledger.c.account_id == account_id, ledger.c.job_id.is_not(None), ledger.c.mode == "live")
        ).one()
    # job entries: reserve -r, charge -extra (spent s), release/refund +back: -(sum) = open + spent
    return -int(amount) - int(spent), int(spent)


class Machine:
    def __init__(self, db: Database, key: KeyInfo, other: KeyInfo, rng: random.Random) -> None:
        self.db, self.key, self.other, self.rng = db, key, other, rng
        self.made: list[str] = []
        self.batches: set[str] = set()
        self.finished: dict[str, JobRecord] = {}

    def _all(self) -> list[JobRecord]:
        return jobs.list_jobs(self.db, self.key.key_id, limit=200)[0]

    def _pick(self, status: str | None = None) -> JobRecord | None:
        pool = [j for j in self._all() if status is None or j.status == status]
        return self.rng.choice(pool) if pool else None

    def step(self) -> None:
        op = self.rng.choice(
            ["submit", "submit", "batch", "claim", "claim", "progress", "complete", "complete", "fail"]
            + ["cancel", "cancel", "expire", "wrong"]
        )
        getattr(self, "op_" + op)()

    def op_submit(self) -> None:
        try:
            job = jobs.submit(
                self.db, self.key, kind="translate", params={"text": "x"}, credits=self.rng.randint(1, 60)
            )
        except InsufficientCredits:
            return
        self.made.append(job.id)

    def op_batch(self) -> None:
        children = [
            ({"tgt": f"t{i}"}, f"c{i}", self.rng.randint(1, 30)) for i in range(self.rng.randint(1, 3))
        ]
        try:
            batch_id, made = jobs.submit_batch(self.db, self.key, "translate", children)
        except InsufficientCredits:
            return
        self.batches.add(batch_id)
        self.made += [j.id for j in made]

    def op_claim(self) -> None:
        jobs.claim(self.db, self.rng.choice(["w1", "w2"]), 30)

    def op_progress(self) -> None:
        job = self._pick("active")
        if job is not None and job.lease_owner is not None:
            jobs.set_progress(self.db, job.id, job.lease_owner, self.rng.randint(0, 100))
            jobs.heartbeat(self.db, job.id, job.lease_owner, 30)

    def op_complete(self) -> None:
        job = self._pick("active")
        if job is not None and job.lease_owner is not None:
            charged = self.rng.choice([None, 0, 1, job.credits_reserved + 5])
            assert jobs.complete(self.db, job.id, job.lease_owner, JobOutcome("r", {}, charged)) is not None

    def op_fail(self) -> None:
        job = self._pick("active")
        if job is not None and job.lease_owner is not None:
            retryable = self.rng.random() < 0.6
            jobs.fail(
                self.db, job.id, job.lease_owner, "boom", retryable=retryable, max_attempts=2, retry_base_s=0
            )

    def op_cancel(self) -> None:
        job = self._pick()
        if job is None:
            return
        try:
            jobs.cancel(self.db, self.key.key_id, job.id)
        except JobFinished:
            assert job.terminal
        else:
            assert not job.terminal

    def op_expire(self) -> None:
        jobs.requeue_expired(self.db, max_attempts=2, now=now_ms() + 3_600_000)

    def op_wrong(self) -> None:
        """Transitions by someone who holds nothing: a stranger's key, a worker without the lease."""
        job = self._pick()
        if job is None:
            return
        with pytest.raises(JobNotFound):
            jobs.cancel(self.db, self.other.key_id, job.id)
        assert jobs.complete(self.db, job.id, "intruder", JobOutcome("no")) is None
        assert jobs.fail(self.db, job.id, "intruder", "no", retryable=False) is None
        assert not jobs.heartbeat(self.db, job.id, "intruder", 30)

    def check(self) -> None:
        db, account = self.db, self.key.account_id
        assert balance(db, account) == ledger_sum(db, account)
        open_, spent = _open_and_spent(db, account)
        assert CREDITED == balance(db, account) + open_ + spent
        settled = _settlements(db)
        current = {j.id: j for j in self._all()}
        assert set(current) == set(self.made)
        for job in current.values():
            entries = settled.get(job.id, Counter())
            assert entries["reserve"] == 1
            if job.status == "done":
                assert entries["charge"] == 1 and entries["refund"] == 0
                assert job.credits is not None and job.credits <= job.credits_reserved
            elif job.status in ("failed", "canceled"):
                assert entries["refund"] == 1 and entries["charge"] == 0
            else:
                assert entries["charge"] == entries["refund"] == 0
            if job.id in self.finished:
                assert job == self.finished[job.id]  # a finished job never changes
            elif job.terminal:
                self.finished[job.id] = job
        by_status = Counter(j.status for j in current.values())
        assert len(events(db, "job.done")) == by_status["done"]
        assert len(events(db, "job.failed")) == by_status["failed"]
        completed = Counter(e["batch_id"] for e in events(db, "batch.completed"))
        for batch_id in self.batches:
            children = jobs.batch_children(db, self.key.key_id, batch_id)
            expected = 1 if all(c.terminal for c in children) else 0
            assert completed[batch_id] == expected


@pytest.mark.parametrize("seed", range(8))
def test_random_transitions_keep_the_books(db_url: str, seed: int) -> None:
    db = service_db(db_url)
    try:
        machine = Machine(
            db, paying_key(db, credits=CREDITED), paying_key(db, credits=CREDITED), random.Random(seed)
        )
        for _ in range(STEPS):
            try:
                machine.step()
            except DragomanError as exc:  # only the refusals the steps expect are allowed
                raise AssertionError(f"unexpected {exc!r}") from exc
            machine.check()
    finally:
        db.dispose()
