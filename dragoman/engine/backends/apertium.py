"""The Apertium backend: system ``.mode`` pipelines kept warm, one null-flushed block per segment.

A ``.mode`` file is one shell pipeline (``lt-proc ... | apertium-tagger -g $2 ... | ... | lt-proc $1 ...``).
As apertium-apy does, we run its commands ourselves, each stage with ``-z`` (flush on ``\\0``; vislcg3 and
a few tools take no ``-z``), ``$1`` as ``-g`` (generation with unknown-word marks) and ``$2`` as nothing.
The stages are one chain of subprocesses, started once (about 200 ms) and kept running; a call writes
each segment as a block ending in ``\\0`` and reads one ``\\0``-terminated block back per segment.
Each block ends in a superblank holding a sequence number (``[17]``), checked on the way back, so that a
stray ``\\0`` (stages flush one when a stage before them dies) can never shift answers between segments.

We deformat ourselves instead of ``apertium-destxt``: the stream's special characters are escaped with a
backslash, ``* # ~`` (unknown-word and post-generation marks) and runs of whitespace holding a newline are
written as superblanks ``[...]``, and every :class:`Protected` span becomes a superblank holding its
``output``, which the pipeline carries through untouched (the final sequence superblank also matters:
the analyser drops a last token with no blank after it). The output is reformatted: superblank
brackets removed, escapes undone, unknown-word marks (``*`` unknown word, ``@`` not in the bilingual
dictionary, ``#`` form not generated) stripped and the marked words reported (:class:`ApertiumOutput`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import selectors
import shlex
import subprocess
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dragoman.engine.errors import BackendError, EngineTimeout, InvalidRequest, UnsupportedPair
from dragoman.engine.languages import resolve
from dragoman.engine.types import Pieces, Protected

log = logging.getLogger("dragoman.engine.apertium")

DEFAULT_TIMEOUT = 30.0
INSTALL_HINT = "install Apertium and the pair, e.g. `sudo apt-get install apertium apertium-eng-spa`"
#: Tools that take no ``-z`` (apertium-apy's list); everything else in a mode gets it.
_NO_NULL_FLUSH = re.compile(r"(vislcg3|cg-mwesplit|hfst-tokeni[sz]e|divvun-suggest)$")
_READ_SIZE = 1 << 16
_STDERR_KEEP = 4096
# Deformatting: a whitespace run holding a line break, a run of mark characters, or one escaped character.
_SPECIAL = re.compile(r"[\\\[\]^$/@<>{}]")
_DEFORMAT = re.compile(r"(\s*[\n\r\x0b\x0c\x85\u2028\u2029]\s*)|([*#~]+)|([\\\[\]^$/@<>{}])")
# Reformatting: an escape, a superblank, a mark, or a run of plain text.
_REFORMAT = re.compile(r"\\(.)|\[((?:[^\]\\]|\\.)*)\]|([*#@])|([^\\\[*#@]+)|(.)", re.S)
_UNESCAPE = re.compile(r"\\(.)", re.S)
_WORD = re.compile(r"[\w'’·-]+")
_SPACES = re.compile(r"  +")
_MODE_NAME = re.compile(r"([^-_@]+)-([^-_@]+)(?:[_@](.+))?")


@dataclass(frozen=True)
class ApertiumMode:
    """One installed translation direction: ``eng-spa.mode`` or a variant such as ``es-pt_BR.mode``."""

    name: str  # the file's stem: "eng-spa", "es-pt_BR"
    source: str  # FLORES code
    target: str  # FLORES code
    variant: str | None  # "BR", "valencia_uni"; None for the base mode, the pair's default
    path: Path

    @property
    def pack_id(self) -> str:
        return f"apertium-{self.name}"


@dataclass(frozen=True)
class ApertiumOutput:
    """One translated segment: clean text, and the words Apertium left untranslated (marks stripped)."""

    text: str
    unknown_words: tuple[str, ...] = ()


def parse_mode_name(stem: str) -> tuple[str, str, str | None] | None:
    """``"eng-cat_valencia"`` -> ``("eng_Latn", "cat_Latn", "valencia")``; None when it is no pair."""
    m = _MODE_NAME.fullmatch(stem)
    if m is None:
        return None
    try:
        source, target = resolve(m.group(1)), resolve(m.group(2))
    except InvalidRequest:
        return None
    return None if source == target else (source, target, m.group(3))


def discover_modes(dirs: Sequence[Path]) -> list[ApertiumMode]:
    """Every ``.mode`` file in ``dirs`` whose name is ``SRC-TGT[_variant]`` with known languages.

    A name found in several directories is taken from the first. Sorted by pair, base mode first.
    """
    found: dict[str, ApertiumMode] = {}
    for directory in dirs:
        try:
            paths = sorted(p for p in directory.glob("*.mode") if p.is_file())
        except OSError as exc:
            log.debug("cannot list Apertium modes in %s: %s", directory, exc)
            continue
        for path in paths:
            if path.stem in found:
                log.debug("Apertium mode %s: %s is shadowed by %s", path.stem, path, found[path.stem].path)
                continue
            parsed = parse_mode_name(path.stem)
            if parsed is None:
                log.debug(
                    "skipping Apertium mode %s: its name is not SRC-TGT[_variant] of known languages", path
                )
                continue
            found[path.stem] = ApertiumMode(path.stem, parsed[0], parsed[1], parsed[2], path)
    return sorted(
        found.values(), key=lambda m: (m.source, m.target, m.variant is not None, m.variant or "", m.name)
    )


@functools.lru_cache(maxsize=1)
def apertium_version() -> str | None:
    """The installed Apertium version (dpkg's, else lttoolbox's ``lt-proc -v``); None when absent."""
    for cmd in (["dpkg-query", "-W", "-f=${Version}", "apertium"], ["lt-proc", "-v"]):
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            continue
        out = (done.stdout or done.stderr).strip()
        if done.returncode == 0 and out:
            return out.splitlines()[0].removeprefix("lt-proc ")
    return None


def mode_commands(path: Path) -> list[list[str]]:
    """The stages of a ``.mode`` file as argument lists, ready to run with null flush."""
    commands: list[list[str]] = [[]]
    try:
        text = path.read_text(encoding="utf-8").strip()
        lexer = shlex.shlex(text.replace("$1", "-g").replace("$2", ""), posix=True, punctuation_chars="|")
        lexer.whitespace_split = True
        for token in lexer:
            if token == "|":
                commands.append([])
            else:
                commands[-1].append(token)
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and shlex's unbalanced quotes are ValueErrors
        raise BackendError(
            f"cannot read the Apertium pipeline in {path} ({exc}); reinstall the pair"
        ) from exc
    if not all(commands):
        raise BackendError(f"Apertium mode file {path} holds an empty pipeline stage; reinstall the pair")
    return [_null_flushed(argv) for argv in commands]


def _null_flushed(argv: list[str]) -> list[str]:
    if "-z" in argv or _NO_NULL_FLUSH.search(os.path.basename(argv[0])):
        return argv
    return [argv[0], "-z", *argv[1:]]


def _superblank(text: str) -> str:
    return "[" + _SPECIAL.sub(lambda m: "\\" + m.group(0), text) + "]"


def _deformat_text(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        return "\\" + m.group(3) if m.group(3) else _superblank(m.group(0))

    return _DEFORMAT.sub(one, text)


@dataclass(frozen=True)
class _Prepared:
    """A segment split into its outer whitespace and the block to send (None: nothing to translate)."""

    lead: str
    trail: str
    block: bytes | None  # the deformatted core, without its end marker
    fixed: str  # the core as it stands, used when there is nothing to translate
    collapse_spaces: bool  # the source has no double spaces, so dropped words' blanks may be merged


def _prepare(pieces: Pieces) -> _Prepared:
    items: list[str | Protected] = []
    for piece in pieces:
        piece = piece.replace("\0", "") if isinstance(piece, str) else piece
        if isinstance(piece, str) and items and isinstance(items[-1], str):
            items[-1] += piece
        elif (piece.output if isinstance(piece, Protected) else piece) != "":  # empty spans add nothing
            items.append(piece)
    lead = trail = ""
    if items and isinstance(items[0], str):
        stripped = items[0].lstrip()
        lead, items[0] = items[0][: len(items[0]) - len(stripped)], stripped
    if items and isinstance(items[-1], str):
        stripped = items[-1].rstrip()
        trail, items[-1] = items[-1][len(stripped) :], stripped
    items = [p for p in items if p != ""]
    fixed = "".join(p.output if isinstance(p, Protected) else p for p in items)
    plain = "".join(p for p in items if isinstance(p, str))
    if not plain.strip():
        return _Prepared(lead, trail, None, fixed, False)
    body = "".join(
        _superblank(p.output.replace("\0", "")) if isinstance(p, Protected) else _deformat_text(p)
        for p in items
    )
    block = body.encode("utf-8", "replace")
    return _Prepared(lead, trail, block, fixed, not any("  " in p for p in items if isinstance(p, str)))


def reformat(raw: str, *, collapse_spaces: bool = False) -> ApertiumOutput:
    """Apertium stream text -> clean text and the words that carried an unknown-word mark."""
    parts: list[str] = []  # plain text and superblank contents, alternating (plain first and last)
    plain: list[str] = []
    unknown: list[str] = []
    marked = False
    for m in _REFORMAT.finditer(raw):
        escaped, blank, mark, text, other = m.groups()
        if marked and text is not None and (word := _WORD.match(text)):
            unknown.append(word.group(0))
        marked = mark is not None
        if blank:
            parts += ["".join(plain), _UNESCAPE.sub(r"\1", blank)]
            plain.clear()
        elif blank is None and mark is None:
            plain.append(escaped or text or other or "")
    parts.append("".join(plain))
    if collapse_spaces:
        parts[::2] = [_SPACES.sub(" ", p) for p in parts[::2]]
    parts[0] = parts[0].lstrip()
    parts[-1] = parts[-1].rstrip()
    return ApertiumOutput("".join(parts), tuple(unknown))


class _Broken(Exception):
    """The pipeline died or answered out of step; it must be restarted."""


class _Stuck(Exception):
    """No block came back in time."""


class _Pipeline:
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
                raise _Broken("the pipeline had output left over from an earlier call")
            sel.register(self.in_fd, selectors.EVENT_WRITE)
            deadline = time.monotonic() + timeout
            while len(results) < len(blocks):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _Stuck
                for key, _ in sel.select(remaining):
                    if key.fd == self.in_fd:
                        try:
                            written += os.write(self.in_fd, payload[written : written + _READ_SIZE])
                        except BlockingIOError:
                            continue
                        except OSError as exc:
                            raise _Broken(f"writing to the pipeline failed: {exc}") from exc
                        if written == len(payload):
                            sel.unregister(self.in_fd)
                        continue
                    chunk = os.read(self.out_fd, _READ_SIZE)
                    if not chunk:
                        raise _Broken("the pipeline closed its output")
                    start = len(pending)
                    pending += chunk
                    while (end := pending.find(b"\0", start)) >= 0:
                        marker = b"[%d]" % (first + len(results))
                        if not pending[:end].endswith(marker):
                            raise _Broken(
                                f"the pipeline answered out of step: {bytes(pending[:end])[-80:]!r}"
                            )
                        results.append(bytes(pending[: end - len(marker)]))
                        del pending[: end + 1]
                        start = 0
                        deadline = time.monotonic() + timeout
        if pending or len(results) != len(blocks):
            raise _Broken("the pipeline answered more blocks than it was sent")
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


def _kill_all(holder: list[_Pipeline]) -> None:
    """Finalizer safety net: the engine should have called close()."""
    while holder:
        holder.pop().kill()


class ApertiumBackend:
    """One Apertium mode behind a warm pipeline; one request at a time, restarted when it dies."""

    def __init__(self, mode: ApertiumMode, *, timeout: float = DEFAULT_TIMEOUT, start: bool = True) -> None:
        self.mode = mode
        self.pack_id = mode.pack_id
        self.timeout = timeout
        self._commands = mode_commands(mode.path)
        self._lock = threading.Lock()
        self._holder: list[_Pipeline] = []  # the running pipeline, if any
        self._closed = False
        self._local = threading.local()
        self._finalizer = weakref.finalize(self, _kill_all, self._holder)
        if start:
            with self._lock:
                self._pipeline()

    @property
    def pids(self) -> tuple[int, ...]:
        """Process ids of the running stages (empty when none runs)."""
        return self._holder[0].pids if self._holder else ()

    @property
    def last_unknown_words(self) -> int:
        """How many unknown words the calling thread's last call left untranslated."""
        return int(getattr(self._local, "unknown", 0))

    def translate_batch(self, batch: Sequence[Pieces], source: str, target: str) -> list[str]:
        return [out.text for out in self.translate_batch_detailed(batch, source, target)]

    def translate_batch_detailed(
        self, batch: Sequence[Pieces], source: str, target: str
    ) -> list[ApertiumOutput]:
        """Translate each segment through the one running pipeline; marks stripped, unknown words listed."""
        if (source, target) != (self.mode.source, self.mode.target):
            raise UnsupportedPair(
                f"pack {self.pack_id} translates {self.mode.source}->{self.mode.target}, "
                f"not {source}->{target}; route the request through a pack for that pair"
            )
        prepared = [_prepare(pieces) for pieces in batch]
        raw = iter(self._run([p.block for p in prepared if p.block is not None]))
        outputs: list[ApertiumOutput] = []
        for prep in prepared:
            out = ApertiumOutput(prep.fixed)
            if prep.block is not None:
                out = reformat(next(raw).decode("utf-8", "replace"), collapse_spaces=prep.collapse_spaces)
            outputs.append(ApertiumOutput(prep.lead + out.text + prep.trail, out.unknown_words))
        self._local.unknown = sum(len(o.unknown_words) for o in outputs)
        return outputs

    def _pipeline(self) -> _Pipeline:
        if self._holder and self._holder[0].alive():
            return self._holder[0]
        if self._holder:
            log.warning("Apertium %s: a stage died (%s); restarting", self.pack_id, self._holder[0].failure())
            self._holder.pop().kill()
        log.debug("starting Apertium pipeline %s from %s", self.pack_id, self.mode.path)
        self._holder.append(_Pipeline(self._commands, self.mode.name))
        return self._holder[0]

    def _run(self, blocks: list[bytes]) -> list[bytes]:
        if not blocks:
            return []
        with self._lock:
            if self._closed:
                raise BackendError(f"Apertium backend {self.pack_id} is closed; load the pack again")
            problem = ""
            for _attempt in range(2):
                pipe = self._pipeline()
                try:
                    return pipe.exchange(blocks, self.timeout)
                except _Stuck:
                    self._holder.clear()
                    pipe.kill()
                    raise EngineTimeout(
                        f"Apertium {self.pack_id} returned nothing for {self.timeout:g} s; its pipeline was "
                        "killed and restarts on the next call; retry with shorter segments"
                    ) from None
                except _Broken as exc:
                    self._holder.clear()
                    problem = f"{exc}: {pipe.failure()}"
                    log.warning("Apertium %s failed (%s); restarting", self.pack_id, problem)
            raise BackendError(
                f"Apertium pipeline {self.pack_id} failed twice ({problem}); check that `apertium "
                f"{self.mode.name}` works in a shell, or {INSTALL_HINT}"
            )

    def close(self) -> None:
        """Stop the pipeline's processes; later calls raise BackendError."""
        with self._lock:
            self._closed = True
            while self._holder:
                self._holder.pop().close()
        self._finalizer.detach()
