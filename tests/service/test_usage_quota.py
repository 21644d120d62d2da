"""The hosted v2 daily quota's one statement (issue 12, section D; spec 4.4): exact across processes, never
over the quota however the first request of a day is sized, and the characters of failed work given back
to the day they were taken from (on SQLite and PostgreSQL, like every test using ``db_url``)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from accounts_support import migrated_db, new_key
from sqlalchemy import exc as sa_exc

from dragoman.errors import DatabaseUnavailable, QuotaExceeded
from dragoman.service import migrate, usage
from dragoman.service.db import Database, now_ms
from dragoman.testing.postgres import PostgresServer, unavailable_reason

DAY = usage.DAY_MS

#: A process taking 7 characters at a time from the key (its KeyInfo's fields as JSON) until refused; prints
#: how many times it took them.
_TAKER = textwrap.dedent(
    """
    import json, sys
    from dragoman.errors import QuotaExceeded
    from dragoman.service import usage
    from dragoman.service.accounts import KeyInfo
    from dragoman.service.db import Database

    db = Database(sys.argv[1])
    key = KeyInfo(**json.loads(sys.argv[2]))
    print("ready", flush=True)
    sys.stdin.readline()  # every process starts taking at once
    taken = 0
    while True:
        try:
            usage.add_v2_chars(db, key, 7)
        except QuotaExceeded:
            break
        taken += 1
    print(taken, flush=True)
    """
)


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    with migrated_db(db_url) as database:
        yield database


def test_processes_racing_for_the_quota_take_it_exactly(db: Database, db_url: str) -> None:
    made, _ = new_key(db)
    key = dataclasses.replace(made, daily_quota=7 * 60)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _TAKER, db_url, json.dumps(dataclasses.asdict(key))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        counts = []
        for p in procs:
            out, _ = p.communicate(timeout=120)
            assert p.returncode == 0
            counts.append(int(out.strip()))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert sum(counts) == 60  # never more (atomic), never fewer (none refused while there was room)
    assert usage.v2_remaining(db, key) == 0


def test_a_first_request_over_the_quota_writes_nothing(db: Database) -> None:
    key, _ = new_key(db)
    small = dataclasses.replace(key, daily_quota=10)
    now = now_ms()
    with pytest.raises(QuotaExceeded) as caught:
        usage.add_v2_chars(db, small, 11, at_ms=now)  # no row for the day yet: the insert must not pass
    assert (caught.value.remaining, caught.value.limit) == (10, 10)
    assert usage.v2_remaining(db, small, at_ms=now) == 10
    assert usage.add_v2_chars(db, small, 10, at_ms=now) == 0
    assert usage.add_v2_chars(db, small, 0, at_ms=now) == 0  # nothing asked: passes even when full


def test_given_back_characters_return_to_the_day_they_were_taken_from(db: Database) -> None:
    key, _ = new_key(db)
    small = dataclasses.replace(key, daily_quota=100)
    today = now_ms()
    yesterday = today - DAY
    assert usage.add_v2_chars(db, small, 80, at_ms=yesterday) == 20
    assert usage.add_v2_chars(db, small, 30, at_ms=today) == 70
    usage.give_back_v2_chars(db, small, 80, at_ms=yesterday)  # the day has turned since: still yesterday's
    assert usage.v2_remaining(db, small, at_ms=yesterday) == 100
    assert usage.v2_remaining(db, small, at_ms=today) == 70
    usage.give_back_v2_chars(db, small, 500, at_ms=today)  # never below zero
    assert usage.v2_remaining(db, small, at_ms=today) == 100
    with db.write() as conn:  # in the caller's transaction too
        assert usage.add_v2_chars(conn, small, 40, at_ms=today) == 60
        usage.give_back_v2_chars(conn, small, 15, at_ms=today)
    assert usage.v2_remaining(db, small, at_ms=today) == 75


def test_a_driver_error_is_sqlalchemys_and_leaves_the_pool_usable(tmp_path: Path) -> None:
    """SQLite: a write lock held past busy_timeout is SQLAlchemy's OperationalError (as through a
    Connection), nothing is taken, and the pooled connection works afterwards."""
    url = f"sqlite:///{tmp_path / 'hosted.sqlite3'}"
    with migrated_db(url) as setup:
        made, _ = new_key(setup)
    key = dataclasses.replace(made, daily_quota=100)
    db = Database(url, busy_timeout_ms=50)
    holder = sqlite3.connect(tmp_path / "hosted.sqlite3", isolation_level=None)
    try:
        assert usage.add_v2_chars(db, key, 10) == 90
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(sa_exc.OperationalError, match="locked"):
            usage.add_v2_chars(db, key, 10)
        holder.execute("ROLLBACK")
        assert usage.add_v2_chars(db, key, 10) == 80
        assert usage.v2_remaining(db, key) == 80
    finally:
        holder.close()
        db.dispose()


def test_an_unreachable_postgresql_is_503_and_the_quota_works_when_it_is_back() -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"PostgreSQL cannot run here: {reason}")
    with PostgresServer() as server:
        db = Database(server.create_database("svc"))
        try:
            migrate.upgrade(db)
            made, _ = new_key(db)
            key = dataclasses.replace(made, daily_quota=100)
            assert usage.add_v2_chars(db, key, 30) == 70
            server.stop()
            with pytest.raises(DatabaseUnavailable):
                usage.add_v2_chars(db, key, 30)
            server.start()
            assert usage.add_v2_chars(db, key, 30) == 40  # the failed attempt took nothing
        finally:
            db.dispose()
