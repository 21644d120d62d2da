"""Install a model of any kind from a directory, an archive file, an http(s) URL, the kind's index or the
Hugging Face Hub (``hf:OWNER/REPO[@REVISION]``, :mod:`dragoman.models.hf`).

Archives are zip (``.argosmodel``, ``.zip``) or tar (``.tar.gz``, ``.tgz``, ``.tar``); the format is told
from the content, and :mod:`dragoman.models.extract` unpacks them refusing anything unsafe. Work happens in a
private directory under ``<root>/.staging`` (same file system), deleted whatever happens; the model, checked
by its kind's ``read`` and given its install record, is then renamed into ``<root>/<id>`` under the store
lock, so a half-installed model is never visible and two installs of one model cannot interleave. Downloads
stream through httpx into the staging directory, hashing as they go, under an overall deadline and a
minimum pace as well as a per-read timeout (:mod:`dragoman.models._fetch`); a short body, an HTTP error, a
server too slow or a checksum mismatch leaves nothing behind. The staging folder is locked by the installing
process, so a later start (:func:`dragoman.models.store.sweep_stale`) removes it if that process was killed.

:func:`install_model` is the one code path; MT packs call it through :func:`dragoman.models.packs.install`
with the Argos index as their :class:`ModelIndex`.
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
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Generic
from urllib.parse import unquote, urlparse

import httpx

from dragoman.errors import (
    BackendError,
    InvalidRequest,
    PackInstallError,
    PackIntegrityError,
    map_exceptions,
)
from dragoman.models import hf
from dragoman.models._fetch import Pace, Transfer, fetch
from dragoman.models.extract import CHUNK, copy_dir, extract_archive
from dragoman.models.kind import I, M, ModelKind
from dragoman.models.store import (
    INSTALL_RECORD,
    TRASH_PREFIX,
    InstallRecord,
    ModelStore,
    staging_dir,
    store_lock,
    sweep_stale,
    write_record,
)
from dragoman.progress import ProgressCallback

log = logging.getLogger("dragoman.models.install")

DOWNLOAD_TIMEOUT_SECONDS = 60.0  # per read
#: A download's overall deadline (8 GiB at 400 KB/s), and the pace it must keep once the grace has passed:
#: a server trickling bytes is cut off in about a minute instead of never (see :mod:`dragoman.models._fetch`).
DOWNLOAD_DEADLINE_SECONDS = 6 * 3600.0
DOWNLOAD_GRACE_SECONDS = 60.0
DOWNLOAD_MIN_BYTES_PER_SECOND = 16 * 1024.0
_IGNORED_TOP = {"__MACOSX", ".DS_Store"}
_MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")


@dataclass(frozen=True)
class Download:
    """Where an index says a model is: mirror links (tried in order) and the published sha256, if any."""

    links: tuple[str, ...]
    sha256: str | None = None


@dataclass(frozen=True)
class ModelIndex:
    """A kind's catalogue of downloadable models, so that ``install NAME`` works.

    ``matches`` tells a name from a path or URL; ``resolve`` finds what a name selects (raising
    InvalidRequest when nothing does). ``names`` and ``listing`` word the messages: what a name looks like
    and the command that lists the index.
    """

    names: str
    listing: str
    matches: Callable[[str], bool]
    resolve: Callable[[str], Download]


@dataclass(frozen=True)
class _Job(Generic[M, I]):
    """One install: where it goes, what it may weigh, the index, and whom to tell."""

    store: ModelStore[M, I]
    max_bytes: int
    index: ModelIndex | None
    report: ProgressCallback
    work: Path

    @property
    def kind(self) -> ModelKind[M, I]:
        return self.store.kind


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


def install_model(
    store: ModelStore[M, I],
    source: str | Path,
    *,
    max_bytes: int,
    sha256: str | None = None,
    progress: ProgressCallback | None = None,
    replace: bool = False,
    index: ModelIndex | None = None,
) -> M:
    """Install a model into ``store`` and return its manifest; see the module docstring for ``source``.

    ``max_bytes`` bounds the download and what it expands to (``settings.engine.max_pack_bytes``). Raises
    PackIntegrityError (checksum, unsafe or oversized archive, no model of the kind inside),
    PackInstallError (download failed, already installed and ``replace`` is False, disk full) or
    InvalidRequest.
    """
    expected = _normal_sha(sha256)
    sweep_stale(store.root)  # what a killed install left behind
    with (
        _disk_errors(f"installing a {store.kind.noun} from {source}"),
        staging_dir(store.root) as work,
    ):
        job = _Job(store, max_bytes, index, progress or _noop, work)
        return _install(job, source, expected, replace)


def _not_a_source(text: str, index: ModelIndex | None) -> InvalidRequest:
    if index is None:
        return InvalidRequest(
            f"{text!r} is not an existing file or directory or an http(s) URL or hf:OWNER/REPO; "
            "check the path"
        )
    return InvalidRequest(
        f"{text!r} is not an existing file or directory, an http(s) URL, hf:OWNER/REPO or {index.names}; "
        f"check the path, or run `{index.listing}`"
    )


def _install(job: _Job[M, I], source: str | Path, expected: str | None, replace: bool) -> M:
    text = str(source)
    extracted = job.work / "model"
    archive_sha: str | None = None
    if isinstance(source, str) and hf.is_hub_source(text):
        if expected is not None:
            raise InvalidRequest(
                "sha256 checks an archive; an hf: source is checked against the hub's own file hashes"
            )
        staged = hf.stage(text, job.kind.name, job.work, max_bytes=job.max_bytes, report=job.report)
        return _finish(job, staged.folder, staged.hashes, "hf", staged.label, None, replace)
    if isinstance(source, str) and _is_url(text):
        archive, archive_sha = _download(job, text)
        kind, label = "url", text
    else:
        path = Path(text).expanduser()
        if path.is_dir():
            if expected is not None:
                raise InvalidRequest(
                    f"sha256 checks an archive; it cannot apply to a {job.kind.noun} directory"
                )
            hashes = copy_dir(path, extracted, job.max_bytes, job.report)
            return _finish(job, extracted, hashes, "directory", str(path.resolve()), None, replace)
        if path.is_file():
            archive, kind, label = path, "file", str(path.resolve())
            archive_sha = _hash_file(path, job.report)
        elif isinstance(source, str) and job.index is not None and job.index.matches(text):
            found = job.index.resolve(text)
            expected = expected or found.sha256
            archive, archive_sha, label = _download_any(job, found.links)
            kind = "index"
        else:
            raise _not_a_source(text, job.index)
    if expected is not None and archive_sha != expected:
        raise PackIntegrityError(
            f"{label} has sha256 {archive_sha}, expected {expected}: the download is corrupt or not the "
            "published file; nothing was installed. Retry, or check the checksum you passed"
        )
    hashes = extract_archive(archive, extracted, job.max_bytes, job.report)
    return _finish(job, extracted, hashes, kind, label, archive_sha, replace)


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


def _download_any(job: _Job[M, I], links: tuple[str, ...]) -> tuple[Path, str, str]:
    """Download the first link that works; returns (file, sha256, url)."""
    last: PackInstallError | None = None
    for url in links:
        if not _is_url(url):
            continue
        try:
            archive, sha = _download(job, url)
            return archive, sha, url
        except PackInstallError as exc:
            log.warning("download from %s failed: %s", url, exc.message)
            last = exc
    if last is not None:
        raise last
    raise PackInstallError(
        f"the index entry has no http(s) link among {list(links)}; install from a URL instead"
    )


def _download(job: _Job[M, I], url: str) -> tuple[Path, str]:
    """Stream ``url`` into the work directory; returns (file, sha256). Short or failed downloads raise.

    Bounded in size (``max_bytes``), per read (:data:`DOWNLOAD_TIMEOUT_SECONDS`), in pace (at least
    :data:`DOWNLOAD_MIN_BYTES_PER_SECOND` on average after :data:`DOWNLOAD_GRACE_SECONDS`) and in all
    (:data:`DOWNLOAD_DEADLINE_SECONDS`): DownloadTimedOut when either of the last two is passed.
    """
    dest = job.work / f"download-{uuid.uuid4().hex[:8]}-{_url_name(url)}"
    digest = hashlib.sha256()
    limit = job.max_bytes
    listed = f" (`{job.index.listing}` lists the index's packages)" if job.index is not None else ""
    name = _url_name(url)

    def check(response: httpx.Response, state: Transfer) -> None:
        if response.status_code != 200:
            raise PackInstallError(
                f"downloading {url} failed: HTTP {response.status_code}; check the URL{listed}; "
                "nothing was installed"
            )

    def too_big(size: int) -> PackIntegrityError:
        return PackIntegrityError(
            f"{url} is over max_pack_bytes ({limit}) bytes ({size} sent or declared); refused. Raise "
            f"DRAGOMAN_MAX_PACK_BYTES if you trust this {job.kind.noun}"
        )

    pace = Pace(
        deadline=DOWNLOAD_DEADLINE_SECONDS,
        read_timeout=DOWNLOAD_TIMEOUT_SECONDS,
        min_rate=DOWNLOAD_MIN_BYTES_PER_SECOND,
        grace=DOWNLOAD_GRACE_SECONDS,
    )
    with dest.open("wb") as out:

        def sink(chunk: bytes, state: Transfer) -> None:
            out.write(chunk)
            digest.update(chunk)
            job.report(state.received, state.total, f"downloading {name}")

        got = fetch(url, pace=pace, limit=limit, sink=sink, too_big=too_big, check=check)
    if got.total and got.raw != got.total:
        raise PackInstallError(
            f"downloading {url} was interrupted: got {got.raw} of {got.total} bytes; nothing was installed; "
            "retry"
        )
    log.info("downloaded %s (%d bytes)", url, got.received)
    return dest, digest.hexdigest()


# --- putting the model in place --------------------------------------------------------------------


def _model_root(extracted: Path, markers: tuple[str, ...]) -> Path:
    """The archive root, or its single top-level directory when the root itself holds no marker file."""
    if any((extracted / name).is_file() for name in markers):
        return extracted
    children = [c for c in extracted.iterdir() if c.name not in _IGNORED_TOP]
    if len(children) == 1 and children[0].is_dir():
        return children[0]
    return extracted


def _finish(
    job: _Job[M, I],
    extracted: Path,
    hashes: dict[str, str],
    source_kind: str,
    label: str,
    archive_sha: str | None,
    replace: bool,
) -> M:
    kind = job.kind
    root = _model_root(extracted, kind.markers)
    try:
        manifest = kind.read(root)
    except PackIntegrityError as exc:  # same class (PackUnsafe stays PackUnsafe), the source named
        raise type(exc)(f"{label} holds no usable {kind.noun}: {exc.message}") from exc
    if not _MODEL_ID.match(manifest.id):
        raise PackIntegrityError(
            f"{label}: {kind.noun} id {manifest.id!r} is not a safe directory name "
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
        model_id=manifest.id,
        version=manifest.version,
        source=label,
        source_kind=source_kind,
        archive_sha256=archive_sha,
        installed_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        files=files,
        kind=kind.name,
    )
    write_record(root, record)
    target = _place(job, root, manifest, replace)
    log.info("installed %s %s %s from %s into %s", kind.noun, manifest.id, manifest.version, label, target)
    return manifest


def _sweep(root: Path) -> None:
    """Delete what interrupted removes and replaces left; called with the store lock held (staging folders
    are swept by :func:`~dragoman.models.store.sweep_stale`, each by its own lock)."""
    for child in root.glob(f"{TRASH_PREFIX}*"):
        shutil.rmtree(child, ignore_errors=True)


def _place(job: _Job[M, I], ready: Path, manifest: M, replace: bool) -> Path:
    kind, root = job.kind, job.store.root
    target = root / manifest.id
    with store_lock(root):
        _sweep(root)
        if not (target.exists() or target.is_symlink()):
            os.replace(ready, target)
            return target
        if not replace:
            try:
                old = f"version {kind.read(target).version}"
            except PackIntegrityError:
                old = "a broken copy"
            raise PackInstallError(
                f"{kind.noun} {manifest.id} is already installed at {target} ({old}); pass replace=True "
                f"(`{kind.command} install ... --replace`) to swap in version {manifest.version}, or "
                f"remove it first with `{kind.command} remove {manifest.id}`"
            )
        aside = root / f"{TRASH_PREFIX}{manifest.id}-{uuid.uuid4().hex[:8]}"
        os.replace(target, aside)
        try:
            os.replace(ready, target)
        except BaseException:
            os.replace(aside, target)
            raise
        shutil.rmtree(aside, ignore_errors=True)
    return target
