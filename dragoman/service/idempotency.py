"""Idempotency-Key on hosted POSTs (spec 4: 24 hours; HOSTED.md): one request runs once per key and value.

:func:`begin` reserves ``(key id, Idempotency-Key)`` atomically (``INSERT … ON CONFLICT DO NOTHING`` in a
``BEGIN IMMEDIATE`` transaction): the caller that inserts the row runs the request. Any other caller with the
same value gets, by the row it finds:

* a different request (its fingerprint — sha256 of method, path and body — differs):
  :class:`~dragoman.errors.IdempotencyMismatch` (422), whatever the first one's state;
* the first one still running: :class:`~dragoman.errors.IdempotencyConflict` (409, ``retry_after``);
* the first one done: its stored answer (:class:`StoredResponse`), which the front door replays with
  ``Idempotent-Replayed: true``.

The runner of the request ends its reservation with :func:`complete` (the answer stored; pass the open
``Connection`` of the job's own transaction so the job and its answer are written together) or with
:func:`release` (the row deleted: errors raised before execution and 5xx answers are not stored, so a retry
runs again). A release that cannot be written (the database unavailable) is owed
(:class:`OwedReleases`) and written as soon as the database answers. A reservation left ``running`` by a
process that died is taken over after :data:`STALE_RUNNING_SECONDS`. Rows expire after 24 hours
(:data:`~dragoman.limits.IDEMPOTENCY_SECONDS`); an expired row is replaced on the next use and purged by
retention.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field

from sqlalchemy import ColumnElement, Connection, and_, delete, select, update

from dragoman.errors import DatabaseUnavailable, IdempotencyConflict, IdempotencyMismatch, InvalidRequest
from dragoman.limits import IDEMPOTENCY_SECONDS
from dragoman.service.db import Database, idempotency, insert_ignore, now_ms

__all__ = [
    "MAX_KEY_CHARS",
    "MAX_OWED_RELEASES",
    "STALE_RUNNING_SECONDS",
    "OwedReleases",
    "StoredResponse",
    "begin",
    "check_key",
    "complete",
    "fingerprint",
    "release",
]

#: Longest Idempotency-Key value accepted (a UUID is 36; Stripe allows 255).
MAX_KEY_CHARS = 255
#: A reservation still ``running`` after this long belongs to a process that died: the next caller takes it.
STALE_RUNNING_SECONDS = 600
#: Most reservations one process keeps owing a release (:class:`OwedReleases`).
MAX_OWED_RELEASES = 10_000
#: Seconds a caller that met a running reservation is told to wait.
RETRY_AFTER_SECONDS = 1


@dataclass(frozen=True)
class StoredResponse:
    """An answer as stored for replay: status, the headers worth replaying, the body bytes."""

    status_code: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def check_key(value: str) -> str:
    """The header's value, or :class:`InvalidRequest` (empty, too long, not printable ASCII)."""
    value = value.strip()
    if not value or len(value) > MAX_KEY_CHARS or not all(" " <= c <= "~" for c in value):
        raise InvalidRequest(
            f"Idempotency-Key must be 1 to {MAX_KEY_CHARS} printable ASCII characters (a UUID is a good "
            "choice)"
        )
    return value


def fingerprint(method: str, path: str, body: bytes) -> str:
    """sha256 hex of the request's method, path and body: what makes a retry "the same request"."""
    digest = hashlib.sha256()
    for part in (method.upper().encode(), path.encode("utf-8", "surrogateescape"), body):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def _where(key_id: str, idem_key: str) -> ColumnElement[bool]:
    return and_(idempotency.c.key_id == key_id, idempotency.c.idem_key == idem_key)


def begin(
    db: Database, key_id: str, idem_key: str, print_: str, *, now: int | None = None
) -> StoredResponse | None:
    """Reserves ``idem_key`` for this request (None: the caller runs it and must :func:`complete` or
    :func:`release`), or the stored answer of the same request; raises IdempotencyConflict (running) or
    IdempotencyMismatch (another request used this key)."""
    now = now_ms() if now is None else now
    where = _where(key_id, idem_key)
    with db.write() as conn:
        # An expired row, or a running one whose process died, no longer holds the key.
        conn.execute(
            delete(idempotency).where(
                where,
                (idempotency.c.expires_ms <= now)
                | (
                    (idempotency.c.state == "running")
                    & (idempotency.c.created_ms <= now - STALE_RUNNING_SECONDS * 1000)
                ),
            )
        )
        # RETURNING says whether the row went in: an INSERT's rowcount is not reliable (SQLAlchemy reports
        # -1 for a Core INSERT on psycopg 3).
        inserted = conn.execute(
            insert_ignore(conn, idempotency)
            .values(
                key_id=key_id,
                idem_key=idem_key,
                fingerprint=print_,
                state="running",
                created_ms=now,
                expires_ms=now + IDEMPOTENCY_SECONDS * 1000,
            )
            .returning(idempotency.c.key_id)
        ).first()
        if inserted is not None:
            return None
        row = conn.execute(select(idempotency).where(where)).one()
    if row.fingerprint != print_:
        raise IdempotencyMismatch(
            "this Idempotency-Key was already used in the last 24 hours for a different request (method, "
            "path or body); use a new key for a new request"
        )
    if row.state != "done":
        raise IdempotencyConflict(
            "a request with this Idempotency-Key is still running; retry after a moment to get its answer",
            RETRY_AFTER_SECONDS,
        )
    return StoredResponse(int(row.status_code), bytes(row.body or b""), dict(row.headers or {}))


def complete(db_or_conn: Database | Connection, key_id: str, idem_key: str, response: StoredResponse) -> None:
    """Stores the answer of the reserved request (inside ``db_or_conn``'s transaction when a Connection)."""
    statement = (
        update(idempotency)
        .where(_where(key_id, idem_key), idempotency.c.state == "running")
        .values(
            state="done",
            status_code=response.status_code,
            headers=dict(response.headers),
            body=response.body,
        )
    )
    if isinstance(db_or_conn, Database):
        with db_or_conn.write() as conn:
            conn.execute(statement)
    else:
        db_or_conn.execute(statement)


def release(
    db: Database, key_id: str, idem_key: str, *, created_ms: int | None = None, print_: str | None = None
) -> None:
    """Frees a reservation whose request failed before it ran (or with a 5xx): a retry runs again.
    ``created_ms`` / ``print_``: only the reservation made at that instant for that request (an
    :class:`OwedReleases` entry: one taken over since is left alone)."""
    where = [_where(key_id, idem_key), idempotency.c.state == "running"]
    if created_ms is not None:
        where.append(idempotency.c.created_ms == created_ms)
    if print_ is not None:
        where.append(idempotency.c.fingerprint == print_)
    with db.write() as conn:
        conn.execute(delete(idempotency).where(*where))


class OwedReleases:
    """Reservations this process could not release because the database could not be reached: the request
    failed with 503 after its reservation was committed (the database went away between the two), or the
    reservation's own commit may have landed before the connection was lost. Left ``running``, such a
    reservation would answer every retry of a request that never ran with 409 "still running" until it goes
    stale (:data:`STALE_RUNNING_SECONDS`, ten minutes). :meth:`settle` releases them once the database
    answers again; the front door calls it once a second and before each reservation it takes. Each is
    released only while it is still the same reservation (``running``, same instant, same fingerprint). At
    most ``limit`` are kept (the oldest dropped: the stale rule frees it), none past the stale period."""

    def __init__(self, limit: int = MAX_OWED_RELEASES) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._owed: dict[tuple[str, str, int], str] = {}  # (key id, Idempotency-Key, created_ms) -> print

    def __len__(self) -> int:
        with self._lock:
            return len(self._owed)

    def add(self, key_id: str, idem_key: str, created_ms: int, print_: str) -> None:
        with self._lock:
            self._owed[(key_id, idem_key, created_ms)] = print_
            while len(self._owed) > self.limit:
                del self._owed[next(iter(self._owed))]

    def settle(self, db: Database, *, now: int | None = None) -> int:
        """Releases what is owed, oldest first, until the database fails again; how many were released."""
        with self._lock:
            if not self._owed:
                return 0
            owed = list(self._owed.items())
        now = now_ms() if now is None else now
        released = 0
        for (key_id, idem_key, created_ms), print_ in owed:
            if created_ms > now - STALE_RUNNING_SECONDS * 1000:
                try:
                    release(db, key_id, idem_key, created_ms=created_ms, print_=print_)
                except DatabaseUnavailable:
                    break
                released += 1
            with self._lock:
                self._owed.pop((key_id, idem_key, created_ms), None)
        return released
