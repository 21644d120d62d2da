"""Markdown (``.md``): prose translated, code, link targets and front matter untouched, markers kept.

A line-based reader (CommonMark's block rules, simplified; no dependency) splits the document into:

* untouched lines: YAML/TOML front matter, fenced and indented code, raw HTML blocks (``<script>``,
  ``<pre>``, ``<style>``, comments), link reference definitions, thematic breaks, setext underlines, table
  delimiter rows, blank lines;
* translated texts: paragraphs (list items and block quotes included, with their markers), ATX headings,
  table cells (one text per cell), footnote definitions, and the text of other HTML blocks (their tags
  masked).

A paragraph is translated whole: its soft-wrapped lines are joined with spaces, and the translation is
wrapped again to the width of the original lines (a paragraph on one line stays on one line), never at a
place where a new line would start another block (``- ``, ``1. ``, ``#``, ``>``...); hard line breaks (two
trailing spaces or a backslash) split it into texts of their own. Inside a text, inline markup becomes
numbered placeholders (``_markdown_inline``): ``**x**``, ``*x*``, ``~~x~~``, ``[x](url)``,
``[x][ref]`` and ``![alt](src)`` become ``<n>x</n>`` (the text and alt text are translated, the markers and
targets put back as written); inline code, autolinks, raw HTML tags and footnote references become
``<n/>`` and come back unchanged. Line endings and the encoding are kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from dragoman.documents import _inline
from dragoman.documents._markdown_inline import (
    HTML_TAG_SRC,
    KEEP,
    Budget,
    InlineMasker,
    Unit,
    code_span_end,
    label,
)
from dragoman.documents.base import DocumentReport, TextTranslator
from dragoman.documents.plaintext import read_text, text_encoding
from dragoman.errors import DocumentFormatError
from dragoman.progress import ProgressCallback

_FENCE = re.compile(r"(`{3,}|~{3,})(.*)$")
_BLOCKQUOTE = re.compile(r"(?:[ ]{0,3}>[ ]?)+")
_LIST_ITEM = re.compile(r"([-+*]|\d{1,9}[.)])([ \t]+|$)(\[[ xX]\][ \t]+)?")
_THEMATIC = re.compile(r"(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$")
_SETEXT = re.compile(r"(?:=+|-+)[ \t]*$")
_ATX_OPEN = re.compile(r"#{1,6}(?:[ \t]+|$)")
# Possessive quantifiers: a cell's trailing spaces are never given back (no quadratic backtracking).
_TABLE_DELIMITER = re.compile(r"\|?[ \t]*+:?-++:?[ \t]*+(?:\|[ \t]*+:?-++:?[ \t]*+)*+\|?[ \t]*$")
_REFERENCE = re.compile(r"[ ]{0,3}\[(?!\^)((?:[^\]\\]|\\.)+)\]:[ \t]*(\S?)")
#: A link reference definition's title alone on the line after it: ``"Title"``, ``'Title'``, ``(Title)``.
_REFERENCE_TITLE = re.compile(r"[ \t]*+(?:\"[^\"]*\"|'[^']*'|\([^()]*\))[ \t]*$")
_FOOTNOTE = re.compile(r"\[\^[^\]]+\]:[ \t]*")
_HTML_RAW = (
    (
        re.compile(r"<(?:script|pre|style|textarea)(?:\s|>|$)", re.I),
        re.compile(r"</(?:script|pre|style|textarea)>", re.I),
    ),
    (re.compile(r"<!--"), re.compile(r"-->")),
    (re.compile(r"<\?"), re.compile(r"\?>")),
    (re.compile(r"<!\[CDATA\["), re.compile(r"\]\]>")),
    (re.compile(r"<![A-Za-z]"), re.compile(r">")),
)
_HTML_BLOCK_NAMES = (
    "address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd|details|dialog|dir|"
    "div|dl|dt|fieldset|figcaption|figure|footer|form|frame|frameset|h[1-6]|head|header|hr|html|iframe|"
    "legend|li|link|main|menu|menuitem|nav|noframes|ol|optgroup|option|p|param|search|section|summary|"
    "table|tbody|td|tfoot|th|thead|title|tr|track|ul"
)
_HTML_BLOCK = re.compile(rf"</?(?:{_HTML_BLOCK_NAMES})(?:\s|/?>|$)", re.I)
_HTML_LONE_TAG = re.compile(rf"(?:{HTML_TAG_SRC})[ \t]*$")
#: What may not begin a line made by wrapping: it would start another block.
_BAD_LINE_START = re.compile(
    r"#{1,6}(?:\s|$)|[-+*](?:\s|$)|\d{1,9}[.)](?:\s|$)|[>|<=]|[-=]+\s*$|`{3}|~{3}|\[[^\]]*\]:"
)
_LETTER = re.compile(r"[^\W\d_]")


def _width(whitespace: str) -> int:
    return len(whitespace.expandtabs(4))


# --- blocks -------------------------------------------------------------------------------------------


@dataclass
class _Paragraph:
    """Lines of one paragraph, and the prefix (quote markers, list marker, indentation) of each."""

    lines: list[tuple[str, str, str]] = field(default_factory=list)  # (prefix, content, line ending)


@dataclass
class _Text:
    """A place in the output filled with a unit's translation: ``before`` + text + ``after``."""

    unit: int
    before: str
    after: str
    width: int = 0  # wrap to this width (0: keep on one line)
    continuation: str = ""  # the prefix of wrapped lines
    line_end: str = "\n"
    pad_to: int = 0  # a table cell: pad with spaces up to this width


class _Reader:
    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(keepends=True)
        self.masker = InlineMasker(_inline.numbering(text), _references(self.lines))
        self.units: list[Unit] = []
        self.items: list[str | _Text] = []
        self.paragraph: _Paragraph | None = None

    def unit(self, unit: Unit) -> int | None:
        """Register a text for the engine; None when it has nothing to translate."""
        visible = _inline.TAG.sub("", unit.masked)
        if not _LETTER.search(visible):
            return None
        self.units.append(unit)
        return len(self.units) - 1

    def raw(self, line: str) -> None:
        self.items.append(line)

    def flush(self) -> None:
        paragraph, self.paragraph = self.paragraph, None
        if paragraph is None:
            return
        first_prefix = paragraph.lines[0][0]
        continuation = re.sub(r"[^>\s]", " ", first_prefix)
        group: list[tuple[str, str, str]] = []
        for line in paragraph.lines:
            group.append(line)
            content = line[1]
            if content.endswith(("  ", "\\")) or line is paragraph.lines[-1]:
                self._paragraph_group(group, continuation)
                group = []

    def _paragraph_group(self, group: list[tuple[str, str, str]], continuation: str) -> None:
        last = group[-1][1]
        body = last.rstrip()
        hard_break = last[len(body) :] if last.endswith("  ") else ""
        if body.endswith("\\") and not hard_break:
            body, hard_break = body[:-1], "\\"
        contents = [c.strip() for _, c, _ in group[:-1]] + [body.strip()]
        number = self.unit(self.masker.mask(" ".join(contents)))
        if number is None:
            self.items.extend(prefix + content + end for prefix, content, end in group)
            return
        prefix, content, end = group[0]
        lead = content[: len(content) - len(content.lstrip())]
        width = max(len(p + c.rstrip()) for p, c, _ in group) if len(group) > 1 else 0
        self.items.append(
            _Text(number, prefix + lead, hard_break + group[-1][2], width, continuation, end or "\n")
        )

    def text_line(self, before: str, text: str, after: str) -> None:
        number = self.unit(self.masker.mask(text))
        self.items.append(before + text + after if number is None else _Text(number, before, after))

    def table_row(self, prefix: str, row: str, end: str) -> None:
        self.items.append(prefix)
        for index, cell in enumerate(_split_cells(row)):
            if index:
                self.items.append("|")
            core = cell.strip()
            lead = cell[: len(cell) - len(cell.lstrip())]
            trail = cell[len(lead) + len(core) :]
            number = self.unit(self.masker.mask(core)) if core else None
            if number is None:
                self.items.append(cell)
            else:
                self.items.append(_Text(number, lead, trail, pad_to=len(cell)))
        self.items.append(end)

    def read(self) -> None:
        lines = self.lines
        i = _front_matter_end(lines)
        self.items.extend(lines[:i])
        stack: list[int] = []  # content columns of the open list items
        while i < len(lines):
            line = lines[i]
            body = line.rstrip("\r\n")
            end = line[len(body) :]
            quote = m.group() if (m := _BLOCKQUOTE.match(body)) else ""
            rest = body[len(quote) :]
            stripped = rest.lstrip(" \t")
            if self.paragraph is not None and quote.count(">") > self.paragraph.lines[0][0].count(">"):
                self.flush()  # a block quote interrupts a paragraph (fewer markers: a lazy continuation)
            if not stripped:
                self.flush()
                self.raw(line)
                i += 1
                continue
            indent = _width(rest[: len(rest) - len(stripped)])
            in_list = bool(stack)  # a sibling item may follow a paragraph; a new list must start at 1
            while stack and indent < stack[-1]:
                stack.pop()
            relative = indent - (stack[-1] if stack else 0)
            lead = quote + rest[: len(rest) - len(stripped)]
            if relative >= 4:
                if self.paragraph is not None:
                    self.paragraph.lines.append((lead, stripped, end))
                else:
                    self.raw(line)
                i += 1
                continue
            if fence := _FENCE.match(stripped):
                if fence.group(1)[0] == "`" and "`" in fence.group(2):
                    pass  # an inline code span, not a fence
                else:
                    self.flush()
                    i = self._skip_fence(i, fence.group(1))
                    continue
            raw_end = next((close for opening, close in _HTML_RAW if opening.match(stripped)), None)
            if raw_end is not None:
                self.flush()
                i = self._skip_until(i, raw_end)
                continue
            if _HTML_BLOCK.match(stripped) or (self.paragraph is None and _HTML_LONE_TAG.match(stripped)):
                self.flush()
                i = self._html_block(i)
                continue
            if self.paragraph is not None and _SETEXT.match(stripped):
                self.flush()
                self.raw(line)
                i += 1
                continue
            if self.paragraph is None and (definition := _REFERENCE.match(stripped)):
                self.flush()
                i = self._definition(i, bool(definition.group(2)))
                continue
            if _THEMATIC.match(stripped):
                self.flush()
                self.raw(line)
                i += 1
                continue
            if heading := _atx(stripped):
                self.flush()
                self.text_line(lead + heading[0], heading[1], heading[2] + end)
                i += 1
                continue
            if "|" in stripped and i + 1 < len(lines) and _is_delimiter_row(lines[i + 1]):
                self.flush()
                i = self._table(i)
                continue
            if footnote := _FOOTNOTE.match(stripped):
                self.flush()
                prefix = lead + footnote.group()
                self.paragraph = _Paragraph([(prefix, stripped[footnote.end() :], end)])
                i += 1
                continue
            item = _LIST_ITEM.match(stripped)
            if (
                item is not None
                and self.paragraph is not None
                and not in_list
                and not _can_interrupt(item, stripped)
            ):
                item = None
            if item is not None:
                self.flush()
                spacing = _width(item.group(2))
                column = indent + len(item.group(1)) + (spacing if 1 <= spacing <= 4 else 1)
                stack.append(column)
                marker = item.group()
                content = stripped[len(marker) :]
                if content:
                    self.paragraph = _Paragraph([(lead + marker, content, end)])
                else:
                    self.raw(line)
                i += 1
                continue
            if self.paragraph is not None:
                self.paragraph.lines.append((lead, stripped, end))
            else:
                self.paragraph = _Paragraph([(lead, stripped, end)])
            i += 1
        self.flush()

    def _skip_fence(self, i: int, opening: str) -> int:
        closing = re.compile(rf"(?:[ ]{{0,3}}>[ ]?)*[ \t]*{re.escape(opening[0])}{{{len(opening)},}}[ \t]*$")
        self.raw(self.lines[i])
        i += 1
        while i < len(self.lines):
            line = self.lines[i]
            self.raw(line)
            i += 1
            if closing.match(line.rstrip("\r\n")):
                break
        return i

    def _definition(self, i: int, has_target: bool) -> int:
        """A link reference definition, written back as it is: its line, the target on the next line when
        the first holds only the label, and a title alone on the line after."""
        self.raw(self.lines[i])
        i += 1
        if not has_target and i < len(self.lines) and self.lines[i].strip():
            self.raw(self.lines[i])
            i += 1
        if i < len(self.lines) and _REFERENCE_TITLE.match(
            _BLOCKQUOTE.sub("", self.lines[i].rstrip("\r\n"), count=1)
        ):
            self.raw(self.lines[i])
            i += 1
        return i

    def _skip_until(self, i: int, end: re.Pattern[str]) -> int:
        while i < len(self.lines):
            line = self.lines[i]
            self.raw(line)
            i += 1
            if end.search(line):
                break
        return i

    def _html_block(self, i: int) -> int:
        """An HTML block that ends at a blank line: its text translated with every tag masked."""
        start = i
        while i < len(self.lines) and self.lines[i].strip():
            i += 1
        block = "".join(self.lines[start:i])
        body = block.rstrip("\r\n")
        number = self.unit(self.masker.mask_html(body))
        self.items.append(block if number is None else _Text(number, "", block[len(body) :]))
        return i

    def _table(self, i: int) -> int:
        self._row(self.lines[i])
        self.raw(self.lines[i + 1])
        i += 2
        while i < len(self.lines):
            line = self.lines[i]
            if not line.strip() or "|" not in line:
                break
            self._row(line)
            i += 1
        return i

    def _row(self, line: str) -> None:
        body = line.rstrip("\r\n")
        quote = m.group() if (m := _BLOCKQUOTE.match(body)) else ""
        self.table_row(quote, body[len(quote) :], line[len(body) :])


def _atx(line: str) -> tuple[str, str, str] | None:
    """An ATX heading's opening (``## ``), text and closing sequence (`` ##  ``), or None.

    What ``(#{1,6}(?:[ \t]+|$))(.*?)((?:[ \t]+#+)?[ \t]*)$`` matches, without its quadratic backtracking
    over long runs of inner spaces.
    """
    opening = _ATX_OPEN.match(line)
    if opening is None:
        return None
    rest = line[opening.end() :]
    body = rest.rstrip(" \t")
    if body.endswith("#"):
        hashes = body.rstrip("#")
        if hashes.endswith((" ", "\t")):
            body = hashes.rstrip(" \t")
    return opening.group(), body, rest[len(body) :]


def _can_interrupt(item: re.Match[str], line: str) -> bool:
    """Whether a list item may interrupt a paragraph: not empty, and numbered 1 when ordered."""
    marker = item.group(1)
    return len(line) > len(item.group()) and (not marker[0].isdigit() or int(marker[:-1]) == 1)


def _references(lines: list[str]) -> set[str]:
    found: set[str] = set()
    for line in lines:
        m = _REFERENCE.match(_BLOCKQUOTE.sub("", line, count=1).lstrip(" \t"))
        if m is not None:
            found.add(label(m.group(1)))
    return found


def _front_matter_end(lines: list[str]) -> int:
    """The number of lines of YAML (``---``) or TOML (``+++``) front matter opening the document."""
    if not lines:
        return 0
    first = lines[0].lstrip("\ufeff").rstrip()
    closers = {"---": ("---", "..."), "+++": ("+++",)}.get(first)
    if closers is None:
        return 0
    for index in range(1, len(lines)):
        if lines[index].rstrip() in closers:
            return index + 1
    return 0


def _is_delimiter_row(line: str) -> bool:
    body = _BLOCKQUOTE.sub("", line.rstrip("\r\n"), count=1)
    return "|" in body and "-" in body and bool(_TABLE_DELIMITER.match(body.strip()))


def _split_cells(row: str) -> list[str]:
    """A table row split at its pipes (not escaped ones, not inside code spans)."""
    cells: list[str] = []
    budget = Budget(len(row))
    start = i = 0
    while i < len(row):
        c = row[i]
        if c == "\\":
            i += 2
            continue
        if c == "`":
            close = code_span_end(row, i, budget)
            if close is not None:
                i = close
                continue
        if c == "|":
            cells.append(row[start:i])
            start = i + 1
        i += 1
    cells.append(row[start:])
    return cells


def _wrap(text: str, first: str, continuation: str, width: int, line_end: str) -> str:
    words = [w for w in text.split(" ") if w]
    if not words:
        return first
    lines: list[str] = []
    current = first + words[0]
    for word in words[1:]:
        if len(current) + 1 + len(word) > width and not _BAD_LINE_START.match(word.replace(KEEP, " ") + " "):
            lines.append(current)
            current = continuation + word
        else:
            current += " " + word
    lines.append(current)
    return line_end.join(lines)


def _render(item: _Text, translation: str) -> str:
    if item.width and "\n" not in translation:
        lead = translation[: len(translation) - len(translation.lstrip())]
        text = _wrap(translation.strip(), item.before + lead, item.continuation, item.width, item.line_end)
    else:
        text = item.before + translation
    text = text.replace(KEEP, " ")
    if item.pad_to and len(text) + len(item.after) < item.pad_to:
        text = text.ljust(item.pad_to - len(item.after))
    return text + item.after


class MarkdownHandler:
    name = "markdown"
    suffixes: tuple[str, ...] = (".md", ".markdown", ".mdown", ".mkd", ".mkdn")

    def sniff(self, head: bytes, path: Path) -> bool:
        return path.suffix.lower() in self.suffixes and text_encoding(head) is not None

    def translate(
        self, source: Path, output: Path, translate: TextTranslator, progress: ProgressCallback | None
    ) -> DocumentReport:
        text, encoding = read_text(source)
        if KEEP in text:
            raise DocumentFormatError(f"{source.name} holds NUL characters: it is not a Markdown text file")
        reader = _Reader(text)
        reader.read()
        translations = translate([u.masked for u in reader.units]) if reader.units else []
        report = DocumentReport(
            segments=len(reader.units), characters=sum(len(u.masked) for u in reader.units)
        )
        rendered: list[str] = []
        lost = 0
        for item in reader.items:
            if isinstance(item, str):
                rendered.append(item)
                continue
            translated, missing = reader.units[item.unit].unmask(translations[item.unit])
            lost += missing
            rendered.append(_render(item, translated))
        if lost:
            report.warnings.append(
                f"markup_moved: in {lost} text(s) the translation lost inline markup (a link, code or "
                "emphasis); it was put back at the end of its sentence. Check those places."
            )
        result = "".join(rendered)
        output.write_bytes(result.encode(encoding))
        report.extracted_text = text
        report.translated_text = result
        return report
