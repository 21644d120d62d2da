"""Probes of the programs dragoman runs (Tesseract, Apertium; ffmpeg and espeak-ng later), kept fresh.

A long-running server (the daemon, an MCP server) must see ``apt-get install tesseract-ocr-jpn`` without a
restart, yet a status call or an OCR run must not start a process just to ask what is installed.
:class:`Refreshing` keeps one computed answer with a *stamp* (what the answer depends on, cheap to read: the
binary's path and mtime, the mtime of the data directory the answer names) and computes it again when the
stamp changes, when the answer is older than its ``ttl`` (for what a stamp cannot see, such as a change made
while the answer was being computed), or after :meth:`Refreshing.refresh`. A computation that raises is not
kept: the next call tries again.

:func:`run_program` runs a probe command with a bound on its time, and :func:`mtime` reads a stamp.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

#: Longest a probe command may take, in seconds.
PROBE_TIMEOUT_SECONDS = 10.0
#: How long an answer is kept when its stamp has not changed, in seconds.
DEFAULT_TTL_SECONDS = 300.0


def mtime(path: str | os.PathLike[str] | None) -> int | None:
    """The modification time of ``path`` in nanoseconds, or None when there is no such file."""
    if path is None:
        return None
    try:
        return os.stat(path).st_mtime_ns
    except (OSError, ValueError):
        return None


def run_program(
    *cmd: str, timeout: float = PROBE_TIMEOUT_SECONDS, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str] | None:
    """Run ``cmd`` and return what it did, or None when it cannot start or outlives ``timeout``."""
    try:
        return subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
            env=None if env is None else dict(env),
        )
    except (OSError, subprocess.SubprocessError):
        return None


@dataclass(frozen=True)
class _Kept(Generic[T]):
    value: T
    stamp: Hashable
    at: float


class Refreshing(Generic[T]):
    """One answer of ``compute``, computed again when ``stamp(answer)`` changes, after ``ttl`` seconds, or
    after :meth:`refresh`. Thread-safe: concurrent callers wait for one computation. ``clock`` is for tests.

    ``stamp`` is given the kept answer, so that it can watch what the answer names (the data directory a
    program reported); most stamps ignore it.
    """

    def __init__(
        self,
        compute: Callable[[], T],
        *,
        stamp: Callable[[T], Hashable] = lambda value: None,
        ttl: float = DEFAULT_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._compute = compute
        self._stamp = stamp
        self._ttl = ttl
        self._clock = clock
        self._kept: _Kept[T] | None = None
        self._lock = threading.Lock()

    def _fresh(self, kept: _Kept[T]) -> bool:
        return self._clock() - kept.at < self._ttl and self._stamp(kept.value) == kept.stamp

    def get(self) -> T:
        """The answer, computed now when the kept one is missing, stale or outdated by its stamp."""
        kept = self._kept
        if kept is not None and self._fresh(kept):
            return kept.value
        with self._lock:
            kept = self._kept
            if kept is not None and self._fresh(kept):
                return kept.value
            value = self._compute()
            self._kept = _Kept(value, self._stamp(value), self._clock())
            return value

    def refresh(self) -> None:
        """Forget the kept answer: the next :meth:`get` computes it again."""
        with self._lock:
            self._kept = None
