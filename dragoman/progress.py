"""How long work reports progress, is cancelled and meets its deadline, with no async framework.

Capabilities and pipelines are synchronous and run on worker threads. They take a :class:`JobContext` (or
just its callback) and call :meth:`JobContext.check` between chunks of work. Each front door adapts its own
machinery onto this: MCP progress notifications and ``notifications/cancelled`` (``server/mcp``), the
daemon's request deadline (``server/daemon``), and (soon) the hosted job runner.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dragoman.errors import Cancelled, EngineTimeout

log = logging.getLogger(__name__)

#: Called with (done, total, message) as long work advances; front doors turn it into progress events.
ProgressCallback = Callable[[int, int, str], None]


def _forget_nothing() -> None:
    return None


class CancelToken:
    """Set once by whoever may cancel (a client, a job runner); read by the work between chunks.

    Work that *waits* rather than computes (a caller queued in the dynamic batcher) need not poll: it
    registers a wake-up with :meth:`on_cancel`, called by :meth:`cancel` at once. That holds only for tokens
    set through :meth:`cancel`; a subclass whose :attr:`cancelled` learns of cancellation from elsewhere (the
    MCP server's, read on the call's worker thread) must still be polled, which :attr:`wakes` tells.
    """

    __slots__ = ("_event", "_lock", "_reason", "_wakeups")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._reason = "cancelled"
        self._lock = threading.Lock()
        self._wakeups: dict[object, Callable[[], None]] = {}

    def cancel(self, reason: str = "cancelled") -> None:
        with self._lock:
            self._reason = reason
            self._event.set()
            wakeups, self._wakeups = list(self._wakeups.values()), {}
        for wake in wakeups:  # on the cancelling thread, outside the token's lock
            try:
                wake()
            except Exception:  # a waiter's wake-up must not fail the canceller
                log.exception("a cancel wake-up failed")

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> str:
        return self._reason

    @property
    def wakes(self) -> bool:
        """Whether :meth:`on_cancel` wake-ups are called as soon as the token is cancelled: true unless a
        subclass reads cancellation from elsewhere (overrides :attr:`cancelled`); then waiters poll it."""
        return type(self).cancelled is CancelToken.cancelled

    def on_cancel(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake()`` once when the token is cancelled (on the cancelling thread; at once, on this one,
        if it already is). Returns a function that forgets ``wake`` (call it when the wait is over)."""
        key = object()
        with self._lock:
            if not self._event.is_set():
                self._wakeups[key] = wake
                return lambda: self._forget(key)
        wake()
        return _forget_nothing

    def _forget(self, key: object) -> None:
        with self._lock:
            self._wakeups.pop(key, None)


def _no_progress(done: int, total: int, message: str) -> None:
    return None


@dataclass(frozen=True)
class JobContext:
    """What long work is handed: where to report progress, whether to stop, and by when.

    ``deadline`` is a :func:`time.monotonic` instant, or None for none. :meth:`check` raises
    :class:`~dragoman.errors.Cancelled` once the token is set and :class:`~dragoman.errors.EngineTimeout` once
    the deadline has passed; :meth:`report` forwards progress, then checks.
    """

    progress: ProgressCallback = _no_progress
    cancel: CancelToken = field(default_factory=CancelToken)
    deadline: float | None = None

    @classmethod
    def of(cls, progress: ProgressCallback | None = None, *, timeout: float | None = None) -> JobContext:
        deadline = time.monotonic() + timeout if timeout is not None else None
        return cls(progress or _no_progress, CancelToken(), deadline)

    def check(self) -> None:
        if self.cancel.cancelled:
            raise Cancelled(self.cancel.reason)
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise EngineTimeout("the work ran past its deadline and was stopped")

    def report(self, done: int, total: int, message: str) -> None:
        self.progress(done, total, message)
        self.check()
