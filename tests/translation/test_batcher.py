"""The dynamic batcher: concurrent callers merged into one backend call, each getting exactly its own."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support import wait_until

from dragoman.errors import BackendError, Cancelled, EngineTimeout, Saturated
from dragoman.limits import APERTIUM_BATCH_SEGMENTS
from dragoman.progress import CancelToken, JobContext
from dragoman.settings import Settings
from dragoman.translation import batcher as batcher_module
from dragoman.translation.backends.apertium import ApertiumBackend
from dragoman.translation.backends.base import joined
from dragoman.translation.backends.ctranslate2_backend import CTranslate2Backend
from dragoman.translation.batcher import Batcher, BatchLimits, coalesces
from dragoman.translation.engine import Engine
from dragoman.translation.types import BatchOutput, Pieces, TranslateOptions


class FakeBackend:
    """Records every call; the first call waits on ``gate`` (when given) so that others queue behind it.
    A segment starting with 'bad' fails its whole call; each '?' is one unknown word in the notes."""

    coalesces = True

    def __init__(self, *, gate: threading.Event | None = None, parallel_calls: int = 1) -> None:
        self.pack_id = "fake"
        self.parallel_calls = parallel_calls
        self.gate = gate
        self.calls: list[tuple[str, ...]] = []
        self.lock = threading.Lock()
        self.entered = threading.Event()

    def translate_batch(self, batch: Sequence[Pieces], source: str, target: str) -> BatchOutput:
        texts = tuple(joined(p) for p in batch)
        with self.lock:
            self.calls.append(texts)
            first = len(self.calls) == 1
        self.entered.set()
        if first and self.gate is not None:
            assert self.gate.wait(10)
        if any(t.startswith("bad") for t in texts):
            raise BackendError(f"cannot translate {texts}")
        unknown = sum(t.count("?") for t in texts)
        return BatchOutput(tuple(f"<{t}>" for t in texts), {"unknown_words": unknown} if unknown else {})

    def close(self) -> None:
        return None


def segs(*texts: str) -> list[Pieces]:
    return [(t,) for t in texts]


class Caller(threading.Thread):
    """One caller of ``batcher.translate`` on its own thread; keeps its answer or its error."""

    def __init__(
        self, batcher: Batcher, backend: FakeBackend, texts: Sequence[str], context: JobContext | None = None
    ) -> None:
        super().__init__(daemon=True)
        self.batcher, self.backend, self.texts, self.context = batcher, backend, texts, context
        self.answer: BatchOutput | None = None
        self.error: BaseException | None = None
        self.ended: float | None = None  # when its call returned or raised (time.monotonic)

    def run(self) -> None:
        try:
            self.answer = self.batcher.translate(self.backend, segs(*self.texts), "en", "es", self.context)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            self.error = exc
        finally:
            self.ended = time.monotonic()


@pytest.fixture
def gated() -> Iterator[tuple[Batcher, FakeBackend, threading.Event]]:
    """A batcher whose first backend call holds the lane until the gate opens."""
    gate = threading.Event()
    backend = FakeBackend(gate=gate)
    yield Batcher(BatchLimits(window=0)), backend, gate
    gate.set()


def start_behind_blocker(batcher: Batcher, backend: FakeBackend, callers: list[Caller]) -> Caller:
    """Start a blocker (its call holds the lane), then ``callers`` one by one, each queued in order."""
    blocker = Caller(batcher, backend, ["blocker"])
    blocker.start()
    assert backend.entered.wait(10)
    for n, caller in enumerate(callers, start=1):
        caller.start()
        wait_until(lambda n=n: batcher.stats()["waiting_callers"] == n)  # type: ignore[misc]
    return blocker


def test_an_idle_lane_calls_the_backend_at_once_with_the_callers_segments() -> None:
    backend = FakeBackend()
    batcher = Batcher()
    out = batcher.translate(backend, segs("a", "b"), "en", "es")
    assert out.texts == ("<a>", "<b>") and out.notes == {}
    assert backend.calls == [("a", "b")]
    stats = batcher.stats()
    assert stats["batches"] == 1 and stats["mean_batch_size"] == 2 and stats["queue_depth"] == 0


def test_backends_that_gain_nothing_are_called_directly() -> None:
    assert coalesces(FakeBackend()) and CTranslate2Backend.coalesces is True
    # Apertium gains too: its one pipeline serves one call at a time, and a call's round trip costs
    # little more for eight segments than for one.
    assert ApertiumBackend.coalesces is True and ApertiumBackend.parallel_calls == 1
    assert not coalesces(object())  # type: ignore[arg-type]

    class Plain(FakeBackend):
        coalesces = False

    backend = Plain()
    batcher = Batcher()
    assert batcher.translate(backend, segs("a"), "en", "es").texts == ("<a>",)
    assert batcher.stats()["batches"] == 0  # not through the queue
    off = Batcher(enabled=False)
    assert off.translate(FakeBackend(), segs("a"), "en", "es").texts == ("<a>",)
    assert off.stats()["batches"] == 0 and off.stats()["enabled"] is False


def test_callers_arriving_while_a_batch_runs_are_merged_into_one_call(
    gated: tuple[Batcher, FakeBackend, threading.Event],
) -> None:
    batcher, backend, gate = gated
    callers = [Caller(batcher, backend, [f"t{n}a", f"t{n}b"][: 1 + n % 2]) for n in range(5)]
    blocker = start_behind_blocker(batcher, backend, callers)
    assert batcher.stats()["queue_depth"] == sum(len(c.texts) for c in callers)
    gate.set()
    for caller in [blocker, *callers]:
        caller.join(10)
        assert caller.error is None and caller.answer is not None
        assert caller.answer.texts == tuple(f"<{t}>" for t in caller.texts)  # its own, in order
    assert len(backend.calls) == 2  # the blocker's call, then one for all five callers
    assert sorted(backend.calls[1]) == sorted(t for c in callers for t in c.texts)
    stats = batcher.stats()
    assert stats["batches"] == 2 and stats["merged_batches"] == 1 and stats["queue_depth"] == 0
    assert stats["mean_batch_size"] == (1 + len(backend.calls[1])) / 2


def test_a_big_caller_does_not_starve_single_text_callers() -> None:
    gate = threading.Event()
    backend = FakeBackend(gate=gate)
    batcher = Batcher(BatchLimits(max_segments=8, window=0))
    big = Caller(batcher, backend, [f"big{n}" for n in range(40)])
    singles = [Caller(batcher, backend, [f"one{n}"]) for n in range(3)]
    blocker = start_behind_blocker(batcher, backend, [big, *singles])
    gate.set()
    for caller in [blocker, big, *singles]:
        caller.join(10)
        assert caller.error is None and caller.answer is not None
        assert caller.answer.texts == tuple(f"<{t}>" for t in caller.texts)
    assert all(len(call) <= 8 for call in backend.calls)
    # Round-robin: the first batch after the blocker holds every single-text caller, not 8 of big's 40.
    assert {"one0", "one1", "one2"} <= set(backend.calls[1])
    assert len(backend.calls) == 1 + 6  # 43 segments in batches of at most 8


def test_the_character_budget_bounds_a_call_but_a_long_segment_goes_alone(
    gated: tuple[Batcher, FakeBackend, threading.Event],
) -> None:
    _, backend, gate = gated
    batcher = Batcher(BatchLimits(max_chars=10, window=0))
    callers = [Caller(batcher, backend, ["x" * 25]), Caller(batcher, backend, ["abcd", "efgh", "ijkl"])]
    blocker = start_behind_blocker(batcher, backend, callers)
    gate.set()
    for caller in [blocker, *callers]:
        caller.join(10)
        assert caller.error is None
    for call in backend.calls[1:]:
        assert len(call) == 1 or sum(map(len, call)) <= 10


def test_a_failing_caller_gets_the_error_and_the_others_their_translations(
    gated: tuple[Batcher, FakeBackend, threading.Event],
) -> None:
    batcher, backend, gate = gated
    good = [Caller(batcher, backend, ["fine", "also fine"]), Caller(batcher, backend, ["ok"])]
    bad = Caller(batcher, backend, ["this one", "bad one"])
    blocker = start_behind_blocker(batcher, backend, [good[0], bad, good[1]])
    gate.set()
    for caller in [blocker, bad, *good]:
        caller.join(10)
    assert isinstance(bad.error, BackendError) and bad.answer is None
    for caller in good:
        assert caller.error is None and caller.answer is not None
        assert caller.answer.texts == tuple(f"<{t}>" for t in caller.texts)
    assert batcher.stats()["reruns"] == 3


def test_each_caller_gets_its_own_notes(gated: tuple[Batcher, FakeBackend, threading.Event]) -> None:
    batcher, backend, gate = gated
    callers = [Caller(batcher, backend, ["a?", "b??"]), Caller(batcher, backend, ["c"])]
    callers.append(Caller(batcher, backend, ["d?"]))
    blocker = start_behind_blocker(batcher, backend, callers)
    gate.set()
    for caller in [blocker, *callers]:
        caller.join(10)
    notes = [c.answer.notes if c.answer else None for c in callers]
    assert notes == [{"unknown_words": 3}, {}, {"unknown_words": 1}]


def test_a_backend_may_set_its_own_segments_per_call() -> None:
    # Apertium's stream gains per segment up to a whole engine chunk: its lane takes 256 segments a call
    # where a model's takes the setting's 64. The character budget still applies to both.
    assert ApertiumBackend.batch_segments == APERTIUM_BATCH_SEGMENTS > BatchLimits().max_segments

    class Stream(FakeBackend):
        batch_segments = 4

    texts = [f"s{n}" for n in range(10)]
    for backend, sizes in ((FakeBackend(), [3, 3, 3, 1]), (Stream(), [4, 4, 2])):
        batcher = Batcher(BatchLimits(max_segments=3))
        assert batcher.translate(backend, segs(*texts), "en", "es").texts == tuple(f"<{t}>" for t in texts)
        assert [len(call) for call in backend.calls] == sizes
    limited = Stream()
    Batcher(BatchLimits(max_segments=3, max_chars=5)).translate(limited, segs(*texts), "en", "es")
    assert [len(call) for call in limited.calls] == [2, 2, 2, 2, 2]


class SegmentNotesBackend(FakeBackend):
    """Reports its notes segment by segment too (as Apertium does); ``skew`` makes them not add up."""

    def __init__(self, *, gate: threading.Event | None = None, skew: int = 0) -> None:
        super().__init__(gate=gate)
        self.skew = skew

    def translate_batch(self, batch: Sequence[Pieces], source: str, target: str) -> BatchOutput:
        out = super().translate_batch(batch, source, target)
        each = tuple({"unknown_words": n} if (n := joined(p).count("?")) else {} for p in batch)
        notes = {"unknown_words": out.notes.get("unknown_words", 0) + self.skew}
        return BatchOutput(out.texts, {k: v for k, v in notes.items() if v}, each)


@pytest.mark.parametrize("skew", [0, 1])
def test_segment_notes_are_split_between_callers_without_a_second_call(skew: int) -> None:
    # Notes told segment by segment go to the callers whose segments they belong to, in the one merged
    # call; notes whose parts do not add up to the total cannot be trusted: each part is run again.
    gate = threading.Event()
    backend = SegmentNotesBackend(gate=gate, skew=skew)
    batcher = Batcher(BatchLimits(window=0))
    callers = [Caller(batcher, backend, ["a?", "b??"]), Caller(batcher, backend, ["c"])]
    callers.append(Caller(batcher, backend, ["d?", "e"]))
    blocker = start_behind_blocker(batcher, backend, callers)
    gate.set()
    for caller in [blocker, *callers]:
        caller.join(10)
        assert caller.error is None and caller.answer is not None
    assert [c.answer.texts for c in callers if c.answer] == [("<a?>", "<b??>"), ("<c>",), ("<d?>", "<e>")]
    if skew:
        assert batcher.stats()["reruns"] == 3 and len(backend.calls) == 5
        assert [c.answer.notes for c in callers if c.answer] == [
            {"unknown_words": 4},
            {"unknown_words": 1},
            {"unknown_words": 2},
        ]  # each part's own (skewed) count, from its own call
    else:
        assert batcher.stats()["reruns"] == 0 and len(backend.calls) == 2
        assert [c.answer.notes for c in callers if c.answer] == [
            {"unknown_words": 3},
            {},
            {"unknown_words": 1},
        ]


class OddSegmentNotes(FakeBackend):
    """Segment notes with zero counts (``zeros``), or one too few (``short``): as a careless backend's."""

    def __init__(self, *, gate: threading.Event, odd: str) -> None:
        super().__init__(gate=gate)
        self.odd = odd

    def translate_batch(self, batch: Sequence[Pieces], source: str, target: str) -> BatchOutput:
        out = super().translate_batch(batch, source, target)
        each = tuple({"unknown_words": joined(p).count("?")} for p in batch)
        return BatchOutput(out.texts, out.notes, each if self.odd == "zeros" else each[:-1])


@pytest.mark.parametrize("odd", ["zeros", "short"])
@pytest.mark.parametrize("unknown", [True, False])
def test_odd_segment_notes_never_mix_callers_notes(odd: str, unknown: bool) -> None:
    # Zero counts are no notes: split as they are. Notes of the wrong length cannot be told apart: each
    # part is run again when there are notes, and no caller gets notes when there are none.
    gate = threading.Event()
    backend = OddSegmentNotes(gate=gate, odd=odd)
    batcher = Batcher(BatchLimits(window=0))
    first = ["a?", "b"] if unknown else ["a", "b"]
    callers = [Caller(batcher, backend, first), Caller(batcher, backend, ["c"])]
    blocker = start_behind_blocker(batcher, backend, callers)
    gate.set()
    for caller in [blocker, *callers]:
        caller.join(10)
        assert caller.error is None and caller.answer is not None
    notes = [c.answer.notes if c.answer else None for c in callers]
    assert notes == ([{"unknown_words": 1}, {}] if unknown else [{}, {}])
    assert batcher.stats()["reruns"] == (2 if unknown and odd == "short" else 0)


@pytest.mark.parametrize("stop", ["cancel", "deadline"])
def test_a_queued_caller_leaves_the_queue_when_cancelled_or_late(
    gated: tuple[Batcher, FakeBackend, threading.Event], stop: str
) -> None:
    batcher, backend, gate = gated
    context = JobContext.of(timeout=1.0 if stop == "deadline" else None)
    quitter = Caller(batcher, backend, ["never", "sent"], context)
    stayer = Caller(batcher, backend, ["stays"])
    blocker = start_behind_blocker(batcher, backend, [quitter, stayer])
    if stop == "cancel":
        context.cancel.cancel("the client went away")
    quitter.join(5)
    assert not quitter.is_alive()  # out while the lane is still held by the blocker
    assert isinstance(quitter.error, Cancelled if stop == "cancel" else EngineTimeout)
    assert batcher.stats()["queue_depth"] == 1 and batcher.stats()["waiting_callers"] == 1
    gate.set()
    for caller in [blocker, stayer]:
        caller.join(10)
        assert caller.error is None
    assert all("never" not in call and "sent" not in call for call in backend.calls)
    assert batcher.stats()["queue_depth"] == 0


@dataclass(frozen=True)
class CountingContext(JobContext):
    """A job context that records each time the work checks it (each time a queued caller wakes)."""

    checks: list[float] = field(default_factory=list)

    def check(self) -> None:
        self.checks.append(time.monotonic())
        super().check()


def test_a_queued_caller_sleeps_until_its_cancel_wakes_it(
    gated: tuple[Batcher, FakeBackend, threading.Event],
) -> None:
    """No polling: while queued, a caller checks its context once, then only when woken. The old code woke
    every 50 ms to check (about 10 checks in the half second below)."""
    batcher, backend, gate = gated
    quitting, staying = CountingContext(), CountingContext()
    quitter = Caller(batcher, backend, ["never"], quitting)
    stayer = Caller(batcher, backend, ["stays"], staying)
    blocker = start_behind_blocker(batcher, backend, [quitter, stayer])
    time.sleep(0.5)
    assert len(quitting.checks) == 1 and len(staying.checks) == 1  # checked once on entering the wait
    cancelled = time.monotonic()
    quitting.cancel.cancel("the client went away")
    quitter.join(5)
    assert not quitter.is_alive() and isinstance(quitter.error, Cancelled)
    assert len(quitting.checks) == 2 and quitting.checks[1] - cancelled < 1.0  # woken by the cancel itself
    assert len(staying.checks) == 1  # another caller's cancel does not wake it
    assert batcher.stats()["waiting_callers"] == 1
    gate.set()
    for caller in [blocker, stayer]:
        caller.join(10)
        assert caller.error is None
    assert stayer.answer == BatchOutput(("<stays>",))
    assert all("never" not in call for call in backend.calls)


def test_a_queued_caller_is_woken_by_its_deadline_not_before(
    gated: tuple[Batcher, FakeBackend, threading.Event],
) -> None:
    batcher, backend, gate = gated
    context = CountingContext(deadline=time.monotonic() + 0.6)
    late = Caller(batcher, backend, ["late"], context)
    blocker = start_behind_blocker(batcher, backend, [late])
    late.join(5)
    assert not late.is_alive() and isinstance(late.error, EngineTimeout)
    assert context.deadline is not None and context.checks[-1] >= context.deadline
    assert len(context.checks) <= 3  # on entering, at the deadline (and one more if woken a hair early)
    gate.set()
    blocker.join(10)
    assert blocker.error is None and batcher.stats()["queue_depth"] == 0


class ReadOnlyToken(CancelToken):
    """A token that learns of cancellation from elsewhere, like MCP's (read on the caller's thread): its
    ``cancel`` is never called, so it cannot wake anyone and must be polled."""

    __slots__ = ("flag",)

    def __init__(self) -> None:
        super().__init__()
        self.flag = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self.flag.is_set() or super().cancelled


def test_a_token_that_cannot_wake_its_caller_is_still_polled(
    gated: tuple[Batcher, FakeBackend, threading.Event],
) -> None:
    batcher, backend, gate = gated
    token = ReadOnlyToken()
    assert not token.wakes and CancelToken().wakes
    quitter = Caller(batcher, backend, ["never"], JobContext(cancel=token))
    blocker = start_behind_blocker(batcher, backend, [quitter])
    token.flag.set()
    quitter.join(5)
    assert not quitter.is_alive() and isinstance(quitter.error, Cancelled)
    assert batcher.stats()["queue_depth"] == 0
    gate.set()
    blocker.join(10)
    assert blocker.error is None


def test_limits_come_from_the_engine_settings() -> None:
    settings = Settings.from_env(
        {
            "DRAGOMAN_BATCH_MAX_SEGMENTS": "5",
            "DRAGOMAN_BATCH_MAX_CHARS": "900",
            "DRAGOMAN_BATCH_MAX_QUEUED": "40",
            "DRAGOMAN_BATCH_WINDOW_MS": "2.5",
        }
    )
    limits = BatchLimits.of(settings.engine)
    assert limits == BatchLimits(max_segments=5, max_chars=900, window=0.0025, max_queued=40)
    stats = Batcher(limits).stats()
    assert (stats["max_segments"], stats["max_chars"], stats["max_queued"], stats["window_ms"]) == (
        5,
        900,
        40,
        2.5,
    )
    assert BatchLimits.of(Settings().engine) == BatchLimits()


def test_a_full_queue_refuses_with_saturated(gated: tuple[Batcher, FakeBackend, threading.Event]) -> None:
    _, backend, gate = gated
    batcher = Batcher(BatchLimits(max_queued=4, window=0))
    waiting = Caller(batcher, backend, ["a", "b", "c"])
    blocker = start_behind_blocker(batcher, backend, [waiting])
    with pytest.raises(Saturated) as refused:
        batcher.translate(backend, segs("d", "e"), "en", "es")
    assert refused.value.retry_after >= 1
    gate.set()
    for caller in [blocker, waiting]:
        caller.join(10)
        assert caller.error is None


def test_parallel_calls_keep_that_many_batches_running() -> None:
    release = threading.Event()
    running: list[int] = []
    now = [0]
    lock = threading.Lock()

    class Slow(FakeBackend):
        def translate_batch(self, batch: Sequence[Pieces], source: str, target: str) -> BatchOutput:
            with lock:
                now[0] += 1
                running.append(now[0])
            assert release.wait(10)
            with lock:
                now[0] -= 1
            return super().translate_batch(batch, source, target)

    backend = Slow(parallel_calls=2)
    batcher = Batcher(BatchLimits(window=0))
    callers = [Caller(batcher, backend, [f"t{n}"]) for n in range(6)]
    for caller in callers:
        caller.start()
    wait_until(lambda: len(running) == 2 and batcher.stats()["waiting_callers"] == 4)
    assert max(running) == 2
    release.set()
    for caller in callers:
        caller.join(10)
        assert caller.error is None and caller.answer is not None
        assert caller.answer.texts == (f"<{caller.texts[0]}>",)
    assert max(running) <= 2


# ----- through the engine -------------------------------------------------------------------------
@pytest.fixture
def engine(packs_dir: Path, tiny_argos_pack: Path) -> Iterator[Engine]:
    import shutil

    shutil.copytree(tiny_argos_pack, packs_dir / "translate-en_es")
    settings = Settings.from_env({"DRAGOMAN_PACKS_DIR": str(packs_dir), "DRAGOMAN_APERTIUM": "0"})
    with Engine(settings) as eng:
        yield eng


def test_concurrent_engine_callers_get_their_own_translations(engine: Engine) -> None:
    options = TranslateOptions("es", "en")
    texts = [f"The house number {n} is red." for n in range(12)]
    alone = {t: engine.translate(t, options).translation for t in texts}
    results: dict[str, Any] = {}
    barrier = threading.Barrier(len(texts))

    def one(text: str) -> None:
        barrier.wait(10)
        results[text] = engine.translate(text, options).translation

    threads = [threading.Thread(target=one, args=(t,)) for t in texts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == alone
    status = engine.status()["batching"]
    assert status["batches"] >= 2 and status["segments"] == 2 * len(texts) and status["queue_depth"] == 0


# ----- the adaptive window ------------------------------------------------------------------------------
class Timed(FakeBackend):
    """Each call takes ``seconds``."""

    def __init__(self, seconds: float, parallel_calls: int) -> None:
        super().__init__(parallel_calls=parallel_calls)
        self.seconds = seconds

    def translate_batch(self, batch: Sequence[Pieces], source: str, target: str) -> BatchOutput:
        answer = super().translate_batch(batch, source, target)  # recorded at once
        time.sleep(self.seconds)
        return answer


def test_a_busy_lane_waits_a_share_of_its_call_time_for_callers_to_meet() -> None:
    backend = Timed(1.0, parallel_calls=2)
    batcher = Batcher(BatchLimits(window=5.0))
    alone = Caller(batcher, backend, ["warm"])  # an idle lane: no wait, and the call time is learnt (1 s)
    alone.start()
    alone.join(10)
    assert batcher.stats()["waited_seconds"] == 0
    first = Caller(batcher, backend, ["a"])
    first.start()
    wait_until(lambda: batcher.stats()["running_batches"] == 1 and len(backend.calls) == 2)
    second = Caller(batcher, backend, ["b"])  # the lane is busy: it waits up to 0.25 s for company
    second.start()
    wait_until(lambda: batcher.stats()["running_batches"] == 2 and batcher.stats()["queue_depth"] == 1)
    third = Caller(batcher, backend, ["c"])
    third.start()
    for caller in (first, second, third):
        caller.join(10)
        assert caller.error is None and caller.answer == BatchOutput((f"<{caller.texts[0]}>",))
    assert backend.calls == [("warm",), ("a",), ("b", "c")]  # the third met the second in its batch
    assert 0 < batcher.stats()["waited_seconds"] < 5.0


def test_the_window_is_bounded_by_the_limit() -> None:
    backend = Timed(0.2, parallel_calls=2)
    batcher = Batcher(BatchLimits(window=0))  # no window at all: each caller of a busy lane goes alone
    warm = Caller(batcher, backend, ["warm"])
    warm.start()
    warm.join(10)
    first = Caller(batcher, backend, ["a"])
    first.start()
    wait_until(lambda: len(backend.calls) == 2)
    second = Caller(batcher, backend, ["b"])
    second.start()
    wait_until(lambda: len(backend.calls) == 3)
    for caller in (first, second):
        caller.join(10)
    assert backend.calls == [("warm",), ("a",), ("b",)] and batcher.stats()["waited_seconds"] == 0


class Held(Timed):
    """Each call takes ``seconds``; a call holding a text that starts with 'hold' also waits for ``gate``.
    Records the most calls running at once."""

    def __init__(self, seconds: float, parallel_calls: int, gate: threading.Event) -> None:
        super().__init__(seconds, parallel_calls)
        self.hold = gate
        self.now = 0
        self.most = 0

    def translate_batch(self, batch: Sequence[Pieces], source: str, target: str) -> BatchOutput:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            answer = super().translate_batch(batch, source, target)  # recorded at once
            if any(joined(p).startswith("hold") for p in batch):
                assert self.hold.wait(30)
            return answer
        finally:
            with self.lock:
                self.now -= 1


@pytest.mark.parametrize("stop", ["cancel", "deadline", "polled"])
def test_a_leader_stopped_while_its_batch_fills_leaves_at_once_and_hands_its_slot_on(
    monkeypatch: pytest.MonkeyPatch, stop: str
) -> None:
    """The leader of a busy lane waits a window for company (here 10 s). Its cancel (or its deadline, or a
    cancel its token can only be polled for) ends the wait at once: it leaves without running a batch, and
    its slot goes to the caller queued behind it, which leads the next batch. The old code waited out the
    whole window, then ran the batch as if nothing had happened."""
    monkeypatch.setattr(batcher_module, "WINDOW_SHARE", 100.0)  # 100 x the 0.2 s call, at most 10 s
    gate = threading.Event()
    backend = Held(0.2, parallel_calls=2, gate=gate)
    batcher = Batcher(BatchLimits(window=10.0))
    try:
        warm = Caller(batcher, backend, ["warm"])  # an idle lane: no wait; the call time is learnt
        warm.start()
        warm.join(10)
        assert warm.answer is not None
        blocker = Caller(batcher, backend, ["hold"])  # holds one of the two slots until the gate opens
        blocker.start()
        wait_until(lambda: len(backend.calls) == 2)
        token = ReadOnlyToken() if stop == "polled" else CancelToken()
        context = JobContext(cancel=token, deadline=time.monotonic() + 4.0 if stop == "deadline" else None)
        started = time.monotonic()
        leader = Caller(batcher, backend, ["b"], context)  # the last slot of a busy lane: waits its window
        leader.start()
        wait_until(lambda: batcher.stats()["running_batches"] == 2 and batcher.stats()["queue_depth"] == 1)
        follower = Caller(batcher, backend, ["c"])  # queued behind the leader, to meet it in its batch
        follower.start()
        wait_until(lambda: batcher.stats()["queue_depth"] == 2)
        assert leader.is_alive()
        monkeypatch.setattr(batcher_module, "WINDOW_SHARE", 0.25)  # the follower's own window: 0.05 s
        stopped = time.monotonic()
        if stop == "cancel":
            token.cancel("the client went away")
        elif stop == "polled":
            assert isinstance(token, ReadOnlyToken)
            token.flag.set()
        leader.join(15)
        assert leader.ended is not None
        if stop == "deadline":
            assert isinstance(leader.error, EngineTimeout)
            assert leader.ended - started < 8.0  # its deadline (4 s), not the 10 s window
        else:
            assert isinstance(leader.error, Cancelled)
            assert leader.ended - stopped < 1.0  # at once, not after the 10 s window
        follower.join(10)  # led the next batch on the slot the leader gave up, the blocker still running
        assert follower.answer == BatchOutput(("<c>",)) and blocker.is_alive()
        assert backend.calls == [("warm",), ("hold",), ("c",)]  # the leader's segment was never translated
        gate.set()
        blocker.join(10)
        assert blocker.answer == BatchOutput(("<hold>",))
        stats = batcher.stats()
        assert stats["queue_depth"] == 0 and stats["waiting_callers"] == 0 and stats["running_batches"] == 0
        assert backend.most <= 2  # never more leaders than slots
        after = Caller(batcher, backend, ["d"])  # the lane still works
        after.start()
        after.join(10)
        assert after.answer == BatchOutput(("<d>",))
    finally:
        gate.set()


def test_an_idle_lane_whose_batches_merged_callers_waits_for_them() -> None:
    backend = Timed(1.0, parallel_calls=1)
    batcher = Batcher(BatchLimits(window=5.0))
    callers = [Caller(batcher, backend, [f"t{n}"]) for n in range(6)]
    for caller in callers:  # the first runs at once (idle lane), the five others merge in the next call
        caller.start()
    for caller in callers:
        caller.join(10)
    assert len(backend.calls) == 2 and len(backend.calls[1]) == 5
    assert batcher.stats()["waited_seconds"] == 0
    first = Caller(batcher, backend, ["x"])  # the lane is idle but its callers come together: it waits
    first.start()
    wait_until(lambda: batcher.stats()["running_batches"] == 1 and batcher.stats()["queue_depth"] == 1)
    second = Caller(batcher, backend, ["y"])
    second.start()
    for caller in (first, second):
        caller.join(10)
        assert caller.error is None and caller.answer == BatchOutput((f"<{caller.texts[0]}>",))
    assert backend.calls[2] == ("x", "y") and batcher.stats()["waited_seconds"] > 0


# ----- spreading over the backend's parallel calls ----------------------------------------------------
class Concurrency(FakeBackend):
    """Each call takes ``seconds`` (the GIL released) and the backend records how many calls overlap."""

    def __init__(self, seconds: float, parallel_calls: int) -> None:
        super().__init__(parallel_calls=parallel_calls)
        self.seconds = seconds
        self.now = 0
        self.overlaps: list[int] = []

    def translate_batch(self, batch: Sequence[Pieces], source: str, target: str) -> BatchOutput:
        with self.lock:
            self.now += 1
            self.overlaps.append(self.now)
        time.sleep(self.seconds)
        with self.lock:
            self.now -= 1
        return super().translate_batch(batch, source, target)


def test_callers_are_spread_over_the_backends_parallel_calls() -> None:
    """8 looping single-text callers on a backend of 4 parallel calls keep its calls side by side (small
    batches on every thread), rather than merging into one big batch on one thread while three idle."""
    backend = Concurrency(0.02, parallel_calls=4)
    batcher = Batcher(BatchLimits(window=0.005))
    errors: list[BaseException] = []

    def loop(n: int) -> None:
        try:
            for i in range(25):
                out = batcher.translate(backend, segs(f"c{n}-{i}"), "en", "es")
                assert out.texts == (f"<c{n}-{i}>",)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            errors.append(exc)

    threads = [threading.Thread(target=loop, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    sizes = [len(call) for call in backend.calls]
    assert sum(sizes) == 200
    # Four slots and eight callers: two callers a batch on average, and calls mostly overlapping. Greedy
    # gathering (the first leader takes the whole queue) made batches of 5-8 with one or two calls at once.
    assert sum(sizes) / len(sizes) <= 3.5, sizes
    assert sum(backend.overlaps) / len(backend.overlaps) >= 2.0, backend.overlaps


def test_one_callers_segments_stay_in_one_call_whatever_the_idle_slots() -> None:
    backend = FakeBackend(parallel_calls=4)
    batcher = Batcher()
    texts = [f"t{n}" for n in range(64)]
    out = batcher.translate(backend, segs(*texts), "en", "es")
    assert out.texts == tuple(f"<{t}>" for t in texts)
    assert backend.calls == [tuple(texts)]
