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
job's current audio and words and stores both in place (the first edit keeps the render as
``tts/<id>/original.wav``), so ``audio_url`` serves the edited audio. Edits are free within
:data:`EDIT_WINDOW_MS` (12 hours) of the render's end; after it :class:`~dragoman.errors.EditWindowClosed`
(410).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import numpy as np
from sqlalchemy import delete, func, insert, select, update

from dragoman.errors import CloneLimitReached, CloneNotFound, EditWindowClosed, InvalidRequest, JobNotFound
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


def clip_key(key_id: str, clone_id: str) -> str:
    return f"clones/{key_id}/{clone_id}.wav"


def words_key(job_id: str) -> str:
    return f"tts/{job_id}/words.json"


def original_key(job_id: str) -> str:
    return f"tts/{job_id}/original.wav"


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
    """Name ``added`` files among the job's artifacts, so the results retention deletes them with the rest."""
    if db is None:
        return
    with db.write() as conn:
        lock(conn, "job", job_id)
        row = conn.execute(select(tables.jobs.c.artifacts).where(tables.jobs.c.id == job_id)).first()
        if row is None:
            return
        artifacts = dict(row.artifacts or {})
        if all(artifacts.get(k) == v for k, v in added.items()):
            return
        conn.execute(
            update(tables.jobs).where(tables.jobs.c.id == job_id).values(artifacts={**artifacts, **added})
        )


def words_of(job: JobRecord, storage: Storage, db: Database | None = None) -> list[dict[str, object]]:
    """The job's word timings (index, word, start, end in seconds), aligned on the first request (and named
    among the job's artifacts in ``db``, so they go with the job's results)."""
    from dragoman.media.audio import read_wav
    from dragoman.speech.tts.words import align_render, timings_to_json

    stored = words_key(job.id)
    if storage.exists(stored):
        data = json.loads(storage.get_bytes(stored))
        if isinstance(data, list):
            return data
    audio = read_wav(_audio_of(job, storage))
    text, language = _text_and_language(job)
    words = timings_to_json(align_render(audio, text, language))
    storage.put_bytes(stored, json.dumps(words, ensure_ascii=False).encode())
    _add_artifacts(db, job.id, {"words": stored})
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


def edit_job(
    job: JobRecord, storage: Storage, body: Any, at_ms: int | None = None, db: Database | None = None
) -> dict[str, Any]:
    """Apply the edits of ``body`` to the job's audio (module docstring); the new timings and duration."""
    from dragoman.media.audio import read_wav
    from dragoman.speech.tts.words import apply_edits, parse_edits, timings_from_json, timings_to_json

    at = now_ms() if at_ms is None else at_ms
    if at > editable_until_ms(job):
        raise EditWindowClosed(
            f"tts job {job.id} finished more than 12 hours ago; its words can no longer be edited "
            "(render it again)"
        )
    words = timings_from_json(words_of(job, storage, db))
    if not words:
        raise InvalidRequest(f"tts job {job.id} has no words to edit")
    edits = parse_edits(body, words)
    current = _audio_of(job, storage)
    audio = read_wav(current)
    edited, timings = apply_edits(audio, words, edits)
    if not storage.exists(original_key(job.id)):
        storage.put_bytes(original_key(job.id), current)
        _add_artifacts(db, job.id, {"original_audio": original_key(job.id)})
    storage.put_bytes(job.artifacts.get(AUDIO) or audio_key(job.id), _wav16(edited))
    as_json = timings_to_json(timings)
    storage.put_bytes(words_key(job.id), json.dumps(as_json, ensure_ascii=False).encode())
    return {
        "job_id": job.id,
        "edits_applied": len(edits),
        "duration_seconds": round(edited.duration, 3),
        "words": as_json,
        "credits": 0,
        "editable_until_ms": editable_until_ms(job),
    }
