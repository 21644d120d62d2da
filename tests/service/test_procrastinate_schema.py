"""Procrastinate's schema across its own versions (issue 13; dragoman.service.procrastinate_schema) on the
session's throwaway PostgreSQL: ``dragoman hosted migrate`` creates the schema of the installed Procrastinate
on a fresh database, brings a schema made by an older Procrastinate (the first N of its migration scripts) to
exactly what a fresh install gives, applies nothing on a second run, takes a schema made before the record
existed as the 3.10.0 baseline, stops at a failing script with what came before it kept, and a job deferred on
the upgraded schema runs."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from db_support import DbBackend
from jobs_support import paying_key
from sqlalchemy import text

from dragoman.errors import ConfigError
from dragoman.service import dispatch, jobs, migrate, procrastinate_schema
from dragoman.service.db import Database
from dragoman.service.procrastinate_schema import TRACKING_TABLE, shipped
from dragoman.testing.postgres import PostgresServer

# Where the scripts are cut: before 02.06.00_01 (which adds enum values a later script uses: they cannot all
# run in one transaction), Procrastinate 2.x's last, and 3.x with a pre script but not its post one.
CUTS = ("02.06.00_01_add_cancel_states.sql", "03.00.00_01_pre_cancel_notification.sql",
        "03.04.00_50_post_add_retry_failed_job_procedure.sql")  # fmt: skip


@pytest.fixture
def backend(postgres_server: PostgresServer) -> Iterator[DbBackend]:
    made = DbBackend("postgresql", postgres_server)
    yield made
    made.close()


def _database(backend: DbBackend, root: Path) -> Database:
    """A migrated service database (Alembic) without Procrastinate's schema."""
    return Database(backend.url(root))


def _old_schema(db: Database, upto: str, *, record: bool = True) -> tuple[str, ...]:
    """Procrastinate's schema as an older Procrastinate left it: the scripts before ``upto``, each committed
    (as its users applied them), recorded in our table when ``record``; the scripts applied."""
    folder = procrastinate_schema.migrations_dir()
    older = tuple(name for name in shipped() if name < upto)
    for name in older:
        with db.write() as conn:
            procrastinate_schema._run_script(conn, (folder / name).read_text(encoding="utf-8"))
    if record:
        with db.write() as conn:
            conn.execute(
                text(
                    f"CREATE TABLE {TRACKING_TABLE} (name text PRIMARY KEY, applied_at timestamptz NOT NULL "
                    "DEFAULT now(), how text NOT NULL)"
                )  # fmt: skip
            )
            procrastinate_schema._record(conn, older, "test")
    return older


def fingerprint(db: Database) -> dict[str, object]:
    """Procrastinate's objects as the catalogue describes them: tables and columns, indexes, constraints,
    enum labels in order, functions with their definitions, triggers, sequences."""
    queries = {
        "columns": "SELECT table_name, column_name, data_type, udt_name, is_nullable, column_default "
        "FROM information_schema.columns WHERE table_schema = 'public' AND table_name LIKE 'procrastinate%' "
        "ORDER BY 1, 2",
        "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' "
        "AND tablename LIKE 'procrastinate%' ORDER BY 1, 2",
        "constraints": "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) "
        "FROM pg_constraint WHERE conrelid::regclass::text LIKE 'procrastinate%' ORDER BY 1, 2",
        "enums": "SELECT t.typname, e.enumlabel FROM pg_enum e JOIN pg_type t ON t.oid = e.enumtypid "
        "WHERE t.typname LIKE 'procrastinate%' ORDER BY t.typname, e.enumsortorder",
        "functions": "SELECT p.proname, pg_get_function_identity_arguments(p.oid), "
        "regexp_replace(pg_get_functiondef(p.oid), '\\s+', ' ', 'g') FROM pg_proc p "
        "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' "
        "AND p.proname LIKE 'procrastinate%' ORDER BY 1, 2",
        "triggers": "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal "
        "AND tgrelid::regclass::text LIKE 'procrastinate%' ORDER BY 1",
        "sequences": "SELECT sequence_name, data_type FROM information_schema.sequences "
        "WHERE sequence_name LIKE 'procrastinate%' ORDER BY 1",
    }
    with db.read() as conn:
        return {name: [tuple(row) for row in conn.execute(text(sql))] for name, sql in queries.items()}


def _migrate_cli(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> dict[str, object]:
    from dragoman.cli.main import main

    monkeypatch.setenv("DRAGOMAN_DB_URL", url)
    monkeypatch.setenv("DRAGOMAN_DISPATCH", "procrastinate")
    assert main(["hosted", "migrate", "--json"]) == 0
    answer: dict[str, object] = json.loads(capsys.readouterr().out)
    return answer


def _run_one_job(db: Database) -> None:
    """A job submitted and deferred on this schema (``procrastinate_defer_jobs_v1``) runs on a Procrastinate
    worker (fetch, heartbeat, finish: the schema's other functions) and ends ``succeeded``."""
    import procrastinate

    key = paying_key(db)
    job = jobs.submit(db, key, kind="translate", params={"text": "x", "tgt": "spa_Latn"}, credits=1)
    assert dispatch.defer_orphans(db) == 1
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dispatch.conninfo(db.url)))
    ran: list[str] = []

    @app.task(name=dispatch.RUN_JOB_TASK, queue="translate")
    def run_job(job_id: str) -> None:
        ran.append(job_id)

    app.run_worker(queues=["translate"], wait=False, install_signal_handlers=False, listen_notify=False)
    assert ran == [job.id]
    with db.read() as conn:
        statuses = conn.execute(text("SELECT status::text FROM procrastinate_jobs")).scalars().all()
    assert statuses == ["succeeded"]


@pytest.fixture(scope="module")
def fresh_fingerprint(postgres_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory) -> object:
    backend = DbBackend("postgresql", postgres_server)
    db = _database(backend, tmp_path_factory.mktemp("fresh"))
    try:
        assert dispatch.apply_schema(db) is True
        return fingerprint(db)
    finally:
        db.dispose()
        backend.close()


def test_a_fresh_database_gets_the_whole_schema_with_every_script_recorded(
    backend: DbBackend, tmp_path: Path
) -> None:
    db = _database(backend, tmp_path)
    try:
        change = dispatch.migrate_schema(db)
        assert change.created and change.applied == () and change.baseline == ()
        assert procrastinate_schema.recorded(db) == shipped()
        assert procrastinate_schema.pending(db) == ()
        again = dispatch.migrate_schema(db)
        assert not again.changed and again.baseline == ()
    finally:
        db.dispose()


@pytest.mark.parametrize("upto", CUTS)
def test_an_older_schema_is_brought_to_the_installed_version(
    backend: DbBackend,
    tmp_path: Path,
    upto: str,
    fresh_fingerprint: object,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = backend.url(tmp_path)
    db = Database(url)
    try:
        older = _old_schema(db, upto)
        missing = tuple(name for name in shipped() if name not in older)
        assert procrastinate_schema.pending(db) == missing
        if upto != CUTS[-1]:
            assert fingerprint(db) != fresh_fingerprint
        first = _migrate_cli(url, monkeypatch, capsys)
        assert first["to"] == migrate.head()
        assert first["procrastinate_migrations_applied"] == list(missing)
        assert first["procrastinate_schema"] == ("upgraded" if missing else "present")
        assert fingerprint(db) == fresh_fingerprint
        assert procrastinate_schema.recorded(db) == shipped()
        second = _migrate_cli(url, monkeypatch, capsys)  # idempotent
        assert (
            second["procrastinate_schema"] == "present" and second["procrastinate_migrations_applied"] == []
        )
        assert fingerprint(db) == fresh_fingerprint
        _run_one_job(db)
    finally:
        db.dispose()


def test_a_schema_without_a_record_is_taken_as_the_3_10_baseline(
    backend: DbBackend, tmp_path: Path, fresh_fingerprint: object
) -> None:
    """A schema made by ``apply_schema`` before the record existed (``schema.sql`` of Procrastinate 3.10+)."""
    from procrastinate.schema import SchemaManager

    db = _database(backend, tmp_path)
    try:
        with db.write() as conn:
            procrastinate_schema._run_script(conn, SchemaManager.get_schema())
        change = dispatch.migrate_schema(db)
        baseline = tuple(name for name in shipped() if name <= procrastinate_schema.BASELINE_LAST)
        assert change.baseline == baseline and not change.created
        assert change.applied == tuple(name for name in shipped() if name not in baseline)
        assert procrastinate_schema.recorded(db) == shipped()
        assert fingerprint(db) == fresh_fingerprint
        assert not dispatch.migrate_schema(db).changed
    finally:
        db.dispose()


def test_an_unrecorded_schema_older_than_the_baseline_is_refused_saying_what_to_do(
    backend: DbBackend, tmp_path: Path
) -> None:
    db = _database(backend, tmp_path)
    try:
        _old_schema(db, CUTS[1], record=False)
        before = fingerprint(db)
        with pytest.raises(ConfigError, match=TRACKING_TABLE):
            dispatch.migrate_schema(db)
        assert fingerprint(db) == before
        assert procrastinate_schema.recorded(db) == ()
    finally:
        db.dispose()


def test_a_failing_script_is_rolled_back_alone_and_the_next_run_resumes_there(
    backend: DbBackend, tmp_path: Path, fresh_fingerprint: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _database(backend, tmp_path)
    try:
        older = _old_schema(db, CUTS[1])
        missing = [name for name in shipped() if name not in older]
        broken = tmp_path / "migrations"
        shutil.copytree(procrastinate_schema.migrations_dir(), broken)
        (broken / missing[1]).write_text(
            "CREATE TABLE procrastinate_half_done (x int);\nSELECT 1 / 0;\n", encoding="utf-8"
        )
        monkeypatch.setattr(procrastinate_schema, "migrations_dir", lambda: broken)
        with pytest.raises(Exception, match="division by zero"):
            dispatch.migrate_schema(db)
        assert procrastinate_schema.recorded(db) == (*older, missing[0])
        with db.read() as conn:
            assert conn.execute(text("SELECT to_regclass('procrastinate_half_done')")).scalar() is None
        monkeypatch.undo()
        assert dispatch.migrate_schema(db).applied == tuple(missing[1:])
        assert fingerprint(db) == fresh_fingerprint
    finally:
        db.dispose()


def test_processes_upgrading_together_apply_each_script_once(
    backend: DbBackend, tmp_path: Path, fresh_fingerprint: object
) -> None:
    url = backend.url(tmp_path)
    dbs = [Database(url) for _ in range(4)]  # one engine each: as separate processes
    try:
        older = _old_schema(dbs[0], CUTS[0])
        with ThreadPoolExecutor(len(dbs)) as pool:
            changes = list(pool.map(dispatch.migrate_schema, dbs))
        applied = [name for change in changes for name in change.applied]
        assert sorted(applied) == [name for name in shipped() if name not in older]
        assert fingerprint(dbs[0]) == fresh_fingerprint
    finally:
        for db in dbs:
            db.dispose()
