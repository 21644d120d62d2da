"""Webhook events: an outbox written with the job's state change, and the dispatcher that delivers it.

**Enqueue** (:func:`enqueue`) runs inside the caller's write transaction (the job's compare-and-set, its
ledger entry): the event exists if and only if the state change committed. The payload gets ``id``
(``evt_<hex>``, the stable event id, also ``webhook-id``), ``event`` and ``created`` (Unix seconds), and is
serialised once and stored exactly as it is signed and sent.

**Delivery** (:class:`WebhookDispatcher`) runs in threads of its own, so a slow or dead receiver never slows
job work: one scheduler thread claims due events and a bounded pool of workers (``concurrency``, and at
most ``per_host`` at once to one receiver host, so one dead receiver cannot take every worker) POSTs them.
Each attempt is signed afresh (:func:`dragoman.webhooks.sign`: ``X-Service-Signature`` and the Standard
Webhooks headers, with the attempt's timestamp) and sent through the SSRF guard
(:mod:`dragoman.service.netguard`: resolve once, refuse private and metadata addresses unless
``webhooks_allow_private``, connect to the checked address), with a 10 s timeout (per operation and for the
whole connection) and no redirects; the response body is never read.

Outcome of an attempt: 2xx → ``delivered``; a network error, 408, 429 or 5xx → retried (1 attempt + 5
retries), after an exponential back-off with jitter (:func:`backoff_seconds`; a 429's or 503's
``Retry-After`` is honoured up to an hour); any other status (3xx included: redirects are not followed),
a refused address, or the last retry failing → ``failed``. Every attempt writes one ``webhook_attempts`` row
(the delivery log: :func:`delivery_log`, ``dragoman hosted webhooks log KEY_ID``).

Claiming is a compare-and-set that pushes the event's ``next_attempt_ms`` past the delivery's longest
possible time (a lease), so two dispatchers (or processes) never send one attempt twice, and an event whose
dispatcher died mid-attempt is retried after the lease: nothing is lost, an event may (rarely) arrive twice
(receivers de-duplicate on ``webhook-id``).
"""

from __future__ import annotations

import json
import logging
import queue
import random
import secrets
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
from sqlalchemy import Connection, and_, func, select, update

from dragoman import webhooks as signing
from dragoman.errors import InvalidWebhookUrl, WebhookVerificationError
from dragoman.service import netguard
from dragoman.service.db import Database, api_keys, insert_ignore, now_ms, webhook_attempts, webhook_events
from dragoman.settings import HostedSettings

log = logging.getLogger("dragoman.service.webhooks")

#: 1 attempt + 5 retries (HOSTED.md).
RETRIES = 5
MAX_ATTEMPTS = 1 + RETRIES
#: Back-off before retry n (1-based): BACKOFF_BASE_S * BACKOFF_FACTOR ** (n - 1), between half and all of it
#: (jitter): about 10 s, 40 s, 2.7 min, 11 min, 43 min; the last retry comes ~1 h after the first attempt.
BACKOFF_BASE_S = 10.0
BACKOFF_FACTOR = 4.0
#: The longest wait a receiver's Retry-After may ask for.
RETRY_AFTER_MAX_S = 3600.0
#: Seconds a receiver has to answer (spec 6: 10 s).
TIMEOUT_S = 10.0
#: Statuses that are retried (besides network errors and timeouts).
RETRY_STATUSES = frozenset({408, 429})
USER_AGENT = "dragoman-webhooks/1"
_ERROR_CHARS = 500


def backoff_seconds(retry: int, rng: random.Random | None = None) -> float:
    """Seconds to wait before retry ``retry`` (1 … RETRIES): exponential, with "equal jitter"."""
    full = BACKOFF_BASE_S * BACKOFF_FACTOR ** max(0, retry - 1)
    return full / 2 + (rng or random).uniform(0, full / 2)


def enqueue(
    conn: Connection,
    *,
    key_id: str,
    url: str | None,
    event: str,
    payload: Mapping[str, Any],
    job_id: str | None = None,
    batch_id: str | None = None,
    at_ms: int | None = None,
) -> str | None:
    """Add ``event`` to the outbox inside the caller's transaction ``conn``; its event id (None, and nothing
    written, when ``url`` is None or empty). Delivery starts once the transaction commits."""
    if not url:
        return None
    created = now_ms() if at_ms is None else at_ms
    event_id = "evt_" + secrets.token_hex(12)
    body = {**payload, "id": event_id, "event": payload.get("event", event), "created": created // 1000}
    ordered = {"id": event_id, "event": body.pop("event"), "created": body.pop("created"), **body}
    try:
        text = json.dumps(ordered, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate in some field: escaped, so the body is valid UTF-8 JSON
        text = json.dumps(ordered, ensure_ascii=True, separators=(",", ":"), allow_nan=False, default=str)
    conn.execute(
        webhook_events.insert().values(
            id=event_id,
            key_id=key_id,
            event=event,
            job_id=job_id,
            batch_id=batch_id,
            url=url,
            payload=text,
            state="pending",
            attempts=0,
            next_attempt_ms=created,
            created_ms=created,
        )
    )
    return event_id


# ----- the delivery log -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Attempt:
    """One delivery attempt (a row of the delivery log), with its event's current state."""

    event_id: str
    event: str
    job_id: str | None
    batch_id: str | None
    url: str
    state: str  # the event's: pending, delivered, failed
    attempt: int
    at_ms: int
    status_code: int | None
    error: str | None
    duration_ms: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def delivery_log(db: Database, key_id: str, *, limit: int = 200) -> list[Attempt]:
    """The latest ``limit`` attempts of ``key_id``'s events, newest first."""
    query = (
        select(
            webhook_attempts.c.event_id,
            webhook_events.c.event,
            webhook_events.c.job_id,
            webhook_events.c.batch_id,
            webhook_events.c.url,
            webhook_events.c.state,
            webhook_attempts.c.attempt,
            webhook_attempts.c.at_ms,
            webhook_attempts.c.status_code,
            webhook_attempts.c.error,
            webhook_attempts.c.duration_ms,
        )
        .join(webhook_events, webhook_events.c.id == webhook_attempts.c.event_id)
        .where(webhook_events.c.key_id == key_id)
        .order_by(webhook_attempts.c.at_ms.desc(), webhook_attempts.c.id.desc())
        .limit(max(1, limit))
    )
    with db.read() as conn:
        return [Attempt(**dict(row)) for row in conn.execute(query).mappings()]


def pending_count(db: Database) -> int:
    """Events waiting for an attempt (due or not)."""
    with db.read() as conn:
        query = select(func.count()).select_from(webhook_events).where(webhook_events.c.state == "pending")
        return int(conn.execute(query).scalar_one())


# ----- delivery -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Claimed:
    id: str
    url: str
    payload: str
    attempt: int  # the number of this attempt (1-based)
    secret: str | None


@dataclass(frozen=True)
class DeliveryResult:
    """What one attempt did: ``outcome`` is delivered, retry (scheduled at ``next_attempt_ms``) or failed."""

    event_id: str
    attempt: int
    outcome: str
    status_code: int | None
    error: str | None
    duration_ms: int
    next_attempt_ms: int | None


def _host(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


class WebhookDispatcher:
    """Delivers the outbox: ``start()`` runs it in threads; ``deliver_due(now)`` delivers what is due once
    (tests, and a maintenance command) and returns each attempt's result."""

    def __init__(
        self,
        db: Database,
        settings: HostedSettings,
        *,
        concurrency: int = 8,
        per_host: int = 2,
        timeout: float = TIMEOUT_S,
        poll_interval: float = 0.5,
        resolver: netguard.Resolver | None = None,
        rng: random.Random | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self.db = db
        self.allow_private = settings.webhooks_allow_private
        self.concurrency = max(1, concurrency)
        self.per_host = max(1, per_host)
        self.timeout = timeout
        self.poll_interval = poll_interval
        #: The longest an attempt can take; a claimed event is retried after it if its dispatcher vanished.
        self.lease_ms = int((3 * timeout + 30) * 1000)
        self._rng = rng or random.Random()
        self._client = client or netguard.guarded_client(
            allow_private=self.allow_private,
            timeout=timeout,
            resolver=resolver,
            max_connections=self.concurrency * 2,
        )
        self._lock = threading.Lock()
        self._in_flight: dict[str, int] = {}  # host -> attempts in flight
        self._busy = 0
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._queue: queue.Queue[_Claimed | None] = queue.Queue()
        self._threads: list[threading.Thread] = []

    # ----- claiming -----------------------------------------------------------------------------------------
    def _claim(self, now: int, limit: int, *, bounded: bool) -> list[_Claimed]:
        """Claim up to ``limit`` due events (compare-and-set of ``next_attempt_ms``: a lease); with
        ``bounded`` skip hosts that already have ``per_host`` attempts in flight."""
        if limit <= 0:
            return []
        query = (
            select(
                webhook_events.c.id,
                webhook_events.c.url,
                webhook_events.c.payload,
                webhook_events.c.attempts,
                webhook_events.c.next_attempt_ms,
                api_keys.c.webhook_secret,
            )
            .select_from(webhook_events.outerjoin(api_keys, api_keys.c.id == webhook_events.c.key_id))
            .where(webhook_events.c.state == "pending", webhook_events.c.next_attempt_ms <= now)
            .order_by(webhook_events.c.next_attempt_ms, webhook_events.c.id)
            .limit(max(limit * 4, 50))
        )
        with self.db.read() as conn:  # most polls find nothing: no write lock taken for them
            rows = conn.execute(query).mappings().all()
        if not rows:
            return []
        claimed: list[_Claimed] = []
        with self.db.write() as conn:
            hosts: dict[str, int] = {}
            with self._lock:
                hosts.update(self._in_flight)
            for row in rows:
                if len(claimed) >= limit:
                    break
                host = _host(str(row["url"]))
                if bounded and hosts.get(host, 0) >= self.per_host:
                    continue
                won = conn.execute(
                    update(webhook_events)
                    .where(
                        and_(
                            webhook_events.c.id == row["id"],
                            webhook_events.c.state == "pending",
                            webhook_events.c.next_attempt_ms == row["next_attempt_ms"],
                        )
                    )
                    .values(next_attempt_ms=now + self.lease_ms)
                ).rowcount
                if won != 1:
                    continue
                hosts[host] = hosts.get(host, 0) + 1
                secret = row["webhook_secret"]
                claimed.append(
                    _Claimed(
                        id=str(row["id"]),
                        url=str(row["url"]),
                        payload=str(row["payload"]),
                        attempt=int(row["attempts"]) + 1,
                        secret=None if secret is None else str(secret),
                    )
                )
        return claimed

    # ----- one attempt --------------------------------------------------------------------------------------
    def _post(self, item: _Claimed) -> tuple[int | None, str | None, bool, float | None]:
        """(status, error, retryable, retry_after) of one POST."""
        if item.secret is None:
            return None, "the event's API key no longer exists", False, None
        try:
            netguard.check_url(item.url, allow_private=self.allow_private, resolve=False)
            body = item.payload.encode("utf-8")
            headers = signing.sign(body, item.secret, int(time.time()), item.id)
            headers["User-Agent"] = USER_AGENT
            with self._client.stream("POST", item.url, content=body, headers=headers) as response:
                status = response.status_code  # the body is never read
                wait = _retry_after(response.headers.get("retry-after"))
        except (
            InvalidWebhookUrl,
            WebhookVerificationError,
        ) as exc:  # a bad URL or secret: retrying won't help
            return None, f"refused: {exc.message}", False, None
        except httpx.TimeoutException as exc:
            return None, f"timed out after {self.timeout:g} s ({type(exc).__name__})", True, None
        except (httpx.HTTPError, OSError) as exc:
            return None, f"{type(exc).__name__}: {exc}", True, None
        except Exception as exc:  # a bug of ours or of a library: logged, retried like a network error
            log.exception("webhook %s: unexpected error", item.id)
            return None, f"{type(exc).__name__}: {exc}", True, None
        if 200 <= status < 300:
            return status, None, False, None
        retryable = status in RETRY_STATUSES or status >= 500
        return status, None, retryable, wait if status in (429, 503) else None

    def _attempt(self, item: _Claimed, now: int | None) -> DeliveryResult:
        started = time.monotonic()
        status, error, retryable, wait = self._post(item)
        duration = int((time.monotonic() - started) * 1000)
        at = now_ms() if now is None else now
        next_ms: int | None = None
        if status is not None and 200 <= status < 300:
            outcome = "delivered"
        elif retryable and item.attempt < MAX_ATTEMPTS:
            outcome = "retry"
            delay = backoff_seconds(item.attempt, self._rng)
            if wait is not None:
                delay = max(delay, min(wait, RETRY_AFTER_MAX_S))
            next_ms = at + int(delay * 1000)
        else:
            outcome = "failed"
        with self.db.write() as conn:
            conn.execute(
                insert_ignore(conn, webhook_attempts).values(
                    event_id=item.id,
                    attempt=item.attempt,
                    at_ms=at,
                    status_code=status,
                    error=None if error is None else error[:_ERROR_CHARS],
                    duration_ms=duration,
                )
            )
            conn.execute(
                update(webhook_events)
                .where(
                    and_(
                        webhook_events.c.id == item.id,
                        webhook_events.c.state == "pending",
                        webhook_events.c.attempts == item.attempt - 1,
                    )
                )
                .values(
                    attempts=item.attempt,
                    state="pending" if outcome == "retry" else outcome,
                    next_attempt_ms=next_ms if next_ms is not None else at,
                )
            )
        if outcome != "delivered":
            log.info("webhook %s attempt %d: %s (%s)", item.id, item.attempt, outcome, error or status)
        return DeliveryResult(item.id, item.attempt, outcome, status, error, duration, next_ms)

    # ----- once, synchronously ------------------------------------------------------------------------------
    def deliver_due(self, now: int | None = None) -> list[DeliveryResult]:
        """Attempt every event due at ``now`` (ms; default the clock), ``concurrency`` at a time, and wait for
        them; ``now`` also dates the log rows and schedules the retries (tests pass a clock of their own)."""
        at = now_ms() if now is None else now
        items = self._claim(at, 10_000, bounded=False)
        if not items:
            return []
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(items))) as pool:
            return list(pool.map(lambda item: self._attempt(item, now), items))

    # ----- in the background --------------------------------------------------------------------------------
    def start(self) -> WebhookDispatcher:
        """Start the scheduler and ``concurrency`` workers (daemon threads); returns self."""
        if self._threads:
            return self
        self._stopping.clear()
        for n in range(self.concurrency):
            worker = threading.Thread(target=self._work, name=f"webhook-worker-{n}", daemon=True)
            worker.start()
            self._threads.append(worker)
        scheduler = threading.Thread(target=self._schedule, name="webhook-scheduler", daemon=True)
        scheduler.start()
        self._threads.append(scheduler)
        return self

    def wake(self) -> None:
        """Look for due events now (after a commit that enqueued some) instead of at the next poll."""
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop claiming, let the workers finish what they hold for up to ``timeout`` seconds; an attempt
        still running after that is abandoned to its lease (retried later, by this or another dispatcher)."""
        if not self._threads:
            return
        self._stopping.set()
        self._wake.set()
        for _ in range(self.concurrency):
            self._queue.put(None)
        deadline = time.monotonic() + timeout
        alive = False
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            alive = alive or thread.is_alive()
        self._threads = []
        if not alive:
            self._client.close()

    def close(self) -> None:
        self.stop()
        self._client.close()

    def __enter__(self) -> WebhookDispatcher:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _schedule(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()  # a wake during the claim below is kept: the wait then returns at once
            try:
                with self._lock:
                    free = self.concurrency - self._busy
                items = self._claim(now_ms(), free, bounded=True)
                for item in items:
                    host = _host(item.url)
                    with self._lock:
                        self._busy += 1
                        self._in_flight[host] = self._in_flight.get(host, 0) + 1
                    self._queue.put(item)
            except Exception:  # the database is away for a moment: try again at the next poll
                log.exception("webhook dispatcher: claiming failed")
            self._wake.wait(self.poll_interval)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                self._attempt(item, None)
            except Exception:  # recording failed (database away): the lease brings the event back
                log.exception("webhook %s: recording the attempt failed", item.id)
            finally:
                host = _host(item.url)
                with self._lock:
                    self._busy -= 1
                    left = self._in_flight.get(host, 1) - 1
                    if left > 0:
                        self._in_flight[host] = left
                    else:
                        self._in_flight.pop(host, None)
                self._wake.set()
