"""The service database's two backends for tests (issue 13): the fixtures ``db_backend`` and ``db_url`` in
``tests/conftest.py`` run a test once on SQLite and once on PostgreSQL.

PostgreSQL: one throwaway server per test session (:class:`dragoman.testing.postgres.PostgresServer`) with
a template database migrated once; each test gets fresh databases copied from it (``CREATE DATABASE …
TEMPLATE``, a fraction of a second), dropped at the test's end. SQLite: a file under the test's folder,
migrated by the test as before (migrating an empty SQLite file is as fast as copying one).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from dragoman.testing.postgres import PostgresServer

BACKENDS = ("sqlite", "postgresql")
TEMPLATE = "dragoman_template"
_names = itertools.count()


def start_postgres() -> PostgresServer:
    """The session's server, with the template database made by the migrations (nobody stays connected to
    it, so it can be copied)."""
    from dragoman.service import migrate
    from dragoman.service.db import Database

    server = PostgresServer().__enter__()
    try:
        db = Database(server.create_database(TEMPLATE))
        try:
            migrate.upgrade(db)
        finally:
            db.dispose()
    except BaseException:
        server.cleanup()
        raise
    return server


def backend_for(request: pytest.FixtureRequest) -> DbBackend:
    """The :class:`DbBackend` of a fixture parametrised with :data:`BACKENDS` (``request.param``); the
    session's PostgreSQL server is started (or the test skipped, saying why) only for ``postgresql``."""
    name = request.param
    server = request.getfixturevalue("postgres_server") if name == "postgresql" else None
    return DbBackend(name, server)


class DbBackend:
    """Makes the service databases of one test on one backend; :meth:`close` drops what it made."""

    def __init__(self, name: str, server: PostgresServer | None = None) -> None:
        assert name in BACKENDS
        self.name = name
        self.server = server
        self._by_root: dict[tuple[Path, bool], str] = {}
        self._made: list[str] = []

    @property
    def is_postgres(self) -> bool:
        return self.name == "postgresql"

    def url(self, root: Path, *, empty: bool = False) -> str:
        """The URL of the service database that belongs to ``root`` (the same URL for the same root: a
        restart on the same data). PostgreSQL: a new database, migrated (a copy of the template) unless
        ``empty``; SQLite: ``root/hosted.sqlite3``, whose migration is the caller's, as in production."""
        if not self.is_postgres:
            return f"sqlite:///{root / 'hosted.sqlite3'}"
        key = (root, empty)
        if key not in self._by_root:
            assert self.server is not None
            name = f"t{os.getpid()}_{next(_names)}"
            self._by_root[key] = self.server.create_database(name, template=None if empty else TEMPLATE)
            self._made.append(name)
        return self._by_root[key]

    def close(self) -> None:
        """Drops this test's PostgreSQL databases (closing connections a test left open)."""
        if self.server is not None and self.server.running:
            for name in self._made:
                self.server.drop_database(name)
        self._made.clear()
        self._by_root.clear()
