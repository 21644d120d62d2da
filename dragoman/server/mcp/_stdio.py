"""The stdio transport of ``dragoman mcp``: the protocol owns the real stdin and stdout, nothing else does.

Before serving, the wire's file descriptors are duplicated to private ones; fd 0 then reads from the null
device, fd 1 points at stderr and ``sys.stdout`` at ``sys.stderr``. A stray ``print`` in a library, a C
extension writing to fd 1, or a child process inheriting the descriptors all land in the log, never in the
JSON-RPC stream. Everything is restored on exit.

On Unix pipes and sockets the wire is read and written from the event loop directly (non-blocking
descriptors), rather than through a worker thread per line as the SDK's default transport does: every thread
hop costs a wake-up, and a short ``translate`` round trip should cost the protocol well under 3 ms. Other
kinds of descriptors (a regular file, a terminal, Windows) go through the SDK's transport unchanged.

While serving, SIGTERM and SIGINT remove the files being written before they end the process.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio

from dragoman.documents import partials
from dragoman.server.mcp import _malformed, _sdk

#: Bytes read from the wire per system call.
READ_CHUNK = 1 << 16


def _pollable(fd: int) -> bool:
    """Whether the event loop can wait on ``fd`` (pipes and sockets on Unix)."""
    if os.name != "posix":
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class PipeLines:
    """Lines of UTF-8 text from a non-blocking descriptor, read as the event loop finds it readable.

    A line longer than :data:`~dragoman.server.mcp._malformed.MAX_LINE_BYTES` is skipped to its end, never
    held whole, and stands in as a marker that the server answers with a parse error."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()
        self._searched = 0  # bytes of the buffer already known to hold no newline
        self._too_long: bytes | None = None  # the start of a line being skipped for its length
        #: The line handed on last. The SDK validates a line before it reads the next, so when it refuses
        #: one, this is that line.
        self.last_line: str | None = None

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        while True:
            end = self._buffer.find(b"\n", self._searched)
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                self._searched = 0
                if self._too_long is not None:  # the end of an over-long line: it is answered, not read
                    return self._refuse_too_long()
                self.last_line = line.decode("utf-8", errors="replace")
                return self.last_line
            self._searched = len(self._buffer)  # each byte is searched for a newline once: linear
            if len(self._buffer) > _malformed.MAX_LINE_BYTES:
                if self._too_long is None:
                    self._too_long = bytes(self._buffer[: _malformed.TOO_LONG_PREFIX_BYTES])
                self._buffer.clear()
                self._searched = 0
            try:
                chunk = os.read(self._fd, READ_CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not chunk:  # end of input: a last line without its newline still counts
                if self._too_long is not None:
                    self._buffer.clear()
                    return self._refuse_too_long()
                if self._buffer:
                    rest = bytes(self._buffer).decode("utf-8", errors="replace")
                    self._buffer.clear()
                    return rest
                raise StopAsyncIteration
            self._buffer.extend(chunk)

    def _refuse_too_long(self) -> str:
        """What stands for a line over the limit: not JSON, so the SDK refuses it and it is answered."""
        prefix = (self._too_long or b"").decode("utf-8", errors="replace")
        self._too_long = None
        return _malformed.TOO_LONG_MARKER + prefix


class PipeWriter:
    """Writes UTF-8 text to a non-blocking descriptor, waiting on the event loop while the pipe is full."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def write(self, text: str) -> None:
        view = memoryview(text.encode("utf-8"))
        while view:
            try:
                written = os.write(self._fd, view)
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
                continue
            view = view[written:]

    async def flush(self) -> None:
        """Nothing is buffered."""


@contextlib.contextmanager
def _claim_std_fds() -> Any:
    """Private duplicates of fd 0 and 1 for the wire; fd 0 reads the null device, fd 1 goes to stderr."""
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        yield wire_in, wire_out
    finally:
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        for fd in (saved_in, saved_out, wire_in, wire_out):
            with contextlib.suppress(OSError):
                os.close(fd)


@contextlib.asynccontextmanager
async def stdio_streams() -> AsyncIterator[_sdk.Streams]:
    """The SDK's read/write streams over the real stdin/stdout, with every other writer sent to stderr.

    Lines that are not JSON-RPC messages are answered with a JSON-RPC error (see
    :mod:`dragoman.server.mcp._malformed`) instead of being dropped. While the streams are open, SIGTERM and
    SIGINT first remove the files this process is half-way through writing (hosts send SIGTERM about two
    seconds after closing stdin, then kill): see :func:`dragoman.documents.partials.handle_signals`."""
    with partials.handle_signals():
        async with _streams() as (read, write, last_line):
            yield _malformed.AnsweringReadStream(read, write, last_line), write


@contextlib.asynccontextmanager
async def _streams() -> AsyncIterator[tuple[Any, Any, Callable[[], str | None]]]:
    """The read and write streams, and what gives the line read last (when the transport is ours)."""
    if not (_pollable(0) and _pollable(1)):
        # The SDK claims and diverts the descriptors itself; it must see the real sys.stdout to do so.
        async with _sdk.stdio_transport() as (read, write):
            with contextlib.redirect_stdout(sys.stderr):
                yield read, write, lambda: None
        return
    with _claim_std_fds() as (wire_in, wire_out), contextlib.redirect_stdout(sys.stderr):
        os.set_blocking(wire_in, False)
        os.set_blocking(wire_out, False)
        try:
            lines = PipeLines(wire_in)
            async with _sdk.stdio_transport(lines, PipeWriter(wire_out)) as (read, write):
                yield read, write, lambda: lines.last_line
        finally:  # the descriptions are shared with whoever launched us: leave them as they were
            for fd in (wire_in, wire_out):
                with contextlib.suppress(OSError):
                    os.set_blocking(fd, True)
