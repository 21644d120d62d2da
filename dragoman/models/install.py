"""Install a pack from a directory, an archive file, an http(s) URL or an Argos index name.

Archives are ``.argosmodel``/``.zip`` (zip) and ``.tar.gz``/``.tgz``/``.tar`` (converted NLLB or OPUS-MT
packs); the format is told from the content, and :mod:`dragoman.models.extract` unpacks them
refusing anything unsafe. Work happens in a private directory under ``packs_dir/.staging`` (same file
system), deleted whatever happens; the checked pack, with its install record, is then renamed into
``packs_dir/<id>`` under the packs lock, so a half-installed pack is never visible and two installs of
one pack cannot interleave. Downloads stream through httpx into the staging directory, hashing as they
go; a short body, an HTTP error or a checksum mismatch leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import logging
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlparse

import httpx

from dragoman.errors import (
    BackendError,
    InvalidRequest,
    PackInstallError,
    PackIntegrityError,
    map_exceptions,
)
from dragoman.models.extract import CHUNK, copy_dir, extract_archive
from dragoman.models.index import fetch_index, is_index_name, pick
from dragoman.models.manifest import ARGOS_METADATA, MANIFEST_NAME, PackManifest, read_manifest
from dragoman.models.store import (
    INSTALL_RECORD,
    STAGING_DIR,
    TRASH_PREFIX,
    InstallRecord,
    packs_lock,
    write_record,
)
from dragoman.progress import ProgressCallback
from dragoman.settings import Settings

log = logging.getLogger("dragoman.packs.install")

DOWNLOAD_TIMEOUT_SECONDS = 60.0  # per read; a download may take as long as it keeps moving
STALE_STAGING_SECONDS = 24 * 3600
_IGNORED_TOP = {"__MACOSX", ".DS_Store"}
_PACK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")


def _noop(done: int, total: int, message: str) -> None:
    return None


@contextlib.contextmanager
def tqdm_progress(desc: str = "dragoman") -> Iterator[ProgressCallback]:
    """A progress callback drawing a tqdm bar on stderr (for the CLI); one bar per phase."""
    from tqdm import tqdm

    bar = tqdm(total=0, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr, desc=desc, leave=False)
    phase = [""]

    def update(done: int, total: int, message: str) -> None:
        name = message.split(" ", 1)[0]
        if name != phase[0]:
            phase[0] = name
            bar.reset(total=total or None)
            bar.set_description_str(f"{desc}: {name}")
        elif total and bar.total != total:
            bar.total = total
        bar.update(done - bar.n)

    try:
        yield update
    finally:
        bar.close()


@contextlib.contextmanager
def _disk_errors(context: str) -> Iterator[None]:
    """``map_exceptions``, with the leftovers it calls backend errors reported as install errors."""
    try:
        with map_exceptions(context):
            yield
    except BackendError as exc:
        raise PackInstallError(exc.message) from exc.__cause__


def _is_url(source: str) -> bool:
    return urlparse(source).scheme in ("http", "https")


def _normal_sha(value: str | None) -> str | None:
    if value is None:
        return None
    hexpart = value.strip().lower().removeprefix("sha256:")
    if not re.fullmatch(r"[0-9a-f]{64}", hexpart):
        raise InvalidRequest(f"sha256 must be 64 hexadecimal digits, got {value!r}")
    return hexpart


def install(
    source: str | Path,
    settings: Settings,
    *,
    sha256: str | None = None,
    progress: ProgressCallback | None = None,
    replace: bool = False,
) -> PackManifest:
    """Install a pack and return its manifest; see the module docstring for what ``source`` may be.

    Raises PackIntegrityError (checksum, unsafe or oversized archive, no pack inside), PackInstallError
    (download failed, pack already installed and ``replace`` is False, disk full) or InvalidRequest.
    """
    expected = _normal_sha(sha256)
    report = progress or _noop
    staging_root = settings.packs_dir / STAGING_DIR
    with _disk_errors(f"installing a pack from {source}"):
        work = _make_work_dir(staging_root)
        try:
            return _install(source, settings, work, expected, report, replace)
        finally:
            shutil.rmtree(work, ignore_errors=True)
            with contextlib.suppress(OSError):
                staging_root.rmdir()  # only when no other install is using it


def _make_work_dir(staging_root: Path) -> Path:
    for _ in range(5):
        staging_root.mkdir(parents=True, exist_ok=True)
        try:
            return Path(tempfile.mkdtemp(prefix="install-", dir=staging_root))
        except FileNotFoundError:  # another install removed the empty staging dir meanwhile
            continue
    raise PackInstallError(f"cannot create a staging directory in {staging_root}; check it is writable")


def _install(
    source: str | Path,
    settings: Settings,
    work: Path,
    expected: str | None,
    report: ProgressCallback,
    replace: bool,
) -> PackManifest:
    text = str(source)
    extracted = work / "pack"
    archive_sha: str | None = None
    if isinstance(source, str) and _is_url(text):
        archive, archive_sha = _download(text, work, settings, report)
        kind, label = "url", text
    else:
        path = Path(text).expanduser()
        if path.is_dir():
            if expected is not None:
                raise InvalidRequest("sha256 checks an archive; it cannot apply to a pack directory")
            hashes = copy_dir(path, extracted, settings.max_pack_bytes, report)
            return _finish(extracted, hashes, settings, "directory", str(path.resolve()), None, replace)
        if path.is_file():
            archive, kind, label = path, "file", str(path.resolve())
            archive_sha = _hash_file(path, report)
        elif isinstance(source, str) and is_index_name(text):
            entry = pick(fetch_index(settings), text, where=f"the Argos index {settings.argos_index_url}")
            expected = expected or entry.sha256
            archive, archive_sha, label = _download_any(entry.links, work, settings, report)
            kind = "index"
        else:
            raise InvalidRequest(
                f"{text!r} is not an existing file or directory, an http(s) URL or an index name "
                "(translate-en_es, en->es); check the path, or run `dragoman packs available`"
            )
    if expected is not None and archive_sha != expected:
        raise PackIntegrityError(
            f"{label} has sha256 {archive_sha}, expected {expected}: the download is corrupt or not the "
            "published file; nothing was installed. Retry, or check the checksum you passed"
        )
    hashes = extract_archive(archive, extracted, settings.max_pack_bytes, report)
    return _finish(extracted, hashes, settings, kind, label, archive_sha, replace)


def _hash_file(path: Path, report: ProgressCallback) -> str:
    digest = hashlib.sha256()
    total = path.stat().st_size
    done = 0
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            done += len(chunk)
            report(done, total, f"hashing {path.name}")
    return digest.hexdigest()


def _url_name(url: str) -> str:
    name = Path(unquote(urlparse(url).path)).name
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "download"


def _download_any(
    links: tuple[str, ...], work: Path, settings: Settings, report: ProgressCallback
) -> tuple[Path, str, str]:
    """Download the first link that works; returns (file, sha256, url)."""
    last: PackInstallError | None = None
    for url in links:
        if not _is_url(url):
            continue
        try:
            archive, sha = _download(url, work, settings, report)
            return archive, sha, url
        except PackInstallError as exc:
            log.warning("download from %s failed: %s", url, exc.message)
            last = exc
    if last is not None:
        raise last
    raise PackInstallError(
        f"the index entry has no http(s) link among {list(links)}; install from a URL instead"
    )


def _download(url: str, work: Path, settings: Settings, report: ProgressCallback) -> tuple[Path, str]:
    """Stream ``url`` into ``work``; returns (file, sha256). Short or failed downloads raise."""
    dest = work / f"download-{uuid.uuid4().hex[:8]}-{_url_name(url)}"
    digest = hashlib.sha256()
    received = 0
    total = 0
    limit = settings.max_pack_bytes
    timeout = httpx.Timeout(DOWNLOAD_TIMEOUT_SECONDS, connect=min(DOWNLOAD_TIMEOUT_SECONDS, 30.0))
    headers = {"Accept-Encoding": "identity", "User-Agent": "dragoman"}
    try:
        with httpx.stream("GET", url, headers=headers, timeout=timeout, follow_redirects=True) as response:
            if response.status_code != 200:
                raise PackInstallError(
                    f"downloading {url} failed: HTTP {response.status_code}; check the URL "
                    "(`dragoman packs available` lists the index's packages); nothing was installed"
                )
            length = response.headers.get("content-length", "")
            total = int(length) if length.isdigit() else 0
            if total > limit:
                raise PackIntegrityError(
                    f"{url} is {total} bytes, more than max_pack_bytes ({limit}); raise "
                    "DRAGOMAN_MAX_PACK_BYTES if you trust this pack"
                )
            with dest.open("wb") as out:
                for chunk in response.iter_bytes(CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    received += len(chunk)
                    if received > limit:
                        raise PackIntegrityError(
                            f"{url} sent more than max_pack_bytes ({limit}) bytes; refused. Raise "
                            "DRAGOMAN_MAX_PACK_BYTES if you trust this pack"
                        )
                    report(received, total, f"downloading {_url_name(url)}")
            raw = response.num_bytes_downloaded
    except httpx.HTTPError as exc:
        raise PackInstallError(
            f"downloading {url} was interrupted after {received} of {total or 'unknown'} bytes "
            f"({type(exc).__name__}: {exc}); nothing was installed; retry"
        ) from exc
    if total and raw != total:
        raise PackInstallError(
            f"downloading {url} was interrupted: got {raw} of {total} bytes; nothing was installed; retry"
        )
    log.info("downloaded %s (%d bytes)", url, received)
    return dest, digest.hexdigest()


# --- putting the pack in place ---------------------------------------------------------------------


def _pack_root(extracted: Path) -> Path:
    """The archive root, or its single top-level directory when the root itself is not a pack."""
    if (extracted / MANIFEST_NAME).is_file() or (extracted / ARGOS_METADATA).is_file():
        return extracted
    children = [c for c in extracted.iterdir() if c.name not in _IGNORED_TOP]
    if len(children) == 1 and children[0].is_dir():
        return children[0]
    return extracted


def _finish(
    extracted: Path,
    hashes: dict[str, str],
    settings: Settings,
    kind: str,
    label: str,
    archive_sha: str | None,
    replace: bool,
) -> PackManifest:
    root = _pack_root(extracted)
    try:
        manifest = read_manifest(root)
    except PackIntegrityError as exc:
        raise PackIntegrityError(f"{label} holds no usable pack: {exc.message}") from exc
    if not _PACK_ID.match(manifest.id):
        raise PackIntegrityError(
            f"{label}: pack id {manifest.id!r} is not a safe directory name "
            "(letters, digits, '.', '_', '-', '+')"
        )
    prefix = root.relative_to(extracted).parts
    files = tuple(
        sorted(
            ("/".join(Path(rel).parts[len(prefix) :]), sha)
            for rel, sha in hashes.items()
            if Path(rel).parts[: len(prefix)] == prefix and Path(rel).name != INSTALL_RECORD
        )
    )
    (root / INSTALL_RECORD).unlink(missing_ok=True)  # a record shipped in an archive is not ours
    record = InstallRecord(
        pack_id=manifest.id,
        version=manifest.version,
        source=label,
        source_kind=kind,
        archive_sha256=archive_sha,
        installed_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        files=files,
    )
    write_record(root, record)
    target = _place(root, manifest, settings.packs_dir, replace)
    log.info("installed pack %s %s from %s into %s", manifest.id, manifest.version, label, target)
    return manifest


def _sweep(packs_dir: Path) -> None:
    """Delete leftovers of crashed installs; called with the packs lock held."""
    for child in packs_dir.glob(f"{TRASH_PREFIX}*"):
        shutil.rmtree(child, ignore_errors=True)
    now = time.time()
    for child in (packs_dir / STAGING_DIR).glob("*"):
        with contextlib.suppress(OSError):
            if now - child.stat().st_mtime > STALE_STAGING_SECONDS:
                shutil.rmtree(child, ignore_errors=True)


def _place(root: Path, manifest: PackManifest, packs_dir: Path, replace: bool) -> Path:
    target = packs_dir / manifest.id
    with packs_lock(packs_dir):
        _sweep(packs_dir)
        if not (target.exists() or target.is_symlink()):
            os.replace(root, target)
            return target
        if not replace:
            try:
                old = f"version {read_manifest(target).version}"
            except PackIntegrityError:
                old = "a broken copy"
            raise PackInstallError(
                f"pack {manifest.id} is already installed at {target} ({old}); pass replace=True "
                f"(`dragoman packs install ... --replace`) to swap in version {manifest.version}, or "
                f"remove it first with `dragoman packs remove {manifest.id}`"
            )
        aside = packs_dir / f"{TRASH_PREFIX}{manifest.id}-{uuid.uuid4().hex[:8]}"
        os.replace(target, aside)
        try:
            os.replace(root, target)
        except BaseException:
            os.replace(aside, target)
            raise
        shutil.rmtree(aside, ignore_errors=True)
    return target
