"""Accounts and API keys (issue 12, "Accounts, keys, money, limits"; spec 5): creation, hashing, the
401/403 of authenticate(), revocation (also from another process, within the cache's 2 s), rotation, the
audit trail."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from accounts_support import balances, ledger_total, migrated_db, new_key
from sqlalchemy import select

from dragoman.errors import InvalidRequest, PlanWithoutApi, Unauthorized
from dragoman.limits import DAILY_CHARS_DEFAULT
from dragoman.service import accounts
from dragoman.service.db import Database, api_keys, key_events, ledger

KEY_SHAPE = re.compile(r"svc_(live|test)_[0-9a-f]{12}_[A-Za-z0-9_-]{43}")


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    with migrated_db(db_url) as database:
        yield database


def test_a_new_account_has_its_plan_credits_and_test_credits_each_with_a_ledger_entry(db: Database) -> None:
    account = accounts.create_account(db, name="Acme", plan="business", credits=250)
    assert account.id.startswith("acct_") and account.plan == "business"
    assert (account.balance, account.test_balance) == (250, accounts.TEST_CREDITS_DEFAULT)
    assert balances(db, account.id) == (250, 10_000)
    assert ledger_total(db, account.id, "live") == 250
    assert ledger_total(db, account.id, "test") == 10_000
    assert [a.id for a in accounts.list_accounts(db)] == [account.id]


@pytest.mark.parametrize(
    "kwargs",
    [{"plan": "gold"}, {"credits": -1}, {"test_credits": -5}, {"credits": True}, {"credits": 1.5}],
)
def test_an_account_with_an_unknown_plan_or_a_bad_amount_is_refused(
    db: Database, kwargs: dict[str, object]
) -> None:
    with pytest.raises(InvalidRequest):
        accounts.create_account(db, **kwargs)  # type: ignore[arg-type]
    assert accounts.list_accounts(db) == []


def test_credit_account_adds_to_the_live_or_test_balance_with_a_ledger_entry(db: Database) -> None:
    account = accounts.create_account(db, credits=10, test_credits=0)
    assert accounts.credit_account(db, account.id, 90) == 100
    assert accounts.credit_account(db, account.id, 7, mode="test") == 7
    assert balances(db, account.id) == (100, 7)
    assert ledger_total(db, account.id, "live") == 100 and ledger_total(db, account.id, "test") == 7
    for amount in (0, -3):
        with pytest.raises(InvalidRequest):
            accounts.credit_account(db, account.id, amount)
    with pytest.raises(InvalidRequest, match="no account"):
        accounts.credit_account(db, "acct_nope", 5)
    assert balances(db, account.id) == (100, 7)


def test_a_key_is_shown_once_and_only_its_hash_is_stored(db: Database) -> None:
    account = accounts.create_account(db)
    created = accounts.create_key(db, account.id, name="ci", webhook_url="https://hooks.example.com/x")
    assert KEY_SHAPE.fullmatch(created.key) and created.key.startswith(f"svc_live_{created.key_id}_")
    assert created.webhook_secret.startswith("whsec_")
    secret = created.key[len("svc_live_") + 13 :]
    with db.read() as conn:
        row = conn.execute(select(api_keys).where(api_keys.c.id == created.key_id)).one()
        events = conn.execute(select(key_events)).all()
    assert row.secret_hash == hashlib.sha256(created.key.encode()).hexdigest()
    stored = " ".join(str(value) for value in row) + " ".join(str(value) for e in events for value in e)
    assert created.key not in stored and secret not in stored
    listed = accounts.list_keys(db)
    assert [k.key_id for k in listed] == [created.key_id]
    assert created.key not in str(listed[0].to_dict()) and "secret" not in str(listed[0].to_dict())
    assert listed[0].daily_quota == DAILY_CHARS_DEFAULT and listed[0].monthly_cap is None


def test_a_test_key_is_svc_test_and_authenticates_in_test_mode(db: Database) -> None:
    info, key = new_key(db, mode="test")
    assert key.startswith("svc_test_") and info.mode == "test"


def test_authenticate_gives_what_the_key_grants(db: Database) -> None:
    account = accounts.create_account(db, plan="enterprise")
    created = accounts.create_key(
        db, account.id, webhook_url="https://h.example.com/", monthly_cap=500, daily_quota=1234
    )
    info = accounts.authenticate(db, f"Bearer {created.key}")
    assert info == accounts.KeyInfo(
        key_id=created.key_id,
        account_id=account.id,
        mode="live",
        plan="enterprise",
        webhook_url="https://h.example.com/",
        webhook_secret=created.webhook_secret,
        monthly_cap=500,
        daily_quota=1234,
    )
    assert accounts.authenticate(db, f"bearer  {created.key} ") == info  # scheme in any case, spaces around


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mode": "prod"},
        {"monthly_cap": -1},
        {"daily_quota": -1},
        {"webhook_url": "ftp://example.com/x"},
        {"webhook_url": "not a url"},
        {"webhook_url": "https://" + "a" * 3000},
    ],
)
def test_a_key_with_bad_settings_is_refused(db: Database, kwargs: dict[str, object]) -> None:
    account = accounts.create_account(db)
    with pytest.raises(InvalidRequest):
        accounts.create_key(db, account.id, **kwargs)  # type: ignore[arg-type]
    assert accounts.list_keys(db) == []


def test_a_key_of_an_unknown_account_is_refused(db: Database) -> None:
    with pytest.raises(InvalidRequest, match="no account"):
        accounts.create_key(db, "acct_nope")


def test_a_plan_without_api_access_is_403_but_only_for_a_good_key(db: Database) -> None:
    account = accounts.create_account(db, plan="free")
    created = accounts.create_key(db, account.id)
    with pytest.raises(PlanWithoutApi) as refused:
        accounts.authenticate(db, f"Bearer {created.key}")
    assert refused.value.status == 403 and refused.value.code == "plan_without_api"
    with pytest.raises(Unauthorized):  # 401 comes before 403: a wrong key learns nothing of the plan
        accounts.authenticate(db, f"Bearer {created.key[:-1]}{'A' if created.key[-1] != 'A' else 'B'}")


def test_a_revoked_key_is_401_at_once_and_keeps_its_audit_trail(db: Database) -> None:
    info, key = new_key(db)
    record = accounts.revoke_key(db, info.key_id)
    assert record.revoked_ms is not None and not record.active
    with pytest.raises(Unauthorized) as refused:
        accounts.authenticate(db, f"Bearer {key}")
    assert refused.value.status == 401
    accounts.revoke_key(db, info.key_id)  # again: nothing changes, no second event
    assert [e["event"] for e in accounts.key_history(db, info.key_id)] == ["created", "revoked"]


def test_a_revocation_from_another_process_bites_within_the_cache_time(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info, key = new_key(db)
    accounts.authenticate(db, f"Bearer {key}")  # cached in this "process"
    other = Database(db.url)  # the admin CLI, another process: its own cache
    try:
        accounts.revoke_key(other, info.key_id)
    finally:
        other.dispose()
    now = accounts._clock()
    monkeypatch.setattr(accounts, "_clock", lambda: now + accounts.AUTH_CACHE_SECONDS + 0.01)
    with pytest.raises(Unauthorized):
        accounts.authenticate(db, f"Bearer {key}")


def test_a_rotated_key_is_replaced_with_the_same_settings_and_webhook_secret(db: Database) -> None:
    account = accounts.create_account(db)
    old = accounts.create_key(
        db, account.id, name="prod", webhook_url="https://h.example.com/", monthly_cap=9, daily_quota=77
    )
    new = accounts.rotate_key(db, old.key_id)
    assert new.key_id != old.key_id and new.key != old.key and new.webhook_secret == old.webhook_secret
    with pytest.raises(Unauthorized):
        accounts.authenticate(db, f"Bearer {old.key}")
    info = accounts.authenticate(db, f"Bearer {new.key}")
    assert (info.monthly_cap, info.daily_quota, info.webhook_url) == (9, 77, "https://h.example.com/")
    records = {k.key_id: k for k in accounts.list_keys(db)}
    assert records[old.key_id].rotated_to == new.key_id and records[new.key_id].name == "prod"
    assert [e["event"] for e in accounts.key_history(db, old.key_id)] == ["created", "rotated"]
    history = accounts.key_history(db, new.key_id)
    assert history[0]["event"] == "created" and history[0]["detail"]["rotated_from"] == old.key_id
    with pytest.raises(InvalidRequest, match="revoked"):
        accounts.rotate_key(db, old.key_id)
    with pytest.raises(InvalidRequest, match="no key"):
        accounts.rotate_key(db, "0123456789ab")
    with pytest.raises(InvalidRequest, match="no key"):
        accounts.revoke_key(db, "0123456789ab")


def test_lineage_follows_rotations_back(db: Database) -> None:
    info, _ = new_key(db)
    second = accounts.rotate_key(db, info.key_id)
    third = accounts.rotate_key(db, second.key_id)
    with db.read() as conn:
        assert sorted(accounts.lineage(conn, third.key_id)) == sorted(
            [info.key_id, second.key_id, third.key_id]
        )
        assert accounts.lineage(conn, info.key_id) == [info.key_id]


def test_keys_are_listed_per_account(db: Database) -> None:
    one, two = accounts.create_account(db), accounts.create_account(db)
    a = accounts.create_key(db, one.id)
    b = accounts.create_key(db, two.id, mode="test")
    assert [k.key_id for k in accounts.list_keys(db, one.id)] == [a.key_id]
    assert [(k.key_id, k.mode) for k in accounts.list_keys(db, two.id)] == [(b.key_id, "test")]
    assert len(accounts.list_keys(db)) == 2


def test_no_ledger_entry_is_written_for_zero_credits(db: Database) -> None:
    account = accounts.create_account(db, credits=0, test_credits=0)
    with db.read() as conn:
        assert conn.execute(select(ledger).where(ledger.c.account_id == account.id)).all() == []
