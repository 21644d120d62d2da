"""One root error, typed subclasses, and the one place that maps errors of dependencies into ours.

Every error knows its HTTP status (what the daemon answers) and carries a message an agent can act on:
what was wrong, what is installed, which command fixes it.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from typing import ClassVar


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


class GlossaryFileError(DragomanError):
    """The user's glossary file cannot be read or written; the message names the file."""

    status = 500
    code = "glossary_file"


class BackendError(DragomanError):
    """A translation backend failed (a model error, a dead Apertium pipeline)."""

    status = 502
    code = "backend_error"


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


class DetectionUnavailable(DragomanError):
    """The language-identification model cannot be found or loaded."""

    status = 503
    code = "detection_unavailable"


class DocumentFormatError(DragomanError):
    """A document that cannot be read as the format it claims, or a format not handled (415)."""

    status = 415
    code = "unsupported_document"


class FileTooLarge(DragomanError):
    status = 413
    code = "file_too_large"


class PathNotAllowed(DragomanError):
    """A file path outside the directories a front door may read or write."""

    status = 403
    code = "path_not_allowed"


class OcrUnavailable(DragomanError):
    """Tesseract or the OCR language it needs is not installed."""

    status = 503
    code = "ocr_unavailable"


@contextlib.contextmanager
def map_exceptions(context: str) -> Iterator[None]:
    """Translate errors of ctranslate2, sentencepiece and the file system into ours, keeping the cause.

    ``context`` says what was being done ("loading pack X", "translating with pack X"); it leads the message.
    Our own errors pass through untouched.
    """
    try:
        yield
    except DragomanError:
        raise
    except MemoryError as exc:
        raise BackendError(f"{context}: out of memory; try a smaller batch or a smaller pack") from exc
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise PackInstallError(f"{context}: no space left on the device") from exc
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise PackInstallError(f"{context}: permission denied: {exc.filename or exc}") from exc
        raise BackendError(f"{context}: {exc}") from exc
    except (RuntimeError, ValueError) as exc:
        # ctranslate2 raises RuntimeError/ValueError for unreadable models, bad tokens, unsupported
        # compute types; sentencepiece raises RuntimeError/OSError for unreadable models.
        raise BackendError(f"{context}: {exc}") from exc
