"""Installed models of any kind: one directory per model under the kind's root, named by the model's id.

MT packs live in ``settings.engine.packs_dir`` (see :mod:`dragoman.models.packs`); later kinds (speech models,
voices) get their own roots and the same layout. Besides the model's files, each installed model holds
``.dragoman-install.json`` (:data:`INSTALL_RECORD`): where it came from, the archive's sha256, when it was
installed and the sha256 of every file, so :meth:`ModelStore.verify` can tell a damaged model from a good
one. Names starting with a dot in a root (``.staging``, ``.trash-*``) are dragoman's working space, never
models.

Changes to a root (install, remove) happen under :func:`store_lock`, an advisory lock on the root
directory itself, and are renames, so a reader never sees half a model.

An install works in its own folder ``.staging/install-*`` (:func:`staging_dir`), locked with ``flock`` by the
process doing it for as long as it runs; the kernel lets go of the lock when that process dies, even by
kill -9. :func:`sweep_stale` (run when an engine starts and before each install) removes the staging folders
nobody holds and the ``.trash-*`` folders an interrupted remove or replace left behind, so nothing of a killed
install survives the next start.

A model directory that cannot be read (a bad manifest, files missing, a link out of it, no permission) is
listed as broken with the reason and skipped; it never stops the others from being listed or used.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import stat
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic

from dragoman.errors import PackInstallError, PackIntegrityError, PackNotInstalled, PackUnsafe
from dragoman.models.kind import I, M, ModelKind
from dragoman.progress import ProgressCallback

log = logging.getLogger("dragoman.models.store")

#: Directories of a root that are not models, with the reason.
Broken = list[tuple[Path, str]]

INSTALL_RECORD = ".dragoman-install.json"
MAX_RECORD_BYTES = 64 * 1024 * 1024  # a record lists each file's sha256: about 100 bytes a file
STAGING_DIR = ".staging"
TRASH_PREFIX = ".trash-"
#: A staging folder while its install runs (locked by that process) and for the instant before it is locked.
STAGING_PREFIX = "install-"
STAGING_NEW_PREFIX = "new-"
#: Age after which a staging folder that cannot be lock-checked (``new-*``; any, where there is no ``flock``)
#: is taken as left behind.
STALE_UNLOCKED_SECONDS = 600.0
STALE_NO_FLOCK_SECONDS = 24 * 3600.0
LOCK_TIMEOUT_SECONDS = 120.0
HASH_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class InstallRecord:
    """What ``.dragoman-install.json`` holds.

    The id is written under the key ``pack_id`` whatever the kind, as records written before there were
    other kinds have it; ``kind`` is empty in those records.
    """

    model_id: str
    version: str
    source: str
    source_kind: str  # "directory", "file", "url" or "index"
    archive_sha256: str | None
    installed_at: str  # ISO 8601, UTC
    files: tuple[tuple[str, str], ...]  # (path relative to the model, sha256), sorted
    kind: str = ""  # the ModelKind's name ("mt")

    def to_json(self) -> dict[str, Any]:
        return {
            "pack_id": self.model_id,
            "kind": self.kind,
            "version": self.version,
            "source": self.source,
            "source_kind": self.source_kind,
            "archive_sha256": self.archive_sha256,
            "installed_at": self.installed_at,
            "files": dict(self.files),
        }

    @classmethod
    def from_json(cls, data: Any, where: Path) -> InstallRecord:
        if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
            raise PackIntegrityError(f"{where}: not an install record (needs an object with 'files')")
        files = data["files"]
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
            raise PackIntegrityError(f"{where}: 'files' must map relative paths to sha256 strings")
        outside = [k for k in files if not _inside_path(k)]
        if outside:
            raise PackUnsafe(
                f"{where}: 'files' names {outside[0]!r}, outside the model (absolute or with '..'); "
                "the record was not written by dragoman"
            )
        sha = data.get("archive_sha256")
        return cls(
            model_id=str(data.get("pack_id", "")),
            version=str(data.get("version", "")),
            source=str(data.get("source", "")),
            source_kind=str(data.get("source_kind", "")),
            archive_sha256=sha if isinstance(sha, str) else None,
            installed_at=str(data.get("installed_at", "")),
            files=tuple(sorted(files.items())),
            kind=str(data.get("kind", "")),
        )


def read_record(model_dir: Path) -> InstallRecord | None:
    """The install record of a model directory, or None when it has none (a model copied by hand)."""
    path = model_dir / INSTALL_RECORD
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_RECORD_BYTES:
            raise PackIntegrityError(
                f"{path} is not an install record (not a file, or over {MAX_RECORD_BYTES} bytes)"
            )
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise PackIntegrityError(f"{path} cannot be read: {exc}") from exc
    try:
        return InstallRecord.from_json(json.loads(text), path)
    except (ValueError, RecursionError) as exc:
        raise PackIntegrityError(f"{path} is not valid JSON: {exc}") from exc


def _inside_path(rel: str) -> bool:
    """Whether a path of an install record stays inside its model: relative, no '..', no drive, no NUL."""
    normal = rel.replace("\\", "/")
    parts = normal.split("/")
    return (
        bool(rel)
        and "\0" not in rel
        and not normal.startswith("/")
        and ":" not in parts[0]
        and ".." not in parts
    )


def write_record(model_dir: Path, record: InstallRecord) -> None:
    (model_dir / INSTALL_RECORD).write_text(json.dumps(record.to_json(), indent=1) + "\n", encoding="utf-8")


@dataclass(frozen=True)
class VerifyReport:
    """What :meth:`ModelStore.verify` checked. A mismatch raises instead of returning.

    :meth:`to_dict` names the id ``pack_id`` for every kind, as ``dragoman packs verify --json`` always has.
    """

    model_id: str
    path: Path
    version: str
    files_checked: int
    bytes_checked: int
    has_record: bool
    source: str | None
    archive_sha256: str | None
    installed_at: str | None
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "pack_id": self.model_id,
            "path": str(self.path),
            "version": self.version,
            "ok": True,
            "files_checked": self.files_checked,
            "bytes_checked": self.bytes_checked,
            "has_record": self.has_record,
            "source": self.source,
            "archive_sha256": self.archive_sha256,
            "installed_at": self.installed_at,
            "warnings": list(self.warnings),
        }


def file_sha256(path: Path) -> tuple[str, int]:
    """(hex sha256, size) of a file, read in chunks."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def model_files(model_dir: Path) -> list[Path]:
    """Regular files of a model (the install record excluded), sorted."""
    return sorted(p for p in model_dir.rglob("*") if p.is_file() and p.name != INSTALL_RECORD)


def dir_size(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        with contextlib.suppress(OSError):
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
    return total


@contextlib.contextmanager
def store_lock(root: Path, timeout: float = LOCK_TIMEOUT_SECONDS) -> Iterator[None]:
    """Hold the advisory lock of a store's root directory (created if needed) while changing it.

    POSIX: ``flock`` on the directory itself, so no lock file is left behind. Elsewhere: a lock file
    created with ``O_CREAT | O_EXCL``.
    """
    root.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield from _exclusive_file_lock(root / ".dragoman.lock", deadline)
        return
    fd = os.open(root, os.O_RDONLY)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise PackInstallError(
                        f"another dragoman process has held the lock on {root} for {timeout:.0f} s; "
                        "wait for its install or remove to finish, then retry"
                    ) from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _exclusive_file_lock(path: Path, deadline: float) -> Iterator[None]:  # pragma: no cover - Windows
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            break
        except FileExistsError:
            if time.monotonic() > deadline:
                raise PackInstallError(
                    f"the lock file {path} is held; if no dragoman install is running, delete it and retry"
                ) from None
            time.sleep(0.05)
    try:
        yield
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()


def discard_dir(path: Path) -> None:
    """Delete a directory tree, first renaming it to a trash name so it vanishes from view at once."""
    trash = path.parent / f"{TRASH_PREFIX}{path.name}-{uuid.uuid4().hex[:8]}"
    try:
        os.replace(path, trash)
    except FileNotFoundError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def install_identity(model_dir: Path) -> tuple[int, ...]:
    """What changes whenever a model directory is installed again, removed or replaced.

    The directory's device, inode and modification time, and those of its install record: an install or
    ``--replace`` renames a new directory into place and writes a new record, so a cache comparing two
    identities knows a model it loaded is no longer the one on disk. Empty when the directory is gone.
    """
    try:
        st = model_dir.stat()
    except OSError:
        return ()
    ident: tuple[int, ...] = (st.st_dev, st.st_ino, st.st_mtime_ns)
    with contextlib.suppress(OSError):
        rec = (model_dir / INSTALL_RECORD).stat()
        ident += (rec.st_ino, rec.st_mtime_ns, rec.st_size)
    return ident


class ModelStore(Generic[M, I]):
    """The models of one kind installed under ``root``, one directory each; every call reads afresh."""

    def __init__(self, kind: ModelKind[M, I], root: Path) -> None:
        self.kind = kind
        self.root = root

    def scan(self) -> tuple[list[tuple[M, Path]], Broken]:
        """The readable models with their directories, and the directories that are not, with the reason."""
        good: list[tuple[M, Path]] = []
        bad: Broken = []
        noun = self.kind.noun
        try:
            children = sorted(self.root.iterdir())
        except FileNotFoundError:
            return good, bad
        except OSError as exc:
            log.warning("cannot read the %ss directory %s: %s", noun, self.root, exc)
            return good, [(self.root, f"cannot read the {noun}s directory: {exc}")]
        seen: dict[str, Path] = {}
        for child in children:
            if child.name.startswith(".") or not child.is_dir():
                continue
            found = _try_read(self.kind, child)
            if isinstance(found, str):
                bad.append((child, found))
                continue
            manifest = found
            if manifest.id in seen:
                bad.append((child, f"{noun} id {manifest.id!r} is already provided by {seen[manifest.id]}"))
                continue
            seen[manifest.id] = child
            good.append((manifest, child))
        for path, why in bad:
            log.warning("skipping broken %s directory %s: %s", noun, path, why)
        return good, bad

    def installed(self) -> list[tuple[M, Path]]:
        """Every readable installed model with its directory, sorted by directory name."""
        return self.scan()[0]

    def broken(self) -> Broken:
        """Directories of the store that are not readable models, with the reason."""
        return self.scan()[1]

    def ids(self) -> list[str]:
        return sorted(m.id for m, _ in self.installed())

    def infos(self) -> list[I]:
        return [self.kind.info(manifest, path) for manifest, path in self.installed()]

    def _not_installed(self, model_id: str) -> PackNotInstalled:
        ids = self.ids()
        return PackNotInstalled(
            f"{self.kind.noun} {model_id!r} is not installed in {self.root}; "
            f"installed: {', '.join(ids) or 'none'}; " + self.kind.hint()
        )

    def get(self, model_id: str) -> tuple[M, Path]:
        """The manifest and directory of an installed model; raises PackNotInstalled naming what is."""
        direct = self.root / model_id
        if _plain_name(model_id) and direct.is_dir():
            found = _try_read(self.kind, direct)
            if not isinstance(found, str) and found.id == model_id:
                return found, direct
        for found, path in self.installed():
            if found.id == model_id:
                return found, path
        raise self._not_installed(model_id)

    def _locate(self, model_id: str) -> Path:
        """The directory of a model by id, or of a broken model directory by its name."""
        try:
            return self.get(model_id)[1]
        except PackNotInstalled:
            direct = self.root / model_id
            if _plain_name(model_id) and direct.is_dir():
                return direct
            raise

    def remove(self, model_id: str) -> Path:
        """Uninstall a model (or a broken model directory named ``model_id``); returns where it was."""
        with store_lock(self.root):
            path = self._locate(model_id)
            discard_dir(path)
        log.info("removed %s %s from %s", self.kind.noun, model_id, path)
        return path

    def verify(self, model_id: str, *, progress: ProgressCallback | None = None) -> VerifyReport:
        """Check structure and re-hash every file against the install record.

        Raises PackIntegrityError naming the damaged files (and how to repair) on any mismatch.
        """
        path = self._locate(model_id)
        manifest = self.kind.read(path)  # structure: raises PackIntegrityError
        record = read_record(path)
        command = self.kind.command
        if record is None:
            return VerifyReport(
                model_id=manifest.id,
                path=path,
                version=manifest.version,
                files_checked=0,
                bytes_checked=0,
                has_record=False,
                source=None,
                archive_sha256=None,
                installed_at=None,
                warnings=(
                    f"{path} has no {INSTALL_RECORD} (installed by hand?): only its structure was checked; "
                    f"reinstall with `{command} install PATH --replace` to record file hashes",
                ),
            )
        problems: list[str] = []
        total = len(record.files)
        checked_bytes = 0
        for i, (rel, expected) in enumerate(record.files, 1):
            target = path / rel
            if progress is not None:
                progress(i - 1, total, f"verifying {rel}")
            if not target.is_file():
                problems.append(f"{rel} is missing")
                continue
            actual, size = file_sha256(target)
            checked_bytes += size
            if actual != expected:
                problems.append(f"{rel} has sha256 {actual[:12]}..., expected {expected[:12]}...")
        if progress is not None:
            progress(total, total, "verified")
        recorded = {rel for rel, _ in record.files}
        extra = [p.relative_to(path).as_posix() for p in model_files(path)]
        warnings = tuple(f"{rel} is not in the install record" for rel in extra if rel not in recorded)
        if problems:
            shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
            raise PackIntegrityError(
                f"{self.kind.noun} {manifest.id} at {path} is damaged: {shown}. Reinstall it with "
                f"`{command} install {record.source or 'SOURCE'} --replace`"
            )
        return VerifyReport(
            model_id=manifest.id,
            path=path,
            version=manifest.version,
            files_checked=total,
            bytes_checked=checked_bytes,
            has_record=True,
            source=record.source or None,
            archive_sha256=record.archive_sha256,
            installed_at=record.installed_at or None,
            warnings=warnings,
        )


def _try_read(kind: ModelKind[M, I], path: Path) -> M | str:
    """A model directory's manifest, or why it cannot be used: no error of one directory stops the rest."""
    try:
        return kind.read(path)
    except PackIntegrityError as exc:
        return exc.message
    except OSError as exc:
        return f"cannot be read: {exc}"
    except Exception as exc:  # a kind's read that fails unexpectedly still breaks only its own directory
        log.debug("reading %s failed", path, exc_info=True)
        return f"cannot be read: {type(exc).__name__}: {exc}"


# --- staging folders and leftovers --------------------------------------------------------------------------


def _flock(fd: int) -> bool:
    """Try to take an exclusive flock without waiting; True when taken."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@contextlib.contextmanager
def staging_dir(root: Path) -> Iterator[Path]:
    """A fresh working folder ``<root>/.staging/install-*``, locked by this process while the block runs.

    The folder is made as ``new-*``, locked (``flock`` on the folder itself), then renamed to ``install-*``:
    every ``install-*`` folder is either held by a live process or left by a dead one, which
    :func:`sweep_stale` can tell apart at once. Removed when the block ends, with ``.staging`` if empty.
    """
    staging = root / STAGING_DIR
    fresh: Path | None = None
    for _ in range(5):
        staging.mkdir(parents=True, exist_ok=True)
        try:
            fresh = Path(tempfile.mkdtemp(prefix=STAGING_NEW_PREFIX, dir=staging))
            break
        except FileNotFoundError:  # another install removed the empty staging dir meanwhile
            continue
    if fresh is None:
        raise PackInstallError(f"cannot create a staging directory in {staging}; check it is writable")
    fd: int | None = None
    work = fresh
    try:
        try:
            import fcntl  # noqa: F401
        except ImportError:  # pragma: no cover - Windows: no lock, the age bound alone applies
            pass
        else:
            fd = os.open(fresh, os.O_RDONLY)
            _flock(fd)
        locked = staging / (STAGING_PREFIX + fresh.name.removeprefix(STAGING_NEW_PREFIX))
        os.rename(fresh, locked)
        work = locked
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if fd is not None:
            os.close(fd)
        with contextlib.suppress(OSError):
            staging.rmdir()  # only when no other install is using it


def _age(path: Path, now: float) -> float:
    try:
        return now - path.lstat().st_mtime
    except OSError:
        return 0.0


def _sweep_staging(staging: Path) -> list[Path]:
    removed: list[Path] = []
    try:
        children = list(staging.iterdir())
    except OSError:
        return removed
    try:
        import fcntl  # noqa: F401

        have_flock = True
    except ImportError:  # pragma: no cover - Windows
        have_flock = False
    now = time.time()
    for child in children:
        name = child.name
        if name.startswith(STAGING_NEW_PREFIX):
            if _age(child, now) > STALE_UNLOCKED_SECONDS:
                shutil.rmtree(child, ignore_errors=True)
                removed.append(child)
            continue
        if not name.startswith(STAGING_PREFIX) or child.is_symlink() or not child.is_dir():
            continue  # not of our naming: left alone
        if not have_flock:  # pragma: no cover - Windows
            if _age(child, now) > STALE_NO_FLOCK_SECONDS:
                shutil.rmtree(child, ignore_errors=True)
                removed.append(child)
            continue
        try:
            fd = os.open(child, os.O_RDONLY)
        except OSError:
            continue
        try:
            if _flock(fd):  # nobody holds it: its install died
                shutil.rmtree(child, ignore_errors=True)
                removed.append(child)
        finally:
            os.close(fd)
    with contextlib.suppress(OSError):
        staging.rmdir()
    return removed


def sweep_stale(root: Path) -> list[Path]:
    """Remove what killed installs and removes left in a store root; returns what was removed.

    Staging folders (``.staging/install-*``) whose lock no live process holds go at once; ``.trash-*``
    folders go when the store lock is free (an install or remove holding it may be using one). Never raises
    and never waits: a store that cannot be read or is busy is left for the next start.
    """
    if not root.is_dir():
        return []
    removed = _sweep_staging(root / STAGING_DIR)
    try:
        trash = [p for p in root.iterdir() if p.name.startswith(TRASH_PREFIX)]
    except OSError:
        trash = []
    if trash:
        try:
            with store_lock(root, timeout=0):
                for child in trash:
                    shutil.rmtree(child, ignore_errors=True)
                    removed.append(child)
        except (PackInstallError, OSError):
            pass  # busy or unwritable: the next start sweeps
    for path in removed:
        log.info("removed %s, left by an interrupted install or remove", path)
    return removed


def _plain_name(name: str) -> bool:
    return (
        bool(name) and not name.startswith(".") and "/" not in name and "\\" not in name and "\0" not in name
    )
