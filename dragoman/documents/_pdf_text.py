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
the baseline at 0.8 of the size below half the leading). Anything else goes through ``Story``
(:mod:`dragoman.documents._pdf_document`).
"""

from __future__ import annotations

import functools
import math
import unicodedata
from dataclasses import dataclass, field

import pymupdf
from pymupdf import mupdf

from dragoman.documents import _pdf_fonts as fonts
from dragoman.documents._pdf_layout import Block

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
#: The language ``TextWriter.append`` gives text written without one.
_NO_LANGUAGE = mupdf.fz_text_language_from_string(None)


@dataclass
class Metrics:
    """A font loaded once, with the advance of each character met (at size 1) cached."""

    font: pymupdf.Font
    widths: dict[str, float] = field(default_factory=dict)
    #: A monospaced font: ``TextWriter.write_text`` repairs its widths on the page (it must know of it).
    mono: bool = False

    def covers(self, text: str) -> bool:
        """True when the font has every character and none needs shaping (combining marks)."""
        for char in set(text):
            if char in self.widths or char == "\n":
                continue
            if unicodedata.combining(char) or not self.font.has_glyph(ord(char)):
                return False
            self.widths[char] = float(self.font.glyph_advance(ord(char)))
        return True

    def width(self, text: str) -> float:
        return sum(map(self.widths.__getitem__, text))


@functools.cache
def metrics(name: str) -> Metrics:
    font = pymupdf.Font(name)
    if not font.is_writable:
        raise ValueError(f"font {name!r} cannot be written into a PDF")
    return Metrics(font, mono=font.flags["mono"] == 1)


def metrics_for(style: fonts.TextStyle) -> Metrics:
    return metrics(BASE_FONTS.get((style.family, style.bold, style.italic), "helv"))


def writable(block: Block, translation: str, *, rtl: bool) -> bool:
    """True when this module can write the translation (upright, left to right, base-font characters)."""
    if rtl or block.rotate != 0 or not translation.strip():
        return False
    return metrics_for(block.style).covers(translation)


#: A text's paragraphs, each a list of (word, width at size 1).
Measured = list[list[tuple[str, float]]]


def measure(font: Metrics, text: str) -> Measured:
    """The words of ``text`` by paragraph, each with its width (in units of the font size)."""
    width = font.width
    return [[(word, width(word)) for word in paragraph.split(" ")] for paragraph in text.split("\n")]


def wrap(font: Metrics, text: str | Measured, width: float) -> list[str] | None:
    """Greedy lines of at most ``width`` (in units of the font size); None when a word is wider."""
    lines: list[str] = []
    space = font.widths.get(" ") or float(font.font.glyph_advance(32))
    for paragraph in measure(font, text) if isinstance(text, str) else text:
        line, used = "", 0.0
        for word, size in paragraph:
            if size > width:
                return None
            if line and used + space + size <= width:
                line, used = f"{line} {word}", used + space + size
            elif line:
                lines.append(line)
                line, used = word, size
            else:
                line, used = word, size
        lines.append(line)
    return lines


@dataclass
class Laid:
    """A translation laid out: its lines, size and pitch."""

    lines: list[str]
    size: float
    pitch: float
    scale: float


def lay_out(block: Block, translation: str) -> Laid:
    """The translation wrapped into the block's room at the largest size (up to the original) that fits."""
    room = block.room if block.room is not None else block.rect
    font = metrics_for(block.style)
    if not font.covers(translation + " "):
        raise ValueError("lay_out() is for text the base font covers; check writable() first")
    words = measure(font, translation)

    def attempt(scale: float) -> Laid | None:
        size = block.style.size * scale
        lines = wrap(font, words, room.width / size)
        if lines is None or len(lines) * block.line_height * size > room.height + 0.01:
            return None
        return Laid(lines, size, block.line_height * size, scale)

    best = attempt(1.0)
    if best is not None:
        return best
    longest = max(font.width(word) for word in translation.split()) * block.style.size
    area = (
        font.width(translation.replace("\n", " ")) * block.style.size * block.line_height * block.style.size
    )
    high = min(1.0, room.width / longest if longest else 1.0)  # the longest word must fit on a line
    scale = min(high, math.sqrt(room.width * room.height / area) if area else 1.0)
    while best is None and scale > 0.01:
        best = attempt(scale)
        if best is None:
            high, scale = scale, scale * 0.9
    if best is None:  # a box of next to no height: the lines as they are, at the smallest size
        size = block.style.size * 0.01
        return Laid(translation.split("\n"), size, block.line_height * size, 0.01)
    low = best.scale
    while high - low > PRECISION:
        middle = (low + high) / 2
        found = attempt(middle)
        if found is None:
            high = middle
        else:
            best, low = found, middle
    return best


class TextWriters:
    """A page's ``TextWriter`` per colour: text appended, then written onto the page at once."""

    def __init__(self, page: pymupdf.Page) -> None:
        self.page = page
        self.rect = page.rect
        self.writers: dict[int, pymupdf.TextWriter] = {}

    def add(self, block: Block, laid: Laid, *, center: bool) -> None:
        """Append a laid-out translation: what ``TextWriter.append`` does for each line (the position
        taken into PDF space, ``fz_show_string``), without measuring the writer's text after each one."""
        room = block.room if block.room is not None else block.rect
        font = metrics_for(block.style)
        writer = self.writers.get(block.style.color)
        if writer is None:
            writer = self.writers[block.style.color] = pymupdf.TextWriter(self.rect)
        if font.mono:
            writer.used_fonts.add(font.font)
        a, b, c, d, e, f = writer.ictm  # page space -> PDF space
        size = laid.size
        baseline = room.y0 + (laid.pitch - size) / 2 + ASCENT * size
        for line in laid.lines:
            x = room.x0
            if center:
                x += max(0.0, (room.width - font.width(line) * size) / 2)
            if line:
                trm = mupdf.fz_make_matrix(
                    size, 0, 0, size, a * x + c * baseline + e, b * x + d * baseline + f
                )
                mupdf.fz_show_string(writer.this, font.font.this, trm, line, 0, 0, 0, _NO_LANGUAGE)
            baseline += laid.pitch

    def write(self) -> None:
        for colour, writer in self.writers.items():
            rgb = ((colour >> 16) / 255, ((colour >> 8) & 0xFF) / 255, (colour & 0xFF) / 255)
            writer.write_text(self.page, color=rgb)
