# mypy: disallow-untyped-calls=False
# (PyMuPDF's functions carry no annotations)
"""Scanned PDF pages: OCR of a page without a text layer, and painting over text that is part of an image.

A page with images and no text is rendered (grey, :data:`OCR_DPI`) and read by Tesseract through
:func:`dragoman.documents.images.read_pages`, which picks the OCR language from the source language, or reads
with the default languages, detects the language and reads again (setting the translator's source). Each
paragraph found becomes a :class:`~dragoman.documents._pdf_layout.Block` over the scan: its box is painted
with the colour around it (so the scanned words disappear) before its translation is written there, in
dark ink, at a size taken from the height of its lines.
"""

from __future__ import annotations

import logging
import math
import statistics
from typing import TYPE_CHECKING

import pymupdf

from dragoman.documents import _pdf_fonts as fonts
from dragoman.documents._pdf_layout import Block, PageWork
from dragoman.documents.base import TextTranslator

if TYPE_CHECKING:
    from PIL import Image

log = logging.getLogger("dragoman.documents.pdf")

#: Resolution scanned pages are rendered at for OCR, and the most pixels such a rendering may have.
OCR_DPI = 300
MAX_OCR_PIXELS = 40_000_000
#: A line of text is about this many times its font size tall (capitals and descenders).
LINE_EM = 0.85


def _render(page: pymupdf.Page) -> tuple[Image.Image, float]:
    """The page as a grey Pillow image for Tesseract, and the zoom (pixels per point) it was made at."""
    from PIL import Image as PILImage

    zoom = OCR_DPI / 72
    area = page.rect.width * page.rect.height * zoom * zoom
    if area > MAX_OCR_PIXELS:
        zoom *= math.sqrt(MAX_OCR_PIXELS / area)
    pix = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), colorspace=pymupdf.csGRAY, alpha=False)
    return PILImage.frombytes("L", (pix.width, pix.height), pix.samples), zoom


def ocr_page(page: pymupdf.Page, work: PageWork, translate: TextTranslator, warnings: list[str]) -> None:
    """Read a page without a text layer through OCR and add the paragraphs found to ``work``.

    Raises :class:`~dragoman.errors.OcrUnavailable` when Tesseract or its language is missing.
    """
    from dragoman.documents import images

    image, zoom = _render(page)
    pages, lang = images.read_pages([image], translate, None, warnings)
    found = pages[0].text_blocks
    log.debug("page %d: OCR (%s) found %d paragraphs", work.number + 1, lang, len(found))
    for ocr_block in found:
        rect = pymupdf.Rect(ocr_block.bbox) * (1 / zoom)
        line = ocr_block.line_height / zoom
        size = max(4.0, line / LINE_EM)
        count = len(ocr_block.lines)
        pitch = (rect.height - line) / (count - 1) if count > 1 else 1.2 * size
        room = pymupdf.Rect(rect.x0, rect.y0, rect.x1, rect.y1 + 0.25 * size)
        work.blocks.append(
            Block(
                page=work.number,
                rect=rect,
                text=ocr_block.text,
                style=fonts.TextStyle(size=size),
                line_height=min(2.0, max(1.0, pitch / size)),
                lines=count,
                paint_over=True,
                room=room,
            )
        )


def _border_colour(pix: pymupdf.Pixmap, rect: pymupdf.Rect, zoom: float) -> tuple[float, float, float]:
    """The median colour of the pixels just around ``rect`` (page units) in a rendering at ``zoom``."""
    x0, y0 = max(0, int(rect.x0 * zoom) - 2), max(0, int(rect.y0 * zoom) - 2)
    x1, y1 = min(pix.width - 1, int(rect.x1 * zoom) + 2), min(pix.height - 1, int(rect.y1 * zoom) + 2)
    if x1 <= x0 or y1 <= y0:
        return (1.0, 1.0, 1.0)
    points = [(x, y0) for x in range(x0, x1 + 1, 2)] + [(x, y1) for x in range(x0, x1 + 1, 2)]
    points += [(x0, y) for y in range(y0, y1 + 1, 2)] + [(x1, y) for y in range(y0, y1 + 1, 2)]
    pixels = [pix.pixel(x, y) for x, y in points]
    red, green, blue = (statistics.median(p[i] for p in pixels) / 255 for i in range(3))
    return (red, green, blue)


def paint_backgrounds(page: pymupdf.Page, rects: list[pymupdf.Rect]) -> None:
    """Cover each box (grown by a point) with the colour around it, hiding text that is part of an image."""
    zoom = 1.0
    pix = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), colorspace=pymupdf.csRGB, alpha=False)
    shape = page.new_shape()
    for rect in rects:
        box = pymupdf.Rect(rect.x0 - 1, rect.y0 - 1, rect.x1 + 1, rect.y1 + 1)
        colour = _border_colour(pix, box, zoom)
        shape.draw_rect(box)
        shape.finish(color=None, fill=colour, width=0)
    shape.commit()
