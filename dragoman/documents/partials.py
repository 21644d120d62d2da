"""Temporary files written beside their destination, and how none is ever left behind.

Every file dragoman writes (a translated document, its DOCX export, the glossary file) is first written to a
hidden temporary in the destination's directory and renamed into place once complete. The temporary's name
says whose it is::

    .<stem>.dragoman-<host>-<pid>-<token>.part<suffix>

``host`` is a short tag of this machine and its process namespace, ``pid`` the writing process, ``token``
random. A temporary is *stale* when its writer is gone: the host tag is ours and the pid names no live
process (or names this very process, which holds no such temporary: a previous process given the same pid,
as happens in containers); or, whatever the name says, when it has not been modified for
:data:`STALE_AFTER_SECONDS` (a writer on another machine sharing the folder; the names older versions
wrote, ``.<stem>.XXXXXXXX.part<suffix>`` and ``.<name>.XXXXXXXX.tmp``, which carry no pid). Stale
temporaries are removed:

- when a process first writes into a directory (:func:`create` sweeps it once per process);
- when a front door starts (:func:`startup`): every process that writes records, in a small journal under
  its state directory (``<state_dir>/partials/<host>-<pid>-<token>.dirs``), the directories it wrote
  temporaries into; the next start sweeps those directories (and the data directories it is given) and
  drops the journals of processes that are gone. A process killed with ``kill -9`` leaves temporaries and
  its journal; the next start of any front door removes both;
- when the process is told to end (:func:`handle_signals`: SIGTERM, SIGINT) or exits: its own live
  temporaries are removed before the signal takes its usual course, and no new one is created after it.

Files are created with mode ``0o666`` less the umask (what any program creating a file gets), not the
``0o600`` of :func:`tempfile.mkstemp`; an overwritten file keeps the mode it had (:func:`mode_for`).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import re
import secrets
import signal
import socket
import stat
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import FrameType

from dragoman.errors import Cancelled

log = logging.getLogger("dragoman.documents")

#: A temporary not modified for this long is removed whoever wrote it (its writer cannot still be at work:
#: the file size, page and deadline bounds end any translation long before).
STALE_AFTER_SECONDS = 24 * 3600
#: Directories one process records in its journal (a long-lived server writing everywhere stays bounded).
MAX_JOURNAL_DIRS = 10_000
#: Characters of the destination's stem and suffix kept in a temporary's name (file names have 255 bytes).
_STEM_CHARS = 96
_SUFFIX_CHARS = 24

_OURS = re.compile(
    r"^\.(?P<stem>.*)\.dragoman-(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]{1,10})-(?P<token>[0-9a-f]{8})\.part"
    r"(?P<suffix>(\.[^./]*)?)$",
    re.DOTALL,
)
#: Names older versions wrote (tempfile's 8 random characters): removed only by age.
_LEGACY = (
    re.compile(r"^\..+\.[a-z0-9_]{8}\.part(\.[^./]*)?$", re.DOTALL),
    re.compile(r"^\..+\.json\.[a-z0-9_]{8}\.tmp$", re.DOTALL),
)


def _host_tag() -> str:
    """This machine and process namespace, as 8 hex digits (pids are only comparable within one)."""
    namespace = ""
    with contextlib.suppress(OSError):
        namespace = os.readlink("/proc/self/ns/pid")
    return hashlib.sha1(f"{socket.gethostname()}\x00{namespace}".encode()).hexdigest()[:8]


_HOST = _host_tag()
_lock = threading.RLock()  # re-entrant: a signal handler may run while this thread holds it
_live: set[Path] = set()  # this process's temporaries not yet renamed or removed
_swept: set[Path] = set()  # directories swept by this process
_journal: Path | None = None  # this process's journal, once a front door called startup()
_journal_dirs: set[Path] = set()
_closing = False  # set by a terminating signal: no new temporary is created


def partial_name(destination: Path) -> str:
    """A fresh temporary's name for ``destination`` (of this process)."""
    stem = destination.stem[:_STEM_CHARS]
    suffix = destination.suffix[:_SUFFIX_CHARS]
    return f".{stem}.dragoman-{_HOST}-{os.getpid()}-{secrets.token_hex(4)}.part{suffix}"


def is_partial(name: str) -> bool:
    """Whether ``name`` is one of our temporaries (of any process, this version's naming)."""
    return _OURS.match(name) is not None


def create(destination: Path) -> Path:
    """Create an empty temporary beside ``destination`` (mode 0o666 less the umask) and return its path.

    The directory is swept of stale temporaries first (once per process) and recorded in the journal.
    Raises :class:`~dragoman.errors.Cancelled` once the process has been told to end."""
    directory = destination.parent
    sweep_once(directory)
    _record(directory)
    for _ in range(100):
        path = directory / partial_name(destination)
        with _lock:
            if _closing:
                raise Cancelled("dragoman is shutting down; nothing was written")
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
            except FileExistsError:
                continue
            os.close(fd)
            _live.add(path)
        return path
    raise FileExistsError(f"no free temporary name in {directory}")  # pragma: no cover


def release(path: Path) -> None:
    """``path`` was renamed into place (or removed): it is no longer this process's to clean up."""
    with _lock:
        _live.discard(path)


def discard(path: Path) -> None:
    """Remove a temporary of this process (if still there)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    release(path)


def created_mode(path: Path) -> int:
    """The permission bits a new file gets here: those of the freshly created temporary ``path``."""
    return stat.S_IMODE(path.stat().st_mode)


def mode_for(destination: Path, new_mode: int) -> int:
    """The mode to give the file that replaces ``destination``: the mode it has when it exists (an
    overwritten output keeps its permissions), else ``new_mode`` (0o666 less the umask)."""
    try:
        return stat.S_IMODE(destination.stat().st_mode)
    except OSError:
        return new_mode


# ----- finding stale temporaries ----------------------------------------------------------------------
def _alive(pid: int) -> bool:
    """Whether ``pid`` names a running process on this machine (a zombie is not running)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    except OSError:  # pragma: no cover - other platforms
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rpartition(b")")[2].split()[:1]
    except OSError:
        return True
    return state not in ([b"Z"], [b"X"])


def _owner_gone(host: str, pid: int, path: Path) -> bool:
    if host != _HOST or os.name != "posix":
        return False
    if pid == os.getpid():
        with _lock:
            return path not in _live
    return not _alive(pid)


def is_stale(path: Path, *, now: float | None = None) -> bool:
    """Whether ``path`` is a temporary of ours (or of an older version) that nobody will finish."""
    name = path.name
    match = _OURS.match(name)
    try:
        st = path.lstat()
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    if match is not None and _owner_gone(match["host"], int(match["pid"]), path):
        return True
    if match is None and not any(p.match(name) for p in _LEGACY):
        return False
    return (now if now is not None else time.time()) - st.st_mtime > STALE_AFTER_SECONDS


def sweep(directory: Path) -> list[Path]:
    """Remove the stale temporaries in ``directory``; the paths removed. Never raises."""
    removed: list[Path] = []
    now = time.time()
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(".") or (".part" not in entry.name and not entry.name.endswith(".tmp")):
            continue
        path = Path(entry.path)
        if is_stale(path, now=now):
            try:
                path.unlink()
            except OSError as exc:
                log.debug("could not remove the stale temporary %s: %s", path, exc)
            else:
                log.info("removed %s, left by a dragoman that did not finish", path)
                removed.append(path)
    return removed


def sweep_once(directory: Path) -> list[Path]:
    """:func:`sweep` ``directory`` unless this process already did."""
    key = Path(os.path.abspath(directory))
    with _lock:
        if key in _swept:
            return []
        _swept.add(key)
    return sweep(key)


# ----- the journal ------------------------------------------------------------------------------------
def _record(directory: Path) -> None:
    """Note in this process's journal that it writes temporaries into ``directory``."""
    global _journal
    key = Path(os.path.abspath(directory))
    with _lock:
        journal = _journal
        if journal is None or key in _journal_dirs or len(_journal_dirs) >= MAX_JOURNAL_DIRS:
            return
        _journal_dirs.add(key)
    try:
        fd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, os.fsencode(str(key)) + b"\n")
        finally:
            os.close(fd)
    except OSError as exc:
        log.debug("could not write the temporaries journal %s: %s", journal, exc)


_JOURNAL = re.compile(r"^(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]{1,10})-(?P<token>[0-9a-f]{8})\.dirs$")


def _journal_dir(state_dir: Path) -> Path:
    return Path(state_dir) / "partials"


def startup(state_dir: Path, also: Iterable[Path] = ()) -> list[Path]:
    """What a front door calls as it starts: remove the temporaries earlier processes left (in the
    directories their journals name and in ``also``), drop the journals of processes that are gone, and
    keep a journal for this process. Returns the temporaries removed; never raises."""
    global _journal
    removed: list[Path] = []
    folder = _journal_dir(state_dir)
    directories: dict[Path, None] = dict.fromkeys(Path(os.path.abspath(d)) for d in also)
    finished: list[Path] = []
    try:
        journals = [Path(e.path) for e in os.scandir(folder) if _JOURNAL.match(e.name)]
    except OSError:
        journals = []
    now = time.time()
    for journal in journals:
        if journal == _journal:
            continue
        match = _JOURNAL.match(journal.name)
        assert match is not None
        try:
            lines = journal.read_bytes().splitlines()[:MAX_JOURNAL_DIRS]
            age = now - journal.stat().st_mtime
        except OSError:
            continue
        directories.update((Path(os.fsdecode(line)), None) for line in lines if line.strip())
        pid = int(match["pid"])
        mine = match["host"] == _HOST and pid == os.getpid()
        if (match["host"] == _HOST and (mine or not _alive(pid))) or age > STALE_AFTER_SECONDS:
            finished.append(journal)
    for directory in directories:
        removed += sweep(directory)
        with _lock:
            _swept.add(directory)
    for journal in finished:
        with contextlib.suppress(OSError):
            journal.unlink()
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
        with _lock:
            if _journal is None:
                _journal = folder / f"{_HOST}-{os.getpid()}-{secrets.token_hex(4)}.dirs"
                atexit.register(_at_exit)
    return removed


# ----- ending -----------------------------------------------------------------------------------------
def remove_live() -> list[Path]:
    """Remove every temporary this process holds (it is ending); no new one is created afterwards."""
    global _closing
    with _lock:
        _closing = True
        paths = list(_live)
        _live.clear()
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink()
    return paths


def _at_exit() -> None:
    remove_live()
    journal = _journal
    if journal is not None:
        with contextlib.suppress(OSError):
            journal.unlink()


@contextlib.contextmanager
def handle_signals(signals: Iterable[int] = (signal.SIGTERM, signal.SIGINT)) -> Iterator[None]:
    """While inside, SIGTERM and SIGINT first remove this process's temporaries, then take their usual
    course (the previous handler runs; with the default one the process ends by the signal, as before).

    Hosts of MCP servers send SIGTERM about two seconds after closing stdin, and kill a little later: a
    half-written file must not survive either. Only the main thread may install handlers; elsewhere this does
    nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, signal._HANDLER] = {}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        before = previous.get(signum, signal.SIG_DFL)
        if before == signal.SIG_IGN or before is None:
            return
        removed = remove_live()
        if removed:
            log.warning("signal %d: removed %d unfinished file(s)", signum, len(removed))
        if callable(before):
            before(signum, frame)
        elif before == signal.SIG_DFL:
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    for signum in signals:
        try:
            previous[signum] = signal.signal(signum, on_signal)
        except (ValueError, OSError):  # pragma: no cover - not settable here
            continue
    try:
        yield
    finally:
        for signum, before in previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(signum, before)


def live() -> tuple[Path, ...]:
    """This process's temporaries (tests check that none is left)."""
    with _lock:
        return tuple(_live)
