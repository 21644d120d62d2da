# mypy: disallow-untyped-calls=False
# (PyMuPDF's functions carry no annotations)
"""The fast way to write a translation into a PDF box: for text MuPDF's base fonts write as it is.

Laying out with MuPDF's HTML engine (``Story``) costs about a millisecond per box, most of it loading the
fonts again for each box. Text in a script that needs no shaping and runs left to right (Latin, Greek,
Cyrillic: the characters the Nimbus fonts behind PDF's base-14 names have, with no combining marks) is
laid out here instead: words wrapped greedily from cached glyph widths (each word measured once per box,
whatever the number of sizes tried), the largest size that fits found by a short search, lines written
with a ``TextWriter`` (one per page and colour) in fonts loaded once. Lines go into the writer through
MuPDF's ``fz_show_string`` directly: ``TextWriter.append`` also measures everything appended so far after
each line, which made a page's lines cost quadratic time (half of the writing). The result matches the HTML
layout: same fonts, first baseline and line pitch (MuPDF sets a line of height ``line-height x size`` with
the baseline at 0.8 of the size below half the leading). A block justified in the source has the spare
room of each of its lines but a paragraph's last shared among the line's spaces; a superscript or subscript
is written in a variant of its font at its own share of the size, on its raised or lowered baseline
(:meth:`Metrics.scripted`). Anything else goes through ``Story`` (:mod:`dragoman.documents._pdf_document`,
with ``text-align:justify`` and ``vertical-align``).
"""

from __future__ import annotations

import functools
import logging
import math
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pymupdf
from pymupdf import mupdf

from dragoman.documents import _inline
from dragoman.documents import _pdf_fonts as fonts
from dragoman.documents._pdf_layout import Block

log = logging.getLogger("dragoman.documents.pdf")

#: Base-14 font names by (CSS family, bold, italic): MuPDF's Nimbus fonts, as the HTML engine uses them.
BASE_FONTS = {
    ("sans-serif", False, False): "helv",
    ("sans-serif", True, False): "hebo",
    ("sans-serif", False, True): "heit",
    ("sans-serif", True, True): "hebi",
    ("Times", False, False): "tiro",
    ("Times", True, False): "tibo",
    ("Times", False, True): "tiit",
    ("Times", True, True): "tibi",
    ("monospace", False, False): "cour",
    ("monospace", True, False): "cobo",
    ("monospace", False, True): "coit",
    ("monospace", True, True): "cobi",
}
#: Where MuPDF's HTML layout puts the baseline in a line box, as a share of the font size (after half
#: the leading).
ASCENT = 0.8
#: Precision of the search for the largest size that fits, as a share of the original size.
PRECISION = 0.02
#: The smallest size a translation is written at, in points, and as a share of the original size: the
#: larger of the two (:func:`legible_scale`).
MIN_LEGIBLE = 6.0
MIN_SHARE = 0.7
#: The width of a space (in units of the font size) for a font without a space glyph.
SPACE = 0.25
#: A height no layout reaches.
UNBOUNDED = 1e6
#: Most word widths a font remembers (:meth:`Metrics.word_width`; the base fonts live as long as the
#: process).
WORDS_KEPT = 20_000
#: The language ``TextWriter.append`` gives text written without one.
_NO_LANGUAGE = mupdf.fz_text_language_from_string(None)


@dataclass
class Metrics:
    """A font loaded once, with the advance of each character met (at size 1) cached."""

    font: pymupdf.Font
    widths: dict[str, float] = field(default_factory=dict)
    #: A monospaced font: ``TextWriter.write_text`` repairs its widths on the page (it must know of it).
    mono: bool = False
    #: A font taken from the document (often a subset): a glyph must also have an outline to count.
    embedded: bool = False
    missing: set[str] = field(default_factory=set)
    #: Whether the font has a space glyph (subsets made by TeX often do not: words are then shown one by
    #: one, spaced by :data:`SPACE`).
    has_space: bool = True
    #: Widths of words met (:meth:`word_width`), at most :data:`WORDS_KEPT`.
    words: dict[str, float] = field(default_factory=dict)
    #: A superscript or subscript (:meth:`scripted`): the size as a share of the line's (widths are
    #: measured at it), the baseline's rise as a share of the line's size.
    ratio: float = 1.0
    rise: float = 0.0
    variants: dict[tuple[float, float], Metrics] = field(default_factory=dict)

    def scripted(self, ratio: float, rise: float) -> Metrics:
        """This font for a superscript or subscript of ``ratio`` the size, raised by ``rise`` sizes."""
        if ratio == 1.0 and rise == 0.0:
            return self
        found = self.variants.get((ratio, rise))
        if found is None:
            found = self.variants[(ratio, rise)] = Metrics(
                self.font, mono=self.mono, embedded=self.embedded, ratio=ratio, rise=rise
            )
        return found

    def covers(self, text: str) -> bool:
        """True when the font has every character and none needs shaping (combining marks)."""
        chars = set(text)
        chars.discard("\n")
        if chars <= self.widths.keys():  # every character met before (most texts, after the first few)
            return True
        for char in chars:
            if char in self.widths or char == "\n":
                continue
            if char == " " and not self.font.has_glyph(32):
                self.has_space = False
                self.widths[char] = SPACE * self.ratio
                continue
            if char in self.missing or unicodedata.combining(char) or not self.font.has_glyph(ord(char)):
                self.missing.add(char)
                return False
            if (
                self.embedded
                and not char.isspace()
                and pymupdf.Rect(self.font.glyph_bbox(ord(char))).is_empty
            ):
                self.missing.add(char)  # a subset keeps the slot of a glyph it dropped, with no outline
                return False
            self.widths[char] = float(self.font.glyph_advance(ord(char))) * self.ratio
        return True

    def width(self, text: str) -> float:
        return sum(map(self.widths.__getitem__, text))

    def word_width(self, word: str) -> float:
        """:meth:`width` of a word, remembered (words recur: each is summed once, not once per box)."""
        found = self.words.get(word)
        if found is None:
            if len(self.words) >= WORDS_KEPT:
                self.words.clear()
            found = self.words[word] = self.width(word)
        return found


@functools.cache
def metrics(name: str) -> Metrics:
    font = pymupdf.Font(name)
    if not font.is_writable:
        raise ValueError(f"font {name!r} cannot be written into a PDF")
    return Metrics(font, mono=font.flags["mono"] == 1)


def metrics_for(style: fonts.TextStyle) -> Metrics:
    return metrics(BASE_FONTS.get((style.family, style.bold, style.italic), "helv"))


#: Font files MuPDF can load from a PDF and write again.
_LOADABLE = ("pfa", "pfb", "ttf", "otf", "cff", "cid")


class FontBook:
    """The document's own fonts, by name (subset prefix removed), loaded from the PDF on first use: a
    translation is written in the font its text was in wherever that font has the glyphs it needs."""

    def __init__(self) -> None:
        self.sources: dict[str, list[tuple[pymupdf.Document, int]]] = {}  # (several subsets of one font)
        self.loaded: dict[int, Metrics | None] = {}

    def note(self, page: pymupdf.Page) -> None:
        """Remember where the fonts of ``page`` are (before its text is removed)."""
        for xref, ext, kind, basefont, *_ in page.get_fonts():
            if ext in _LOADABLE and kind != "Type3":
                found = self.sources.setdefault(fonts.base_name(basefont), [])
                if all(xref != known for _, known in found):
                    found.append((page.parent, xref))

    def get(self, name: str, text: str = "") -> Metrics | None:
        """The document's font ``name`` (the first of its subsets that has every character of ``text``)."""
        for doc, xref in self.sources.get(name, []):
            if xref not in self.loaded:
                self.loaded[xref] = self._load(doc, xref, name)
            font = self.loaded[xref]
            if font is not None and font.covers(text):
                return font
        return None

    @staticmethod
    def _load(doc: pymupdf.Document, xref: int, name: str) -> Metrics | None:
        try:
            buffer = doc.extract_font(xref)[3]
            font = pymupdf.Font(fontbuffer=buffer) if buffer else None
            if font is not None and font.is_writable:
                return Metrics(font, mono=font.flags["mono"] == 1, embedded=True)
        except (RuntimeError, ValueError) as exc:  # a font MuPDF cannot load: the fallback is used
            log.debug("font %s of the document not reusable: %s", name, exc)
        return None


#: A translation in runs of one look each.
Runs = list[tuple[str, fonts.TextStyle]]


def runs_of(block: Block, translation: str) -> Runs:
    """A block's translation in runs: the placeholders read back (``<n>bold</n>`` in the look of the
    original run, ``<n/>`` the code it stood for, as it was; code the translation lost is put back at
    the end)."""
    if not block.tags:
        return [(translation, block.style)]
    size = block.style.size
    nodes, missing = _inline.parse(translation, {n: not tag.single for n, tag in block.tags.items()})
    out: Runs = []

    def walk(children: list[_inline.Node], style: fonts.TextStyle) -> None:
        for node in children:
            if isinstance(node, str):
                out.append((node, style))
                continue
            tag = block.tags[node.id]
            look = replace(tag.style, size=size)
            if tag.single:
                out.append((tag.text, look))
            else:
                walk(node.children, look)

    walk(nodes, block.style)
    for number in missing:
        tag = block.tags[number]
        if tag.single:
            out += [(" ", block.style), (tag.text, replace(tag.style, size=size))]
    return [(text, style) for text, style in out if text]


def plain_text(block: Block, translation: str) -> str:
    """The translation as it reads on the page (placeholders replaced)."""
    return "".join(text for text, _ in runs_of(block, translation))


def pick(style: fonts.TextStyle, text: str, book: FontBook | None) -> Metrics | None:
    """The font to write ``text`` in: the document's own when it has the glyphs, else the base font of the
    same class (serif, sans, mono; weight and slant); None when neither has them. A superscript or
    subscript gets the font's variant at its size and rise (:meth:`Metrics.scripted`)."""
    found: Metrics | None = None
    if book is not None and style.font:
        found = book.get(style.font, text)
    if found is None:
        base = metrics_for(style)
        found = base if base.covers(text) else None
    if found is None or (style.ratio == 1.0 and style.rise == 0.0):
        return found
    variant = found.scripted(style.ratio, style.rise)
    return variant if variant.covers(text) else None


def fonts_for(runs: Runs, book: FontBook | None) -> dict[fonts.TextStyle, Metrics] | None:
    """One font for each look of the runs; None when some look's text is not writable here."""
    texts: dict[fonts.TextStyle, str] = {}
    for text, style in runs:
        texts[style] = texts.get(style, "") + text
    chosen = {}
    for style, text in texts.items():
        font = pick(style, text + " ", book)
        if font is None:
            return None
        chosen[style] = font
    return chosen


#: A translation's runs and the font of each look: what :func:`lay_out` works from.
Fitted = tuple[Runs, dict[fonts.TextStyle, Metrics]]


def fitted(block: Block, translation: str, *, rtl: bool, book: FontBook | None = None) -> Fitted | None:
    """The runs of a translation this module can write (upright, left to right, characters of the base
    fonts or of the document's own) and their fonts, for :func:`lay_out`; None when it cannot."""
    if rtl or block.rotate != 0 or not translation.strip():
        return None
    runs = runs_of(block, translation)
    chosen = fonts_for(runs, book)
    return None if chosen is None else (runs, chosen)


def writable(block: Block, translation: str, *, rtl: bool, book: FontBook | None = None) -> bool:
    """True when this module can write the translation (upright, left to right, characters of the base
    fonts or of the document's own)."""
    return fitted(block, translation, rtl=rtl, book=book) is not None


#: A piece of a word: its text, font and colour.
Piece = tuple[str, Metrics, int]
#: A word (its pieces) and its width at size 1.
Word = tuple[list[Piece], float]


def measure_runs(runs: Runs, chosen: dict[fonts.TextStyle, Metrics]) -> list[list[Word]]:
    """The words of the runs by paragraph, each with its width (in units of the font size)."""
    paragraphs: list[list[list[Piece]]] = [[[]]]
    for text, style in runs:
        font = chosen[style]
        for index, part in enumerate(text.split("\n")):
            if index:
                paragraphs.append([[]])
            for position, word in enumerate(part.split(" ")):
                if position:
                    paragraphs[-1].append([])
                if word:
                    paragraphs[-1][-1].append((word, font, style.color))
    return [[(pieces, _word_width(pieces)) for pieces in paragraph] for paragraph in paragraphs]


def _word_width(pieces: list[Piece]) -> float:
    if len(pieces) == 1:  # (most words: one font) the sum below, of one width
        return 0 + pieces[0][1].word_width(pieces[0][0])
    return sum(font.width(text) for text, font, _ in pieces)


def _break(word: Word, width: float) -> list[Word]:
    """A word wider than a line in parts that fit (character by character; at least one a part)."""
    parts: list[Word] = []
    pieces: list[Piece] = []
    used = 0.0
    for text, font, colour in word[0]:
        for char in text:
            advance = font.widths[char]
            if pieces and used + advance > width:
                parts.append((pieces, used))
                pieces, used = [], 0.0
            if pieces and pieces[-1][1] is font and pieces[-1][2] == colour:
                pieces[-1] = (pieces[-1][0] + char, font, colour)
            else:
                pieces.append((char, font, colour))
            used += advance
    parts.append((pieces, used))
    return parts


def wrap_words(
    paragraphs: list[list[Word]],
    width: float,
    space: float,
    *,
    split: bool = False,
    ends: list[int] | None = None,
) -> list[list[Word]] | None:
    """Greedy lines of at most ``width`` (in units of the font size); None when a word is wider (unless
    ``split``: then it is broken where the line ends). ``ends`` gets the number of each line that ends a
    paragraph."""
    lines: list[list[Word]] = []
    for paragraph in paragraphs:
        line: list[Word] = []
        used = 0.0
        for word in paragraph:
            parts = [word]
            if word[1] > width:
                if not split:
                    return None
                parts = _break(word, width)
            for part in parts:
                if line and used + space + part[1] <= width:
                    line.append(part)
                    used += space + part[1]
                elif line:
                    lines.append(line)
                    line, used = [part], part[1]
                else:
                    line, used = [part], part[1]
        lines.append(line)
        if ends is not None:
            ends.append(len(lines) - 1)
    return lines


@dataclass
class Laid:
    """A translation laid out: its lines, size and pitch; each line's pieces with their offsets (in units
    of the size); whether it runs past its room (at the smallest legible size)."""

    lines: list[str]
    size: float
    pitch: float
    scale: float
    pieces: list[list[tuple[float, str, Metrics, int]]] = field(default_factory=list)
    widths: list[float] = field(default_factory=list)
    overflow: bool = False
    room: pymupdf.Rect | None = None
    words: list[list[Word]] = field(default_factory=list)  # the lines' words, until they are placed
    ends: list[int] = field(default_factory=list)  # the lines that end a paragraph (not justified)


def _positioned(line: list[Word], space: float) -> tuple[str, list[tuple[float, str, Metrics, int]], float]:
    """A line's text, its pieces at their offsets (pieces of one font and colour joined across spaces),
    and its width."""
    first = next((parts[0] for parts, _ in line if parts), None)
    if first is None:
        return " ".join("" for _ in line), [], space * max(0, len(line) - 1)
    font, colour = first[1], first[2]
    if font.has_space and font.widths.get(" ") == space:  # one font and colour (most lines): one piece
        texts = []
        for parts, _ in line:
            if len(parts) == 1:  # (most words)
                if parts[0][1] is not font or parts[0][2] != colour:
                    break
                texts.append(parts[0][0])
            elif all(part[1] is font and part[2] == colour for part in parts):
                texts.append("".join(part[0] for part in parts))
            else:
                break
        else:
            text = " ".join(texts)
            return (
                text,
                [(0.0, text, font, colour)],
                sum(width for _, width in line) + space * (len(line) - 1),
            )
    pieces: list[tuple[float, str, Metrics, int]] = []
    x = 0.0
    words = []
    for index, (parts, width) in enumerate(line):
        if index:
            x += space
        words.append("".join(text for text, _, _ in parts))
        offset = x
        for part_index, (text, font, colour) in enumerate(parts):
            last = pieces[-1] if pieces else None
            same = last is not None and last[2] is font and last[3] == colour
            if same and part_index:  # the next piece of a word, in the same font
                pieces[-1] = (last[0], last[1] + text, font, colour)  # type: ignore[index]
            elif same and font.has_space and font.widths.get(" ") == space:  # the next word
                pieces[-1] = (last[0], last[1] + " " + text, font, colour)  # type: ignore[index]
            else:
                pieces.append((offset, text, font, colour))
            offset += font.width(text)
        x += width
    return " ".join(words), pieces, x


def legible_scale(size: float, *, painted: bool = False) -> float:
    """The smallest scale a translation of text of ``size`` points is written at: :data:`MIN_LEGIBLE`
    points or :data:`MIN_SHARE` of the original, whichever is larger (never larger than the original).
    Text recognised in an image (``painted``: it cannot spill past the area painted over, and its size is
    an estimate) may go down to :data:`MIN_LEGIBLE` points."""
    if size <= 0:
        return 1.0
    return min(1.0, MIN_LEGIBLE / size if painted else max(MIN_SHARE, MIN_LEGIBLE / size))


def lay_out(
    block: Block,
    translation: str,
    book: FontBook | None = None,
    *,
    spill: Callable[[], pymupdf.Rect] | None = None,
    fit: Fitted | None = None,
) -> Laid:
    """The translation wrapped into the block's room at the largest size (up to the original) that fits,
    never below the legible size (:func:`legible_scale`): when it does not fit there it reflows into
    ``spill`` (the room grown downwards), words too long for a line broken; what still does not fit runs
    past the room (``overflow``). ``fit``: what :func:`fitted` gave for this translation (else found
    again)."""
    if fit is None:
        runs = runs_of(block, translation)
        chosen = fonts_for(runs, book)
    else:
        runs, chosen = fit
    if chosen is None:
        raise ValueError("lay_out() is for text the base or own fonts cover; check writable() first")
    first = chosen.get(block.style) or next(iter(chosen.values()))
    space = first.widths.get(" ") or float(first.font.glyph_advance(32))
    words = measure_runs(runs, chosen)
    floor = legible_scale(block.style.size, painted=block.paint_over)

    def attempt(scale: float, room: pymupdf.Rect, split: bool = False) -> Laid | None:
        """The lines at ``scale`` when they fit (their pieces are placed by :func:`finished`)."""
        size = block.style.size * scale
        ends: list[int] = []
        lines = wrap_words(words, room.width / size, space, split=split, ends=ends)
        if lines is None or len(lines) * block.line_height * size > room.height + 0.01:
            return None
        return Laid([], size, block.line_height * size, scale, room=room, words=lines, ends=ends)

    def finished(laid: Laid) -> Laid:
        ends = set(laid.ends)
        full = laid.room.width / laid.size if laid.room is not None else 0.0
        for number, line in enumerate(laid.words):
            gap = space
            if block.justified and number not in ends and len(line) > 1:
                # the line's spare room shared among its spaces: it ends at the room's right edge
                used = sum(width for _, width in line) + space * (len(line) - 1)
                gap += max(0.0, full - used) / (len(line) - 1)
            text, pieces, width = _positioned(line, gap)
            laid.lines.append(text)
            laid.pieces.append(pieces)
            laid.widths.append(width)
        laid.words = []
        return laid

    def search(room: pymupdf.Rect) -> Laid | None:
        best = attempt(1.0, room)
        if best is not None:
            return best
        longest = max((width for paragraph in words for _, width in paragraph), default=0.0)
        area = sum(width + space for paragraph in words for _, width in paragraph)
        area *= block.style.size * block.line_height * block.style.size
        high = min(1.0, room.width / (longest * block.style.size) if longest else 1.0)
        scale = min(high, math.sqrt(room.width * room.height / area) if area else 1.0)
        while best is None and scale > floor:
            best = attempt(scale, room)
            if best is None:
                high, scale = scale, scale * 0.9
        if best is None:
            best = attempt(floor, room)
            if best is None:
                return None
        low = best.scale
        while high - low > PRECISION:
            middle = (low + high) / 2
            found = attempt(middle, room)
            if found is None:
                high = middle
            else:
                best, low = found, middle
        return best

    own = block.room if block.room is not None else block.rect
    best = search(own)
    if best is not None:
        return finished(best)
    wider = spill() if spill is not None else own  # (found only when needed: it looks at the whole page)
    if wider != own:
        best = search(wider)
        if best is not None:
            return finished(best)
    best = attempt(floor, wider, split=True)
    if best is not None:
        return finished(best)
    best = attempt(floor, pymupdf.Rect(wider.x0, wider.y0, wider.x1, wider.y0 + UNBOUNDED), split=True)
    assert best is not None  # (any height: words are broken to the width)
    best.overflow = True
    return finished(best)


class TextWriters:
    """A page's ``TextWriter`` per colour: text appended, then written onto the page at once."""

    def __init__(self, page: pymupdf.Page) -> None:
        self.page = page
        self.rect = page.rect
        self.writers: dict[int, pymupdf.TextWriter] = {}
        self.ictm: dict[int, tuple[float, ...]] = {}  # each writer's page space -> PDF space, as a tuple

    def add(self, block: Block, laid: Laid, *, center: bool) -> None:
        """Append a laid-out translation: what ``TextWriter.append`` does for each line (the position
        taken into PDF space, ``fz_show_string``), without measuring the writer's text after each one."""
        room = laid.room if laid.room is not None else block.room if block.room is not None else block.rect
        size = laid.size
        baseline = room.y0 + (laid.pitch - size) / 2 + ASCENT * size
        for pieces, width in zip(laid.pieces, laid.widths, strict=True):
            x = room.x0
            if center:
                x += max(0.0, (room.width - width * size) / 2)
            for offset, line, font, colour in pieces:
                writer = self.writers.get(colour)
                if writer is None:
                    writer = self.writers[colour] = pymupdf.TextWriter(self.rect)
                    self.ictm[colour] = tuple(writer.ictm)
                if font.mono and not font.embedded:
                    # (the repair finds fonts by name: a document's own fonts may share one, as the
                    # Computer Modern fonts do, and a proportional one would be made monospaced)
                    writer.used_fonts.add(font.font)
                a, b, c, d, e, f = self.ictm[colour]  # page space -> PDF space
                left = x + offset * size
                at = baseline - font.rise * size  # (a superscript's raised, a subscript's lowered)
                scaled = size * font.ratio
                trm = mupdf.fz_make_matrix(scaled, 0, 0, scaled, a * left + c * at + e, b * left + d * at + f)
                mupdf.fz_show_string(writer.this, font.font.this, trm, line, 0, 0, 0, _NO_LANGUAGE)
            baseline += laid.pitch

    def write(self) -> None:
        for colour, writer in self.writers.items():
            rgb = ((colour >> 16) / 255, ((colour >> 8) & 0xFF) / 255, (colour & 0xFF) / 255)
            writer.write_text(self.page, color=rgb)
