"""Retention (dragoman.service.retention): results and exports past 30 days, uploads past 7 days, expired
idempotency rows and old delivered webhook events are purged; what is younger stays."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from jobs_support import paying_key, service_db
from sqlalchemy import insert, select, update

from dragoman.service import jobs, retention
from dragoman.service.accounts import KeyInfo
from dragoman.service.db import Database, idempotency, now_ms, webhook_attempts, webhook_events
from dragoman.service.db import jobs as jobs_table
from dragoman.service.jobs import JobOutcome, JobRecord
from dragoman.service.storage import Storage
from dragoman.settings import HostedSettings

DAY_MS = 86_400_000


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


def _age(storage: Storage, key: str, days: float) -> None:
    """Make the stored file ``key`` look ``days`` old."""
    assert storage.root is not None
    at = (now_ms() - days * DAY_MS) / 1000
    os.utime(storage.root / key, (at, at))


def _finished_job(db: Database, key: KeyInfo, storage: Storage, days_ago: float) -> JobRecord:
    job = jobs.submit(db, key, kind="translate", params={"text": "x"}, title="t", credits=1)
    claimed = jobs.claim(db, "w", 30)
    assert claimed is not None and claimed.id == job.id
    artifacts = {"docx": f"exports/{job.id}/out.docx", "pdf": f"exports/{job.id}/out.pdf"}
    for stored in artifacts.values():
        storage.put_bytes(stored, b"file")
        _age(storage, stored, days_ago)
    done = jobs.complete(db, job.id, "w", JobOutcome(result="translated", artifacts=artifacts))
    assert done is not None
    with db.write() as conn:
        conn.execute(
            update(jobs_table)
            .where(jobs_table.c.id == job.id)
            .values(finished_ms=now_ms() - int(days_ago * DAY_MS))
        )
    return done


def test_old_results_and_exports_are_purged_young_ones_kept(
    db: Database, key: KeyInfo, storage: Storage, tmp_path: Path
) -> None:
    old = _finished_job(db, key, storage, 31)
    young = _finished_job(db, key, storage, 29)
    storage.put_bytes("exports/orphan/left.pdf", b"x")  # no job names it any more
    _age(storage, "exports/orphan/left.pdf", 40)
    report = retention.purge(db, storage, HostedSettings(data_dir=tmp_path), now_ms())
    assert report.results_cleared == 1 and report.files_deleted == 3
    purged = jobs.get(db, key.key_id, old.id)
    assert purged.result is None and purged.artifacts == {}
    assert purged.status == "done" and purged.credits == 1  # the row stays: listed, its credits counted
    kept = jobs.get(db, key.key_id, young.id)
    assert kept.result == "translated" and all(storage.exists(k) for k in kept.artifacts.values())
    assert not any(storage.exists(k) for k in old.artifacts.values())
    assert {o.key for o in storage.list("exports")} == set(young.artifacts.values())
    assert (
        retention.purge(db, storage, HostedSettings(data_dir=tmp_path), now_ms()) == retention.PurgeReport()
    )


def test_uploads_past_seven_days_are_deleted(storage: Storage, db: Database, tmp_path: Path) -> None:
    for name, days in (("old", 8), ("young", 6)):
        storage.put_bytes(f"uploads/{name}/doc.pdf", b"pdf")
        _age(storage, f"uploads/{name}/doc.pdf", days)
    report = retention.purge(db, storage, HostedSettings(data_dir=tmp_path), now_ms())
    assert report.uploads_deleted == 1
    assert [o.key for o in storage.list("uploads")] == ["uploads/young/doc.pdf"]
    shorter = HostedSettings(data_dir=tmp_path, uploads_retention_days=5)
    assert retention.purge(db, storage, shorter, now_ms()).uploads_deleted == 1


def test_expired_idempotency_rows_are_deleted(db: Database, storage: Storage, tmp_path: Path) -> None:
    now = now_ms()
    with db.write() as conn:
        for name, expires in (("expired", now - 1), ("live", now + DAY_MS)):
            conn.execute(
                insert(idempotency).values(
                    key_id="k",
                    idem_key=name,
                    fingerprint="f",
                    state="done",
                    created_ms=now,
                    expires_ms=expires,
                )
            )
    assert retention.purge(db, storage, HostedSettings(data_dir=tmp_path), now).idempotency_deleted == 1
    with db.read() as conn:
        assert conn.execute(select(idempotency.c.idem_key)).scalars().all() == ["live"]


def test_old_finished_webhook_events_go_with_their_log(
    db: Database, storage: Storage, tmp_path: Path
) -> None:
    now = now_ms()
    rows = [("evt_old", "delivered", 31), ("evt_failed", "failed", 40), ("evt_pending", "pending", 40)]
    rows.append(("evt_recent", "delivered", 2))
    with db.write() as conn:
        for event_id, state, days in rows:
            at = now - days * DAY_MS
            conn.execute(
                insert(webhook_events).values(
                    id=event_id,
                    key_id="k",
                    event="job.done",
                    url="https://hooks.example.com/in",
                    payload="{}",
                    state=state,
                    attempts=1,
                    next_attempt_ms=at,
                    created_ms=at,
                )
            )
            conn.execute(
                insert(webhook_attempts).values(
                    event_id=event_id, attempt=1, at_ms=at, status_code=200, duration_ms=5
                )
            )
    report = retention.purge(db, storage, HostedSettings(data_dir=tmp_path), now)
    assert report.webhook_events_deleted == 2
    with db.read() as conn:
        assert sorted(conn.execute(select(webhook_events.c.id)).scalars()) == ["evt_pending", "evt_recent"]
        assert sorted(conn.execute(select(webhook_attempts.c.event_id)).scalars()) == [
            "evt_pending",
            "evt_recent",
        ]
