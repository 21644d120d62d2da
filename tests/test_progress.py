"""progress.py: the job context long work is handed (progress, cancellation, deadline), with no framework."""

from __future__ import annotations

import threading
import time

import pytest

from dragoman.errors import Cancelled, EngineTimeout
from dragoman.progress import CancelToken, JobContext


def test_a_fresh_context_reports_nowhere_and_never_stops() -> None:
    context = JobContext()
    context.check()
    context.report(1, 2, "half")  # no callback: nothing happens
    assert not context.cancel.cancelled and context.deadline is None


def test_report_forwards_then_checks() -> None:
    seen: list[tuple[int, int, str]] = []
    context = JobContext.of(lambda done, total, message: seen.append((done, total, message)))
    context.report(3, 10, "working")
    assert seen == [(3, 10, "working")]
    context.cancel.cancel("enough")
    with pytest.raises(Cancelled, match="enough"):
        context.report(4, 10, "working")
    assert seen[-1] == (4, 10, "working")  # forwarded before the check stopped it


def test_cancel_stops_work_at_its_next_chunk() -> None:
    token = CancelToken()
    context = JobContext(cancel=token)
    done: list[int] = []

    def work() -> None:
        for chunk in range(100):
            context.check()
            done.append(chunk)
            if chunk == 2:
                token.cancel("the client went away")  # as another thread would, mid-chunk

    with pytest.raises(Cancelled) as info:
        work()
    assert done == [0, 1, 2]
    assert info.value.message == "the client went away" and info.value.status == 499
    assert token.cancelled and token.reason == "the client went away"


def test_a_token_set_on_another_thread_is_seen() -> None:
    token = CancelToken()
    setter = threading.Thread(target=token.cancel)
    setter.start()
    setter.join()
    with pytest.raises(Cancelled, match="cancelled"):
        JobContext(cancel=token).check()


def test_deadline_raises_engine_timeout() -> None:
    with pytest.raises(EngineTimeout) as info:
        JobContext(deadline=time.monotonic() - 0.001).check()
    assert info.value.status == 504
    JobContext.of(timeout=3600).check()  # far away: goes on
    late = JobContext.of(timeout=-1)
    with pytest.raises(EngineTimeout):
        late.report(1, 1, "done")


def test_cancellation_is_checked_before_the_deadline() -> None:
    context = JobContext(deadline=time.monotonic() - 1)
    context.cancel.cancel("asked to stop")
    with pytest.raises(Cancelled):
        context.check()


def test_of_builds_its_own_token_each_time() -> None:
    first, second = JobContext.of(), JobContext.of()
    first.cancel.cancel()
    second.check()
    assert first.cancel is not second.cancel


def test_on_cancel_wakes_once_at_the_cancel_and_can_be_forgotten() -> None:
    token = CancelToken()
    woken: list[str] = []
    token.on_cancel(lambda: woken.append("a"))
    forget_b = token.on_cancel(lambda: woken.append("b"))
    forget_b()
    assert woken == [] and token.wakes
    canceller = threading.Thread(target=token.cancel, args=("stop",))
    canceller.start()
    canceller.join()
    assert woken == ["a"]
    token.cancel("again")  # a wake-up is called once
    assert woken == ["a"]
    token.on_cancel(lambda: woken.append("late"))  # already cancelled: at once, on this thread
    assert woken == ["a", "late"]


def test_a_failing_wake_up_does_not_fail_the_canceller() -> None:
    token = CancelToken()
    woken: list[int] = []

    def broken() -> None:
        raise RuntimeError("boom")

    token.on_cancel(broken)
    token.on_cancel(lambda: woken.append(1))
    token.cancel()
    assert token.cancelled and woken == [1]
