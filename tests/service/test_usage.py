"""Usage (issue 12; spec 2.4, 8): requests per UTC day, the hosted v2 daily character quota taken
atomically, and the usage report's 30 UTC days (zeros included), balance, month spend and products."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterator

import pytest
from accounts_support import migrated_db, new_key
from sqlalchemy import insert

from dragoman.errors import QuotaExceeded
from dragoman.service import billing, usage
from dragoman.service.accounts import KeyInfo
from dragoman.service.db import Database, ledger, now_ms

DAY = usage.DAY_MS


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    with migrated_db(db_url) as database:
        yield database


def _spend(db: Database, key: KeyInfo, job: str, amount: int, product: str = "translate") -> None:
    with db.write() as conn:
        billing.reserve(conn, key, job, amount, product)
        billing.charge(conn, key.key_id, key.account_id, key.mode, job, amount)


def test_a_key_with_no_activity_gets_thirty_zero_days_ending_today_utc(db: Database) -> None:
    key, _ = new_key(db, credits=123)
    report = usage.usage_report(db, key)
    today = datetime.datetime.now(datetime.UTC).date()
    expected = [(today - datetime.timedelta(days=29 - i)).isoformat() for i in range(30)]
    assert [d.day for d in report.days] == expected
    assert all(d.requests == 0 and d.credits_spent == 0 for d in report.days)
    body = report.to_dict()
    assert body["key_id"] == key.key_id and len(body["days"]) == 30
    assert body["days"][0] == {"day": expected[0], "requests": 0, "credits_spent": 0}
    assert (body["balance"], body["month_spend"], body["products"]) == (123, 0, {})
    assert body["daily_chars_remaining"] == 200_000


def test_requests_and_spending_land_on_their_utc_day(db: Database) -> None:
    key, _ = new_key(db, credits=1000)
    now = now_ms()
    usage.count_request(db, key.key_id)
    usage.count_request(db, key.key_id, 2)
    usage.count_request(db, key.key_id, at_ms=now - 3 * DAY)
    usage.count_request(db, key.key_id, at_ms=now - 40 * DAY)  # outside the window
    _spend(db, key, "j1", 7)
    _spend(db, key, "j2", 5, product="tts")
    with db.write() as conn:  # a charge three days ago and one outside the window
        for job, days_ago in (("old", 3), ("older", 40)):
            conn.execute(
                insert(ledger).values(
                    account_id=key.account_id,
                    key_id=key.key_id,
                    job_id=job,
                    mode="live",
                    entry="charge",
                    amount=-4,
                    spent=4,
                    product="translate",
                    at_ms=now - days_ago * DAY,
                )
            )
    report = usage.usage_report(db, key, at_ms=now)
    by_day = {d.day: (d.requests, d.credits_spent) for d in report.days}
    assert by_day[usage.day_of(now)] == (3, 12)
    assert by_day[usage.day_of(now - 3 * DAY)] == (1, 4)
    assert sum(r for r, _ in by_day.values()) == 4 and sum(c for _, c in by_day.values()) == 16
    assert report.balance == 1000 - 12  # the rows written by hand moved no balance
    month_start, _ = billing.month_bounds_ms(now)
    in_month = 12 + (4 if now - 3 * DAY >= month_start else 0)
    assert report.month_spend == in_month
    assert report.products == {"translate": in_month - 5, "tts": 5}


def test_another_keys_activity_is_not_counted(db: Database) -> None:
    key, _ = new_key(db)
    other, _ = new_key(db)
    usage.count_request(db, other.key_id)
    _spend(db, other, "j1", 3)
    report = usage.usage_report(db, key)
    assert all(d.requests == 0 and d.credits_spent == 0 for d in report.days)


def test_a_request_counted_in_a_transaction_that_fails_is_not_counted(db: Database) -> None:
    key, _ = new_key(db)
    with pytest.raises(RuntimeError), db.write() as conn:
        usage.count_request(conn, key.key_id)
        raise RuntimeError("the work failed")
    assert usage.usage_report(db, key).days[-1].requests == 0


def test_the_daily_quota_takes_characters_until_it_is_used_up(db: Database) -> None:
    key, _ = new_key(db, daily_quota=1000)
    now = now_ms()
    assert usage.add_v2_chars(db, key, 600, at_ms=now) == 400
    assert usage.add_v2_chars(db, key, 400, at_ms=now) == 0
    with pytest.raises(QuotaExceeded) as refused:
        usage.add_v2_chars(db, key, 1, at_ms=now)
    assert refused.value.status == 429
    body = refused.value.to_dict()
    assert body["error"] == "daily character quota exceeded" and body["code"] == "quota_exceeded"
    assert (body["remaining"], body["limit"]) == (0, 1000)
    assert body["resets_at"] == usage.iso_ms(usage.next_day_ms(now)) and body["resets_at"].endswith(
        "T00:00:00.000Z"
    )
    assert usage.v2_remaining(db, key, at_ms=now) == 0
    assert usage.add_v2_chars(db, key, 1000, at_ms=now + DAY) == 0  # a new UTC day, a new quota


def test_a_request_over_what_is_left_takes_nothing_and_says_what_is_left(db: Database) -> None:
    key, _ = new_key(db, daily_quota=1000)
    usage.add_v2_chars(db, key, 700)
    with pytest.raises(QuotaExceeded) as refused:
        usage.add_v2_chars(db, key, 301)
    assert refused.value.remaining == 300
    assert usage.v2_remaining(db, key) == 300
    assert usage.usage_report(db, key).to_dict()["daily_chars_used"] == 700


def test_concurrent_requests_never_pass_the_daily_quota(db: Database) -> None:
    key, _ = new_key(db)  # 200,000 a day
    barrier = threading.Barrier(20)
    results: list[int | str] = []
    lock = threading.Lock()

    def take() -> None:
        barrier.wait()
        try:
            outcome: int | str = usage.add_v2_chars(db, key, 15_000)
        except QuotaExceeded:
            outcome = "refused"
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=take) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert results.count("refused") == 7  # 200,000 // 15,000 = 13 pass
    assert sorted(r for r in results if isinstance(r, int)) == [
        200_000 - 15_000 * n for n in range(13, 0, -1)
    ]
    assert usage.v2_remaining(db, key) == 200_000 - 13 * 15_000


def test_day_helpers_are_utc() -> None:
    instant = 1_795_400_000_000  # 2026-11-23T02:13:20Z
    assert usage.day_of(instant) == "2026-11-23"
    assert usage.next_day_ms(instant) == 1_795_478_400_000
    assert usage.iso_ms(1_795_478_400_123) == "2026-11-24T00:00:00.123Z"
