"""The throwaway PostgreSQL server of the tests and benchmarks (dragoman/testing/postgres.py, issue 13) and
the two-backend fixture (tests/db_support.py)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from db_support import DbBackend

from dragoman.service import migrate
from dragoman.service.db import Database
from dragoman.testing.postgres import PostgresServer, unavailable_reason


def test_a_server_starts_serves_restarts_and_leaves_nothing() -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"PostgreSQL cannot run here: {reason}")
    with PostgresServer() as server:
        url = server.create_database("scratch")
        assert url.startswith("postgresql+psycopg://postgres@127.0.0.1:")
        engine = sa.create_engine(url, pool_pre_ping=True)
        with engine.connect() as conn:
            assert conn.execute(sa.text("SHOW fsync")).scalar() == "off"
            assert conn.execute(sa.text("SELECT current_database()")).scalar() == "scratch"
        server.restart()
        with engine.connect() as conn:  # pre-ping replaces the connection the restart closed
            assert conn.execute(sa.text("SELECT 1")).scalar() == 1
        engine.dispose()
        server.drop_database("scratch")
        root = server.root
        with pytest.raises(ValueError):
            server.create_database('x"; DROP')
    assert not root.exists()


def test_db_url_is_a_migrated_database_on_each_backend(db_backend: DbBackend, db_url: str) -> None:
    db = Database(db_url)
    try:
        migrate.upgrade(db)  # SQLite: made here; PostgreSQL: already at head (a copy of the template)
        assert migrate.current(db) == migrate.head()
        assert db.engine.dialect.name == db_backend.name
    finally:
        db.dispose()
