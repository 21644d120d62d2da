"""Bounds on what one document may make a handler do (issue 9, item 2): pages, pages to OCR, markup parsed.

A file within the size limit can still hold hours of OCR (thousands of blank scanned pages) or gigabytes of
parsed markup (millions of ``<w:p/>``, a few bytes each, compressed within a zip's bounds). These checks run
before the work they bound, on what is cheap to know (a page count; the bytes of a part and its ``<``
count, read at C speed before lxml builds a tree) and refuse with :class:`~dragoman.errors.DocumentTooLarge`
(413), whose message says what the bound is and what to do. The values are in :mod:`dragoman.limits`.
"""

from __future__ import annotations

from pathlib import Path

from dragoman.errors import DocumentTooLarge

# Re-exported: the checks read them here, so a test may lower one for this module alone.
from dragoman.limits import MAX_MARKUP_BYTES as MAX_MARKUP_BYTES
from dragoman.limits import MAX_MARKUP_NODES as MAX_MARKUP_NODES
from dragoman.limits import MAX_OCR_PAGES as MAX_OCR_PAGES
from dragoman.limits import MAX_PDF_PAGES as MAX_PDF_PAGES


def check_pages(pages: int, name: str) -> None:
    """Refuse a PDF of more than :data:`~dragoman.limits.MAX_PDF_PAGES` pages."""
    if pages > MAX_PDF_PAGES:
        raise DocumentTooLarge(
            f"{name} has {pages} pages; the limit is {MAX_PDF_PAGES} pages per PDF. Split it (e.g. `qpdf "
            f"--split-pages={MAX_PDF_PAGES} {name} part-%d.pdf`) and translate the parts"
        )


def check_ocr_pages(scans: int, name: str) -> None:
    """Refuse a PDF with more than :data:`~dragoman.limits.MAX_OCR_PAGES` scanned pages to read by OCR."""
    if scans > MAX_OCR_PAGES:
        raise DocumentTooLarge(
            f"{name} has {scans} pages to read by OCR (scans: images without a text layer); the limit is "
            f"{MAX_OCR_PAGES} per document. Split it into parts of at most {MAX_OCR_PAGES} scanned pages, "
            "or remove blank scans"
        )


class MarkupBudget:
    """The markup one document may parse: bytes and tags (``<``) summed over the parts it reads."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.bytes = 0
        self.nodes = 0

    def check_size(self, size: int, part: str) -> None:
        """Refuse before reading a part of ``size`` bytes that would pass the byte bound."""
        if self.bytes + size > MAX_MARKUP_BYTES:
            raise DocumentTooLarge(
                f"{self.name}: {_where(part)}{(self.bytes + size) / 1e6:.0f} MB of markup to parse; the "
                f"limit is {MAX_MARKUP_BYTES / 1e6:.0f} MB per document. Split the document into smaller ones"
            )

    def charge(self, data: bytes, part: str) -> None:
        """Count ``data`` (one part, or a whole HTML/XLIFF file) against the bounds, before it is parsed."""
        self.check_size(len(data), part)
        nodes = data.count(b"<")
        if self.nodes + nodes > MAX_MARKUP_NODES:
            raise DocumentTooLarge(
                f"{self.name}: {_where(part)}{self.nodes + nodes:,} markup tags to parse; the limit is "
                f"{MAX_MARKUP_NODES:,} per document. Split the document into smaller ones"
            )
        self.bytes += len(data)
        self.nodes += nodes


def check_markup(data: bytes, name: str) -> None:
    """Refuse one markup file (HTML, XLIFF) over the bounds, before it is parsed."""
    MarkupBudget(name).charge(data, "")


def check_markup_file(path: Path) -> None:
    """:func:`check_markup` for a file not read yet: its size first, then its tags."""
    budget = MarkupBudget(path.name)
    budget.check_size(path.stat().st_size, "")
    budget.charge(path.read_bytes(), "")


def _where(part: str) -> str:
    return f"up to part {part}, " if part else ""
