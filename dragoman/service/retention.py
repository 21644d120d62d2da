"""Retention of the hosted service's data (HOSTED.md: results and exports 30 days, uploads 7 days; both
configurable) and the purge that enforces it. The job runner calls :func:`purge` every hour.

- A finished job older than the results retention keeps its row (it is listed, its credits counted) but loses
  its ``result`` and its ``artifacts``, whose files are deleted.
- Files under ``exports/`` older than the results retention and under ``uploads/`` older than the uploads
  retention are deleted, whether or not a job still names them (the job is long finished by then).
- Subtitle files (``subtitles/``, issue 15) follow the results retention like exports; rows of uploaded media
  past their ``expires_ms`` are deleted (:func:`dragoman.service.media_store.purge_expired`), and subtitle
  children whose batch's engine job ended without them are failed and refunded
  (:func:`dragoman.service.subtitle_jobs.reconcile`).
- Dub files (``dubs/``, issue 16: dubbed videos, audio, subtitles) follow the results retention too, and dub
  children whose engine job ended without them are failed and refunded
  (:func:`dragoman.service.dub_jobs.reconcile`).
- Files of tts word edits that no job names (an edit interrupted between its write and its commit) are
  deleted after an hour's grace (:func:`dragoman.service.tts_voices.sweep_orphans`; issue 14).
- Idempotency rows past their ``expires_ms`` (24 h) are deleted.
- Webhook events delivered (or given up) more than :data:`WEBHOOK_EVENTS_DAYS` days ago are deleted with
  their delivery log.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import String, cast, delete, or_, select, update

from dragoman.service.db import Database, idempotency, jobs, webhook_attempts, webhook_events
from dragoman.settings import HostedSettings, Settings

if TYPE_CHECKING:
    from dragoman.service.storage import Storage

log = logging.getLogger(__name__)

DAY_MS = 86_400_000
#: Days the delivery log of a finished webhook event is kept.
WEBHOOK_EVENTS_DAYS = 30
#: Rows handled per transaction (a purge never holds the write lock long).
PAGE = 500
_TERMINAL = ("done", "failed", "canceled")


@dataclass(frozen=True)
class PurgeReport:
    """What one purge removed."""

    results_cleared: int = 0
    files_deleted: int = 0
    uploads_deleted: int = 0
    idempotency_deleted: int = 0
    webhook_events_deleted: int = 0


def hosted_of(settings: HostedSettings | Settings) -> HostedSettings:
    """The hosted section of ``settings`` (given whole or as the section)."""
    return settings.hosted if isinstance(settings, Settings) else settings


def purge(db: Database, storage: Storage, settings: HostedSettings | Settings, now_ms: int) -> PurgeReport:
    """Remove what is past its retention at ``now_ms`` (see the module's notes)."""
    hosted = hosted_of(settings)
    results_cutoff = now_ms - int(hosted.results_retention_days * DAY_MS)
    uploads_cutoff = now_ms - int(hosted.uploads_retention_days * DAY_MS)
    cleared, files = _clear_results(db, storage, results_cutoff)
    files += _delete_older(storage, "exports", results_cutoff)
    files += _delete_older(storage, "subtitles", results_cutoff)
    files += _delete_older(storage, "dubs", results_cutoff)  # dubbed videos, audio, subtitles (issue 16)
    uploads = _delete_older(storage, "uploads", uploads_cutoff)
    from dragoman.service import dub_jobs, media_store, subtitle_jobs, tts_voices  # they import the jobs

    files += tts_voices.sweep_orphans(db, storage, now_ms)  # files of word edits interrupted (issue 14)
    media_store.purge_expired(db, now_ms)
    subtitle_jobs.reconcile(db)
    dub_jobs.reconcile(db)
    with db.write() as conn:
        idem = conn.execute(delete(idempotency).where(idempotency.c.expires_ms < now_ms)).rowcount
    events = _purge_webhook_events(db, now_ms - WEBHOOK_EVENTS_DAYS * DAY_MS)
    report = PurgeReport(cleared, files, uploads, idem, events)
    if report != PurgeReport():
        log.info("retention purge: %s", report)
    return report


def _clear_results(db: Database, storage: Storage, cutoff: int) -> tuple[int, int]:
    cleared = files = 0
    has_something = or_(jobs.c.result.is_not(None), cast(jobs.c.artifacts, String) != "{}")
    while True:
        with db.read() as conn:
            rows = conn.execute(
                select(jobs.c.id, jobs.c.artifacts)
                .where(jobs.c.status.in_(_TERMINAL), jobs.c.finished_ms < cutoff, has_something)
                .limit(PAGE)
            ).all()
        if not rows:
            return cleared, files
        for job_id, artifacts in rows:
            for key in dict(artifacts or {}).values():
                try:
                    files += storage.delete(str(key))
                except Exception:  # a key that is no longer valid must not stop the purge
                    log.warning("retention: could not delete %s of job %s", key, job_id, exc_info=True)
        with db.write() as conn:
            cleared += conn.execute(
                update(jobs)
                .where(jobs.c.id.in_([r[0] for r in rows]), jobs.c.finished_ms < cutoff)
                .values(result=None, artifacts={})
            ).rowcount
        if len(rows) < PAGE:
            return cleared, files


def _delete_older(storage: Storage, prefix: str, cutoff: int) -> int:
    deleted = 0
    for obj in storage.list(prefix):
        if obj.modified_ms < cutoff:
            deleted += storage.delete(obj.key)
    return deleted


def _purge_webhook_events(db: Database, cutoff: int) -> int:
    deleted = 0
    while True:
        with db.write() as conn:
            ids = (
                conn.execute(
                    select(webhook_events.c.id)
                    .where(webhook_events.c.state != "pending", webhook_events.c.created_ms < cutoff)
                    .limit(PAGE)
                )
                .scalars()
                .all()
            )
            if not ids:
                return deleted
            conn.execute(delete(webhook_attempts).where(webhook_attempts.c.event_id.in_(ids)))
            deleted += conn.execute(delete(webhook_events).where(webhook_events.c.id.in_(ids))).rowcount
        if len(ids) < PAGE:
            return deleted
