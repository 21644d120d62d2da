"""Accounts and API keys of the hosted service (spec 5, HOSTED.md "Keys"): create, list, credit, revoke,
rotate, and :func:`authenticate` on every request.

A key is ``svc_live_<id>_<secret>`` (or ``svc_test_…`` for a test key, which spends the account's separate
test balance): ``<id>`` is 12 lowercase hex digits, the key's public id (``key_id`` in usage, logs and the
CLI); ``<secret>`` is ``secrets.token_urlsafe(32)``. Only the sha256 (hex) of the whole key string is stored;
the key is shown once, by :func:`create_key` / :func:`rotate_key`, and cannot be recovered. A presented key
is looked up by its id and its hash compared with :func:`hmac.compare_digest` (constant time; an unknown id
is compared against a dummy hash so both paths cost the same).

Every change of a key (created, revoked, rotated) is written to ``key_events`` in the same transaction: the
audit trail of spec 5.2.

**The authentication cache.** :func:`authenticate` is on every request's hot path, so a successful lookup
is kept in memory for at most :data:`AUTH_CACHE_SECONDS` (2 s) per database object. Revoking or rotating a
key through this module drops it from the cache of this process at once; another process (the admin CLI,
another server process) sees the revocation bite within those 2 seconds. Failed lookups are never cached.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Connection, insert, select, update

from dragoman.errors import InvalidRequest, PlanWithoutApi, Unauthorized
from dragoman.limits import DAILY_CHARS_DEFAULT
from dragoman.service.db import (
    PLANS,
    PLANS_WITH_API,
    Database,
    accounts,
    api_keys,
    key_events,
    ledger,
    now_ms,
)

Mode = Literal["live", "test"]
MODES: tuple[Mode, ...] = ("live", "test")

#: Seconds a successful :func:`authenticate` is remembered (revocation from another process bites within it).
AUTH_CACHE_SECONDS = 2.0
#: Entries the cache holds before it is emptied (a bound on memory, not a tuning knob).
_AUTH_CACHE_MAX = 10_000
#: Longest Authorization header looked at; a real one is ~70 characters. Longer is refused unread.
MAX_AUTHORIZATION_CHARS = 256
#: Test credits a new account starts with (test keys spend them; spec 5.8's second description).
TEST_CREDITS_DEFAULT = 10_000

_KEY_RE = re.compile(r"svc_(live|test)_([0-9a-f]{12})_([A-Za-z0-9_-]{16,128})", re.ASCII)
_BEARER_RE = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] +(\S+) *", re.ASCII)
_DUMMY_HASH = hashlib.sha256(b"dragoman: no such key").hexdigest()
#: The cache's clock (monotonic seconds; a test moves it).
_clock = time.monotonic


@dataclass(frozen=True)
class Account:
    id: str
    name: str
    plan: str
    balance: int
    test_balance: int
    created_ms: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "account_id": self.id,
            "name": self.name,
            "plan": self.plan,
            "balance": self.balance,
            "test_balance": self.test_balance,
            "created_ms": self.created_ms,
        }


@dataclass(frozen=True)
class KeyInfo:
    """What a request's key grants: who pays (account, mode), where events go, and its limits."""

    key_id: str
    account_id: str
    mode: Mode
    plan: str
    webhook_url: str | None
    webhook_secret: str
    monthly_cap: int | None  # credits per UTC month; None: no cap
    daily_quota: int  # hosted v2 characters per UTC day


@dataclass(frozen=True)
class KeyRecord:
    """A key as listed (never its secret or hash)."""

    key_id: str
    account_id: str
    mode: Mode
    name: str
    webhook_url: str | None
    monthly_cap: int | None
    daily_quota: int
    created_ms: int
    revoked_ms: int | None
    rotated_to: str | None

    @property
    def active(self) -> bool:
        return self.revoked_ms is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "key_id": self.key_id,
            "account_id": self.account_id,
            "mode": self.mode,
            "name": self.name,
            "webhook_url": self.webhook_url,
            "monthly_cap": self.monthly_cap,
            "daily_quota": self.daily_quota,
            "created_ms": self.created_ms,
            "revoked_ms": self.revoked_ms,
            "rotated_to": self.rotated_to,
            "active": self.active,
        }


@dataclass(frozen=True)
class CreatedKey:
    """A new key: ``key`` and ``webhook_secret`` are shown once and never again."""

    key: str
    key_id: str
    webhook_secret: str

    def to_dict(self) -> dict[str, str]:
        return {"key": self.key, "key_id": self.key_id, "webhook_secret": self.webhook_secret}


def hash_key(key: str) -> str:
    """The stored form of a key: sha256 hex of the whole key string."""
    return hashlib.sha256(key.encode("ascii")).hexdigest()


def new_webhook_secret() -> str:
    """A Standard Webhooks signing secret: ``whsec_`` and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def _new_key(mode: Mode) -> tuple[str, str]:
    key_id = secrets.token_hex(6)
    return key_id, f"svc_{mode}_{key_id}_{secrets.token_urlsafe(32)}"


def _event(conn: Connection, key_id: str, event: str, detail: dict[str, Any], at: int) -> None:
    conn.execute(insert(key_events).values(key_id=key_id, event=event, detail=detail, at_ms=at))


# ----- accounts --------------------------------------------------------------------------------------------
def _check_plan(plan: str) -> str:
    if plan not in PLANS:
        raise InvalidRequest(f"unknown plan {plan!r}; plans are {', '.join(PLANS)}")
    return plan


def _check_amount(value: int, what: str, *, positive: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < (1 if positive else 0):
        raise InvalidRequest(f"{what} must be a whole number {'above' if positive else 'of at least'} 0")
    return value


def create_account(
    db: Database,
    *,
    name: str = "",
    plan: str = "pro",
    credits: int = 0,
    test_credits: int = TEST_CREDITS_DEFAULT,
) -> Account:
    """A new account with ``credits`` live and ``test_credits`` test credits (each a ledger ``credit``)."""
    _check_plan(plan)
    _check_amount(credits, "credits")
    _check_amount(test_credits, "test credits")
    account_id = "acct_" + secrets.token_hex(8)
    at = now_ms()
    with db.write() as conn:
        conn.execute(
            insert(accounts).values(
                id=account_id,
                name=name,
                plan=plan,
                balance=credits,
                test_balance=test_credits,
                created_ms=at,
            )
        )
        for mode, amount in (("live", credits), ("test", test_credits)):
            if amount:
                conn.execute(
                    insert(ledger).values(
                        account_id=account_id, mode=mode, entry="credit", amount=amount, spent=0, at_ms=at
                    )
                )
    return Account(account_id, name, plan, credits, test_credits, at)


def _account(row: Any) -> Account:
    return Account(row.id, row.name, row.plan, row.balance, row.test_balance, row.created_ms)


def get_account(db: Database, account_id: str) -> Account:
    with db.read() as conn:
        row = conn.execute(select(accounts).where(accounts.c.id == account_id)).first()
    if row is None:
        raise InvalidRequest(f"no account {account_id!r}; `dragoman hosted accounts list` shows them")
    return _account(row)


def list_accounts(db: Database) -> list[Account]:
    with db.read() as conn:
        rows = conn.execute(select(accounts).order_by(accounts.c.created_ms, accounts.c.id)).all()
    return [_account(row) for row in rows]


def credit_account(db: Database, account_id: str, amount: int, *, mode: Mode = "live") -> int:
    """Adds ``amount`` credits to the live (or test) balance with a ledger ``credit``; the new balance."""
    _check_amount(amount, "the amount", positive=True)
    if mode not in MODES:
        raise InvalidRequest(f"mode must be live or test, not {mode!r}")
    column = accounts.c.balance if mode == "live" else accounts.c.test_balance
    with db.write() as conn:
        found = conn.execute(
            update(accounts)
            .where(accounts.c.id == account_id)
            .values({column: column + amount})
            .returning(column)
        ).first()
        if found is None:
            raise InvalidRequest(f"no account {account_id!r}; `dragoman hosted accounts list` shows them")
        conn.execute(
            insert(ledger).values(
                account_id=account_id, mode=mode, entry="credit", amount=amount, spent=0, at_ms=now_ms()
            )
        )
    return int(found[0])


# ----- keys ------------------------------------------------------------------------------------------------
def _check_webhook_url(url: str | None) -> str | None:
    if url is None or url == "":
        return None
    if len(url) > 2048 or not re.fullmatch(r"https?://[^\s/?#]+[^\s]*", url, re.ASCII | re.IGNORECASE):
        raise InvalidRequest(
            f"the webhook URL must be an http(s) URL of at most 2,048 characters: {url[:80]!r}"
        )
    return url


def create_key(
    db: Database,
    account_id: str,
    *,
    mode: Mode = "live",
    name: str = "",
    webhook_url: str | None = None,
    monthly_cap: int | None = None,
    daily_quota: int = DAILY_CHARS_DEFAULT,
) -> CreatedKey:
    """A new key of ``account_id``; the key and webhook secret returned are shown once (a hash is kept)."""
    if mode not in MODES:
        raise InvalidRequest(f"mode must be live or test, not {mode!r}")
    if monthly_cap is not None:
        _check_amount(monthly_cap, "the monthly cap")
    _check_amount(daily_quota, "the daily quota")
    webhook_url = _check_webhook_url(webhook_url)
    with db.write() as conn:
        if conn.execute(select(accounts.c.id).where(accounts.c.id == account_id)).first() is None:
            raise InvalidRequest(f"no account {account_id!r}; `dragoman hosted accounts list` shows them")
        return _insert_key(
            conn,
            account_id,
            mode=mode,
            name=name,
            webhook_url=webhook_url,
            webhook_secret=new_webhook_secret(),
            monthly_cap=monthly_cap,
            daily_quota=daily_quota,
            detail={},
        )


def _insert_key(
    conn: Connection,
    account_id: str,
    *,
    mode: Mode,
    name: str,
    webhook_url: str | None,
    webhook_secret: str,
    monthly_cap: int | None,
    daily_quota: int,
    detail: dict[str, Any],
) -> CreatedKey:
    at = now_ms()
    while True:  # 48 random bits: a clash is all but impossible, but a clash must not fail the call
        key_id, key = _new_key(mode)
        if conn.execute(select(api_keys.c.id).where(api_keys.c.id == key_id)).first() is None:
            break
    conn.execute(
        insert(api_keys).values(
            id=key_id,
            account_id=account_id,
            mode=mode,
            secret_hash=hash_key(key),
            name=name,
            webhook_url=webhook_url,
            webhook_secret=webhook_secret,
            monthly_cap=monthly_cap,
            daily_quota=daily_quota,
            created_ms=at,
        )
    )
    settings = {
        "account_id": account_id,
        "mode": mode,
        "name": name,
        "webhook_url": webhook_url,
        "monthly_cap": monthly_cap,
        "daily_quota": daily_quota,
    }
    _event(conn, key_id, "created", {**settings, **detail}, at)
    return CreatedKey(key, key_id, webhook_secret)


def _record(row: Any) -> KeyRecord:
    return KeyRecord(
        row.id,
        row.account_id,
        row.mode,
        row.name,
        row.webhook_url,
        row.monthly_cap,
        row.daily_quota,
        row.created_ms,
        row.revoked_ms,
        row.rotated_to,
    )


def list_keys(db: Database, account_id: str | None = None) -> list[KeyRecord]:
    query = select(api_keys).order_by(api_keys.c.created_ms, api_keys.c.id)
    if account_id is not None:
        query = query.where(api_keys.c.account_id == account_id)
    with db.read() as conn:
        return [_record(row) for row in conn.execute(query).all()]


def get_key(db: Database, key_id: str) -> KeyRecord:
    with db.read() as conn:
        row = conn.execute(select(api_keys).where(api_keys.c.id == key_id)).first()
    if row is None:
        raise InvalidRequest(f"no key {key_id!r}; `dragoman hosted keys list` shows them")
    return _record(row)


def key_history(db: Database, key_id: str) -> list[dict[str, Any]]:
    """The audit trail of a key, oldest first: ``{"event", "detail", "at_ms"}``."""
    with db.read() as conn:
        rows = conn.execute(
            select(key_events).where(key_events.c.key_id == key_id).order_by(key_events.c.id)
        ).all()
    return [{"event": row.event, "detail": row.detail, "at_ms": row.at_ms} for row in rows]


def revoke_key(db: Database, key_id: str) -> KeyRecord:
    """Revokes a key (it answers 401 from now on; within :data:`AUTH_CACHE_SECONDS` in other processes).
    Revoking a revoked key changes nothing and writes no event."""
    at = now_ms()
    with db.write() as conn:
        done = conn.execute(
            update(api_keys)
            .where(api_keys.c.id == key_id, api_keys.c.revoked_ms.is_(None))
            .values(revoked_ms=at)
        ).rowcount
        if done:
            _event(conn, key_id, "revoked", {}, at)
    _forget(db, key_id)
    return get_key(db, key_id)


def rotate_key(db: Database, key_id: str) -> CreatedKey:
    """Replaces a key by a new one with the same account, mode, name, webhook URL and webhook signing secret,
    cap and quota; the old key is revoked at once (``rotated_to`` names the new one). Both get an event."""
    at = now_ms()
    with db.write() as conn:
        row = conn.execute(select(api_keys).where(api_keys.c.id == key_id)).first()
        if row is None:
            raise InvalidRequest(f"no key {key_id!r}; `dragoman hosted keys list` shows them")
        if row.revoked_ms is not None:
            raise InvalidRequest(f"key {key_id} is revoked; create a new key instead of rotating it")
        created = _insert_key(
            conn,
            row.account_id,
            mode=row.mode,
            name=row.name,
            webhook_url=row.webhook_url,
            webhook_secret=row.webhook_secret,
            monthly_cap=row.monthly_cap,
            daily_quota=row.daily_quota,
            detail={"rotated_from": key_id},
        )
        done = conn.execute(
            update(api_keys)
            .where(api_keys.c.id == key_id, api_keys.c.revoked_ms.is_(None))
            .values(revoked_ms=at, rotated_to=created.key_id)
        ).rowcount
        if (
            not done
        ):  # revoked or rotated by another caller meanwhile: this rotation is undone with the rollback
            raise InvalidRequest(f"key {key_id} was revoked or rotated meanwhile")
        _event(conn, key_id, "rotated", {"rotated_to": created.key_id}, at)
    _forget(db, key_id)
    return created


def lineage(conn: Connection, key_id: str) -> list[str]:
    """The key and every key it replaced by rotation (the monthly cap counts their spending together)."""
    ids, frontier = [key_id], [key_id]
    while frontier and len(ids) < 1000:
        frontier = list(
            conn.execute(select(api_keys.c.id).where(api_keys.c.rotated_to.in_(frontier))).scalars()
        )
        ids.extend(k for k in frontier if k not in ids)
    return ids


# ----- authentication --------------------------------------------------------------------------------------
class _AuthCache:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: dict[str, tuple[KeyInfo, float]] = {}  # hash of the key -> (info, expires, monotonic)


_CACHES: weakref.WeakKeyDictionary[Database, _AuthCache] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def _cache(db: Database) -> _AuthCache:
    with _CACHES_LOCK:
        cache = _CACHES.get(db)
        if cache is None:
            cache = _CACHES[db] = _AuthCache()
        return cache


def _forget(db: Database, key_id: str) -> None:
    cache = _cache(db)
    with cache.lock:
        for digest in [d for d, (info, _) in cache.entries.items() if info.key_id == key_id]:
            del cache.entries[digest]


def clear_auth_cache(db: Database) -> None:
    cache = _cache(db)
    with cache.lock:
        cache.entries.clear()


_MISSING = "missing API key: send Authorization: Bearer svc_live_… (or svc_test_…)"
_INVALID = "invalid API key: send Authorization: Bearer svc_live_… (or svc_test_…) with a key of this service"


def parse_key(authorization_header: str | None) -> tuple[Mode, str, str] | None:
    """``(mode, key_id, key)`` of a well-formed ``Bearer svc_…`` header; None for anything else."""
    if not authorization_header or len(authorization_header) > MAX_AUTHORIZATION_CHARS:
        return None
    bearer = _BEARER_RE.fullmatch(authorization_header)
    if bearer is None:
        return None
    key = bearer.group(1)
    found = _KEY_RE.fullmatch(key)
    if found is None:
        return None
    mode: Mode = "live" if found.group(1) == "live" else "test"
    return mode, found.group(2), key


def authenticate(db: Database, authorization_header: str | None) -> KeyInfo:
    """The key of a request's ``Authorization`` header.

    Raises :class:`Unauthorized` (401) when the header is missing, malformed, too long or not ASCII, or names
    an unknown, wrong, revoked or rotated-away key (one message for all: it tells a guesser nothing), and
    :class:`PlanWithoutApi` (403) when the key is good but the account's plan has no API access. Never
    raises anything else for any header.
    """
    parsed = parse_key(authorization_header)
    if parsed is None:
        raise Unauthorized(_INVALID if authorization_header else _MISSING)
    mode, key_id, key = parsed
    digest = hash_key(key)
    cache = _cache(db)
    now = _clock()
    with cache.lock:
        hit = cache.entries.get(digest)
    if hit is not None and hit[1] > now:
        info = hit[0]
    else:
        info = _lookup(db, mode, key_id, digest)
        with cache.lock:
            if len(cache.entries) >= _AUTH_CACHE_MAX:
                cache.entries.clear()
            cache.entries[digest] = (info, now + AUTH_CACHE_SECONDS)
    if info.plan not in PLANS_WITH_API:
        raise PlanWithoutApi(
            f"the {info.plan} plan does not include API access; API keys work on the "
            f"{', '.join(p for p in PLANS if p in PLANS_WITH_API)} plans"
        )
    return info


def _lookup(db: Database, mode: Mode, key_id: str, digest: str) -> KeyInfo:
    with db.read() as conn:
        row = conn.execute(
            select(
                api_keys.c.id,
                api_keys.c.account_id,
                api_keys.c.mode,
                api_keys.c.secret_hash,
                api_keys.c.webhook_url,
                api_keys.c.webhook_secret,
                api_keys.c.monthly_cap,
                api_keys.c.daily_quota,
                api_keys.c.revoked_ms,
                accounts.c.plan,
            )
            .join(accounts, accounts.c.id == api_keys.c.account_id)
            .where(api_keys.c.id == key_id)
        ).first()
    stored = row.secret_hash if row is not None else _DUMMY_HASH
    matches = hmac.compare_digest(stored.encode("ascii"), digest.encode("ascii"))
    if row is None or not matches or row.mode != mode:
        raise Unauthorized(_INVALID)
    if row.revoked_ms is not None:
        raise Unauthorized("this API key has been revoked; use a current key")
    return KeyInfo(
        key_id=row.id,
        account_id=row.account_id,
        mode=row.mode,
        plan=row.plan,
        webhook_url=row.webhook_url,
        webhook_secret=row.webhook_secret,
        monthly_cap=row.monthly_cap,
        daily_quota=row.daily_quota,
    )
