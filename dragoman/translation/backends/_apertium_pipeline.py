"""One running Apertium pipeline: a chain of stage processes joined by pipes, written and read without
blocking, each stage's stderr drained in the background (see ``backends.apertium``)."""

from __future__ import annotations

import contextlib
import os
import selectors
import shlex
import subprocess
import threading
import time

from dragoman.errors import BackendError, PipelineBroken, PipelineStuck

INSTALL_HINT = "install Apertium and the pair, e.g. `sudo apt-get install apertium apertium-eng-spa`"
_READ_SIZE = 1 << 16
_STDERR_KEEP = 4096


class Pipeline:
    """One running chain of stage processes; not thread-safe (the backend's lock guards it)."""

    def __init__(self, commands: list[list[str]], name: str) -> None:
        self.commands = commands
        self.procs: list[subprocess.Popen[bytes]] = []
        self.stderr = [bytearray() for _ in commands]
        self.sequence = 0  # the number the next block's end marker carries
        env = {**os.environ, "LC_ALL": "C.UTF-8"}
        previous = None
        try:
            for argv in commands:
                proc = subprocess.Popen(
                    argv,
                    stdin=previous if previous is not None else subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=env,
                )
                if previous is not None:
                    previous.close()
                previous = proc.stdout
                self.procs.append(proc)
        except OSError as exc:
            if previous is not None:
                previous.close()
            self.kill()
            raise BackendError(f"cannot start Apertium {name}: {argv[0]}: {exc}; {INSTALL_HINT}") from exc
        first, last = self.procs[0], self.procs[-1]
        assert first.stdin is not None and last.stdout is not None
        self.in_fd, self.out_fd = first.stdin.fileno(), last.stdout.fileno()
        os.set_blocking(self.in_fd, False)
        self._drain = threading.Thread(target=self._drain_stderr, name=f"apertium-stderr-{name}", daemon=True)
        self._drain.start()

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(p.pid for p in self.procs)

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def _drain_stderr(self) -> None:
        """Read every stage's stderr so none can block, keeping the tail of each for error messages."""
        with selectors.DefaultSelector() as sel:
            for i, proc in enumerate(self.procs):
                assert proc.stderr is not None
                sel.register(proc.stderr.fileno(), selectors.EVENT_READ, i)
            while sel.get_map():
                for key, _ in sel.select():
                    try:
                        chunk = os.read(key.fd, _READ_SIZE)
                    except OSError:
                        chunk = b""
                    if not chunk:
                        sel.unregister(key.fd)
                        stream = self.procs[key.data].stderr
                        if stream is not None:
                            stream.close()
                        continue
                    buf = self.stderr[key.data]
                    buf += chunk
                    del buf[:-_STDERR_KEEP]

    def exchange(self, blocks: list[bytes], timeout: float) -> list[bytes]:
        """Write every block and read as many back; ``timeout`` bounds the wait for each next block."""
        results: list[bytes] = []
        pending = bytearray()
        first = self.sequence
        self.sequence += len(blocks)
        payload = memoryview(b"".join(b"%b[%d]\0" % (block, first + i) for i, block in enumerate(blocks)))
        written = 0
        with selectors.DefaultSelector() as sel:
            sel.register(self.out_fd, selectors.EVENT_READ)
            if sel.select(0):
                raise PipelineBroken("the pipeline had output left over from an earlier call")
            sel.register(self.in_fd, selectors.EVENT_WRITE)
            deadline = time.monotonic() + timeout
            while len(results) < len(blocks):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise PipelineStuck(f"no block came back in {timeout:g} s")
                for key, _ in sel.select(remaining):
                    if key.fd == self.in_fd:
                        try:
                            written += os.write(self.in_fd, payload[written : written + _READ_SIZE])
                        except BlockingIOError:
                            continue
                        except OSError as exc:
                            raise PipelineBroken(f"writing to the pipeline failed: {exc}") from exc
                        if written == len(payload):
                            sel.unregister(self.in_fd)
                        continue
                    chunk = os.read(self.out_fd, _READ_SIZE)
                    if not chunk:
                        raise PipelineBroken("the pipeline closed its output")
                    start = len(pending)
                    pending += chunk
                    while (end := pending.find(b"\0", start)) >= 0:
                        marker = b"[%d]" % (first + len(results))
                        if not pending[:end].endswith(marker):
                            raise PipelineBroken(
                                f"the pipeline answered out of step: {bytes(pending[:end])[-80:]!r}"
                            )
                        results.append(bytes(pending[: end - len(marker)]))
                        del pending[: end + 1]
                        start = 0
                        deadline = time.monotonic() + timeout
        if pending or len(results) != len(blocks):
            raise PipelineBroken("the pipeline answered more blocks than it was sent")
        return results

    def failure(self) -> str:
        """What went wrong, from the stages' exit codes and stderr (after they are stopped)."""
        self.close(grace=1.0)  # let a failing stage finish its own exit rather than report our SIGKILL
        lines = []
        for argv, proc, err in zip(self.commands, self.procs, self.stderr, strict=False):
            text = err.decode(errors="replace").strip() or "-"
            if text != "-" or proc.returncode not in (0, None, -9, -13):
                lines.append(f"`{shlex.join(argv)}` ended with {proc.returncode}: {text}")
        return "; ".join(lines) or "no stage reported an error"

    def close(self, grace: float = 2.0) -> None:
        """Close the input so every stage ends on EOF; kill what is still running after ``grace``."""
        if self.procs and self.procs[0].stdin is not None:
            with contextlib.suppress(OSError):
                self.procs[0].stdin.close()
        deadline = time.monotonic() + grace
        for proc in self.procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                break
        self.kill()

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs:
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        drain: threading.Thread | None = getattr(self, "_drain", None)
        if drain is None:  # start failed: nobody reads the stderr pipes
            for proc in self.procs:
                if proc.stderr is not None:
                    proc.stderr.close()
        elif drain is not threading.current_thread():
            drain.join(5)  # it closes each stderr pipe at EOF


def kill_all(holder: list[Pipeline]) -> None:
    """Finalizer safety net: the engine should have called close()."""
    while holder:
        holder.pop().kill()
