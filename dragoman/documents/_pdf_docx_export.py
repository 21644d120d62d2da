"""The structure of a translated PDF, for its DOCX export: headings, tables, lists, reading order.

The PDF pipeline reads each page into text blocks (:mod:`dragoman.documents._pdf_layout`: a table's cells
and a page's columns are blocks of their own) and translates each; this module turns those blocks and
their translations into an :class:`~dragoman.documents._export.Outline`:

* **Running headers and footers** (text in the top or bottom tenth of a page that recurs on other pages,
  or recurs with other digits and is no larger than the body text, and bare page numbers) are left out of
  the body; the ones that recur word for word become the section's header or footer, page numbers its
  footer's page field.
* **Tables**: blocks whose first lines sit on one baseline, side by side, make a row; two or more such rows
  one under the other make a table, its columns those of its fullest rows (rebuilt as a grid: a cell
  missing in a row is an empty cell). Columns of running text (blocks of many lines) are no table.
* **Reading order**: a recursive XY cut. A region is cut at a vertical gap when at least two of the parts
  run down a good share of its height (a page's columns: the left one is read first, top to bottom),
  otherwise at its horizontal gaps (top to bottom), otherwise its blocks are read by their top, then left.
* **Headings**: short blocks set larger than the body text (the size most of the document's characters
  are in), or bold at the body's size; the largest size is Heading 1, the next Heading 2, the rest 3.
* **Lists**: a line starting with a bullet or an enumerator (``1.``, ``a)``) is a list item, its marker
  left to Word's list style.
* **Inline looks**: bold, italic and monospace runs as the pipeline read them (its placeholders); blocks
  of code (all in monospace, left untranslated in the PDF) are paragraphs in a monospace font.

Every step sorts or walks the blocks a bounded number of times (the XY cut stops at :data:`MAX_DEPTH`
levels), so the cost grows with the number of blocks times its logarithm.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from dragoman.documents import _pdf_text as pdf_text
from dragoman.documents._export import Item, Outline, PageBreak, Paragraph, Run, Table
from dragoman.documents._pdf_layout import Block, PageWork

#: Share of a page's height, at its top and at its bottom, where running headers and footers are.
MARGIN_SHARE = 0.1
#: Most blocks in a page's top or bottom margin for them to be a running header or footer.
MARGIN_ITEMS = 4
#: A block this many times the body text's size (or more) is a heading, if it is short.
HEADING_RATIO = 1.15
#: Most lines and characters in a heading.
HEADING_LINES = 3
HEADING_CHARS = 200
#: Most heading levels (Word's Heading 1 to 3).
HEADING_LEVELS = 3
#: Deepest level of the XY cut; below it, blocks are read by their top, then left.
MAX_DEPTH = 24
#: Narrowest vertical gap, in points, that separates columns.
COLUMN_GUTTER = 4.0
#: A vertical cut is taken first when two of its parts each cover this share of the region's height.
COLUMN_COVER = 0.35
#: Rows of a table are at most this many font sizes apart (bottom of one to top of the next).
ROW_GAP = 2.5
#: A "table" whose cells average more lines than this is columns of running text.
CELL_LINES = 3.0
#: A bare page number: digits, a roman numeral, "3 / 12", "- 3 -", "Page 3 of 12".
PAGE_NUMBER = re.compile(r"^\W*(?:page\s*)?(?:\d{1,5}|[ivxlcdm]{1,8})(?:\s*(?:/|of)\s*\d{1,5})?\W*$", re.I)
#: A list item's marker at the start of a line (after an opening bracket or quote a translation may add).
LIST_MARKER = re.compile(
    r"^(?P<pre>[\[(«\"'¿¡]?)\s*(?:(?P<bullet>[•·◦▪▫‣⁃∙●○■□–\-*])|(?P<number>\d{1,3}[.)]|[a-z][.)]))\s+"
)


@dataclass
class _Entry:
    """A block on a page with its translation (``y0``..``x1``: the block's box)."""

    block: Block
    translation: str
    x0: float
    y0: float
    x1: float
    y1: float
    code: bool = False  # a block all in monospace, left untranslated

    @property
    def size(self) -> float:
        return self.block.style.size


@dataclass
class _Grid:
    """A table found on a page: its entries by row and column (none, one, or a few side by side that
    fall into one column), and its box."""

    cells: list[list[list[_Entry]]]
    x0: float
    y0: float
    x1: float
    y1: float


_Node = _Entry | _Grid


def outline(works: Sequence[PageWork], translations: Sequence[str]) -> Outline:
    """The structure of a translated PDF: ``works`` as the pipeline read them, ``translations`` one per
    block, in the same order."""
    pages: list[list[_Entry]] = []
    position = 0
    for work in works:
        entries = []
        for block, translation in zip(
            work.blocks, translations[position : position + len(work.blocks)], strict=True
        ):
            if translation.strip():
                r = block.rect
                entries.append(_Entry(block, translation, r.x0, r.y0, r.x1, r.y1))
        for block in work.code:  # code, as it is
            r = block.rect
            entries.append(_Entry(block, block.text, r.x0, r.y0, r.x1, r.y1, code=True))
        position += len(work.blocks)
        pages.append(entries)
    heights = [_page_height(work, entries) for work, entries in zip(works, pages, strict=True)]
    body, header, footer, numbers = _furniture(
        pages, heights, _body_size([e for entries in pages for e in entries if not e.code])
    )
    prose = [e for entries in body for e in entries if not e.code]
    size = _body_size(prose)
    levels = _heading_levels(prose, size)
    items: list[Item] = []
    counts: Counter[str] = Counter()
    started = False
    for entries in body:
        if not entries:
            continue
        if started:
            items.append(PageBreak())
        started = True
        nodes: list[_Node] = [*_tables(entries, size)]
        for node in _reading_order(nodes):
            if isinstance(node, _Grid):
                items.append(_table(node))
                counts["tables"] += 1
                continue
            for paragraph in _paragraphs(node, levels.get(id(node), 0)):
                items.append(paragraph)
                counts["headings"] += paragraph.heading > 0
                counts["list_items"] += paragraph.list_kind is not None
    return Outline(tuple(items), header=header, footer=footer, page_numbers=numbers, counts=dict(counts))


def _page_height(work: PageWork, entries: list[_Entry]) -> tuple[float, float]:
    if work.page_rect is not None:
        return float(work.page_rect.y0), float(work.page_rect.y1)
    return 0.0, max((e.y1 for e in entries), default=0.0)


# ----- running headers and footers ------------------------------------------------------------------


def _plain_source(entry: _Entry) -> str:
    return " ".join(pdf_text.plain_text(entry.block, entry.block.text).split())


def _furniture_key(entry: _Entry) -> str:
    """What a running header or footer repeats: its text and size (a title set large at the top of the
    first page is no running header, though the header repeats its words)."""
    return f"{_size_key(entry.size)} {_plain_source(entry).casefold()}"


def _digits_aside(text: str) -> str:
    return re.sub(r"\d+", "#", text)


def _furniture(
    pages: list[list[_Entry]], heights: list[tuple[float, float]], body_size: float
) -> tuple[list[list[_Entry]], str, str, bool]:
    """The pages without their running headers, footers and page numbers; the header's and footer's
    text (what recurs word for word), and whether page numbers were found.

    Text that recurs only with other digits ("Chapter 2", "Page 3") is furniture when it is no larger
    than the body text (a heading "Step 2" at the top of each page is no running header); a bare number
    is a page number. Nothing is furniture in a margin of more than :data:`MARGIN_ITEMS` blocks (a table
    at the bottom of every page)."""
    zones: list[list[tuple[_Entry, str]]] = []  # per page: (entry, zone) for entries in a margin
    recurring: dict[tuple[str, str], set[int]] = defaultdict(set)  # (zone, text, digits aside) -> pages
    exact: dict[tuple[str, str], set[int]] = defaultdict(set)  # (zone, text) -> pages
    for number, (entries, (top, bottom)) in enumerate(zip(pages, heights, strict=True)):
        found = []
        share = MARGIN_SHARE * (bottom - top)
        for entry in entries:
            zone = "top" if entry.y1 <= top + share else "bottom" if entry.y0 >= bottom - share else ""
            if not zone:
                continue
            text = _furniture_key(entry)
            found.append((entry, zone))
            recurring[zone, _digits_aside(text)].add(number)
            exact[zone, text].add(number)
        zones.append(found)
    body: list[list[_Entry]] = []
    lines: dict[str, list[str]] = {"top": [], "bottom": []}
    seen: set[tuple[str, str]] = set()
    numbers = False
    for entries, found in zip(pages, zones, strict=True):
        out: set[int] = set()
        crowd = Counter(zone for _, zone in found)
        for entry, zone in found:
            text = _furniture_key(entry)
            if crowd[zone] > MARGIN_ITEMS:  # a table or a paragraph reaching into the margin
                continue
            if PAGE_NUMBER.match(_plain_source(entry)):
                numbers = numbers or zone == "bottom"
                out.add(id(entry))
            elif len(exact[zone, text]) > 1 or (
                len(recurring[zone, _digits_aside(text)]) > 1 and entry.size <= HEADING_RATIO * body_size
            ):
                out.add(id(entry))
                if len(exact[zone, text]) > 1 and (zone, text) not in seen:
                    seen.add((zone, text))
                    lines[zone].append(" ".join(pdf_text.plain_text(entry.block, entry.translation).split()))
        body.append([e for e in entries if id(e) not in out])
    return body, "\t".join(lines["top"]), "\t".join(lines["bottom"]), numbers


# ----- headings ----------------------------------------------------------------------------------------


def _size_key(size: float) -> float:
    return round(size * 2) / 2


def _body_size(entries: list[_Entry]) -> float:
    """The size most of the text is set in."""
    weights: Counter[float] = Counter()
    for entry in entries:
        weights[_size_key(entry.size)] += len(entry.block.text)
    return weights.most_common(1)[0][0] if weights else 10.0


def _heading_size(entry: _Entry, body: float) -> float | None:
    """The size a heading is ranked by, None for no heading."""
    block = entry.block
    if block.lines > HEADING_LINES or len(block.text) > HEADING_CHARS or block.rotate:
        return None
    if entry.size >= HEADING_RATIO * body:
        return _size_key(entry.size)
    if block.style.bold and entry.size >= 0.95 * body and block.lines <= 2 and not _is_list(block.text):
        return _size_key(body)
    return None


def _heading_levels(entries: list[_Entry], body: float) -> dict[int, int]:
    """Heading level (1-3) by ``id`` of each heading entry."""
    sizes = {id(e): s for e in entries if (s := _heading_size(e, body)) is not None}
    ranks = {
        s: min(rank + 1, HEADING_LEVELS) for rank, s in enumerate(sorted(set(sizes.values()), reverse=True))
    }
    return {key: ranks[size] for key, size in sizes.items()}


def _is_list(text: str) -> bool:
    return LIST_MARKER.match(text) is not None


# ----- tables -----------------------------------------------------------------------------------------


def _first_line_middle(entry: _Entry) -> float:
    rects = entry.block.line_rects
    if rects:
        return (rects[0][1] + rects[0][3]) / 2
    return (entry.y0 + entry.y1) / 2


def _rows(entries: list[_Entry]) -> list[list[_Entry]]:
    """Entries grouped by the baseline of their first line (top to bottom), each row left to right."""
    rows: list[list[_Entry]] = []
    start = 0.0
    for entry in sorted(entries, key=_first_line_middle):
        middle = _first_line_middle(entry)
        if not rows or middle - start > 0.5 * entry.size:
            rows.append([])
            start = middle
        rows[-1].append(entry)
    for row in rows:
        row.sort(key=lambda e: e.x0)
    return rows


def _side_by_side(row: list[_Entry]) -> bool:
    return len(row) > 1 and all(b.x0 >= a.x1 - 1 for a, b in zip(row, row[1:], strict=False))


def _tables(entries: list[_Entry], body: float) -> list[_Node]:
    """The page's entries, with the ones that make tables replaced by one :class:`_Grid` each."""
    rows = _rows(entries)
    out: list[_Node] = []
    run: list[list[_Entry]] = []

    def close() -> None:
        grid = _grid(run) if len(run) > 1 else None
        if grid is None:
            out.extend(e for row in run for e in row)
        else:
            out.append(grid)
        run.clear()

    for row in rows:
        if not _side_by_side(row):
            close()
            out.extend(row)
            continue
        if run:
            bottom = max(e.y1 for e in run[-1])
            top = min(e.y0 for e in row)
            if top - bottom > ROW_GAP * max(body, max(e.size for e in row)):
                close()
        run.append(row)
    close()
    return out


def _grid(rows: list[list[_Entry]]) -> _Grid | None:
    """The rows as a table, when their cells fall into two or more columns (the columns of the rows with
    the most cells; a cell belongs to the column it starts in, and cells of a row that start in one
    column are one cell); None when they do not, or when they are columns of running text."""
    cells = [e for row in rows for e in row]
    if sum(e.block.lines for e in cells) > CELL_LINES * len(cells):
        return None
    widest = max(len(row) for row in rows)
    full = [e for row in rows if len(row) == widest for e in row]  # the rows that have every column
    spans: list[list[float]] = []  # the columns: x-extents of their overlapping cells merged
    for entry in sorted(full, key=lambda e: e.x0):
        if spans and entry.x0 < spans[-1][1] - 1:
            spans[-1][1] = max(spans[-1][1], entry.x1)
        else:
            spans.append([entry.x0, entry.x1])
    if len(spans) < 2:
        return None
    starts = [span[0] for span in spans]
    grid: list[list[list[_Entry]]] = []
    for row in rows:
        line: list[list[_Entry]] = [[] for _ in spans]
        column = 0
        for entry in row:  # left to right, as the columns
            while column + 1 < len(spans) and starts[column + 1] <= entry.x0 + 1:
                column += 1
            line[column].append(entry)
        grid.append(line)
    return _Grid(
        grid,
        min(e.x0 for e in cells),
        min(e.y0 for e in cells),
        max(e.x1 for e in cells),
        max(e.y1 for e in cells),
    )


def _table(grid: _Grid) -> Table:
    return Table(
        tuple(
            tuple(tuple(p for entry in cell for p in _paragraphs(entry, 0, split=False)) for cell in row)
            for row in grid.cells
        )
    )


# ----- reading order ---------------------------------------------------------------------------------


def _box(node: _Node) -> tuple[float, float, float, float]:
    return node.x0, node.y0, node.x1, node.y1


def _cut(nodes: list[_Node], axis: int, gap: float) -> list[list[_Node]]:
    """``nodes`` in groups separated by gaps wider than ``gap`` along ``axis`` (0: x, 1: y), in order."""
    ordered = sorted(nodes, key=lambda n: _box(n)[axis])
    groups: list[list[_Node]] = []
    end = 0.0
    for node in ordered:
        box = _box(node)
        if not groups or box[axis] > end + gap:
            groups.append([])
            end = box[axis + 2]
        groups[-1].append(node)
        end = max(end, box[axis + 2])
    return groups


def _cover(nodes: list[_Node]) -> float:
    """The height the nodes cover (overlaps counted once)."""
    total = 0.0
    end = None
    start = 0.0
    for node in sorted(nodes, key=lambda n: n.y0):
        if end is None or node.y0 > end:
            if end is not None:
                total += end - start
            start, end = node.y0, node.y1
        else:
            end = max(end, node.y1)
    if end is not None:
        total += end - start
    return total


def _reading_order(nodes: list[_Node], depth: int = 0) -> list[_Node]:
    """The nodes in reading order (a recursive XY cut; columns left to right, each top to bottom)."""
    if len(nodes) <= 1:
        return list(nodes)
    if depth >= MAX_DEPTH:
        return sorted(nodes, key=lambda n: (n.y0, n.x0))
    columns = _cut(nodes, 0, COLUMN_GUTTER)
    bands = _cut(nodes, 1, 0.0)
    if len(columns) > 1:
        height = max(n.y1 for n in nodes) - min(n.y0 for n in nodes)
        tall = sum(_cover(column) >= COLUMN_COVER * height for column in columns)
        if len(bands) == 1 or tall >= 2:
            return [n for column in columns for n in _reading_order(column, depth + 1)]
    if len(bands) > 1:
        return [n for band in bands for n in _reading_order(band, depth + 1)]
    return sorted(nodes, key=lambda n: (n.y0, n.x0))


# ----- paragraphs ---------------------------------------------------------------------------------


def _runs(entry: _Entry) -> list[Run]:
    """The translation in runs of one look (the pipeline's placeholders read back)."""
    return [
        Run(text, bold=style.bold, italic=style.italic, code=style.code)
        for text, style in pdf_text.runs_of(entry.block, entry.translation)
    ]


def _lines(runs: list[Run]) -> list[list[Run]]:
    """Runs split at line breaks."""
    lines: list[list[Run]] = [[]]
    for run in runs:
        parts = run.text.split("\n")
        for index, part in enumerate(parts):
            if index:
                lines.append([])
            if part:
                lines[-1].append(Run(part, run.bold, run.italic, run.code))
    return lines


def _list_item(runs: list[Run]) -> tuple[list[Run], str | None]:
    """A line's runs without its list marker, and the kind of list (None: no list item). The marker may
    be a run of its own (a bullet from a symbol font)."""
    match = LIST_MARKER.match("".join(run.text for run in runs[:3]))
    if match is None:
        return runs, None
    kind = "bullet" if match["bullet"] else "number"
    cut = match.end() - len(match["pre"])  # characters to drop after the opening bracket, if any
    out: list[Run] = [Run(match["pre"])] if match["pre"] else []
    skip = len(match["pre"])
    for run in runs:
        text = run.text
        if skip:
            taken = min(skip, len(text))
            text, skip = text[taken:], skip - taken
        if cut and not skip:
            taken = min(cut, len(text))
            text, cut = text[taken:], cut - taken
        if text:
            out.append(Run(text, run.bold, run.italic, run.code))
    return out, kind


def _paragraphs(entry: _Entry, level: int, *, split: bool = True) -> list[Paragraph]:
    """An entry as paragraphs: a heading, list items (a line each), or one paragraph (its line breaks
    kept), centred or justified as the source block was. A justified block's line breaks end paragraphs
    (its short lines): a line that ends in a break inside a justified Word paragraph would be stretched to
    the margin."""
    runs = _runs(entry)
    if entry.code:
        return [Paragraph(tuple(runs))]
    align = entry.block.align
    if level:
        return [Paragraph(tuple(_joined(runs)), heading=level, align=align)]
    lines = [line for line in _lines(runs) if line]
    items = [_list_item(line) for line in lines]
    if not split or not any(kind for _, kind in items):
        if align == "justify" and len(lines) > 1:
            return [Paragraph(tuple(line), align=align) for line in lines]
        return [Paragraph(tuple(runs), align=align)] if runs else []
    return [
        Paragraph(tuple(line), list_kind="bullet" if kind == "bullet" else "number" if kind else None)
        for line, kind in items
    ]


def _joined(runs: list[Run]) -> list[Run]:
    """Runs with their line breaks as spaces (a heading is one line)."""
    return [Run(" ".join(run.text.split("\n")), run.bold, run.italic, run.code) for run in runs]
