"""The schema's migrations (issue 12; hosted-plan.md "Schema changes"): Alembic on an empty database gives
exactly ``db.metadata`` (alembic's compare_metadata finds no difference), one linear chain of revisions, and
a second upgrade changes nothing; on SQLite and on PostgreSQL (issue 13: the ``db_backend`` fixture)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from db_support import DbBackend
from sqlalchemy import inspect, text

from dragoman.service import migrate
from dragoman.service.db import Database, metadata


def _schema(db: Database) -> dict[str, object]:
    """Every table's columns, indexes, foreign keys and checks as the database reports them."""
    with db.engine.connect() as conn:
        inspector = inspect(conn)
        return {
            table: (
                [(c["name"], str(c["type"]), c["nullable"]) for c in inspector.get_columns(table)],
                sorted(str(i) for i in inspector.get_indexes(table)),
                sorted(str(f) for f in inspector.get_foreign_keys(table)),
                sorted(str(c) for c in inspector.get_check_constraints(table)),
            )
            for table in sorted(inspector.get_table_names())
        }


def test_upgrade_on_an_empty_database_gives_exactly_the_metadata(
    db_backend: DbBackend, tmp_path: Path
) -> None:
    db = Database(db_backend.url(tmp_path, empty=True))
    try:
        assert migrate.current(db) is None
        assert migrate.upgrade(db) == migrate.head()
        with db.engine.connect() as conn:
            differences = compare_metadata(
                MigrationContext.configure(conn, opts={"compare_type": True}), metadata
            )
            tables = set(inspect(conn).get_table_names())
        assert differences == []
        assert tables == set(metadata.tables) | {"alembic_version"}
    finally:
        db.dispose()


def test_a_second_upgrade_changes_nothing(db_backend: DbBackend, tmp_path: Path) -> None:
    db = Database(db_backend.url(tmp_path, empty=True))
    try:
        first = migrate.upgrade(db)
        before = _schema(db)
        assert migrate.upgrade(db) == first == migrate.head()
        assert _schema(db) == before
        with db.engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == [first]
    finally:
        db.dispose()


def test_the_revisions_form_one_linear_chain() -> None:
    scripts = ScriptDirectory.from_config(migrate._config())
    assert len(scripts.get_heads()) == 1
    revisions = list(scripts.walk_revisions())
    assert revisions[-1].down_revision is None
    for newer, older in zip(revisions, revisions[1:], strict=False):
        assert newer.down_revision == older.revision


def _together(databases: list[Database], action: Callable[[Database], object]) -> list[object]:
    """``action`` on each database from its own thread, all released at once (as processes starting
    together); what each returned or raised, in the order they finished."""
    barrier = threading.Barrier(len(databases))
    outcomes: list[object] = []

    def run(db: Database) -> None:
        barrier.wait(30)
        try:
            outcomes.append(action(db))
        except Exception as exc:  # noqa: BLE001 - the test reports it
            outcomes.append(exc)

    threads = [threading.Thread(target=run, args=(db,)) for db in databases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return outcomes


def test_processes_migrating_together_apply_each_revision_once(db_backend: DbBackend, tmp_path: Path) -> None:
    """N API processes start together, each migrating at start: every one ends at head, none fails."""
    url = db_backend.url(tmp_path, empty=True)
    databases = [Database(url) for _ in range(4)]  # one engine each: as separate processes
    try:
        assert _together(databases, migrate.upgrade) == [migrate.head()] * len(databases)
        with databases[0].engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == [
                migrate.head()
            ]
    finally:
        for db in databases:
            db.dispose()


def _journal_mode(db: Database) -> str:
    with db.engine.connect() as conn:
        return str(conn.exec_driver_sql("PRAGMA journal_mode").scalar_one())


def test_processes_opening_a_fresh_sqlite_file_together_all_connect(tmp_path: Path) -> None:
    """Switching a fresh file to WAL needs an exclusive lock, and SQLite refuses it at once ("database is
    locked", no busy wait) while another connection holds the file: four processes starting together on a new
    SQLite file failed about one trial in five (seen in CI as DatabaseUnavailable from a migration). Each
    connection now retries the switch; 40 trials of four must all connect, in WAL mode."""
    outcomes: list[object] = []
    for trial in range(40):
        databases = [Database(f"sqlite:///{tmp_path / f'fresh-{trial}.db'}") for _ in range(4)]
        try:
            outcomes += _together(databases, _journal_mode)
        finally:
            for db in databases:
                db.dispose()
    assert outcomes == ["wal"] * 160
