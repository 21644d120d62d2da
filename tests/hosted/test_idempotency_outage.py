"""An Idempotency-Key reservation whose request failed because the database went away (issue 13, fault
tests: the PostgreSQL restart under load). The reservation is committed before the job's transaction; when
the database goes away between the two, the request answers 503 and its release cannot be written either.
Left ``running``, the reservation answered every retry of a request that never ran with 409 "still running"
for ten minutes (until stale). Now the release is owed (:class:`dragoman.service.idempotency.OwedReleases`)
and written as soon as the database answers: before the process's next reservation and once a second.
On SQLite and PostgreSQL (``start_hosted``'s ``db_backend``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from hosted_support import Hosted
from idempotency_support import migrated_db_fixture  # noqa: F401 (the ``db`` fixture)
from sqlalchemy import text

from dragoman.errors import DatabaseUnavailable, IdempotencyConflict
from dragoman.service import idempotency, jobs
from dragoman.service.db import Database

LONG = "The cat sleeps on the warm mat. " * 20  # past the sync bound: a queued job


def _fails_once(real: Callable[..., Any], *, after: bool = False) -> Callable[..., Any]:
    """``real`` that raises DatabaseUnavailable on its first call (``after``: once it has run)."""
    calls: list[int] = []

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            if after:
                real(*args, **kwargs)
            raise DatabaseUnavailable("the service's database cannot be reached at the moment; retry shortly")
        return real(*args, **kwargs)

    return wrapped


def _reservations(hosted: Hosted, idem: str) -> list[dict[str, Any]]:
    with hosted.db.read() as conn:
        sql = text("SELECT state, created_ms FROM idempotency WHERE idem_key = :k")
        return [dict(r) for r in conn.execute(sql, {"k": idem}).mappings()]


def _post(hosted: Hosted, idem: str) -> Any:
    with hosted.client() as client:
        return client.post(
            "/api/v1/translate",
            json={"text": LONG, "src": "en", "tgt": "es"},
            headers={"Idempotency-Key": idem},
        )


def test_a_retry_after_the_database_failed_mid_request_runs_at_once(
    hosted: Hosted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job's transaction fails (503) and so does the release: the retry is accepted, not 409."""
    monkeypatch.setattr(jobs, "submit", _fails_once(jobs.submit))
    monkeypatch.setattr(idempotency, "release", _fails_once(idempotency.release))
    failed = _post(hosted, "k-outage")
    assert failed.status_code == 503 and failed.json()["code"] == "database_unavailable", failed.text
    retried = _post(hosted, "k-outage")
    assert retried.status_code == 202, retried.text
    replayed = _post(hosted, "k-outage")
    assert replayed.headers.get("idempotent-replayed") == "true"
    assert replayed.json()["job_id"] == retried.json()["job_id"]


def test_a_reservation_whose_commit_landed_unseen_is_released(
    hosted: Hosted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reservation's commit reached the database but its answer was lost (503): released, not stuck."""
    monkeypatch.setattr(idempotency, "begin", _fails_once(idempotency.begin, after=True))
    failed = _post(hosted, "k-lost-commit")
    assert failed.status_code == 503, failed.text
    assert [r["state"] for r in _reservations(hosted, "k-lost-commit")] == ["running"]
    retried = _post(hosted, "k-lost-commit")
    assert retried.status_code == 202, retried.text


def test_the_owed_release_is_written_within_seconds_without_another_request(
    hosted: Hosted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The retry may go to another API process: the owing process releases by itself, once a second."""
    monkeypatch.setattr(jobs, "submit", _fails_once(jobs.submit))
    monkeypatch.setattr(idempotency, "release", _fails_once(idempotency.release))
    assert _post(hosted, "k-later").status_code == 503
    deadline = time.monotonic() + 20
    while _reservations(hosted, "k-later") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _reservations(hosted, "k-later") == []
    assert len(hosted.app.state.tally.owed) == 0


def test_an_owed_release_leaves_a_reservation_taken_over_since_alone(db: Database) -> None:
    fp = idempotency.fingerprint("POST", "/api/v1/translate", b"{}")
    stale = idempotency.STALE_RUNNING_SECONDS * 1000
    owed = idempotency.OwedReleases()
    assert idempotency.begin(db, "k", "i", fp, now=1_000) is None
    owed.add("k", "i", 1_000, fp)
    assert idempotency.begin(db, "k", "i", fp, now=1_000 + stale) is None  # taken over: a new reservation
    # the owing process's clock behind the other's: due by its clock, and it matches nothing now
    assert owed.settle(db, now=1_500) == 1
    with pytest.raises(IdempotencyConflict):
        idempotency.begin(db, "k", "i", fp, now=3_000 + stale)  # the new reservation still holds the key
    # another request's reservation under the same key and instant: not this one's to release
    assert idempotency.begin(db, "k", "j", "other", now=5_000) is None
    owed.add("k", "j", 5_000, fp)
    owed.settle(db, now=6_000)
    with pytest.raises(IdempotencyConflict):
        idempotency.begin(db, "k", "j", "other", now=7_000)
    # one owed past the stale period is dropped (the stale rule frees it), and at most `limit` are kept
    owed.add("k", "x", 1_000, fp)
    assert owed.settle(db, now=1_000 + stale + 1) == 0 and len(owed) == 0
    small = idempotency.OwedReleases(limit=2)
    for n in range(3):
        small.add("k", f"n{n}", n, fp)
    assert len(small) == 2
