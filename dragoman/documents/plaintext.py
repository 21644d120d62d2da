"""Plain text (``.txt``): the text through the engine, which keeps paragraphs, line breaks and surrounding
whitespace exactly. UTF-8 (with or without BOM) and UTF-16 with a BOM are read; the output keeps the input's
encoding and line endings.

A text longer than :data:`CHUNK_CHARS` goes to the translator in pieces (the engine takes at most
``MAX_TEXT_CHARS`` per text): cut at a paragraph break, else at a line break, else at a space, else
anywhere, always in the second half of the room left, so every piece but the last holds at least half of
:data:`CHUNK_CHARS` and cutting costs time linear in the text. The whitespace at each cut is kept as it is,
between the translated pieces; progress counts pieces."""

from __future__ import annotations

import codecs
import re
from pathlib import Path

from dragoman.documents.base import DocumentReport, TextTranslator
from dragoman.errors import DocumentFormatError
from dragoman.limits import MAX_TEXT_CHARS
from dragoman.progress import ProgressCallback

#: Characters of plain text handed to the translator as one text (well under the engine's per-text limit).
CHUNK_CHARS = min(100_000, MAX_TEXT_CHARS // 2)

_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def text_encoding(head: bytes) -> str | None:
    """The encoding of text content, or None when the bytes are not text (NULs, invalid UTF-8)."""
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return encoding
    if b"\x00" in head:
        return None
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a character cut at the end of the sniffed bytes
            return None
    return "utf-8"


def read_text(path: Path) -> tuple[str, str]:
    """The text of a file and its encoding; a typed error when it is not text."""
    data = path.read_bytes()
    encoding = text_encoding(data[:8192])
    if encoding is None:
        raise DocumentFormatError(f"{path.name} is not UTF-8 or UTF-16 text")
    try:
        return data.decode(encoding), encoding
    except UnicodeDecodeError as exc:
        raise DocumentFormatError(f"{path.name} is not valid {encoding} text: {exc}") from exc


_BLANKS = " \t\r\n\f\v"
_BLANK_RUN = re.compile(r"[ \t\r\n\f\v]*")


def _cut(text: str, start: int, end: int) -> int:
    """Where to cut ``text`` between ``start`` and ``end`` (exclusive): the last paragraph break, else line
    break, else space in the second half of the range; else ``end``."""
    low = start + (end - start) // 2
    paragraph = max(text.rfind("\n\n", low, end), text.rfind("\n\r\n", low, end))
    if paragraph > start:
        return paragraph
    for mark in ("\n", " ", "\t"):
        found = text.rfind(mark, low, end)
        if found > start:
            return found
    return end


def split_text(text: str, limit: int = CHUNK_CHARS) -> list[tuple[str, str]]:
    """``text`` as (piece, whitespace after it) pairs, each piece at most ``limit`` characters; joined back
    they are ``text``. A text within ``limit`` is one piece."""
    if len(text) <= limit:
        return [(text, "")]
    out: list[tuple[str, str]] = []
    position, size = 0, len(text)
    while size - position > limit:
        cut = _cut(text, position, position + limit)
        piece = text[position:cut].rstrip(_BLANKS)
        blanks = _BLANK_RUN.match(text, cut)
        after = blanks.end() if blanks else cut
        out.append((piece, text[position + len(piece) : after]))
        position = after
    if position < size:
        piece = text[position:].rstrip(_BLANKS)
        out.append((piece, text[position + len(piece) :]))
    return out


class PlainTextHandler:
    name = "txt"
    suffixes: tuple[str, ...] = (".txt", ".text", "")

    def sniff(self, head: bytes, path: Path) -> bool:
        return text_encoding(head) is not None

    def translate(
        self, source: Path, output: Path, translate: TextTranslator, progress: ProgressCallback | None
    ) -> DocumentReport:
        text, encoding = read_text(source)
        pieces = split_text(text)
        if len(pieces) == 1:
            translated = translate([text])[0]
        else:
            parts: list[str] = []
            for index, (piece, separator) in enumerate(pieces):
                parts += [*translate([piece], done=index, total=len(pieces)), separator]
            translated = "".join(parts)
        output.write_bytes(translated.encode(encoding))
        return DocumentReport(
            segments=sum(1 for piece, _ in pieces if piece.strip()),
            characters=len(text),
            extracted_text=text,
            translated_text=translated,
        )
