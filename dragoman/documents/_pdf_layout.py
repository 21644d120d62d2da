# mypy: disallow-untyped-calls=False
# (PyMuPDF's functions carry no annotations)
"""Reading a PDF page's text blocks, and the room each block's translation may take.

Each text block of ``page.get_text("dict")`` becomes one :class:`Block`: its lines joined into a paragraph
(a line ending well short of the block's right edge keeps its line break: a paragraph end or a list item;
a word hyphenated at a line end is joined), the look of most of its characters (runs in another look
between numbered placeholders, monospace code as a single placeholder kept as it is), its line pitch, its
direction, whether it is justified (:func:`justified`); a smaller span raised or lowered on its line (a
footnote mark, an exponent) is a run of its own that keeps its size and baseline shift (:func:`_scripts`).
A block all in monospace is code and left alone. Text on one line split by a wide gap (table
cells, a running header's parts, a label set flush right) is cut into separate blocks (:func:`columns`).

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

import re
import statistics
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import pymupdf
from pymupdf import mupdf

from dragoman.documents import _inline
from dragoman.documents import _pdf_fonts as fonts

#: ``get_text`` flags: whitespace and ligatures as written, no images (not needed, and slow).
TEXT_FLAGS = (pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES) | pymupdf.TEXT_PRESERVE_WHITESPACE
#: A line shorter than this share of its block's width ends a paragraph (its line break is kept).
SHORT_LINE = 0.7
#: A line that ends in dot leaders and a page number (a table of contents' entry) ends its paragraph.
LEADER_END = re.compile(r"(?:\.\s?){3,}\s*\S{1,8}$")
#: Line directions (cos, sin) of ``get_text`` mapped to ``insert_htmlbox``'s rotation.
ROTATIONS = {(1, 0): 0, (0, -1): 90, (-1, 0): 180, (0, 1): 270}
#: A box as MuPDF's text extraction gives it: x0, y0, x1, y1.
Box = tuple[float, float, float, float]
#: Space kept between a grown block and whatever stops it, in points.
GAP = 2.0
#: What stops a block from growing, as ``get_bboxlog`` names it (text is judged by blocks instead): what
#: :class:`Obstacles` collects.
OBSTACLE_KINDS = ("fill-path", "stroke-path", "fill-image", "fill-imgmask", "fill-shade")
#: Text on one line separated by a gap wider than this many font sizes is in separate blocks (table cells,
#: columns, a running header's left and right parts). (Narrower gaps lined up over several rows are no
#: sign of a table: a table of contents has its numbers and titles so, and splitting it scattered it.)
COLUMN_GAP = 2.0
#: ... or of :data:`FLUSH_GAP` sizes before a part set flush right in another look (a label).
FLUSH_GAP = 1.4
#: A block with this share of its characters in mathematical fonts is a formula, left as it is.
FORMULA_SHARE = 0.25
#: Most columns a block is split into (beyond that it is scattered text, and finding each part's column
#: would cost time growing with the square of the parts).
MAX_COLUMNS = 64
#: Space kept free at the bottom of a page when a translation spills downwards, in points.
BOTTOM_MARGIN = 18.0
#: A justified block (:func:`justified`): at least this many lines, of which at least
#: :data:`JUSTIFIED_FULL` full ones (not the last) end at the block's right edge and start at its left
#: one, within :data:`JUSTIFIED_TOLERANCE` font sizes (at least :data:`JUSTIFIED_POINTS` points).
JUSTIFIED_LINES = 3
JUSTIFIED_FULL = 2
JUSTIFIED_TOLERANCE = 0.1
JUSTIFIED_POINTS = 1.0
#: An inline superscript or subscript: a span at most this share of the line's size, raised or lowered
#: by more than :data:`SCRIPT_SHIFT` of the line's size (or flagged a superscript by MuPDF).
SCRIPT_SIZE = 0.85
SCRIPT_SHIFT = 0.1
#: How far a span MuPDF flags as a superscript but finds on the line's baseline is raised, as a share of
#: the line's size.
SCRIPT_RISE = 0.33


@dataclass(frozen=True)
class Inline:
    """A run inside a block that looks different from the block (bold, italic, another colour: a pair of
    placeholders around its translation) or is code (monospace: a single placeholder, kept as it is)."""

    single: bool
    text: str
    style: fonts.TextStyle


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
    tags: dict[int, Inline] = field(default_factory=dict)  # the placeholders in ``text``, by number
    spill: pymupdf.Rect | None = None  # ``room`` grown down to whatever is below: to reflow, not shrink
    justified: bool = False  # set flush to both edges in the source (:func:`justified`): written so

    @property
    def align(self) -> Literal["center", "justify"] | None:
        """How the source set the block: centred, justified, or neither (left, or the script's own side)."""
        return "center" if self.centered else "justify" if self.justified else None


@dataclass
class PageWork:
    """One page's blocks and what was noticed about it."""

    number: int  # 0-based
    blocks: list[Block] = field(default_factory=list)
    skipped_angled: int = 0
    kept_code: int = 0  # blocks all in monospace (code), left as they are
    code: list[Block] = field(default_factory=list)  # those blocks (formulas aside), for the DOCX export
    obstacles: list[pymupdf.Rect] = field(default_factory=list)
    page_rect: pymupdf.Rect | None = None


def join_lines(lines: list[tuple[str, float]], width: float, ends: frozenset[int] = frozenset()) -> str:
    """A block's lines (text, width) as one text: wrapped lines joined, short lines ending a paragraph, and
    the lines at ``ends`` (their indexes: a justified block's lines that stop short of its right edge)."""
    out = ""
    for index, (raw, _) in enumerate(lines):
        text = raw.strip()
        if not text:
            continue
        if not out:
            out = text
        elif (
            lines[index - 1][1] < SHORT_LINE * width
            or index - 1 in ends
            or LEADER_END.search(_inline.TAG.sub("", lines[index - 1][0]).rstrip())
        ):
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
    spans = [s for line in lines for s in line["spans"] if s["text"].strip()]
    invisible = all(s.get("alpha", 255) == 0 for line in lines for s in line["spans"])
    tags: dict[int, Inline] = {}
    texts = []
    if invisible:  # an OCR layer: the visible text is in the image under it; write in dark ink
        first = fonts.style_of(spans[0])
        family = "sans-serif" if first.code else first.family  # (OCR's glyphless font is no code)
        style = fonts.TextStyle(size=first.size, bold=first.bold, italic=first.italic, family=family)
        for line, box in zip(lines, boxes, strict=True):
            extent = box[3] - box[1] if vertical else box[2] - box[0]
            texts.append(("".join(s["text"] for s in line["spans"]), extent))
    else:
        looks = [fonts.style_of(s) for s in spans]
        if all(look.code or look.math for look in looks) or _formula(spans, looks):
            return "code"
        style = _base_style(spans, looks)
        ids = _inline.numbering(*(s["text"] for s in spans))
        for line, box in zip(lines, boxes, strict=True):
            extent = box[3] - box[1] if vertical else box[2] - box[0]
            texts.append((_tagged(line["spans"], style, ids, tags, upright=rotate == 0), extent))
    centre = (rect.x0 + rect.x1) / 2
    ends = None if rotate or vertical else paragraph_ends(boxes, style.size)
    centered = (
        len(lines) == 1
        and rotate == 0
        and abs(centre - (page_rect.x0 + page_rect.x1) / 2) < 0.02 * page_rect.width
        and rect.width < 0.8 * page_rect.width
    )
    return Block(
        page=number,
        rect=rect,
        text=join_lines(texts, rect.height if vertical else rect.width, ends or frozenset()),
        style=style,
        line_height=line_height(lines, style.size),
        rotate=rotate,
        lines=len(lines),
        centered=centered,
        line_rects=boxes,
        paint_over=invisible,
        tags=tags,
        justified=ends is not None,
    )


def justified(boxes: list[Box], size: float) -> bool:
    """Whether a block's lines (their boxes, in order) are set flush to both edges
    (:func:`paragraph_ends`)."""
    return paragraph_ends(boxes, size) is not None


def paragraph_ends(boxes: list[Box], size: float) -> frozenset[int] | None:
    """For a block set flush to both edges, the lines (indexes, the last aside) that end a paragraph
    without being short: those that stop before the right edge. None when the block is not justified.

    The rule: the block has :data:`JUSTIFIED_LINES` lines or more; its full lines (all but the last, and
    but those shorter than :data:`SHORT_LINE` of the block's width: a paragraph's end that
    :func:`join_lines` finds anyway) that end at the block's right edge within the tolerance are
    :data:`JUSTIFIED_FULL` or more and at least twice as many as those that stop before it (a paragraph's
    last line, long); and every full line starts at the left edge unless it starts a paragraph (which may
    be indented). Left-aligned text ends most of its lines a word's width apart and fails the count,
    centred and right-aligned text the left edge.
    """
    if len(boxes) < JUSTIFIED_LINES:
        return None
    left = min(box[0] for box in boxes)
    right = max(box[2] for box in boxes)
    tolerance = max(JUSTIFIED_POINTS, JUSTIFIED_TOLERANCE * size)
    short = SHORT_LINE * (right - left)
    flush = 0
    ends: set[int] = set()
    for index, box in enumerate(boxes[:-1]):
        if box[2] - box[0] < short:
            continue
        previous = boxes[index - 1]
        starts = index == 0 or previous[2] - previous[0] < short or index - 1 in ends
        if not starts and box[0] - left > tolerance:
            return None
        if right - box[2] > tolerance:
            ends.add(index)
        else:
            flush += 1
    return frozenset(ends) if flush >= max(JUSTIFIED_FULL, 2 * len(ends)) else None


def _formula(spans: list[dict[str, Any]], looks: list[fonts.TextStyle]) -> bool:
    """A displayed formula: a quarter or more of its characters in mathematical fonts (the rest is digits,
    operators and function names in roman); left as it is."""
    math = sum(len(s["text"].strip()) for s, look in zip(spans, looks, strict=True) if look.math)
    return math >= FORMULA_SHARE * sum(len(s["text"].strip()) for s in spans)


def _look(style: fonts.TextStyle) -> tuple[bool, bool, str, int, float]:
    """What sets a run apart inside a block: weight, slant, class (serif, sans, monospace; mathematical
    fonts as a class of their own, kept like code), colour, a raised or lowered baseline."""
    return style.bold, style.italic, "math" if style.math else style.family, style.color, style.rise


def _base_style(spans: list[dict[str, Any]], looks: list[fonts.TextStyle]) -> fonts.TextStyle:
    """The look of most of a block's characters (code aside): what its translation is written in; the
    first span's size and font when it has that look."""
    weights: dict[tuple[bool, bool, str, int, float], int] = {}
    for span, look in zip(spans, looks, strict=True):
        if not look.code and not look.math:
            key = _look(look)
            weights[key] = weights.get(key, 0) + len(span["text"].strip())
    best = max(weights, key=weights.__getitem__)
    return next(look for look in looks if _look(look) == best)


def _scripts(spans: list[dict[str, Any]], base: fonts.TextStyle) -> dict[int, tuple[float, float]]:
    """The superscripts and subscripts of an upright line (footnote marks, exponents): (size, rise) as
    shares of the block's size, by the span's index. A span is one when it is smaller than the line's text
    (:data:`SCRIPT_SIZE`) and raised or lowered (:data:`SCRIPT_SHIFT`) or flagged a superscript."""
    body = [
        s
        for s in spans
        if s["text"].strip()
        and float(s["size"]) > SCRIPT_SIZE * base.size
        and not int(s["flags"]) & fonts.FLAG_SUPERSCRIPT
    ]
    if not body or base.size <= 0:
        return {}
    baseline = float(max(body, key=lambda s: len(s["text"].strip()))["origin"][1])
    out = {}
    for index, span in enumerate(spans):
        size = float(span["size"])
        if not span["text"].strip() or size > SCRIPT_SIZE * base.size or size <= 0:
            continue
        rise = (baseline - float(span["origin"][1])) / base.size
        if int(span["flags"]) & fonts.FLAG_SUPERSCRIPT and rise < SCRIPT_SHIFT:
            rise = SCRIPT_RISE
        if abs(rise) > SCRIPT_SHIFT:
            out[index] = (round(size / base.size, 2), round(rise, 2))
    return out


def _tagged(
    spans: list[dict[str, Any]],
    base: fonts.TextStyle,
    ids: Iterator[int],
    tags: dict[int, Inline],
    *,
    upright: bool = True,
) -> str:
    """A line's text, with the runs that look different from ``base`` between numbered placeholders:
    ``<n>bold</n>`` (translated), ``<n/>`` for monospace code (kept as it is); spaces stay outside.
    Superscripts and subscripts of an upright line are runs of their own (:func:`_scripts`)."""
    scripts = _scripts(spans, base) if upright else {}
    out: list[str] = []
    run: list[str] = []
    look: fonts.TextStyle | None = None

    def flush() -> None:
        text = "".join(run)
        run.clear()
        if look is None or _look(look) == _look(base) or not text.strip():
            out.append(text)
            return
        core = text.strip()
        lead, tail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
        number = next(ids)
        kept = look.code or look.math
        tags[number] = Inline(kept, core, look)
        out.append(f"{lead}<{number}/>{tail}" if kept else f"{lead}<{number}>{core}</{number}>{tail}")

    for index, span in enumerate(spans):
        this = fonts.style_of(span) if span["text"].strip() else look
        if index in scripts and this is not None:
            this = replace(this, ratio=scripts[index][0], rise=scripts[index][1])
        if look is not None and this is not None and _look(this) != _look(look):
            flush()
        if this is not None:
            look = this
        run.append(span["text"])
    flush()
    return "".join(out)


def _row_key(line: dict[str, Any]) -> int:
    return int(round(line["spans"][0]["origin"][1]))


def _span_size(line: dict[str, Any]) -> float:
    sizes = [float(s["size"]) for s in line["spans"] if s["text"].strip()]
    return max(sizes) if sizes else 10.0


def _line_of(spans: list[dict[str, Any]], line: dict[str, Any]) -> dict[str, Any]:
    """A line dict for some of a line's spans."""
    return {**line, "spans": spans, "bbox": _union([s["bbox"] for s in spans])}


def _split_line(line: dict[str, Any]) -> list[dict[str, Any]]:
    """A line in parts at gaps between its spans wider than :data:`COLUMN_GAP` font sizes."""
    spans = line["spans"]
    if len(spans) < 2:
        return [line]
    parts: list[list[dict[str, Any]]] = [[]]
    right = None
    for span in spans:
        if span["text"].strip():
            if right is not None and span["bbox"][0] - right > COLUMN_GAP * float(span["size"]):
                parts.append([])
            right = span["bbox"][2]
        parts[-1].append(span)
    if len(parts) == 1:
        return [line]
    return [_line_of(part, line) for part in parts if part]


def columns(lines: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """A block's lines in columns: text on one line separated by a wide gap (table cells side by side,
    a running header's left and right parts) goes into separate blocks; otherwise the lines as they are.

    Lines on one baseline are parts of a row; a part starts a new column where the gap before it is
    wider than :data:`COLUMN_GAP` font sizes, or wider than :data:`FLUSH_GAP` sizes before a label set flush
    right. Each part then joins the column it overlaps that starts nearest to it.
    """
    if any(round(line["dir"][0]) != 1 or not line["spans"] for line in lines):
        return [lines]
    parts = [part for line in lines for part in _split_line(line)]
    if len(parts) == 1:
        return [lines]
    rows: dict[int, list[dict[str, Any]]] = {}
    for part in parts:
        rows.setdefault(_row_key(part), []).append(part)
    if all(len(row) == 1 for row in rows.values()):
        return [lines]
    gaps: list[tuple[dict[str, Any], float, float]] = []  # part, gap before it (in sizes), its x0
    edge = max(part["bbox"][2] for part in parts)
    flush: set[int] = set()  # parts set flush right in another look (a label: "[Function]", a page number)
    for row in rows.values():
        row.sort(key=lambda part: part["bbox"][0])
        for left, right in zip(row, row[1:], strict=False):
            gap = (right["bbox"][0] - left["bbox"][2]) / _span_size(left)
            gaps.append((right, gap, right["bbox"][0]))
            if (
                right is row[-1]
                and abs(right["bbox"][2] - edge) < 1.0
                and _part_look(left) != _part_look(right)
            ):
                flush.add(id(right))
    cuts = {id(part) for part, gap, _ in gaps if gap > COLUMN_GAP or (gap > FLUSH_GAP and id(part) in flush)}
    if not cuts:  # one column: the parts of each row as one line (MuPDF cuts lines at wide spaces)
        ordered = sorted(rows.values(), key=lambda row: row[0]["bbox"][1])
        return [[row[0] if len(row) == 1 else _merged(row) for row in ordered]]
    segments: list[list[dict[str, Any]]] = []
    for row in sorted(rows.values(), key=lambda row: row[0]["bbox"][1]):
        segments.append([row[0]])
        for part in row[1:]:
            if id(part) in cuts:
                segments.append([part])
            else:
                segments[-1].append(part)
    # Each part joins the column it overlaps that starts nearest to it; in a column, a part on a row
    # that has parts in other columns too starts a new block (a table's cell), one alone on its row
    # continues the block above (a cell's text wrapped onto a second line).
    found: list[tuple[list[float], list[list[dict[str, Any]]]]] = []  # [x0, x1], blocks of lines
    for row_segments in _rows_of(segments):
        for segment in row_segments:
            line = segment[0] if len(segment) == 1 else _merged(segment)
            x0, x1 = line["bbox"][0], line["bbox"][2]
            # of the columns it overlaps, the one starting nearest to where it starts
            near = [
                (abs(x0 - extent[0]), i) for i, (extent, _) in enumerate(found) if _overlap(x0, x1, *extent)
            ]
            if near:
                extent, blocks = found[min(near)[1]]
                if len(row_segments) > 1:
                    blocks.append([line])
                else:
                    blocks[-1].append(line)
                extent[0], extent[1] = min(extent[0], x0), max(extent[1], x1)
            else:
                if len(found) >= MAX_COLUMNS:  # no table: scattered text; the block as MuPDF made it
                    return [lines]
                found.append(([x0, x1], [[line]]))
    return [block for _, blocks in sorted(found, key=lambda item: item[0][0]) for block in blocks]


def _rows_of(segments: list[list[dict[str, Any]]]) -> list[list[list[dict[str, Any]]]]:
    """Segments (in row order) grouped by row."""
    rows: list[list[list[dict[str, Any]]]] = []
    key = None
    for segment in segments:
        this = _row_key(segment[0])
        if this != key:
            rows.append([])
            key = this
        rows[-1].append(segment)
    return rows


def _part_look(part: dict[str, Any]) -> tuple[bool, bool, str, int, float] | None:
    spans = [s for s in part["spans"] if s["text"].strip()]
    return _look(fonts.style_of(spans[0])) if spans else None


def _merged(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Parts of one row that belong together, as one line (a space between them)."""
    spans: list[dict[str, Any]] = []
    for part in parts:
        if spans and not spans[-1]["text"].endswith(" ") and not part["spans"][0]["text"].startswith(" "):
            spans.append({**part["spans"][0], "text": " "})
        spans.extend(part["spans"])
    return _line_of(spans, parts[0])


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


def code_block(number: int, lines: list[dict[str, Any]]) -> Block | None:
    """A block of code (all in monospace) as it reads, line by line, for the DOCX export; None for a
    formula (mathematical fonts)."""
    lines = [line for line in lines if any(s["text"].strip() for s in line["spans"])]
    spans = [s for line in lines for s in line["spans"] if s["text"].strip()]
    style = fonts.style_of(spans[0])
    if not style.code:
        return None
    boxes: list[Box] = [line["bbox"] for line in lines]
    text = "\n".join("".join(s["text"] for s in line["spans"]).rstrip() for line in lines)
    return Block(
        page=number,
        rect=pymupdf.Rect(_union(boxes)),
        text=text,
        style=style,
        lines=len(lines),
        line_rects=boxes,
    )


def page_blocks(page: pymupdf.Page, *, grow: bool = True) -> PageWork:
    """The text blocks of a page in reading order, each with the room its translation may take."""
    work = PageWork(number=page.number or 0)
    content, obstacles = read_page(page)
    page_rect = page.rect
    work.obstacles, work.page_rect = obstacles, page_rect
    for raw in content["blocks"]:
        if raw.get("type", 0) != 0:
            continue
        for column in columns(raw["lines"]):
            for lines in runs(column):
                block = block_of(work.number, lines, page_rect)
                if block == "angled":
                    work.skipped_angled += 1
                elif block == "code":
                    work.kept_code += 1
                    kept = code_block(work.number, lines)
                    if kept is not None:
                        work.code.append(kept)
                elif isinstance(block, Block) and block.text:
                    work.blocks.append(block)
    justify_by_neighbours(work.blocks)
    for block in work.blocks:
        block.room = room_for(block, work.blocks, obstacles, page_rect) if grow else pymupdf.Rect(block.rect)
    return work


def justify_by_neighbours(blocks: list[Block]) -> None:
    """Marks justified the short paragraphs of a justified column. A block of two lines tells nothing by
    itself (:func:`paragraph_ends` wants :data:`JUSTIFIED_LINES`): a left-aligned paragraph's first line
    may end at the right edge too. Among justified paragraphs it is one of them when both its edges are
    those of a justified block on the page (the same column), its lines start at the left edge (the first
    may be indented) and all but the last end at the right edge, the last stopping short of it."""
    columns = [(b.rect.x0, b.rect.x1) for b in blocks if b.justified and b.rotate == 0]
    if not columns:
        return
    for block in blocks:
        boxes = block.line_rects
        if block.justified or block.centered or block.rotate or block.paint_over or len(boxes) < 2:
            continue
        if len(boxes) >= JUSTIFIED_LINES:
            continue  # decided by its own lines
        tolerance = max(JUSTIFIED_POINTS, JUSTIFIED_TOLERANCE * block.style.size)
        left, right = block.rect.x0, block.rect.x1
        if not any(abs(x0 - left) <= tolerance and abs(x1 - right) <= tolerance for x0, x1 in columns):
            continue
        full, last = boxes[:-1], boxes[-1]
        if (
            all(right - box[2] <= tolerance for box in full)
            and all(box[0] - left <= tolerance for box in boxes[1:])
            and right - last[2] > tolerance
        ):
            block.justified = True


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


def spill_for(block: Block, work: PageWork) -> pymupdf.Rect:
    """Where a translation that does not fit its room at a legible size may reflow: the room grown down to
    whatever is below it (other text, a drawing, an image) or the page's bottom margin."""
    if block.spill is not None:
        return block.spill
    room = pymupdf.Rect(block.room if block.room is not None else block.rect)
    if block.rotate != 0 or block.paint_over or work.page_rect is None:
        block.spill = room
        return room
    others = [b.rect for b in work.blocks if b is not block]
    probe = pymupdf.Rect(room.x0, block.rect.y0, room.x1, max(block.rect.y1, room.y0 + 1))
    bottom = min([work.page_rect.y1 - BOTTOM_MARGIN, *_limits_below(probe, [*others, *work.obstacles])])
    room.y1 = max(room.y1, bottom)
    block.spill = room
    return room


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
