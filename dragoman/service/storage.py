"""The hosted service's files (uploads, exports, later audio) over obstore (HOSTED.md: components).

One machine keeps them in an obstore ``LocalStore`` under ``<data_dir>/files``; ``DRAGOMAN_STORE_URL`` names
another place and nothing else changes: ``file:///path``, or ``s3://bucket/prefix`` (issue 13) for an obstore
``S3Store`` on any S3-compatible service. The S3 store's endpoint and region come from
``DRAGOMAN_S3_ENDPOINT`` / ``DRAGOMAN_S3_REGION`` when set, else from the standard variables obstore reads
(``AWS_ENDPOINT``, ``AWS_REGION``, ``AWS_DEFAULT_REGION``, ``AWS_ALLOW_HTTP``); credentials only from the
standard ones (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, or the instance's
role). An ``http://`` endpoint is allowed (a local S3 server). Keys are relative paths without a leading
slash, e.g. ``uploads/<uuid>/<name>`` and ``exports/<job_id>/<file>``; an S3 store puts them under its prefix.

:meth:`Storage.put_stream` writes a stream of chunks without holding it in memory, computes its sha256 on the
way and stops past a size bound with :class:`~dragoman.errors.FileTooLarge` (413). obstore's put is atomic (a
staged part renamed at the end, a multipart upload completed at the end), so a stream cut short by the bound,
by a client that went away or by a full disk leaves no object behind: on S3 obstore aborts the multipart
upload (its parts are deleted; tests check no upload is left pending), and the local store also removes the
folders the failed write created. (S3 may still keep a part whose upload was in flight when the abort was
sent; give the bucket a lifecycle rule "abort incomplete multipart uploads after 1 day" so such parts never
linger.) Reads stream (:meth:`Storage.open_stream`). A store that cannot be reached
(S3 down, after obstore's few retries within :data:`S3_RETRY_SECONDS`) raises
:class:`~dragoman.errors.StorageUnavailable` (503).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import obstore
from obstore.exceptions import BaseError as ObstoreError
from obstore.store import LocalStore, S3Store

from dragoman.errors import ConfigError, FileAccessError, FileTooLarge, InvalidRequest, StorageUnavailable

if TYPE_CHECKING:
    from dragoman.settings import HostedSettings

#: Chunks obstore's multipart writer buffers per part (memory held per upload is about this much).
PART_SIZE = 8 * 1024 * 1024
#: An S3 store: seconds to connect, and seconds obstore keeps retrying a failed request (a few retries) before
#: the store counts as unavailable.
S3_CONNECT_SECONDS = 5
S3_RETRY_SECONDS = 15
S3_MAX_RETRIES = 3
#: Seconds a client is asked to wait after a 503 for a store that cannot be reached.
STORAGE_RETRY_AFTER = 5

_SAFE_SEGMENT = re.compile(r"^[A-Za-z0-9._=+@,-][A-Za-z0-9 ._=+@,()-]{0,199}$")


@dataclass(frozen=True)
class StoredObject:
    """An object in the store: its key, size in bytes and last modification (UTC)."""

    key: str
    size: int
    modified: datetime

    @property
    def modified_ms(self) -> int:
        return int(self.modified.timestamp() * 1000)


def check_key(key: str) -> str:
    """``key`` if it is a safe relative key (segments of letters, digits and ``._-=+@,() ``; no ``..``, no
    empty segment, no leading slash); :class:`~dragoman.errors.InvalidRequest` otherwise."""
    segments = key.split("/")
    if (
        not key
        or len(key) > 1024
        or any(s in ("", ".", "..") or not _SAFE_SEGMENT.match(s) for s in segments)
    ):
        raise InvalidRequest(f"not a valid storage key: {key!r}")
    return key


def safe_name(name: str, *, default: str = "file") -> str:
    """A client's file name reduced to a safe key segment (its base name; other characters become ``_``)."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = re.sub(r"[^A-Za-z0-9._=+@,()-]", "_", base).lstrip(".")[:200]
    return cleaned or default


class _TooLarge(Exception):
    """Raised inside the chunk iterator so obstore abandons the write (mapped to FileTooLarge after)."""


@contextmanager
def _reaching(key: str) -> Iterator[None]:
    """Turns a remote store's failure (not a missing object) into StorageUnavailable (503)."""
    try:
        yield
    except FileNotFoundError:
        raise
    except ObstoreError as exc:
        raise StorageUnavailable(
            f"the file store cannot be reached ({key}): {str(exc).splitlines()[0][:300]}",
            retry_after=STORAGE_RETRY_AFTER,
        ) from exc


class Storage:
    """Files of the hosted service in one obstore store (see the module's notes)."""

    def __init__(self, store: LocalStore | S3Store, *, root: Path | None = None) -> None:
        self.store = store
        #: The local folder behind a local store (None for a remote one): failed writes tidy folders in it.
        self.root = root

    @classmethod
    def local(cls, root: Path) -> Storage:
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        return cls(LocalStore(root, mkdir=True, automatic_cleanup=True), root=root)

    @classmethod
    def s3(
        cls,
        url: str,
        *,
        endpoint: str | None = None,
        region: str | None = None,
        config: Mapping[str, str] | None = None,
    ) -> Storage:
        """The S3 store ``s3://bucket/prefix`` names (see the module's notes for endpoint and credentials);
        ``config``: more of obstore's ``S3Config`` keys (tests pass moto's dummy credentials so)."""
        parts = urlsplit(url)
        if parts.scheme != "s3" or not parts.netloc or parts.query or parts.fragment:
            raise ConfigError(f"DRAGOMAN_STORE_URL={url!r}: an S3 store is s3://bucket or s3://bucket/prefix")
        prefix = parts.path.strip("/")
        if prefix:
            try:
                check_key(prefix)
            except InvalidRequest:
                raise ConfigError(f"DRAGOMAN_STORE_URL={url!r}: not a valid prefix") from None
        options: dict[str, Any] = dict(config or {})
        if endpoint:
            options["endpoint"] = endpoint
        if region:
            options["region"] = region
        client: dict[str, Any] = {"connect_timeout": timedelta(seconds=S3_CONNECT_SECONDS)}
        used = endpoint or os.environ.get("AWS_ENDPOINT") or os.environ.get("AWS_ENDPOINT_URL") or ""
        if used.startswith("http://"):
            client["allow_http"] = True
        retry: Any = {"max_retries": S3_MAX_RETRIES, "retry_timeout": timedelta(seconds=S3_RETRY_SECONDS)}
        try:
            store = S3Store(
                parts.netloc,
                prefix=prefix or None,
                config=options or None,  # type: ignore[arg-type]  # a plain dict of S3Config's keys
                client_options=client,  # type: ignore[arg-type]
                retry_config=retry,
            )
        except ObstoreError as exc:
            raise ConfigError(f"DRAGOMAN_STORE_URL={url!r}: {exc}") from exc
        return cls(store)

    @classmethod
    def from_settings(cls, hosted: HostedSettings) -> Storage:
        """The store ``hosted.store_url`` names: None → ``<data_dir>/files``; ``file:///path``;
        ``s3://bucket/prefix`` (with ``hosted.s3_endpoint`` and ``hosted.s3_region`` when set)."""
        url = hosted.store_url
        if url is None:
            return cls.local(hosted.data_dir / "files")
        if url.startswith("file://"):
            path = url.removeprefix("file://")
            if not path.startswith("/"):
                raise ConfigError(f"DRAGOMAN_STORE_URL={url!r}: a file:// URL names an absolute path")
            return cls.local(Path(path))
        if url.startswith("s3://"):
            return cls.s3(url, endpoint=hosted.s3_endpoint, region=hosted.s3_region)
        raise ConfigError(f"DRAGOMAN_STORE_URL={url!r}: a store is file:///path or s3://bucket/prefix")

    # ----- writing ------------------------------------------------------------------------------------
    def put_stream(self, key: str, chunks: Iterable[bytes], max_bytes: int) -> tuple[int, str]:
        """Write ``chunks`` under ``key``: ``(size, sha256 hex)``. Past ``max_bytes`` raises
        :class:`~dragoman.errors.FileTooLarge` (413) and nothing is left behind, as on any other failure
        (the chunk iterator's own errors rise unchanged)."""
        check_key(key)
        digest = hashlib.sha256()
        size = 0
        source_error: list[BaseException] = []

        def counted() -> Iterator[bytes]:
            nonlocal size
            iterator = iter(chunks)
            while True:
                try:
                    chunk = next(iterator)
                except StopIteration:
                    return
                except BaseException as exc:  # the source's own failure: raised again as it was, below
                    source_error.append(exc)
                    raise
                if not chunk:
                    continue
                size += len(chunk)
                if size > max_bytes:
                    raise _TooLarge
                digest.update(chunk)
                yield bytes(chunk)

        try:
            obstore.put(self.store, key, counted(), chunk_size=PART_SIZE, max_concurrency=2)
        except BaseException as exc:
            self._tidy(key)
            if isinstance(exc, _TooLarge) or isinstance(exc.__cause__, _TooLarge):
                raise FileTooLarge(f"the file is larger than the {max_bytes:,} bytes accepted") from None
            if source_error:
                raise source_error[0] from None
            if isinstance(exc, OSError):
                raise FileAccessError(f"storing {key}: {exc}") from exc
            with _reaching(key):
                raise
        return size, digest.hexdigest()

    def put_bytes(self, key: str, data: bytes) -> str:
        """Write ``data`` under ``key`` (atomic); its sha256 hex."""
        check_key(key)
        try:
            with _reaching(key):
                obstore.put(self.store, key, data)
        except OSError as exc:
            raise FileAccessError(f"storing {key}: {exc}") from exc
        return hashlib.sha256(data).hexdigest()

    def put_file(self, key: str, path: Path) -> tuple[int, str]:
        """Copy the local file ``path`` under ``key`` (streamed); ``(size, sha256 hex)``."""

        def chunks() -> Iterator[bytes]:
            with open(path, "rb") as handle:
                while block := handle.read(1024 * 1024):
                    yield block

        return self.put_stream(key, chunks(), max_bytes=1 << 62)

    # ----- reading ------------------------------------------------------------------------------------
    def open_stream(self, key: str, *, chunk_size: int = 1024 * 1024) -> Iterator[bytes]:
        """The object's bytes in chunks; :class:`FileNotFoundError` when there is none (raised at once)."""
        check_key(key)
        with _reaching(key):
            result = obstore.get(self.store, key)
        return self._streamed(key, iter(result.stream(min_chunk_size=chunk_size)))

    def open_range(self, key: str, start: int, end: int, *, chunk_size: int = 1024 * 1024) -> Iterator[bytes]:
        """Bytes ``start`` to ``end`` (exclusive; ``0 <= start < end <= size``) of the object, in chunks: a
        ranged read of the store (a local file is read from ``start``, S3 answers a ``Range`` GET), so a
        slice near the end of a large object costs only that slice. :class:`FileNotFoundError` when there is
        none (raised at once)."""
        check_key(key)
        if not 0 <= start < end:
            raise ValueError(f"empty or negative byte range {start}..{end}")
        with _reaching(key):
            result = obstore.get(self.store, key, options={"range": (start, end)})
        return self._streamed(key, iter(result.stream(min_chunk_size=chunk_size)))

    @staticmethod
    def _streamed(key: str, chunks: Iterator[Any]) -> Iterator[bytes]:
        while True:
            with _reaching(key):
                chunk = next(chunks, None)
            if chunk is None:
                return
            yield bytes(chunk)

    def get_bytes(self, key: str) -> bytes:
        """The whole object (for small ones); :class:`FileNotFoundError` when there is none."""
        check_key(key)
        with _reaching(key):
            return bytes(obstore.get(self.store, key).bytes())

    def exists(self, key: str) -> bool:
        check_key(key)
        try:
            with _reaching(key):
                obstore.head(self.store, key)
        except FileNotFoundError:
            return False
        return True

    def size(self, key: str) -> int:
        check_key(key)
        with _reaching(key):
            return int(obstore.head(self.store, key)["size"])

    def list(self, prefix: str = "") -> list[StoredObject]:
        """Every object whose key starts with the folder ``prefix`` (whole segments), oldest first."""
        if prefix:
            check_key(prefix.rstrip("/"))
        found: list[StoredObject] = []
        with _reaching(prefix or "/"):
            for batch in obstore.list(self.store, prefix.rstrip("/") or None, chunk_size=500):
                found.extend(StoredObject(m["path"], int(m["size"]), m["last_modified"]) for m in batch)
        found.sort(key=lambda o: (o.modified, o.key))
        return found

    # ----- removing -----------------------------------------------------------------------------------
    def delete(self, key: str) -> bool:
        """Remove ``key``; False when there was nothing to remove."""
        check_key(key)
        if self.root is None and not self.exists(key):  # S3 deletes a missing object without a word
            return False
        try:
            with _reaching(key):
                obstore.delete(self.store, key)
        except FileNotFoundError:
            return False
        self._tidy(key)
        return True

    def delete_prefix(self, prefix: str) -> int:
        """Remove every object under the folder ``prefix``; how many were removed."""
        return sum(self.delete(obj.key) for obj in self.list(prefix))

    def _tidy(self, key: str) -> None:
        """On a local store, remove the folders of ``key`` left empty (best effort)."""
        if self.root is None:
            return
        folder = (self.root / key).parent
        root = self.root.resolve()
        while folder.resolve() != root and root in folder.resolve().parents:
            try:
                os.rmdir(folder)
            except OSError:
                return
            folder = folder.parent
