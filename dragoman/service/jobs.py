"""The job state machine of the hosted service, for every job kind (translate now; tts, subtitle, dub later).

States (spec 3): ``queued → active → done | failed``, ``queued | active → canceled``; an engine failure that
may pass sends an ``active`` job back to ``queued`` with a back-off (``run_after_ms``) until its attempts are
spent. Every transition is a **compare-and-set on ``status``** (``UPDATE jobs … WHERE id = :id AND status =
:expected [AND lease_owner = :me]``) whose row count says whether this caller won, made in ONE write
transaction together with its ledger entry (:mod:`dragoman.service.billing`) and its webhook event (the outbox
of :mod:`dragoman.service.webhooks`). So a cancel racing a completion has one winner: either the job is
charged and ``job.done`` is sent, or it is refunded and nothing is sent; never both, never twice (HOSTED.md).

Credits are reserved when the job is submitted, in the transaction that inserts its row (a job that could
not pay does not exist); ``done`` charges what the handler reports (at most the reservation) and releases the
rest; ``failed`` and ``canceled`` give the reservation back at once.

A job's worker holds a **lease** (``lease_owner``, ``lease_expires_ms``) renewed by :func:`heartbeat`;
:func:`requeue_expired` sends the jobs of a worker that died (lease run out) back to the queue, counting the
lost run as an attempt, so nothing is lost and a job that kills its worker every time ends ``failed``.

**Batches**: the child whose transition leaves no child of its batch pending (queued, active, or queued for a
retry) also wins ``UPDATE batches SET completed_ms = … WHERE id = … AND completed_ms IS NULL`` and alone
enqueues ``batch.completed``. The batch row is locked (``FOR UPDATE``: PostgreSQL) before the children are
counted, so two last children finishing together in two transactions cannot both miss the completion.

**Synchronous jobs** (spec 3: a text of at most 500 characters answered in the response): :func:`submit`
with ``sync=True`` records the job ``active`` under :data:`SYNC_OWNER` with its reservation, the front door
runs the handler inline (:func:`run_sync`), then :func:`finish_sync` (``done``, charged) or :func:`fail_sync`
(``failed``, refunded). The job is listed and counted like any other; no webhook is sent for it (its answer
was the response).
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, RowMapping, case, func, insert, select, update

from dragoman.errors import DragomanError, JobFinished, JobNotFound
from dragoman.progress import JobContext
from dragoman.service import billing, webhooks
from dragoman.service.db import Database, api_keys, batches, jobs, now_ms

if TYPE_CHECKING:
    from dragoman.service.accounts import KeyInfo
    from dragoman.service.storage import Storage

QUEUED, ACTIVE, DONE, FAILED, CANCELED = "queued", "active", "done", "failed", "canceled"
STATUSES = (QUEUED, ACTIVE, DONE, FAILED, CANCELED)
TERMINAL = frozenset({DONE, FAILED, CANCELED})
PENDING = frozenset({QUEUED, ACTIVE})

#: The lease owner of a synchronous job (run inline by the front door, never claimed by a worker).
SYNC_OWNER = "sync"
#: How long a synchronous job may stay ``active`` before :func:`requeue_expired` takes it for abandoned (its
#: process died mid-answer) and fails it with a refund.
SYNC_LEASE_S = 600.0
#: Automatic retries wait ``RETRY_BASE_S * 2**(attempt-1)`` seconds (with ±25% jitter), at most RETRY_MAX_S.
RETRY_BASE_S = 2.0
RETRY_MAX_S = 300.0
#: The job list's page (spec 8: the 50 most recent by default; ``limit`` bounded at 200).
LIST_DEFAULT = 50
LIST_MAX = 200

#: Events of a kind's jobs: ``<prefix>.done`` and ``<prefix>.failed`` (spec 6: translation jobs send
#: ``job.*``; tts sends ``tts.*`` and subtitle ``subtitle.*`` when those issues add their kinds).
EVENT_PREFIX: Mapping[str, str] = {"translate": "job", "tts": "tts", "subtitle": "subtitle", "dub": "dub"}
#: ``params["role"]`` of a job that does the shared work of a batch (a subtitle batch's recognition run,
#: :mod:`dragoman.service.subtitle_jobs`): it reports through its batch's children, sends no webhook itself.
ENGINE_ROLE = "engine"


@dataclass(frozen=True)
class JobRecord:
    """One row of ``jobs`` (see :mod:`dragoman.service.db` for the columns' meaning)."""

    id: str
    key_id: str
    account_id: str
    mode: str
    kind: str
    status: str
    sync: bool
    title: str
    params: Mapping[str, Any]
    batch_id: str | None
    webhook_url: str | None
    progress_percent: int
    credits_reserved: int
    credits: int | None
    result: str | None
    artifacts: Mapping[str, str]
    error: str | None
    attempts: int
    lease_owner: str | None
    lease_expires_ms: int | None
    run_after_ms: int
    created_ms: int
    started_ms: int | None
    finished_ms: int | None

    @classmethod
    def from_row(cls, row: RowMapping) -> JobRecord:
        return cls(
            id=row["id"],
            key_id=row["key_id"],
            account_id=row["account_id"],
            mode=row["mode"],
            kind=row["kind"],
            status=row["status"],
            sync=bool(row["sync"]),
            title=row["title"],
            params=dict(row["params"] or {}),
            batch_id=row["batch_id"],
            webhook_url=row["webhook_url"],
            progress_percent=int(row["progress_percent"]),
            credits_reserved=int(row["credits_reserved"]),
            credits=None if row["credits"] is None else int(row["credits"]),
            result=row["result"],
            artifacts=dict(row["artifacts"] or {}),
            error=row["error"],
            attempts=int(row["attempts"]),
            lease_owner=row["lease_owner"],
            lease_expires_ms=row["lease_expires_ms"],
            run_after_ms=int(row["run_after_ms"]),
            created_ms=int(row["created_ms"]),
            started_ms=row["started_ms"],
            finished_ms=row["finished_ms"],
        )

    def result_object(self) -> dict[str, Any]:
        """The JSON object a product stored as ``result`` (empty while there is none, or when it is not a JSON
        object: a translation job's result is its text)."""
        if not self.result:
            return {}
        try:
            data = json.loads(self.result)
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def elapsed_seconds(self, now: int | None = None) -> float:
        """Wall time since the job was created (spec 2.1), up to its end once it has ended."""
        end = self.finished_ms if self.finished_ms is not None else (now_ms() if now is None else now)
        return max(0, end - self.created_ms) / 1000.0


@dataclass(frozen=True)
class JobOutcome:
    """What a handler made: the text result, storage keys of its files, and the credits to charge (None:
    the reservation; more than the reservation is charged as the reservation)."""

    result: str | None = None
    artifacts: Mapping[str, str] = field(default_factory=dict)
    credits: int | None = None


#: The work of one job kind: the job, its context (progress, cancellation between chunks), the file store.
Handler = Callable[[JobRecord, JobContext, "Storage"], JobOutcome]


# ----- helpers -----------------------------------------------------------------------------------------
def new_id() -> str:
    return str(uuid.uuid4())


def _load(conn: Connection, job_id: str) -> JobRecord | None:
    row = conn.execute(select(jobs).where(jobs.c.id == job_id)).mappings().first()
    return None if row is None else JobRecord.from_row(row)


def _product(kind: str) -> str:
    return kind


def _webhook_url(conn: Connection, job: JobRecord) -> str | None:
    if job.webhook_url:
        return job.webhook_url
    url = conn.execute(select(api_keys.c.webhook_url).where(api_keys.c.id == job.key_id)).scalar()
    return str(url) if url else None


def _emit(conn: Connection, job: JobRecord, event: str, payload: dict[str, Any]) -> None:
    """Enqueue ``event`` for ``job`` in this transaction, when the job or its key has a webhook URL."""
    if job.sync or job.params.get("role") == ENGINE_ROLE:
        return
    url = _webhook_url(conn, job)
    if url is None:
        return
    webhooks.enqueue(
        conn,
        key_id=job.key_id,
        url=url,
        event=event,
        payload={"event": event, **payload},
        job_id=job.id,
        batch_id=job.batch_id,
    )


def _event_name(kind: str, what: str) -> str:
    return f"{EVENT_PREFIX.get(kind, kind)}.{what}"


def done_payload(job: JobRecord) -> dict[str, Any]:
    """Spec 6, ``job.done``: job_id, status, result, credits, elapsed_seconds, batch_id (in a batch); a
    ``tts`` job's ``tts.done`` carries its own fields (:func:`dragoman.service.tts_jobs.done_payload`)."""
    if job.kind == "tts":
        from dragoman.service.tts_jobs import done_payload as tts_done_payload  # it imports this module

        return tts_done_payload(job)
    if job.kind == "subtitle":
        from dragoman.service.subtitle_jobs import done_payload as subtitle_done_payload

        return subtitle_done_payload(job)
    if job.kind == "dub":
        from dragoman.service.dub_jobs import done_payload as dub_done_payload

        return dub_done_payload(job)
    payload: dict[str, Any] = {
        "job_id": job.id,
        "status": job.status,
        "result": job.result,
        "credits": job.credits,
        "elapsed_seconds": round(job.elapsed_seconds(), 3),
    }
    if job.batch_id is not None:
        payload["batch_id"] = job.batch_id
    return payload


def failed_payload(job: JobRecord) -> dict[str, Any]:
    """Spec 6, ``job.failed``: job_id, error, batch_id when applicable (``subtitle.failed``: its own fields,
    :func:`dragoman.service.subtitle_jobs.failed_payload`)."""
    if job.kind == "subtitle":
        from dragoman.service.subtitle_jobs import failed_payload as subtitle_failed_payload

        return subtitle_failed_payload(job)
    if job.kind == "dub":
        from dragoman.service.dub_jobs import failed_payload as dub_failed_payload

        return dub_failed_payload(job)
    payload: dict[str, Any] = {"job_id": job.id, "error": job.error}
    if job.batch_id is not None:
        payload["batch_id"] = job.batch_id
    return payload


def _charge(conn: Connection, job: JobRecord, amount: int) -> None:
    billing.charge(
        conn,
        job.key_id,
        job.account_id,
        job.mode,
        job.id,
        amount,
        job.credits_reserved,
        _product(job.kind),
    )


def _refund(conn: Connection, job: JobRecord) -> int:
    return int(billing.refund(conn, job.key_id, job.account_id, job.mode, job.id))


def _cas(conn: Connection, job_id: str, expected: str, owner: str | None, **values: Any) -> bool:
    """``UPDATE jobs SET … WHERE id AND status = expected [AND lease_owner = owner]``: whether it won."""
    stmt = update(jobs).where(jobs.c.id == job_id, jobs.c.status == expected)
    if owner is not None:
        stmt = stmt.where(jobs.c.lease_owner == owner)
    return conn.execute(stmt.values(**values)).rowcount == 1


_END_LEASE: dict[str, Any] = {"lease_owner": None, "lease_expires_ms": None}


# ----- submitting --------------------------------------------------------------------------------------
def submit(
    db: Database,
    key: KeyInfo,
    *,
    kind: str,
    params: Mapping[str, Any],
    title: str = "",
    credits: int,
    webhook_url: str | None = None,
    batch_id: str | None = None,
    sync: bool = False,
    conn: Connection | None = None,
) -> JobRecord:
    """A new job ``queued`` (``active`` under :data:`SYNC_OWNER` when ``sync``) with ``credits`` reserved,
    in one transaction (``conn``'s when given: the caller's idempotency and usage writes share it).
    Raises what :func:`billing.reserve` raises (402) and then nothing is written."""
    if conn is None:
        with db.write() as own:
            return submit(
                db,
                key,
                kind=kind,
                params=params,
                title=title,
                credits=credits,
                webhook_url=webhook_url,
                batch_id=batch_id,
                sync=sync,
                conn=own,
            )
    if credits < 0:
        raise ValueError("credits must not be negative")
    now = now_ms()
    job_id = new_id()
    conn.execute(
        insert(jobs).values(
            id=job_id,
            key_id=key.key_id,
            account_id=key.account_id,
            mode=key.mode,
            kind=kind,
            status=ACTIVE if sync else QUEUED,
            sync=sync,
            title=title[:200],
            params=dict(params),
            batch_id=batch_id,
            webhook_url=webhook_url,
            progress_percent=0,
            credits_reserved=credits,
            credits=None,
            result=None,
            artifacts={},
            error=None,
            attempts=1 if sync else 0,
            lease_owner=SYNC_OWNER if sync else None,
            lease_expires_ms=now + int(SYNC_LEASE_S * 1000) if sync else None,
            run_after_ms=0,
            created_ms=now,
            started_ms=now if sync else None,
            finished_ms=None,
        )
    )
    if credits > 0:
        billing.reserve(conn, key, job_id, credits, product=_product(kind))
    job = _load(conn, job_id)
    assert job is not None
    return job


def submit_batch(
    db: Database,
    key: KeyInfo,
    kind: str,
    children: Sequence[tuple[Mapping[str, Any], str, int]],
    webhook_url: str | None = None,
    *,
    conn: Connection | None = None,
) -> tuple[str, list[JobRecord]]:
    """A batch of ``children`` (``(params, title, credits)`` each), all queued with their reservations, or
    none (a reservation that fails rolls the whole batch back)."""
    if not children:
        raise ValueError("a batch has at least one child")
    if conn is None:
        with db.write() as own:
            return submit_batch(db, key, kind, children, webhook_url, conn=own)
    batch_id = new_id()
    conn.execute(
        insert(batches).values(
            id=batch_id,
            key_id=key.key_id,
            kind=kind,
            target_count=len(children),
            created_ms=now_ms(),
            completed_ms=None,
        )
    )
    made = [
        submit(
            db,
            key,
            kind=kind,
            params=params,
            title=title,
            credits=credits,
            webhook_url=webhook_url,
            batch_id=batch_id,
            conn=conn,
        )
        for params, title, credits in children
    ]
    return batch_id, made


# ----- the worker's transitions ------------------------------------------------------------------------
def claim(
    db: Database,
    owner: str,
    lease_s: float,
    kinds: Iterable[str] | None = None,
    *,
    job_id: str | None = None,
) -> JobRecord | None:
    """The oldest due ``queued`` job (of ``kinds``; the job ``job_id`` only, when given: a Procrastinate
    task carries one job), now ``active`` under ``owner``'s lease (attempts + 1); None when there is none.
    SQLite serialises writers (``BEGIN IMMEDIATE``); PostgreSQL skips rows another claimer holds
    (``FOR UPDATE SKIP LOCKED``); the compare-and-set makes a lost race a retry, never a double claim."""
    wanted = None if kinds is None else sorted(set(kinds))
    for _ in range(5):
        with db.write() as conn:
            now = now_ms()
            query = (
                select(jobs.c.id)
                # a queued job parked under an owner (a subtitle batch's children, waiting for their engine
                # job) is not for workers
                .where(jobs.c.status == QUEUED, jobs.c.run_after_ms <= now, jobs.c.lease_owner.is_(None))
                .order_by(jobs.c.created_ms, jobs.c.id)
                .limit(1)
                .with_for_update(skip_locked=True)
            )
            if wanted is not None:
                query = query.where(jobs.c.kind.in_(wanted))
            if job_id is not None:
                query = query.where(jobs.c.id == job_id)
            found = conn.execute(query).scalar()
            if found is None:
                return None
            won = _cas(
                conn,
                found,
                QUEUED,
                None,
                status=ACTIVE,
                attempts=jobs.c.attempts + 1,
                lease_owner=owner,
                lease_expires_ms=now + int(lease_s * 1000),
                started_ms=func.coalesce(jobs.c.started_ms, now),
                progress_percent=0,
            )
            if won:
                return _load(conn, found)
    return None


def heartbeat(db: Database, job_id: str, owner: str, lease_s: float) -> bool:
    """Extend ``owner``'s lease; False when it is lost (expired and requeued, or the job was canceled):
    the worker stops."""
    with db.write() as conn:
        return _cas(conn, job_id, ACTIVE, owner, lease_expires_ms=now_ms() + int(lease_s * 1000))


def set_progress(db: Database, job_id: str, owner: str, percent: int) -> bool:
    """Record progress (0–100, clamped; never below what was recorded) while ``owner`` holds the job;
    False when it no longer does (canceled, lease lost): the worker stops."""
    percent = max(0, min(100, int(percent)))
    value = case((jobs.c.progress_percent < percent, percent), else_=jobs.c.progress_percent)
    with db.write() as conn:
        return _cas(conn, job_id, ACTIVE, owner, progress_percent=value)


def release(db: Database, job_id: str, owner: str) -> bool:
    """``active → queued`` at once, the attempt not counted: the runner is stopping (not the job's fault)."""
    with db.write() as conn:
        return _cas(
            conn,
            job_id,
            ACTIVE,
            owner,
            status=QUEUED,
            attempts=jobs.c.attempts - 1,
            run_after_ms=0,
            progress_percent=0,
            **_END_LEASE,
        )


def complete(db: Database, job_id: str, owner: str, outcome: JobOutcome) -> JobRecord | None:
    """``active → done`` for ``owner``: charge (``outcome.credits`` or the reservation, at most the
    reservation), enqueue ``<kind>.done``, and complete its batch if it was the last. None when ``owner`` no
    longer holds the job (canceled meanwhile, lease lost): nothing is charged."""
    with db.write() as conn:
        job = _load(conn, job_id)
        if job is None or job.status != ACTIVE or job.lease_owner != owner:
            return None
        now = now_ms()
        amount = job.credits_reserved if outcome.credits is None else max(0, outcome.credits)
        amount = min(amount, job.credits_reserved)
        won = _cas(
            conn,
            job_id,
            ACTIVE,
            owner,
            status=DONE,
            result=outcome.result,
            artifacts=dict(outcome.artifacts),
            credits=amount,
            error=None,
            progress_percent=100,
            finished_ms=now,
            **_END_LEASE,
        )
        if not won:
            return None
        if job.credits_reserved > 0:
            _charge(conn, job, amount)
        done = _load(conn, job_id)
        assert done is not None
        _emit(conn, done, _event_name(done.kind, "done"), done_payload(done))
        _maybe_complete_batch(conn, done, now)
        return done


def retry_delay_s(attempt: int, *, base_s: float = RETRY_BASE_S, rng: random.Random | None = None) -> float:
    """The back-off before retry number ``attempt`` (1, 2, …): exponential with ±25% jitter, capped."""
    delay = min(RETRY_MAX_S, base_s * 2.0 ** max(0, attempt - 1))
    return delay * (0.75 + 0.5 * (rng or random).random())


def fail(
    db: Database,
    job_id: str,
    owner: str,
    error: str,
    *,
    retryable: bool,
    max_attempts: int = 3,
    retry_base_s: float = RETRY_BASE_S,
) -> JobRecord | None:
    """``owner``'s job failed with ``error``. ``retryable`` and fewer than ``max_attempts`` attempts made:
    back to ``queued`` after a back-off (the reservation stays). Otherwise ``failed``: the reservation is
    refunded, ``<kind>.failed`` enqueued and its batch completed if it was the last. None when ``owner`` no
    longer holds the job."""
    error = error[:4000] or "the job failed"
    with db.write() as conn:
        job = _load(conn, job_id)
        if job is None or job.status != ACTIVE or job.lease_owner != owner:
            return None
        now = now_ms()
        if retryable and job.attempts < max_attempts:
            delay_ms = int(retry_delay_s(job.attempts, base_s=retry_base_s) * 1000)
            won = _cas(
                conn,
                job_id,
                ACTIVE,
                owner,
                status=QUEUED,
                error=error,
                run_after_ms=now + delay_ms,
                progress_percent=0,
                **_END_LEASE,
            )
            return _load(conn, job_id) if won else None
        if not _cas(conn, job_id, ACTIVE, owner, status=FAILED, error=error, finished_ms=now, **_END_LEASE):
            return None
        return _failed(conn, job_id, now)


def _failed(conn: Connection, job_id: str, now: int) -> JobRecord:
    """After a job became ``failed``: refund, event, batch."""
    job = _load(conn, job_id)
    assert job is not None
    _refund(conn, job)
    _emit(conn, job, _event_name(job.kind, "failed"), failed_payload(job))
    _maybe_complete_batch(conn, job, now)
    return job


def finish_sync(db: Database, job_id: str, outcome: JobOutcome) -> JobRecord:
    """A synchronous job's answer: ``done`` and charged (see the module's notes)."""
    done = complete(db, job_id, SYNC_OWNER, outcome)
    if done is None:
        raise JobNotFound(f"synchronous job {job_id} is no longer active")
    return done


def fail_sync(db: Database, job_id: str, error: str) -> JobRecord | None:
    """A synchronous job whose handler raised: ``failed`` and refunded (no automatic retry: the caller got
    the error)."""
    return fail(db, job_id, SYNC_OWNER, error, retryable=False)


def run_sync(
    db: Database,
    key: KeyInfo,
    handler: Handler,
    storage: Storage,
    *,
    kind: str,
    params: Mapping[str, Any],
    title: str = "",
    credits: int,
    ctx: JobContext | None = None,
    conn: Connection | None = None,
) -> JobRecord:
    """Submit a synchronous job, run ``handler`` inline and record its end; the handler's error is recorded
    (``failed``, refunded) and raised again. With ``conn``, only the submission joins that transaction (it
    must be committed by the caller before the job's end is written: pass None on SQLite, which has one
    writer at a time)."""
    job = submit(db, key, kind=kind, params=params, title=title, credits=credits, sync=True, conn=conn)
    try:
        outcome = handler(job, ctx or JobContext(), storage)
    except BaseException as exc:
        message = exc.message if isinstance(exc, DragomanError) else f"internal error: {type(exc).__name__}"
        fail_sync(db, job.id, message)
        raise
    return finish_sync(db, job.id, outcome)


# ----- the client's transitions and queries ------------------------------------------------------------
def cancel(db: Database, key_id: str, job_id: str) -> int:
    """``queued | active → canceled`` for the job's own key: the reservation refunded at once (returned:
    ``credits_refunded``). 404 :class:`JobNotFound` for an unknown job or another key's; 409
    :class:`JobFinished` when it is done, failed or canceled. A worker running it sees the cancellation at
    its next heartbeat and stops between chunks; its completion then loses the compare-and-set."""
    for _ in range(5):
        with db.write() as conn:
            job = _load(conn, job_id)
            if job is None or job.key_id != key_id:
                raise JobNotFound(f"no job {job_id}")
            if job.terminal:
                raise JobFinished(f"job {job_id} is already {job.status}", job_status=job.status)
            now = now_ms()
            if not _cas(conn, job_id, job.status, None, status=CANCELED, finished_ms=now, **_END_LEASE):
                continue  # it moved between the read and the write (PostgreSQL): look again
            refunded = _refund(conn, job)
            canceled = _load(conn, job_id)
            assert canceled is not None
            _maybe_complete_batch(conn, canceled, now)
            return refunded
    raise JobFinished(f"job {job_id} kept changing state; try again", job_status=ACTIVE)


def requeue_expired(db: Database, *, max_attempts: int = 3, now: int | None = None) -> int:
    """Jobs whose worker's lease ran out (it died, or hung past its heartbeats): back to ``queued`` at once,
    or ``failed`` and refunded when their attempts are spent (a job that kills its worker every time). An
    abandoned synchronous job is ``failed`` and refunded. How many were moved."""
    moved = 0
    with db.write() as conn:
        now = now_ms() if now is None else now
        rows = conn.execute(
            select(jobs.c.id, jobs.c.lease_owner, jobs.c.attempts, jobs.c.sync).where(
                jobs.c.status == ACTIVE, jobs.c.lease_expires_ms < now
            )
        ).all()
        for job_id, owner, attempts, sync in rows:
            if not sync and attempts < max_attempts:
                won = _cas(
                    conn,
                    job_id,
                    ACTIVE,
                    owner,
                    status=QUEUED,
                    run_after_ms=0,
                    progress_percent=0,
                    **_END_LEASE,
                )
            else:
                error = (
                    "the synchronous request was interrupted"
                    if sync
                    else f"the job's worker stopped {attempts} times while running it"
                )
                won = _cas(
                    conn, job_id, ACTIVE, owner, status=FAILED, error=error, finished_ms=now, **_END_LEASE
                )
                if won:
                    _failed(conn, job_id, now)
            moved += int(won)
    return moved


def get(db: Database, key_id: str, job_id: str) -> JobRecord:
    """The job, when it belongs to ``key_id``; :class:`JobNotFound` (404) otherwise."""
    with db.read() as conn:
        job = _load(conn, job_id)
    if job is None or job.key_id != key_id:
        raise JobNotFound(f"no job {job_id}")
    return job


def status_of(db: Database, job_id: str) -> str | None:
    """The job's status (any key's: for workers and tests); None for an unknown job."""
    with db.read() as conn:
        value = conn.execute(select(jobs.c.status).where(jobs.c.id == job_id)).scalar()
    return None if value is None else str(value)


def lease_holders(db: Database, job_ids: Sequence[str]) -> dict[str, tuple[str, str | None]]:
    """``{job_id: (status, lease_owner)}`` of these jobs (one read: the runner's watch of its jobs)."""
    if not job_ids:
        return {}
    with db.read() as conn:
        rows = conn.execute(
            select(jobs.c.id, jobs.c.status, jobs.c.lease_owner).where(jobs.c.id.in_(list(job_ids)))
        ).all()
    return {r[0]: (r[1], r[2]) for r in rows}


def list_jobs(
    db: Database, key_id: str, limit: int = LIST_DEFAULT, offset: int = 0
) -> tuple[list[JobRecord], int]:
    """The key's jobs, most recent first (``limit`` bounded to 1–200), and how many it has in all."""
    limit = max(1, min(LIST_MAX, int(limit)))
    offset = max(0, int(offset))
    with db.read() as conn:
        total = int(
            conn.execute(select(func.count()).select_from(jobs).where(jobs.c.key_id == key_id)).scalar() or 0
        )
        rows = (
            conn.execute(
                select(jobs)
                .where(jobs.c.key_id == key_id)
                .order_by(jobs.c.created_ms.desc(), jobs.c.id.desc())
                .limit(limit)
                .offset(offset)
            )
            .mappings()
            .all()
        )
    return [JobRecord.from_row(r) for r in rows], total


def batch_children(db: Database, key_id: str, batch_id: str) -> list[JobRecord]:
    """The jobs of the key's batch, in submission order; :class:`JobNotFound` for another key's batch."""
    with db.read() as conn:
        owner = conn.execute(select(batches.c.key_id).where(batches.c.id == batch_id)).scalar()
        if owner is None or owner != key_id:
            raise JobNotFound(f"no batch {batch_id}")
        rows = (
            conn.execute(
                select(jobs).where(jobs.c.batch_id == batch_id).order_by(jobs.c.created_ms, jobs.c.id)
            )
            .mappings()
            .all()
        )
    return [JobRecord.from_row(r) for r in rows]


# ----- batches -----------------------------------------------------------------------------------------
def child_summary(job: JobRecord) -> dict[str, Any]:
    """A child's entry in ``batch.completed`` (spec 6: "not shown"; documented here): job_id, status,
    title, the target language when the params name one, credits charged, and the error of a failed one."""
    summary: dict[str, Any] = {"job_id": job.id, "status": job.status, "title": job.title}
    target = job.params.get("tgt") or job.params.get("target") or job.params.get("target_lang")
    if target is not None:
        summary["tgt"] = target
    summary["credits"] = job.credits or 0
    if job.kind == "subtitle":
        from dragoman.service.subtitle_jobs import child_fields

        summary.update(child_fields(job))
    if job.kind == "dub":
        from dragoman.service.dub_jobs import child_fields as dub_child_fields

        summary.update(dub_child_fields(job))
    if job.error is not None and job.status == FAILED:
        summary["error"] = job.error
    return summary


def batch_payload(batch_id: str, target_count: int, children: Sequence[JobRecord]) -> dict[str, Any]:
    """Spec 6, ``batch.completed``: batch_id, target_count, done_count, failed_count, totals, children."""
    done = [c for c in children if c.status == DONE]
    failed = [c for c in children if c.status == FAILED]
    canceled = [c for c in children if c.status == CANCELED]
    return {
        "batch_id": batch_id,
        "target_count": target_count,
        "done_count": len(done),
        "failed_count": len(failed),
        "canceled_count": len(canceled),
        "totals": {
            "credits": sum(c.credits or 0 for c in children),
            "chars": sum(len(c.result or "") for c in done),
        },
        "children": [child_summary(c) for c in children],
    }


def _maybe_complete_batch(conn: Connection, job: JobRecord, now: int) -> bool:
    """When ``job`` (just made terminal) left its batch with no pending child, complete the batch by a
    compare-and-set on ``completed_ms``; the winner alone enqueues ``batch.completed``."""
    if job.batch_id is None:
        return False
    batch = (
        conn.execute(select(batches).where(batches.c.id == job.batch_id).with_for_update()).mappings().first()
    )
    if batch is None or batch["completed_ms"] is not None:
        return False
    pending = conn.execute(
        select(func.count())
        .select_from(jobs)
        .where(jobs.c.batch_id == job.batch_id, jobs.c.status.in_(sorted(PENDING)))
    ).scalar()
    if pending:
        return False
    won = (
        conn.execute(
            update(batches)
            .where(batches.c.id == job.batch_id, batches.c.completed_ms.is_(None))
            .values(completed_ms=now)
        ).rowcount
        == 1
    )
    if not won:
        return False
    rows = (
        conn.execute(
            select(jobs).where(jobs.c.batch_id == job.batch_id).order_by(jobs.c.created_ms, jobs.c.id)
        )
        .mappings()
        .all()
    )
    children = [JobRecord.from_row(r) for r in rows]
    url = next((c.webhook_url for c in children if c.webhook_url), None) or _webhook_url(conn, job)
    if url is not None:
        event = (
            f"{EVENT_PREFIX.get(job.kind, job.kind)}.batch.completed"
            if job.kind == "subtitle"
            else "batch.completed"
        )
        webhooks.enqueue(
            conn,
            key_id=job.key_id,
            url=url,
            event=event,
            payload={"event": event, **batch_payload(job.batch_id, int(batch["target_count"]), children)},
            batch_id=job.batch_id,
        )
    return True
