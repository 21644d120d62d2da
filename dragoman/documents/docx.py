"""DOCX: every paragraph of the document translated in place, formatting kept.

The package is read as a zip container (:mod:`dragoman.documents._zipcheck`: zip bombs refused before
anything is decompressed, XML parsed without DTDs or entities) and written back entry by entry, so
everything that is not translated (images, styles, numbering, settings, custom XML, unknown parts) is
copied byte for byte. The parts translated are the main document, every header and footer (default,
first-page and even-page headers are separate parts), footnotes, endnotes and comments, found through
``[Content_Types].xml``. In each, every ``w:p`` is a paragraph: body text, table cells at any depth,
content controls, and text boxes (``w:txbxContent``, in both the DrawingML and the VML fallback copy).

A paragraph is translated as a whole and mapped back onto its runs by :mod:`dragoman.documents._runs`:
runs in the paragraph's dominant formatting are plain text, the others (bold, italic, a colour, a font,
a hyperlink, a tracked insertion) travel as numbered tags ``<3>...</3>`` that the engine's placeholder
protection keeps, and tabs, breaks, drawings, fields and note references inside the paragraph travel as
``<4/>``, so they keep their place between the translated words. Only ``w:t`` text is replaced: runs
holding anything else are never emptied of it, and runs are only replaced (cloned from their
neighbours' formatting) when the translation reorders formatted words and the runs hold text alone.
A run's formatting key is its ``w:rPr`` without the spelling language, plus the container it sits in,
so a hyperlink stays a hyperlink. Field codes stay; the text a field shows is translated for
``HYPERLINK``, ``TOC``, ``REF``, ``MACROBUTTON`` and ``QUOTE`` fields and kept for the others (page
numbers, dates, merge fields). Deleted text of tracked changes, math and drawings are left alone.
Right-to-left targets get ``w:bidi`` paragraphs and ``w:rtl`` runs, and complex-script targets get the
complex-script copies of bold, italic and size (``w:bCs``, ``w:iCs``, ``w:szCs``) that Word uses for them.

:func:`write_docx_export` writes plain paragraphs as a new DOCX (the PDF handler's DOCX export).
"""

from __future__ import annotations

import itertools
import logging
import re
import zipfile
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lxml import etree  # type: ignore[import-untyped]

from dragoman.documents import _zipcheck as zc
from dragoman.documents._export import Outline, PageBreak, Table
from dragoman.documents._export import Paragraph as ExportParagraph
from dragoman.documents._export import Run as ExportRun
from dragoman.documents._ooxml_runs import OoxmlRunWriter
from dragoman.documents._runs import BARRIER, Paragraph, Piece, encode, translate_paragraphs, xml_safe
from dragoman.documents.base import DocumentReport, TextTranslator
from dragoman.documents.pptx import (
    DRAWINGML_KINDS,
    Target,
    chart_workbooks,
    drawingml_paragraphs,
    translate_workbooks,
)
from dragoman.errors import DragomanError
from dragoman.languages.catalogue import get, resolve
from dragoman.progress import ProgressCallback

log = logging.getLogger("dragoman.documents.docx")

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
MC_NS = "http://schemas.openxmlformats.org/markup-compatibility/2006"
M_NS = "http://schemas.openxmlformats.org/officeDocument/2006/math"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
_WML = "application/vnd.openxmlformats-officedocument.wordprocessingml."
MAIN_TYPES = (
    _WML + "document.main+xml",
    _WML + "template.main+xml",
    "application/vnd.ms-word.document.macroEnabled.main+xml",
    "application/vnd.ms-word.template.macroEnabledTemplate.main+xml",
)
#: Translated parts, in the order they are read: content type -> what the report calls them.
PART_KINDS = {
    **dict.fromkeys(MAIN_TYPES, "document"),
    _WML + "header+xml": "headers",
    _WML + "footer+xml": "footers",
    _WML + "footnotes+xml": "footnotes",
    _WML + "endnotes+xml": "endnotes",
    _WML + "comments+xml": "comments",
}
STYLES = _WML + "styles+xml"
#: Fields whose shown text is words to translate; every other field's result is kept.
TRANSLATED_FIELDS = frozenset({"HYPERLINK", "TOC", "REF", "MACROBUTTON", "QUOTE"})
#: Scripts Word sets with the complex-script properties (bCs, iCs, szCs).
_COMPLEX = "Arab Hebr Syrc Thaa Nkoo Thai Laoo Khmr Mymr Tibt Deva Beng Guru Gujr Orya Taml Telu Knda Mlym"
COMPLEX_SCRIPTS = frozenset([*_COMPLEX.split(), "Sinh"])
EAST_ASIAN_SCRIPTS = frozenset({"Hans", "Hant", "Jpan", "Kore", "Hang"})
#: Monospace font families: a run set in one is code, kept as it is (issue 11, item 1).
MONOSPACE_FONT = re.compile(
    r"mono(?!type)|courier|consolas|menlo|monaco|lucida console|lucida sans typewriter|andale|inconsolata|"
    r"\bcode\b|fixedsys|\bterminal\b|ocr[- ]?a|letter gothic|prestige elite|typewriter|\bhack\b|\btt\b",
    re.IGNORECASE,
)
#: Character and paragraph styles (by id or name) that mark code: HTML Code, HTML Preformatted,
#: HTML Keyboard, HTML Typewriter, Code, Verbatim, VerbatimChar and Source Code (pandoc), Macro Text.
CODE_STYLE = re.compile(
    r"code|verbatim|preformatted|keyboard|typewriter|monospace|macro ?text|listing",
    re.IGNORECASE,
)


def w(tag: str) -> str:
    return f"{{{W_NS}}}{tag}"


W_P, W_R, W_T, W_RPR, W_PPR = w("p"), w("r"), w("t"), w("rPr"), w("pPr")
#: Paragraph children whose runs are the paragraph's text (walked into).
_CONTAINERS = frozenset(
    w(t) for t in ("hyperlink", "ins", "moveTo", "smartTag", "customXml", "dir", "bdo", "fldSimple", "sdt")
)
#: Paragraph children that are not text: math is a barrier, the rest (properties, bookmarks, deletions,
#: comment ranges, proofing marks) is skipped.
_PARAGRAPH_BARRIERS = frozenset({f"{{{M_NS}}}oMath", f"{{{M_NS}}}oMathPara", f"{{{MC_NS}}}AlternateContent"})
#: Run children that neither carry text nor hold a place between words.
_RUN_SKIPPED = frozenset(
    w(t) for t in ("rPr", "lastRenderedPageBreak", "softHyphen", "delText", "delInstrText")
)
#: Run children that end a line inside a paragraph (an address block, a signature, a poem).
_LINE_BREAKS = frozenset({w("br"), w("cr")})
#: Run properties that do not show: left out of the formatting key.
_KEY_IGNORED = frozenset(w(t) for t in ("lang", "noProof", "rPrChange", "specVanish"))
_PPR_AFTER_BIDI = frozenset(
    w(t)
    for t in (
        "adjustRightInd snapToGrid spacing ind contextualSpacing mirrorIndents suppressOverlap jc "
        "textDirection textAlignment textboxTightWrap outlineLvl divId cnfStyle rPr sectPr pPrChange"
    ).split()
)
_RPR_ORDER = tuple(
    w(t)
    for t in (
        "rStyle rFonts b bCs i iCs caps smallCaps strike dstrike outline shadow emboss imprint noProof "
        "snapToGrid vanish webHidden color spacing w kern position sz szCs highlight u effect bdr shd "
        "fitText vertAlign rtl cs em lang eastAsianLayout specVanish oMath rPrChange"
    ).split()
)


@dataclass(frozen=True)
class _Script:
    rtl: bool
    complex: bool
    lang: str | None = None  # BCP-47 tag of the target
    lang_attr: str = "val"  # which w:lang attribute names it: val, eastAsia or bidi (complex scripts)

    @classmethod
    def of(cls, target: str) -> _Script:
        try:
            lang = get(resolve(target))
        except DragomanError:  # an unknown code: nothing to mark
            return cls(False, False)
        script = lang.flores.rsplit("_", 1)[-1]
        complex_ = lang.rtl or script in COMPLEX_SCRIPTS
        attr = "bidi" if complex_ else "eastAsia" if script in EAST_ASIAN_SCRIPTS else "val"
        return cls(lang.rtl, complex_, lang.bcp47, attr)

    def set_lang(self, lang: etree._Element | None) -> None:
        """Point a ``w:lang`` element at the target language (spelling and font choice)."""
        if lang is not None and self.lang is not None:
            lang.set(w(self.lang_attr), self.lang)


def _insert_ordered(parent: etree._Element, child: etree._Element, order: Sequence[str]) -> None:
    """Insert ``child`` before the first existing child that comes after it in ``order``."""
    position = order.index(child.tag) if child.tag in order else len(order)
    for index, existing in enumerate(parent):
        if existing.tag in order and order.index(existing.tag) > position:
            parent.insert(index, child)
            return
    parent.append(child)


def _ensure_rpr(run: etree._Element) -> etree._Element:
    rpr = run.find(W_RPR)
    if rpr is None:
        rpr = run.makeelement(W_RPR, {})
        run.insert(0, rpr)
    return rpr


def _mark_run(run: etree._Element, script: _Script) -> None:
    rpr = _ensure_rpr(run)
    for plain, complex_ in (("b", "bCs"), ("i", "iCs"), ("sz", "szCs")):
        source = rpr.find(w(plain))
        if source is not None and rpr.find(w(complex_)) is None:
            _insert_ordered(rpr, rpr.makeelement(w(complex_), dict(source.attrib)), _RPR_ORDER)
    if script.rtl and rpr.find(w("rtl")) is None:
        _insert_ordered(rpr, rpr.makeelement(w("rtl"), {}), _RPR_ORDER)


def _mark_paragraph(paragraph: etree._Element) -> None:
    ppr = paragraph.find(W_PPR)
    if ppr is None:
        ppr = paragraph.makeelement(W_PPR, {})
        paragraph.insert(0, ppr)
    if ppr.find(w("bidi")) is None:
        bidi = ppr.makeelement(w("bidi"), {})
        for index, existing in enumerate(ppr):
            if existing.tag in _PPR_AFTER_BIDI:
                ppr.insert(index, bidi)
                break
        else:
            ppr.append(bidi)


def _set_t(t: etree._Element, text: str) -> None:
    text = xml_safe(text)
    t.text = text
    if text != text.strip() or "  " in text:
        t.set(XML_SPACE, "preserve")


def _rpr_key(rpr: etree._Element | None) -> Hashable:
    if rpr is None:
        return ()
    return tuple(
        (child.tag, tuple(sorted(child.attrib.items())), etree.tostring(child) if len(child) else b"")
        for child in rpr
        if isinstance(child.tag, str) and child.tag not in _KEY_IGNORED
    )


def _style_of(properties: etree._Element | None, tag: str) -> str | None:
    """The style id a ``w:pPr`` (``pStyle``) or ``w:rPr`` (``rStyle``) names, if any."""
    if properties is None:
        return None
    style = properties.find(w(tag))
    return None if style is None else style.get(w("val"))


def _monospace(fonts: etree._Element | None) -> bool:
    """Whether a ``w:rFonts`` sets the run's Latin text in a monospace family."""
    if fonts is None:
        return False
    names = [fonts.get(w(a)) for a in ("ascii", "hAnsi")]
    return any(name and MONOSPACE_FONT.search(name) for name in names)


def _code_styles(styles: etree._Element | None) -> frozenset[str]:
    """The ids of the styles that mark code: named like code (HTML Code, Verbatim, Source Code) or set
    in a monospace font, and the styles based on them."""
    if styles is None:
        return frozenset()
    code: set[str] = set()
    based: dict[str, str] = {}
    for style in styles.iter(w("style")):
        sid = style.get(w("styleId"))
        if not sid or style.get(w("type")) not in ("character", "paragraph"):
            continue
        name_el = style.find(w("name"))
        name = name_el.get(w("val"), "") if name_el is not None else ""
        rpr = style.find(W_RPR)
        if CODE_STYLE.search(sid) or CODE_STYLE.search(name):
            code.add(sid)
        elif rpr is not None and _monospace(rpr.find(w("rFonts"))):
            code.add(sid)
        parent = _style_of(style, "basedOn")
        if parent:
            based[sid] = parent
    for sid in based:  # a style based on a code style is code too (a bounded walk up its chain)
        seen, current = 0, sid
        while current in based and current not in code and seen < 16:
            current, seen = based[current], seen + 1
        if current in code:
            code.add(sid)
    return frozenset(code)


@dataclass
class _Field:
    instr: str = ""
    result: bool = False

    @property
    def frozen(self) -> bool:
        """Whether the text shown by this field is kept as it is."""
        if not self.result:
            return True
        words = self.instr.split()
        return not words or words[0].upper() not in TRANSLATED_FIELDS


class _Walker:
    """Collects a paragraph's pieces in reading order; field state carries across paragraphs."""

    def __init__(self, code_styles: frozenset[str] = frozenset()) -> None:
        self.fields: list[_Field] = []
        self.pieces: list[Piece] = []
        self.handles: list[etree._Element | None] = []
        #: Indices in ``pieces`` of the barriers that are line breaks (``w:br``, ``w:cr``).
        self.breaks: list[int] = []
        self.containers = itertools.count(1)
        #: Style ids that mark code (see :func:`_code_styles`); text in them is kept, in its place.
        self.code_styles = code_styles
        self.code_paragraph = False

    def paragraph(self, p: etree._Element) -> tuple[list[Piece], list[etree._Element | None]]:
        self.pieces, self.handles, self.breaks = [], [], []
        self.code_paragraph = _style_of(p.find(W_PPR), "pStyle") in self.code_styles
        self._walk(p, ())
        return self.pieces, self.handles

    def _is_code(self, run: etree._Element) -> bool:
        """A run in a code paragraph, in a code character style or set in a monospace font."""
        if self.code_paragraph:
            return True
        rpr = run.find(W_RPR)
        if rpr is None:
            return False
        return _style_of(rpr, "rStyle") in self.code_styles or _monospace(rpr.find(w("rFonts")))

    def _barrier(self) -> None:
        self.pieces.append(BARRIER)
        self.handles.append(None)

    def _walk(self, parent: etree._Element, path: tuple[int, ...]) -> None:
        for child in parent:
            tag = child.tag
            if tag == W_R:
                self._run(child, path)
            elif tag in _CONTAINERS:
                inner = path + (next(self.containers),)
                if tag == w("sdt"):
                    content = child.find(w("sdtContent"))
                    if content is not None:
                        self._walk(content, inner)
                elif tag == w("fldSimple"):
                    field_ = _Field(child.get(w("instr"), ""), result=True)
                    if field_.frozen:
                        self._barrier()
                    else:
                        self._walk(child, inner)
                else:
                    self._walk(child, inner)
            elif tag in _PARAGRAPH_BARRIERS:
                self._barrier()

    def _run(self, run: etree._Element, path: tuple[int, ...]) -> None:
        key: Hashable | None = None
        code = self._is_code(run)  # code is kept as it is: a barrier, like a frozen field's text
        for child in run:
            tag = child.tag
            if tag in _RUN_SKIPPED or not isinstance(tag, str):
                continue
            if tag == W_T and not code and not (self.fields and self.fields[-1].frozen):
                if key is None:
                    key = (path, _rpr_key(run.find(W_RPR)))
                self.pieces.append(Piece(key, child.text or ""))
                self.handles.append(child)
                continue
            if tag == w("fldChar"):
                kind = child.get(w("fldCharType"))
                if kind == "begin":
                    self.fields.append(_Field())
                elif kind == "separate" and self.fields:
                    self.fields[-1].result = True
                elif kind == "end" and self.fields:
                    self.fields.pop()
            elif tag == w("instrText") and self.fields:
                self.fields[-1].instr += child.text or ""
            elif tag in _LINE_BREAKS:
                self.breaks.append(len(self.pieces))
            self._barrier()


class _Writer(OoxmlRunWriter):
    """Writes a decoded paragraph into its ``w:t`` elements (a ``_runs.RunWriter``)."""

    run_tag, rpr_tag, t_tag = W_R, W_RPR, W_T

    def __init__(
        self, paragraph: etree._Element, handles: list[etree._Element | None], script: _Script
    ) -> None:
        super().__init__(paragraph, handles)
        self.script = script

    def _write(self, t: etree._Element, text: str) -> None:
        _set_t(t, text)

    def _mark(self, run: etree._Element, text: str) -> None:
        if not text.strip():
            return
        self.script.set_lang(run.find(f"{W_RPR}/{w('lang')}"))
        if self.script.complex:
            _mark_run(run, self.script)
            if self.script.rtl:
                _mark_paragraph(self.paragraph)

    def _container(self, first_run: etree._Element) -> etree._Element | None:
        # Runs may sit in a hyperlink or a tracked insertion inside the paragraph.
        parent: etree._Element | None = first_run.getparent()
        return parent


@dataclass
class _Part:
    name: str
    kind: str
    root: etree._Element
    paragraphs: list[Paragraph] = field(default_factory=list)


def _lines(
    pieces: list[Piece], handles: list[etree._Element | None], breaks: Sequence[int]
) -> Iterator[tuple[list[Piece], list[etree._Element | None]]]:
    """A paragraph cut at its line breaks into texts translated apart, so that no word moves from one
    line to another (the lines of an address block, a signature, a table heading). A break followed by a
    lowercase letter continues a sentence broken by hand, and is kept inside one text."""
    following = [""] * (len(pieces) + 1)  # the first letter of text after each piece, in one pass
    for i in range(len(pieces) - 1, -1, -1):
        text = pieces[i].text.lstrip()
        following[i] = text[:1] if text else following[i + 1]
    start = 0
    for index in breaks:
        if following[index + 1].islower():
            continue
        yield pieces[start : index + 1], handles[start : index + 1]
        start = index + 1
    yield pieces[start:], handles[start:]


def _count(parts: Sequence[_Part]) -> dict[str, int]:
    counts: dict[str, int] = {"paragraphs": 0, "tables": 0, "cells": 0, "text_boxes": 0, "hyperlinks": 0}
    fallback = f"{{{MC_NS}}}Fallback"
    for part in parts:
        if part.kind != "document":
            counts[part.kind] = counts.get(part.kind, 0) + 1
        duplicates = [e for fb in part.root.iter(fallback) for e in fb.iter(W_P, w("txbxContent"))]
        kept = {id(e) for e in duplicates}  # the list keeps these elements' proxies (and ids) alive
        counts["paragraphs"] += sum(1 for p in part.root.iter(W_P) if id(p) not in kept)
        counts["text_boxes"] += sum(1 for b in part.root.iter(w("txbxContent")) if id(b) not in kept)
        counts["tables"] += sum(1 for _ in part.root.iter(w("tbl")))
        counts["cells"] += sum(1 for _ in part.root.iter(w("tc")))
        counts["hyperlinks"] += sum(1 for _ in part.root.iter(w("hyperlink")))
    return counts


def _default_language(archive: zipfile.ZipFile, name: str, source_name: str, script: _Script) -> bytes:
    """The styles part with the document's default language set to the target."""
    root = zc.parse_xml(zc.read_part(archive, name, source_name), name, source_name)
    script.set_lang(root.find(f"{w('docDefaults')}/{w('rPrDefault')}/{W_RPR}/{w('lang')}"))
    return zc.serialize_xml(root)


class DocxHandler:
    name = "docx"
    suffixes: tuple[str, ...] = (".docx", ".docm", ".dotx", ".dotm")
    legacy_suffixes: tuple[str, ...] = (".doc", ".dot")

    def sniff(self, head: bytes, path: Path) -> bool:
        return zc.sniff_container(head, path, MAIN_TYPES, self.suffixes, self.legacy_suffixes)

    def translate(
        self, source: Path, output: Path, translate: TextTranslator, progress: ProgressCallback | None
    ) -> DocumentReport:
        script = _Script.of(translate.target)
        with zc.open_zip(source, ".docx") as archive:
            types = zc.content_types(archive, source.name)
            kinds = {**PART_KINDS, **DRAWINGML_KINDS}
            order = list(kinds)
            names = sorted(
                (n for n, t in types.items() if t in kinds),
                key=lambda n: (order.index(types[n]), zc.natural_key(n)),
            )
            zc.main_part(archive, types, MAIN_TYPES, source.name, "Word document", ".docx")
            parts = []
            for name in names:
                root = zc.parse_xml(zc.read_part(archive, name, source.name), name, source.name)
                parts.append(_Part(name, kinds[types[name]], root))
            drawing = Target.of(translate.target)
            styles = next((n for n, t in types.items() if t == STYLES), None)
            code_styles = _code_styles(
                zc.parse_xml(zc.read_part(archive, styles, source.name), styles, source.name)
                if styles is not None and styles in archive.namelist()
                else None
            )
            for part in parts:
                if part.kind in DRAWINGML_KINDS.values():
                    part.paragraphs = drawingml_paragraphs(part.root, drawing)
                    continue
                walker = _Walker(code_styles)  # fields may span paragraphs, never parts
                for p in part.root.iter(W_P):
                    pieces, handles = walker.paragraph(p)
                    for line_pieces, line_handles in _lines(pieces, handles, walker.breaks):
                        encoded = encode(line_pieces)
                        if encoded.translatable:
                            part.paragraphs.append(Paragraph(encoded, _Writer(p, line_handles, script)))
            counts = _count(parts)
            if progress is not None:
                progress(0, 1, f"translating {sum(len(p.paragraphs) for p in parts)} paragraphs")
            stats = translate_paragraphs([p for part in parts for p in part.paragraphs], translate)
            replaced = {part.name: zc.serialize_xml(part.root) for part in parts if part.paragraphs}
            charts = [part.name for part in parts if part.kind == "charts"]
            workbooks, chart_warnings = translate_workbooks(
                archive, chart_workbooks(archive, charts, source.name), translate, source.name
            )
            replaced.update(workbooks)
            if stats.segments and styles is not None and script.lang is not None:
                replaced[styles] = _default_language(archive, styles, source.name, script)
            zc.rewrite_zip(archive, output, replaced, source.name)
        report = DocumentReport(
            segments=stats.segments,
            characters=stats.characters,
            extracted_text="\n".join(stats.sources),
            translated_text="\n".join(stats.translations),
            counts=counts,
        )
        if stats.approximate:
            report.warnings.append(
                f"formatting_approximate: in {stats.approximate} paragraph(s) the translation lost the tags "
                "that mark inline formatting; their text is in the paragraph's main formatting. Check them "
                "in the output, or use another tier"
            )
        report.warnings.extend(chart_warnings)
        log.debug("docx %s: %s", source.name, counts)
        return report


def write_docx_export(content: Sequence[str] | Outline, output: Path, *, rtl: bool) -> None:
    """Write ``content`` as a new DOCX at ``output``, set right-to-left when ``rtl``.

    ``content`` is either plain paragraphs (one paragraph each, line breaks kept) or an
    :class:`~dragoman.documents._export.Outline` (the PDF handler's export): headings in Word's Heading 1-3
    styles, list items in List Bullet / List Number, tables as Word tables, page breaks, bold, italic and
    monospace runs, and the running header and footer (with a page number field) in the section's."""
    import docx

    document = docx.Document()
    if isinstance(content, Outline):
        _write_outline(document, content, rtl=rtl)
    else:
        for text in content:
            paragraph = document.add_paragraph()
            run = paragraph.add_run(xml_safe(text))  # python-docx turns "\n" into breaks and "\t" into tabs
            if rtl:
                _mark_paragraph(paragraph._p)
                _mark_run(run._r, _Script(rtl=True, complex=True))
    document.save(str(output))


#: Word's styles (in python-docx's default template) for the export's paragraphs.
_LIST_STYLES = {"bullet": "List Bullet", "number": "List Number"}
#: Word's paragraph alignments for the export's (``w:jc``: ``both`` is justified, in either direction).
_ALIGNMENTS = {"center": "CENTER", "justify": "JUSTIFY"}
#: The font of monospace runs in the export.
_CODE_FONT = "Courier New"


def _write_outline(document: Any, outline: Outline, *, rtl: bool) -> None:
    styles: dict[str, str] = {}  # style name -> id (python-docx looks a name up through every style)

    def style_id(name: str) -> str:
        if name not in styles:
            styles[name] = document.styles[name].style_id
        return styles[name]

    for item in outline.items:
        if isinstance(item, PageBreak):
            document.add_page_break()
        elif isinstance(item, Table):
            _write_table(document, item, style_id, rtl=rtl)
        else:
            _write_paragraph(document.add_paragraph(), item, style_id, rtl=rtl)
    if not outline.items:
        document.add_paragraph()
    section = document.sections[0]
    if outline.header:
        _write_runs(section.header.paragraphs[0], (ExportRun(outline.header),), rtl=rtl)
    if outline.footer or outline.page_numbers:
        paragraph = section.footer.paragraphs[0]
        if outline.footer:
            _write_runs(paragraph, (ExportRun(outline.footer),), rtl=rtl)
        if outline.page_numbers:
            if outline.footer:
                paragraph.add_run("\t")
            _page_field(paragraph)


def _write_paragraph(
    paragraph: Any, item: ExportParagraph, style_id: Callable[[str], str], *, rtl: bool
) -> None:
    if item.heading:
        paragraph._p.get_or_add_pPr().style = style_id(f"Heading {item.heading}")
    elif item.list_kind is not None:
        paragraph._p.get_or_add_pPr().style = style_id(_LIST_STYLES[item.list_kind])
    if item.align is not None:
        from docx.enum.text import WD_PARAGRAPH_ALIGNMENT

        paragraph._p.get_or_add_pPr().jc_val = getattr(WD_PARAGRAPH_ALIGNMENT, _ALIGNMENTS[item.align])
    _write_runs(paragraph, item.runs, rtl=rtl)


def _write_runs(paragraph: Any, runs: Sequence[ExportRun], *, rtl: bool) -> None:
    """The runs at the end of a python-docx paragraph, built with lxml (python-docx's ``add_run`` costs
    several times more): ``w:rPr`` (bold, italic, the code font), then text, line breaks and tabs."""
    p = paragraph._p
    for piece in runs:
        run = p.makeelement(w("r"), {})
        if piece.bold or piece.italic or piece.code:
            rpr = run.makeelement(W_RPR, {})
            if piece.code:
                font = _CODE_FONT
                rpr.append(rpr.makeelement(w("rFonts"), {w("ascii"): font, w("hAnsi"): font, w("cs"): font}))
            if piece.bold:
                rpr.append(rpr.makeelement(w("b"), {}))
            if piece.italic:
                rpr.append(rpr.makeelement(w("i"), {}))
            run.append(rpr)
        for index, line in enumerate(xml_safe(piece.text).split("\n")):
            if index:
                run.append(run.makeelement(w("br"), {}))
            for number, part in enumerate(line.split("\t")):
                if number:
                    run.append(run.makeelement(w("tab"), {}))
                if part:
                    text = run.makeelement(w("t"), {})
                    text.text = part
                    if part != part.strip():
                        text.set(XML_SPACE, "preserve")
                    run.append(text)
        if rtl:
            _mark_run(run, _Script(rtl=True, complex=True))
        p.append(run)
    if rtl:
        _mark_paragraph(p)


def _write_table(document: Any, table: Table, style_id: Callable[[str], str], *, rtl: bool) -> None:
    columns = max((len(row) for row in table.rows), default=0)
    if not columns:
        return
    grid = document.add_table(rows=len(table.rows), cols=columns)
    grid._tbl.tblPr.style = style_id("Table Grid")
    if rtl:
        grid._tbl.tblPr.get_or_add_bidiVisual()  # the first column on the right
    for row, cells in zip(grid.rows, table.rows, strict=True):
        for cell, paragraphs in zip(row.cells, cells, strict=False):
            for index, item in enumerate(paragraphs):
                paragraph = cell.paragraphs[0] if index == 0 else cell.add_paragraph()
                _write_paragraph(paragraph, item, style_id, rtl=rtl)
            if rtl and not paragraphs:
                _mark_paragraph(cell.paragraphs[0]._p)


def _page_field(paragraph: Any) -> None:
    """A ``PAGE`` field (the page's number) at the end of ``paragraph``."""
    field = paragraph._p.makeelement(w("fldSimple"), {w("instr"): " PAGE "})
    run = field.makeelement(w("r"), {})
    text = run.makeelement(w("t"), {})
    text.text = "1"
    run.append(text)
    field.append(run)
    paragraph._p.append(field)
