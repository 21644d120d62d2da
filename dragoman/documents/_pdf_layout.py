# mypy: disallow-untyped-calls=False
# (PyMuPDF's functions carry no annotations)
"""Reading a PDF page's text blocks, and the room each block's translation may take.

Each text block of ``page.get_text("dict")`` becomes one :class:`Block`: its lines joined into a paragraph
(a line ending well short of the block's right edge keeps its line break: a paragraph end or a list item;
a word hyphenated at a line end is joined), the style of its first span, its line pitch, its direction.

Translations are usually longer than their source. A block may grow into free space before its text is
shrunk: a one-line block to the right (or both ways when it is centred on the page), a paragraph
downwards by at most a line or a quarter of its height (a label by half its width at most), never
past other text, an image, a drawing beside or below it, the edge of a box drawn around it, or the page's
margin.

A page is interpreted once (:func:`read_page`): MuPDF records it as a display list, which is replayed into
the text extraction and into a device that only notes where the drawings and images are (reading the text
and the obstacles each from the page's content stream took 40% longer).
"""

from __future__ import annotations

import statistics
import weakref
from dataclasses import dataclass, field
from typing import Any

import pymupdf
from pymupdf import mupdf

from dragoman.documents import _pdf_fonts as fonts

#: ``get_text`` flags: whitespace and ligatures as written, no images (not needed, and slow).
TEXT_FLAGS = (pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES) | pymupdf.TEXT_PRESERVE_WHITESPACE
#: A line shorter than this share of its block's width ends a paragraph (its line break is kept).
SHORT_LINE = 0.7
#: Line directions (cos, sin) of ``get_text`` mapped to ``insert_htmlbox``'s rotation.
ROTATIONS = {(1, 0): 0, (0, -1): 90, (-1, 0): 180, (0, 1): 270}
#: A box as MuPDF's text extraction gives it: x0, y0, x1, y1.
Box = tuple[float, float, float, float]
#: Space kept between a grown block and whatever stops it, in points.
GAP = 2.0
#: What stops a block from growing, as ``get_bboxlog`` names it (text is judged by blocks instead): what
#: :class:`Obstacles` collects.
OBSTACLE_KINDS = ("fill-path", "stroke-path", "fill-image", "fill-imgmask", "fill-shade")


@dataclass
class Block:
    """A text block found on a page, and what is needed to write its translation back."""

    page: int  # 0-based
    rect: pymupdf.Rect  # the original text's box
    text: str
    style: fonts.TextStyle
    line_height: float = 1.2
    rotate: int = 0
    lines: int = 1
    centered: bool = False
    line_rects: list[Box] = field(default_factory=list)  # each line's box, to remove the text line by line
    paint_over: bool = False  # text that is part of an image: cover the original with the colour around it
    room: pymupdf.Rect | None = None  # where the translation may go (``rect`` grown into free space)


@dataclass
class PageWork:
    """One page's blocks and what was noticed about it."""

    number: int  # 0-based
    blocks: list[Block] = field(default_factory=list)
    skipped_angled: int = 0


def join_lines(lines: list[tuple[str, float]], width: float) -> str:
    """A block's lines (text, width) as one text: wrapped lines joined, short lines ending a paragraph."""
    out = ""
    for index, (raw, _) in enumerate(lines):
        text = raw.strip()
        if not text:
            continue
        if not out:
            out = text
        elif lines[index - 1][1] < SHORT_LINE * width:
            out += "\n" + text
        elif out.endswith("-") and len(out) > 1 and out[-2].isalpha() and text[:1].islower():
            out = out[:-1] + text
        else:
            out += " " + text
    return out


def line_height(lines: list[dict[str, Any]], size: float) -> float:
    """The block's line pitch as a multiple of its font size (1.2 for a single line)."""
    baselines = [line["spans"][0]["origin"][1] for line in lines if line["spans"]]
    if lines and lines[0]["dir"][1]:  # vertical lines: the pitch runs along x
        baselines = [line["spans"][0]["origin"][0] for line in lines if line["spans"]]
    pitches = [abs(b - a) for a, b in zip(baselines, baselines[1:], strict=False) if b != a]
    if not pitches or size <= 0:
        return 1.2
    return float(min(2.0, max(1.0, statistics.median(pitches) / size)))


def _line_style(line: dict[str, Any]) -> tuple[float, bool | None]:
    """A line's size (that of most of its characters) and weight (None when bold and regular are mixed)."""
    spans = [s for s in line["spans"] if s["text"].strip()]
    size = max(spans, key=lambda s: len(s["text"].strip()))["size"]
    bold = {bool(s["flags"] & fonts.FLAG_BOLD) for s in spans}
    return float(size), (bold.pop() if len(bold) == 1 else None)


def runs(lines: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """A block's non-blank lines in runs of one look: a heading MuPDF put in the block of the paragraph
    under it becomes a block of its own (sizes differing by more than 15%, or a bold line against a
    regular one; a line of mixed weights goes with its neighbours)."""
    out: list[list[dict[str, Any]]] = []
    previous: tuple[float, bool | None] | None = None
    for line in lines:
        if not any(s["text"].strip() for s in line["spans"]):
            continue
        size, bold = _line_style(line)
        if (
            previous is None
            or abs(size - previous[0]) > 0.15 * max(size, previous[0])
            or (bold is not None and previous[1] is not None and bold != previous[1])
        ):
            out.append([])
        out[-1].append(line)
        previous = (size, bold if bold is not None else previous[1] if previous else None)
    return out


def block_of(number: int, lines: list[dict[str, Any]], page_rect: pymupdf.Rect) -> Block | str | None:
    """A :class:`Block` from lines of a ``get_text("dict")`` block; None when blank, ``"angled"`` when the
    text is at an angle other than a multiple of 90 degrees (left as it is)."""
    lines = [line for line in lines if any(s["text"].strip() for s in line["spans"])]
    if not lines:
        return None
    directions = {(round(line["dir"][0]), round(line["dir"][1])) for line in lines}
    exact = all(abs(abs(line["dir"][0]) - 1) < 1e-3 or abs(abs(line["dir"][1]) - 1) < 1e-3 for line in lines)
    if len(directions) != 1 or not exact or next(iter(directions)) not in ROTATIONS:
        return "angled"
    rotate = ROTATIONS[next(iter(directions))]
    boxes: list[Box] = [line["bbox"] for line in lines]
    rect = pymupdf.Rect(_union(boxes))
    vertical = rotate in (90, 270)
    texts = []
    for line, box in zip(lines, boxes, strict=True):
        extent = box[3] - box[1] if vertical else box[2] - box[0]
        texts.append(("".join(s["text"] for s in line["spans"]), extent))
    first = next(s for line in lines for s in line["spans"] if s["text"].strip())
    style = fonts.style_of(first)
    invisible = all(s.get("alpha", 255) == 0 for line in lines for s in line["spans"])
    if invisible:  # an OCR layer: the visible text is in the image under it; write in dark ink
        style = fonts.TextStyle(size=style.size, bold=style.bold, italic=style.italic, family=style.family)
    centre = (rect.x0 + rect.x1) / 2
    centered = (
        len(lines) == 1
        and rotate == 0
        and abs(centre - (page_rect.x0 + page_rect.x1) / 2) < 0.02 * page_rect.width
        and rect.width < 0.8 * page_rect.width
    )
    return Block(
        page=number,
        rect=rect,
        text=join_lines(texts, rect.height if vertical else rect.width),
        style=style,
        line_height=line_height(lines, style.size),
        rotate=rotate,
        lines=len(lines),
        centered=centered,
        line_rects=boxes,
        paint_over=invisible,
    )


class Obstacles(mupdf.FzDevice2):  # type: ignore[misc]  # (MuPDF's device base class has no annotations)
    """A MuPDF device that notes the box of every drawing and image drawn (what ``Page.get_bboxlog`` gives
    as :data:`OBSTACLE_KINDS`); text goes by without a call into Python."""

    def __init__(self) -> None:
        super().__init__()
        self.boxes: list[pymupdf.Rect] = []
        self.use_virtual_fill_path()
        self.use_virtual_stroke_path()
        self.use_virtual_fill_shade()
        self.use_virtual_fill_image()
        self.use_virtual_fill_image_mask()

    def _note(self, box: Any) -> None:
        self.boxes.append(pymupdf.Rect(box.x0, box.y0, box.x1, box.y1))

    def fill_path(self, ctx: Any, path: Any, even_odd: Any, ctm: Any, *_: Any) -> None:
        self._note(mupdf.ll_fz_bound_path(path, None, ctm))

    def stroke_path(self, ctx: Any, path: Any, stroke: Any, ctm: Any, *_: Any) -> None:
        self._note(mupdf.ll_fz_bound_path(path, stroke, ctm))

    def fill_shade(self, ctx: Any, shade: Any, ctm: Any, *_: Any) -> None:
        self._note(mupdf.ll_fz_bound_shade(shade, ctm))

    def fill_image(self, ctx: Any, image: Any, ctm: Any, *_: Any) -> None:
        self._note(mupdf.ll_fz_transform_rect(mupdf.fz_unit_rect, ctm))

    def fill_image_mask(self, ctx: Any, image: Any, ctm: Any, *_: Any) -> None:
        self._note(mupdf.ll_fz_transform_rect(mupdf.fz_unit_rect, ctm))


def read_page(page: pymupdf.Page) -> tuple[dict[str, Any], list[pymupdf.Rect]]:
    """A page's text as ``page.get_text("dict", flags=TEXT_FLAGS, sort=True)`` gives it, and the boxes of
    its drawings and images, from one interpretation of the page (an unrotated one)."""
    listing = mupdf.FzDisplayList(page.this)  # the page's content and annotations, as fz_run_page runs them
    textpage = pymupdf.TextPage(mupdf.FzStextPage(listing, mupdf.FzStextOptions(TEXT_FLAGS)))
    textpage.parent = weakref.proxy(page)
    content: dict[str, Any] = textpage.extractDICT(sort=True)
    device = Obstacles()
    everywhere = mupdf.FzRect(mupdf.FzRect.Fixed_INFINITE)
    mupdf.fz_run_display_list(listing, device, mupdf.FzMatrix(), everywhere, mupdf.FzCookie())
    mupdf.fz_close_device(device)
    return content, device.boxes


def _union(boxes: list[Box]) -> Box:
    """The union of the first box and the non-empty others (as ``Rect |=`` makes it, on plain tuples)."""
    x0, y0, x1, y1 = boxes[0]
    for a0, b0, a1, b1 in boxes[1:]:
        if a0 >= a1 or b0 >= b1:
            continue
        if x0 >= x1 or y0 >= y1:
            x0, y0, x1, y1 = a0, b0, a1, b1
        else:
            x0, y0, x1, y1 = min(x0, a0), min(y0, b0), max(x1, a1), max(y1, b1)
    return x0, y0, x1, y1


def page_blocks(page: pymupdf.Page, *, grow: bool = True) -> PageWork:
    """The text blocks of a page in reading order, each with the room its translation may take."""
    work = PageWork(number=page.number or 0)
    content, obstacles = read_page(page)
    page_rect = page.rect
    for raw in content["blocks"]:
        if raw.get("type", 0) != 0:
            continue
        for lines in runs(raw["lines"]):
            block = block_of(work.number, lines, page_rect)
            if block == "angled":
                work.skipped_angled += 1
            elif isinstance(block, Block) and block.text:
                work.blocks.append(block)
    for block in work.blocks:
        block.room = room_for(block, work.blocks, obstacles, page_rect) if grow else pymupdf.Rect(block.rect)
    return work


def room_for(
    block: Block, blocks: list[Block], obstacles: list[pymupdf.Rect], page_rect: pymupdf.Rect
) -> pymupdf.Rect:
    """The box a block's translation may fill: its own, grown into the free space around it."""
    rect = pymupdf.Rect(block.rect)
    if block.rotate != 0 or block.paint_over:  # text over an image stays where its background is painted
        return rect
    margin = max(18.0, min(b.rect.x0 for b in blocks) - page_rect.x0)
    others = [b.rect for b in blocks if b is not block]
    if block.lines == 1:
        most = max(0.5 * rect.width, 3 * block.style.size)  # a label does not run across a column gap
        right = min([page_rect.x1 - margin, rect.x1 + most, *_limits_right(rect, [*others, *obstacles])])
        left = max([page_rect.x0 + margin, rect.x0 - most, *_limits_left(rect, [*others, *obstacles])])
        if block.centered:
            grow = max(0.0, min(rect.x0 - left, right - rect.x1))
            rect.x0 -= grow
            rect.x1 += grow
        else:
            rect.x1 = max(rect.x1, right)
        rect.y1 += 0.2 * block.style.size  # laid-out lines are a little taller than glyph boxes
        return rect
    pitch = block.line_height * block.style.size
    bottom = min([page_rect.y1 - 18.0, rect.y1 + max(pitch, 0.25 * rect.height)])
    rect.y1 = max(rect.y1, min([bottom, *_limits_below(rect, [*others, *obstacles])]))
    return rect


def _overlap(a0: float, a1: float, b0: float, b1: float) -> bool:
    return a0 < b1 and b0 < a1


def _limits_right(rect: pymupdf.Rect, boxes: list[pymupdf.Rect]) -> list[float]:
    out = []
    for box in boxes:
        if not _overlap(rect.y0 + 1, rect.y1 - 1, box.y0, box.y1):
            continue
        if box.x0 >= rect.x1 - 1:
            out.append(box.x0 - GAP)
        elif box.x0 <= rect.x0 + 1 and box.x1 >= rect.x1 and box.y0 <= rect.y0 and box.y1 >= rect.y1:
            out.append(box.x1 - GAP)  # a box drawn around the text
    return out


def _limits_left(rect: pymupdf.Rect, boxes: list[pymupdf.Rect]) -> list[float]:
    out = []
    for box in boxes:
        if not _overlap(rect.y0 + 1, rect.y1 - 1, box.y0, box.y1):
            continue
        if box.x1 <= rect.x0 + 1:
            out.append(box.x1 + GAP)
        elif box.x1 >= rect.x1 - 1 and box.x0 <= rect.x0 and box.y0 <= rect.y0 and box.y1 >= rect.y1:
            out.append(box.x0 + GAP)
    return out


def _limits_below(rect: pymupdf.Rect, boxes: list[pymupdf.Rect]) -> list[float]:
    out = []
    for box in boxes:
        if not _overlap(rect.x0 + 1, rect.x1 - 1, box.x0, box.x1):
            continue
        if box.y0 >= rect.y1 - 1:
            out.append(box.y0 - GAP)
        elif box.y0 <= rect.y0 and box.y1 >= rect.y1 and box.x0 <= rect.x0 and box.x1 >= rect.x1:
            out.append(box.y1 - GAP)
    return out
