"""PPTX: the text of every slide and its speaker notes translated in place, formatting kept.

Like DOCX (:mod:`dragoman.documents.docx`), the package is read as a checked zip container and written back
entry by entry; only the parts holding text are rewritten. Those are the slides and notes slides, and
the DrawingML parts they use: charts (titles, labels typed in the chart, and the category labels and
series names the chart shows, from its cached copy of the data) and SmartArt (its data and
the drawing PowerPoint shows). Slide masters and layouts are left alone (their text is prompt text that
does not show in a slideshow). In each part every DrawingML paragraph (``a:p``) is translated: shapes and
placeholders, text boxes, shapes inside groups at any depth, and table cells.

A paragraph is translated as a whole and mapped back onto its runs (``a:r``) by
:mod:`dragoman.documents._runs`: runs in the paragraph's dominant formatting are plain text, the others
(bold, a colour, a font, a hyperlink, which lives in the run properties) travel as numbered tags that
the engine keeps, and line breaks (``a:br``) and fields (``a:fld``: slide numbers, dates, kept as they
are) as ``<n/>`` markers that keep their place. The spelling language of a run (``lang``) is left out of
its formatting key and set to the target language on translated runs; right-to-left targets get
``rtl="1"`` paragraphs.
"""

from __future__ import annotations

import logging
import posixpath
import tempfile
import zipfile
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lxml import etree  # type: ignore[import-untyped]

from dragoman.documents import _zipcheck as zc
from dragoman.documents._ooxml_runs import OoxmlRunWriter
from dragoman.documents._runs import BARRIER, Paragraph, Piece, encode, translate_paragraphs, xml_safe
from dragoman.documents.base import DocumentReport, TextTranslator
from dragoman.errors import DragomanError
from dragoman.languages.catalogue import get, resolve
from dragoman.progress import ProgressCallback

log = logging.getLogger("dragoman.documents.pptx")

A_NS = "http://schemas.openxmlformats.org/drawingml/2006/main"
P_NS = "http://schemas.openxmlformats.org/presentationml/2006/main"
C_NS = "http://schemas.openxmlformats.org/drawingml/2006/chart"
_PML = "application/vnd.openxmlformats-officedocument.presentationml."
MAIN_TYPES = (
    _PML + "presentation.main+xml",
    _PML + "slideshow.main+xml",
    _PML + "template.main+xml",
    "application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml",
    "application/vnd.ms-powerpoint.slideshow.macroEnabled.main+xml",
    "application/vnd.ms-powerpoint.template.macroEnabled.main+xml",
)
#: DrawingML parts with text, shared by DOCX, PPTX and XLSX: content type -> what the report calls them.
DRAWINGML_KINDS = {
    "application/vnd.openxmlformats-officedocument.drawingml.chart+xml": "charts",
    "application/vnd.openxmlformats-officedocument.drawingml.diagramData+xml": "diagrams",
    "application/vnd.ms-office.drawingml.diagramDrawing+xml": "diagram_drawings",
}
PART_KINDS = {_PML + "slide+xml": "slides", _PML + "notesSlide+xml": "notes", **DRAWINGML_KINDS}


def a(tag: str) -> str:
    return f"{{{A_NS}}}{tag}"


def c(tag: str) -> str:
    return f"{{{C_NS}}}{tag}"


A_P, A_R, A_T, A_RPR, A_PPR = a("p"), a("r"), a("t"), a("rPr"), a("pPr")
#: Chart elements whose strings show as text: categories (``c:cat``, a scatter's ``c:xVal``) and series
#: names (``c:tx`` of a ``c:ser``; a title's ``c:tx`` holds ``a:p`` paragraphs, translated as such).
_CHART_TEXT_HOLDERS = (c("cat"), c("xVal"), c("tx"))
_CHART_STRING_CACHES = (c("strCache"), c("multiLvlStrCache"), c("strLit"))
#: Run-property attributes that do not show: left out of the formatting key.
_KEY_IGNORED = frozenset({"lang", "altLang", "dirty", "err", "smtClean", "smtId", "noProof", "bmk"})


@dataclass(frozen=True)
class Target:
    """What translated DrawingML runs and paragraphs are marked with."""

    lang: str | None  # BCP-47
    rtl: bool

    @classmethod
    def of(cls, target: str) -> Target:
        try:
            language = get(resolve(target))
        except DragomanError:
            return cls(None, False)
        return cls(language.bcp47, language.rtl)


def _rpr_key(rpr: etree._Element | None) -> Hashable:
    if rpr is None:
        return ()
    attrs = tuple(sorted((k, v) for k, v in rpr.attrib.items() if k not in _KEY_IGNORED))
    return attrs, tuple(etree.tostring(c, with_tail=False) for c in rpr if isinstance(c.tag, str))


def paragraph_pieces(p: etree._Element) -> tuple[list[Piece], list[etree._Element | None]]:
    """A DrawingML paragraph's pieces: each run's ``a:t``; line breaks, fields and anything else between
    runs (math) are barriers."""
    pieces: list[Piece] = []
    handles: list[etree._Element | None] = []
    for child in p:
        tag = child.tag
        if not isinstance(tag, str) or tag in (A_PPR, a("endParaRPr")):
            continue
        t = child.find(A_T) if tag == A_R else None
        if t is None:
            pieces.append(BARRIER)
            handles.append(None)
        else:
            pieces.append(Piece(_rpr_key(child.find(A_RPR)), t.text or ""))
            handles.append(t)
    return pieces, handles


class DrawingWriter(OoxmlRunWriter):
    """Writes a decoded DrawingML paragraph (a :class:`~dragoman.documents._runs.RunWriter`)."""

    run_tag, rpr_tag, t_tag = A_R, A_RPR, A_T

    def __init__(
        self, paragraph: etree._Element, handles: list[etree._Element | None], target: Target
    ) -> None:
        super().__init__(paragraph, handles)
        self.target = target

    def _mark(self, run: etree._Element, text: str) -> None:
        if not text.strip():
            return
        rpr = run.find(A_RPR)
        if self.target.lang and rpr is not None and rpr.get("lang") is not None:
            rpr.set("lang", self.target.lang)
        if self.target.rtl:
            ppr = self.paragraph.find(A_PPR)
            if ppr is None:
                ppr = self.paragraph.makeelement(A_PPR, {})
                self.paragraph.insert(0, ppr)
            ppr.set("rtl", "1")


class _ChartValueWriter:
    """Writes the translation of one chart string (a ``c:v``): a category or a series name."""

    def __init__(self, value: etree._Element) -> None:
        self.value = value

    def set_text(self, slot: int, text: str) -> None:
        self.value.text = xml_safe(text)

    def rebuild(self, slots: Sequence[int], runs: Sequence[tuple[int, str]]) -> bool:
        return False


def chart_strings(root: etree._Element) -> list[etree._Element]:
    """The ``c:v`` of a chart's category labels and series names: the copies of its data the chart
    shows (``c:strCache`` of a ``c:strRef``, ``c:multiLvlStrCache``, ``c:strLit``). Numbers (``c:val``,
    ``c:numCache``) are not among them."""
    found: list[etree._Element] = []
    for holder in root.iter(*_CHART_TEXT_HOLDERS):
        found.extend(
            v
            for cache in holder.iter(*_CHART_STRING_CACHES)
            for v in cache.iter(c("v"))
            if v.getparent() is not None and v.getparent().tag == c("pt")
        )
    return found


_PACKAGE_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/package"
_RELS_NS = "http://schemas.openxmlformats.org/package/2006/relationships"


def chart_workbooks(archive: zipfile.ZipFile, charts: Sequence[str], source_name: str) -> list[str]:
    """The embedded workbooks (``.xlsx``) that hold the data of the chart parts ``charts``."""
    found: list[str] = []
    names = set(archive.namelist())
    for chart in charts:
        folder, base = posixpath.split(chart)
        rels = posixpath.join(folder, "_rels", base + ".rels")
        if rels not in names:
            continue
        root = zc.parse_xml(zc.read_part(archive, rels, source_name), rels, source_name)
        for rel in root.iter(f"{{{_RELS_NS}}}Relationship"):
            target = rel.get("Target", "")
            if rel.get("Type") != _PACKAGE_REL or rel.get("TargetMode") == "External":
                continue
            name = posixpath.normpath(posixpath.join(folder, target)).lstrip("/")
            if name in names and name.lower().endswith(".xlsx") and name not in found:
                found.append(name)
    return found


def translate_workbooks(
    archive: zipfile.ZipFile, names: Sequence[str], translate: TextTranslator, source_name: str
) -> tuple[dict[str, bytes], list[str]]:
    """Each embedded chart workbook translated as an XLSX file (its category labels and series names,
    so that "Edit data" in the Office application shows what the chart shows), and warnings for those
    that could not be (they are kept as they were)."""
    from dragoman.documents.xlsx import XlsxHandler  # xlsx imports this module

    replaced: dict[str, bytes] = {}
    warnings: list[str] = []
    with tempfile.TemporaryDirectory(prefix="dragoman-chart-") as work:
        for index, name in enumerate(names):
            source = Path(work) / f"in{index}.xlsx"
            output = Path(work) / f"out{index}.xlsx"
            source.write_bytes(zc.read_part(archive, name, source_name))
            try:
                XlsxHandler().translate(source, output, translate, None)
            except DragomanError as exc:
                warnings.append(f"chart_data_kept: the data of a chart ({name}) was left as it was: {exc}")
                continue
            replaced[name] = output.read_bytes()
    return replaced, warnings


def drawingml_paragraphs(root: etree._Element, target: Target) -> list[Paragraph]:
    """Every DrawingML paragraph under ``root`` that has something to translate, and a chart's
    category labels and series names."""
    out: list[Paragraph] = []
    for p in root.iter(A_P):
        pieces, handles = paragraph_pieces(p)
        encoded = encode(pieces)
        if encoded.translatable:
            out.append(Paragraph(encoded, DrawingWriter(p, handles, target)))
    for value in chart_strings(root):
        encoded = encode([Piece((), value.text or "")])
        if encoded.translatable:
            out.append(Paragraph(encoded, _ChartValueWriter(value)))
    return out


def _count(roots: Sequence[tuple[str, etree._Element]]) -> dict[str, int]:
    counts = {"slides": 0, "notes": 0, "shapes": 0, "groups": 0, "tables": 0, "cells": 0, "paragraphs": 0}
    for kind, root in roots:
        counts[kind] = counts.get(kind, 0) + 1
        counts["paragraphs"] += sum(1 for _ in root.iter(A_P))
        if kind == "slides":
            counts["shapes"] += sum(1 for _ in root.iter(f"{{{P_NS}}}sp"))
            counts["groups"] += sum(1 for _ in root.iter(f"{{{P_NS}}}grpSp"))
            counts["tables"] += sum(1 for _ in root.iter(a("tbl")))
            counts["cells"] += sum(1 for _ in root.iter(a("tc")))
    return counts


class PptxHandler:
    name = "pptx"
    suffixes: tuple[str, ...] = (".pptx", ".pptm", ".ppsx", ".ppsm", ".potx", ".potm")
    legacy_suffixes: tuple[str, ...] = (".ppt", ".pps", ".pot")

    def sniff(self, head: bytes, path: Path) -> bool:
        return zc.sniff_container(head, path, MAIN_TYPES, self.suffixes, self.legacy_suffixes)

    def translate(
        self, source: Path, output: Path, translate: TextTranslator, progress: ProgressCallback | None
    ) -> DocumentReport:
        target = Target.of(translate.target)
        with zc.open_zip(source, ".pptx") as archive:
            types = zc.content_types(archive, source.name)
            zc.main_part(archive, types, MAIN_TYPES, source.name, "PowerPoint presentation", ".pptx")
            order = list(PART_KINDS)
            names = sorted(
                (n for n, t in types.items() if t in PART_KINDS),
                key=lambda n: (order.index(types[n]), zc.natural_key(n)),
            )
            roots = {n: zc.parse_xml(zc.read_part(archive, n, source.name), n, source.name) for n in names}
            paragraphs = {n: drawingml_paragraphs(root, target) for n, root in roots.items()}
            counts = _count([(PART_KINDS[types[n]], root) for n, root in roots.items()])
            todo = [p for ps in paragraphs.values() for p in ps]
            if progress is not None:
                progress(0, 1, f"translating {len(todo)} paragraphs")
            stats = translate_paragraphs(todo, translate)
            replaced = {n: zc.serialize_xml(roots[n]) for n, ps in paragraphs.items() if ps}
            charts = [n for n in names if PART_KINDS[types[n]] == "charts"]
            workbooks, chart_warnings = translate_workbooks(
                archive, chart_workbooks(archive, charts, source.name), translate, source.name
            )
            replaced.update(workbooks)
            zc.rewrite_zip(archive, output, replaced, source.name)
        report = DocumentReport(
            segments=stats.segments,
            characters=stats.characters,
            pages=counts["slides"],
            extracted_text="\n".join(stats.sources),
            translated_text="\n".join(stats.translations),
            counts=counts,
        )
        if stats.approximate:
            report.warnings.append(
                f"formatting_approximate: in {stats.approximate} paragraph(s) the translation lost the tags "
                "that mark inline formatting; their text is in the paragraph's main formatting. Check them "
                "in the output"
            )
        report.warnings.extend(chart_warnings)
        log.debug("pptx %s: %s", source.name, counts)
        return report
