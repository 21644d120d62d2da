"""The 60/min limiter on Redis (issue 13): one window shared by every limiter (every API process) on the same
Redis, and the documented behaviour when Redis is down: fail closed (503 ``rate_limiter_unavailable`` with
Retry-After), within milliseconds, and recover on their own once Redis is back."""

from __future__ import annotations

import time

import pytest
from scale_support import redis

from dragoman.errors import RateLimiterUnavailable
from dragoman.service import ratelimit
from dragoman.service.ratelimit import RateLimiter
from dragoman.testing.redis_server import RedisServer, ping

__all__ = ["redis"]  # the fixture, imported for pytest


def test_the_window_is_shared_by_limiters_on_one_redis(redis: RedisServer) -> None:
    first, second = RateLimiter(redis.url, per_minute=60), RateLimiter(redis.url, per_minute=60)
    states = [(first if i % 2 else second).hit("key-1") for i in range(60)]
    assert all(s.allowed for s in states)
    assert sorted(s.remaining for s in states) == list(range(60))  # one count, not two of 30
    for limiter in (first, second):
        refused = limiter.hit("key-1")
        assert not refused.allowed and refused.remaining == 0 and "Retry-After" in refused.headers()
    assert first.hit("key-2").allowed  # another key has its own window
    assert second.peek("key-1").remaining == 0 and second.peek("key-3").remaining == 60


def test_memory_limiters_do_not_share() -> None:
    """What Redis is for: two memory limiters (two processes) would each allow 60."""
    first, second = RateLimiter("memory://", per_minute=2), RateLimiter("memory://", per_minute=2)
    assert all(limiter.hit("k").allowed for limiter in (first, second, first, second))


def test_redis_down_fails_closed_fast_and_recovers(redis: RedisServer) -> None:
    limiter = RateLimiter(redis.url, per_minute=60)
    assert limiter.hit("k").allowed
    redis.stop(kill=True)
    started = time.perf_counter()
    with pytest.raises(RateLimiterUnavailable) as down:
        limiter.hit("k")
    first_failure = time.perf_counter() - started
    assert down.value.status == 503 and down.value.code == "rate_limiter_unavailable"
    assert down.value.retry_after == ratelimit.UNAVAILABLE_RETRY_AFTER
    assert down.value.to_dict()["retry_after"] == ratelimit.UNAVAILABLE_RETRY_AFTER
    # a dead Redis costs milliseconds (generous bound: the connect timeout is 0.25 s)
    assert first_failure < 1.0, first_failure
    with pytest.raises(RateLimiterUnavailable):
        limiter.peek("k")  # the breaker: refused without trying
    redis.start()  # same port, empty (no persistence)
    assert ping(redis.host, redis.port)
    deadline = time.monotonic() + 10
    while True:
        try:
            state = limiter.hit("k")
            break
        except RateLimiterUnavailable:
            assert time.monotonic() < deadline, "the limiter did not recover after Redis came back"
            time.sleep(0.1)
    assert state.allowed and state.remaining == 59  # a fresh window: the restarted Redis forgot the old one


def test_a_black_holed_redis_costs_the_connect_timeout_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Redis that never answers (here: a listening socket that never accepts nor replies) holds the first
    request for about the timeout, and the breaker refuses the next ones at once."""
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(0)
        port = silent.getsockname()[1]
        limiter = RateLimiter(f"redis://127.0.0.1:{port}", per_minute=60)
        started = time.perf_counter()
        with pytest.raises(RateLimiterUnavailable):
            limiter.hit("k")
        first = time.perf_counter() - started
        started = time.perf_counter()
        for _ in range(20):
            with pytest.raises(RateLimiterUnavailable):
                limiter.hit("k")
        next_twenty = time.perf_counter() - started
    bound = 4 * (ratelimit.CONNECT_TIMEOUT + ratelimit.SOCKET_TIMEOUT)  # one retry, generous
    assert first < bound, first
    assert next_twenty < first, (next_twenty, first)  # the breaker: no timeout paid again
