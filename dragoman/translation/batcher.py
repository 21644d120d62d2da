"""Dynamic batching: concurrent callers' segments for one route are coalesced into one backend call.

A neural backend translates 64 segments in one call about ten times faster than in 64 calls, but each
request to a server brings only a few. The :class:`Batcher` sits between the engine and its backends, per
lane (one loaded backend, one source, one target), the way Triton's dynamic batcher and
text-embeddings-inference's queue sit in front of a model:

- **No dedicated thread (leader/follower).** A caller whose lane is idle becomes the *leader* at once and
  runs its own segments: an idle engine adds no wait. Callers that arrive while the lane's batches run
  (at most ``parallel_calls`` at a time, the backend's own parallelism) queue up; when a batch ends, the
  oldest waiting caller is woken as the next leader and runs whatever is queued, its own and others'.
- **A budget.** A batch holds at most ``max_segments`` segments (or the backend's own ``batch_segments``:
  Apertium's is one engine chunk) and ``max_chars`` characters (but always one segment): a backend call
  cannot be interrupted, so this also bounds how long cancellation waits.
- **A short adaptive window.** A leader that starts while another batch of its lane is running, or whose
  lane's recent batches merged callers (``MERGED_CALLERS`` on average: they come back together), waits
  for the queue to fill its budget, for a share (``WINDOW_SHARE``) of the lane's recent backend call time,
  at most ``window`` seconds: the callers of a batch that just ended come back a few milliseconds apart,
  and a window in proportion to the call lets them meet in the next batch instead of the first one back
  starting a batch of its own (a base-size pack's call is tens to hundreds of milliseconds; a tiny one's,
  one). A lone client's lane never waits.
- **Fairness.** The queue is served round-robin between callers, one segment at a time: one caller's 256
  segments share every batch with the single-text callers that arrived behind them, never starve them.
- **Isolation.** Each caller gets back exactly its own translations in order and its own notes (split by
  segment when the backend reports them so: ``BatchOutput.segment_notes``); when a merged call fails, or
  reports notes that cannot be told apart, each caller's part is run again on its own, so only the caller
  whose segments fail gets the error. A caller waiting in the queue sleeps until
  it is woken: by its results, its error, its designation as leader, its
  :class:`~dragoman.progress.JobContext`'s cancel token (:meth:`~dragoman.progress.CancelToken.on_cancel`)
  or its deadline passing; then it leaves the queue at once if its context stops it. A leader waiting for
  its batch to fill sleeps on the same condition, woken also when segments join the queue: its cancel or
  deadline ends the window at once, and it leaves without running a batch, its slot handed to the oldest
  caller still waiting (which leads the next batch, its own segments and the rest of the queue). No caller
  polls, except one whose token can only be read (MCP's client cancel), every ``CHECK_INTERVAL``.
- **Bounded.** At most ``max_queued`` segments wait per lane; beyond it a caller is refused
  (:class:`~dragoman.errors.Saturated`).

Both kinds of backend gain. A CTranslate2 model's call grows far slower than its batch. An Apertium pair's
one warm pipeline serves one call at a time, and a call's round trip through its dozen stage processes
costs little more for eight segments in one stream than for one (with 8 concurrent callers, merging them
doubles the rate). A backend that gains nothing says so with ``coalesces = False`` (or by not having the
attribute) and is called directly.

**Front doors with a bounded set of engine places** (the daemon's :class:`~dragoman.server._http.EnginePool`
lets ``workers`` requests do engine work at once) would let only that many callers ever meet here. A thread
holding such a place declares it with :func:`holding` (a :class:`Place`); while its caller is inside a
coalescing lane (queued, or running a batch whose concurrency the lane bounds) the place is given up for
another request's CPU work, and taken back before the caller goes on. So a daemon's admitted requests wait
*here*, where they merge, rather than in front of the engine.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from dragoman.errors import BackendError, Saturated
from dragoman.limits import BATCH_MAX_CHARS, BATCH_MAX_QUEUED, BATCH_MAX_SEGMENTS, BATCH_WINDOW_MS
from dragoman.progress import JobContext
from dragoman.settings import EngineSettings
from dragoman.translation.backends.base import Backend
from dragoman.translation.types import BatchOutput, Pieces, Protected, add_notes

#: Segments per coalesced backend call (``DRAGOMAN_BATCH_MAX_SEGMENTS``).
BATCH_SEGMENTS = BATCH_MAX_SEGMENTS
#: Characters per coalesced backend call, but one segment, which may be longer (``DRAGOMAN_BATCH_MAX_CHARS``).
BATCH_CHARS = BATCH_MAX_CHARS
#: The most a leader of a busy lane waits for its batch to fill (seconds); an idle lane never waits.
BATCH_WINDOW = BATCH_WINDOW_MS / 1000
#: The share of the lane's mean backend call time a leader of a busy lane waits (at most the window).
WINDOW_SHARE = 0.25
#: A lane whose batches held this many callers on (moving) average waits its window even when idle: its
#: callers come back together after each batch, a few milliseconds apart. One client never waits.
MERGED_CALLERS = 1.5
#: Weight of the latest call in the lanes' moving means of backend call time and callers per batch.
CALL_TIME_WEIGHT = 0.2
#: Moving means kept (one per lane seen); past it they are all dropped and measured again.
MAX_CALL_TIMES = 256
#: Segments allowed to wait per lane; beyond it a caller gets :class:`~dragoman.errors.Saturated`
#: (``DRAGOMAN_BATCH_MAX_QUEUED``).
MAX_QUEUED_SEGMENTS = BATCH_MAX_QUEUED
#: How often a caller waiting in the queue checks a context whose cancel token cannot wake it (seconds):
#: only a token that learns of cancellation from elsewhere (MCP's client cancel, read on the caller's own
#: thread) is polled. Any other token wakes its waiter the moment it is cancelled, and a deadline wakes it
#: when it passes: no periodic wake-ups (:attr:`~dragoman.progress.CancelToken.wakes`).
CHECK_INTERVAL = 0.05


@dataclass(frozen=True)
class BatchLimits:
    """The batcher's budget: see the module's docstring."""

    max_segments: int = BATCH_SEGMENTS
    max_chars: int = BATCH_CHARS
    window: float = BATCH_WINDOW
    max_queued: int = MAX_QUEUED_SEGMENTS

    def __post_init__(self) -> None:
        if self.max_segments < 1 or self.max_chars < 1 or self.max_queued < 1 or self.window < 0:
            raise ValueError(f"batch limits must be positive: {self}")

    @classmethod
    def of(cls, settings: EngineSettings) -> BatchLimits:
        """The limits the engine's settings name (``DRAGOMAN_BATCH_*``)."""
        return cls(
            max_segments=settings.batch_max_segments,
            max_chars=settings.batch_max_chars,
            window=settings.batch_window_ms / 1000,
            max_queued=settings.batch_max_queued,
        )


class Place(Protocol):
    """A front door's engine place held by the current thread (see the module's docstring)."""

    def leave(self) -> None:
        """Give the place up while the caller waits in (or runs a batch of) a lane; never blocks."""

    def take_back(self) -> None:
        """Take the place again before the caller goes on (may wait for another thread to give one up)."""


_held = threading.local()


@contextmanager
def holding(place: Place) -> Iterator[None]:
    """While inside, the current thread's calls of :meth:`Batcher.translate` give ``place`` up while they
    wait in or run a coalescing lane, and take it back before returning (not when they raise)."""
    previous = getattr(_held, "place", None)
    _held.place = place
    try:
        yield
    finally:
        _held.place = previous


def coalesces(backend: Backend) -> bool:
    """Whether ``backend`` gains from merging callers' segments into one call (its ``coalesces``)."""
    return bool(getattr(backend, "coalesces", False))


def _size(pieces: Pieces) -> int:
    return sum(len(p.source) if isinstance(p, Protected) else len(p) for p in pieces)


class _Request:
    """One caller's segments on their way through a lane."""

    __slots__ = ("busy", "cond", "done", "error", "lead", "next", "notes", "results", "segments")

    def __init__(self, segments: Sequence[Pieces], cond: threading.Condition) -> None:
        self.segments = segments
        self.cond = cond
        self.results: list[str] = [""] * len(segments)
        self.next = 0  # the first segment not yet taken into a batch
        self.done = 0  # segments whose translation has arrived
        self.notes: dict[str, int] = {}
        self.error: BaseException | None = None
        self.lead = False  # designated to run the lane's next batch
        self.busy = False  # its thread is running a batch, not waiting: not to be designated now

    @property
    def pending(self) -> int:
        return len(self.segments) - self.next

    @property
    def finished(self) -> bool:
        return self.error is not None or self.done == len(self.segments)


class _Lane:
    """The queue of one (backend, source, target)."""

    __slots__ = ("budget", "filling", "key", "queue", "queued", "running", "slots", "users")

    def __init__(self, key: tuple[int, str, str], slots: int, budget: int) -> None:
        self.key = key
        self.slots = slots
        self.budget = budget  # segments per call
        self.queue: deque[_Request] = deque()  # requests with segments not yet taken, in round-robin order
        self.queued = 0  # segments not yet taken
        self.running = 0  # batches running or about to (leaders designated)
        self.users = 0  # callers inside the lane
        self.filling: list[_Request] = []  # leaders waiting for their batch to fill: woken as segments join


_Item = tuple[_Request, int]


class Batcher:
    """Coalesces concurrent callers' segments per lane; thread-safe, one per engine. See the module."""

    def __init__(self, limits: BatchLimits | None = None, *, enabled: bool = True) -> None:
        self.limits = limits or BatchLimits()
        self.enabled = enabled
        self._lock = threading.Lock()
        self._lanes: dict[tuple[int, str, str], _Lane] = {}
        self._batches = 0
        self._segments = 0
        self._merged = 0  # batches holding more than one caller's segments
        self._reruns = 0  # callers' parts run again on their own after a merged call failed
        self._waited = 0.0  # seconds leaders spent waiting for their batch to fill
        #: Moving mean of a backend call's seconds, per lane key (kept when the lane empties).
        self._call_seconds: dict[tuple[int, str, str], float] = {}
        #: Moving mean of the callers per batch, per lane key: above MERGED_CALLERS callers come together.
        self._callers: dict[tuple[int, str, str], float] = {}

    # ----- the one entry point ---------------------------------------------------------------------
    def translate(
        self,
        backend: Backend,
        batch: Sequence[Pieces],
        source: str,
        target: str,
        context: JobContext | None = None,
    ) -> BatchOutput:
        """``backend.translate_batch(batch, source, target)``, coalesced with concurrent callers of the same
        lane when the backend gains from it. Raises what the backend raised for this caller's segments,
        :class:`~dragoman.errors.Cancelled` or :class:`~dragoman.errors.EngineTimeout` from ``context``
        while queued, or :class:`~dragoman.errors.Saturated` when the lane's queue is full."""
        if not self.enabled or not batch or not coalesces(backend):
            return backend.translate_batch(batch, source, target)
        key = (id(backend), source, target)  # the caller holds the backend: its id is not reused meanwhile
        slots = max(1, int(getattr(backend, "parallel_calls", 1)))
        budget = max(1, int(getattr(backend, "batch_segments", 0) or self.limits.max_segments))
        with self._lock:
            lane = self._lanes.get(key)
            if lane is None:
                lane = self._lanes[key] = _Lane(key, slots, budget)
            if lane.queued and lane.queued + len(batch) > self.limits.max_queued:
                raise Saturated(
                    f"{lane.queued} segments already wait for {source}->{target}; retry shortly", 1
                )
            request = _Request(batch, threading.Condition(self._lock))
            lane.users += 1
            lane.queue.append(request)
            lane.queued += len(batch)
            for leader in lane.filling:
                leader.cond.notify()
            self._dispatch(lane)
        place: Place | None = getattr(_held, "place", None)
        if place is not None:
            place.leave()
        try:
            self._serve(lane, request, backend, source, target, context)
        finally:
            with self._lock:
                lane.users -= 1
                if lane.users == 0 and self._lanes.get(key) is lane:
                    del self._lanes[key]
        if request.error is not None:
            raise request.error
        if place is not None:
            place.take_back()
        return BatchOutput(tuple(request.results), dict(request.notes))

    def stats(self) -> dict[str, Any]:
        """Batches formed, their mean size, how many merged callers, and what waits now."""
        with self._lock:
            depth = sum(lane.queued for lane in self._lanes.values())
            waiting = sum(len(lane.queue) for lane in self._lanes.values())
            running = sum(lane.running for lane in self._lanes.values())
            batches, segments = self._batches, self._segments
            return {
                "enabled": self.enabled,
                "batches": batches,
                "segments": segments,
                "mean_batch_size": round(segments / batches, 3) if batches else 0.0,
                "merged_batches": self._merged,
                "reruns": self._reruns,
                "queue_depth": depth,
                "waiting_callers": waiting,
                "running_batches": running,
                "max_segments": self.limits.max_segments,
                "max_chars": self.limits.max_chars,
                "max_queued": self.limits.max_queued,
                "window_ms": round(self.limits.window * 1000, 3),
                "waited_seconds": round(self._waited, 3),
            }

    # ----- under the lock ---------------------------------------------------------------------------
    def _dispatch(self, lane: _Lane) -> None:
        """Designate leaders (oldest waiting caller first) while the lane has a free slot and work."""
        while lane.running < lane.slots:
            leader = next((r for r in lane.queue if not (r.lead or r.busy)), None)
            if leader is None:
                return
            leader.lead = True
            lane.running += 1
            leader.cond.notify()

    def _withdraw(self, lane: _Lane, request: _Request, error: BaseException) -> None:
        """Take ``request`` out of the queue (its batches under way finish, their results dropped)."""
        if request.pending:
            lane.queue.remove(request)
            lane.queued -= request.pending
            request.next = len(request.segments)
        if request.lead:
            request.lead = False
            lane.running -= 1
            self._dispatch(lane)
        if request.error is None:
            request.error = error

    def _fill(self, lane: _Lane, leader: _Request, context: JobContext | None, polled: bool) -> None:
        """Wait a moment for the leader's batch to fill when its lane is busy (see the module's docstring).
        Sleeps on the leader's own condition, woken when segments join the queue, by its cancel, or at its
        deadline; raises what its context's check raises when the context stops it meanwhile."""
        limits = self.limits
        window = min(limits.window, WINDOW_SHARE * self._call_seconds.get(lane.key, 0.0))
        idle = lane.slots - lane.running  # slots of the backend no batch uses (this leader holds one)
        # Busy: another batch runs, or the lane's recent batches merged callers (they come back together).
        # A leader waits for its batch to fill only when it holds the lane's last slot: while slots are
        # idle, what is queued is better run now, side by side, than later in one bigger batch.
        busy = lane.running > 1 or self._callers.get(lane.key, 1.0) >= MERGED_CALLERS
        if not (idle == 0 and busy and lane.queued < lane.budget and window > 0):
            return
        started = time.monotonic()  # busy: more callers are coming, wait a moment for them
        end = started + window
        lane.filling.append(leader)
        try:
            while lane.queued < lane.budget:
                if context is not None:
                    context.check()
                left = end - time.monotonic()
                if left <= 0:
                    return
                stop = self._wait_for(context, polled)
                leader.cond.wait(left if stop is None else min(left, stop))
        finally:
            lane.filling.remove(leader)
            self._waited += time.monotonic() - started

    def _gather(self, lane: _Lane) -> list[_Item]:
        """The next batch, taken from the queue round-robin, one segment per caller per turn."""
        limits = self.limits
        idle = lane.slots - lane.running  # slots of the backend no batch uses (this leader holds one)
        # Spread over the slots: the leaders already designated and each idle slot (when a caller waits to
        # lead it) get an even share of the queue (round-robin keeps each share fair), so 8 single-text
        # callers on a 4-thread backend make 4 batches of 2 running side by side, not one batch of 8 on one
        # thread while three threads idle: a batch's time grows with its size (benchmarks/daemon.py --pack
        # base: one text 0.12-0.14 s, 64 in one call 1.2 s, on one thread). Only callers whose threads wait
        # can lead, so one caller's own segments stay in one batch.
        designated = sum(1 for r in lane.queue if r.lead and not r.busy)
        waiting = sum(1 for r in lane.queue if not (r.lead or r.busy))
        helpers = designated + min(idle, waiting)
        share = -(-lane.queued // (helpers + 1)) if helpers > 0 else lane.budget
        cap = max(1, min(lane.budget, share))
        items: list[_Item] = []
        chars = 0
        while lane.queue and len(items) < cap:
            request = lane.queue[0]
            n = _size(request.segments[request.next])
            if items and chars + n > limits.max_chars:
                break
            items.append((request, request.next))
            chars += n
            request.next += 1
            lane.queued -= 1
            if request.pending:
                lane.queue.rotate(-1)
            else:
                lane.queue.popleft()
        if lane.queue and helpers > 0:
            self._dispatch(lane)  # the rest of the queue to leaders of the idle slots
        return items

    def _deliver(
        self, lane: _Lane, parts: dict[_Request, tuple[list[int], BatchOutput | BaseException]]
    ) -> None:
        for request, (indexes, outcome) in parts.items():
            if isinstance(outcome, BaseException):
                if request.pending:
                    lane.queue.remove(request)
                    lane.queued -= request.pending
                    request.next = len(request.segments)
                if request.error is None:
                    request.error = outcome
            else:
                for i, text in zip(indexes, outcome.texts, strict=True):
                    request.results[i] = text
                request.done += len(indexes)
                add_notes(request.notes, outcome.notes)
            if request.finished:
                request.cond.notify()
        lane.running -= 1
        self._dispatch(lane)

    # ----- a caller's life in the lane ----------------------------------------------------------------
    def _serve(
        self,
        lane: _Lane,
        request: _Request,
        backend: Backend,
        source: str,
        target: str,
        context: JobContext | None,
    ) -> None:
        polled = context is not None and not context.cancel.wakes
        forget = _nothing
        if context is not None and not polled:

            def wake() -> None:  # on the cancelling thread: the waiter checks its context at once
                with self._lock:
                    request.cond.notify()

            forget = context.cancel.on_cancel(wake)
        try:
            self._serve_woken(lane, request, backend, source, target, context, polled)
        finally:
            forget()

    def _serve_woken(
        self,
        lane: _Lane,
        request: _Request,
        backend: Backend,
        source: str,
        target: str,
        context: JobContext | None,
        polled: bool,
    ) -> None:
        while True:
            with self._lock:
                while not (request.lead or request.finished):
                    if context is not None:
                        try:
                            context.check()
                        except BaseException as exc:
                            self._withdraw(lane, request, exc)
                            raise
                    # Woken by a notify (results, error, designation, cancel) or by the deadline.
                    request.cond.wait(self._wait_for(context, polled))
                if request.finished:
                    if request.lead:  # finished by others' batches after being designated: pass it on
                        request.lead = False
                        lane.running -= 1
                        self._dispatch(lane)
                    return
                if context is not None:
                    try:
                        context.check()
                    except BaseException as exc:
                        self._withdraw(lane, request, exc)  # hands the slot on
                        raise
                request.lead = False  # this caller runs the next batch; its slot is counted in running
                request.busy = True
                try:
                    self._fill(lane, request, context, polled)
                    items = self._gather(lane)
                except BaseException as exc:  # stopped while its batch filled: leaves, hands its slot on
                    request.busy = False
                    lane.running -= 1
                    self._withdraw(lane, request, exc)  # out of the queue first: not designated again
                    self._dispatch(lane)
                    raise
                if not items:
                    request.busy = False
                    lane.running -= 1
                    self._dispatch(lane)
                    continue
            self._run(lane, request, backend, source, target, items)

    def _run(
        self, lane: _Lane, leader: _Request, backend: Backend, source: str, target: str, items: list[_Item]
    ) -> None:
        """One backend call for ``items``; each caller's part again on its own where the merged call
        failed or reported notes. Delivers under the lock; never leaves a caller waiting forever."""
        owners: dict[_Request, list[int]] = {}
        for request, i in items:
            owners.setdefault(request, []).append(i)
        parts: dict[_Request, tuple[list[int], BatchOutput | BaseException]] = {}
        try:
            texts = [request.segments[i] for request, i in items]
            merged: BatchOutput | BaseException
            called = time.monotonic()
            try:
                merged = _checked(backend.translate_batch(texts, source, target), len(texts))
            except Exception as exc:  # noqa: BLE001 - handed to the caller(s) whose segments failed
                merged = exc
            self._timed(lane.key, time.monotonic() - called, len(owners))
            if len(owners) == 1:
                request, indexes = next(iter(owners.items()))
                parts[request] = (indexes, merged)
            elif isinstance(merged, BaseException) or (each := _notes_by_segment(merged)) is None:
                for request, indexes in owners.items():  # whose segments failed, whose notes are whose
                    try:
                        own = [request.segments[i] for i in indexes]
                        parts[request] = (
                            indexes,
                            _checked(backend.translate_batch(own, source, target), len(own)),
                        )
                    except Exception as exc:  # noqa: BLE001 - this caller's own error
                        parts[request] = (indexes, exc)
                with self._lock:
                    self._reruns += len(owners)
            else:
                texts_of: dict[_Request, list[str]] = {request: [] for request in owners}
                notes_of: dict[_Request, dict[str, int]] = {request: {} for request in owners}
                for (request, _), text, noted in zip(items, merged.texts, each, strict=True):
                    texts_of[request].append(text)
                    add_notes(notes_of[request], {code: n for code, n in noted.items() if n})  # 0: no note
                for request, indexes in owners.items():
                    parts[request] = (indexes, BatchOutput(tuple(texts_of[request]), notes_of[request]))
        except BaseException as exc:  # interrupted: nobody may wait for these segments forever
            for request, indexes in owners.items():
                parts.setdefault(request, (indexes, exc))
            raise
        finally:
            with self._lock:
                self._batches += 1
                self._segments += len(items)
                if len(owners) > 1:
                    self._merged += 1
                leader.busy = False  # back to waiting: it may be designated again
                self._deliver(lane, parts)

    def _timed(self, key: tuple[int, str, str], seconds: float, callers: int) -> None:
        """Fold a backend call's time and callers into its lane's moving means (the window's inputs)."""
        w = CALL_TIME_WEIGHT
        with self._lock:
            if key not in self._call_seconds and len(self._call_seconds) >= MAX_CALL_TIMES:
                self._call_seconds.clear()
                self._callers.clear()
            mean = self._call_seconds.get(key)
            self._call_seconds[key] = seconds if mean is None else (1 - w) * mean + w * seconds
            self._callers[key] = (1 - w) * self._callers.get(key, 1.0) + w * callers

    @staticmethod
    def _wait_for(context: JobContext | None, polled: bool) -> float | None:
        """How long a queued caller sleeps unless woken: until its deadline (none: until woken), and at
        most ``CHECK_INTERVAL`` when its cancel token cannot wake it."""
        if context is None:
            return None
        if context.deadline is None:
            return CHECK_INTERVAL if polled else None
        left = max(0.0, context.deadline - time.monotonic())
        return min(CHECK_INTERVAL, left) if polled else left


def _nothing() -> None:
    return None


def _notes_by_segment(output: BatchOutput) -> tuple[Mapping[str, int], ...] | None:
    """``output``'s notes segment by segment, so that each caller of a merged call gets its own with no
    second call: its ``segment_notes`` when they are one per segment and add up to its notes, none at all
    when it has no notes; None when its notes cannot be told apart."""
    each = output.segment_notes
    if each is not None and len(each) == len(output.texts):
        total: dict[str, int] = {}
        for own in each:
            add_notes(total, own)
        given = {code: count for code, count in output.notes.items() if count}
        if {code: count for code, count in total.items() if count} == given:
            return each
    return None if output.notes else ({},) * len(output.texts)


def _checked(output: BatchOutput, expected: int) -> BatchOutput:
    if len(output.texts) != expected:
        raise BackendError(f"the backend returned {len(output.texts)} translations for {expected} segments")
    return output
