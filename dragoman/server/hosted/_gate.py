"""The hosted front door's gate, in HOSTED.md's order for v1 authenticated routes:
401 bad key → 403 plan without API access → 429 rate → idempotency → (the route:) validation → 402 → work.

* :func:`authenticate` checks the bearer key (:func:`dragoman.service.accounts.authenticate`: 401, 403),
  then counts the request against the key's per-minute window (:mod:`dragoman.service.ratelimit`: 429) and
  in the key's usage of the day (:class:`RequestTally`), in one hop to a worker thread. The window's
  ``RateLimit-*`` headers are left in the request's scope; :class:`HostedMiddleware` adds them to whatever
  the route answers (errors too).
* :func:`idempotent` runs a POST once per ``Idempotency-Key`` (:mod:`dragoman.service.idempotency`): a
  replay is the stored answer with ``Idempotent-Replayed: true``; an answer of 400 or more (an error before
  the work, or a failure) is not stored, so a retry runs again.
* :class:`HostedMiddleware` (pure ASGI) also writes the access log: method, path, status, milliseconds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dragoman.errors import DatabaseUnavailable, RateLimited
from dragoman.service import accounts, idempotency, usage
from dragoman.service.db import now_ms
from dragoman.service.idempotency import OwedReleases, StoredResponse

if TYPE_CHECKING:
    from dragoman.service.accounts import KeyInfo
    from dragoman.service.db import Database
    from dragoman.service.ratelimit import RateLimiter

access_log = logging.getLogger("dragoman.server.access")
log = logging.getLogger("dragoman.server.hosted")

#: Where the gate leaves the rate-limit headers of the request's key, for the middleware to add.
RATE_HEADERS = "dragoman.ratelimit_headers"
#: Headers of a stored answer that a replay repeats.
_REPLAYED_HEADERS = ("content-type", "location")


class RequestTally:
    """Requests counted in memory per key and UTC day, written to the usage table in one transaction every
    ``interval`` seconds (and by :meth:`flush`: before a usage report, at shutdown). Counting each request in
    its own write transaction cost the hot path more than the rest of the gate together; a crash loses at
    most ``interval`` seconds of request counts (never credits, never quota: those are written at once).
    Its thread also settles the Idempotency-Key releases :func:`idempotent` owes (``owed``: the database was
    unavailable when they were due)."""

    def __init__(self, db: Database, interval: float = 1.0) -> None:
        self.db = db
        self.interval = interval
        self.owed = OwedReleases()
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], list[int]] = {}  # (key id, day) -> [requests, an instant]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, key_id: str) -> None:
        at = now_ms()
        slot = (key_id, usage.day_of(at))
        with self._lock:
            counted = self._counts.get(slot)
            if counted is None:
                self._counts[slot] = [1, at]
            else:
                counted[0] += 1

    def flush(self) -> None:
        with self._lock:
            counts, self._counts = self._counts, {}
        if not counts:
            return
        try:
            with self.db.write() as conn:
                for (key_id, _day), (n, at) in counts.items():
                    usage.count_request(conn, key_id, n, at_ms=at)
        except Exception:
            log.exception("request counts could not be written; they are kept for the next try")
            with self._lock:
                for slot, (n, at) in counts.items():
                    self._counts.setdefault(slot, [0, at])[0] += n

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.flush()
            try:
                self.owed.settle(self.db)
            except Exception:
                log.exception("owed Idempotency-Key releases could not be written; kept for the next try")

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="dragoman-usage-tally", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self.flush()


def _gate_sync(
    db: Database, limiter: RateLimiter | None, tally: RequestTally, header: str | None
) -> tuple[KeyInfo, Any]:
    key = accounts.authenticate(db, header)  # 401, 403
    state = None
    if limiter is not None:
        state = limiter.hit(key.key_id)
    if state is None or state.allowed:
        tally.add(key.key_id)
    return key, state


async def authenticate(request: Request, *, rate: bool = True) -> KeyInfo:
    """The request's key (401, 403), counted against its rate (429, ``rate``) and its usage of the day."""
    app_state = request.app.state
    key, window = await anyio.to_thread.run_sync(
        _gate_sync,
        app_state.db,
        app_state.limiter if rate else None,
        app_state.tally,
        request.headers.get("authorization"),
    )
    if window is not None:
        request.scope[RATE_HEADERS] = window.headers()
        if not window.allowed:
            seconds = window.reset_seconds()
            raise RateLimited(
                f"more than {window.limit} requests in a minute with this key; retry after {seconds} s "
                "(use webhooks instead of polling often)",
                retry_after=seconds,
                limit=window.limit,
                remaining=window.remaining,
                resets_at_ms=int(window.reset_at * 1000),
            )
    return key


@dataclass
class Reservation:
    """An Idempotency-Key this request holds; ``stored`` once its answer was written (by the route, inside
    the transaction of its work, or by :func:`idempotent` after)."""

    key_id: str
    idem_key: str
    stored: bool = False

    def complete_in(self, conn: Any, response: Response) -> None:
        """Stores ``response`` inside ``conn``'s transaction (the job's own)."""
        idempotency.complete(conn, self.key_id, self.idem_key, stored(response))
        self.stored = True


def stored(response: Response) -> StoredResponse:
    headers = {k: v for k, v in response.headers.items() if k.lower() in _REPLAYED_HEADERS}
    return StoredResponse(response.status_code, bytes(response.body), headers)


def replay(answer: StoredResponse) -> Response:
    return Response(
        answer.body,
        status_code=answer.status_code,
        headers={**answer.headers, "Idempotent-Replayed": "true"},
    )


async def idempotent(
    request: Request,
    key: KeyInfo,
    body_print: str,
    run: Callable[[Reservation | None], Awaitable[Response]],
) -> Response:
    """``run`` once per Idempotency-Key value (none given: always)."""
    header = request.headers.get("idempotency-key")
    if header is None:
        return await run(None)
    idem_key = idempotency.check_key(header)
    db = request.app.state.db
    owed: OwedReleases = request.app.state.tally.owed
    begun = now_ms()  # the reservation's created_ms: what an owed release of it matches
    try:
        answer = await anyio.to_thread.run_sync(_begin, db, owed, key.key_id, idem_key, body_print, begun)
    except DatabaseUnavailable:
        owed.add(key.key_id, idem_key, begun, body_print)  # its commit may have landed before the loss
        raise
    if answer is not None:
        return replay(answer)
    reservation = Reservation(key.key_id, idem_key)

    async def release() -> None:
        """The reservation freed (a retry runs again); owed when the database cannot be reached, so a
        retry does not meet 409 "still running" for a request that never ran until it goes stale."""
        try:
            await anyio.to_thread.run_sync(idempotency.release, db, key.key_id, idem_key)
        except DatabaseUnavailable:
            owed.add(key.key_id, idem_key, begun, body_print)

    try:
        response = await run(reservation)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await release()
        raise
    if reservation.stored:
        return response
    if response.status_code >= 400 or not hasattr(response, "body"):
        await release()
    else:
        await anyio.to_thread.run_sync(idempotency.complete, db, key.key_id, idem_key, stored(response))
    return response


def _begin(
    db: Database, owed: OwedReleases, key_id: str, idem_key: str, body_print: str, now: int
) -> StoredResponse | None:
    """:func:`idempotency.begin`, after the releases this process owes (one may be this very key's)."""
    owed.settle(db)
    return idempotency.begin(db, key_id, idem_key, body_print, now=now)


class HostedMiddleware:
    """Adds the key's ``RateLimit-*`` headers (left by :func:`authenticate`) to the answer, and logs it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def send_with_headers(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                extra = scope.get(RATE_HEADERS)
                if extra:
                    have = {k.lower() for k, _ in message.get("headers", [])}
                    added = [
                        (k.lower().encode(), v.encode())
                        for k, v in extra.items()
                        if k.lower().encode() not in have
                    ]
                    message = {**message, "headers": [*message.get("headers", []), *added]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception:
            if status == 0:
                status = 500
            raise
        finally:
            ms = (time.perf_counter() - started) * 1000
            access_log.info("%s %s %d %.1fms", scope["method"], scope["path"], status, ms)
