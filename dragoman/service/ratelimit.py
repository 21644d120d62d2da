"""The per-key request rate of hosted v1 (spec 8: 60 requests a minute per key, fixed window).

The `limits` library's :class:`~limits.strategies.FixedWindowRateLimiter` over the storage that
``settings.hosted.ratelimit_uri`` names: ``memory://`` on one machine (valid because one process serves every
request), ``redis://host:port`` when the service runs in several processes (issue 13). The limiter is keyed by
the API key's id, never by a client address (HOSTED.md).

:meth:`RateLimiter.hit` counts one request and says whether it is allowed, with what the answer's headers
state: ``RateLimit-Limit`` (requests a window), ``RateLimit-Remaining`` (left in this window) and
``RateLimit-Reset`` (seconds until the window ends; the IETF draft's delta-seconds), plus ``Retry-After``
(the same seconds) on a refusal. :meth:`RateLimiter.peek` reads the window without counting (the usage
report's headroom). No HTTP here: the front door turns a refusal into its 429.

**Redis down: fail closed.** A paid API never serves unmetered requests, so when the limiter's store cannot
be reached :meth:`~RateLimiter.hit` and :meth:`~RateLimiter.peek` raise
:class:`~dragoman.errors.RateLimiterUnavailable` (503 ``rate_limiter_unavailable``, ``Retry-After:``
:data:`UNAVAILABLE_RETRY_AFTER`). A dead Redis costs milliseconds, not seconds: the client connects within
:data:`CONNECT_TIMEOUT`, reads within :data:`SOCKET_TIMEOUT` and retries once at once (a pooled connection
that a Redis restart closed is replaced transparently); after a failure the limiter refuses without trying
again for :data:`UNAVAILABLE_RETRY_AFTER` seconds (a breaker: a black-holed Redis does not hold every request
for the timeout). The first request after that tries Redis again, so the service recovers on its own once
Redis is back (a restarted Redis without persistence starts every window afresh).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from limits import RateLimitItemPerMinute
from limits.errors import StorageError
from limits.storage import storage_from_string
from limits.strategies import FixedWindowRateLimiter

from dragoman.errors import RateLimiterUnavailable
from dragoman.limits import RATE_PER_MINUTE
from dragoman.settings import HostedSettings

__all__ = [
    "CONNECT_TIMEOUT",
    "SOCKET_TIMEOUT",
    "UNAVAILABLE_RETRY_AFTER",
    "RateLimiter",
    "RateState",
]

log = logging.getLogger("dragoman.service.ratelimit")

_NAMESPACE = "dragoman-v1"
#: Seconds to connect to Redis, and to wait for one of its answers, before the store counts as down.
CONNECT_TIMEOUT = 0.25
SOCKET_TIMEOUT = 0.5
#: Seconds a refusal for a store that is down asks the client to wait (and the breaker stays open).
UNAVAILABLE_RETRY_AFTER = 1
_REDIS_SCHEMES = ("redis", "rediss", "redis+unix", "valkey", "valkeys", "valkey+unix")


def _storage_options(uri: str) -> dict[str, Any]:
    """Client options for the store ``uri`` names: short timeouts and one immediate retry for Redis."""
    if uri.partition("://")[0].lower() not in _REDIS_SCHEMES:
        return {}
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return {
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "socket_timeout": SOCKET_TIMEOUT,
        "retry": Retry(NoBackoff(), 1),
        "health_check_interval": 0,
    }


@dataclass(frozen=True)
class RateState:
    """One key's window after (or without) counting a request."""

    allowed: bool
    limit: int
    remaining: int
    #: When the window ends (Unix seconds, float).
    reset_at: float

    def reset_seconds(self, now: float | None = None) -> int:
        """Whole seconds until the window ends (at least 1 while it is open)."""
        left = self.reset_at - (time.time() if now is None else now)
        return max(1, math.ceil(left))

    def headers(self, now: float | None = None) -> dict[str, str]:
        """``RateLimit-Limit``, ``RateLimit-Remaining``, ``RateLimit-Reset``; ``Retry-After`` when refused."""
        reset = self.reset_seconds(now)
        headers = {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(self.remaining),
            "RateLimit-Reset": str(reset),
        }
        if not self.allowed:
            headers["Retry-After"] = str(reset)
        return headers


class RateLimiter:
    """``per_minute`` requests a key may make in each fixed one-minute window."""

    def __init__(self, uri: str = "memory://", per_minute: int = RATE_PER_MINUTE) -> None:
        self.uri = uri
        self.per_minute = per_minute
        self._item = RateLimitItemPerMinute(per_minute, namespace=_NAMESPACE)
        storage = storage_from_string(uri, wrap_exceptions=True, **_storage_options(uri))
        self._limiter = FixedWindowRateLimiter(storage)
        self._lock = threading.Lock()
        self._down_until = 0.0  # time.monotonic() before which the store counts as down (the breaker)

    @classmethod
    def from_settings(cls, settings: HostedSettings, per_minute: int = RATE_PER_MINUTE) -> RateLimiter:
        return cls(settings.ratelimit_uri, per_minute)

    def _check_up(self) -> None:
        if time.monotonic() < self._down_until:
            raise self._unavailable("it failed less than a second ago")

    def _unavailable(self, why: str) -> RateLimiterUnavailable:
        return RateLimiterUnavailable(
            f"the rate limiter's store cannot be reached ({why}); requests are refused rather than served "
            f"unmetered; retry after {UNAVAILABLE_RETRY_AFTER} s",
            retry_after=UNAVAILABLE_RETRY_AFTER,
        )

    def _failed(self, exc: StorageError) -> RateLimiterUnavailable:
        with self._lock:
            first = time.monotonic() >= self._down_until
            self._down_until = time.monotonic() + UNAVAILABLE_RETRY_AFTER
        if first:
            log.error("rate limiter store %s unreachable: %s", self._shown_uri(), exc.storage_error)
        return self._unavailable(type(exc.storage_error).__name__)

    def _shown_uri(self) -> str:
        """The store's URI without a password."""
        scheme, sep, rest = self.uri.partition("://")
        return f"{scheme}{sep}{rest.rpartition('@')[2]}"

    def hit(self, key_id: str) -> RateState:
        """Counts one request of ``key_id`` (a refused one is not counted) and says whether it may go on;
        :class:`~dragoman.errors.RateLimiterUnavailable` when the store cannot be reached."""
        self._check_up()
        try:
            allowed = self._limiter.hit(self._item, key_id)
            stats = self._limiter.get_window_stats(self._item, key_id)
        except StorageError as exc:
            raise self._failed(exc) from None
        return RateState(allowed, self.per_minute, max(0, stats.remaining), float(stats.reset_time))

    def peek(self, key_id: str) -> RateState:
        """The window of ``key_id`` without counting a request (RateLimiterUnavailable as :meth:`hit`)."""
        self._check_up()
        try:
            stats = self._limiter.get_window_stats(self._item, key_id)
        except StorageError as exc:
            raise self._failed(exc) from None
        reset = float(stats.reset_time)
        if stats.remaining >= self.per_minute or reset <= time.time():  # no window open: a full one
            reset = time.time() + 60.0
        return RateState(stats.remaining > 0, self.per_minute, max(0, stats.remaining), reset)

    def reset(self) -> None:
        """Forgets every window (tests)."""
        self._limiter.storage.reset()
