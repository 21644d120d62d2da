"""The ``dub`` job kind of the hosted service (issue 16; spec 1, 2.9, 4.3, 6 and 8): a video (or audio) in one
language out, the same media speaking another, built by the dub pipeline (:mod:`dragoman.pipelines.dub`).

**Shape** (the engine-job batches of :mod:`dragoman.service.engine_batches`, as subtitles): :func:`submit`
writes one **engine** job (kind ``dub``, queue ``dub``, params ``role: engine``: the only one a worker runs,
no webhook of its own) and one **child** job per target language (what the client sees: ``jobIds``; charged,
refunded, polled, downloaded and canceled one by one). ``targets`` (an array, even of one) makes a batch
(``batch_id``; ``batch.completed`` once every child is terminal); ``targetLang`` makes one child outside any
batch (no ``batch_id``, no batch event).

**The engine job** copies the upload to a private folder, recognises it ONCE (probe, decode, Whisper:
:func:`dragoman.pipelines.subtitles.recognise_file`; progress 0-20 %), builds the source track, and then
dubs each child still pending in turn (20-100 %) with the injected dubber (default:
:func:`dragoman.pipelines.dub.dub_file`, given the shared source track so it does not recognise again):
translate, voices, synthesise, fit, mix, mux. Each child's files are stored and the child marked done
(charged; ``dub.done``) or failed on its own (refunded; ``dub.failed``) while its siblings continue. A
recognition that fails for good fails every pending child (each refunded). A canceled child is skipped; a
cancellation is seen by the pipeline between lines.

**Credits** (spec 8 leaves dubbing open; this is the contract, :func:`dub_quote`): **150 credits per minute
per target language** on the PROBED duration, pro-rata per second rounded up (``ceil(150 x seconds / 60)``
per target) = recognition 30 (the caption rate) + translation 60 (the subtitle per-target rate) + voice 60.
Each child reserves its share (a URL dub's once its media is probed: "Media URLs" below); the engine job
reserves nothing (the recognition is paid inside each target's share, so a batch whose every child failed
costs nothing). A batch that cannot be paid in full is refused (402) and nothing is written. The subtitle
artifacts of a dub cost nothing more.

**Media URLs** (``POST /api/v1/dub`` with ``url``; :func:`submit_url`): the request never downloads. It checks
the URL without connecting (:func:`check_media_url`: the webhooks' SSRF guard,
:mod:`dragoman.service.netguard`: http(s), a host, no metadata name, the literal address or what the name
resolves to not loopback, private, link-local or CGNAT unless the operator allows private addresses, metadata
never) and writes the jobs with no media (``video_id`` and ``duration_ms`` null) and **nothing reserved**: 202
at once. The engine job's first stage (``fetching``; :func:`_media_from_url`) downloads it through the same
guard (the connection pinned to the checked address, every redirect hop checked again, at most 5), bounded
like an upload (200 MB, :data:`~dragoman.limits.MAX_FILE_BYTES`, cut off there whether or not the server
states a length; 10 minutes in all, 30 s per network operation), probes it, records it as an upload of the
account (its ``video_id`` then shows on the jobs and can be dubbed or captioned again), and only then
**reserves** each pending child's share on the probed duration, in one transaction for the whole dub (all or
nothing, as a POST's 402). A failure there (a URL refused on a redirect, unreachable or not answering 200, a
body over the limit, not media, no audio, longer than 3 hours, an account that cannot pay the dub or is past
its monthly cap) fails every pending child with the typed code first in ``error`` (``invalid_media_url: ...``,
``media_fetch_failed``, ``file_too_large``, ``unsupported_media``, ``no_audio_stream``, ``empty_media``,
``limit_exceeded``, ``insufficient_credits``, ``monthly_cap_reached``; :func:`error_code` reads it back): each
refunded exactly as any failure (here: nothing was reserved, so ``credits_refunded`` 0), ``dub.failed`` each,
``batch.completed`` once; nothing is kept. Any later typed failure is coded too: a child's own
(``backend_error: ...``) and one of the shared run that will not be retried (``media_not_found`` for an
upload gone since the POST, ``unsupported_media`` at recognition, ...); only an unexpected error on the last
attempt (``internal error: <type>``) and a child left by an engine job that ended without it have no code.
Why reserve after the probe, not on a ceiling: a URL's duration is unknown until its media is fetched, and a
ceiling (3 hours: 27,000 credits a target) would refuse most accounts for a short clip; the POST still answers
402 when the balance holds less than :data:`URL_MINIMUM_CREDITS` per target (the least any dub costs), so an
empty account cannot make the service download for nothing. ``/api/v1/quote`` with the duration gives what the
job will reserve. The download runs in a thread of its own while the engine job watches: canceling the dub
(every child) stops it at once, and the download left behind deletes its file at its next chunk (or network
timeout).

**Artifacts** (storage keys ``dubs/<child id>/<file>``; deleted after the results retention, 30 days):
``video`` (the dubbed video; absent for an audio-only input), ``audio`` (the dubbed audio, M4A),
``srt:<lang>``, ``vtt:<lang>``, ``txt:<lang>`` for the target and the source language, and ``bilingual_srt``.
A child's ``result`` is a JSON summary (:func:`child_result`): languages, voice, line counts, the lines
fitted beyond the natural speed range, per-stage seconds and warnings.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote, urlsplit

from sqlalchemy import Connection

from dragoman.errors import (
    Cancelled,
    DragomanError,
    FileTooLarge,
    InsufficientCredits,
    InvalidMediaUrl,
    InvalidRequest,
    InvalidWebhookUrl,
    JobNotFound,
    LimitExceeded,
    MediaFetchFailed,
    MediaNotFound,
)
from dragoman.limits import MAX_FILE_BYTES
from dragoman.progress import JobContext
from dragoman.service import billing, engine_batches, jobs
from dragoman.service.db import Database
from dragoman.service.engine_batches import BatchView, EngineBatch, summary
from dragoman.service.jobs import JobOutcome, JobRecord

if TYPE_CHECKING:
    from dragoman.pipelines.dub.pipeline import SourceTrack
    from dragoman.pipelines.dub.types import DubOptions, DubResult
    from dragoman.service.accounts import KeyInfo
    from dragoman.service.media_store import MediaRecord
    from dragoman.service.storage import Storage
    from dragoman.settings import HostedSettings
    from dragoman.speech.asr import Recognizer
    from dragoman.speech.tts.clones import Clone, LocalCloneStore
    from dragoman.speech.tts.synth import Synthesizer
    from dragoman.translation.engine import Engine

log = logging.getLogger("dragoman.service.dub")

KIND = "dub"
ROLE_ENGINE, ROLE_CHILD = engine_batches.ROLE_ENGINE, engine_batches.ROLE_CHILD
#: Lease owner of a batch's children while its engine job works on them (no expiry: never swept).
CHILD_OWNER_PREFIX = "dub-batch:"
BATCH = EngineBatch(KIND, CHILD_OWNER_PREFIX, run_name="recognition run")

#: Credits per minute of media per target language, and what they pay for (module notes).
CAPTION_CREDITS_PER_MINUTE = 30
TRANSLATION_CREDITS_PER_MINUTE = 60
VOICE_CREDITS_PER_MINUTE = 60
DUB_CREDITS_PER_MINUTE = (
    CAPTION_CREDITS_PER_MINUTE + TRANSLATION_CREDITS_PER_MINUTE + VOICE_CREDITS_PER_MINUTE
)
#: Most target languages in one batch (each is a whole dub: translation, synthesis, mix, mux).
MAX_TARGETS = 16
#: Share of the engine job's progress that recognition takes (the children share the rest).
RECOGNITION_SHARE = 20
#: Stages a status reports (then done / failed / canceled).
QUEUED_STAGE, RECOGNISING, DUBBING = engine_batches.QUEUED_STAGE, "recognising", "dubbing"
#: Subtitle artifacts (free) and their media types; ``bilingual-srt`` on the wire is ``bilingual_srt`` here.
SUBTITLE_FORMATS = ("srt", "vtt", "txt", "bilingual_srt")
MEDIA_TYPES: Mapping[str, str] = {
    "srt": "application/x-subrip; charset=utf-8",
    "vtt": "text/vtt; charset=utf-8",
    "txt": "text/plain; charset=utf-8",
    "bilingual_srt": "application/x-subrip; charset=utf-8",
    ".mp4": "video/mp4",
    ".m4v": "video/mp4",
    ".mov": "video/quicktime",
    ".mkv": "video/x-matroska",
    ".webm": "video/webm",
    ".m4a": "audio/mp4",
    ".mp3": "audio/mpeg",
    ".wav": "audio/wav",
    ".ogg": "audio/ogg",
}
#: Storage prefix of the dub files (results retention).
PREFIX = "dubs"
#: Seconds a whole URL download may take, and seconds per network operation within it.
FETCH_TOTAL_S = 600.0
FETCH_OPERATION_S = 30.0
#: Redirects followed when fetching a URL (each hop checked by the guard again).
FETCH_MAX_REDIRECTS = 5
#: Bytes read at a time while fetching (a stop or the total deadline is looked at between reads).
FETCH_CHUNK_BYTES = 256 * 1024
#: Credits a dub from a URL needs in the balance per target to be accepted (the least any dub costs); the
#: real reservation is made once the media is fetched and probed (module notes, "Media URLs").
URL_MINIMUM_CREDITS = 1
#: Stage of a URL dub's engine job while it downloads the media.
FETCHING = "fetching"


# ----- prices -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DubQuote:
    """What a dub reserves: ``per_target`` for each child, ``total`` for all (module notes)."""

    duration_ms: int
    targets: int
    per_target: int
    total: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "credits": self.total,
            "breakdown": {
                "product": "dub",
                "durationSeconds": self.duration_ms / 1000,
                "targets": self.targets,
                "perTarget": self.per_target,
                "perMinute": {
                    "caption": CAPTION_CREDITS_PER_MINUTE,
                    "translation": TRANSLATION_CREDITS_PER_MINUTE,
                    "voice": VOICE_CREDITS_PER_MINUTE,
                    "total": DUB_CREDITS_PER_MINUTE,
                },
            },
        }


def dub_quote(duration_ms: int, targets: int) -> DubQuote:
    """The credits of a dub of media lasting ``duration_ms`` (probed) into ``targets`` languages."""
    if targets < 1:
        raise InvalidRequest("a dub needs at least one target language")
    per_target = engine_batches.per_minute(duration_ms, DUB_CREDITS_PER_MINUTE)
    return DubQuote(duration_ms, targets, per_target, per_target * targets)


# ----- the request ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DubRequest:
    """A dub as asked, checked (:func:`check_request`): BCP-47 languages, the voice, the mode, the clone."""

    source: str
    targets: tuple[str, ...]
    batch: bool
    voice: str
    voice_mode: str
    clone_id: str | None


def check_request(
    *,
    source_lang: str | None,
    target_lang: str | None,
    targets: Sequence[str] | None,
    voice_id: str | None,
    voice_mode: str | None,
    clone_id: str | None,
) -> DubRequest:
    """400 for what no dub could do: neither or both of ``targetLang`` and ``targets``, unknown languages, a
    target the TTS does not speak, more than :data:`MAX_TARGETS`, a target equal to the given source, an
    unknown voice or mode, a clone without ``clone`` mode or the reverse. ``voiceMode`` defaults to
    ``clone`` when a ``cloneId`` is given, else ``preset``."""
    from dragoman.pipelines.dub.types import VOICE_MODES
    from dragoman.service.subtitle_jobs import language_code
    from dragoman.speech.tts import voices

    if (target_lang is None) == (targets is None):
        raise InvalidRequest("give targetLang (one language) or targets (a batch of languages), not both")
    raw = (source_lang or "auto").strip()
    source = "auto" if raw.lower() == "auto" else language_code(raw, "sourceLang")
    wanted = [target_lang] if target_lang is not None else list(targets or ())
    if not wanted:
        raise InvalidRequest("targets is empty: name at least one language to dub into")
    found: list[str] = []
    for item in wanted:
        code = language_code(item, "targetLang" if target_lang is not None else "targets[]")
        voices.language_code(code)  # 400: a language no voice speaks
        if code not in found:
            found.append(code)
    if len(found) > MAX_TARGETS:
        raise LimitExceeded(f"at most {MAX_TARGETS} target languages a dub, not {len(found)}")
    if source != "auto" and source in found:
        raise InvalidRequest(f"the targets hold the source language {source!r}: there is nothing to dub")
    voice = voices.persona(voice_id or "aria").name
    mode = voice_mode or ("clone" if clone_id else "preset")
    if mode not in VOICE_MODES:
        raise InvalidRequest(f"unknown voiceMode {mode[:40]!r}; the modes are {', '.join(VOICE_MODES)}")
    if mode == "clone" and not clone_id:
        raise InvalidRequest("voiceMode 'clone' needs a cloneId (POST /api/v1/tts/voices/clones makes one)")
    if mode != "clone" and clone_id:
        raise InvalidRequest("a cloneId is used with voiceMode 'clone' only")
    return DubRequest(source, tuple(found), target_lang is None, voice, mode, clone_id or None)


# ----- fetching a URL ---------------------------------------------------------------------------------------
@dataclass
class Fetched:
    """A URL's body spooled to a private file while it arrived (bounded, hashed)."""

    path: Path
    size: int
    sha256: str
    filename: str
    mime: str

    def close(self) -> None:
        self.path.unlink(missing_ok=True)


def check_media_url(url: str, *, allow_private: bool) -> str:
    """``url`` when the service may fetch it; else 400 ``invalid_media_url``. The checks that need no
    connection (:func:`dragoman.service.netguard.check_url`): http(s) only, a host, no metadata name, and
    the address literal or what the name resolves to now not loopback, private, link-local or CGNAT unless
    ``allow_private`` (metadata never). The fetch checks every address again when it connects."""
    from dragoman.service import netguard

    try:
        return netguard.check_url(url, allow_private=allow_private)
    except InvalidWebhookUrl as exc:
        raise InvalidMediaUrl(exc.message.replace("webhook", "media")) from None


def fetch_url(
    url: str,
    tmp_dir: Path,
    *,
    allow_private: bool,
    max_bytes: int = MAX_FILE_BYTES,
    total_s: float = FETCH_TOTAL_S,
    operation_s: float = FETCH_OPERATION_S,
    stop: threading.Event | None = None,
) -> Fetched:
    """GET ``url`` into a temporary file under ``tmp_dir`` through the webhooks' SSRF guard
    (:mod:`dragoman.service.netguard`: http(s) only; loopback, private, link-local, CGNAT and metadata
    addresses refused unless ``allow_private`` (never metadata); the connection pinned to the checked
    address; every redirect hop checked again, at most :data:`FETCH_MAX_REDIRECTS`). 400
    ``invalid_media_url`` for a refused URL, 413 past ``max_bytes`` (at once when Content-Length says so),
    422 ``media_fetch_failed`` when the server cannot be reached or does not answer 200 in time.
    ``stop`` set: :class:`~dragoman.errors.Cancelled` at the next chunk (the file deleted)."""
    import httpx

    from dragoman.service import media_store, netguard

    check_media_url(url, allow_private=allow_private)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix="fetch-", dir=tmp_dir)
    path = Path(name)
    digest = hashlib.sha256()
    size = 0
    deadline = time.monotonic() + total_s
    try:
        with (
            netguard.guarded_client(
                allow_private=allow_private, timeout=operation_s, total_timeout=total_s
            ) as client,
            open(handle, "wb") as out,
        ):
            client.max_redirects = FETCH_MAX_REDIRECTS
            with client.stream("GET", url, follow_redirects=True) as response:
                if response.status_code != 200:
                    raise MediaFetchFailed(
                        f"fetching the media URL answered HTTP {response.status_code}, not 200"
                    )
                length = response.headers.get("content-length")
                if length is not None and length.isdigit() and int(length) > max_bytes:
                    raise FileTooLarge(f"the media at the URL is over the {max_bytes:,} byte limit (200 MB)")
                for chunk in response.iter_bytes(FETCH_CHUNK_BYTES):
                    if stop is not None and stop.is_set():
                        raise Cancelled("the media download was stopped: the dub was canceled")
                    size += len(chunk)
                    if size > max_bytes:
                        raise FileTooLarge(
                            f"the media at the URL is over the {max_bytes:,} byte limit (200 MB)"
                        )
                    if time.monotonic() > deadline:
                        raise MediaFetchFailed(f"fetching the media URL took over {total_s:.0f} s")
                    digest.update(chunk)
                    out.write(chunk)
                final = str(response.url)
                mime = response.headers.get("content-type", "")
    except InvalidWebhookUrl as exc:  # a redirect or a resolution to a refused address
        path.unlink(missing_ok=True)
        raise InvalidMediaUrl(exc.message.replace("webhook", "media")) from None
    except httpx.TooManyRedirects:
        path.unlink(missing_ok=True)
        raise MediaFetchFailed(f"the media URL redirects more than {FETCH_MAX_REDIRECTS} times") from None
    except httpx.HTTPError as exc:
        path.unlink(missing_ok=True)
        raise MediaFetchFailed(f"could not fetch the media URL: {type(exc).__name__}: {exc}"[:300]) from None
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    if size == 0:
        path.unlink(missing_ok=True)
        raise MediaFetchFailed("the media URL answered an empty body")
    filename = media_store.clean_filename(unquote(urlsplit(final).path.rsplit("/", 1)[-1])) or "media"
    return Fetched(path, size, digest.hexdigest(), filename, media_store.clean_mime(mime))


# ----- submitting -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Submitted:
    """A dub just written: its batch (None for one ``targetLang``), engine job, children and quote."""

    batch_id: str | None
    engine: JobRecord
    children: list[JobRecord]
    quote: DubQuote


def submit(
    conn: Connection,
    db: Database,
    key: KeyInfo,
    upload: MediaRecord,
    request: DubRequest,
    *,
    webhook_url: str | None,
    base_url: str,
    source_url: str | None = None,
) -> Submitted:
    """Write a dub of an upload (module notes) in ``conn``'s transaction: 404 for a clone that is not the
    key's, 402 when the account cannot pay every target (then nothing is written). The caller hands the
    engine job to its dispatch."""
    check_duration(upload.duration_ms)  # refused before any credit is reserved
    quote = dub_quote(upload.duration_ms, len(request.targets))
    name = (upload.filename or "media").strip()[:255] or "media"
    common = {
        **media_params(upload),
        "source_lang": request.source,
        "voice_id": request.voice,
        "voice_mode": request.voice_mode,
        "clone_id": request.clone_id,
        "original_filename": name,
        "source_url": source_url,
        "base_url": base_url,
    }
    return _write(conn, db, key, request, common, name, quote, webhook_url)


def submit_url(
    conn: Connection,
    db: Database,
    key: KeyInfo,
    url: str,
    request: DubRequest,
    *,
    webhook_url: str | None,
    base_url: str,
) -> Submitted:
    """Write a dub of the media at ``url`` (checked by :func:`check_media_url` before) in ``conn``'s
    transaction, fetched later by its engine job (module notes, "Media URLs"): the children reserve nothing
    yet (``credits_reserved`` 0, no ``video_id``); 404 for a clone that is not the key's; 402 when the
    balance holds less than :data:`URL_MINIMUM_CREDITS` per target (the least any dub costs), so an empty
    account cannot make the service download media it will never pay for."""
    needed = URL_MINIMUM_CREDITS * len(request.targets)
    before = billing.balance_of(conn, key.account_id, key.mode)
    if before < needed:
        which = "test credits" if key.mode == "test" else "credits"
        raise InsufficientCredits(
            f"insufficient {which}: a dub from a URL needs at least {needed:,} to start ({before:,} left); "
            f"it reserves {DUB_CREDITS_PER_MINUTE} a minute per target once the media is fetched",
            balance=before,
            required=needed,
        )
    name = media_store_name(url)
    common = {
        "video_id": None,
        "duration_ms": None,
        "has_video": None,
        "source_lang": request.source,
        "voice_id": request.voice,
        "voice_mode": request.voice_mode,
        "clone_id": request.clone_id,
        "original_filename": name,
        "source_url": url,
        "base_url": base_url,
    }
    return _write(conn, db, key, request, common, name, DubQuote(0, len(request.targets), 0, 0), webhook_url)


def media_store_name(url: str) -> str:
    """The file name a fetched URL's media is given: its path's last segment, cleaned (``media`` when it
    has none)."""
    from dragoman.service import media_store

    return media_store.clean_filename(unquote(urlsplit(url).path.rsplit("/", 1)[-1])) or "media"


def media_params(upload: MediaRecord) -> dict[str, Any]:
    """The params a dub's jobs hold of its media."""
    return {
        "video_id": upload.id,
        "duration_ms": upload.duration_ms,
        "has_video": bool(upload.info.get("has_video")),
    }


def check_duration(duration_ms: int) -> None:
    """400 ``limit_exceeded`` for media longer than the pipeline dubs at a time."""
    from dragoman.pipelines.subtitles import MAX_MEDIA_SECONDS

    if duration_ms > MAX_MEDIA_SECONDS * 1000:
        raise LimitExceeded(
            f"the media lasts {duration_ms / 60_000:.0f} minutes; at most "
            f"{MAX_MEDIA_SECONDS / 60:.0f} minutes are dubbed at a time: cut it into parts"
        )


def _write(
    conn: Connection,
    db: Database,
    key: KeyInfo,
    request: DubRequest,
    common: Mapping[str, Any],
    name: str,
    quote: DubQuote,
    webhook_url: str | None,
) -> Submitted:
    """The engine job and one child per target, each child reserving ``quote.per_target`` (402 for the
    whole dub when the account cannot pay it; nothing is written then); the children parked under the
    engine job."""
    if request.clone_id is not None:
        from dragoman.service import tts_voices

        tts_voices.get_clone(db, key.key_id, request.clone_id)  # 404 clone_not_found
    before = billing.balance_of(conn, key.account_id, key.mode)
    try:
        engine = jobs.submit(
            db,
            key,
            kind=KIND,
            params={**common, "role": ROLE_ENGINE, "targets": list(request.targets)},
            title=f"dub: {name} (recognition)",
            credits=0,
            webhook_url=webhook_url,
            conn=conn,
        )
        specs = [
            (
                {**common, "role": ROLE_CHILD, "engine_job": engine.id, "target_lang": target},
                f"dub {target}: {name}",
                quote.per_target,
            )
            for target in request.targets
        ]
        batch_id: str | None = None
        if request.batch:
            batch_id, children = jobs.submit_batch(db, key, KIND, specs, webhook_url, conn=conn)
        else:
            params, title, credits = specs[0]
            children = [
                jobs.submit(
                    db,
                    key,
                    kind=KIND,
                    params=params,
                    title=title,
                    credits=credits,
                    webhook_url=webhook_url,
                    conn=conn,
                )
            ]
    except InsufficientCredits as exc:  # what the whole dub needs, not the child that ran short
        raise _short(key, quote, before) from exc
    ids = [child.id for child in children]
    parked = BATCH.park(conn, engine, ids, batch_id=batch_id)
    return Submitted(batch_id, parked, [engine_batches.load(conn, i) for i in ids], quote)


def _short(key: KeyInfo, quote: DubQuote, balance: int) -> InsufficientCredits:
    which = "test credits" if key.mode == "test" else "credits"
    return InsufficientCredits(
        f"insufficient {which}: this dub needs {quote.total:,} ({quote.per_target:,} per target "
        f"language: {DUB_CREDITS_PER_MINUTE} a minute), {balance:,} left; add credits to the account",
        balance=balance,
        required=quote.total,
    )


# ----- what children say ------------------------------------------------------------------------------------
def source_lang_of(job: JobRecord, engine: JobRecord | None = None) -> str | None:
    """The spoken language: detected once recognised, else the requested code (None for ``auto``)."""
    for found in (summary(job), summary(engine)):
        if isinstance(found.get("source_lang"), str):
            return str(found["source_lang"])
    given = job.params.get("source_lang")
    return None if given in (None, "auto") else str(given)


#: Artifact names → the path segment of their download URL (``GET /api/v1/dub/{id}/<segment>``).
DOWNLOADS: Mapping[str, str] = {
    "video": "video",
    "audio": "audio",
    "srt": "srt",
    "vtt": "vtt",
    "txt": "txt",
    "bilingual_srt": "bilingual-srt",
}


def output_urls(job: JobRecord) -> dict[str, str]:
    """The download URL of each output of a done child (``video`` only when the input had a video)."""
    if job.status != jobs.DONE:
        return {}
    base = f"{job.params.get('base_url') or ''}/api/v1/dub/{job.id}"
    found: dict[str, str] = {}
    for name, segment in DOWNLOADS.items():
        if name in ("video", "audio", "bilingual_srt"):
            if name in job.artifacts:
                found[segment] = f"{base}/{segment}"
        elif any(key.startswith(f"{name}:") for key in job.artifacts):
            found[segment] = f"{base}/{segment}"
    return found


def done_payload(job: JobRecord) -> dict[str, Any]:
    """``dub.done`` (spec 6: "events for dub jobs other than batch.completed: not shown"; this is the
    contract): job_id, batch_id, status, source_lang, target_lang, voice_id, voice_mode, duration_seconds,
    credits_charged, lines, lines_beyond_natural, and the download URLs (``outputs``)."""
    info = summary(job)
    return {
        "job_id": job.id,
        "batch_id": job.batch_id,
        "status": job.status,
        "source_lang": source_lang_of(job),
        "target_lang": job.params.get("target_lang"),
        "voice_id": job.params.get("voice_id"),
        "voice_mode": job.params.get("voice_mode"),
        "duration_seconds": int(job.params.get("duration_ms") or 0) / 1000,
        "credits_charged": job.credits or 0,
        "lines": info.get("lines", 0),
        "lines_beyond_natural": info.get("lines_beyond_natural", []),
        "outputs": output_urls(job),
    }


def failed_payload(job: JobRecord) -> dict[str, Any]:
    """``dub.failed`` (the contract): job_id, batch_id, status, target_lang, error, error_code (the typed
    code the error starts with, or null), credits_refunded (all of the child's reservation, 0 for a URL dub
    that failed before its media was probed; its siblings continue)."""
    return {
        "job_id": job.id,
        "batch_id": job.batch_id,
        "status": job.status,
        "target_lang": job.params.get("target_lang"),
        "error": job.error,
        "error_code": error_code(job.error),
        "credits_refunded": job.credits_reserved,
    }


def child_fields(job: JobRecord) -> dict[str, Any]:
    """A dub child's extra fields in ``batch.completed``'s per-child summaries."""
    return {
        "source_lang": source_lang_of(job),
        "target_lang": job.params.get("target_lang"),
        "voice_mode": job.params.get("voice_mode"),
        "outputs": output_urls(job),
    }


# ----- the engine job ---------------------------------------------------------------------------------------
class Dubber(Protocol):
    """What dubs one target (:func:`dragoman.pipelines.dub.dub_file`'s signature)."""

    def __call__(
        self,
        media: str | Path,
        options: DubOptions,
        *,
        synthesizer: Synthesizer,
        recognizer: Recognizer | None = None,
        engine: Engine | None = None,
        out_dir: str | Path | None = None,
        overwrite: bool = False,
        context: JobContext | None = None,
        clone_store: LocalCloneStore | None = None,
        source_track: SourceTrack | None = None,
    ) -> DubResult: ...


def _default_dubber() -> Dubber:
    from dragoman.pipelines.dub import dub_file

    return dub_file


def _clone_store(db: Database, key_id: str, root: Path) -> LocalCloneStore:
    """The key's hosted voice clones as the pipeline's clone store (read-only)."""
    from dragoman.service import tts_voices
    from dragoman.speech.tts.clones import LocalCloneStore

    class KeyClones(LocalCloneStore):
        def get(self, clone_id: str) -> Clone:
            return tts_voices.get_clone(db, key_id, clone_id)

    return KeyClones(root)


def make_dub_handler(
    db: Database,
    recognizer: Recognizer,
    engine: Engine,
    synthesizer: Synthesizer,
    *,
    max_attempts: int = 3,
    model: str | None = None,
    dubber: Dubber | None = None,
    allow_private: bool | Callable[[], bool] = False,
    hosted: HostedSettings | None = None,
) -> jobs.Handler:
    """The runner's handler of ``dub`` engine jobs (module notes): ``recognizer``, the translation
    ``engine`` and the ``synthesizer`` of the process; ``dubber`` None: the dub pipeline. A URL dub's media
    is fetched through the SSRF guard with ``allow_private`` (the operator's webhooks setting; a callable is
    read at each fetch) and recorded as an upload under ``hosted``'s settings (None: the defaults)."""
    from dragoman.settings import HostedSettings

    private = allow_private if callable(allow_private) else (lambda: bool(allow_private))
    fetching = UrlFetch(private, hosted or HostedSettings())

    def run(job: JobRecord, context: JobContext, storage: Storage) -> JobOutcome:
        chosen = dubber or _default_dubber()
        try:
            return _run_engine(
                db, recognizer, engine, synthesizer, chosen, job, context, storage, model, fetching
            )
        except DragomanError as exc:
            # A typed failure that will not be retried (the batch handler's rule) fails the children still
            # pending with its code first, so each says error_code (an upload gone since the POST, media
            # the recogniser refuses, ...); the batch handler's own fallback would write the bare message.
            final = exc.status < 500 or job.attempts >= max_attempts
            if final and not isinstance(exc, Cancelled) and not context.cancel.cancelled:
                BATCH.fail_children(db, job.id, coded_error(exc))
            raise

    return BATCH.handler(db, run, max_attempts=max_attempts)


@dataclass(frozen=True)
class UrlFetch:
    """How a URL dub's engine job fetches its media: whether the guard lets private addresses through (read
    at each fetch) and the hosted settings (the data folder whose ``tmp`` spools the download, the uploads'
    retention)."""

    allow_private: Callable[[], bool]
    hosted: HostedSettings


def coded_error(exc: DragomanError) -> str:
    """A failed job's ``error`` with the typed code first: ``"<code>: <message>"`` (``error_code`` on the
    status)."""
    return f"{exc.code}: {exc.message}"


def error_code(error: str | None) -> str | None:
    """The typed code a failed dub's ``error`` starts with (:func:`coded_error`), or None."""
    if not error:
        return None
    head, sep, _ = error.partition(": ")
    return head if sep and re.fullmatch(r"[a-z][a-z0-9_]{1,60}", head) else None


def _key_of(db: Database, job: JobRecord) -> KeyInfo:
    """The job's key as billing and the upload store need it (its account, mode and monthly cap)."""
    from dragoman.service import accounts

    found = accounts.get_key(db, job.key_id)
    return accounts.KeyInfo(
        key_id=found.key_id,
        account_id=found.account_id,
        mode=found.mode,
        plan="",
        webhook_url=found.webhook_url,
        webhook_secret="",
        monthly_cap=found.monthly_cap,
        daily_quota=found.daily_quota,
    )


def _fetch_watched(
    db: Database, job: JobRecord, context: JobContext, url: str, fetching: UrlFetch
) -> Fetched | None:
    """:func:`fetch_url` in a thread of its own while this one watches: the engine job's cancellation
    (:class:`Cancelled` at once) and its children (None as soon as none is left pending: every one was
    canceled by its client). A download left behind stops at its next chunk (or its next network timeout,
    :data:`FETCH_OPERATION_S`, when the server stalls) and deletes its file."""
    stop = threading.Event()
    lock = threading.Lock()
    box: dict[str, Any] = {}
    tmp_dir = fetching.hosted.data_dir / "tmp"
    allow_private = fetching.allow_private()

    def work() -> None:
        try:
            got = fetch_url(url, tmp_dir, allow_private=allow_private, stop=stop, max_bytes=MAX_FILE_BYTES)
        except BaseException as exc:
            box["error"] = exc
            return
        with lock:
            if stop.is_set():
                got.close()
            else:
                box["fetched"] = got

    thread = threading.Thread(target=work, name=f"fetch-{job.id[:8]}", daemon=True)
    thread.start()
    finished = False
    try:
        look_at = time.monotonic() + 0.5
        while thread.is_alive():
            thread.join(0.1)
            if not thread.is_alive():
                break
            context.check()
            if time.monotonic() >= look_at:
                look_at = time.monotonic() + 0.5
                if not BATCH.pending_children(db, job):
                    return None
        finished = True
    finally:
        if not finished:
            with lock:
                stop.set()
                leftover = box.pop("fetched", None)
            if leftover is not None:
                leftover.close()
    error = box.get("error")
    if error is not None:
        raise error
    fetched: Fetched = box["fetched"]
    return fetched


def _reserve_children(db: Database, job: JobRecord, key: KeyInfo, upload: MediaRecord) -> int:
    """Reserve each pending child's share of a URL dub on the probed duration and record the media in the
    jobs' params, in one transaction (all or nothing: 402 ``insufficient_credits`` or
    ``monthly_cap_reached`` for the whole dub); a child canceled meanwhile is skipped (compare-and-set on
    its status, so a cancel racing this refunds what it reserved). How many children were reserved."""
    from sqlalchemy import update

    from dragoman.service.db import jobs as jobs_table

    owner = BATCH.child_owner(job.id)
    children = BATCH.pending_children(db, job)
    quote = dub_quote(upload.duration_ms, max(1, len(children)))
    media = media_params(upload)
    reserved = 0
    with db.write() as conn:
        before = billing.balance_of(conn, key.account_id, key.mode)
        try:
            for child in children:
                won = conn.execute(
                    update(jobs_table)
                    .where(
                        jobs_table.c.id == child.id,
                        jobs_table.c.status == jobs.ACTIVE,
                        jobs_table.c.lease_owner == owner,
                    )
                    .values(credits_reserved=quote.per_target, params={**child.params, **media})
                ).rowcount
                if won == 1:
                    billing.reserve(conn, key, child.id, quote.per_target, product=KIND)
                    reserved += 1
        except InsufficientCredits as exc:
            raise _short(key, quote, before) from exc
        conn.execute(
            update(jobs_table).where(jobs_table.c.id == job.id).values(params={**job.params, **media})
        )
    return reserved


def _media_from_url(
    db: Database, job: JobRecord, context: JobContext, storage: Storage, fetching: UrlFetch
) -> MediaRecord | None:
    """A URL dub's first stage (module notes, "Media URLs"): fetch, probe and record the media as an upload
    of the account, then reserve the children's credits on its probed duration. None when every child was
    canceled meanwhile (nothing kept). A typed failure (a refused or unreachable URL, a body over the limit,
    not media, too long, not paid for) fails every pending child with ``"<code>: <message>"`` (refunded,
    ``dub.failed``), keeps nothing, and is raised again (the engine job ends failed)."""
    from dragoman.service import media_store

    url = str(job.params.get("source_url"))
    BATCH.set_stage(db, job, FETCHING)
    context.progress(0, 100, "fetching the media")
    try:
        fetched = _fetch_watched(db, job, context, url, fetching)
        if fetched is None:
            return None
        key = _key_of(db, job)
        try:
            upload = media_store.store_upload(
                db,
                storage,
                key,
                fetched.path,
                filename=fetched.filename,
                declared_mime=fetched.mime,
                settings=fetching.hosted,
                max_bytes=MAX_FILE_BYTES,
            )
        finally:
            fetched.close()
        try:
            check_duration(upload.duration_ms)
            reserved = _reserve_children(db, job, key, upload)
        except BaseException:
            media_store.delete(db, storage, upload)
            raise
        if not reserved:  # every child canceled while the media was probed
            media_store.delete(db, storage, upload)
            return None
    except Cancelled:
        raise
    except DragomanError as exc:
        BATCH.fail_children(db, job.id, coded_error(exc))
        raise
    return upload


def _media_name(upload: MediaRecord) -> str:
    """The working copy's file name: the upload's safe stem and its stored suffix (outputs are named after
    it: ``<stem>.<lang>.mp4``)."""
    from dragoman.service.storage import safe_name

    suffix = Path(upload.storage_key).suffix[:10] or ".bin"
    base = (upload.filename or "media").replace("\\", "/").rsplit("/", 1)[-1]
    stem = base.rsplit(".", 1)[0] if "." in base.lstrip(".") else base
    return f"{safe_name(stem, default='media')[:80] or 'media'}{suffix}"


def _run_engine(
    db: Database,
    recognizer: Recognizer,
    engine: Engine,
    synthesizer: Synthesizer,
    dubber: Dubber,
    job: JobRecord,
    context: JobContext,
    storage: Storage,
    model: str | None,
    fetching: UrlFetch,
) -> JobOutcome:
    from dragoman.pipelines.dub import SourceTrack
    from dragoman.pipelines.subtitles import caption_track, recognise_file
    from dragoman.service import media_store
    from dragoman.speech.asr import TranscribeOptions

    params = job.params
    BATCH.activate_children(db, job.id)
    if not BATCH.pending_children(db, job):
        return JobOutcome(result=json.dumps({"stage": "canceled"}), credits=0)
    upload: MediaRecord | None
    if params.get("video_id") is None and params.get("source_url"):  # a URL not fetched yet
        upload = _media_from_url(db, job, context, storage, fetching)
        if upload is None:
            return JobOutcome(result=json.dumps({"stage": "canceled"}), credits=0)
    else:
        upload = media_store.get_any(db, str(params.get("video_id")))
    if upload is None:
        raise MediaNotFound(
            "the job's upload no longer exists (uploads are kept for 7 days); upload it again"
        )
    BATCH.set_stage(db, job, RECOGNISING)
    source_given = str(params.get("source_lang") or "auto")
    with tempfile.TemporaryDirectory(prefix="dragoman-dub-") as work:
        path = Path(work) / "in" / _media_name(upload)
        path.parent.mkdir()
        media_store.copy_to(storage, upload, path)
        context.check()
        started = time.perf_counter()
        _info, transcript = recognise_file(
            path,
            recognizer,
            TranscribeOptions(language=source_given, model=model),
            engine_batches.scaled(context, 0, RECOGNITION_SHARE),
            max_bytes=MAX_FILE_BYTES,
        )
        recognise_s = time.perf_counter() - started
        track = caption_track(transcript)
        source_track = SourceTrack(track, float(transcript.language_probability), tuple(transcript.warnings))
        src = track.language if source_given == "auto" else source_given
        detected = {
            "source_lang": src,
            "language_probability": round(float(transcript.language_probability), 4),
            "language_given": source_given != "auto",
        }
        children = BATCH.pending_children(db, job)
        done = 0
        span = (100 - RECOGNITION_SHARE) // max(1, len(children))
        for index, child in enumerate(children):
            context.check()
            if not BATCH.still_pending(db, job, child.id):
                continue  # canceled meanwhile
            target = str(child.params.get("target_lang"))
            BATCH.set_stage(db, job, DUBBING, target_lang=target, **detected)
            start = RECOGNITION_SHARE + index * span
            context.progress(start, 100, f"dubbing {target}")
            made: dict[str, str] = {}
            out = Path(work) / child.id
            try:
                with BATCH.child_context(db, job, child.id, context) as watched:
                    outcome = _dub_child(
                        db,
                        dubber,
                        child,
                        path,
                        out,
                        src,
                        source_track,
                        recognizer,
                        engine,
                        synthesizer,
                        engine_batches.scaled(watched, start, span),
                        storage,
                        made,
                        {**detected, "recognise_seconds": recognise_s},
                    )
            except Cancelled:
                engine_batches.delete_keys(storage, made.values())
                if context.cancel.cancelled:
                    raise
                continue  # this child was canceled by its client (refunded then): on to the next
            except Exception as exc:
                engine_batches.delete_keys(storage, made.values())
                if context.cancel.cancelled:
                    raise
                if not isinstance(exc, DragomanError):
                    log.exception("dub child %s failed", child.id)
                jobs.fail(
                    db,
                    child.id,
                    BATCH.child_owner(job.id),
                    coded_error(exc) if isinstance(exc, DragomanError) else engine_batches.error_message(exc),
                    retryable=False,
                )
                continue
            finally:
                shutil.rmtree(out, ignore_errors=True)
            if jobs.complete(db, child.id, BATCH.child_owner(job.id), outcome) is None:
                engine_batches.delete_keys(storage, made.values())  # canceled while it was made
            else:
                done += 1
    return JobOutcome(
        result=json.dumps({"stage": "done", **detected, "children_done": done}, ensure_ascii=False),
        credits=0,
    )


def _dub_child(
    db: Database,
    dubber: Dubber,
    child: JobRecord,
    media: Path,
    out: Path,
    src: str,
    source_track: SourceTrack,
    recognizer: Recognizer,
    engine: Engine,
    synthesizer: Synthesizer,
    context: JobContext,
    storage: Storage,
    made: dict[str, str],
    detected: Mapping[str, Any],
) -> JobOutcome:
    """Dub one child into ``out`` and store its files (into ``made`` one by one, so a failure half-way
    deletes what was stored); the child's outcome."""
    from dragoman.languages import catalogue
    from dragoman.pipelines.dub.types import DubOptions

    target = str(child.params.get("target_lang"))
    try:
        same = catalogue.resolve(target) == catalogue.resolve(src)
    except DragomanError:  # a spoken language the catalogue does not know: not the target
        same = False
    if same:
        raise InvalidRequest(f"the media is already spoken in {src}: there is nothing to dub into {target}")
    params = child.params
    options = DubOptions(
        target=target,
        source=src,
        voice=str(params.get("voice_id") or "aria"),
        voice_mode=params.get("voice_mode") or "preset",
        clone_id=params.get("clone_id") or None,
    )
    out.mkdir(parents=True, exist_ok=True)
    result = dubber(
        media,
        options,
        recognizer=recognizer,
        engine=engine,
        synthesizer=synthesizer,
        out_dir=out,
        context=context,
        clone_store=_clone_store(db, child.key_id, out / ".clones"),
        source_track=source_track,
    )
    context.check()
    outputs = result.outputs
    files: dict[str, Path] = {}
    if outputs.video is not None:
        files["video"] = outputs.video
    files["audio"] = outputs.audio
    for name, file in outputs.subtitles.items():
        if name == "bilingual_srt" or name.startswith("bilingual"):
            files["bilingual_srt"] = file
        elif ":" in name:
            files[name] = file
    for name, file in files.items():
        stored = f"{PREFIX}/{child.id}/{Path(file).name}"
        storage.put_file(stored, Path(file))
        made[name] = stored
    return JobOutcome(result=child_result(result, detected), artifacts=dict(made))


def child_result(result: DubResult, detected: Mapping[str, Any]) -> str:
    """A done child's JSON summary: what its status and ``dub.done`` show."""
    stages = {name: round(float(seconds), 3) for name, seconds in result.stage_seconds.items()}
    recognise = float(detected.get("recognise_seconds") or 0.0)
    stages["recognise"] = round(stages.get("recognise", 0.0) + recognise, 3)  # the shared run
    beyond = [line.index for line in result.lines if line.beyond_natural]
    overlapping = [line.index for line in result.lines if line.overlaps]
    voices = sorted({line.voice for line in result.lines})
    return json.dumps(
        {
            "stage": "done",
            "source_lang": detected.get("source_lang") or result.source_language,
            "language_probability": detected.get("language_probability", result.language_probability),
            "target_lang": result.target,
            "duration_seconds": round(float(result.duration), 3),
            "lines": len(result.lines),
            "lines_beyond_natural": beyond[:500],
            "lines_overlapping": overlapping[:500],
            "share_natural": round(result.share_natural, 4),
            "voices": voices[:20],
            "stage_seconds": stages,
            "warnings": list(result.warnings)[:20],
        },
        ensure_ascii=False,
    )


# ----- reading ----------------------------------------------------------------------------------------------
class View(BatchView):
    """A status poll's view of a dub child (:class:`~dragoman.service.engine_batches.BatchView`)."""

    @property
    def stage(self) -> str:
        if self.job.terminal:
            return self.job.status
        stage = self.stage_or(RECOGNISING)
        if stage == DUBBING and summary(self.engine).get("target_lang") != self.job.params.get("target_lang"):
            return "waiting"  # the engine job dubs a sibling now; this one comes later
        return stage

    @property
    def source_lang(self) -> str | None:
        return source_lang_of(self.job, self.engine)


def view(db: Database, key_id: str, job_id: str) -> View:
    """The dub job ``job_id`` of ``key_id`` with its engine job and siblings (404 otherwise)."""
    found = BATCH.view(db, key_id, job_id)
    return View(found.job, found.engine, found.children)


def reconcile(db: Database, engine_ids: Sequence[str] | None = None) -> int:
    """Fail dub children whose engine job ended without them (see :meth:`EngineBatch.reconcile`)."""
    return BATCH.reconcile(db, engine_ids)


def artifact(job: JobRecord, name: str, lang: str | None) -> str:
    """The storage key of a done child's ``name`` (video, audio, srt, vtt, txt, bilingual_srt; subtitles in
    ``lang``: the target (default) or the source language); 404 when it has none."""
    from dragoman.service.subtitle_jobs import language_code

    if job.params.get("role") == ROLE_ENGINE:
        raise JobNotFound(f"no dub job {job.id}")
    if job.status != jobs.DONE:
        raise JobNotFound(f"dub job {job.id} is {job.status}: its files exist once it is done")
    if name in ("video", "audio", "bilingual_srt"):
        if lang is not None and name != "bilingual_srt":
            raise InvalidRequest(f"lang applies to subtitle files, not to the {name}")
        stored = job.artifacts.get(name)
        if not stored:
            what = "a video (the input was audio only)" if name == "video" else f"a {name} file"
            raise JobNotFound(f"dub job {job.id} has no {what}")
        return str(stored)
    wanted = language_code(lang, "lang") if lang is not None else str(job.params.get("target_lang"))
    stored = job.artifacts.get(f"{name}:{wanted}")
    if not stored:
        have = sorted({k.split(":", 1)[1] for k in job.artifacts if k.startswith(f"{name}:")})
        raise JobNotFound(
            f"dub job {job.id} has no {name} in {wanted!r}; it has: {', '.join(have) or 'none'}"
        )
    return str(stored)


def media_type(name: str, stored: str) -> str:
    """The Content-Type of an artifact."""
    if name in MEDIA_TYPES:
        return MEDIA_TYPES[name]
    return MEDIA_TYPES.get(Path(stored).suffix.lower(), "application/octet-stream")


__all__ = [
    "BATCH",
    "DUB_CREDITS_PER_MINUTE",
    "KIND",
    "DubQuote",
    "DubRequest",
    "Dubber",
    "Fetched",
    "Submitted",
    "UrlFetch",
    "View",
    "artifact",
    "check_media_url",
    "check_request",
    "child_fields",
    "coded_error",
    "done_payload",
    "dub_quote",
    "error_code",
    "failed_payload",
    "fetch_url",
    "make_dub_handler",
    "reconcile",
    "submit",
    "submit_url",
    "view",
]
