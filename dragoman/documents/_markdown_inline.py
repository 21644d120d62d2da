"""Markdown inline markup as numbered placeholders (see :mod:`dragoman.documents._inline`), and back.

``**x**``, ``*x*``, ``_x_``, ``~~x~~``, ``[x](url)``, ``[x][ref]``, ``[x]`` (a defined reference) and
``![alt](src)`` become ``<n>x</n>``: the text is translated, the markers and the target are put back as
written. Inline code, autolinks, raw HTML tags and comments, and footnote references become ``<n/>`` and
come back unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from dragoman.documents import _inline

KEEP = "\x00"  # stands for a space that wrapping must not break at (inside code, link targets, tags)

HTML_TAG_SRC = (
    r"<[A-Za-z][\w-]*(?:\s+[A-Za-z_:][\w.:-]*(?:\s*=\s*(?:[^\s\"'=<>`]+|'[^']*'|\"[^\"]*\"))?)*\s*/?>"
    r"|</[A-Za-z][\w-]*\s*>"
)
_HTML_TAG = re.compile(HTML_TAG_SRC)
_HTML_MASKED = re.compile(rf"<!--.*?-->|{HTML_TAG_SRC}", re.S)
_AUTOLINK = re.compile(r"<(?:[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*|[\w.!#$%&'*+/=?^`{|}~-]+@[\w.-]+)>")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
_FOOTNOTE_REF = re.compile(r"\[\^[^\]\s]+\]")
_PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"


def label(text: str) -> str:
    """A reference label as CommonMark compares them."""
    return " ".join(text.split()).casefold()


@dataclass(frozen=True)
class Span:
    """A piece of inline markup behind a placeholder: a pair's markers, or a single's whole source."""

    pair: bool
    open: str  # a pair's opening marker ("**", "[", "!["), or a single's whole source
    close: str = ""  # a pair's closing marker ("**", "](url)")
    source: str = ""  # a pair's whole source, put back as written when the translation lost it


@dataclass
class Unit:
    """One text for the engine, with the markup its placeholders stand for."""

    masked: str
    spans: dict[int, Span]

    def unmask(self, translated: str) -> tuple[str, bool]:
        """The translation with the markup put back (spaces that must not wrap as ``KEEP``), and whether
        a placeholder was lost (its markup is then appended)."""
        nodes, missing = _inline.parse(translated, {n: s.pair for n, s in self.spans.items()})
        if missing:
            nodes, trailing = _inline.split_trailing_space(nodes)
            for number in missing:
                span = self.spans[number]
                nodes.append(" " + (span.source if span.pair else span.open).replace(" ", KEEP))
            nodes.append(trailing)
        return self._render(nodes), bool(missing)

    def _render(self, nodes: list[_inline.Node]) -> str:
        out: list[str] = []
        for node in nodes:
            if isinstance(node, str):
                out.append(node)
                continue
            span = self.spans[node.id]
            if span.pair:
                out.append(span.open + self._render(node.children) + span.close.replace(" ", KEEP))
            else:
                out.append(span.open.replace(" ", KEEP))
        return "".join(out)


class InlineMasker:
    """Turns a text's inline markup into numbered placeholders (see the module docstring)."""

    def __init__(self, ids: Iterator[int], references: set[str]) -> None:
        self.ids = ids
        self.references = references

    def mask(self, text: str) -> Unit:
        spans: dict[int, Span] = {}
        return Unit(self._scan(text, spans), spans)

    def mask_html(self, text: str) -> Unit:
        spans: dict[int, Span] = {}
        out: list[str] = []
        pos = 0
        for m in _HTML_MASKED.finditer(text):
            out.append(text[pos : m.start()])
            out.append(self._single(m.group(), spans))
            pos = m.end()
        out.append(text[pos:])
        return Unit("".join(out), spans)

    def _single(self, source: str, spans: dict[int, Span]) -> str:
        number = next(self.ids)
        spans[number] = Span(False, source)
        return f"<{number}/>"

    def _pair(self, opening: str, inner: str, closing: str, spans: dict[int, Span]) -> str:
        number = next(self.ids)
        spans[number] = Span(True, opening, closing, opening + inner + closing)
        return f"<{number}>{self._scan(inner, spans)}</{number}>"

    def _scan(self, text: str, spans: dict[int, Span]) -> str:
        out: list[str] = []
        i, end = 0, len(text)
        while i < end:
            c = text[i]
            if c == "\\" and i + 1 < end and text[i + 1] in _PUNCTUATION:
                out.append(text[i : i + 2])
                i += 2
                continue
            if c == "`":
                close = code_span_end(text, i)
                if close is not None:
                    out.append(self._single(text[i:close], spans))
                    i = close
                    continue
                run = _run_length(text, i)
                out.append(text[i : i + run])
                i += run
                continue
            if c == "<":
                m = _AUTOLINK.match(text, i) or _HTML_TAG.match(text, i) or _HTML_COMMENT.match(text, i)
                if m is not None:
                    out.append(self._single(m.group(), spans))
                    i = m.end()
                    continue
            if c == "[" or (c == "!" and text.startswith("[", i + 1)):
                found = self._link(text, i, spans)
                if found is not None:
                    masked, i = found
                    out.append(masked)
                    continue
            if c in "*_~":
                found = self._emphasis(text, i, spans)
                if found is not None:
                    masked, i = found
                    out.append(masked)
                    continue
                run = _run_length(text, i)
                out.append(text[i : i + run])
                i += run
                continue
            out.append(c)
            i += 1
        return "".join(out)

    def _link(self, text: str, i: int, spans: dict[int, Span]) -> tuple[str, int] | None:
        image = text[i] == "!"
        start = i + 1 if image else i
        if not image:
            m = _FOOTNOTE_REF.match(text, start)
            if m is not None:
                return self._single(m.group(), spans), m.end()
        close = _matching_bracket(text, start)
        if close is None:
            return None
        inner = text[start + 1 : close]
        tail_end = _link_tail(text, close)
        if tail_end is None:
            if label(inner) not in self.references:
                return None
            tail_end = close + 1
        opening, closing = text[i : start + 1], text[close:tail_end]
        if not inner.strip():
            return self._single(text[i:tail_end], spans), tail_end
        return self._pair(opening, inner, closing, spans), tail_end

    def _emphasis(self, text: str, i: int, spans: dict[int, Span]) -> tuple[str, int] | None:
        c = text[i]
        n = _run_length(text, i)
        if n > 3 or (c == "~" and n != 2):
            return None
        after = i + n
        if after >= len(text) or text[after].isspace():
            return None
        if c == "_" and i > 0 and text[i - 1].isalnum():
            return None
        closer = _find_closer(text, after, c, n)
        if closer is None or closer == after:
            return None
        delimiter = c * n
        return self._pair(delimiter, text[after:closer], delimiter, spans), closer + n


def _run_length(text: str, i: int) -> int:
    j = i
    while j < len(text) and text[j] == text[i]:
        j += 1
    return j - i


def code_span_end(text: str, i: int) -> int | None:
    """The end of the code span opening at ``i`` (a backtick run closed by a run of the same length)."""
    n = _run_length(text, i)
    j = i + n
    while True:
        j = text.find("`", j)
        if j == -1:
            return None
        run = _run_length(text, j)
        if run == n:
            return j + n
        j += run


def _matching_bracket(text: str, i: int) -> int | None:
    depth, j = 0, i
    while j < len(text):
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == "`":
            close = code_span_end(text, j)
            if close is not None:
                j = close
                continue
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return None


def _link_tail(text: str, close: int) -> int | None:
    """The end of ``](target "title")`` or ``][ref]`` after the bracket at ``close``."""
    after = close + 1
    if text.startswith("(", after):
        depth, j = 0, after
        while j < len(text):
            c = text[j]
            if c == "\\":
                j += 2
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        return None
    if text.startswith("[", after):
        stop = text.find("]", after + 1)
        if stop != -1 and "[" not in text[after + 1 : stop]:
            return stop + 1
    return None


def _find_closer(text: str, start: int, c: str, n: int) -> int | None:
    j = start
    while j < len(text):
        ch = text[j]
        if ch == "\\":
            j += 2
            continue
        if ch == "`":
            close = code_span_end(text, j)
            if close is not None:
                j = close
                continue
        if ch == c:
            run = _run_length(text, j)
            after = j + run
            if (
                run == n
                and not text[j - 1].isspace()
                and not (c == "_" and after < len(text) and text[after].isalnum())
            ):
                return j
            j = after
            continue
        j += 1
    return None
