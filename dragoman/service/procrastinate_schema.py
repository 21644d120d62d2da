"""Procrastinate's own schema (its tables, types and SQL functions) in the service's PostgreSQL database, kept
at the installed Procrastinate's version (issue 13): ``dragoman hosted migrate`` (and ``serve`` / ``worker``
at start, when dispatch is ``procrastinate``) runs :func:`upgrade`.

How Procrastinate ships its schema (its docs, "Migrate the Procrastinate schema"): ``procrastinate/sql/
schema.sql`` is the whole schema of the installed version; ``procrastinate/sql/migrations/*.sql`` are plain
SQL scripts, named ``xx.yy.zz_ab_[pre|post_]description.sql`` and applied in the order of their names; the
schema of a fresh install equals the first of them followed by all the others. Procrastinate does not record
which were applied ("it's your responsibility to keep track"): Alembic does not know them either (they are not
ours, and their names are not revisions), so this module keeps the record itself, in the table
:data:`TRACKING_TABLE` (one row per applied script: its file name, when, and how: ``schema`` for a fresh
install, ``baseline`` for a schema found without a record, ``migration`` for a script applied here).

:func:`upgrade`, under a session advisory lock (two processes migrating at once: the second waits, then finds
nothing to do; the lock key is the one the earlier ``apply_schema`` took, so an older process waits too):

- no Procrastinate schema: ``schema.sql`` in one transaction, every shipped script recorded in it;
- a schema without a record (made by dragoman before this record existed, which applied the schema of
  Procrastinate 3.10.0 or newer): the scripts up to :data:`BASELINE_LAST`, 3.10.0's newest, are recorded as
  applied after a check by inspection that its newest change is there (a schema older than that was never
  made by dragoman: :class:`~dragoman.errors.ConfigError` says how to record it by hand);
- then every shipped script not recorded, in name order, **each in a transaction of its own** together with
  its record: a script that adds an enum value (``ALTER TYPE … ADD VALUE``: 02.06.00_01, 03.04.00_01) must be
  committed before a later script uses the value (PostgreSQL refuses "unsafe use of new value" inside the
  same transaction: measured applying 02.06.00_01 to 02.14.01_01 in one), so one transaction for all cannot
  work. A failure rolls its script back and stops; the next run resumes at that script.

``migrate`` applies the ``pre`` and the ``post`` scripts together: Procrastinate's "easier way, with service
interruption" (stop the API processes and workers, migrate, start the new version). A script recorded in the
database that the installed Procrastinate does not ship (the code was downgraded) is logged, not undone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, text

from dragoman.errors import ConfigError
from dragoman.service.db import Database

log = logging.getLogger(__name__)

#: Our record of the Procrastinate migration scripts applied to this database.
TRACKING_TABLE = "dragoman_procrastinate_migrations"
#: The newest script Procrastinate 3.10.0 ships (``procrastinate>=3.10`` in pyproject): a schema found
#: without a record was made from 3.10.0's ``schema.sql`` or a newer one, so it holds at least these.
BASELINE_LAST = "03.04.00_50_post_add_retry_failed_job_procedure.sql"
#: Whether the baseline's newest change is in the schema (03.04.00_01 adds the event ``retried`` and
#: ``procrastinate_retry_job_v2``; 03.04.00_50 rewrites the status-events trigger to emit ``retried``).
BASELINE_PROBE = (
    "SELECT to_regprocedure('procrastinate_retry_job_v2(bigint, timestamp with time zone, integer, "
    "character varying, character varying)') IS NOT NULL "
    "AND EXISTS (SELECT 1 FROM pg_enum e JOIN pg_type t ON t.oid = e.enumtypid "
    "WHERE t.typname = 'procrastinate_job_event_type' AND e.enumlabel = 'retried') "
    "AND EXISTS (SELECT 1 FROM pg_proc "
    "WHERE proname = 'procrastinate_trigger_function_status_events_update_v1' AND prosrc LIKE '%retried%')"
)
#: The advisory lock key of the schema's changes (the same as ``dispatch.SCHEMA_LOCK_KEY``).
LOCK_KEY = 0x64726167_6F6D616E & 0x7FFFFFFFFFFFFFFF


@dataclass(frozen=True)
class SchemaChange:
    """What :func:`upgrade` did: ``created`` (the whole schema applied now), ``baseline`` (an unrecorded
    schema's scripts recorded now), ``applied`` (scripts applied now, in order)."""

    created: bool = False
    baseline: tuple[str, ...] = ()
    applied: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return self.created or bool(self.applied)


def migrations_dir() -> Path:
    """The installed Procrastinate's migration scripts (``procrastinate schema --migrations-path``)."""
    from procrastinate.schema import SchemaManager

    return Path(SchemaManager.get_migrations_path())


def shipped() -> tuple[str, ...]:
    """The file names of the installed Procrastinate's migration scripts, in the order they apply."""
    return tuple(sorted(p.name for p in migrations_dir().glob("*.sql")))


def exists(conn: Connection) -> bool:
    """Whether Procrastinate's tables are in the database."""
    return conn.execute(text("SELECT to_regclass('procrastinate_jobs')")).scalar() is not None


def recorded(db: Database) -> tuple[str, ...]:
    """The scripts recorded as applied (empty: no record, or no table yet), in name order."""
    with db.read() as conn:
        if conn.execute(text(f"SELECT to_regclass('{TRACKING_TABLE}')")).scalar() is None:
            return ()
        return tuple(conn.execute(text(f"SELECT name FROM {TRACKING_TABLE} ORDER BY name")).scalars())


def pending(db: Database) -> tuple[str, ...]:
    """The shipped scripts not yet applied (all of them when there is no schema)."""
    done = set(recorded(db))
    return tuple(name for name in shipped() if name not in done)


def _run_script(conn: Connection, sql: str) -> None:
    """Runs a script of many statements (no parameters) on ``conn``'s transaction."""
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(sql)
    finally:
        cursor.close()


def _record(conn: Connection, names: tuple[str, ...], how: str) -> None:
    if names:
        conn.execute(
            text(
                f"INSERT INTO {TRACKING_TABLE} (name, how) VALUES (:name, :how) ON CONFLICT (name) DO NOTHING"
            ),
            [{"name": name, "how": how} for name in names],
        )


def upgrade(db: Database) -> SchemaChange:
    """Brings Procrastinate's schema in ``db`` to the installed version (see the module's notes)."""
    if db.is_sqlite:
        raise ConfigError("Procrastinate needs PostgreSQL; the database is SQLite")
    scripts = shipped()
    # A database that cannot be reached: DatabaseUnavailable (503), as from Database.write().
    with db._reachable(), db._connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": LOCK_KEY})
        conn.commit()
        try:
            return _upgrade(conn, scripts)
        finally:
            conn.rollback()
            conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": LOCK_KEY})
            conn.commit()


def _upgrade(conn: Connection, scripts: tuple[str, ...]) -> SchemaChange:
    with conn.begin():
        conn.execute(
            text(
                f"CREATE TABLE IF NOT EXISTS {TRACKING_TABLE} (name text PRIMARY KEY, "
                "applied_at timestamptz NOT NULL DEFAULT now(), how text NOT NULL)"
            )
        )
        done = set(conn.execute(text(f"SELECT name FROM {TRACKING_TABLE}")).scalars())
        present = exists(conn)
    if not present:
        from procrastinate.schema import SchemaManager

        with conn.begin():
            _run_script(conn, SchemaManager.get_schema())
            _record(conn, scripts, "schema")
        log.info("Procrastinate's schema applied (%d migration scripts recorded)", len(scripts))
        return SchemaChange(created=True)
    baseline: tuple[str, ...] = ()
    if not done:
        with conn.begin():
            if not conn.execute(text(BASELINE_PROBE)).scalar():
                raise ConfigError(
                    "Procrastinate's schema in the database is older than Procrastinate 3.10 and has no "
                    f"record of its migrations: insert the names of the scripts already applied (from "
                    f"{migrations_dir()}) into {TRACKING_TABLE} (name, how), then run migrate again"
                )
            baseline = tuple(name for name in scripts if name <= BASELINE_LAST)
            _record(conn, baseline, "baseline")
        done = set(baseline)
        log.info(
            "Procrastinate's schema had no record: %d scripts up to %s recorded", len(baseline), BASELINE_LAST
        )
    unknown = sorted(done - set(scripts))
    if unknown:
        log.warning(
            "the database holds Procrastinate migrations this Procrastinate does not ship: %s", unknown
        )
    applied: list[str] = []
    folder = migrations_dir()
    for name in scripts:
        if name in done:
            continue
        with conn.begin():
            _run_script(conn, (folder / name).read_text(encoding="utf-8"))
            _record(conn, (name,), "migration")
        applied.append(name)
        log.info("Procrastinate migration %s applied", name)
    return SchemaChange(baseline=baseline, applied=tuple(applied))


__all__ = [
    "BASELINE_LAST",
    "TRACKING_TABLE",
    "SchemaChange",
    "exists",
    "migrations_dir",
    "pending",
    "recorded",
    "shipped",
    "upgrade",
]
