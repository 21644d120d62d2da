"""The structure of an exported document: what the PDF handler's DOCX export is written from.

A document is a sequence of paragraphs (body text, Heading 1-3, bulleted or numbered list items), tables
(rows of cells, each cell a few paragraphs) and page breaks, with the text its pages repeat at the top and
bottom (running headers and footers, written once, in the section's header and footer). Paragraphs are
runs of text in one look (bold, italic, monospace code). No format library is imported here: the PDF
reading side (:mod:`dragoman.documents._pdf_docx_export`) builds it, :func:`dragoman.documents.docx.
write_docx_export` writes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class Run:
    """Text in one look."""

    text: str
    bold: bool = False
    italic: bool = False
    code: bool = False  # monospace: code, commands, paths


@dataclass(frozen=True)
class Paragraph:
    """A paragraph: body text (``heading`` 0), a heading of level 1-3, or a list item; ``align``: set
    centred or justified as in the source (None: the style's own, left or right to left)."""

    runs: tuple[Run, ...]
    heading: int = 0
    list_kind: Literal["bullet", "number"] | None = None
    align: Literal["center", "justify"] | None = None

    @property
    def text(self) -> str:
        return "".join(run.text for run in self.runs)


@dataclass(frozen=True)
class Table:
    """Rows of cells, every row as long as the widest (empty cells where the source had none); a cell is
    its paragraphs."""

    rows: tuple[tuple[tuple[Paragraph, ...], ...], ...]


@dataclass(frozen=True)
class PageBreak:
    """The source's next page starts here."""


Item = Paragraph | Table | PageBreak


@dataclass(frozen=True)
class Outline:
    """A document's structure: its items in reading order, and its running header and footer (each a
    line of text, empty when none; ``page_numbers``: the footer shows the page number)."""

    items: tuple[Item, ...]
    header: str = ""
    footer: str = ""
    page_numbers: bool = False
    counts: dict[str, int] = field(default_factory=dict, compare=False)  # headings, tables, list items
