"""Installed packs: one directory per pack under ``settings.packs_dir``, named by the pack's id.

Besides the pack files, each installed pack holds ``.dragoman-install.json`` (:data:`INSTALL_RECORD`):
where it came from, the archive's sha256, when it was installed and the sha256 of every file, so
:meth:`PackStore.verify` can tell a damaged pack from a good one. Names starting with a dot in the packs
directory (``.staging``, ``.trash-*``) are dragoman's working space, never packs.

Changes to the directory (install, remove) happen under :func:`packs_lock`, an advisory lock on the
packs directory itself, and are renames, so a reader never sees half a pack.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dragoman.errors import PackInstallError, PackIntegrityError, PackNotInstalled
from dragoman.models.manifest import PackManifest, read_manifest
from dragoman.models.types import PackInfo
from dragoman.progress import ProgressCallback
from dragoman.settings import Settings

log = logging.getLogger("dragoman.packs.store")

#: Installed packs with their directories; directories that are not packs with the reason.
Installed = list[tuple[PackManifest, Path]]
Broken = list[tuple[Path, str]]

INSTALL_RECORD = ".dragoman-install.json"
STAGING_DIR = ".staging"
TRASH_PREFIX = ".trash-"
LOCK_TIMEOUT_SECONDS = 120.0
HASH_CHUNK = 1024 * 1024
INSTALL_HINT = (
    "install one with `dragoman packs install NAME_OR_PATH_OR_URL` (`dragoman packs available` lists)"
)


@dataclass(frozen=True)
class InstallRecord:
    """What ``.dragoman-install.json`` holds."""

    pack_id: str
    version: str
    source: str
    source_kind: str  # "directory", "file", "url" or "index"
    archive_sha256: str | None
    installed_at: str  # ISO 8601, UTC
    files: tuple[tuple[str, str], ...]  # (path relative to the pack, sha256), sorted

    def to_json(self) -> dict[str, Any]:
        return {
            "pack_id": self.pack_id,
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
        sha = data.get("archive_sha256")
        return cls(
            pack_id=str(data.get("pack_id", "")),
            version=str(data.get("version", "")),
            source=str(data.get("source", "")),
            source_kind=str(data.get("source_kind", "")),
            archive_sha256=sha if isinstance(sha, str) else None,
            installed_at=str(data.get("installed_at", "")),
            files=tuple(sorted(files.items())),
        )


def read_record(pack_dir: Path) -> InstallRecord | None:
    """The install record of a pack directory, or None when it has none (a pack copied by hand)."""
    path = pack_dir / INSTALL_RECORD
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PackIntegrityError(f"{path} cannot be read: {exc}") from exc
    try:
        return InstallRecord.from_json(json.loads(text), path)
    except json.JSONDecodeError as exc:
        raise PackIntegrityError(f"{path} is not valid JSON: {exc}") from exc


def write_record(pack_dir: Path, record: InstallRecord) -> None:
    (pack_dir / INSTALL_RECORD).write_text(json.dumps(record.to_json(), indent=1) + "\n", encoding="utf-8")


@dataclass(frozen=True)
class VerifyReport:
    """What :meth:`PackStore.verify` checked. A mismatch raises instead of returning."""

    pack_id: str
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
            "pack_id": self.pack_id,
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


def pack_files(pack_dir: Path) -> list[Path]:
    """Regular files of a pack (the install record excluded), sorted."""
    return sorted(p for p in pack_dir.rglob("*") if p.is_file() and p.name != INSTALL_RECORD)


def dir_size(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        with contextlib.suppress(OSError):
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
    return total


@contextlib.contextmanager
def packs_lock(packs_dir: Path, timeout: float = LOCK_TIMEOUT_SECONDS) -> Iterator[None]:
    """Hold the advisory lock of the packs directory (created if needed) while changing it.

    POSIX: ``flock`` on the directory itself, so no lock file is left behind. Elsewhere: a lock file
    created with ``O_CREAT | O_EXCL``.
    """
    packs_dir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield from _exclusive_file_lock(packs_dir / ".dragoman.lock", deadline)
        return
    fd = os.open(packs_dir, os.O_RDONLY)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise PackInstallError(
                        f"another dragoman process has held the lock on {packs_dir} for {timeout:.0f} s; "
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


def pack_info(manifest: PackManifest, path: Path, *, loaded: bool = False) -> PackInfo:
    """The status view of an installed pack."""
    return PackInfo(
        id=manifest.id,
        kind=manifest.kind,
        languages=manifest.languages,
        pairs=manifest.pairs,
        path=str(path),
        size_bytes=dir_size(path),
        version=manifest.version,
        license=manifest.license,
        quality=manifest.quality,
        speed=manifest.speed,
        loaded=loaded,
    )


class PackStore:
    """The packs installed in ``settings.packs_dir``; every call reads the directory afresh."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.root = settings.packs_dir

    def _scan(self) -> tuple[Installed, Broken]:
        good: Installed = []
        bad: Broken = []
        try:
            children = sorted(self.root.iterdir())
        except FileNotFoundError:
            return good, bad
        except OSError as exc:
            log.warning("cannot read the packs directory %s: %s", self.root, exc)
            return good, [(self.root, f"cannot read the packs directory: {exc}")]
        seen: dict[str, Path] = {}
        for child in children:
            if child.name.startswith(".") or not child.is_dir():
                continue
            try:
                manifest = read_manifest(child)
            except PackIntegrityError as exc:
                bad.append((child, exc.message))
                continue
            except OSError as exc:
                bad.append((child, f"cannot be read: {exc}"))
                continue
            if manifest.id in seen:
                bad.append((child, f"pack id {manifest.id!r} is already provided by {seen[manifest.id]}"))
                continue
            seen[manifest.id] = child
            good.append((manifest, child))
        for path, why in bad:
            log.warning("skipping broken pack directory %s: %s", path, why)
        return good, bad

    def list(self) -> Installed:
        """Every readable installed pack with its directory, sorted by directory name."""
        return self._scan()[0]

    def broken(self) -> Broken:
        """Directories of the packs dir that are not readable packs, with the reason."""
        return self._scan()[1]

    def ids(self) -> builtins.list[str]:
        return sorted(m.id for m, _ in self.list())

    def _not_installed(self, pack_id: str) -> PackNotInstalled:
        ids = self.ids()
        return PackNotInstalled(
            f"pack {pack_id!r} is not installed in {self.root}; installed: {', '.join(ids) or 'none'}; "
            + INSTALL_HINT
        )

    def get(self, pack_id: str) -> tuple[PackManifest, Path]:
        """The manifest and directory of an installed pack; raises PackNotInstalled naming what is."""
        direct = self.root / pack_id
        if _plain_name(pack_id) and direct.is_dir():
            try:
                manifest = read_manifest(direct)
            except PackIntegrityError:
                manifest = None
            if manifest is not None and manifest.id == pack_id:
                return manifest, direct
        for manifest, path in self.list():
            if manifest.id == pack_id:
                return manifest, path
        raise self._not_installed(pack_id)

    def _locate(self, pack_id: str) -> Path:
        """The directory of a pack by id, or of a broken pack directory by its name."""
        try:
            return self.get(pack_id)[1]
        except PackNotInstalled:
            direct = self.root / pack_id
            if _plain_name(pack_id) and direct.is_dir():
                return direct
            raise

    def remove(self, pack_id: str) -> Path:
        """Uninstall a pack (or a broken pack directory named ``pack_id``); returns where it was."""
        with packs_lock(self.root):
            path = self._locate(pack_id)
            discard_dir(path)
        log.info("removed pack %s from %s", pack_id, path)
        return path

    def verify(self, pack_id: str, *, progress: ProgressCallback | None = None) -> VerifyReport:
        """Check structure and re-hash every file against the install record.

        Raises PackIntegrityError naming the damaged files (and how to repair) on any mismatch.
        """
        path = self._locate(pack_id)
        manifest = read_manifest(path)  # structure: raises PackIntegrityError
        record = read_record(path)
        if record is None:
            return VerifyReport(
                pack_id=manifest.id,
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
                    "reinstall with `dragoman packs install PATH --replace` to record file hashes",
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
        extra = [p.relative_to(path).as_posix() for p in pack_files(path)]
        warnings = tuple(f"{rel} is not in the install record" for rel in extra if rel not in recorded)
        if problems:
            shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
            raise PackIntegrityError(
                f"pack {manifest.id} at {path} is damaged: {shown}. Reinstall it with "
                f"`dragoman packs install {record.source or 'SOURCE'} --replace`"
            )
        return VerifyReport(
            pack_id=manifest.id,
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


def _plain_name(name: str) -> bool:
    return (
        bool(name) and not name.startswith(".") and "/" not in name and "\\" not in name and "\0" not in name
    )
