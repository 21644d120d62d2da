"""Schema migrations (Alembic, programmatic: no ``alembic.ini``): ``dragoman hosted migrate`` runs
:func:`upgrade`; ``dragoman hosted serve`` runs it at start. Two processes starting together (N API processes
of a scaled deployment) must not apply one revision twice: on PostgreSQL the migration's transaction first
takes an advisory lock (the second process waits, then finds the schema at head: DDL is transactional there);
on SQLite the transaction is ``BEGIN IMMEDIATE``.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from dragoman.service.db import Database, lock

MIGRATIONS = Path(__file__).with_name("migrations")


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def head() -> str:
    """The newest revision this code knows."""
    revision = ScriptDirectory.from_config(_config()).get_current_head()
    assert revision is not None
    return revision


def current(db: Database) -> str | None:
    """The revision the database is at (None: empty)."""
    with db.read() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(db: Database, revision: str = "head") -> str:
    """Brings the schema up to ``revision``; returns the revision the database is at afterwards."""
    config = _config()
    with db.write() as connection:
        lock(connection, "migrate", "dragoman")
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
    return current(db) or ""
