"""Safe extraction of model archives (zip, tar, tar.gz) and safe copies of model directories, any kind.

Nothing in an archive is trusted: entry names that are absolute, hold ``..`` or a drive letter, link
entries, device files, archives that declare or actually write more than the size limit and entries
compressed more than :data:`MAX_RATIO` times are refused with PackIntegrityError (PackUnsafe for what would
reach outside: absolute or ``..`` names, links, special files). A directory source is copied following only
the links that resolve inside it. Every function returns the sha256 of each file it wrote (computed while
writing), keyed by its path relative to ``dest``.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO

from dragoman.errors import PackIntegrityError, PackUnsafe
from dragoman.models.store import INSTALL_RECORD
from dragoman.progress import ProgressCallback

CHUNK = 1024 * 1024
MAX_RATIO = 200  # uncompressed/compressed; model weights compress about 1.1x, text about 4x
RATIO_MIN_BYTES = 1024 * 1024  # small entries may compress as well as they like
MAX_ENTRIES = 100_000
ZIP_SUFFIXES = (".argosmodel", ".zip")
_READ_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    EOFError,
    zlib.error,
    zipfile.BadZipFile,
    tarfile.TarError,
    RuntimeError,  # zipfile: encrypted entries
    NotImplementedError,  # zipfile: unsupported compression method
    ValueError,
)


def _noop(done: int, total: int, message: str) -> None:
    return None


def safe_parts(name: str) -> tuple[str, ...]:
    """The path components of an archive entry name; PackIntegrityError when it could escape."""
    if "\0" in name:
        raise PackUnsafe(f"archive entry {name!r} has a NUL byte in its name; refused")
    normal = name.replace("\\", "/")
    if normal.startswith("/") or re.match(r"^[A-Za-z]:", normal):
        raise PackUnsafe(f"archive entry {name!r} is an absolute path; refused (unsafe archive)")
    parts = tuple(p for p in normal.split("/") if p not in ("", "."))
    if ".." in parts:
        raise PackUnsafe(f"archive entry {name!r} climbs out with '..'; refused (unsafe archive)")
    return parts


def _too_big(limit: int) -> PackIntegrityError:
    return PackIntegrityError(
        f"the archive expands to more than max_pack_bytes ({limit} bytes); refused. Raise "
        "DRAGOMAN_MAX_PACK_BYTES if you trust this pack"
    )


class _Budget:
    """Counts bytes actually written against the limit and reports progress."""

    def __init__(
        self,
        limit: int,
        declared: int,
        report: ProgressCallback,
        hint: str = "the archive is truncated or corrupt; download it again",
    ) -> None:
        self.hint = hint
        self.limit = limit
        self.declared = declared
        self.written = 0
        self.report = report

    def copy(self, read: Callable[[int], bytes], target: Path, rel: str, cap: int | None) -> str:
        """Copy a stream into a new file; returns its sha256. ``cap``: bytes the entry declared."""
        digest = hashlib.sha256()
        size = 0
        with target.open("xb") as out:
            while True:
                try:
                    chunk = read(CHUNK)
                except _READ_ERRORS as exc:
                    raise PackIntegrityError(
                        f"{rel} cannot be read ({type(exc).__name__}: {exc}): {self.hint}"
                    ) from exc
                if not chunk:
                    break
                size += len(chunk)
                self.written += len(chunk)
                if cap is not None and size > cap:
                    raise PackIntegrityError(
                        f"archive entry {rel} holds more than the {cap} bytes it declares"
                    )
                if self.written > self.limit:
                    raise _too_big(self.limit)
                out.write(chunk)
                digest.update(chunk)
                self.report(self.written, self.declared, "extracting")
        return digest.hexdigest()


def _make_parent(dest: Path, parts: tuple[str, ...]) -> Path:
    target = dest.joinpath(*parts)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise PackIntegrityError(f"archive entry {'/'.join(parts)} conflicts with a file entry") from exc
    if target.exists():
        raise PackIntegrityError(f"archive entry {'/'.join(parts)} appears twice; refused")
    return target


def _make_dir(dest: Path, parts: tuple[str, ...]) -> None:
    try:
        dest.joinpath(*parts).mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise PackIntegrityError(f"archive entry {'/'.join(parts)} conflicts with a file entry") from exc


def extract_archive(
    archive: Path, dest: Path, limit: int, report: ProgressCallback | None = None
) -> dict[str, str]:
    """Safely extract a zip or tar archive into ``dest``; returns {relative path: sha256} of its files."""
    dest.mkdir(parents=True, exist_ok=True)
    progress = report or _noop
    if zipfile.is_zipfile(archive):
        return _extract_zip(archive, dest, limit, progress)
    if archive.name.lower().endswith(ZIP_SUFFIXES):
        raise PackIntegrityError(
            f"{archive.name} is not a valid zip archive (truncated or corrupt); download it again"
        )
    return _extract_tar(archive, dest, limit, progress)


def _extract_zip(archive: Path, dest: Path, limit: int, report: ProgressCallback) -> dict[str, str]:
    hashes: dict[str, str] = {}
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        raise PackIntegrityError(
            f"{archive.name} is not a valid zip archive ({exc}); download it again"
        ) from exc
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_ENTRIES:
            raise PackIntegrityError(
                f"{archive.name} has {len(infos)} entries (at most {MAX_ENTRIES}); refused"
            )
        declared = 0
        plan: list[tuple[zipfile.ZipInfo, tuple[str, ...]]] = []
        for info in infos:
            parts = safe_parts(info.filename)
            mode = info.external_attr >> 16
            if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                what = "a symbolic link" if stat.S_ISLNK(mode) else "a special file"
                raise PackUnsafe(f"archive entry {info.filename!r} is {what}; refused (unsafe archive)")
            if info.is_dir() or not parts:
                _make_dir(dest, parts)
                continue
            declared += info.file_size
            if declared > limit:
                raise _too_big(limit)
            if info.file_size > RATIO_MIN_BYTES and info.file_size > MAX_RATIO * max(info.compress_size, 1):
                raise PackIntegrityError(
                    f"archive entry {info.filename!r} expands {info.file_size} bytes from "
                    f"{info.compress_size}: a compression bomb; refused"
                )
            plan.append((info, parts))
        budget = _Budget(limit, declared, report)
        for info, parts in plan:
            rel = "/".join(parts)
            target = _make_parent(dest, parts)
            try:
                handle: IO[bytes] = zf.open(info)
            except _READ_ERRORS as exc:
                raise PackIntegrityError(
                    f"archive entry {rel} cannot be read ({exc}); download again"
                ) from exc
            with handle:
                hashes[rel] = budget.copy(handle.read, target, rel, info.file_size)
    return hashes


def _next_member(tf: tarfile.TarFile, name: str) -> tarfile.TarInfo | None:
    try:
        return tf.next()
    except _READ_ERRORS as exc:
        raise PackIntegrityError(
            f"{name} is truncated or corrupt ({type(exc).__name__}: {exc}); download it again"
        ) from exc


def _extract_tar(archive: Path, dest: Path, limit: int, report: ProgressCallback) -> dict[str, str]:
    hashes: dict[str, str] = {}
    size = archive.stat().st_size
    try:
        tf = tarfile.open(archive, "r:*")
    except _READ_ERRORS as exc:
        raise PackIntegrityError(
            f"{archive.name} is neither a zip nor a tar archive, or it is truncated ({exc}); "
            "a pack is an .argosmodel/.zip, .tar.gz/.tgz file or a directory"
        ) from exc
    with tf:
        budget = _Budget(limit, 0, report)
        count = 0
        while (member := _next_member(tf, archive.name)) is not None:
            count += 1
            if count > MAX_ENTRIES:
                raise PackIntegrityError(f"{archive.name} has more than {MAX_ENTRIES} entries; refused")
            parts = safe_parts(member.name)
            if member.issym() or member.islnk():
                raise PackUnsafe(
                    f"archive entry {member.name!r} is a link (to {member.linkname!r}); "
                    "refused (unsafe archive)"
                )
            if member.isdir() or not parts:
                _make_dir(dest, parts)
                continue
            if not member.isreg():
                raise PackUnsafe(f"archive entry {member.name!r} is a device or special file; refused")
            budget.declared += member.size
            if budget.declared > limit:
                raise _too_big(limit)
            if budget.declared > RATIO_MIN_BYTES and budget.declared > MAX_RATIO * max(size, 1):
                raise PackIntegrityError(
                    f"{archive.name} expands to over {MAX_RATIO} times its size: a compression bomb; refused"
                )
            rel = "/".join(parts)
            target = _make_parent(dest, parts)
            handle = tf.extractfile(member)
            if handle is None:  # pragma: no cover - isreg() members always have data
                raise PackIntegrityError(f"archive entry {rel} has no data")
            with handle:
                hashes[rel] = budget.copy(handle.read, target, rel, member.size)
    return hashes


def _inside(real_root: str, path: str, src: Path) -> None:
    """Refuse a link of the source directory that resolves outside it (the copy would carry that file)."""
    if os.path.islink(path):
        target = os.path.realpath(path)
        if os.path.commonpath([real_root, target]) != real_root:
            raise PackUnsafe(
                f"{path} is a link to {target}, outside {src}; refused (a pack's files must lie inside its "
                "directory; copy the files in with `cp -rL` if you trust them)"
            )


def copy_dir(src: Path, dest: Path, limit: int, report: ProgressCallback) -> dict[str, str]:
    """Copy a pack directory with hashes; links are followed only where they resolve inside ``src``."""
    files: list[tuple[Path, tuple[str, ...]]] = []
    declared = 0
    seen: set[str] = set()
    real_root = os.path.realpath(src)
    for top, dirs, names in os.walk(src, followlinks=True):
        real = os.path.realpath(top)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs.sort()
        for name in dirs:
            _inside(real_root, os.path.join(top, name), src)
        rel_top = Path(top).relative_to(src).parts
        for name in sorted(names):
            if not rel_top and name == INSTALL_RECORD:
                continue
            path = Path(top) / name
            _inside(real_root, str(path), src)
            try:
                st = path.stat()
            except OSError as exc:
                raise PackIntegrityError(f"{path} cannot be read ({exc.strerror}); a dangling link?") from exc
            if not stat.S_ISREG(st.st_mode):
                raise PackUnsafe(f"{path} is not a regular file; a pack holds only files and folders")
            declared += st.st_size
            if declared > limit:
                raise _too_big(limit)
            files.append((path, (*rel_top, name)))
    budget = _Budget(limit, declared, report, hint=f"check the files of {src} are readable")
    hashes: dict[str, str] = {}
    dest.mkdir(parents=True, exist_ok=True)
    for path, parts in files:
        rel = "/".join(parts)
        target = _make_parent(dest, parts)
        with path.open("rb") as handle:
            hashes[rel] = budget.copy(handle.read, target, rel, None)
    return hashes
