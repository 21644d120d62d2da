"""Probes kept fresh: an answer is computed again when its stamp changes, when it is stale, or on request."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from dragoman.probes import Refreshing, mtime, run_program


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Counter:
    """A computation that counts its calls and answers with the count."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.calls


def test_the_answer_is_kept_until_it_is_older_than_the_ttl() -> None:
    clock, compute = Clock(), Counter()
    probe = Refreshing(compute, ttl=60, clock=clock)
    assert probe.get() == 1 and probe.get() == 1
    clock.now += 59.9
    assert probe.get() == 1
    clock.now += 0.1
    assert probe.get() == 2 and compute.calls == 2


def test_a_changed_stamp_computes_again_at_once() -> None:
    clock, compute = Clock(), Counter()
    world = {"mtime": 1}
    probe = Refreshing(compute, stamp=lambda value: world["mtime"], ttl=3600, clock=clock)
    assert probe.get() == 1 and probe.get() == 1
    world["mtime"] = 2  # a package installed
    assert probe.get() == 2 and probe.get() == 2 and compute.calls == 2


def test_the_stamp_sees_the_kept_answer() -> None:
    seen: list[object] = []

    def stamp(value: int) -> int:
        seen.append(value)
        return 0

    probe = Refreshing(Counter(), stamp=stamp, clock=Clock())
    probe.get()
    probe.get()
    assert seen and set(seen) == {1}


def test_refresh_forgets_the_answer() -> None:
    compute = Counter()
    probe = Refreshing(compute, clock=Clock())
    assert probe.get() == 1
    probe.refresh()
    assert probe.get() == 2


def test_a_failure_is_not_kept() -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("not yet")
        return "ok"

    probe = Refreshing(flaky, clock=Clock())
    with pytest.raises(OSError):
        probe.get()
    assert probe.get() == "ok" and probe.get() == "ok" and len(calls) == 2


def test_concurrent_callers_share_one_computation() -> None:
    entered, release = threading.Event(), threading.Event()
    compute = Counter()

    def slow() -> int:
        entered.set()
        assert release.wait(10)
        return compute()

    probe = Refreshing(slow, clock=Clock())
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(probe.get())) for _ in range(4)]
    threads[0].start()
    assert entered.wait(10)
    for thread in threads[1:]:
        thread.start()
    release.set()
    for thread in threads:
        thread.join(10)
    assert results == [1, 1, 1, 1] and compute.calls == 1


def test_mtime_and_run_program(tmp_path: Path) -> None:
    path = tmp_path / "f"
    assert mtime(path) is None and mtime(None) is None
    path.write_text("x")
    os.utime(path, ns=(5, 123_456_789))
    assert mtime(path) == 123_456_789
    done = run_program(sys.executable, "-c", "import os; print(os.environ['PROBE'])", env={"PROBE": "yes"})
    assert done is not None and done.returncode == 0 and done.stdout.strip() == "yes"
    assert run_program(str(tmp_path / "no-such-program")) is None
    assert run_program(sys.executable, "-c", "import time; time.sleep(30)", timeout=0.2) is None
