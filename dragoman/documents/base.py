"""What every document format shares: the handler contract, the text translator handed to handlers,
content sniffing, size limits and safe output.

A format handler reads a file, collects its translatable texts with their places, asks a
:class:`TextTranslator` for their translations (one batched call, or a few for long documents), and writes
the translated file to the path it is given. That path is a temporary file beside the final one
(:func:`atomic_output`, used by the translate-file pipeline): it is renamed into place only when the
handler returns, and removed when it raises. Extra outputs (a DOCX export, a rendered image) go through
``atomic_output`` too; written inside the main output's, they are placed together with it, or not at all.
Temporaries are named so that one left by a killed process is found and removed
(:mod:`dragoman.documents.partials`). Handlers never talk to the engine directly, so they are tested with a
fake translator.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from dragoman.documents import partials
from dragoman.errors import DocumentFormatError, FileTooLarge, InvalidRequest
from dragoman.limits import MAX_FILE_BYTES
from dragoman.progress import ProgressCallback

#: Translates texts in order; blank texts come back as given. Built by the translate-file pipeline.
TranslateTexts = Callable[[Sequence[str]], list[str]]


@dataclass(frozen=True)
class TextBox:
    """A piece of text found on a page or image, with its translation (OCR and PDF results)."""

    page: int
    bbox: tuple[float, float, float, float]  # x0, y0, x1, y1 in the page's units (points, pixels)
    text: str
    translation: str


@dataclass
class DocumentReport:
    """What a handler did: counts for the result, and anything the caller should know."""

    segments: int = 0
    characters: int = 0
    pages: int | None = None
    warnings: list[str] = field(default_factory=list)
    boxes: list[TextBox] = field(default_factory=list)
    extracted_text: str | None = None
    translated_text: str | None = None
    extra_outputs: dict[str, Path] = field(default_factory=dict)  # e.g. {"docx": Path(...)}
    counts: dict[str, int] = field(default_factory=dict)  # structure found, e.g. {"tables": 2, "cells": 9}


class TextTranslator(Protocol):
    """What a handler is given: translation of texts, the languages (FLORES) when known, and detection.

    Everything a handler may call is declared here; handlers never reach for anything else on it.
    """

    source: str | None  # set by a handler that detects the language (OCR reads with it)
    target: str

    def __call__(self, texts: Sequence[str], *, done: int = 0, total: int | None = None) -> list[str]:
        """The translations of ``texts``, in order; blank texts come back as given.

        A translator that reports progress counts these texts after ``done`` others of ``total`` in all
        (default: just these), so a handler that translates a document in parts keeps one count.
        """
        ...

    def detect_language(self, text: str) -> str | None:
        """The FLORES code of ``text``, or None when detection is uncertain."""
        ...


class FormatHandler(Protocol):
    """One document format."""

    name: str  # "docx", "pdf", "txt", ...
    suffixes: tuple[str, ...]  # the extensions it writes and accepts (".docx",)

    def sniff(self, head: bytes, path: Path) -> bool:
        """True when the first bytes (and, for containers, the file itself) are this format."""
        ...

    def translate(
        self, source: Path, output: Path, translate: TextTranslator, progress: ProgressCallback | None
    ) -> DocumentReport:
        """Write the translation of ``source`` to ``output`` (an empty temporary file with the right
        suffix; overwrite it)."""
        ...


def check_size(path: Path, limit: int = MAX_FILE_BYTES) -> int:
    try:
        size = path.stat().st_size
    except FileNotFoundError as exc:
        raise InvalidRequest(f"{path} does not exist") from exc
    if not path.is_file():
        raise InvalidRequest(f"{path} is not a regular file")
    if size > limit:
        raise FileTooLarge(f"{path} is {size / 1e6:.1f} MB; the limit is {limit / 1e6:.0f} MB")
    return size


def read_head(path: Path, size: int = 8192) -> bytes:
    with path.open("rb") as handle:
        return handle.read(size)


@dataclass(frozen=True)
class _Staged:
    """A complete temporary waiting for its rename."""

    partial: Path
    destination: Path
    overwrite: bool
    new_mode: int  # the mode a new file gets here (0o666 less the umask)


@dataclass
class _OutputGroup:
    """The files written under one outer :func:`atomic_output`: its own and those written inside it."""

    extras: list[_Staged] = field(default_factory=list)

    def commit(self, main: _Staged) -> None:
        """Rename every file into place, or none: exports that do not replace a file go first (so they can
        be taken back if the main output cannot be placed), then the main output, then the others."""
        placed: list[Path] = []
        try:
            for extra in self.extras:
                if not extra.overwrite:
                    _place(extra)
                    placed.append(extra.destination)
            _place(main)
            for extra in self.extras:
                if extra.overwrite:
                    _place(extra)
        except BaseException:
            for destination in placed:
                with contextlib.suppress(OSError):
                    destination.unlink()
            raise

    def discard(self) -> None:
        for extra in self.extras:
            partials.discard(extra.partial)


#: The group of the :func:`atomic_output` being written on this thread, if any.
_GROUP: ContextVar[_OutputGroup | None] = ContextVar("dragoman_output_group", default=None)


def _place(staged: _Staged) -> None:
    """Give ``staged`` its mode and its name; without overwrite, never over a file that appeared meanwhile."""
    partial, destination = staged.partial, staged.destination
    os.chmod(
        partial, partials.mode_for(destination, staged.new_mode) if staged.overwrite else staged.new_mode
    )
    if staged.overwrite:
        os.replace(partial, destination)
    else:
        try:
            os.link(partial, destination)  # atomic, and fails if the name was taken meanwhile
        except FileExistsError as exc:
            raise InvalidRequest(f"{destination} appeared while translating; not overwritten") from exc
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
            if destination.exists():  # no hard links here (FAT, some mounts): check, then rename
                raise InvalidRequest(f"{destination} exists; not overwritten") from exc
            os.replace(partial, destination)
    partials.discard(partial)  # the hard link's other name (gone already after a rename)


@contextlib.contextmanager
def atomic_output(destination: Path, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``destination``; on success it is renamed into place.

    The temporary file is removed on any failure, so nothing half-written is ever left (a process killed
    outright leaves a temporary that the next start removes: :mod:`dragoman.documents.partials`). Without
    ``overwrite`` an existing destination is refused, and checked again at the rename (``os.link`` fails
    if another writer got there first). A new file gets the umask's mode; a file overwritten keeps its mode.

    Called inside another ``atomic_output`` on the same thread (a PDF's DOCX export inside the PDF's
    output), the file is not placed when its block ends but with the outer one's: both or neither.
    """
    destination = destination.absolute()
    if destination.is_dir():  # even with overwrite: a folder is never replaced by a file
        raise InvalidRequest(
            f"{destination} is a folder; name the file to write, such as {destination}/NAME.EXT"
        )
    if destination.exists() and not destination.is_file():
        raise InvalidRequest(
            f"{destination} is not a regular file (a device, pipe or socket); name a file to write"
        )
    if destination.exists() and not overwrite:
        raise InvalidRequest(
            f"{destination} already exists; pass overwrite=true to replace it, or choose another output path"
        )
    destination.parent.mkdir(parents=True, exist_ok=True)
    tmp = partials.create(destination)
    outer = _GROUP.get()
    group = _OutputGroup() if outer is None else None
    token = _GROUP.set(group) if group is not None else None
    handed = False
    try:
        staged = _Staged(tmp, destination, overwrite, partials.created_mode(tmp))
        yield tmp
        with tmp.open("rb") as written:  # on disk before it gets its name
            os.fsync(written.fileno())
        if outer is not None:
            outer.extras.append(staged)
            handed = True
        else:
            assert group is not None
            group.commit(staged)
    finally:
        if token is not None:
            _GROUP.reset(token)
        if group is not None:
            group.discard()
        if not handed:
            partials.discard(tmp)


def unsupported(path: Path, detected: str, supported: Sequence[str]) -> DocumentFormatError:
    return DocumentFormatError(
        f"{path.name}: {detected} is not a format dragoman translates; supported: {', '.join(supported)}"
    )
