"""Plain text (``.txt``): the text through the engine, which keeps paragraphs, line breaks and surrounding
whitespace exactly. UTF-8 (with or without BOM) and UTF-16 and UTF-32 with a BOM are read; the output keeps
the input's encoding and line endings.

A text longer than :data:`CHUNK_CHARS` goes to the translator in pieces (the engine takes at most
``MAX_TEXT_CHARS`` per text): cut at a paragraph break, else at a line break, else at a space, else
anywhere, always in the second half of the room left, so every piece but the last holds at least half of
:data:`CHUNK_CHARS` and cutting costs time linear in the text. The whitespace at each cut is kept as it is,
between the translated pieces; progress counts pieces.

Hard-wrapped paragraphs (lines broken at a fixed width, as in READMEs, e-mails and man-page-like text) are
joined before translation, so a sentence running over two lines is translated once, and the translation is
wrapped again to the paragraph's width. Two neighbouring lines are taken for one wrapped paragraph when the
first is at least :data:`WRAP_FILL` of the paragraph block's width (its longest line, at most
:data:`WRAP_MAX_WIDTH` characters), the next line's first word would not have fitted on it (so the break was
the wrapper's, not the author's), the first does not end a sentence, the next does not start a list item
(``-``, ``*``, ``•``, ``1.``, ``a)``), nor with a capital or a digit after a line that is not prose ending
in a lower-case word (lists of names, dates), their indentation matches (a list item's continuation lines
align under its text), and neither looks like code or a table (tabs or runs of spaces inside the text,
``|`` columns, shell prompts, lines ending in ``{``, ``}``, ``;`` or ``\\``, few letters). The first
line's indentation and list marker stay; continuation lines get the indentation they had; runs of spaces
between words are kept."""

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
#: The widest a hard-wrapped paragraph's lines are (longer lines are the author's, not a wrapper's) ...
WRAP_MAX_WIDTH = 100
#: ... the narrowest it is, and how full its lines but the last are (a share of its width).
WRAP_MIN_WIDTH = 30
WRAP_FILL = 0.6

# UTF-32 before UTF-16: the UTF-32 little-endian BOM starts with UTF-16's.
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


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


_ITEM = re.compile(
    r"[ \t]*+(?:[-*+\u2022\u2023\u25e6\u2013\u2014]|\d{1,3}[.)]|[A-Za-z][.)]|\(\w{1,3}\))[ \t]+"
)
_CODE_LINE = re.compile(
    r"\t|[^.!?:\s][ ]{2,}\S|(?<! )[ ]{3,}\S|\|.*\||[{};\\]$|^(?:[$#%>] |>>>|\+[-=]{2}|[-=_*]{3,}$)"
)
_LETTER = re.compile(r"[^\W\d_]")
_SPACED_WORD = re.compile(r"(?<!\s)(\s*)(\S+)")  # tried only where a space run starts: linear
_SENTENCE_END = (".", "!", "?", ":", ";", "\u2026", "\u3002", "\uff01", "\uff1f")
_CLOSING = "\"')]}\u201d\u2019\u00bb"


def _codey(line: str) -> bool:
    """Whether a line looks like code, a table or a drawing rather than wrapped prose."""
    body = line.strip()
    if _CODE_LINE.search(body):  # inside the text (indentation is compared apart)
        return True
    letters = len(_LETTER.findall(body))
    return letters * 2 < len(body.replace(" ", ""))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _wraps_into(line: str, following: str, width: int) -> bool:
    """Whether ``following`` continues ``line`` in a paragraph hard-wrapped at ``width``."""
    text = line.rstrip()
    word = following.split(maxsplit=1)[0]
    return (
        len(text) >= WRAP_FILL * width
        and len(text) + 1 + len(word) > width
        and not text.rstrip(_CLOSING).endswith(_SENTENCE_END)
        and not _ITEM.match(following)
        and (_prose_before_capital(text) or not (word[0].isupper() or word[0].isdigit()))
    )


def _prose_before_capital(text: str) -> bool:
    """Whether a line may go on with a capital or a digit (``included in the`` / ``POSIX P1003.2``): it
    ends with a lower-case word and holds several (a list of names or dates does not)."""
    return text[-1].islower() and text.count(" ") >= 5


def _block_width(lines: list[str]) -> int | None:
    """The width a block of non-blank lines is wrapped at (its longest line), or None when it is not one."""
    width = max(len(line.rstrip()) for line in lines)
    return width if WRAP_MIN_WIDTH <= width <= WRAP_MAX_WIDTH else None


def unwrap(text: str) -> tuple[str, dict[int, tuple[int, str]]]:
    """``text`` with each hard-wrapped paragraph joined onto one line, and for each joined line (its index
    among the new text's lines) the width to wrap it at and the indentation of its continuation lines.
    Linear in the text."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    joined: dict[int, tuple[int, str]] = {}
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            out.append(lines[i])
            i += 1
            continue
        start = i
        while i < len(lines) and lines[i].strip():
            i += 1
        block = [line.rstrip("\r\n") for line in lines[start:i]]
        width = _block_width(block) if len(block) > 1 else None
        codey = [_codey(line) for line in block] if width else []
        k = 0
        while k < len(block):
            end = k + 1
            if width:
                item = _ITEM.match(block[k])
                hang = item.end() if item else _indent(block[k])
                while (
                    end < len(block)
                    and not codey[end - 1]
                    and not codey[end]
                    and _wraps_into(block[end - 1], block[end], width)
                    and (
                        _indent(block[end]) in (hang, _indent(block[k]))
                        if end == k + 1
                        else _indent(block[end]) == _indent(block[k + 1])
                    )
                ):
                    end += 1
            if end == k + 1:
                out.append(lines[start + k])
            else:
                parts = [block[k].rstrip()] + [line.strip() for line in block[k + 1 : end]]
                joined[len(out)] = (width or 0, block[k + 1][: _indent(block[k + 1])])
                out.append(" ".join(parts) + (lines[start + end - 1][len(block[end - 1]) :]))
            k = end
    return "".join(out), joined


def rewrap(translated: str, joined: dict[int, tuple[int, str]], line_end: str = "\n") -> str:
    """``translated`` (of the text :func:`unwrap` gave) with each joined line wrapped again; as it is when
    the translation does not have the same lines."""
    if not joined:
        return translated
    lines = translated.splitlines(keepends=True)
    if max(joined) >= len(lines):
        return translated
    for index, (width, continuation) in joined.items():
        line = lines[index]
        body = line.rstrip("\r\n")
        ending, newline = line[len(body) :], (line[len(body) :] or line_end)
        words = _SPACED_WORD.findall(body)  # (the spaces before, the word): double spaces are kept
        if not words:
            continue
        wrapped: list[str] = []
        current = "".join(words[0])
        for spaces, word in words[1:]:
            if len(current) + len(spaces) + len(word) > width:
                wrapped.append(current)
                current = continuation + word
            else:
                current += spaces + word
        wrapped.append(current)
        lines[index] = newline.join(wrapped) + ending
    return "".join(lines)


class PlainTextHandler:
    name = "txt"
    suffixes: tuple[str, ...] = (".txt", ".text", "")

    def sniff(self, head: bytes, path: Path) -> bool:
        return text_encoding(head) is not None

    def translate(
        self, source: Path, output: Path, translate: TextTranslator, progress: ProgressCallback | None
    ) -> DocumentReport:
        text, encoding = read_text(source)
        unwrapped, joined = unwrap(text)
        pieces = split_text(unwrapped)
        if len(pieces) == 1:
            translated = translate([unwrapped])[0]
        else:
            parts: list[str] = []
            for index, (piece, separator) in enumerate(pieces):
                parts += [*translate([piece], done=index, total=len(pieces)), separator]
            translated = "".join(parts)
        line_end = "\r\n" if "\r\n" in text[:10_000] else "\n"
        translated = rewrap(translated, joined, line_end)
        output.write_bytes(translated.encode(encoding))
        return DocumentReport(
            segments=sum(1 for piece, _ in pieces if piece.strip()),
            characters=len(text),
            extracted_text=text,
            translated_text=translated,
        )
