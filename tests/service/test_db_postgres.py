"""The service's database on PostgreSQL (issue 13): a database that cannot be reached is a typed 503
(``DatabaseUnavailable``, ``Retry-After``) at every level, from :class:`Database` to the hosted front door,
and the pool recovers by itself once the server is back (pre-ping); pool sizes come from the settings."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from db_support import DbBackend
from sqlalchemy import select, text
from support import isolated_settings

from dragoman.errors import DatabaseUnavailable
from dragoman.server.hosted.app import create_app
from dragoman.service import accounts, jobs, migrate
from dragoman.service.db import Database
from dragoman.service.db import accounts as accounts_table
from dragoman.settings import Settings
from dragoman.testing.daemon import BackgroundDaemon
from dragoman.testing.postgres import PostgresServer, unavailable_reason
from dragoman.translation.engine import Engine


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def own_server() -> Iterator[PostgresServer]:
    """A server of this test's own (it is stopped and started: the session's stays untouched)."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"PostgreSQL cannot run here: {reason}")
    with PostgresServer() as server:
        yield server


def _migrated(server: PostgresServer, **options: float) -> Database:
    db = Database(server.create_database("svc"), **options)  # type: ignore[arg-type]
    migrate.upgrade(db)
    return db


def test_no_server_listening_is_database_unavailable() -> None:
    db = Database(f"postgresql+psycopg://postgres@127.0.0.1:{_closed_port()}/nothing")
    try:
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailable) as raised, db.write():
            pytest.fail("connected to nothing")
        with pytest.raises(DatabaseUnavailable), db.read():
            pytest.fail("connected to nothing")
        assert time.monotonic() - started < 20  # refused at once, not hung
    finally:
        db.dispose()
    error = raised.value
    assert (error.status, error.code, error.retry_after) == (503, "database_unavailable", 2)
    assert error.to_dict()["retry_after"] == 2
    assert "127.0.0.1" not in error.message  # the server's address stays in the log


def test_a_stopped_server_is_503_and_the_pool_recovers_when_it_is_back(own_server: PostgresServer) -> None:
    db = _migrated(own_server)
    try:
        account = accounts.create_account(db, plan="pro", credits=10)
        own_server.stop()
        with pytest.raises(DatabaseUnavailable):
            accounts.create_account(db, plan="pro", credits=10)
        with pytest.raises(DatabaseUnavailable), db.read() as conn:
            conn.execute(text("SELECT 1"))
        own_server.start()
        # The pooled connections died with the server: pre-ping replaces them, nothing else is needed.
        assert accounts.get_account(db, account.id).balance == 10
    finally:
        db.dispose()


def test_a_connection_cut_mid_transaction_rolls_back_and_is_503(own_server: PostgresServer) -> None:
    db = _migrated(own_server)
    try:
        account = accounts.create_account(db, plan="pro", credits=10)
        with pytest.raises(DatabaseUnavailable), db.write() as conn:
            conn.execute(accounts_table.update().where(accounts_table.c.id == account.id).values(balance=999))
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar()
            killer = Database(db.url)
            try:
                with killer.write() as other:
                    other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            finally:
                killer.dispose()
            conn.execute(text("SELECT 1"))
        with db.read() as conn:  # rolled back; the next transaction gets a live connection
            balance = conn.execute(
                select(accounts_table.c.balance).where(accounts_table.c.id == account.id)
            ).scalar()
        assert balance == 10
    finally:
        db.dispose()


def test_every_pooled_connection_busy_is_503_after_the_pool_timeout(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    backend = DbBackend("postgresql", postgres_server)  # the pool's sizes apply to PostgreSQL only
    db = Database(backend.url(tmp_path), pool_size=1, max_overflow=0, pool_timeout_s=0.3)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with db.read():
            holding.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert holding.wait(30)
        with pytest.raises(DatabaseUnavailable, match="no free connection"), db.read():
            pytest.fail("a second connection from a pool of one")
    finally:
        release.set()
        thread.join(30)
    try:
        with db.read() as conn:  # free again
            assert conn.execute(text("SELECT 1")).scalar() == 1
    finally:
        db.dispose()
        backend.close()


def test_pool_sizes_come_from_the_settings(db_backend: DbBackend, db_url: str) -> None:
    hosted = Settings.from_env(
        {
            "DRAGOMAN_DB_URL": db_url,
            "DRAGOMAN_DB_POOL_SIZE": "3",
            "DRAGOMAN_DB_MAX_OVERFLOW": "4",
            "DRAGOMAN_DB_POOL_TIMEOUT": "7.5",
        }
    ).hosted
    db = Database.from_settings(hosted)
    try:
        assert db.url == db_url
        if db_backend.is_postgres:
            pool: Any = db.engine.pool
            assert (pool.size(), pool._max_overflow, pool._timeout, pool._pre_ping) == (3, 4, 7.5, True)
    finally:
        db.dispose()


def test_the_front_door_answers_503_with_retry_after_while_the_database_is_down(
    own_server: PostgresServer, tmp_path: Path
) -> None:
    db = _migrated(own_server)
    settings = isolated_settings(tmp_path).replace(data_dir=tmp_path / "hosted", db_url=db.url)
    engine = Engine(settings, provenance="server")
    app = create_app(settings, engine, db=db, start_workers=False)
    account = accounts.create_account(db, plan="pro", credits=100)
    key = accounts.create_key(db, account.id).key
    job_url = f"/api/v1/jobs/{uuid.uuid4()}"
    try:
        with (
            BackgroundDaemon(app) as daemon,
            httpx.Client(
                base_url=daemon.url, headers={"Authorization": f"Bearer {key}"}, timeout=60
            ) as client,
        ):
            assert client.get(job_url).status_code == 404
            own_server.stop()
            down = client.get(job_url)
            assert down.status_code == 503, down.text
            assert down.json()["code"] == "database_unavailable"
            assert int(down.headers["Retry-After"]) >= 1
            posted = client.post("/api/v1/translate", json={"text": "hello", "src": "en", "tgt": "es"})
            assert posted.status_code == 503 and posted.json()["code"] == "database_unavailable"
            own_server.start()
            assert client.get(job_url).status_code == 404  # back by itself
            assert jobs.list_jobs(db, accounts.authenticate(db, f"Bearer {key}").key_id)[1] == 0
    finally:
        engine.close()
        db.dispose()
