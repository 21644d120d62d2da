"""Helpers of the accounts, billing and usage tests: a migrated service database (on the backend of the
``db_url`` fixture) and keys of new accounts (imported rootdir-style by the tests of this folder, like
``support``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import func, select

from dragoman.service import accounts, migrate
from dragoman.service.accounts import KeyInfo, Mode
from dragoman.service.db import Database, ledger
from dragoman.service.db import accounts as accounts_table


@contextmanager
def migrated_db(url: str) -> Iterator[Database]:
    """The service database at ``url`` (the ``db_url`` fixture's: SQLite or PostgreSQL), brought to the
    migrations' head; disposed afterwards."""
    db = Database(url)
    try:
        migrate.upgrade(db)
        yield db
    finally:
        accounts.clear_auth_cache(db)
        db.dispose()


def new_key(
    db: Database,
    *,
    credits: int = 1_000,
    test_credits: int = 1_000,
    mode: Mode = "live",
    monthly_cap: int | None = None,
    daily_quota: int = 200_000,
) -> tuple[KeyInfo, str]:
    """(KeyInfo, the key string) of a key of a new pro account."""
    account = accounts.create_account(db, plan="pro", credits=credits, test_credits=test_credits)
    created = accounts.create_key(db, account.id, mode=mode, monthly_cap=monthly_cap, daily_quota=daily_quota)
    return accounts.authenticate(db, f"Bearer {created.key}"), created.key


def balances(db: Database, account_id: str) -> tuple[int, int]:
    """(live, test) balance of an account."""
    with db.read() as conn:
        row = conn.execute(
            select(accounts_table.c.balance, accounts_table.c.test_balance).where(
                accounts_table.c.id == account_id
            )
        ).one()
    return int(row[0]), int(row[1])


def ledger_total(db: Database, account_id: str, mode: str = "live") -> int:
    """The sum of the account's ledger amounts: its balance when every movement has its entry."""
    with db.read() as conn:
        total = conn.execute(
            select(func.coalesce(func.sum(ledger.c.amount), 0)).where(
                ledger.c.account_id == account_id, ledger.c.mode == mode
            )
        ).scalar()
    return int(total or 0)
