"""Uploaded media of the hosted service (issue 15, spec 2.9 and 4.3): ``POST /api/v1/subtitles/upload``
keeps a video or audio file here, and subtitle (later dub) jobs name it by its ``video_id``.

- **Storing** (:func:`store_upload`): the front door spools the raw body to a private temporary file while
  it arrives (bounded at :data:`~dragoman.limits.MAX_FILE_BYTES`, 200 MB: 413 past it; sha256 computed on
  the way), then this module probes that file with PyAV (:func:`dragoman.media.probe.probe`: its type is
  read from the content, the declared ``x-video-mime`` is not trusted) and refuses what a subtitle job could
  not use with typed errors: not media or corrupt (415 ``unsupported_media``), no audio stream (422
  ``no_audio_stream``), zero seconds long (422 ``empty_media``). What passes is streamed into the file store
  under ``uploads/<video_id>/<safe name>`` and recorded in the ``media`` table. Probing the spooled copy
  works the same for a local store and for S3 (no second download).
- **Scope**: a ``video_id`` belongs to its **account**: any key of the account (a rotated key's successor, a
  second key) may use it; another account gets 404 ``media_not_found``, as for an id never made.
- **Retention**: uploads are kept ``uploads_retention_days`` (7 by default, HOSTED.md): the file is deleted by
  the retention purge with every other upload (:mod:`dragoman.service.retention`), the row is refused after
  ``expires_ms`` and deleted by :func:`purge_expired`.
- **Duration**: ``duration_ms`` is the probed duration; subtitle credits are computed on it (the client's
  ``durationSeconds`` is only checked against it).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, RowMapping, insert, select
from sqlalchemy import delete as delete_rows

from dragoman.errors import FileTooLarge, MediaNotFound
from dragoman.limits import MAX_FILE_BYTES
from dragoman.service.db import Database, media, now_ms
from dragoman.service.storage import safe_name

if TYPE_CHECKING:
    from dragoman.service.accounts import KeyInfo
    from dragoman.service.storage import Storage
    from dragoman.settings import HostedSettings

log = logging.getLogger(__name__)

UPLOADS = "uploads"
DAY_MS = 86_400_000
#: Characters of a client's file name and MIME type kept (longer ones are cut).
MAX_FILENAME_CHARS = 255
MAX_MIME_CHARS = 100
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class MediaRecord:
    """One upload (a row of ``media``)."""

    id: str
    account_id: str
    key_id: str
    storage_key: str
    filename: str
    mime: str
    size_bytes: int
    sha256: str
    duration_ms: int
    info: Mapping[str, Any]
    created_ms: int
    expires_ms: int

    @property
    def duration_seconds(self) -> float:
        return self.duration_ms / 1000.0

    @classmethod
    def from_row(cls, row: RowMapping) -> MediaRecord:
        return cls(
            id=row["id"],
            account_id=row["account_id"],
            key_id=row["key_id"],
            storage_key=row["storage_key"],
            filename=row["filename"],
            mime=row["mime"],
            size_bytes=int(row["size_bytes"]),
            sha256=row["sha256"],
            duration_ms=int(row["duration_ms"]),
            info=dict(row["info"] or {}),
            created_ms=int(row["created_ms"]),
            expires_ms=int(row["expires_ms"]),
        )


def clean_filename(name: str | None) -> str:
    """A client's file name as it may be shown back: its base name, control characters removed, at most
    :data:`MAX_FILENAME_CHARS` characters ('' for none). Never used as a path (storage keys use
    :func:`~dragoman.service.storage.safe_name`)."""
    base = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    return _CONTROL.sub("", base).strip()[:MAX_FILENAME_CHARS]


def clean_mime(mime: str | None) -> str:
    """A declared MIME type, lower-cased, parameters dropped, bounded ('' when it is not type/subtype)."""
    base = (mime or "").split(";", 1)[0].strip().lower()[:MAX_MIME_CHARS]
    return base if re.fullmatch(r"[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*", base) else ""


def probe_upload(path: Path, *, max_bytes: int = MAX_FILE_BYTES) -> dict[str, Any]:
    """Probe the spooled upload at ``path``: a summary (``duration_ms``, ``container``, ``has_video``,
    ``streams``) or the typed refusal (413, 415 ``unsupported_media``, 422 ``no_audio_stream``,
    422 ``empty_media``)."""
    from dragoman.errors import EmptyMedia, NoAudioStream
    from dragoman.media.probe import probe

    size = path.stat().st_size
    if size > max_bytes:
        raise FileTooLarge(f"the upload is over the {max_bytes:,} byte limit (200 MB)")
    info = probe(path, max_bytes=max_bytes)
    if not info.has_audio:
        raise NoAudioStream("the file has no audio stream: there is nothing to caption")
    duration_ms = round(float(info.duration) * 1000)
    if duration_ms <= 0:
        raise EmptyMedia("the file lasts 0 seconds: there is nothing to caption")
    return {
        "duration_ms": duration_ms,
        "container": info.container,
        "has_video": bool(info.has_video),
        "streams": [
            {
                "index": s.index,
                "kind": s.kind,
                "codec": s.codec,
                "duration": s.duration,
                "sample_rate": s.sample_rate,
                "channels": s.channels,
                "width": s.width,
                "height": s.height,
            }
            for s in info.streams
        ][:16],
    }


def store_upload(
    db: Database,
    storage: Storage,
    key: KeyInfo,
    path: Path,
    *,
    filename: str | None,
    declared_mime: str | None,
    settings: HostedSettings,
    max_bytes: int = MAX_FILE_BYTES,
) -> MediaRecord:
    """Probe the spooled upload at ``path`` (typed refusals: see :func:`probe_upload`), stream it into the
    store and record it; the new :class:`MediaRecord`. Nothing is stored or recorded when it is refused; a
    failure to record deletes the stored file."""
    summary = probe_upload(path, max_bytes=max_bytes)
    video_id = str(uuid.uuid4())
    name = clean_filename(filename)
    storage_key = f"{UPLOADS}/{video_id}/{safe_name(name or 'media', default='media')}"
    size, digest = storage.put_file(storage_key, path)
    now = now_ms()
    record = MediaRecord(
        id=video_id,
        account_id=key.account_id,
        key_id=key.key_id,
        storage_key=storage_key,
        filename=name,
        mime=clean_mime(declared_mime),
        size_bytes=size,
        sha256=digest,
        duration_ms=int(summary.pop("duration_ms")),
        info=summary,
        created_ms=now,
        expires_ms=now + int(settings.uploads_retention_days * DAY_MS),
    )
    try:
        with db.write() as conn:
            conn.execute(insert(media).values(**{**record.__dict__, "info": dict(record.info)}))
    except BaseException:
        storage.delete(storage_key)
        raise
    return record


def _load(conn: Connection, video_id: str) -> MediaRecord | None:
    if not isinstance(video_id, str) or not _UUID.match(video_id):
        return None
    found = conn.execute(select(media).where(media.c.id == video_id)).mappings().first()
    return None if found is None else MediaRecord.from_row(found)


def get(db: Database, account_id: str, video_id: str, *, now: int | None = None) -> MediaRecord:
    """The account's upload ``video_id``; 404 :class:`MediaNotFound` for an unknown id, another account's,
    or one past its retention."""
    with db.read() as conn:
        found = _load(conn, video_id)
    if found is None or found.account_id != account_id:
        raise MediaNotFound(f"no upload {str(video_id)[:60]!r} for this account; upload the file first")
    if found.expires_ms <= (now_ms() if now is None else now):
        raise MediaNotFound(
            f"upload {video_id} has expired (uploads are kept for 7 days); upload the file again"
        )
    return found


def get_any(db: Database, video_id: str) -> MediaRecord | None:
    """The upload ``video_id`` whoever owns it (for the job that was given it); None when there is none."""
    with db.read() as conn:
        return _load(conn, video_id)


def copy_to(storage: Storage, record: MediaRecord, destination: Path) -> Path:
    """Stream the upload's file to ``destination`` (a job's private folder); :class:`MediaNotFound` when
    the file is no longer stored (purged after its retention)."""
    try:
        chunks = storage.open_stream(record.storage_key)
        with destination.open("wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
    except FileNotFoundError as exc:
        destination.unlink(missing_ok=True)
        raise MediaNotFound(
            f"upload {record.id} is no longer stored (uploads are kept for 7 days); upload it again"
        ) from exc
    return destination


def delete(db: Database, storage: Storage, record: MediaRecord) -> None:
    """Delete an upload: its row, then its file."""
    with db.write() as conn:
        conn.execute(delete_rows(media).where(media.c.id == record.id))
    storage.delete(record.storage_key)


def purge_expired(db: Database, now: int) -> int:
    """Delete the rows of uploads past their ``expires_ms`` (their files go with the uploads retention);
    how many were deleted."""
    with db.write() as conn:
        return int(conn.execute(delete_rows(media).where(media.c.expires_ms < now)).rowcount or 0)
