"""The ``subtitle`` job kind of the hosted service (issue 15; spec 2.9, 4.3, 6 and 8): captions of an upload
in its spoken language and, optionally, translated into target languages.

**A batch = one engine job + child jobs** (spec 2.9: "all children share one engine job"). :func:`submit`
writes, in the caller's transaction:

- a ``batches`` row (kind ``subtitle``, ``target_count`` = the number of children);
- one **child** job per output (params ``role: child``): caption-only (no ``targetLangs``) has one child of
  mode ``caption``; with targets, one child of mode ``translate`` per target language. Children carry the
  batch id, are what the client sees (``jobIds``), and are charged, refunded, polled, downloaded and
  canceled one by one. They are never claimed by a worker: they wait ``queued`` under the pseudo lease
  owner ``subtitle-batch:<engine id>`` (a claim and Procrastinate's orphan sweep skip queued jobs with an
  owner), become ``active`` when their engine job starts (with no lease expiry: the expired-lease sweep
  skips them), and ``done``/``failed`` through the same compare-and-set transitions as every job
  (:func:`dragoman.service.jobs.complete` / ``fail`` under that owner), or ``canceled`` by
  ``DELETE /api/v1/jobs/{id}``;
- one **engine** job (params ``role: engine``, no batch id, kind ``subtitle``, queue ``subtitle``): the only
  one a worker runs. It sends no webhook of its own (its children do).

**The engine job** (:func:`make_subtitle_handler`) copies the upload to a private folder, recognises it ONCE
(:func:`dragoman.pipelines.subtitles.recognise_file`: probe, decode, Whisper; progress 0-70 %), builds the
source track (:func:`~dragoman.pipelines.subtitles.caption_track`) and stores it, then produces each child
still pending in turn (70-100 %): a ``caption`` child gets the source files; a ``translate`` child its
target's (:func:`~dragoman.pipelines.subtitles.translate_track`) plus the bilingual SRT. Each child is
marked done on its own (charged its reservation; ``subtitle.done``), or failed on its own (refunded;
``subtitle.failed``) while its siblings continue; the child that leaves the batch with nothing pending sends
``subtitle.batch.completed``, exactly once (the batch's compare-and-set of :mod:`dragoman.service.jobs`).
A recognition that fails for good (a refusal of the media, or the last attempt) fails every pending child
(each refunded) and then the engine job (refunded); a failure that may pass is retried by the runner (the
children wait). A canceled child is skipped (its late completion loses the compare-and-set and its files
are deleted); when no child is left pending the engine stops.

**Credits** (spec 8, on the PROBED duration, pro-rata per second rounded up; :func:`subtitle_quote`):
caption = ``ceil(30 x seconds / 60)``, per target = ``ceil(60 x seconds / 60)``. Caption-only: the one child
reserves the caption charge (``perChild`` = ``totalCredits`` = caption). Translate: each child reserves the
per-target charge (``perChild``); the recognition charge (caption) is the engine job's, reserved with the
batch and charged when at least one child is done (released when every child failed or was canceled):
``totalCredits`` = caption + n x perChild. The bilingual SRT costs nothing. A batch that cannot pay in full
is refused (402) and nothing is written.

**Artifacts** (storage keys; deleted with the job after the results retention, 30 days):

=================================== ==========================================================
``subtitles/<engine>/<src>.<ext>``  the source track (srt, vtt, txt): every child can serve it
``subtitles/<child>/<tgt>.<ext>``   a translate child's target track (srt, vtt, txt)
``subtitles/<child>/<src>-<tgt>.srt`` a translate child's bilingual SRT
=================================== ==========================================================

A child's ``artifacts`` map ``"<fmt>:<lang>"`` to these keys. Its ``result`` is a JSON summary
(:func:`summary`); the engine's ``result`` holds the batch's stage while it runs (``recognising``,
``captioning``, ``translating``) and the detected source language once known.
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, select

from dragoman.errors import (
    Cancelled,
    DragomanError,
    DurationMismatch,
    InsufficientCredits,
    InvalidRequest,
    LimitExceeded,
    MediaNotFound,
)
from dragoman.limits import MAX_FILE_BYTES
from dragoman.progress import JobContext
from dragoman.service import billing, engine_batches, jobs
from dragoman.service.db import Database, batches
from dragoman.service.jobs import Handler, JobOutcome, JobRecord

if TYPE_CHECKING:
    from dragoman.service.accounts import KeyInfo
    from dragoman.service.media_store import MediaRecord
    from dragoman.service.storage import Storage
    from dragoman.speech.asr import Recognizer
    from dragoman.translation.engine import Engine

log = logging.getLogger("dragoman.service.subtitle")

KIND = "subtitle"
CAPTION, TRANSLATE = "caption", "translate"
ROLE_ENGINE, ROLE_CHILD = jobs.ENGINE_ROLE, "child"
#: Lease owner of a batch's children while its engine job works on them (no expiry: never swept).
CHILD_OWNER_PREFIX = "subtitle-batch:"
#: Output formats (spec 4.3) and the file extension and media type of each.
FORMATS = ("srt", "vtt", "txt", "bilingual_srt")
SOURCE_FORMATS = ("srt", "vtt", "txt")
EXTENSIONS: Mapping[str, str] = {"srt": "srt", "vtt": "vtt", "txt": "txt", "bilingual_srt": "srt"}
MEDIA_TYPES: Mapping[str, str] = {
    "srt": "application/x-subrip; charset=utf-8",
    "vtt": "text/vtt; charset=utf-8",
    "txt": "text/plain; charset=utf-8",
    "bilingual_srt": "application/x-subrip; charset=utf-8",
}
#: Spec 8: credits per minute of media, caption-only (the recognition) and per target language.
CAPTION_CREDITS_PER_MINUTE = 30
TARGET_CREDITS_PER_MINUTE = 60
#: Most target languages in one batch (a batch's children share one recognition run).
MAX_TARGETS = 32
#: ``durationSeconds`` must match the probed duration within max(this many seconds, this share of it).
DURATION_TOLERANCE_S = 1.0
DURATION_TOLERANCE_SHARE = 0.02
#: Share of the engine job's progress that recognition takes (the children share the rest).
RECOGNITION_SHARE = 70
#: Stages a status reports.
QUEUED_STAGE, RECOGNISING, CAPTIONING, TRANSLATING = "queued", "recognising", "captioning", "translating"
#: The engine-job batch machinery (:mod:`dragoman.service.engine_batches`) of subtitle jobs.
BATCH = engine_batches.EngineBatch(KIND, CHILD_OWNER_PREFIX, run_name="recognition run")
per_minute = engine_batches.per_minute


# ----- prices -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SubtitleQuote:
    """What a subtitle batch reserves (module notes): ``caption`` is the recognition charge, ``per_child``
    what each child reserves, ``engine`` what the engine job reserves, ``total`` all of it."""

    mode: str
    duration_ms: int
    targets: int
    caption: int
    per_child: int
    engine: int
    total: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "credits": self.total,
            "breakdown": {
                "product": "caption",
                "mode": self.mode,
                "durationSeconds": self.duration_ms / 1000,
                "targets": self.targets,
                "captionCredits": self.caption,
                "perChild": self.per_child,
                "perMinute": {"caption": CAPTION_CREDITS_PER_MINUTE, "target": TARGET_CREDITS_PER_MINUTE},
            },
        }


def subtitle_quote(duration_ms: int, targets: int) -> SubtitleQuote:
    """The credits of a batch over media of ``duration_ms`` (probed) with ``targets`` target languages."""
    if targets < 0:
        raise InvalidRequest("the number of target languages cannot be negative")
    caption = per_minute(duration_ms, CAPTION_CREDITS_PER_MINUTE)
    if targets == 0:
        return SubtitleQuote(CAPTION, duration_ms, 0, caption, caption, 0, caption)
    per_child = per_minute(duration_ms, TARGET_CREDITS_PER_MINUTE)
    return SubtitleQuote(
        TRANSLATE, duration_ms, targets, caption, per_child, caption, caption + targets * per_child
    )


def check_duration(given: float, probed_ms: int) -> None:
    """400 ``duration_mismatch`` unless ``given`` seconds is within max(1 s, 2 %) of the probed duration."""
    if isinstance(given, bool) or not isinstance(given, int | float) or not math.isfinite(given) or given < 0:
        raise InvalidRequest(f"durationSeconds must be a number of seconds, not {given!r}")
    probed = probed_ms / 1000
    if abs(float(given) - probed) > max(DURATION_TOLERANCE_S, DURATION_TOLERANCE_SHARE * probed):
        raise DurationMismatch(
            f"durationSeconds {given} does not match the upload's probed duration of {probed:.3f} s "
            f"(allowed: within {max(DURATION_TOLERANCE_S, DURATION_TOLERANCE_SHARE * probed):.3f} s); "
            "credits are computed on the probed duration",
            probed_seconds=probed,
            given_seconds=float(given),
        )


# ----- languages --------------------------------------------------------------------------------------------
def language_code(code: str, what: str) -> str:
    """A BCP-47 code as the catalogue writes it (``en``, ``zh-Hant``); 400 for an unknown one."""
    from dragoman.languages import catalogue

    if not isinstance(code, str) or not code.strip() or len(code) > 40:
        raise InvalidRequest(f"{what} must be a BCP-47 language code such as 'en'")
    return catalogue.get(catalogue.resolve(code.strip())).bcp47


def languages(source_lang: str | None, target_langs: Sequence[str] | None) -> tuple[str, list[str]]:
    """``(source, targets)``: the source ``auto`` or a BCP-47 code, the targets deduplicated in order; 400
    for unknown codes, more than :data:`MAX_TARGETS`, or a target equal to the given source."""
    raw = (source_lang or "auto").strip()
    source = "auto" if raw.lower() == "auto" else language_code(raw, "sourceLang")
    targets: list[str] = []
    for item in target_langs or ():
        code = language_code(item, "targetLangs[]")
        if code not in targets:
            targets.append(code)
    if len(targets) > MAX_TARGETS:
        raise LimitExceeded(f"at most {MAX_TARGETS} target languages a batch, not {len(targets)}")
    if source != "auto" and source in targets:
        raise InvalidRequest(
            f"targetLangs holds the source language {source!r}; captions in it are made anyway"
        )
    return source, targets


# ----- submitting -------------------------------------------------------------------------------------------
def child_owner(engine_id: str) -> str:
    return BATCH.child_owner(engine_id)


@dataclass(frozen=True)
class Submitted:
    """A batch just written: its id, engine job, children (in order) and quote."""

    batch_id: str
    engine: JobRecord
    children: list[JobRecord]
    quote: SubtitleQuote

    @property
    def mode(self) -> str:
        return self.quote.mode


def submit(
    conn: Connection,
    db: Database,
    key: KeyInfo,
    upload: MediaRecord,
    *,
    duration_seconds: float,
    source_lang: str | None,
    target_langs: Sequence[str] | None,
    original_filename: str | None,
    webhook_url: str | None,
    base_url: str,
) -> Submitted:
    """Write a batch (module notes) in ``conn``'s transaction: 400 for a duration mismatch or bad
    languages, 402 when the account cannot pay it all (then nothing is written). The caller hands the
    engine job to its dispatch."""
    check_duration(duration_seconds, upload.duration_ms)
    source, targets = languages(source_lang, target_langs)
    quote = subtitle_quote(upload.duration_ms, len(targets))
    name = (original_filename or upload.filename or "media").strip()[:255] or "media"
    common = {
        "video_id": upload.id,
        "duration_ms": upload.duration_ms,
        "source_lang": source,
        "original_filename": name,
        "mode": quote.mode,
        "base_url": base_url,
    }
    before = billing.balance_of(conn, key.account_id, key.mode)
    try:
        return _write(conn, db, key, quote, common, targets, name, webhook_url)
    except InsufficientCredits as exc:  # say what the whole batch needs, not the child that ran short
        which = "test credits" if key.mode == "test" else "credits"
        raise InsufficientCredits(
            f"insufficient {which}: this batch needs {quote.total:,} ({quote.caption:,} for recognition, "
            f"{quote.per_child:,} per output), {before:,} left; add credits to the account",
            balance=before,
            required=quote.total,
        ) from exc


def _write(
    conn: Connection,
    db: Database,
    key: KeyInfo,
    quote: SubtitleQuote,
    common: dict[str, Any],
    targets: list[str],
    name: str,
    webhook_url: str | None,
) -> Submitted:
    engine = jobs.submit(
        db,
        key,
        kind=KIND,
        params={**common, "role": ROLE_ENGINE, "targets": targets},
        title=f"subtitles: {name} (recognition)",
        credits=quote.engine,
        webhook_url=webhook_url,
        conn=conn,
    )
    outputs: list[str | None] = list(targets) if targets else [None]
    children_spec = [
        (
            {**common, "role": ROLE_CHILD, "engine_job": engine.id, "target_lang": target},
            f"subtitles {target or 'captions'}: {name}",
            quote.per_child,
        )
        for target in outputs
    ]
    batch_id, children = jobs.submit_batch(db, key, KIND, children_spec, webhook_url, conn=conn)
    ids = [child.id for child in children]
    parked = BATCH.park(conn, engine, ids, batch_id=batch_id)
    return Submitted(batch_id, parked, [_load(conn, i) for i in ids], quote)


_load = engine_batches.load


# ----- what children say ------------------------------------------------------------------------------------
def summary(job: JobRecord) -> dict[str, Any]:
    """A job's JSON ``result`` as a dict (empty when it has none)."""
    return engine_batches.summary(job)


def source_lang_of(job: JobRecord, engine: JobRecord | None = None) -> str | None:
    """The source language: detected once recognised (the child's summary, else the engine's), else the
    requested code (None for ``auto`` before detection)."""
    for found in (summary(job), summary(engine) if engine is not None else {}):
        if isinstance(found.get("source_lang"), str):
            return str(found["source_lang"])
    given = job.params.get("source_lang")
    return None if given in (None, "auto") else str(given)


def done_payload(job: JobRecord) -> dict[str, Any]:
    """Spec 6, ``subtitle.done``: job_id, batch_id, mode, source_lang, target_lang, duration_seconds,
    credits_charged (plus status)."""
    return {
        "job_id": job.id,
        "batch_id": job.batch_id,
        "status": job.status,
        "mode": job.params.get("mode"),
        "source_lang": source_lang_of(job),
        "target_lang": job.params.get("target_lang"),
        "duration_seconds": int(job.params.get("duration_ms") or 0) / 1000,
        "credits_charged": job.credits or 0,
    }


def failed_payload(job: JobRecord) -> dict[str, Any]:
    """Spec 6, ``subtitle.failed``: job_id, batch_id, error_message (plus mode, target_lang and the credits
    refunded: all of the child's reservation)."""
    return {
        "job_id": job.id,
        "batch_id": job.batch_id,
        "status": job.status,
        "mode": job.params.get("mode"),
        "target_lang": job.params.get("target_lang"),
        "error_message": job.error,
        "credits_refunded": job.credits_reserved,
    }


def child_fields(job: JobRecord) -> dict[str, Any]:
    """A child's extra fields in ``subtitle.batch.completed``'s ``children`` (one entry per language)."""
    return {
        "mode": job.params.get("mode"),
        "lang": job.params.get("target_lang") or source_lang_of(job),
        "source_lang": source_lang_of(job),
        "target_lang": job.params.get("target_lang"),
    }


# ----- the engine job ---------------------------------------------------------------------------------------
def activate_children(db: Database, engine_id: str) -> int:
    """``queued → active`` for the children parked under ``engine_id``; how many moved."""
    return BATCH.activate_children(db, engine_id)


def _pending_children(db: Database, engine: JobRecord) -> list[JobRecord]:
    return BATCH.pending_children(db, engine)


def _set_stage(db: Database, engine: JobRecord, stage: str, **info: Any) -> None:
    """Record the batch's stage (and what is known: the detected language) in the running engine job."""
    BATCH.set_stage(db, engine, stage, **info)


def fail_children(db: Database, engine_id: str, error: str) -> int:
    """Fail every child still pending under ``engine_id`` (each refunded, ``subtitle.failed``, and the batch
    completed by the last); how many."""
    return BATCH.fail_children(db, engine_id, error)


def reconcile(db: Database, engine_ids: Iterable[str] | None = None) -> int:
    """Fail the children whose engine job ended without producing them (canceled, or failed by the expired-
    lease sweep after its worker died on its last attempt); how many. ``engine_ids`` None: every batch
    (the hourly retention purge calls it so)."""
    return BATCH.reconcile(db, engine_ids)


def _child_keys(job_id: str, lang: str, fmt: str, source: str | None = None) -> str:
    if fmt == "bilingual_srt":
        return f"subtitles/{job_id}/{source}-{lang}.srt"
    return f"subtitles/{job_id}/{lang}.{EXTENSIONS[fmt]}"


def _store(storage: Storage, key: str, text: str) -> str:
    storage.put_bytes(key, text.encode("utf-8"))
    return key


_scaled = engine_batches.scaled


def make_subtitle_handler(
    db: Database,
    recognizer: Recognizer,
    engine: Engine,
    *,
    max_attempts: int = 3,
    model: str | None = None,
) -> Handler:
    """The runner's handler of ``subtitle`` engine jobs (module notes): ``recognizer`` (models loaded once
    per process) and the service's translation ``engine``; ``max_attempts`` is the runner's (a recognition
    failure on the last attempt fails the children)."""

    def run(job: JobRecord, context: JobContext, storage: Storage) -> JobOutcome:
        return _run_engine(db, recognizer, engine, job, context, storage, model)

    return BATCH.handler(db, run, max_attempts=max_attempts)


def _run_engine(
    db: Database,
    recognizer: Recognizer,
    engine: Engine,
    job: JobRecord,
    context: JobContext,
    storage: Storage,
    model: str | None,
) -> JobOutcome:
    from dragoman.pipelines.subtitles import caption_track, recognise_file, render_track
    from dragoman.service import media_store
    from dragoman.speech.asr import TranscribeOptions

    params = job.params
    activate_children(db, job.id)
    if not _pending_children(db, job):
        return JobOutcome(result=json.dumps({"stage": "canceled"}), credits=0)
    upload = media_store.get_any(db, str(params.get("video_id")))
    if upload is None:
        raise MediaNotFound(
            "the job's upload no longer exists (uploads are kept for 7 days); upload it again"
        )
    _set_stage(db, job, RECOGNISING)
    source_given = str(params.get("source_lang") or "auto")
    options = TranscribeOptions(language=source_given, model=model)
    with tempfile.TemporaryDirectory(prefix="dragoman-subtitle-") as work:
        path = Path(work) / f"media{Path(upload.storage_key).suffix[:10]}"
        media_store.copy_to(storage, upload, path)
        context.check()
        _info, transcript = recognise_file(
            path, recognizer, options, _scaled(context, 0, RECOGNITION_SHARE), max_bytes=MAX_FILE_BYTES
        )
    source_track = caption_track(transcript)
    src = source_track.language if source_given == "auto" else source_given
    detected = {
        "source_lang": src,
        "language_probability": round(float(transcript.language_probability), 4),
        "language_given": source_given != "auto",
        "model": transcript.model,
    }
    _set_stage(db, job, CAPTIONING, **detected)
    context.check()
    source_files = {
        f"{fmt}:{src}": _store(storage, _child_keys(job.id, src, fmt), render_track(source_track, fmt))
        for fmt in SOURCE_FORMATS
    }
    children = _pending_children(db, job)
    done = 0
    for index, child in enumerate(children):
        context.check()
        if not _pending_children_ids(db, job, child.id):
            continue  # canceled meanwhile
        context.progress(
            RECOGNITION_SHARE + (index * (100 - RECOGNITION_SHARE)) // len(children), 100, "outputs"
        )
        target = child.params.get("target_lang")
        if target:
            _set_stage(db, job, TRANSLATING, **detected)
        made: dict[str, str] = {}
        try:
            _produce(
                engine, child, source_track, src, str(target) if target else None, context, storage, made
            )
            outcome = JobOutcome(
                result=json.dumps(
                    {
                        **detected,
                        "mode": child.params.get("mode"),
                        "target_lang": target,
                        "cues": len(source_track.cues),
                        "warnings": list(source_track.warnings)[:20],
                    },
                    ensure_ascii=False,
                ),
                artifacts={**source_files, **made},
            )
        except Cancelled:
            _delete(storage, made.values())
            raise
        except Exception as exc:
            _delete(storage, made.values())
            if context.cancel.cancelled:
                raise
            message = (
                exc.message if isinstance(exc, DragomanError) else f"internal error: {type(exc).__name__}"
            )
            if not isinstance(exc, DragomanError):
                log.exception("subtitle child %s failed", child.id)
            jobs.fail(db, child.id, child_owner(job.id), message, retryable=False)
            continue
        if jobs.complete(db, child.id, child_owner(job.id), outcome) is None:
            _delete(storage, made.values())  # canceled while it was made
        else:
            done += 1
    return JobOutcome(
        result=json.dumps({"stage": "done", **detected, "children_done": done}, ensure_ascii=False),
        artifacts=source_files,
        credits=None if done else 0,
    )


def _pending_children_ids(db: Database, engine: JobRecord, child_id: str) -> bool:
    return BATCH.still_pending(db, engine, child_id)


def _produce(
    engine: Engine,
    child: JobRecord,
    source_track: Any,
    src: str,
    target: str | None,
    context: JobContext,
    storage: Storage,
    made: dict[str, str],
) -> None:
    """A translate child's files (a caption child's are the source files) stored and put in ``made``
    (``{"<fmt>:<lang>": key}``) one by one, so a failure half-way deletes what it stored. A target that is
    the spoken language is refused (the child fails and is refunded: its captions are the source files)."""
    if target is None:
        return
    from dragoman.languages import catalogue
    from dragoman.pipelines.subtitles import render_track, translate_track

    try:
        same = catalogue.resolve(target) == catalogue.resolve(src)
    except DragomanError:  # a spoken language the catalogue does not know: not the target
        same = False
    if same:
        raise InvalidRequest(
            f"the media is spoken in {src}: its captions in {target} are the batch's source files "
            f"(download with lang={src}); nothing was translated or charged"
        )
    track = translate_track(source_track, engine, target, context=context)
    for fmt in SOURCE_FORMATS:
        made[f"{fmt}:{target}"] = _store(
            storage, _child_keys(child.id, target, fmt), render_track(track, fmt)
        )
    made[f"bilingual_srt:{target}"] = _store(
        storage,
        _child_keys(child.id, target, "bilingual_srt", src),
        render_track(track, "bilingual_srt", source=source_track),
    )


_delete = engine_batches.delete_keys


# ----- reading a batch --------------------------------------------------------------------------------------
class View(engine_batches.BatchView):
    """What a status poll of a child (or of the engine job) shows: the child, its engine job, its batch's
    children (:class:`~dragoman.service.engine_batches.BatchView`), with the subtitle stage and language."""

    @property
    def stage(self) -> str:
        return self.stage_or(RECOGNISING)

    @property
    def source_lang(self) -> str | None:
        return source_lang_of(self.job, self.engine)


def view(db: Database, key_id: str, job_id: str) -> View:
    """The subtitle job ``job_id`` of ``key_id`` with its engine job and siblings (404 otherwise); an engine
    job that ended without its children first fails them (:func:`reconcile`)."""
    found = BATCH.view(db, key_id, job_id)
    return View(found.job, found.engine, found.children)


def batch_exists(db: Database, batch_id: str) -> bool:
    with db.read() as conn:
        return conn.execute(select(batches.c.id).where(batches.c.id == batch_id)).scalar() is not None


def artifact(job: JobRecord, fmt: str, lang: str | None) -> tuple[str, str]:
    """``(storage key, language)`` of a done child's file ``fmt`` in ``lang`` (default: the target of a
    translate child, the source of a caption child); 400 for an unknown format, 404 when it has none."""
    from dragoman.errors import JobNotFound

    if fmt not in FORMATS:
        raise InvalidRequest(f"unknown format {fmt[:40]!r}; the formats: {', '.join(FORMATS)}")
    if job.status != jobs.DONE:
        raise JobNotFound(f"subtitle job {job.id} is {job.status}: its files exist once it is done")
    target = job.params.get("target_lang")
    source = source_lang_of(job)
    wanted = lang
    if wanted is not None:
        wanted = language_code(wanted, "lang")
    else:
        wanted = str(target) if target else source
    if fmt == "bilingual_srt":
        if not target:
            raise JobNotFound("bilingual_srt exists for translate jobs (those with a target language)")
        if wanted not in (target, source):
            raise JobNotFound(f"job {job.id} has no bilingual SRT for {wanted!r}; its target is {target!r}")
        wanted = str(target)
    stored = job.artifacts.get(f"{fmt}:{wanted}")
    if not stored:
        have = sorted({name.split(":", 1)[1] for name in job.artifacts if ":" in name})
        raise JobNotFound(f"job {job.id} has no {fmt} in {wanted!r}; it has: {', '.join(have) or 'none'}")
    return str(stored), str(wanted)


def download_name(job: JobRecord, fmt: str, lang: str) -> str:
    """``<stem>.<lang>.<ext>`` from ``originalFileName`` (``<stem>.<src>-<tgt>.srt`` for the bilingual SRT),
    reduced to safe characters."""
    from dragoman.service.storage import safe_name

    original = str(job.params.get("original_filename") or "subtitles")
    base = original.replace("\\", "/").rsplit("/", 1)[-1]
    stem = base.rsplit(".", 1)[0] if "." in base.lstrip(".") else base
    stem = safe_name(stem, default="subtitles")[:120] or "subtitles"
    if fmt == "bilingual_srt":
        return f"{stem}.{source_lang_of(job) or 'src'}-{lang}.srt"
    return f"{stem}.{lang}.{EXTENSIONS[fmt]}"


__all__ = [
    "CAPTION",
    "FORMATS",
    "KIND",
    "TRANSLATE",
    "SubtitleQuote",
    "Submitted",
    "View",
    "artifact",
    "check_duration",
    "done_payload",
    "download_name",
    "failed_payload",
    "make_subtitle_handler",
    "subtitle_quote",
    "submit",
    "view",
]
