"""Markdown inline markup as numbered placeholders (see :mod:`dragoman.documents._inline`), and back.

``**x**``, ``*x*``, ``_x_``, ``~~x~~``, ``[x](url)``, ``[x][ref]``, ``[x]`` (a defined reference) and
``![alt](src)`` become ``<n>x</n>``: the text is translated, the markers and the target are put back as
written. A shortcut ``[x]`` or collapsed ``[x][]`` reference, whose label is its text, comes back in full
form, ``[translated][x]``, so it still names its definition. Inline code, autolinks, raw HTML tags and
comments, and footnote references become ``<n/>`` and come back unchanged.

Every scan is bounded (issue 9, item 1): the look-aheads that find a closing bracket, delimiter or backtick
run share one :class:`Budget` of steps per text, a fixed multiple of its length, so no input makes the work
grow faster than the text; when it runs out (only adversarial inputs: thousands of unclosed brackets or
delimiters), what is left is kept as literal text. Pairs nest at most :data:`MAX_NESTING` deep, and a
comment's end is searched for once per text, not once per ``<!--``.
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
_AUTOLINK = re.compile(r"<(?:[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*|[\w.!#$%&'*+/=?^`{|}~-]+@[\w.-]+)>")
#: A footnote reference; its label holds no bracket (so a run of ``[^`` is not read to its end each time).
_FOOTNOTE_REF = re.compile(r"\[\^[^\[\]\s]+\]")
_PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"


#: Look-ahead steps one text may take per character (plus :data:`WORK_FLOOR`); ordinary Markdown takes a
#: few per character, so only inputs built to make the scanner go back over the text ever run out.
WORK_PER_CHAR = 32
WORK_FLOOR = 50_000
#: Deepest nesting of pairs (links in emphasis in links...); deeper markup stays literal text.
MAX_NESTING = 32
#: Characters a C-speed search (``str.find``, a run of one character) covers for one step of the budget.
_C_SHIFT = 6


class Budget:
    """Steps left to the look-aheads over one text (see the module docstring)."""

    __slots__ = ("left",)

    def __init__(self, text_length: int) -> None:
        self.left = WORK_FLOOR + WORK_PER_CHAR * text_length


class _CommentEnds:
    """Where the ``<!--`` comment opening at ``i`` ends: ``text.find("-->")`` remembered, so a text of many
    unclosed comments is searched once, not once per opener (positions must not decrease)."""

    __slots__ = ("found", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.found = -1  # the last "-->" found (-1: none searched yet); len(text): there is none after

    def end(self, i: int) -> int | None:
        start = i + 4
        if self.found < start and self.found != len(self.text):
            at = self.text.find("-->", start)
            self.found = len(self.text) if at == -1 else at
        return None if self.found == len(self.text) else self.found + 3


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
        return Unit(self._scan(text, spans, Budget(len(text)), 0), spans)

    def mask_html(self, text: str) -> Unit:
        spans: dict[int, Span] = {}
        out: list[str] = []
        comments = _CommentEnds(text)
        pos = i = 0
        while (i := text.find("<", i)) != -1:
            end = comments.end(i) if text.startswith("<!--", i) else None
            if end is None:
                m = _HTML_TAG.match(text, i)
                end = m.end() if m is not None else None
            if end is None:
                i += 1
                continue
            out.append(text[pos:i])
            out.append(self._single(text[i:end], spans))
            pos = i = end
        out.append(text[pos:])
        return Unit("".join(out), spans)

    def _single(self, source: str, spans: dict[int, Span]) -> str:
        number = next(self.ids)
        spans[number] = Span(False, source)
        return f"<{number}/>"

    def _pair(
        self, opening: str, inner: str, closing: str, spans: dict[int, Span], budget: Budget, depth: int
    ) -> str:
        number = next(self.ids)
        spans[number] = Span(True, opening, closing, opening + inner + closing)
        return f"<{number}>{self._scan(inner, spans, budget, depth + 1)}</{number}>"

    def _scan(self, text: str, spans: dict[int, Span], budget: Budget, depth: int) -> str:
        out: list[str] = []
        i, end = 0, len(text)
        comments = _CommentEnds(text)
        nest = depth < MAX_NESTING
        while i < end:
            c = text[i]
            if c == "\\" and i + 1 < end and text[i + 1] in _PUNCTUATION:
                out.append(text[i : i + 2])
                i += 2
                continue
            if c == "`":
                close = code_span_end(text, i, budget)
                if close is not None:
                    out.append(self._single(text[i:close], spans))
                    i = close
                    continue
                run = _run_length(text, i)
                out.append(text[i : i + run])
                i += run
                continue
            if c == "<":
                m = _AUTOLINK.match(text, i) or _HTML_TAG.match(text, i)
                close = m.end() if m is not None else None
                if close is None and text.startswith("<!--", i):
                    close = comments.end(i)
                if close is not None:
                    out.append(self._single(text[i:close], spans))
                    i = close
                    continue
            if nest and (c == "[" or (c == "!" and text.startswith("[", i + 1))):
                found = self._link(text, i, spans, budget, depth)
                if found is not None:
                    masked, i = found
                    out.append(masked)
                    continue
            if c in "*_~":
                found = self._emphasis(text, i, spans, budget, depth) if nest else None
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

    def _link(
        self, text: str, i: int, spans: dict[int, Span], budget: Budget, depth: int
    ) -> tuple[str, int] | None:
        image = text[i] == "!"
        start = i + 1 if image else i
        if not image:
            m = _FOOTNOTE_REF.match(text, start)
            if m is not None:
                return self._single(m.group(), spans), m.end()
        close = _matching_bracket(text, start, budget)
        if close is None:
            return None
        inner = text[start + 1 : close]
        tail_end = _link_tail(text, close, budget)
        opening = text[i : start + 1]
        collapsed = tail_end == close + 3 and text.startswith("[]", close + 1)
        if tail_end is None or collapsed:  # a shortcut ``[x]`` or collapsed ``[x][]`` reference
            if label(inner) not in self.references:
                if tail_end is None:
                    return None
                closing = text[close:tail_end]  # not a link: written back as it was
            else:
                # The label is the text: once translated it would no longer name the definition, so the
                # reference is written in full form, ``[translated][text]``.
                tail_end = tail_end or close + 1
                closing = "][" + inner + "]"
        else:
            closing = text[close:tail_end]
        if not inner.strip():
            return self._single(text[i:tail_end], spans), tail_end
        return self._pair(opening, inner, closing, spans, budget, depth), tail_end

    def _emphasis(
        self, text: str, i: int, spans: dict[int, Span], budget: Budget, depth: int
    ) -> tuple[str, int] | None:
        c = text[i]
        n = _run_length(text, i)
        if n > 3 or (c == "~" and n != 2):
            return None
        after = i + n
        if after >= len(text) or text[after].isspace():
            return None
        if c == "_" and i > 0 and text[i - 1].isalnum():
            return None
        closer = _find_closer(text, after, c, n, budget)
        if closer is None or closer == after:
            return None
        delimiter = c * n
        return self._pair(delimiter, text[after:closer], delimiter, spans, budget, depth), closer + n


def _run_length(text: str, i: int) -> int:
    """The length of the run of ``text[i]`` starting at ``i`` (C speed: no budget needed)."""
    c = text[i]
    j = i + 1
    end = len(text)
    while j < end:
        # Compare growing blocks at C speed: a run of n characters costs O(n), not n Python steps.
        step = min(64, end - j)
        if text[j : j + step] == c * step:
            j += step
            continue
        while text[j] == c:
            j += 1
        break
    return j - i


def code_span_end(text: str, i: int, budget: Budget) -> int | None:
    """The end of the code span opening at ``i`` (a backtick run closed by a run of the same length), or
    None (also when ``budget`` is spent)."""
    if budget.left < 0:
        return None
    n = _run_length(text, i)
    j = i + n
    budget.left -= 1 + (n >> _C_SHIFT)
    while budget.left >= 0:
        at = text.find("`", j)
        budget.left -= 1 + (((len(text) if at == -1 else at) - j) >> _C_SHIFT)
        if at == -1:
            return None
        run = _run_length(text, at)
        budget.left -= run >> _C_SHIFT
        if run == n:
            return at + n
        j = at + run
    return None


def _matching_bracket(text: str, i: int, budget: Budget) -> int | None:
    depth, j = 0, i
    while j < len(text):
        budget.left -= 1
        if budget.left < 0:
            return None
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == "`":
            close = code_span_end(text, j, budget)
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


def _link_tail(text: str, close: int, budget: Budget) -> int | None:
    """The end of ``](target "title")`` or ``][ref]`` after the bracket at ``close``."""
    after = close + 1
    if text.startswith("(", after):
        depth, j = 0, after
        while j < len(text):
            budget.left -= 1
            if budget.left < 0:
                return None
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
    if text.startswith("[", after) and budget.left > 0:
        limit = min(len(text), after + 1 + (budget.left << _C_SHIFT))
        stop = text.find("]", after + 1, limit)
        budget.left -= 1 + (((limit if stop == -1 else stop) - after) >> _C_SHIFT)
        if stop != -1 and "[" not in text[after + 1 : stop]:
            return stop + 1
    return None


def _find_closer(text: str, start: int, c: str, n: int, budget: Budget) -> int | None:
    j = start
    while j < len(text):
        budget.left -= 1
        if budget.left < 0:
            return None
        ch = text[j]
        if ch == "\\":
            j += 2
            continue
        if ch == "`":
            close = code_span_end(text, j, budget)
            if close is not None:
                j = close
                continue
        if ch == c:
            run = _run_length(text, j)
            budget.left -= run >> _C_SHIFT
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
