"""One running Apertium pipeline: a chain of stage processes joined by pipes, written and read without
blocking, each stage's stderr drained in the background (see ``backends.apertium``); and the pool that
bounds how many run at once.

A :class:`PipelinePool` keeps at most ``max_pipelines`` pipelines warm (each is 8 to 17 processes and
40 to 150 MB): starting one more closes the least recently used idle one, and a pipeline unused for
``idle_seconds`` is closed by a background reaper. A pipeline in use (inside :meth:`PipelinePool.use`) is
never closed under its caller; when every pipeline is in use, a caller needing a new one waits for one to
be released (at most its timeout, then :class:`~dragoman.errors.EngineTimeout`). Closed pipelines' processes
are waited for (no zombies).

While :meth:`Pipeline.exchange` waits for an answer it looks at the stages every ``_TICK``: one that exited
is PipelineBroken at once (not at the timeout), and all of them asleep without spending CPU time for
``SILENT_SECONDS`` with a block unanswered is PipelineSilent (a stage swallowed the block; read from Linux's
``/proc``, elsewhere only the timeout applies). The backend then restarts the pipeline and isolates the
segment (see ``backends.apertium``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import shlex
import subprocess
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from dragoman.errors import BackendError, EngineTimeout, PipelineBroken, PipelineSilent, PipelineStuck
from dragoman.limits import APERTIUM_IDLE_SECONDS, APERTIUM_MAX_PIPELINES

log = logging.getLogger("dragoman.translation.apertium")

INSTALL_HINT = "install Apertium and the pair, e.g. `sudo apt-get install apertium apertium-eng-spa`"
_READ_SIZE = 1 << 16
_STDERR_KEEP = 4096
#: How often a wait for an answer looks at the stages: whether one exited, whether all are idle (seconds).
_TICK = 0.1
#: How long every stage may sit idle (asleep, no CPU time spent) with a block unanswered before the block
#: is taken as swallowed (Debian's hbs-mkd answers nothing for `Crna Gora`). A working stage spends CPU
#: time or waits in the run queue or on the disk, none of which is idle, so a loaded machine does not
#: trip this; it only needs to outlast the few milliseconds a block spends between two stages' pipes.
SILENT_SECONDS = 0.5


class _Idleness:
    """How long every stage of a pipeline has been asleep without spending CPU time (Linux ``/proc``;
    elsewhere never idle, and only the timeout applies)."""

    def __init__(self, pids: tuple[int, ...]) -> None:
        self.pids = pids
        self.since = time.monotonic()
        self.ticks: int | None = None

    def reset(self) -> None:
        self.since, self.ticks = time.monotonic(), None

    def for_seconds(self, now: float) -> float:
        ticks = _cpu_ticks_if_idle(self.pids)
        if ticks is None or ticks != self.ticks:
            self.since, self.ticks = now, ticks
            return 0.0
        return now - self.since


def _cpu_ticks_if_idle(pids: tuple[int, ...]) -> int | None:
    """The CPU time (clock ticks) the processes spent, or None when one is running, waiting on the disk
    or cannot be read."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            return None
        if fields[0] not in (b"S", b"T", b"t"):  # R running or runnable, D disk, Z exited (seen by poll)
            return None
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total


class Pipeline:
    """One running chain of stage processes; not thread-safe (the backend's lock guards it)."""

    def __init__(self, commands: list[list[str]], name: str) -> None:
        self.commands = commands
        self.name = name
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

    def exchange(
        self,
        blocks: list[bytes],
        timeout: float,
        answered: list[bytes] | None = None,
        *,
        silence: float = SILENT_SECONDS,
    ) -> list[bytes]:
        """Write every block and read as many back; ``timeout`` bounds the wait for each next block.

        The answers are appended to ``answered`` as they come (a caller keeps those when a later block
        fails). A stage that exits is seen within ``_TICK`` seconds (PipelineBroken), and a pipeline whose
        stages all sit idle for ``silence`` seconds with a block unanswered (PipelineSilent: a stage
        swallowed it) too; ``timeout`` is for a pipeline that keeps working and answers nothing."""
        results: list[bytes] = answered if answered is not None else []
        base = len(results)
        pending = bytearray()
        first = self.sequence
        self.sequence += len(blocks)
        payload = memoryview(b"".join(b"%b[%d]\0" % (block, first + i) for i, block in enumerate(blocks)))
        written = 0
        idle = _Idleness(self.pids)
        with selectors.DefaultSelector() as sel:
            sel.register(self.out_fd, selectors.EVENT_READ)
            if sel.select(0):
                raise PipelineBroken("the pipeline had output left over from an earlier call")
            sel.register(self.in_fd, selectors.EVENT_WRITE)
            deadline = time.monotonic() + timeout
            while len(results) - base < len(blocks):
                now = time.monotonic()
                remaining = deadline - now
                if remaining <= 0:
                    raise PipelineStuck(f"no block came back in {timeout:g} s")
                events = sel.select(min(remaining, _TICK))
                if not events:
                    self._check_stages()
                    if silence > 0 and idle.for_seconds(now) >= silence:
                        raise PipelineSilent(
                            f"every stage sat idle for {silence:g} s without answering block "
                            f"{len(results) - base + 1} of {len(blocks)}"
                        )
                    continue
                for key, _ in events:
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
                        self._check_stages(grace=0.2)
                        raise PipelineBroken("the pipeline closed its output")
                    idle.reset()
                    start = len(pending)
                    pending += chunk
                    while (end := pending.find(b"\0", start)) >= 0:
                        marker = b"[%d]" % (first + len(results) - base)
                        if not pending[:end].endswith(marker):
                            raise PipelineBroken(
                                f"the pipeline answered out of step: {bytes(pending[:end])[-80:]!r}"
                            )
                        results.append(bytes(pending[: end - len(marker)]))
                        del pending[: end + 1]
                        start = 0
                        deadline = time.monotonic() + timeout
        if pending or len(results) - base != len(blocks):
            raise PipelineBroken("the pipeline answered more blocks than it was sent")
        return results[base:]

    def _check_stages(self, grace: float = 0.0) -> None:
        """PipelineBroken naming the first stage that exited (waiting up to ``grace`` for one to)."""
        deadline = time.monotonic() + grace
        while True:
            for argv, proc in zip(self.commands, self.procs, strict=True):
                code = proc.poll()
                if code is not None:
                    how = f"signal {-code}" if code < 0 else f"code {code}"
                    raise PipelineBroken(f"stage `{shlex.join(argv)}` ended ({how})")
            if time.monotonic() >= deadline:
                return
            time.sleep(0.02)

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


@dataclass(eq=False)
class _Slot:
    """One owner's pipeline in the pool (``pipeline`` is None while it starts)."""

    pipeline: Pipeline | None
    last_used: float
    busy: bool = False


class PipelinePool:
    """At most ``max_pipelines`` warm pipelines, by owner; least recently used and idle ones closed.

    An owner (one backend: one Apertium mode) has at most one pipeline, used by one caller at a time (the
    backend's lock serialises its callers). Thread-safe.
    """

    def __init__(
        self,
        max_pipelines: int = APERTIUM_MAX_PIPELINES,
        idle_seconds: float = APERTIUM_IDLE_SECONDS,
        *,
        clock: Callable[[], float] = time.monotonic,
        reap_every: float | None = None,
    ) -> None:
        self.max_pipelines = max(1, max_pipelines)
        self.idle_seconds = max(0.0, idle_seconds)
        self._clock = clock
        self._reap_every = (
            reap_every if reap_every is not None else min(30.0, max(0.2, self.idle_seconds / 4))
        )
        self._cond = threading.Condition()
        self._slots: OrderedDict[object, _Slot] = OrderedDict()  # least recently used first
        self._closed = False
        self._reaper: threading.Thread | None = None
        self._stop = threading.Event()

    @contextlib.contextmanager
    def use(self, owner: object, start: Callable[[], Pipeline], timeout: float) -> Iterator[Pipeline]:
        """``owner``'s pipeline, started with ``start()`` when it has none running, held in use inside the
        block (never closed by the pool meanwhile). Room is made by closing the least recently used idle
        pipeline; when all are in use this waits up to ``timeout`` seconds for one to be released."""
        slot = self._acquire(owner, start, timeout)
        try:
            assert slot.pipeline is not None
            yield slot.pipeline
        finally:
            with self._cond:
                slot.busy = False
                slot.last_used = self._clock()
                self._cond.notify_all()

    def _acquire(self, owner: object, start: Callable[[], Pipeline], timeout: float) -> _Slot:
        victims: list[Pipeline] = []
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if self._closed:
                    raise BackendError("the Apertium pipelines were shut down; load the pack again")
                slot = self._slots.get(owner)
                if slot is not None:
                    if slot.busy:  # the owner's lock makes this rare: wait for its other caller
                        pass
                    elif slot.pipeline is not None and slot.pipeline.alive():
                        slot.busy = True
                        self._slots.move_to_end(owner)
                        return slot
                    else:  # a stage died: restart in the same place
                        if slot.pipeline is not None:
                            log.warning("Apertium pipeline %s: a stage died; restarting", slot.pipeline.name)
                            victims.append(slot.pipeline)
                        slot.pipeline, slot.busy = None, True
                        self._slots.move_to_end(owner)
                        break
                elif len(self._slots) < self.max_pipelines:
                    slot = _Slot(None, self._clock(), busy=True)
                    self._slots[owner] = slot
                    break
                else:
                    idle = next((k for k, s in self._slots.items() if not s.busy), None)
                    if idle is not None:
                        evicted = self._slots.pop(idle)
                        if evicted.pipeline is not None:
                            log.info(
                                "closing Apertium pipeline %s: %d pipelines are running (the most kept)",
                                evicted.pipeline.name,
                                self.max_pipelines,
                            )
                            victims.append(evicted.pipeline)
                        continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise EngineTimeout(
                        f"all {self.max_pipelines} Apertium pipelines stayed busy for {timeout:g} s; retry, "
                        "or raise DRAGOMAN_APERTIUM_MAX_PIPELINES"
                    )
                self._cond.wait(remaining)
        for victim in victims:
            victim.close(grace=1.0)
        try:
            pipeline = start()
        except BaseException:
            with self._cond:
                if self._slots.get(owner) is slot:
                    del self._slots[owner]
                self._cond.notify_all()
            raise
        with self._cond:
            slot.pipeline, slot.last_used = pipeline, self._clock()
        self._start_reaper()
        return slot

    def discard(self, owner: object, *, kill: bool = True) -> None:
        """Forget ``owner``'s pipeline and stop it (``kill``: at once; else close it gracefully)."""
        with self._cond:
            slot = self._slots.pop(owner, None)
            self._cond.notify_all()
        if slot is not None and slot.pipeline is not None:
            if kill:
                slot.pipeline.kill()
            else:
                slot.pipeline.close()

    def drop(self, owner: object, pipeline: Pipeline) -> None:
        """Take ``pipeline`` out of the pool (it failed); the caller stops it. Used inside :meth:`use`."""
        with self._cond:
            slot = self._slots.get(owner)
            if slot is not None and slot.pipeline is pipeline:
                slot.pipeline = None  # restarted by the next use; the slot stays the owner's until released

    def pids(self, owner: object) -> tuple[int, ...]:
        with self._cond:
            slot = self._slots.get(owner)
            return slot.pipeline.pids if slot is not None and slot.pipeline is not None else ()

    def all_pids(self) -> tuple[int, ...]:
        """Process ids of every running stage of every pipeline."""
        with self._cond:
            return tuple(p for s in self._slots.values() if s.pipeline is not None for p in s.pipeline.pids)

    def __len__(self) -> int:
        with self._cond:
            return sum(1 for s in self._slots.values() if s.pipeline is not None)

    def evict_idle(self) -> int:
        """Close the pipelines unused for ``idle_seconds`` (the reaper calls this); how many were closed."""
        if not self.idle_seconds:
            return 0
        now = self._clock()
        with self._cond:
            owners = [
                k
                for k, s in self._slots.items()
                if not s.busy and s.pipeline is not None and now - s.last_used >= self.idle_seconds
            ]
            victims = [self._slots.pop(k).pipeline for k in owners]
            self._cond.notify_all()
        for victim in victims:
            assert victim is not None
            log.info("closing Apertium pipeline %s: unused for %.0f s", victim.name, self.idle_seconds)
            victim.close(grace=1.0)
        return len(victims)

    def close(self) -> None:
        """Stop every pipeline (in use or not: the engine is shutting down) and the reaper."""
        with self._cond:
            self._closed = True
            slots = list(self._slots.values())
            self._slots.clear()
            self._cond.notify_all()
            reaper, self._reaper = self._reaper, None
        self._stop.set()
        for slot in slots:
            if slot.pipeline is not None:
                slot.pipeline.close(grace=1.0)
        if reaper is not None and reaper is not threading.current_thread():
            reaper.join(timeout=5)

    def _start_reaper(self) -> None:
        if not self.idle_seconds:
            return
        with self._cond:
            if self._closed or (self._reaper is not None and self._reaper.is_alive()):
                return
            self._reaper = threading.Thread(
                target=_reap,
                args=(weakref.ref(self), self._stop, self._reap_every),
                name="dragoman-apertium-reaper",
                daemon=True,
            )
            self._reaper.start()


def _reap(ref: weakref.ReferenceType[PipelinePool], stop: threading.Event, every: float) -> None:
    """The reaper thread: close idle pipelines every ``every`` seconds until stopped or the pool is gone."""
    while not stop.wait(every):
        pool = ref()
        if pool is None:
            return
        try:
            pool.evict_idle()
        except Exception:
            log.exception("closing idle Apertium pipelines failed")
        del pool
