"""The hosted service's schema and its database connection (SQLAlchemy 2 Core; HOSTED.md).

One schema for SQLite (the embedded default) and PostgreSQL (issue 13); Alembic migrations in
``dragoman/service/migrations`` create it (``dragoman hosted migrate``; ``hosted serve`` migrates at start).
Every instant is an integer of **milliseconds since the Unix epoch, UTC** (``*_ms`` columns): portable,
exact, and formatted (ISO 8601 with milliseconds, spec 2.2) only at the front door. Every amount of credits
is an integer.

SQLite runs in WAL mode with a ``busy_timeout``; :meth:`Database.write` opens ``BEGIN IMMEDIATE`` so two
writers queue for the lock at the start instead of failing with "database is locked" when a reader upgrades
(HOSTED.md's trap: forty concurrent claimers). :meth:`Database.read` opens a deferred transaction.

State changes are compare-and-set updates (``UPDATE … WHERE status = :expected``) whose row count says
whether this caller won; see :mod:`dragoman.service.jobs`.
"""

from __future__ import annotations

import logging
import math
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Connection,
    Engine,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    text,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import Insert

from dragoman.errors import DatabaseUnavailable
from dragoman.limits import DB_CONNECT_TIMEOUT_S, DB_MAX_OVERFLOW, DB_POOL_SIZE, DB_POOL_TIMEOUT_S

if TYPE_CHECKING:
    from dragoman.settings import HostedSettings

log = logging.getLogger(__name__)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def now_ms() -> int:
    """The current instant in milliseconds since the epoch (UTC)."""
    return time.time_ns() // 1_000_000


#: Plans (spec 5.8 differs between descriptions; HOSTED.md/README: API access on pro, business, enterprise).
PLANS = ("free", "pro", "business", "enterprise")
PLANS_WITH_API = frozenset({"pro", "business", "enterprise"})

accounts = Table(
    "accounts",
    metadata,
    Column("id", String(40), primary_key=True),  # acct_<hex>
    Column("name", String(200), nullable=False, default=""),
    Column("plan", String(20), nullable=False),
    #: Live and test credit balances; reservations are taken out at once (never below zero).
    Column("balance", BigInteger, nullable=False, default=0),
    Column("test_balance", BigInteger, nullable=False, default=0),
    Column("created_ms", BigInteger, nullable=False),
    CheckConstraint("balance >= 0", name="balance_not_negative"),
    CheckConstraint("test_balance >= 0", name="test_balance_not_negative"),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(40), primary_key=True),  # the key's public prefix, e.g. "k7f3a9c2e1"
    Column("account_id", String(40), ForeignKey("accounts.id"), nullable=False, index=True),
    Column("mode", String(4), nullable=False),  # 'live' | 'test'
    #: sha256 hex of the whole key string; the key itself is never stored.
    Column("secret_hash", String(64), nullable=False),
    Column("name", String(200), nullable=False, default=""),
    Column("webhook_url", Text, nullable=True),
    #: The webhook signing secret (``whsec_…``): needed in clear to sign, shown once at creation.
    Column("webhook_secret", String(100), nullable=False),
    Column("monthly_cap", BigInteger, nullable=True),  # credits per UTC month, None: no cap
    Column("daily_quota", BigInteger, nullable=False),  # v2 characters per UTC day
    Column("created_ms", BigInteger, nullable=False),
    Column("revoked_ms", BigInteger, nullable=True),
    Column("rotated_to", String(40), nullable=True),  # the key that replaced this one
)

#: The audit trail of keys (spec 5.2): created, revoked, rotated, settings changed.
key_events = Table(
    "key_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("key_id", String(40), nullable=False, index=True),
    Column("event", String(40), nullable=False),
    Column("detail", JSON, nullable=False, default=dict),
    Column("at_ms", BigInteger, nullable=False),
)

batches = Table(
    "batches",
    metadata,
    Column("id", String(40), primary_key=True),  # UUID
    Column("key_id", String(40), nullable=False, index=True),
    Column("kind", String(20), nullable=False),
    Column("target_count", Integer, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    #: Set once, by the child that makes the batch terminal (compare-and-set: it alone emits the event).
    Column("completed_ms", BigInteger, nullable=True),
)

#: Every job of every kind (translate now; tts, subtitle, dub later): one state machine, one runner.
jobs = Table(
    "jobs",
    metadata,
    Column("id", String(40), primary_key=True),  # UUID
    Column("key_id", String(40), nullable=False),
    Column("account_id", String(40), nullable=False),
    Column("mode", String(4), nullable=False),  # the key's mode: which balance pays
    Column("kind", String(20), nullable=False),  # 'translate', …
    Column("status", String(10), nullable=False),  # queued, active, done, failed, canceled
    Column("sync", Boolean, nullable=False, default=False),
    Column("title", String(200), nullable=False, default=""),
    #: The job's input: kind-specific JSON (text, src, tgt, file's storage key and name …).
    Column("params", JSON, nullable=False),
    Column("batch_id", String(40), ForeignKey("batches.id"), nullable=True, index=True),
    Column("webhook_url", Text, nullable=True),  # per-request override of the key's webhook
    Column("progress_percent", Integer, nullable=False, default=0),
    Column("credits_reserved", BigInteger, nullable=False, default=0),
    Column("credits", BigInteger, nullable=True),  # charged; None while pending (spec 2.1)
    Column("result", Text, nullable=True),  # translated text of text jobs
    #: Storage keys of what the job made (e.g. {"document": …, "docx": …, "pdf": …}).
    Column("artifacts", JSON, nullable=False, default=dict),
    Column("error", Text, nullable=True),
    Column("attempts", Integer, nullable=False, default=0),
    Column("lease_owner", String(80), nullable=True),
    Column("lease_expires_ms", BigInteger, nullable=True),
    Column("run_after_ms", BigInteger, nullable=False, default=0),  # back-off of an automatic retry
    Column("created_ms", BigInteger, nullable=False),
    Column("started_ms", BigInteger, nullable=True),
    Column("finished_ms", BigInteger, nullable=True),
    #: Word edits of a tts job applied so far: the compare-and-set that keeps two API processes from both
    #: applying an edit to the same audio (dragoman.service.tts_voices.edit_job; Alembic 0004).
    Column("edit_version", Integer, nullable=False, default=0, server_default="0"),
    CheckConstraint("progress_percent BETWEEN 0 AND 100", name="progress_range"),
    Index("ix_jobs_key_created", "key_id", "created_ms"),
    Index("ix_jobs_claim", "status", "run_after_ms"),
)

#: The credit ledger: every movement of a balance, in the transaction of the state change that made it.
#: ``amount`` is the change of the balance (reserve < 0, refund/release/credit > 0, charge 0); ``spent`` is
#: what a charge spends (usage and the monthly cap add these up).
ledger = Table(
    "ledger",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("account_id", String(40), nullable=False, index=True),
    Column("key_id", String(40), nullable=True),
    Column("job_id", String(40), nullable=True, index=True),
    Column("mode", String(4), nullable=False),
    Column("entry", String(10), nullable=False),  # reserve, charge, refund, release, credit
    Column("amount", BigInteger, nullable=False),
    Column("spent", BigInteger, nullable=False, default=0),
    Column("product", String(20), nullable=False, default="translate"),
    Column("at_ms", BigInteger, nullable=False),
    Index("ix_ledger_key_at", "key_id", "at_ms"),
)

#: Per key and UTC day: requests counted (usage), v2 characters translated (the daily quota).
usage_days = Table(
    "usage_days",
    metadata,
    Column("key_id", String(40), primary_key=True),
    Column("day", String(10), primary_key=True),  # YYYY-MM-DD (UTC)
    Column("requests", BigInteger, nullable=False, default=0),
    Column("v2_chars", BigInteger, nullable=False, default=0),
)

#: Idempotency-Key reservations (24 h, per key): 'running' until the response is stored as 'done'.
idempotency = Table(
    "idempotency",
    metadata,
    Column("key_id", String(40), primary_key=True),
    Column("idem_key", String(255), primary_key=True),
    Column("fingerprint", String(64), nullable=False),  # sha256 of method, path and body
    Column("state", String(8), nullable=False),  # running | done
    Column("status_code", Integer, nullable=True),
    Column("headers", JSON, nullable=True),
    Column("body", LargeBinary, nullable=True),
    Column("created_ms", BigInteger, nullable=False),
    Column("expires_ms", BigInteger, nullable=False, index=True),
)

#: Webhook events (an outbox): written in the transaction of the job's state change, delivered after it.
webhook_events = Table(
    "webhook_events",
    metadata,
    Column("id", String(40), primary_key=True),  # evt_<hex>: the stable event id (webhook-id)
    Column("key_id", String(40), nullable=False, index=True),
    Column("event", String(40), nullable=False),
    Column("job_id", String(40), nullable=True),
    Column("batch_id", String(40), nullable=True),
    Column("url", Text, nullable=False),
    Column("payload", Text, nullable=False),  # the JSON body, exactly as signed and sent
    Column("state", String(10), nullable=False),  # pending, delivered, failed
    Column("attempts", Integer, nullable=False, default=0),
    Column("next_attempt_ms", BigInteger, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Index("ix_webhook_events_due", "state", "next_attempt_ms"),
)

#: The delivery log: one row per attempt (``dragoman hosted webhooks log KEY``).
webhook_attempts = Table(
    "webhook_attempts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("event_id", String(40), ForeignKey("webhook_events.id"), nullable=False, index=True),
    Column("attempt", Integer, nullable=False),
    Column("at_ms", BigInteger, nullable=False),
    Column("status_code", Integer, nullable=True),
    Column("error", Text, nullable=True),
    Column("duration_ms", Integer, nullable=False),
    UniqueConstraint("event_id", "attempt"),
)

#: Voice matches ("clones", issue 14; spec 4.2 and 8): at most 25 per key. ``record`` is the clone's analysis
#: (:class:`dragoman.speech.tts.clones.Clone` as JSON); ``clip_key`` the cleaned reference in storage,
#: deleted with the row.
tts_clones = Table(
    "tts_clones",
    metadata,
    Column("id", String(40), primary_key=True),  # UUID
    Column("key_id", String(40), nullable=False, index=True),
    Column("name", String(200), nullable=False),
    Column("record", JSON, nullable=False),
    Column("clip_key", String(300), nullable=False),
    Column("created_ms", BigInteger, nullable=False),
)


#: Uploaded media (issue 15, spec 2.9): a ``video_id`` names one upload of an account, reusable by its
#: subtitle (and later dub) jobs. ``storage_key`` is the file under ``uploads/`` (purged after the uploads
#: retention, 7 days, like every upload); ``expires_ms`` says when the row stops being usable; ``duration_ms``
#: is the probed duration, which credits use; ``info`` the probe's summary (container, streams).
media = Table(
    "media",
    metadata,
    Column("id", String(40), primary_key=True),  # the video_id (UUID)
    Column("account_id", String(40), nullable=False, index=True),
    Column("key_id", String(40), nullable=False),
    Column("storage_key", String(300), nullable=False),
    Column("filename", String(255), nullable=False, default=""),
    Column("mime", String(100), nullable=False, default=""),
    Column("size_bytes", BigInteger, nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("duration_ms", BigInteger, nullable=False),
    Column("info", JSON, nullable=False, default=dict),
    Column("created_ms", BigInteger, nullable=False),
    Column("expires_ms", BigInteger, nullable=False, index=True),
)


def insert_ignore(connection: Connection, table: Table) -> Insert:
    """``INSERT … ON CONFLICT DO NOTHING`` in the connection's dialect (SQLite or PostgreSQL)."""
    if connection.dialect.name == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    return sqlite.insert(table).on_conflict_do_nothing()


def _enable_wal(cursor: Any, wait_s: float) -> None:
    """Puts the SQLite file in WAL mode (persistent: later connections find it set). Switching takes an
    exclusive lock, and SQLite answers "database is locked" at once, without its busy handler, when another
    connection holds the file meanwhile (processes opening a fresh file together: 42 of 200 trials of four
    threads failed before this retry). So retry, with a short growing pause, for up to ``wait_s``."""
    deadline = time.monotonic() + wait_s
    pause = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


def _unavailable(exc: sa_exc.DBAPIError) -> DatabaseUnavailable:
    """The 503 for a driver's error: the driver's class names the cause; its text (which may hold the
    server's address) goes to the log only."""
    cause = type(exc.orig).__name__ if exc.orig is not None else type(exc).__name__
    log.warning("database unavailable: %s", str(exc.orig or exc).strip().splitlines()[0][:300])
    return DatabaseUnavailable(
        f"the service's database cannot be reached at the moment ({cause}); retry shortly"
    )


def lock(connection: Connection, scope: str, name: str) -> None:
    """Holds a lock on ``(scope, name)`` until the transaction ends, so two transactions working on one thing
    (a job's settlement, …) run one after the other. PostgreSQL: a transaction-level advisory lock (under READ
    COMMITTED the statements after it see what the previous holder committed); SQLite: nothing to do, its
    write transactions (``BEGIN IMMEDIATE``) already run one at a time."""
    if connection.dialect.name == "postgresql":
        connection.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:name, 0))"), {"name": f"{scope}:{name}"}
        )


class Database:
    """The service's engine, with write and read transactions (see the module's notes on SQLite).

    On PostgreSQL (psycopg 3) connections come from a pool of ``pool_size`` kept connections plus up to
    ``max_overflow`` more under load, each checked before use (pre-ping: a connection the server dropped,
    after a restart for instance, is replaced instead of failing the request); a connection is made within
    ``connect_timeout_s`` or given up. Transactions run at READ COMMITTED (PostgreSQL's default): the
    compare-and-set updates and the locks of :mod:`dragoman.service.jobs` and :mod:`dragoman.service.billing`
    are written for it.

    A database that cannot be reached (down, restarting, the network cut, every pooled connection busy for
    ``pool_timeout_s``) raises :class:`~dragoman.errors.DatabaseUnavailable` (503 with ``Retry-After``) out of
    :meth:`write` and :meth:`read`, after the transaction was rolled back. PostgreSQL's operational errors
    inside a transaction (a connection cut mid-way, a deadlock, a serialization failure: transient) are
    mapped the same way; SQLite's only when opening the file fails.
    """

    def __init__(
        self,
        url: str,
        *,
        busy_timeout_ms: int = 30_000,
        pool_size: int = DB_POOL_SIZE,
        max_overflow: int = DB_MAX_OVERFLOW,
        pool_timeout_s: float = DB_POOL_TIMEOUT_S,
        connect_timeout_s: float = DB_CONNECT_TIMEOUT_S,
    ) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        kwargs: dict[str, Any] = {}
        if self.is_sqlite:
            path = url.split("///", 1)[1] if "///" in url else ""
            if path and path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            # pysqlite's own transaction handling is turned off, so BEGIN is ours (IMMEDIATE for writers).
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": busy_timeout_ms / 1000}
        else:
            kwargs |= {
                "pool_size": pool_size,
                "max_overflow": max_overflow,
                "pool_timeout": pool_timeout_s,
                "pool_pre_ping": True,
            }
            if url.startswith("postgresql"):
                # libpq waits for ever by default; it takes whole seconds, at least 2.
                kwargs["connect_args"] = {"connect_timeout": max(2, math.ceil(connect_timeout_s))}
        self.engine: Engine = create_engine(url, **kwargs)
        if self.is_sqlite:
            self._sqlite_setup(busy_timeout_ms)

    @classmethod
    def from_settings(cls, hosted: HostedSettings) -> Database:
        """The database of the hosted settings (``DRAGOMAN_DB_URL`` and the ``DRAGOMAN_DB_POOL_*`` sizes)."""
        return cls(
            hosted.database_url,
            pool_size=hosted.db_pool_size,
            max_overflow=hosted.db_max_overflow,
            pool_timeout_s=hosted.db_pool_timeout,
        )

    def _sqlite_setup(self, busy_timeout_ms: int) -> None:
        @event.listens_for(self.engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None  # autocommit at the driver: we emit BEGIN ourselves
            cursor = dbapi_connection.cursor()
            cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            _enable_wal(cursor, busy_timeout_ms / 1000)
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        @event.listens_for(self.engine, "begin")
        def _on_begin(connection: Connection) -> None:
            mode = connection.get_execution_options().get("sqlite_begin", "IMMEDIATE")
            connection.exec_driver_sql(f"BEGIN {mode}")

    @contextmanager
    def _reachable(self) -> Iterator[None]:
        """Raises :class:`DatabaseUnavailable` when the database cannot be reached (see the class)."""
        try:
            yield
        except sa_exc.TimeoutError as exc:  # the pool: every connection busy for pool_timeout
            log.warning("database: no free pooled connection (%s)", exc)
            raise DatabaseUnavailable(
                "the service's database has no free connection at the moment; retry shortly"
            ) from exc
        except (sa_exc.OperationalError, sa_exc.InterfaceError) as exc:
            if self.is_sqlite and not exc.connection_invalidated:
                raise  # SQLite's are about the file (locked past busy_timeout, no such table): not mapped
            raise _unavailable(exc) from exc

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction: committed when the block ends, rolled back when it raises."""
        with self._reachable(), self._connect() as connection, connection.begin():
            yield connection

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read-only transaction (deferred on SQLite: readers never wait for writers in WAL mode)."""
        with self._reachable(), self._connect() as connection:
            with connection.execution_options(sqlite_begin="DEFERRED").begin():
                yield connection

    def _connect(self) -> Connection:
        try:
            return self.engine.connect()
        except (sa_exc.OperationalError, sa_exc.InterfaceError) as exc:
            raise _unavailable(exc) from exc

    def dispose(self) -> None:
        self.engine.dispose()
