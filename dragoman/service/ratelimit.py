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
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from limits import RateLimitItemPerMinute
from limits.storage import storage_from_string
from limits.strategies import FixedWindowRateLimiter

from dragoman.limits import RATE_PER_MINUTE
from dragoman.settings import HostedSettings

__all__ = ["RateLimiter", "RateState"]

_NAMESPACE = "dragoman-v1"


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
        self._limiter = FixedWindowRateLimiter(storage_from_string(uri))

    @classmethod
    def from_settings(cls, settings: HostedSettings, per_minute: int = RATE_PER_MINUTE) -> RateLimiter:
        return cls(settings.ratelimit_uri, per_minute)

    def hit(self, key_id: str) -> RateState:
        """Counts one request of ``key_id`` (a refused one is not counted) and says whether it may go on."""
        allowed = self._limiter.hit(self._item, key_id)
        stats = self._limiter.get_window_stats(self._item, key_id)
        return RateState(allowed, self.per_minute, max(0, stats.remaining), float(stats.reset_time))

    def peek(self, key_id: str) -> RateState:
        """The window of ``key_id`` without counting a request."""
        stats = self._limiter.get_window_stats(self._item, key_id)
        reset = float(stats.reset_time)
        if stats.remaining >= self.per_minute or reset <= time.time():  # no window open: a full one
            reset = time.time() + 60.0
        return RateState(stats.remaining > 0, self.per_minute, max(0, stats.remaining), reset)

    def reset(self) -> None:
        """Forgets every window (tests)."""
        self._limiter.storage.reset()
