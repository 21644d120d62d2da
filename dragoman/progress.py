"""How long work reports progress, is cancelled and meets its deadline, with no async framework.

Capabilities and pipelines are synchronous and run on worker threads. They take a :class:`JobContext` (or
just its callback) and call :meth:`JobContext.check` between chunks of work. Each front door adapts its own
machinery onto this: MCP progress notifications and ``notifications/cancelled`` (``server/mcp``), the
daemon's request deadline (``server/daemon``), and (soon) the hosted job runner.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dragoman.errors import Cancelled, EngineTimeout

#: Called with (done, total, message) as long work advances; front doors turn it into progress events.
ProgressCallback = Callable[[int, int, str], None]


class CancelToken:
    """Set once by whoever may cancel (a client, a job runner); read by the work between chunks."""

    __slots__ = ("_event", "_reason")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._reason = "cancelled"

    def cancel(self, reason: str = "cancelled") -> None:
        self._reason = reason
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> str:
        return self._reason


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
