"""One root error, typed subclasses, and the one place that maps errors of dependencies into ours.

Every class the code raises on purpose lives here (a front door's refusals, the admission pool's 503, the
daemon's port, the Apertium pipeline's failures included). Each knows its HTTP status and a stable ``code``;
the wire shape (``{"error", "code"}``) is made at each front door. A message is one an agent can act on:
what was wrong, what is installed, which command fixes it.

This module is the ground floor: it imports nothing of dragoman and no dependency. :func:`map_exceptions`
recognises PyMuPDF's errors by the module their classes come from, so PyMuPDF is not imported here (see
:func:`map_exception`).
"""

from __future__ import annotations

import contextlib
import errno
import subprocess
from collections.abc import Iterator
from typing import Any, ClassVar


class DragomanError(Exception):
    """Root of every error dragoman raises on purpose."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, str]:
        return {"error": self.message, "code": self.code}


class InvalidRequest(DragomanError):
    """A parameter is missing, of the wrong type or out of its bounds."""

    status = 400
    code = "invalid_request"


class UnknownLanguage(InvalidRequest):
    """A language code that resolves to no FLORES-200 language."""

    code = "unknown_language"

    def __init__(self, message: str, *, given: str, suggestions: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.given = given
        self.suggestions = suggestions


class LimitExceeded(InvalidRequest):
    """A batch, glossary or text larger than the documented limit."""

    code = "limit_exceeded"


class UnsupportedPair(InvalidRequest):
    """No installed pack, alone or chained, translates this pair (spec 7.1: 400)."""

    code = "unsupported_pair"


class PackNotInstalled(DragomanError):
    """A pack id that names no installed pack."""

    status = 404
    code = "pack_not_installed"


class PackIntegrityError(DragomanError):
    """A pack or archive that fails its checks: checksum, layout, manifest, unsafe paths, size bound."""

    status = 422
    code = "pack_integrity"


class PackInstallError(DragomanError):
    """Installing a pack failed for a reason other than its content (download, disk, name taken)."""

    status = 502
    code = "pack_install_failed"


class PackUnsafe(PackIntegrityError):
    """A pack or archive whose content reaches outside it: a link out, an absolute or '..' path, a FIFO."""

    code = "pack_unsafe"


class DownloadTimedOut(PackInstallError):
    """A pack download or index fetch ran past its overall deadline (or crawled below the minimum rate)."""

    status = 504
    code = "download_timeout"


class IndexTooLarge(PackInstallError):
    """A pack index larger than its bound: not an index, or a server sending without end."""

    code = "index_too_large"


class GlossaryFileError(DragomanError):
    """The user's glossary file cannot be read or written; the message names the file."""

    status = 500
    code = "glossary_file"


class BackendError(DragomanError):
    """A translation backend failed (a model error, a dead Apertium pipeline)."""

    status = 502
    code = "backend_error"


class PipelineBroken(BackendError):
    """A chain of processes (an Apertium pipeline) died or answered out of step; it must be restarted."""

    code = "pipeline_broken"


class PipelineSilent(PipelineBroken):
    """A chain of processes (an Apertium pipeline) went idle without answering a block it was sent: a
    stage swallowed it. The pipeline must be restarted."""

    code = "pipeline_silent"


class Cancelled(DragomanError):
    """The caller cancelled the work (an MCP client, a job runner); it stopped at its next chunk."""

    status = 499
    code = "cancelled"


class ConfigError(DragomanError):
    """A setting (a ``DRAGOMAN_*`` variable, a command-line option) that cannot be used as given."""

    status = 500
    code = "config_error"


class EngineTimeout(DragomanError):
    """Engine work took longer than allowed."""

    status = 504
    code = "timeout"


class PipelineStuck(EngineTimeout):
    """A chain of processes (an Apertium pipeline) sent nothing back in time."""

    code = "pipeline_stuck"


class DetectionUnavailable(DragomanError):
    """The language-identification model cannot be found or loaded."""

    status = 503
    code = "detection_unavailable"


class DocumentFormatError(DragomanError):
    """A document that cannot be read as the format it claims, or a format not handled (415)."""

    status = 415
    code = "unsupported_document"


class FileTooLarge(DragomanError):
    """A file over the size a front door accepts (spec: 200 MB)."""

    status = 413
    code = "file_too_large"


class DocumentTooLarge(FileTooLarge):
    """A document within the file size limit whose content is over a bound of ours (pages, pages to OCR,
    markup parsed, expansion of a zip container): refused before the work grows with it (413)."""

    code = "document_too_large"


class PathNotAllowed(DragomanError):
    """A file path outside the directories a front door may read or write."""

    status = 403
    code = "path_not_allowed"


class InstallNotAllowed(DragomanError):
    """An install asked of a front door the user has not allowed to install models (the MCP server without
    DRAGOMAN_MCP_ALLOW_INSTALLS=1): nothing is downloaded."""

    status = 403
    code = "install_not_allowed"


class OcrUnavailable(DragomanError):
    """Tesseract or the OCR language it needs is not installed."""

    status = 503
    code = "ocr_unavailable"


class Saturated(DragomanError):
    """More requests wait for the engine than the queue allows; ``retry_after`` is in seconds."""

    status = 503
    code = "saturated"

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PortInUse(DragomanError):
    """The daemon's port is taken (often by a daemon that is already running) or cannot be listened on."""

    status = 409
    code = "port_in_use"


class GateRefusal(DragomanError):
    """Refused by a front door's gate before any route ran; the subclasses say why."""

    status = 403
    code = "refused"


class Unauthorized(GateRefusal):
    """A missing or wrong bearer token."""

    status = 401
    code = "unauthorized"


class HostNotAllowed(GateRefusal):
    """A ``Host`` header that is not a name the daemon answers to (DNS-rebinding protection)."""

    status = 403
    code = "host_not_allowed"


class OriginNotAllowed(GateRefusal):
    """A browser ``Origin`` that is not in the allowed list (CORS is closed by default)."""

    status = 403
    code = "origin_not_allowed"


class BodyTooLarge(GateRefusal):
    """A request body over the front door's limit (announced by ``Content-Length`` or counted)."""

    status = 413
    code = "body_too_large"


class RequestTimeout(GateRefusal):
    """A request's line and headers did not arrive within the front door's read deadline (slowloris)."""

    status = 408
    code = "request_timeout"


class HeadersTooLarge(GateRefusal):
    """A request line and headers over the front door's limit."""

    status = 431
    code = "headers_too_large"


# ----- hosted front door: Idempotency-Key (issue 12) -------------------------------------------------------
class IdempotencyConflict(DragomanError):
    """A request with this Idempotency-Key is still running; retry after ``retry_after`` seconds to get
    its stored answer."""

    status = 409
    code = "idempotency_in_progress"

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "retry_after": self.retry_after}


class IdempotencyMismatch(DragomanError):
    """This Idempotency-Key was used within 24 hours for a different request (method, path or body)."""

    status = 422
    code = "idempotency_key_reused"


# ----- hosted service: keys, credits, limits (issue 12) ---------------------------------------------------
def _iso_ms(ms: int) -> str:
    """An instant in ms since the epoch as ISO 8601 UTC with milliseconds (spec 2.2)."""
    import datetime

    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


class PlanWithoutApi(GateRefusal):
    """A valid API key whose account's plan does not include API access (spec 5.8, 7.1: 403)."""

    status = 403
    code = "plan_without_api"


class InsufficientCredits(DragomanError):
    """The balance the key spends (live or test credits) holds less than the work needs (402)."""

    status = 402
    code = "insufficient_credits"

    def __init__(self, message: str, *, balance: int, required: int) -> None:
        super().__init__(message)
        self.balance = balance
        self.required = required

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "balance": self.balance, "required": self.required}


class MonthlyCapReached(DragomanError):
    """The key's monthly credit cap would be passed (402 until the next UTC month, spec 7.1);
    ``resets_at_ms`` is the start of that month (``resets_at`` in ISO 8601 in the body)."""

    status = 402
    code = "monthly_cap_reached"

    def __init__(self, message: str, *, cap: int, spent: int, resets_at_ms: int) -> None:
        super().__init__(message)
        self.cap = cap
        self.spent = spent
        self.resets_at_ms = resets_at_ms

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "cap": self.cap,
            "spent": self.spent,
            "resets_at": _iso_ms(self.resets_at_ms),
        }


class RateLimited(DragomanError):
    """Over the key's requests per minute (fixed window, spec 8): 429 with ``Retry-After`` seconds."""

    status = 429
    code = "rate_limited"

    def __init__(
        self, message: str, *, retry_after: int, limit: int, remaining: int, resets_at_ms: int
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.limit = limit
        self.remaining = remaining
        self.resets_at_ms = resets_at_ms

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "retry_after": self.retry_after,
            "limit": self.limit,
            "remaining": self.remaining,
            "resets_at": _iso_ms(self.resets_at_ms),
        }


class RateLimiterUnavailable(DragomanError):
    """The shared store of the per-minute limiter (Redis, issue 13) cannot be reached: the request is refused
    (503 with ``Retry-After``) rather than served unmetered (fail closed)."""

    status = 503
    code = "rate_limiter_unavailable"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "retry_after": self.retry_after}


class StorageUnavailable(DragomanError):
    """The hosted service's file store (S3, issue 13) cannot be reached: 503 with ``Retry-After``."""

    status = 503
    code = "storage_unavailable"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "retry_after": self.retry_after}


class QuotaExceeded(DragomanError):
    """The key's daily character quota of hosted v2 would be passed (spec 7.2: 429, the error text exactly
    'daily character quota exceeded', with ``remaining`` and ``limit``); it resets at 00:00 UTC."""

    status = 429
    code = "quota_exceeded"
    MESSAGE: ClassVar[str] = "daily character quota exceeded"

    def __init__(self, *, remaining: int, limit: int, resets_at_ms: int) -> None:
        super().__init__(self.MESSAGE)
        self.remaining = remaining
        self.limit = limit
        self.resets_at_ms = resets_at_ms

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "remaining": self.remaining,
            "limit": self.limit,
            "resets_at": _iso_ms(self.resets_at_ms),
        }


class FileAccessError(DragomanError):
    """A file or folder the work needs cannot be read or written (permission denied, no space left, a
    read-only file system, a folder where a file belongs); the message names it and says what to do."""

    status = 500
    code = "file_access"


# ----- the hosted service's jobs (issue 12) ------------------------------------------------------------
class JobNotFound(DragomanError):
    """A job (or batch) that does not exist or belongs to another key: both answer alike (spec 7.1: 404)."""

    status = 404
    code = "not_found"


class JobFinished(DragomanError):
    """A cancel of a job that is already done, failed or canceled (spec 3 and 7.1: 409); ``job_status`` is
    the state it is in."""

    status = 409
    code = "job_finished"

    def __init__(self, message: str, *, job_status: str) -> None:
        super().__init__(message)
        self.job_status = job_status

    def to_dict(self) -> dict[str, str]:
        return {**super().to_dict(), "status": self.job_status}


class InvalidWebhookUrl(InvalidRequest):
    """A webhook URL that cannot be delivered to: not http(s), malformed, or a name or address the service
    refuses to call (private, loopback, link-local, CGNAT, multicast, reserved, cloud metadata: SSRF)."""

    code = "invalid_webhook_url"


class WebhookVerificationError(DragomanError):
    """A webhook a receiver got whose signature is missing or wrong, or whose timestamp is too old or too
    new (replay protection; :func:`dragoman.webhooks.verify`)."""

    status = 400
    code = "invalid_webhook_signature"


# ----- the hosted service's database (issue 13) ---------------------------------------------------------
class DatabaseUnavailable(DragomanError):
    """The service's database cannot be reached (PostgreSQL down or restarting, the network to it cut, its
    connections all busy): 503 with ``Retry-After``. Nothing of the request was committed, so a retry (with
    the same Idempotency-Key) is safe."""

    status = 503
    code = "database_unavailable"

    def __init__(self, message: str, *, retry_after: int = 2) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "retry_after": self.retry_after}


# ----- speech and audio (issue 14) ------------------------------------------------------------------
class AudioFormatError(DragomanError):
    """Audio that cannot be read: not a WAV (or not an encoding we decode), a corrupt header, an absurd
    sample rate or channel count."""

    status = 415
    code = "unsupported_audio"


class SpeechEngineError(DragomanError):
    """A speech engine failed: its program exited with an error or wrote no audio, its model would not run."""

    status = 502
    code = "speech_engine_error"


class VoiceNotInstalled(DragomanError):
    """A voice (or speech engine) that is not installed here; the message says what is and how to install."""

    status = 404
    code = "voice_not_installed"


class CloneNotFound(DragomanError):
    """A voice clone (voice match) id that is not one of the caller's clones."""

    status = 404
    code = "clone_not_found"


class CloneLimitReached(DragomanError):
    """A clone beyond the 25 a user may keep (spec 8); the caller removes one first."""

    status = 409
    code = "clone_limit_reached"


class EditWindowClosed(DragomanError):
    """A word edit of a render older than the word editor's 12 hours (spec 8): its audio is no longer kept
    for editing; render it again."""

    status = 410
    code = "edit_window_closed"


class EditConflict(DragomanError):
    """A word edit that could not be applied because other edits of the same tts job kept landing first
    (another API process won each try), or that waited too long for one running in this process; nothing of
    it was applied: read the job's /words again and retry."""

    status = 409
    code = "edit_conflict"


# ----- speech recognition (issue 15) ---------------------------------------------------------------------
class AsrModelNotInstalled(PackNotInstalled):
    """A speech recognition model (kind ``asr``) that is not installed here; the message names what is and
    how to install one (``dragoman asr install-embedded`` for Whisper base)."""

    code = "asr_model_not_installed"


# ----- hosted subtitles (issue 15) -----------------------------------------------------------------
class MediaNotFound(DragomanError):
    """A ``video_id`` that is not one of the caller's account's uploads (never made, another account's, or
    past its 7-day retention)."""

    status = 404
    code = "media_not_found"


class DurationMismatch(InvalidRequest):
    """A subtitle job's ``durationSeconds`` that does not match the probed duration of its upload (within
    max(1 s, 2%)): credits are computed on the probed duration, so the client's figure must agree."""

    code = "duration_mismatch"

    def __init__(self, message: str, *, probed_seconds: float, given_seconds: float) -> None:
        super().__init__(message)
        self.probed_seconds = probed_seconds
        self.given_seconds = given_seconds

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "probed_seconds": self.probed_seconds,
            "given_seconds": self.given_seconds,
        }


# ----- hosted dubbing (issue 16) ---------------------------------------------------------------------
class InvalidMediaUrl(InvalidRequest):
    """A dub's media ``url`` the service will not fetch: not http(s), malformed, or a name or address it
    refuses to call (private, loopback, link-local, CGNAT, multicast, reserved, cloud metadata: SSRF)."""

    code = "invalid_media_url"


class MediaFetchFailed(InvalidRequest):
    """A dub's media ``url`` that could not be fetched: unreachable, an answer other than 200, an empty
    body, too many redirects, or slower than the time allowed."""

    status = 422
    code = "media_fetch_failed"


# ----- media: probe, decode, ffmpeg (issue 15) -------------------------------------------------------
class MediaFormatError(DocumentFormatError):
    """A file that cannot be read as audio or video: corrupt, truncated before its index, not media at all
    (text, an image), or of another type than its name says (a PNG named ``.mp4``)."""

    code = "unsupported_media"


class NoAudioStream(InvalidRequest):
    """Media with no audio stream (a silent video, an image sequence): nothing to transcribe."""

    status = 422
    code = "no_audio_stream"


class EmptyMedia(InvalidRequest):
    """Media that lasts no time at all (0 seconds of audio)."""

    status = 422
    code = "empty_media"


class MediaToolError(DragomanError):
    """ffmpeg (run as a program) failed: its exit status and the end of its stderr are in the message."""

    status = 502
    code = "media_tool_failed"


class MediaToolUnavailable(MediaToolError):
    """ffmpeg or ffprobe is not installed (Debian: ``apt-get install ffmpeg``)."""

    status = 503
    code = "media_tool_unavailable"


# ----- errors of dependencies --------------------------------------------------------------------------
def _from_pymupdf(exc: BaseException) -> bool:
    """Whether ``exc`` is of PyMuPDF's own classes (``pymupdf.FileDataError``, ``pymupdf.mupdf.FzError*``)."""
    return any(cls.__module__.partition(".")[0] in ("pymupdf", "fitz") for cls in type(exc).__mro__)


def _file_system(exc: OSError) -> str:
    """What went wrong with a file, by errno, in words a user can act on."""
    where = f": {exc.filename}" if exc.filename is not None else ""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no space left on the device" + where
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied" + (where or f": {exc}")
    if exc.errno == errno.EROFS:
        return "read-only file system" + where
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return "no such file or directory" + (where or f": {exc}")
    if exc.errno == errno.EISDIR:
        return "a folder where a file belongs" + where
    if exc.errno == errno.EEXIST:
        return "already exists" + where
    if exc.errno == errno.EFBIG:
        return "file too large for its file system" + where
    if exc.errno == errno.ENAMETOOLONG:
        return "file name too long" + where
    return str(exc)


def file_error(exc: OSError, context: str, *, hint: str = "") -> FileAccessError:
    """Our error for the file system's ``exc``, worded by errno: ``context`` leads, ``hint`` ends it."""
    return FileAccessError(f"{context}: {_file_system(exc)}" + (f"; {hint}" if hint else ""))


def _classify(exc: BaseException, error: type[DragomanError]) -> tuple[type[DragomanError], str] | None:
    if _from_pymupdf(exc):
        return DocumentFormatError, str(exc)
    if isinstance(exc, subprocess.TimeoutExpired):  # subprocess.run has killed the child
        program = exc.cmd[0] if isinstance(exc.cmd, list | tuple) and exc.cmd else exc.cmd
        return EngineTimeout, f"{program} took longer than {exc.timeout:.3g} s and was stopped"
    if isinstance(exc, MemoryError):
        return error, "out of memory; try a smaller batch or a smaller pack"
    if isinstance(exc, OSError):
        return error, _file_system(exc)
    if isinstance(exc, (RuntimeError, ValueError)):
        return error, str(exc)
    return None


def map_exception(
    exc: BaseException, context: str, *, error: type[DragomanError] = BackendError, hint: str = ""
) -> DragomanError | None:
    """Our error for a dependency's or the file system's ``exc``; None for anything else (a bug: let it rise).

    ``context`` leads the message and ``hint``, when given, ends it. ``error`` is the class for failures of
    the work being done (loading a model, installing a pack, reading a document), the file system's
    included (its errno words the message). Families whose cause is plain are typed whatever the work:
    PyMuPDF's errors (``FileDataError``, ``EmptyFileError``, MuPDF's ``FzError*``), recognised by the module
    their classes come from, are :class:`DocumentFormatError`; a child process killed at its timeout
    (``subprocess.TimeoutExpired``) is an :class:`EngineTimeout`. CTranslate2, SentencePiece and fastText
    raise plain ``RuntimeError`` or ``ValueError`` (an unreadable model, a bad token, an unsupported compute
    type): those become ``error``. Tesseract runs as a program (``documents/_tesseract.py``): its exit status
    and stderr are typed there, as they raise nothing to map.
    """
    if isinstance(exc, DragomanError):
        return None
    found = _classify(exc, error)
    if found is None:
        return None
    cls, what = found
    return cls(f"{context}: {what}" + (f"; {hint}" if hint else ""))


@contextlib.contextmanager
def map_exceptions(
    context: str, *, error: type[DragomanError] = BackendError, hint: str = ""
) -> Iterator[None]:
    """Translate errors of dependencies and the file system into ours (:func:`map_exception`), keeping
    the original in ``__cause__``.

    ``context`` says what was being done ("loading pack X", "reading report.pdf"); it leads the message.
    ``error`` is the class for failures of that work (default :class:`BackendError`); ``hint``, when given,
    ends the message ("check the file or export it again"). Our own errors pass through untouched, and so
    does anything that is neither a dependency's nor the file system's (a bug).
    """
    try:
        yield
    except DragomanError:
        raise
    except Exception as exc:
        mapped = map_exception(exc, context, error=error, hint=hint)
        if mapped is None:
            raise
        raise mapped from exc
