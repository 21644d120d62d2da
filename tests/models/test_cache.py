"""The load-once model cache: one load for concurrent first calls, memory budget, idle unloading, forget.

Time is an injected clock and the reaper thread is off (``reap_every=0``): nothing here waits or measures.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest

from dragoman.models.cache import ModelCache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Model:
    name: str
    generation: int = 0
    closed: int = 0
    calls: list[str] = field(default_factory=list)

    def close(self) -> None:
        self.closed += 1


class Loader:
    """Loads a fresh :class:`Model` per call and remembers every one it made."""

    def __init__(self) -> None:
        self.made: list[Model] = []
        self.lock = threading.Lock()

    def __call__(self, name: str) -> Model:
        with self.lock:
            model = Model(name, generation=sum(m.name == name for m in self.made))
            self.made.append(model)
        return model

    def of(self, name: str) -> list[Model]:
        return [m for m in self.made if m.name == name]


MiB = 1024 * 1024


def make(budget: int = 0, idle: float = 0.0) -> tuple[ModelCache[Model], Clock, Loader]:
    clock = Clock()
    return ModelCache(budget_bytes=budget, idle_seconds=idle, clock=clock, reap_every=0), clock, Loader()


def test_loads_once_and_returns_the_same_model() -> None:
    cache, _, load = make()
    first = cache.get("a", lambda: load("a"))
    assert cache.get("a", lambda: load("a")) is first
    assert len(load.made) == 1 and cache.keys() == {"a"} and "a" in cache and cache.peek("b") is None


def test_concurrent_first_calls_load_once() -> None:
    cache, _, load = make()
    barrier = threading.Barrier(8)
    started = threading.Event()
    release = threading.Event()

    def slow_load() -> Model:
        started.set()
        release.wait(10)
        return load("a")

    got: list[Model] = []

    def worker() -> None:
        barrier.wait()
        got.append(cache.get("a", slow_load))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    assert started.wait(10)
    # Another id loads meanwhile: the lock is per id.
    assert cache.get("b", lambda: load("b")).name == "b"
    release.set()
    for t in threads:
        t.join()
    assert len(load.of("a")) == 1 and len(got) == 8 and all(m is got[0] for m in got)


def test_a_failed_load_leaves_nothing_and_the_next_call_retries() -> None:
    cache, _, load = make()

    def broken() -> Model:
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        cache.get("a", broken)
    assert cache.keys() == set()
    assert cache.get("a", lambda: load("a")).name == "a"


def test_budget_unloads_the_least_recently_used_first() -> None:
    cache, clock, load = make(budget=250 * MiB)
    a = cache.get("a", lambda: load("a"), size=100 * MiB)
    clock.now += 1
    b = cache.get("b", lambda: load("b"), size=100 * MiB)
    clock.now += 1
    cache.get("a", lambda: load("a"), size=100 * MiB)  # a is now the most recently used
    clock.now += 1
    cache.get("c", lambda: load("c"), size=100 * MiB)
    assert cache.keys() == {"a", "c"}
    assert b.closed == 1 and a.closed == 0
    assert cache.total_bytes == 200 * MiB


def test_budget_never_unloads_a_model_in_use() -> None:
    cache, clock, load = make(budget=250 * MiB)
    with cache.lease("a", lambda: load("a"), size=100 * MiB) as a:
        clock.now += 1
        b = cache.get("b", lambda: load("b"), size=100 * MiB)
        clock.now += 1
        cache.get("c", lambda: load("c"), size=100 * MiB)  # a is least recent but busy: b goes
        assert cache.keys() == {"a", "c"} and b.closed == 1 and a.closed == 0
    clock.now += 1
    cache.get("d", lambda: load("d"), size=100 * MiB)  # a is free now and least recent
    assert cache.keys() == {"c", "d"} and a.closed == 1


def test_a_model_loads_over_budget_when_the_others_are_busy(caplog: pytest.LogCaptureFixture) -> None:
    cache, _, load = make(budget=150 * MiB)
    with cache.lease("a", lambda: load("a"), size=100 * MiB) as a:
        cache.get("b", lambda: load("b"), size=100 * MiB)
        assert cache.keys() == {"a", "b"} and a.closed == 0
    assert "goes over the memory budget" in caplog.text


def test_size_is_asked_only_when_a_model_loads() -> None:
    cache, _, load = make(budget=1000)
    asked: list[str] = []

    def size() -> int:
        asked.append("x")
        return 10

    for _ in range(3):
        cache.get("a", lambda: load("a"), size=size)
    assert asked == ["x"] and cache.entries()[0].size_bytes == 10


def test_unsized_models_do_not_count_against_the_budget() -> None:
    cache, _, load = make(budget=100)
    cache.get("pipeline", lambda: load("pipeline"))
    cache.get("weights", lambda: load("weights"), size=100)
    assert cache.keys() == {"pipeline", "weights"}


def test_idle_models_unload_after_idle_seconds() -> None:
    cache, clock, load = make(idle=600)
    a = cache.get("a", lambda: load("a"))
    clock.now += 300
    b = cache.get("b", lambda: load("b"))
    assert cache.evict_idle() == []
    clock.now += 300  # a unused for 600 s, b for 300 s
    assert cache.evict_idle() == ["a"]
    assert a.closed == 1 and b.closed == 0 and cache.keys() == {"b"}
    again = cache.get("a", lambda: load("a"))
    assert again is not a and again.generation == 1


def test_idle_unloading_spares_models_in_use_and_counts_from_their_last_use() -> None:
    cache, clock, load = make(idle=60)
    with cache.lease("a", lambda: load("a")) as a:
        clock.now += 3600
        assert cache.evict_idle() == [] and a.closed == 0
    clock.now += 59
    assert cache.evict_idle() == []
    clock.now += 1
    assert cache.evict_idle() == ["a"] and a.closed == 1


def test_no_idle_unloading_when_idle_seconds_is_zero() -> None:
    cache, clock, load = make(idle=0)
    cache.get("a", lambda: load("a"))
    clock.now += 10**9
    assert cache.evict_idle() == [] and cache.keys() == {"a"}


def test_forget_closes_now_or_when_the_last_lease_ends() -> None:
    cache, _, load = make()
    a = cache.get("a", lambda: load("a"))
    assert cache.forget("a") and a.closed == 1 and not cache.forget("a")
    with cache.lease("b", lambda: load("b")) as b:
        with cache.lease("b", lambda: load("b")) as same:
            assert same is b
            cache.forget("b")
            assert b.closed == 0 and "b" not in cache
            fresh = cache.get("b", lambda: load("b"))  # new calls load afresh at once
            assert fresh is not b
        assert b.closed == 0  # one lease still holds it
    assert b.closed == 1 and fresh.closed == 0


def test_another_identity_reloads() -> None:
    cache, _, load = make()
    old = cache.get("a", lambda: load("a"), identity=("inode", 1))
    assert cache.get("a", lambda: load("a"), identity=("inode", 1)) is old
    new = cache.get("a", lambda: load("a"), identity=("inode", 2))
    assert new is not old and old.closed == 1 and new.generation == 1


def test_forget_changed_drops_what_was_removed_or_replaced() -> None:
    cache, _, load = make()
    kept = cache.get("kept", lambda: load("kept"), identity=1)
    replaced = cache.get("replaced", lambda: load("replaced"), identity=1)
    removed = cache.get("removed", lambda: load("removed"), identity=1)
    gone = cache.forget_changed({"kept": 1, "replaced": 2})
    assert sorted(gone) == ["removed", "replaced"]
    assert (kept.closed, replaced.closed, removed.closed) == (0, 1, 1)
    assert cache.keys() == {"kept"}


def test_close_closes_everything_and_the_cache_can_load_again() -> None:
    cache, _, load = make()
    a = cache.get("a", lambda: load("a"))
    cache.close()
    assert a.closed == 1 and cache.keys() == set()
    assert cache.get("a", lambda: load("a")) is not a


def test_a_failing_close_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    class Stubborn(Model):
        def close(self) -> None:
            raise OSError("busy")

    cache, _, _ = make()
    cache.get("a", lambda: Stubborn("a"))
    assert cache.forget("a")
    assert "closing model a failed" in caplog.text


def test_the_reaper_thread_unloads_idle_models() -> None:
    # A real reaper thread on an injected clock: the clock says a day has passed, the thread's next
    # round (every 10 ms) unloads; the test waits on the model's close, not on a duration.
    clock = Clock()
    closed = threading.Event()

    class Watched(Model):
        def close(self) -> None:
            closed.set()

    cache: ModelCache[Model] = ModelCache(idle_seconds=60, clock=clock, reap_every=0.01)
    cache.get("a", lambda: Watched("a"))
    clock.now += 86400
    assert closed.wait(30)
    cache.close()
