"""Usage of a key: requests counted per UTC day, the hosted v2 daily character quota, and the usage report
of ``GET /api/v1/usage`` (spec 2.4; HOSTED.md "Usage", "One clock: UTC").

- :func:`count_request` adds one request to the key's day (``usage_days``), in the caller's transaction or
  its own.
- :func:`add_v2_chars` takes characters from the day's v2 quota with one conditional statement
  (:data:`TAKE_V2_CHARS`, ``INSERT … ON CONFLICT DO UPDATE … WHERE v2_chars + n <= quota``, precompiled):
  two requests racing for the last characters can never both pass. 429 :class:`QuotaExceeded` ("daily
  character quota exceeded", with ``remaining``, ``limit``, ``resets_at``) otherwise. The day turns at
  00:00 UTC. :func:`give_back_v2_chars` returns them when the engine failed (the quota is for work done).
- :func:`usage_report`: the last :data:`USAGE_WINDOW_DAYS` UTC days, oldest first, generated in code and
  joined to the rows, so a day without activity is there with zeros; each day's ``requests`` and
  ``credits_spent`` (charges of the key that day). Also the balance the key spends (``balance``; and both
  ``live_balance`` and ``test_balance``), this UTC month's spend of the key (``month_spend``), its cap
  (``monthly_cap``, ``month_resets_at``), the month's spend per product (``products``), and the v2 quota
  left today (``daily_quota``, ``daily_chars_used``, ``daily_chars_remaining``).
"""

from __future__ import annotations

import calendar
import contextlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Dialect, case, func, literal, select, text, update
from sqlalchemy import exc as sa_exc

from dragoman.errors import QuotaExceeded
from dragoman.limits import USAGE_WINDOW_DAYS
from dragoman.service.accounts import KeyInfo
from dragoman.service.billing import month_bounds_ms
from dragoman.service.db import Database, accounts, insert_ignore, ledger, now_ms, usage_days

DAY_MS = 86_400_000


def day_of(at_ms: int) -> str:
    """The UTC calendar day (YYYY-MM-DD) holding ``at_ms``."""
    return time.strftime("%Y-%m-%d", time.gmtime(at_ms // 1000))


def iso_ms(at_ms: int) -> str:
    """An instant as ISO 8601 UTC with milliseconds (spec 2.2), e.g. ``2026-12-01T00:00:00.000Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at_ms // 1000)) + f".{at_ms % 1000:03d}Z"


def next_day_ms(at_ms: int) -> int:
    """The start (00:00 UTC) of the day after the one holding ``at_ms``."""
    return (at_ms // DAY_MS + 1) * DAY_MS


@contextmanager
def _writing(target: Database | Connection) -> Iterator[Connection]:
    if isinstance(target, Connection):
        yield target
    else:
        with target.write() as conn:
            yield conn


def _ensure_day(conn: Connection, key_id: str, day: str) -> None:
    conn.execute(insert_ignore(conn, usage_days).values(key_id=key_id, day=day, requests=0, v2_chars=0))


def count_request(
    target: Database | Connection, key_id: str, n: int = 1, *, at_ms: int | None = None
) -> None:
    """Counts ``n`` requests of ``key_id`` today (UTC), in the transaction of ``target`` if a connection."""
    day = day_of(now_ms() if at_ms is None else at_ms)
    with _writing(target) as conn:
        _ensure_day(conn, key_id, day)
        conn.execute(
            update(usage_days)
            .where(usage_days.c.key_id == key_id, usage_days.c.day == day)
            .values(requests=usage_days.c.requests + n)
        )


#: The v2 quota's one statement: create today's row or add to it, but only while the sum stays within the
#: quota (``ON CONFLICT … DO UPDATE … WHERE``: no row comes back when it would not). One statement in one
#: write transaction, so two requests racing for the last characters, in this process or another, can never
#: both pass (SQLite: ``BEGIN IMMEDIATE`` writers run one at a time; PostgreSQL: the conflicting row is
#: locked and the ``WHERE`` re-read on its newest version). The insert branch has no ``WHERE``, so
#: :func:`add_v2_chars` never sends more than the quota.
TAKE_V2_CHARS = text(
    "INSERT INTO usage_days (key_id, day, requests, v2_chars) VALUES (:key_id, :day, 0, :n) "
    "ON CONFLICT (key_id, day) DO UPDATE SET v2_chars = usage_days.v2_chars + :n "
    "WHERE usage_days.v2_chars + :n <= :quota "
    "RETURNING v2_chars"
)
#: TAKE_V2_CHARS compiled once per dialect name: the SQL in the driver's paramstyle, and the parameter names
#: in order when that style is positional (SQLite's ``?``), else None (PostgreSQL's ``%(name)s``).
_compiled: dict[str, tuple[str, tuple[str, ...] | None]] = {}


def _take_sql(dialect: Dialect) -> tuple[str, tuple[str, ...] | None]:
    done = _compiled.get(dialect.name)
    if done is None:
        compiled = TAKE_V2_CHARS.compile(dialect=dialect)
        names = compiled.positiontup
        done = _compiled[dialect.name] = (str(compiled), tuple(names) if names else None)
    return done


def _take(target: Database | Connection, params: dict[str, Any]) -> Any:
    """Runs :data:`TAKE_V2_CHARS`; the returned row (``None``: over the quota, nothing written).

    On a :class:`Database` the statement runs, precompiled, on a pooled driver connection in a transaction
    of its own (``BEGIN IMMEDIATE`` on SQLite, as :meth:`Database.write` does): building and compiling it
    through SQLAlchemy's Core and a :class:`Connection` on every request cost the hot path about 1 ms of
    CPU, the driver call less than 0.1 ms. A driver error is raised as SQLAlchemy would raise it (a
    dropped connection is discarded from the pool), under the database's own mapping of an unreachable
    database to 503. On a :class:`Connection` it runs in the caller's transaction."""
    if isinstance(target, Connection):
        return target.execute(TAKE_V2_CHARS, params).first()
    engine = target.engine
    dialect = engine.dialect
    sql, names = _take_sql(dialect)
    args: Any = params if names is None else tuple(params[name] for name in names)
    dbapi_error: type[Exception] = dialect.loaded_dbapi.Error
    with target._reachable():  # pool timeouts and unreachable servers: DatabaseUnavailable, as elsewhere
        try:
            raw = engine.raw_connection()
        except dbapi_error as exc:  # no connection (the server is down): wrapped as Engine.connect does
            refused: Any = exc
            raise sa_exc.DBAPIError.instance(
                None,
                None,
                exc,
                dbapi_error,
                connection_invalidated=dialect.is_disconnect(refused, None, None),
                dialect=dialect,
            ) from exc
        try:
            cursor = raw.cursor()
            try:
                if target.is_sqlite:
                    cursor.execute("BEGIN IMMEDIATE")
                cursor.execute(sql, args)
                row = cursor.fetchone()
                raw.commit()
            except dbapi_error as exc:
                failure: Any = exc
                lost = dialect.is_disconnect(failure, raw.dbapi_connection, cursor)
                if not lost:
                    try:
                        raw.rollback()
                    except dbapi_error:
                        lost = True  # a connection that cannot roll back is not given to anyone else
                if lost:
                    raw.invalidate(exc)
                raise sa_exc.DBAPIError.instance(
                    sql, args, exc, dbapi_error, connection_invalidated=lost, dialect=dialect
                ) from exc
            except BaseException:
                raw.rollback()
                raise
            finally:
                with contextlib.suppress(Exception):  # a dead connection's cursor: nothing to free
                    cursor.close()
        finally:
            raw.close()
    return row


def add_v2_chars(target: Database | Connection, key: KeyInfo, n: int, *, at_ms: int | None = None) -> int:
    """Takes ``n`` characters from the key's v2 quota on the UTC day of ``at_ms`` (now); the characters left
    that day afterwards. One conditional statement (:data:`TAKE_V2_CHARS`): atomic and exact across threads
    and processes.

    Raises :class:`QuotaExceeded` (nothing taken) when fewer than ``n`` are left.
    """
    at = now_ms() if at_ms is None else at_ms
    day = day_of(at)
    n = max(0, int(n))
    if n <= key.daily_quota:
        row = _take(target, {"key_id": key.key_id, "day": day, "n": n, "quota": key.daily_quota})
        if row is not None:
            return max(0, key.daily_quota - int(row[0]))
    if isinstance(target, Connection):
        used = _v2_used(target, key.key_id, day)
    else:
        with target.read() as conn:
            used = _v2_used(conn, key.key_id, day)
    raise QuotaExceeded(
        remaining=max(0, key.daily_quota - used), limit=key.daily_quota, resets_at_ms=next_day_ms(at)
    )


def give_back_v2_chars(target: Database | Connection, key: KeyInfo, n: int, *, at_ms: int) -> None:
    """Gives back ``n`` characters taken by :func:`add_v2_chars` at ``at_ms`` (the same UTC day, even if
    the day has turned since) for work that was not done: the quota counts characters translated. Never
    below zero."""
    n = max(0, int(n))
    if n == 0:
        return
    day = day_of(at_ms)
    with _writing(target) as conn:
        conn.execute(
            update(usage_days)
            .where(usage_days.c.key_id == key.key_id, usage_days.c.day == day)
            .values(v2_chars=case((usage_days.c.v2_chars >= n, usage_days.c.v2_chars - n), else_=literal(0)))
        )


def _v2_used(conn: Connection, key_id: str, day: str) -> int:
    value = conn.execute(
        select(usage_days.c.v2_chars).where(usage_days.c.key_id == key_id, usage_days.c.day == day)
    ).scalar()
    return int(value or 0)


def v2_remaining(db: Database, key: KeyInfo, *, at_ms: int | None = None) -> int:
    """Characters of the v2 quota the key has left today (UTC)."""
    with db.read() as conn:
        used = _v2_used(conn, key.key_id, day_of(now_ms() if at_ms is None else at_ms))
    return max(0, key.daily_quota - used)


@dataclass(frozen=True)
class UsageDay:
    day: str  # YYYY-MM-DD (UTC)
    requests: int
    credits_spent: int

    def to_dict(self) -> dict[str, Any]:
        return {"day": self.day, "requests": self.requests, "credits_spent": self.credits_spent}


@dataclass(frozen=True)
class UsageReport:
    key_id: str
    mode: str
    days: tuple[UsageDay, ...]  # the last 30 UTC days, oldest first, today last
    balance: int  # the balance this key spends (live or test credits)
    live_balance: int
    test_balance: int
    month_spend: int  # credits this key spent this UTC month
    monthly_cap: int | None
    month_resets_at_ms: int
    products: dict[str, int] = field(default_factory=dict)  # this month's spend per product
    daily_quota: int = 0
    daily_chars_used: int = 0
    daily_quota_resets_at_ms: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "key_id": self.key_id,
            "mode": self.mode,
            "days": [day.to_dict() for day in self.days],
            "balance": self.balance,
            "live_balance": self.live_balance,
            "test_balance": self.test_balance,
            "month_spend": self.month_spend,
            "monthly_cap": self.monthly_cap,
            "month_resets_at": iso_ms(self.month_resets_at_ms),
            "products": dict(self.products),
            "daily_quota": self.daily_quota,
            "daily_chars_used": self.daily_chars_used,
            "daily_chars_remaining": max(0, self.daily_quota - self.daily_chars_used),
            "daily_quota_resets_at": iso_ms(self.daily_quota_resets_at_ms),
        }


def _days(at_ms: int, count: int) -> list[str]:
    first = at_ms // DAY_MS - (count - 1)
    return [day_of((first + i) * DAY_MS) for i in range(count)]


def usage_report(db: Database, key: KeyInfo, *, at_ms: int | None = None) -> UsageReport:
    """The key's usage (see the module's notes); every one of the 30 days is present."""
    at = now_ms() if at_ms is None else at_ms
    days = _days(at, USAGE_WINDOW_DAYS)
    window_start = calendar.timegm(time.strptime(days[0], "%Y-%m-%d")) * 1000
    month_start, month_end = month_bounds_ms(at)
    day_number = ledger.c.at_ms // DAY_MS
    with db.read() as conn:
        requests = dict(
            conn.execute(
                select(usage_days.c.day, usage_days.c.requests).where(
                    usage_days.c.key_id == key.key_id, usage_days.c.day >= days[0]
                )
            ).all()
        )
        spent_by_day = {
            day_of(int(number) * DAY_MS): int(total)
            for number, total in conn.execute(
                select(day_number, func.sum(ledger.c.spent))
                .where(
                    ledger.c.key_id == key.key_id,
                    ledger.c.entry == "charge",
                    ledger.c.at_ms >= window_start,
                )
                .group_by(day_number)
            ).all()
        }
        products = {
            str(product): int(total)
            for product, total in conn.execute(
                select(ledger.c.product, func.sum(ledger.c.spent))
                .where(
                    ledger.c.key_id == key.key_id,
                    ledger.c.entry == "charge",
                    ledger.c.at_ms >= month_start,
                    ledger.c.at_ms < month_end,
                )
                .group_by(ledger.c.product)
                .order_by(ledger.c.product)
            ).all()
        }
        balances = conn.execute(
            select(accounts.c.balance, accounts.c.test_balance).where(accounts.c.id == key.account_id)
        ).first()
        used_today = _v2_used(conn, key.key_id, days[-1])
    live, test = (int(balances[0]), int(balances[1])) if balances is not None else (0, 0)
    return UsageReport(
        key_id=key.key_id,
        mode=key.mode,
        days=tuple(UsageDay(d, int(requests.get(d, 0)), spent_by_day.get(d, 0)) for d in days),
        balance=test if key.mode == "test" else live,
        live_balance=live,
        test_balance=test,
        month_spend=sum(products.values()),
        monthly_cap=key.monthly_cap,
        month_resets_at_ms=month_end,
        products=products,
        daily_quota=key.daily_quota,
        daily_chars_used=used_today,
        daily_quota_resets_at_ms=next_day_ms(at),
    )
