"""HTTP GET with an overall deadline, a minimum pace and a size bound, for pack downloads and the index.

httpx's timeouts apply to each read: a server that trickles one byte a second never trips them, in the body
or in the headers. :func:`fetch` therefore runs the transfer in a worker thread and waits for it with the
overall deadline; when it passes, the socket is shut down (which wakes a blocked read), the worker stops at
its next chunk, and the caller gets :class:`~dragoman.errors.DownloadTimedOut` on time. Inside the body, a
transfer that averages less than ``min_rate`` bytes a second once ``grace`` seconds have passed is cut off
too, so a crawling server fails in about ``grace`` seconds rather than at the deadline. ``limit`` bounds
what is received (the caller's ``too_big`` error), whatever the server declares.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from dragoman.errors import DownloadTimedOut, DragomanError, PackInstallError

CHUNK = 1024 * 1024
_HEADERS = {"Accept-Encoding": "identity", "User-Agent": "dragoman"}


@dataclass(frozen=True)
class Pace:
    """How long a transfer may take: ``deadline`` seconds in all, per-read ``read_timeout``, and at least
    ``min_rate`` bytes a second on average once ``grace`` seconds have passed (0 turns that check off)."""

    deadline: float
    read_timeout: float
    min_rate: float = 0.0
    grace: float = 0.0


@dataclass
class Transfer:
    """What a transfer got: bytes received, the size the server declared (0 if none), bytes off the wire."""

    received: int = 0
    total: int = 0
    raw: int = 0
    error: BaseException | None = None
    sock: socket.socket | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)


def _socket_of(response: httpx.Response) -> socket.socket | None:
    stream = response.extensions.get("network_stream")
    if stream is None:
        return None
    with contextlib.suppress(Exception):
        sock = stream.get_extra_info("socket")
        if isinstance(sock, socket.socket):
            return sock
    return None


def _run(
    url: str,
    state: Transfer,
    pace: Pace,
    limit: int,
    check: Callable[[httpx.Response, Transfer], None],
    sink: Callable[[bytes, Transfer], None],
    too_big: Callable[[int], DragomanError],
    what: str,
) -> None:
    started = time.monotonic()
    timeout = httpx.Timeout(pace.read_timeout, connect=min(pace.read_timeout, 30.0))
    try:
        with httpx.stream("GET", url, headers=_HEADERS, timeout=timeout, follow_redirects=True) as response:
            state.sock = _socket_of(response)
            length = response.headers.get("content-length", "")
            state.total = int(length) if length.isdigit() else 0
            check(response, state)
            if state.total > limit:
                raise too_big(state.total)
            for chunk in response.iter_bytes():
                if state.stop.is_set():
                    return
                state.received += len(chunk)
                if state.received > limit:
                    raise too_big(state.received)
                sink(chunk, state)
                elapsed = time.monotonic() - started
                if pace.min_rate and elapsed > pace.grace and state.received < pace.min_rate * elapsed:
                    raise DownloadTimedOut(
                        f"{what} {url} is crawling: {state.received} bytes in {elapsed:.0f} s, under the "
                        f"minimum of {pace.min_rate:.0f} bytes a second; cut off, nothing was installed. "
                        "Retry later or from another mirror, or install from a file"
                    )
            state.raw = response.num_bytes_downloaded
    except DragomanError as exc:
        state.error = exc
    except httpx.HTTPError as exc:
        if state.stop.is_set():
            return
        state.error = PackInstallError(
            f"{what} {url} was interrupted after {state.received} of {state.total or 'unknown'} bytes "
            f"({type(exc).__name__}: {exc}); nothing was installed; retry"
        )
        state.error.__cause__ = exc
    except BaseException as exc:  # handed to the caller's thread, which raises it
        state.error = exc
    finally:
        state.done.set()


def _abandon(state: Transfer) -> None:
    """Tell the worker to stop and wake it if it is blocked reading; wait a moment for it."""
    state.stop.set()
    sock = state.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # wakes the worker's blocked read
    state.done.wait(1.0)


def fetch(
    url: str,
    *,
    pace: Pace,
    limit: int,
    sink: Callable[[bytes, Transfer], None],
    too_big: Callable[[int], DragomanError],
    check: Callable[[httpx.Response, Transfer], None] = lambda response, state: None,
    what: str = "downloading",
) -> Transfer:
    """GET ``url``, handing each chunk to ``sink``; raises DownloadTimedOut past ``pace.deadline``.

    ``check`` sees the response once its headers are in (raise to refuse a status). Errors the worker meets
    (``too_big``, ``check``'s, PackInstallError for a broken connection) are raised here, in the caller's
    thread.
    """
    state = Transfer()
    worker = threading.Thread(
        target=_run,
        args=(url, state, pace, limit, check, sink, too_big, what),
        name="dragoman-fetch",
        daemon=True,
    )
    worker.start()
    try:
        finished = state.done.wait(pace.deadline)
    except BaseException:  # Ctrl-C while waiting: the worker lets go of the connection too
        _abandon(state)
        raise
    if not finished:
        _abandon(state)
        raise DownloadTimedOut(
            f"{what} {url} took more than {pace.deadline:.0f} s in all (got {state.received} of "
            f"{state.total or 'unknown'} bytes); cut off, nothing was installed. Retry later or from another "
            "mirror, or install from a file"
        )
    if state.error is not None:
        raise state.error
    return state
