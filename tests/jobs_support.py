"""Helpers of the jobs, runner and retention tests: a service database (SQLite or PostgreSQL), a paying key,
and the ledger and outbox read back (tests/service/ imports it rootdir-style, like ``support``)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from sqlalchemy import select

from dragoman.service import accounts
from dragoman.service.accounts import KeyInfo
from dragoman.service.db import Database, ledger, metadata, webhook_events
from dragoman.service.db import accounts as accounts_table

HOOK = "https://hooks.example.com/in"


def service_db(url: str) -> Database:
    """The service database at ``url`` (the ``db_url`` fixture's: SQLite or PostgreSQL) with the schema of
    ``db.metadata`` (PostgreSQL's comes migrated from the template: nothing to create)."""
    db = Database(url)
    metadata.create_all(db.engine)
    return db


def paying_key(
    db: Database, *, credits: int = 10_000, webhook_url: str | None = HOOK, mode: str = "live"
) -> KeyInfo:
    """A key of a new pro account holding ``credits`` (live and test)."""
    account = accounts.create_account(db, name="t", plan="pro", credits=credits, test_credits=credits)
    created = accounts.create_key(db, account.id, webhook_url=webhook_url, mode=mode)  # type: ignore[arg-type]
    info: KeyInfo = accounts.authenticate(db, f"Bearer {created.key}")
    return info


def balance(db: Database, account_id: str) -> int:
    with db.read() as conn:
        return int(
            conn.execute(
                select(accounts_table.c.balance).where(accounts_table.c.id == account_id)
            ).scalar_one()
        )


def entries(db: Database, job_id: str) -> Counter[str]:
    """How many ledger rows of each kind (reserve, charge, release, refund) the job has."""
    with db.read() as conn:
        rows = conn.execute(select(ledger.c.entry).where(ledger.c.job_id == job_id)).scalars().all()
    return Counter(rows)


def ledger_sum(db: Database, account_id: str, mode: str = "live") -> int:
    """The sum of the account's ledger amounts: its balance, when every movement has its entry."""
    with db.read() as conn:
        rows = conn.execute(
            select(ledger.c.amount).where(ledger.c.account_id == account_id, ledger.c.mode == mode)
        ).scalars()
        return sum(int(r) for r in rows)


def spent(db: Database, job_id: str) -> int:
    with db.read() as conn:
        rows = conn.execute(select(ledger.c.spent).where(ledger.c.job_id == job_id)).scalars()
        return sum(int(r) for r in rows)


def events(db: Database, event: str | None = None) -> list[dict[str, Any]]:
    """The outbox's payloads (of ``event``), oldest first."""
    with db.read() as conn:
        query = select(webhook_events.c.event, webhook_events.c.payload).order_by(webhook_events.c.created_ms)
        rows = conn.execute(query).all()
    return [json.loads(p) for e, p in rows if event is None or e == event]
