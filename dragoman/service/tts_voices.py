"""Voice matches ("clones") per key, and word timings and edits of tts jobs (issue 14; spec 4.2 and 8).

**Clones.** :func:`add_clone` stores a clone made by :func:`dragoman.speech.tts.clones.make_clone`: the row
(``tts_clones``: the clone's analysis as JSON) and the cleaned reference in storage
(``clones/<key id>/<clone id>.wav``). A key holds at most 25 (:data:`~dragoman.speech.tts.clones.MAX_CLONES`;
the 26th is :class:`~dragoman.errors.CloneLimitReached`, 409), counted under a per-key lock.
:func:`delete_clone` removes the row and the clip. Clips are the user's data: never logged (only ids are).

**Words.** :func:`words_of` aligns a done tts job's words on first request
(:func:`dragoman.speech.tts.words.align_render` against the job's text) and keeps them in storage
(``tts/<id>/words.json``); later requests read them.

**Edits.** :func:`edit_job` applies per-word edits (:func:`dragoman.speech.tts.words.apply_edits`) to the
job's current audio and words and stores the result as a new version (``tts/<id>/edit-<n>-<token>.wav`` and
``.json``), which the job's artifacts then name (``audio``, ``words``; the render stays as
``original_audio``), so ``audio_url`` serves the edited audio. Edits are free within :data:`EDIT_WINDOW_MS`
(12 hours) of the render's end; after it :class:`~dragoman.errors.EditWindowClosed` (410).

**Concurrent edits of one job** are applied one after the other, each on the result of the one before (as
if they had been sent in turn; edits are relative — two ``gain_db: 3`` edits of a word make it 6 dB louder):

* in one process, a lock per job orders them (a caller waits at most :data:`EDIT_WAIT_S`);
* across API processes, the jobs row's ``edit_version`` is a compare-and-set: an edit reads the version with
  the audio, writes its result under fresh keys, and swaps the artifacts only where the version is still the
  one it read (one conditional UPDATE). The loser deletes its files and applies its edits again on the
  winner's audio, up to :data:`EDIT_ATTEMPTS` times; after that :class:`~dragoman.errors.EditConflict` (409,
  ``edit_conflict``) and nothing of it is applied.

The version an edit replaced is kept one edit longer (``superseded_audio``/``superseded_words``: a download
or a /words read that began just before the swap still finds its file), then deleted; all of them are
artifacts of the job, so the results retention deletes what is left with the job.

**Orphans.** An edit writes its files before the row that names them commits. When writing them fails,
what was written is deleted at once. When the swap fails (the database unreachable: its commit may even
have landed, so the files are not deleted blindly), when the process dies in between (killed, a power cut),
or before it deleted the version its edit superseded, files stay that no row may name:
:func:`sweep_orphans` (run by every retention purge, so soon after a runner starts and then hourly) deletes
the edit files (``tts/<id>/edit-*``) and word files (``tts/<id>/words.json``) that the job's artifacts do not
name, once they are older than :data:`ORPHAN_GRACE_MS` (1 hour: an edit commits a few seconds after its
write, whichever process runs it). A file an edit of this process is writing or committing is never swept,
whatever its age.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final

import numpy as np
from sqlalchemy import delete, func, insert, select, update

from dragoman.errors import (
    CloneLimitReached,
    CloneNotFound,
    EditConflict,
    EditWindowClosed,
    InvalidRequest,
    JobNotFound,
)
from dragoman.media.audio import Audio
from dragoman.service import db as tables
from dragoman.service.db import lock, now_ms
from dragoman.service.tts_jobs import AUDIO, audio_key

if TYPE_CHECKING:
    from dragoman.service.db import Database
    from dragoman.service.jobs import JobRecord
    from dragoman.service.storage import Storage
    from dragoman.speech.tts.clones import Clone

log = logging.getLogger("dragoman.service.tts_voices")

#: The word editor keeps a render editable this long after it finished (spec 8: 12 hours).
EDIT_WINDOW_MS: Final = 12 * 3600 * 1000
#: Tries of an edit that another API process keeps beating to the same job (then 409 ``edit_conflict``).
EDIT_ATTEMPTS: Final = 8
#: The longest an edit waits for another edit of the same job running in this process (then 409).
EDIT_WAIT_S: Final = 120.0
#: The job's artifacts that name its words and the versions an edit replaced.
WORDS: Final = "words"
ORIGINAL_AUDIO: Final = "original_audio"
SUPERSEDED_AUDIO: Final = "superseded_audio"
SUPERSEDED_WORDS: Final = "superseded_words"
#: An unnamed edit or words file younger than this may belong to an edit not yet committed: never swept.
ORPHAN_GRACE_MS: Final = 3600 * 1000
#: Jobs whose artifacts one query of the sweep reads.
_SWEEP_PAGE: Final = 500
_ORPHAN = re.compile(r"tts/([^/]+)/(?:edit-[^/]+\.(?:wav|json)|words\.json)")


def clip_key(key_id: str, clone_id: str) -> str:
    return f"clones/{key_id}/{clone_id}.wav"


def words_key(job_id: str) -> str:
    return f"tts/{job_id}/words.json"


def edit_keys(job_id: str, version: int) -> tuple[str, str]:
    """Fresh storage keys (audio, words) of an edit's result: the version and a random token, so two
    processes applying the same version never write the same file."""
    stem = f"tts/{job_id}/edit-{version}-{secrets.token_hex(6)}"
    return f"{stem}.wav", f"{stem}.json"


# ----- clones ---------------------------------------------------------------------------------------------
def count_clones(db: Database, key_id: str) -> int:
    with db.read() as conn:
        return int(
            conn.execute(
                select(func.count())
                .select_from(tables.tts_clones)
                .where(tables.tts_clones.c.key_id == key_id)
            ).scalar_one()
        )


def add_clone(db: Database, storage: Storage, key_id: str, clone: Clone, clip_wav: bytes) -> Clone:
    """Store ``clone`` for ``key_id`` with its clip; the 26th is refused (409) and leaves nothing behind."""
    from dragoman.speech.tts.clones import MAX_CLONES

    stored = clip_key(key_id, clone.id)
    storage.put_bytes(stored, clip_wav)
    try:
        with db.write() as conn:
            lock(conn, "tts_clones", key_id)
            count = conn.execute(
                select(func.count())
                .select_from(tables.tts_clones)
                .where(tables.tts_clones.c.key_id == key_id)
            ).scalar_one()
            if count >= MAX_CLONES:
                raise CloneLimitReached(
                    f"this key has {MAX_CLONES} voice clones, the most there may be; delete one first "
                    "(DELETE /api/v1/tts/voices/clones/{id})"
                )
            conn.execute(
                insert(tables.tts_clones).values(
                    id=clone.id,
                    key_id=key_id,
                    name=clone.name,
                    record=clone.to_dict(),
                    clip_key=stored,
                    created_ms=now_ms(),
                )
            )
    except BaseException:
        storage.delete(stored)
        raise
    log.info("clone %s stored for key %s", clone.id, key_id)
    return clone


def list_clones(db: Database, key_id: str) -> list[Clone]:
    from dragoman.speech.tts.clones import Clone

    with db.read() as conn:
        rows = conn.execute(
            select(tables.tts_clones.c.record)
            .where(tables.tts_clones.c.key_id == key_id)
            .order_by(tables.tts_clones.c.created_ms, tables.tts_clones.c.id)
        ).all()
    return [Clone.from_dict(dict(row.record)) for row in rows]


def get_clone(db: Database, key_id: str, clone_id: str) -> Clone:
    from dragoman.speech.tts.clones import Clone

    with db.read() as conn:
        row = conn.execute(
            select(tables.tts_clones.c.record).where(
                tables.tts_clones.c.id == clone_id, tables.tts_clones.c.key_id == key_id
            )
        ).first()
    if row is None:
        raise CloneNotFound(f"no voice clone {clone_id!r} for this key")
    return Clone.from_dict(dict(row.record))


def delete_clone(db: Database, storage: Storage, key_id: str, clone_id: str) -> None:
    """Remove the clone and its clip (404 when the key has no such clone)."""
    with db.write() as conn:
        row = conn.execute(
            select(tables.tts_clones.c.clip_key).where(
                tables.tts_clones.c.id == clone_id, tables.tts_clones.c.key_id == key_id
            )
        ).first()
        if row is None:
            raise CloneNotFound(f"no voice clone {clone_id!r} for this key")
        conn.execute(delete(tables.tts_clones).where(tables.tts_clones.c.id == clone_id))
    storage.delete(str(row.clip_key))
    log.info("clone %s deleted for key %s", clone_id, key_id)


# ----- words and edits --------------------------------------------------------------------------------------
def _audio_of(job: JobRecord, storage: Storage) -> bytes:
    stored = job.artifacts.get(AUDIO)
    if job.status != "done" or not stored:
        raise JobNotFound(f"tts job {job.id} has no audio yet: it is {job.status} (poll its poll_url)")
    return storage.get_bytes(stored)


def _text_and_language(job: JobRecord) -> tuple[str, str]:
    text = job.params.get("text")
    options = job.params.get("options")
    if not isinstance(text, str) or not isinstance(options, Mapping):
        raise JobNotFound(f"tts job {job.id} has no text to align")
    return text, str(options.get("language") or job.params.get("target_lang") or "en")


def _add_artifacts(db: Database | None, job_id: str, added: dict[str, str]) -> None:
    """Name ``added`` files among the job's artifacts, so the results retention deletes them with the rest
    (a name the job has already keeps its file: an edit may have moved ``words`` on meanwhile)."""
    if db is None:
        return
    with db.write() as conn:
        lock(conn, "job", job_id)
        row = conn.execute(select(tables.jobs.c.artifacts).where(tables.jobs.c.id == job_id)).first()
        if row is None:
            return
        artifacts = dict(row.artifacts or {})
        if all(k in artifacts for k in added):
            return
        conn.execute(
            update(tables.jobs).where(tables.jobs.c.id == job_id).values(artifacts={**added, **artifacts})
        )


def _edit_state(db: Database | None, job: JobRecord) -> tuple[int, JobRecord]:
    """The job's edit version and the job with its artifacts as they are now (``job`` as given without a
    database: then the version is 0)."""
    if db is None:
        return 0, job
    with db.read() as conn:
        row = conn.execute(
            select(tables.jobs.c.edit_version, tables.jobs.c.artifacts).where(tables.jobs.c.id == job.id)
        ).first()
    if row is None:
        raise JobNotFound(f"no job {job.id}")
    return int(row.edit_version or 0), replace(job, artifacts=dict(row.artifacts or {}))


def words_of(job: JobRecord, storage: Storage, db: Database | None = None) -> list[dict[str, object]]:
    """The job's word timings (index, word, start, end in seconds), aligned on the first request (and named
    among the job's artifacts in ``db``, so they go with the job's results); after edits, the edited
    timings."""
    from dragoman.media.audio import read_wav
    from dragoman.speech.tts.words import align_render, timings_to_json

    _, job = _edit_state(db, job)
    stored = job.artifacts.get(WORDS) or words_key(job.id)
    if storage.exists(stored):
        data = json.loads(storage.get_bytes(stored))
        if isinstance(data, list):
            return data
    audio = read_wav(_audio_of(job, storage))
    text, language = _text_and_language(job)
    words = timings_to_json(align_render(audio, text, language))
    stored = words_key(job.id)
    storage.put_bytes(stored, json.dumps(words, ensure_ascii=False).encode())
    _add_artifacts(db, job.id, {WORDS: stored})
    return words


def _wav16(audio: Audio) -> bytes:
    """A 16-bit WAV whose samples are ``round(x·32768)``, the inverse of how :func:`read_wav` decodes 16-bit
    PCM (``k/32768``), so the samples an edit did not touch are written back as the very bytes they were
    read from (the writer of :mod:`dragoman.media.audio` scales by 32767, which would move them by one)."""
    from dragoman.media.audio import wav_bytes

    header = wav_bytes(Audio(np.zeros(len(audio), dtype=np.float32), audio.rate))[:44]  # real sizes
    ints = np.clip(np.round(audio.samples.astype(np.float64) * 32768.0), -32768, 32767).astype("<i2")
    return header + ints.tobytes()


def editable_until_ms(job: JobRecord) -> int:
    return (job.finished_ms or job.created_ms) + EDIT_WINDOW_MS


@dataclass
class _JobLock:
    lock: threading.Lock = field(default_factory=threading.Lock)
    users: int = 0


_JOB_LOCKS: dict[str, _JobLock] = {}
_JOB_LOCKS_GUARD = threading.Lock()


@contextmanager
def _job_edit_lock(job_id: str) -> Iterator[None]:
    """Edits of one job in this process, one at a time (the entry goes when no one holds or waits)."""
    with _JOB_LOCKS_GUARD:
        entry = _JOB_LOCKS.setdefault(job_id, _JobLock())
        entry.users += 1
    try:
        if not entry.lock.acquire(timeout=EDIT_WAIT_S):
            raise EditConflict(
                f"tts job {job_id} is being edited and the edits before this one did not finish within "
                f"{EDIT_WAIT_S:g} s; nothing of this edit was applied: retry"
            )
        try:
            yield
        finally:
            entry.lock.release()
    finally:
        with _JOB_LOCKS_GUARD:
            entry.users -= 1
            if entry.users == 0:
                _JOB_LOCKS.pop(job_id, None)


def _swap_artifacts(
    db: Database, job_id: str, version: int, audio: str, words: str
) -> tuple[dict[str, str], dict[str, str]] | None:
    """Name the edit's files as the job's audio and words where its edit version is still ``version`` (then
    one more): (the artifacts before, after); None when another edit got there first."""
    jobs = tables.jobs
    with db.write() as conn:
        lock(conn, "job", job_id)
        row = conn.execute(select(jobs.c.artifacts).where(jobs.c.id == job_id)).first()
        if row is None:
            raise JobNotFound(f"no job {job_id}")
        before = dict(row.artifacts or {})
        after = {
            **before,
            AUDIO: audio,
            WORDS: words,
            ORIGINAL_AUDIO: before.get(ORIGINAL_AUDIO) or before.get(AUDIO) or audio_key(job_id),
            SUPERSEDED_AUDIO: before.get(AUDIO) or audio_key(job_id),
            SUPERSEDED_WORDS: before.get(WORDS) or words_key(job_id),
        }
        done = conn.execute(
            update(jobs)
            .where(jobs.c.id == job_id, jobs.c.edit_version == version)
            .values(artifacts=after, edit_version=version + 1)
        )
        return (before, after) if done.rowcount == 1 else None


def edit_job(
    job: JobRecord, storage: Storage, body: Any, at_ms: int | None = None, db: Database | None = None
) -> dict[str, Any]:
    """Apply the edits of ``body`` to the job's audio, after any edit of the same job running now (module
    docstring); the new timings and duration."""
    at = now_ms() if at_ms is None else at_ms
    if at > editable_until_ms(job):
        raise EditWindowClosed(
            f"tts job {job.id} finished more than 12 hours ago; its words can no longer be edited "
            "(render it again)"
        )
    with _job_edit_lock(job.id):
        for _ in range(EDIT_ATTEMPTS):
            done = _try_edit(job, storage, body, db)
            if done is not None:
                return done
    raise EditConflict(
        f"tts job {job.id} was edited by other requests {EDIT_ATTEMPTS} times while this edit was applied; "
        "nothing of it was applied: read its /words again and retry"
    )


def _try_edit(job: JobRecord, storage: Storage, body: Any, db: Database | None) -> dict[str, Any] | None:
    """One try of :func:`edit_job` on the job's current version; None when another process's edit landed
    first (this one's files are deleted again)."""
    from dragoman.media.audio import read_wav
    from dragoman.speech.tts.words import apply_edits, parse_edits, timings_from_json, timings_to_json

    version, job = _edit_state(db, job)
    words = timings_from_json(words_of(job, storage, None))
    if not words:
        raise InvalidRequest(f"tts job {job.id} has no words to edit")
    edits = parse_edits(body, words)
    if db is not None and WORDS not in job.artifacts:
        _add_artifacts(db, job.id, {WORDS: words_key(job.id)})  # aligned just now: the job's words
    edited, timings = apply_edits(read_wav(_audio_of(job, storage)), words, edits)
    as_json = timings_to_json(timings)
    audio_out, words_out = edit_keys(job.id, version + 1)
    with _writing(audio_out, words_out):  # until the swap is over, the sweep leaves them alone
        try:
            storage.put_bytes(audio_out, _wav16(edited))
            storage.put_bytes(words_out, json.dumps(as_json, ensure_ascii=False).encode())
        except BaseException:  # nothing names them: gone at once
            _delete_quietly(storage, audio_out, words_out)
            raise
        # a failed swap leaves them to the sweep: its commit may have landed (a connection lost after it)
        swapped = None if db is None else _swap_artifacts(db, job.id, version, audio_out, words_out)
    if db is not None:
        if swapped is None:
            _delete_quietly(storage, audio_out, words_out)
            log.info("edit of tts job %s lost to another at version %d: applied again", job.id, version)
            return None
        before, after = swapped
        kept = set(after.values())
        for old in (before.get(SUPERSEDED_AUDIO), before.get(SUPERSEDED_WORDS)):
            if old and old not in kept:
                storage.delete(old)
    return {
        "job_id": job.id,
        "edits_applied": len(edits),
        "duration_seconds": round(edited.duration, 3),
        "words": as_json,
        "credits": 0,
        "editable_until_ms": editable_until_ms(job),
    }


# ----- orphans of interrupted edits -------------------------------------------------------------------------
_LIVE: dict[str, int] = {}  # keys an edit of this process is writing or committing → how many such edits
_LIVE_GUARD = threading.Lock()


@contextmanager
def _writing(*keys: str) -> Iterator[None]:
    """Mark ``keys`` as an edit's files not yet committed: :func:`sweep_orphans` leaves them alone."""
    with _LIVE_GUARD:
        for key in keys:
            _LIVE[key] = _LIVE.get(key, 0) + 1
    try:
        yield
    finally:
        with _LIVE_GUARD:
            for key in keys:
                left = _LIVE.pop(key) - 1
                if left:
                    _LIVE[key] = left


def _delete_quietly(storage: Storage, *keys: str) -> None:
    """Delete ``keys``, logging (not raising) a failure: the sweep deletes what is left."""
    for key in keys:
        try:
            storage.delete(key)
        except Exception:
            log.warning(
                "could not delete %s of an edit that did not land; the sweep will", key, exc_info=True
            )


def sweep_orphans(db: Database, storage: Storage, now_ms: int, grace_ms: int = ORPHAN_GRACE_MS) -> int:
    """Delete the edit and word files of tts jobs (``tts/<id>/edit-*``, ``tts/<id>/words.json``) that no
    job's artifacts name and that are older than ``grace_ms`` at ``now_ms``, except those an edit of this
    process is still writing; how many were deleted (see the module's notes)."""
    cutoff = now_ms - grace_ms
    with _LIVE_GUARD:
        live = set(_LIVE)
    by_job: dict[str, list[str]] = {}
    for obj in storage.list("tts"):
        found = _ORPHAN.fullmatch(obj.key)
        if found is not None and obj.modified_ms < cutoff and obj.key not in live:
            by_job.setdefault(found.group(1), []).append(obj.key)
    deleted = 0
    ids = list(by_job)
    for at in range(0, len(ids), _SWEEP_PAGE):
        page = ids[at : at + _SWEEP_PAGE]
        with db.read() as conn:
            rows = conn.execute(
                select(tables.jobs.c.id, tables.jobs.c.artifacts).where(tables.jobs.c.id.in_(page))
            ).all()
        named = {str(row.id): {str(v) for v in dict(row.artifacts or {}).values()} for row in rows}
        for job_id in page:
            for key in by_job[job_id]:
                if key in named.get(job_id, ()):
                    continue
                with _LIVE_GUARD:
                    if key in _LIVE:  # an edit began writing it since the listing
                        continue
                try:
                    deleted += storage.delete(key)
                except Exception:  # one key that cannot be deleted must not stop the sweep
                    log.warning("tts sweep: could not delete %s", key, exc_info=True)
    if deleted:
        log.info("tts sweep: %d file(s) of interrupted edits deleted", deleted)
    return deleted
