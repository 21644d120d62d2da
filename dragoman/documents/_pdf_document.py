# mypy: disallow-untyped-calls=False
# (PyMuPDF's functions carry no annotations)
"""The MuPDF work on a PDF (see :mod:`dragoman.documents.pdf` for the approach, and
:mod:`dragoman.documents._pdf_pipeline` for its order): open it, read pages into blocks
(:class:`PageReader`, OCR for scans), remove their text and write the translations back
(:class:`Rewriter`), save.

Writing: text the base fonts can write goes through :mod:`dragoman.documents._pdf_text`. The rest
(right-to-left, complex and CJK scripts, anything the base fonts lack) is laid out with MuPDF's HTML engine
(``Story``), which shapes and falls back to the built-in Noto fonts, onto pages of one overlay document;
each overlay page is placed over its page as a single form XObject (``show_pdf_page``) at the end: the
layout of ``insert_htmlbox`` at a third of its cost (it makes a document per box), with the fonts embedded
once. A box first tries the translation at the original size; only when it does not fit is the largest
scale that fits searched. Blocks turned by 90, 180 or 270 degrees go through ``insert_htmlbox`` with its
rotation.
"""

from __future__ import annotations

import functools
import io
import logging
import math
from collections.abc import Sequence
from pathlib import Path

import pymupdf
from pymupdf import mupdf

from dragoman.documents import _pdf_fonts as fonts
from dragoman.documents import _pdf_ocr as ocr
from dragoman.documents import _pdf_text as text
from dragoman.documents._pdf_layout import Block, Box, PageWork, page_blocks, spill_for
from dragoman.documents.base import DocumentReport, TextBox, TextTranslator
from dragoman.errors import DocumentFormatError, OcrUnavailable, map_exceptions
from dragoman.languages.catalogue import script_of

log = logging.getLogger("dragoman.documents.pdf")

#: Translations shrunk below this scale to fit their box are reported.
SMALL_SCALE = 0.6
#: Precision of the search for the scale at which a translation fits its box, and the smallest scale tried
#: before MuPDF's own search takes over; a height no layout reaches.
SCALE_PRECISION = 0.02
MIN_SCALE = 0.05
UNBOUNDED = 1e6


def open_pdf(source: Path) -> pymupdf.Document:
    """Open a PDF for editing; a typed error for anything that is not a readable, unencrypted PDF."""
    with map_exceptions(
        f"{source.name} is not a readable PDF",
        error=DocumentFormatError,
        hint="check that the file is not corrupt or truncated, or export it to PDF again",
    ):
        doc = pymupdf.open(source, filetype="pdf")
    if doc.needs_pass:
        doc.close()
        raise DocumentFormatError(
            f"{source.name}: encrypted PDF; decrypt it first (e.g. `qpdf --decrypt --password=PASSWORD "
            "in.pdf out.pdf`) and translate the decrypted copy"
        )
    if doc.page_count == 0:
        doc.close()
        raise DocumentFormatError(f"{source.name}: the PDF has no pages (corrupt or empty); check the file")
    return doc


def _align(block: Block, *, rtl: bool) -> str | None:
    """The CSS alignment of a block's translation (a right-to-left one keeps MuPDF's own)."""
    if rtl:
        return None
    return block.align


def _story(block: Block, translation: str, *, rtl: bool) -> pymupdf.Story:
    align = _align(block, rtl=rtl)
    css = fonts.css_for(block.style, line_height=block.line_height, align=align)
    html = fonts.html_for_runs(text.runs_of(block, translation), block.style, rtl=rtl)
    return pymupdf.Story(html=html, user_css=css)


def _fit(story: pymupdf.Story, width: float, height: float, floor: float = 0.0) -> float | None:
    """Lay ``story`` out in a ``width`` x ``height`` box, shrunk until it fits; the scale (1.0: as is);
    None when it does not fit at ``floor`` (the smallest legible scale; 0: no floor).

    The story is left placed at the scale returned, ready to draw. A text that does not fit is measured
    once in a box of unbounded height; the square root of the height ratio (text shrinks in both
    directions) is the first guess, and a few halvings of the interval between a scale that fits and
    one that does not get within :data:`SCALE_PRECISION` of the largest that fits.
    """
    flags = mupdf.FZ_PLACE_STORY_FLAG_NO_OVERFLOW  # words too long for a line count as not fitting

    def fits(scale: float) -> bool:
        more, _ = story.place(pymupdf.Rect(0, 0, width / scale, height / scale), flags)
        return not more

    if fits(1.0):
        return 1.0
    more, filled = story.place(pymupdf.Rect(0, 0, width, UNBOUNDED), flags)
    natural = pymupdf.Rect(filled).y1
    guess = math.sqrt(height / natural) if not more and natural > height > 0 else 0.9
    high, low, scale = 1.0, 0.0, min(0.99, guess)
    while scale > max(MIN_SCALE, floor):  # down until it fits
        if fits(scale):
            low = scale
            break
        high, scale = scale, scale * 0.9
    if low == 0.0 and floor > 0:
        if not fits(floor):
            return None
        low = floor
    if low == 0.0:  # not even at the smallest scale: let MuPDF search as far as it takes
        fit = story.fit_scale(pymupdf.Rect(0, 0, width, height), scale_min=1, scale_max=None, flags=flags)
        return 1.0 / float(fit.parameter)
    placed = low
    while high - low > SCALE_PRECISION:
        middle = (low + high) / 2
        if fits(middle):
            low = placed = middle
        else:
            high, placed = middle, middle
    if placed != low:
        fits(low)
    return low


class Overlay:
    """The translations of every page laid out on pages of one overlay document, placed over the
    document's pages at the end: the fonts are embedded once for the whole document, not once per page."""

    def __init__(self) -> None:
        self.buffer = io.BytesIO()
        self.writer = pymupdf.DocumentWriter(self.buffer)
        self.pages: dict[int, int] = {}  # document page number -> overlay page number

    def add_page(
        self,
        page: pymupdf.Page,
        items: Sequence[tuple[Block, str]],
        *,
        rtl: bool,
        work: PageWork | None = None,
    ) -> list[tuple[float, bool]]:
        """Lay out upright translations in their blocks' rooms on a new overlay page, never below the
        legible size (reflowing down into free space first); the scale of each, and whether it ran past
        its room."""
        if not items:
            return []
        device = self.writer.begin_page(page.rect)
        scales = []
        for block, translation in items:
            room = block.room if block.room is not None else block.rect
            story = _story(block, translation, rtl=rtl)
            floor = text.legible_scale(block.style.size, painted=block.paint_over)
            scale = _fit(story, room.width, room.height, floor)
            overflow = False
            if scale is None and work is not None:
                room = spill_for(block, work)
                scale = _fit(story, room.width, room.height, floor)
            if scale is None:  # written at the legible size, running past its room
                overflow, scale = True, floor
                story.place(pymupdf.Rect(0, 0, room.width / floor, UNBOUNDED))
            story.draw(device, pymupdf.Matrix(scale, 0, 0, scale, room.x0, room.y0))
            scales.append((scale, overflow))
        self.writer.end_page()
        self.pages[page.number or 0] = len(self.pages)
        return scales

    def place(self, doc: pymupdf.Document) -> None:
        """Put each overlay page over its document page (as a form XObject)."""
        self.writer.close()
        if not self.pages:
            return
        with pymupdf.open("pdf", self.buffer.getvalue()) as overlay:
            for number, index in self.pages.items():
                page = doc.load_page(number)
                page.show_pdf_page(page.rect, overlay, index)


def draw_turned(page: pymupdf.Page, block: Block, translation: str, *, rtl: bool) -> float:
    """Write a translation turned by a multiple of 90 degrees into its block; the scale it took."""
    align = _align(block, rtl=rtl)
    css = fonts.css_for(block.style, line_height=block.line_height, align=align)
    html = fonts.html_for_runs(text.runs_of(block, translation), block.style, rtl=rtl)
    floor = text.legible_scale(block.style.size, painted=block.paint_over)
    spare, scale = page.insert_htmlbox(block.rect, html, css=css, scale_low=floor, rotate=block.rotate)
    if spare < 0:  # (nothing written) not even at the legible size: smaller, rather than lost
        spare, scale = page.insert_htmlbox(block.rect, html, css=css, scale_low=0, rotate=block.rotate)
    return float(scale)


def restore_links(page: pymupdf.Page, before: list[tuple[int, int, str]]) -> None:
    """Put back the link annotations that redaction removed (the same objects, in their old order)."""
    links = {xref for xref, kind, _ in before if kind == mupdf.PDF_ANNOT_LINK}
    if not links:  # (most pages: nothing to put back, no need to list the annotations again)
        return
    now = [xref for xref, *_ in page.annot_xrefs()]
    if links <= set(now):
        return
    order = [xref for xref, *_ in before if xref in links or xref in now]
    order += [xref for xref in now if xref not in order]
    page.parent.xref_set_key(page.xref, "Annots", "[" + " ".join(f"{xref} 0 R" for xref in order) + "]")


def redact(page: pymupdf.Page, rects: Sequence[pymupdf.Rect | Box]) -> None:
    """Remove the text in ``rects`` with MuPDF's redaction, filling nothing, leaving images and vector
    graphics alone. What ``Page.add_redact_annot`` and ``Page.apply_redactions`` do, at half their cost:
    they also give each annotation an appearance and Python objects, and look at it again afterwards."""
    pdf_page = mupdf.pdf_page_from_fz_page(page.this)
    for rect in rects:
        annot = mupdf.pdf_create_annot(pdf_page, mupdf.PDF_ANNOT_REDACT)
        box = pymupdf.Rect(rect)
        mupdf.pdf_set_annot_rect(annot, mupdf.FzRect(box.x0, box.y0, box.x1, box.y1))
    options = mupdf.PdfRedactOptions()
    options.black_boxes = 0
    options.image_method = mupdf.PDF_REDACT_IMAGE_NONE
    options.line_art = mupdf.PDF_REDACT_LINE_ART_NONE
    options.text = mupdf.PDF_REDACT_TEXT_REMOVE
    mupdf.pdf_redact_page(pdf_page.doc(), pdf_page, options)


def remove_text(page: pymupdf.Page, work: PageWork) -> list[tuple[int, int, str]]:
    """Remove the page's original text (and paint over text that is part of an image); the annotations
    the page had before, for :func:`restore_links`."""
    annots_before: list[tuple[int, int, str]] = page.annot_xrefs()
    lines = [line for block in work.blocks for line in block.line_rects]
    if lines:  # (a scan read by OCR has none)
        # Keep the text left untranslated (at an angle): remove line by line; otherwise every text on the
        # page is replaced: one redaction, far cheaper than one per line.
        # Code (monospace blocks) stays as it is too.
        redact(page, lines if work.skipped_angled or work.kept_code else [page.rect])
    painted = [b.rect for b in work.blocks if b.paint_over]
    if painted:
        ocr.paint_backgrounds(page, painted)
    return annots_before


class Rewriter:
    """Replaces the text of a document's pages: :meth:`remove` takes each page's text away (and puts back
    the links redaction drops), :meth:`write` lays out its translations (pages in any groups, in order),
    :meth:`finish` places them."""

    def __init__(
        self, doc: pymupdf.Document, *, rtl: bool, report: DocumentReport, book: text.FontBook | None = None
    ) -> None:
        self.doc = doc
        self.rtl = rtl
        self.report = report
        self.book = book
        self.overlay = Overlay()
        self.turned: list[tuple[int, Block, str]] = []
        self.shrunk: dict[int, int] = {}  # page number (1-based) -> translations shrunk a lot there
        self.overflowed: dict[int, int] = {}  # page number (1-based) -> translations past their room

    def remove(self, work: PageWork) -> None:
        if work.blocks:
            page = self.doc.load_page(work.number)
            restore_links(page, remove_text(page, work))

    def write(self, work: PageWork, translations: Sequence[str]) -> None:
        """Lay out a page's translations (one per block, in order; blank ones are left out)."""
        items = [(b, t) for b, t in zip(work.blocks, translations, strict=True) if t.strip()]
        if not items:
            return
        page = self.doc.load_page(work.number)
        writers = text.TextWriters(page)
        shaped: list[tuple[Block, str]] = []
        scales: list[tuple[float, bool]] = []
        for block, translation in items:
            fit = text.fitted(block, translation, rtl=self.rtl, book=self.book)
            if fit is not None:
                laid = text.lay_out(
                    block, translation, self.book, spill=functools.partial(spill_for, block, work), fit=fit
                )
                writers.add(block, laid, center=block.centered)
                scales.append((laid.scale, laid.overflow))
            elif block.rotate == 0:
                shaped.append((block, translation))
            else:
                self.turned.append((work.number, block, translation))
        writers.write()
        scales += self.overlay.add_page(page, shaped, rtl=self.rtl, work=work)
        for block, translation in items:
            rect = block.rect
            self.report.boxes.append(
                TextBox(
                    work.number + 1,
                    (rect.x0, rect.y0, rect.x1, rect.y1),
                    text.plain_text(block, block.text),
                    text.plain_text(block, translation),
                )
            )
        shrunk = sum(scale < SMALL_SCALE for scale, _ in scales)
        if shrunk:
            self.shrunk[work.number + 1] = shrunk
        overflowed = sum(overflow for _, overflow in scales)
        if overflowed:
            self.overflowed[work.number + 1] = overflowed

    def finish(self) -> None:
        if self.shrunk:
            self.report.warnings.append(
                f"{sum(self.shrunk.values())} translation(s) shrunk below {SMALL_SCALE:.0%} of the original "
                f"size to fit their boxes, on page(s) {_pages(self.shrunk)}; check them, or shorten them"
            )
        if self.overflowed:
            self.report.warnings.append(
                f"{sum(self.overflowed.values())} translation(s) did not fit their boxes at the smallest "
                f"legible size ({text.MIN_LEGIBLE:g} pt or {text.MIN_SHARE:.0%} of the original) even "
                "reflowed into the free space below, and run past them, on page(s) "
                f"{_pages(self.overflowed)}; check them, or shorten them"
            )
        self.overlay.place(self.doc)
        for number, block, translation in self.turned:
            draw_turned(self.doc.load_page(number), block, translation, rtl=self.rtl)


class PageReader:
    """Reads pages into blocks, through OCR for scans. Without Tesseract, scanned pages among text pages
    are reported and left as they are (:meth:`finish`); a document of scans only is an error."""

    def __init__(
        self, doc: pymupdf.Document, translate: TextTranslator, report: DocumentReport, *, grow: bool
    ):
        self.doc = doc
        self.translate = translate
        self.report = report
        self.grow = grow
        self.book = text.FontBook()  # the document's own fonts, to write translations in
        self.ocr_error: OcrUnavailable | None = None
        self.unread: list[int] = []
        self.scanned = 0
        self.angled: dict[int, int] = {}  # page number (1-based) -> text blocks at an angle, untranslated

    def read(self, number: int) -> PageWork:
        page = self.doc.load_page(number)
        work = page_blocks(page, grow=self.grow)
        if work.blocks:
            self.book.note(page)
        if work.skipped_angled:
            self.angled[number + 1] = work.skipped_angled
        if not work.blocks and page.get_images(full=False):
            self.scanned += 1
            if self.ocr_error is None:
                try:
                    ocr.ocr_page(page, work, self.translate, self.report.warnings)
                except OcrUnavailable as exc:
                    self.ocr_error = exc
            if self.ocr_error is not None:
                self.unread.append(number + 1)
        return work

    def finish(self, works: Sequence[PageWork]) -> None:
        if self.angled:
            self.report.warnings.append(
                f"{sum(self.angled.values())} text block(s) at an angle other than a multiple of 90 degrees "
                f"left untranslated, on page(s) {_pages(self.angled)}"
            )
        if self.ocr_error is None:
            return
        if not any(work.blocks for work in works):  # nothing but scans: without OCR nothing to translate
            raise self.ocr_error
        pages = _pages(dict.fromkeys(self.unread, 1))
        self.report.warnings.append(
            f"page(s) {pages} have no text layer; OCR not applied: {self.ocr_error.message}"
        )


def _pages(counts: dict[int, int], most: int = 20) -> str:
    numbers = sorted(counts)
    shown = ", ".join(str(n) for n in numbers[:most])
    return shown + (f" and {len(numbers) - most} more" if len(numbers) > most else "")


def check_document(doc: pymupdf.Document, name: str, target: str, report: DocumentReport) -> None:
    """Warn about a repaired file and a target script no font can write."""
    if doc.is_repaired:
        report.warnings.append(f"{name} was damaged; MuPDF repaired it while reading")
    script = script_of(target)
    if not fonts.script_renderable(script):
        report.warnings.append(
            f"no font with {script} glyphs is available to MuPDF; the translation may show empty boxes "
            "(install a PyMuPDF build with its Noto fonts)"
        )


def outline(doc: pymupdf.Document) -> list[tuple[int, str]]:
    """The document's bookmarks (outline items) as (xref, title), in order; blank titles left out."""
    items = []
    for entry in doc.get_toc(simple=False):
        xref = entry[3].get("xref", 0) if len(entry) > 3 and isinstance(entry[3], dict) else 0
        if xref and str(entry[1]).strip():
            items.append((int(xref), str(entry[1])))
    return items


def set_outline(doc: pymupdf.Document, items: Sequence[tuple[int, str]], titles: Sequence[str]) -> None:
    """Give each bookmark its translated title (destinations, levels and order stay)."""
    for (xref, _), title in zip(items, titles, strict=True):
        if title.strip():
            doc.xref_set_key(xref, "Title", pymupdf.get_pdf_str(title))


def unrotate(doc: pymupdf.Document) -> dict[int, int]:
    """Set every page's rotation to 0 (one coordinate system to read, redact and write in); the old ones."""
    rotations = {}
    for number in range(doc.page_count):
        page = doc.load_page(number)
        if page.rotation:
            rotations[number] = page.rotation
            page.set_rotation(0)
    return rotations


def rotate_back(doc: pymupdf.Document, rotations: dict[int, int]) -> None:
    for number, rotation in rotations.items():
        doc.load_page(number).set_rotation(rotation)


def close(doc: pymupdf.Document) -> None:
    doc.close()


def save(doc: pymupdf.Document, output: Path) -> None:
    """Save with only the glyphs used of each font (the built-in Noto fonts are large)."""
    try:
        doc.subset_fonts()
    except (RuntimeError, ValueError) as exc:
        log.warning("subsetting fonts failed; the output keeps whole fonts: %s", exc)
    doc.save(output, garbage=1, deflate=True)
