"""XLSX: the text of string cells translated in place; numbers, formulas, sheet names, styles untouched.

Like DOCX (:mod:`dragoman.documents.docx`), the workbook is read as a checked zip container and written
back entry by entry, so charts, images, pivot tables, macros and styles survive byte for byte (loading
and saving through openpyxl would drop some of them). What is translated:

- the shared strings (``xl/sharedStrings.xml``) that string cells use, each once however many cells
  show it, including rich text whose runs keep their fonts (mapped by :mod:`dragoman.documents._runs`);
- inline strings (``t="inlineStr"`` cells);
- cell comments, and text in drawings and charts (DrawingML paragraphs, as in PPTX).

Cells holding formulas or numbers (and the cached text results of formulas) are never touched, nor are
sheet names, defined names or the workbook structure. The header row and totals row of an Excel table
(``xl/tables/*.xml``) stay as they are, because the table's column names must match them and formulas
refer to them (``Table1[Price]``); a shared string that such a cell uses is kept everywhere.
"""

from __future__ import annotations

import logging
import posixpath
import re
import zipfile
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lxml import etree  # type: ignore[import-untyped]

from dragoman.documents import _zipcheck as zc
from dragoman.documents._runs import Paragraph, Piece, encode, translate_paragraphs, xml_safe
from dragoman.documents.base import DocumentReport, TextTranslator
from dragoman.documents.pptx import DRAWINGML_KINDS, Target, drawingml_paragraphs
from dragoman.progress import ProgressCallback

log = logging.getLogger("dragoman.documents.xlsx")

S_NS = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
REL_NS = "http://schemas.openxmlformats.org/package/2006/relationships"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
_SML = "application/vnd.openxmlformats-officedocument.spreadsheetml."
MAIN_TYPES = (
    _SML + "sheet.main+xml",
    _SML + "template.main+xml",
    "application/vnd.ms-excel.sheet.macroEnabled.main+xml",
    "application/vnd.ms-excel.template.macroEnabled.main+xml",
)
WORKSHEET = _SML + "worksheet+xml"
SHARED_STRINGS = _SML + "sharedStrings+xml"
COMMENTS = _SML + "comments+xml"
TABLE = _SML + "table+xml"
DRAWING = "application/vnd.openxmlformats-officedocument.drawing+xml"
_CELL_REF = re.compile(r"\$?([A-Z]{1,3})\$?(\d{1,7})")


def s(tag: str) -> str:
    return f"{{{S_NS}}}{tag}"


def _cell(ref: str) -> tuple[int, int] | None:
    """``"B3"`` -> (column 2, row 3)."""
    m = _CELL_REF.fullmatch(ref.upper())
    if m is None:
        return None
    column = 0
    for letter in m.group(1):
        column = column * 26 + ord(letter) - 64
    return column, int(m.group(2))


def _rpr_key(rpr: etree._Element | None) -> Hashable:
    if rpr is None:
        return ()
    return tuple((c.tag, tuple(sorted(c.attrib.items()))) for c in rpr if isinstance(c.tag, str))


class RichTextWriter:
    """Writes a decoded rich-text string (``si``, ``is`` or a comment's ``text``)."""

    def __init__(self, holder: etree._Element, handles: list[etree._Element]) -> None:
        self.holder = holder
        self.handles = handles

    def set_text(self, slot: int, text: str) -> None:
        _set_t(self.handles[slot], text)

    def rebuild(self, slots: Sequence[int], runs: Sequence[tuple[int, str]]) -> bool:
        old = [self.handles[i].getparent() for i in slots]
        for run in old:
            if run is None or run.tag != s("r") or run.getparent() is not self.holder:
                return False
            if [c.tag for c in run if isinstance(c.tag, str) and c.tag != s("rPr")] != [s("t")]:
                return False
        new = []
        for slot, text in runs:
            exemplar = self.handles[slot].getparent()
            run = exemplar.makeelement(s("r"), {})
            rpr = exemplar.find(s("rPr"))
            if rpr is not None:
                run.append(etree.fromstring(etree.tostring(rpr)))
            t = run.makeelement(s("t"), {})
            run.append(t)
            _set_t(t, text)
            new.append(run)
        index = self.holder.index(old[0])
        for run in old:
            self.holder.remove(run)
        for offset, run in enumerate(new):
            self.holder.insert(index + offset, run)
        return True


def _set_t(t: etree._Element, text: str) -> None:
    text = xml_safe(text)
    t.text = text
    if text != text.strip():
        t.set(XML_SPACE, "preserve")


def rich_text(holder: etree._Element) -> Paragraph | None:
    """The paragraph of a rich-text holder: its own ``t``, or its runs ``r`` (phonetic runs skipped)."""
    pieces: list[Piece] = []
    handles: list[etree._Element] = []
    for child in holder:
        if child.tag == s("t"):
            pieces.append(Piece((), child.text or ""))
            handles.append(child)
        elif child.tag == s("r"):
            t = child.find(s("t"))
            if t is not None:
                pieces.append(Piece(_rpr_key(child.find(s("rPr"))), t.text or ""))
                handles.append(t)
    encoded = encode(pieces)
    return Paragraph(encoded, RichTextWriter(holder, handles)) if encoded.translatable else None


@dataclass(frozen=True)
class _Frozen:
    """Rows of cells that must keep their text (table headers and totals)."""

    first_column: int
    last_column: int
    row: int

    def holds(self, cell: tuple[int, int]) -> bool:
        return self.first_column <= cell[0] <= self.last_column and cell[1] == self.row


def _related(archive: zipfile.ZipFile, part: str, kind: str, source_name: str) -> list[str]:
    """Part names related from ``part`` by relationships whose type ends in ``/kind``."""
    folder, name = posixpath.split(part)
    rels = posixpath.join(folder, "_rels", name + ".rels")
    if rels not in archive.namelist():
        return []
    root = zc.parse_xml(zc.read_part(archive, rels, source_name), rels, source_name)
    out = []
    for rel in root.iter(f"{{{REL_NS}}}Relationship"):
        if rel.get("TargetMode") == "External" or not (rel.get("Type") or "").endswith("/" + kind):
            continue
        target = rel.get("Target") or ""
        out.append(
            target.lstrip("/")
            if target.startswith("/")
            else posixpath.normpath(posixpath.join(folder, target))
        )
    return out


def _table_rows(archive: zipfile.ZipFile, sheet: str, source_name: str) -> tuple[int, list[_Frozen]]:
    """The number of tables on a sheet, and their header and totals rows."""
    frozen: list[_Frozen] = []
    tables = [t for t in _related(archive, sheet, "table", source_name) if t in archive.namelist()]
    for table in tables:
        root = zc.parse_xml(zc.read_part(archive, table, source_name), table, source_name)
        first, _, last = (root.get("ref") or "").partition(":")
        start, end = _cell(first), _cell(last or first)
        if start is None or end is None:
            continue
        rows = []
        if root.get("headerRowCount", "1") != "0":
            rows.append(start[1])
        if int(root.get("totalsRowCount", "0") or 0) > 0:
            rows.append(end[1])
        frozen.extend(_Frozen(start[0], end[0], row) for row in rows)
    return len(tables), frozen


class _Workbook:
    """The translatable texts of one workbook, part by part, found in its parsed parts."""

    def __init__(self, archive: zipfile.ZipFile, source_name: str) -> None:
        self.archive = archive
        self.source_name = source_name
        self.roots: dict[str, etree._Element] = {}
        self.todo: dict[str, list[Paragraph]] = {}
        self.used: set[int] = set()  # shared strings that cells show
        self.kept: set[int] = set()  # shared strings that table headers show
        self.counts = {"sheets": 0, "string_cells": 0, "shared_strings": 0, "tables": 0, "comments": 0}

    def _parse(self, part: str) -> etree._Element:
        root = self.roots[part] = zc.parse_xml(
            zc.read_part(self.archive, part, self.source_name), part, self.source_name
        )
        self.todo[part] = []
        return root

    def sheet(self, part: str) -> None:
        tables, frozen = _table_rows(self.archive, part, self.source_name)
        self.counts["sheets"] += 1
        self.counts["tables"] += tables
        for cell in self._parse(part).iter(s("c")):
            kind = cell.get("t")
            if kind not in ("s", "inlineStr") or cell.find(s("f")) is not None:
                continue
            self.counts["string_cells"] += 1
            place = _cell(cell.get("r") or "")
            header = place is not None and any(f.holds(place) for f in frozen)
            if kind == "s":
                value = (cell.findtext(s("v")) or "").strip()
                if value.isdigit():
                    (self.kept if header else self.used).add(int(value))
                continue
            holder = cell.find(s("is"))
            if holder is not None and not header and (paragraph := rich_text(holder)) is not None:
                self.todo[part].append(paragraph)

    def shared_strings(self, part: str) -> None:
        for index, si in enumerate(self._parse(part).iter(s("si"))):
            self.counts["shared_strings"] += 1
            if index in self.used and index not in self.kept and (paragraph := rich_text(si)) is not None:
                self.todo[part].append(paragraph)

    def comments(self, part: str) -> None:
        for comment in self._parse(part).iter(s("comment")):
            self.counts["comments"] += 1
            text = comment.find(s("text"))
            if text is not None and (paragraph := rich_text(text)) is not None:
                self.todo[part].append(paragraph)

    def drawing(self, part: str, target: Target) -> None:
        self.todo[part] = drawingml_paragraphs(self._parse(part), target)


class XlsxHandler:
    name = "xlsx"
    suffixes: tuple[str, ...] = (".xlsx", ".xlsm", ".xltx", ".xltm")
    legacy_suffixes: tuple[str, ...] = (".xls", ".xlt")

    def sniff(self, head: bytes, path: Path) -> bool:
        return zc.sniff_container(head, path, MAIN_TYPES, self.suffixes, self.legacy_suffixes)

    def translate(
        self, source: Path, output: Path, translate: TextTranslator, progress: ProgressCallback | None
    ) -> DocumentReport:
        with zc.open_zip(source, ".xlsx") as archive:
            types = zc.content_types(archive, source.name)
            zc.main_part(archive, types, MAIN_TYPES, source.name, "Excel workbook", ".xlsx")
            book = _Workbook(archive, source.name)
            names = sorted(types, key=zc.natural_key)
            for part in names:  # sheets first: they say which shared strings are shown, and where
                if types[part] == WORKSHEET:
                    book.sheet(part)
            target = Target.of(translate.target)
            for part in names:
                if types[part] == SHARED_STRINGS:
                    book.shared_strings(part)
                elif types[part] == COMMENTS:
                    book.comments(part)
                elif types[part] in DRAWINGML_KINDS or types[part] == DRAWING:
                    book.drawing(part, target)
            paragraphs = [p for ps in book.todo.values() for p in ps]
            if progress is not None:
                progress(0, 1, f"translating {len(paragraphs)} texts")
            stats = translate_paragraphs(paragraphs, translate)
            replaced = {part: zc.serialize_xml(book.roots[part]) for part, ps in book.todo.items() if ps}
            zc.rewrite_zip(archive, output, replaced, source.name)
        report = DocumentReport(
            segments=stats.segments,
            characters=stats.characters,
            pages=book.counts["sheets"],
            extracted_text="\n".join(stats.sources),
            translated_text="\n".join(stats.translations),
            counts=book.counts,
        )
        if book.kept:
            report.warnings.append(
                f"table_headers_kept: {len(book.kept)} table header or totals text(s) were left "
                "untranslated, because Excel tables and formulas refer to their columns by these names"
            )
        if stats.approximate:
            report.warnings.append(
                f"formatting_approximate: in {stats.approximate} rich-text cell(s) the translation lost the "
                "tags that mark inline formatting; their text is in the cell's main formatting"
            )
        log.debug("xlsx %s: %s", source.name, book.counts)
        return report
