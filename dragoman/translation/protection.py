"""Find the spans of a sentence that must come through translation unchanged, and the numbers in a text.

:func:`protect` marks placeholders (format strings, template variables, markup tags, entities, URLs,
e-mail addresses, inline code, code in running text) and glossary terms, returning the sentence as plain
strings interleaved with :class:`Protected` spans. :func:`restore_check` says which spans a translation
lost, and :func:`find_numbers` lists a text's numbers in a form that compares across locales and scripts.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from dragoman.translation.identifiers import identifier_spans
from dragoman.translation.types import GlossaryEntry, Pieces, Protected

# --- placeholders ---------------------------------------------------------------------------------------

_PRINTF_LENGTH = r"(?:hh|h|ll|l|L|z|j|t|q|I64|I32)?"
_PRINTF_WIDTH = r"(?:\d+|\*)?(?:\.(?:\d+|\*))?"
_PLACEHOLDERS = tuple(
    re.compile(p)
    for p in (
        # inline code
        r"``[^\n]+?``|`[^`\n]+`",
        # URLs; trailing punctuation is trimmed afterwards
        r"(?<![\w@/.])(?:(?:https?|ftp)://|www\.(?=\w))[^\s<>\"'`]+",
        # e-mail addresses
        r"(?<![\w.%+-])(?:mailto:)?[\w.%+-]+@[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}(?![\w-])",
        # markup (comments: _comment_spans): tags with attributes (the tag only), numbered tags <0>, entities
        r"</?[A-Za-z][\w:.-]*(?:\s(?:[^<>\"']|\"[^\"<>]*\"|'[^'<>]*')*)?/?>",
        r"</?\d{1,3}/?>",
        r"&(?:[A-Za-z][A-Za-z0-9]{1,31}|#\d{1,7}|#[xX][0-9a-fA-F]{1,6});",
        # printf: %%, %(name)s, %1$s, %s %d %.2f %-10s %ld %@; never after a digit ("50%off")
        r"%%",
        rf"%\([^()\s][^()]{{0,63}}\)[-#0+']*{_PRINTF_WIDTH}[diouxXeEfFgGcrsa]",
        rf"%\d{{1,2}}\$[-#0+']*{_PRINTF_WIDTH}{_PRINTF_LENGTH}[diouxXeEfFgGaAcspn@]",
        rf"(?<![\d%])%[-#0+']*{_PRINTF_WIDTH}{_PRINTF_LENGTH}[diouxXeEfFgGaAcspn@]",
        # Qt / Windows positional %1
        r"(?<![\d%])%\d{1,2}(?![\d$])",
        # $name (shell, PHP); ${name} is found with the braces
        r"(?<![\w$])\$[A-Za-z_][A-Za-z0-9_]*",
    )
)
#: For each pattern above, the substrings one of which a text must hold for the pattern to match at all:
#: most sentences hold none of them, so most patterns are skipped without running (this is a hot path).
_TRIGGERS: tuple[tuple[str, ...], ...] = (
    ("`",),
    ("://", "www."),
    ("@",),
    ("<",),
    ("<",),
    ("&",),
    ("%",),
    ("%",),
    ("%",),
    ("%",),
    ("%",),
    ("$",),
)
_URL_PATTERN = 1
_URL_TRAILING = ".,;:!?*'\")]}"
_MAX_BRACE_SPAN = 500
_BRACE_EVENT = re.compile(r"[{}\r\n]")
#: What may stand between braces: one name or index with an optional format spec ({name}, {0:>10}, {},
#: { var }), an ICU argument ({count, plural, ...}); {{...}}, {%...%} and {#...#} take anything.
_BRACE_BODY = re.compile(
    r"\s*[^\s{},:!]*\s*(?:[:!][^{}]*)?|\s*[\w.]+\s*,\s*\w+\s*(?:,.*)?|[{%#].*[}%#]", re.DOTALL
)


def _trim_url(text: str, start: int, end: int) -> int:
    """The end of a URL without the sentence punctuation that follows it (keeps balanced brackets).

    Linear in the URL: the bracket counts are taken once and updated as characters are trimmed."""
    pairs = {")": "(", "]": "[", "}": "{"}
    counts: dict[str, int] = {}
    while end > start and text[end - 1] in _URL_TRAILING:
        c = text[end - 1]
        if c in pairs:
            if c not in counts:
                counts[c] = text.count(c, start, end)
                counts[pairs[c]] = text.count(pairs[c], start, end)
            if counts[pairs[c]] >= counts[c]:
                break
            counts[c] -= 1
        end -= 1
    return end


def _brace_closers(text: str) -> dict[int, int]:
    """For each ``{`` whose matching ``}`` is on the same line, its offset: one pass, a stack."""
    closers: dict[int, int] = {}
    stack: list[int] = []
    for m in _BRACE_EVENT.finditer(text):
        c = m.group()
        if c == "{":
            stack.append(m.start())
        elif c == "}":
            if stack:
                closers[stack.pop()] = m.start()
        else:
            stack.clear()
    return closers


def _brace_spans(text: str) -> Iterator[tuple[int, int]]:
    """Balanced ``{...}`` on one line whose content looks like code (see ``_BRACE_BODY``), nested or not
    ({name}, {0}, {{ var }}, {% tag %}, ICU plurals), with a ``$`` or ``#`` before it (${var}, #{var}).

    Linear in the text: the braces are matched in one pass, and a body is checked only when it spans
    fewer than ``_MAX_BRACE_SPAN`` characters."""
    closers = _brace_closers(text)
    i = text.find("{")
    while i != -1:
        j = closers.get(i, -1)
        if i < j < i + _MAX_BRACE_SPAN and _BRACE_BODY.fullmatch(text, i + 1, j):
            start = i - 1 if i > 0 and text[i - 1] in "$#" else i
            yield start, j + 1
            i = text.find("{", j + 1)
        else:
            i = text.find("{", i + 1)


def _comment_spans(text: str) -> Iterator[tuple[int, int]]:
    """HTML comments ``<!-- ... -->`` on one line, as ``<!--.*?-->`` finds them, in linear time: a start
    whose line holds no ``-->`` after it is skipped together with every later start on that line."""
    i = text.find("<!--")
    while i != -1:
        stop = text.find("\n", i)
        stop = len(text) if stop == -1 else stop
        j = text.find("-->", i + 4, stop)
        if j == -1:
            i = text.find("<!--", stop)
            continue
        yield i, j + 3
        i = text.find("<!--", j + 3)


def _placeholder_spans(
    text: str, yield_to: frozenset[tuple[int, int]] = frozenset()
) -> list[tuple[int, int]]:
    """Non-overlapping placeholder spans, leftmost first, the longest where several start together.

    Code in running text (:func:`~dragoman.translation.identifiers.identifier_spans`) counts as a
    placeholder, but for the spans in ``yield_to`` (a glossary term matching exactly the same text)."""
    found: list[tuple[int, int]] = list(_brace_spans(text)) if "{" in text else []
    found.extend(span for span in identifier_spans(text) if span not in yield_to)
    if "<!--" in text:
        found.extend(_comment_spans(text))
    for index, (pattern, triggers) in enumerate(zip(_PLACEHOLDERS, _TRIGGERS, strict=True)):
        if not any(t in text for t in triggers):
            continue
        for m in pattern.finditer(text):
            end = _trim_url(text, m.start(), m.end()) if index == _URL_PATTERN else m.end()
            if end > m.start():
                found.append((m.start(), end))
    found.sort(key=lambda span: (span[0], span[0] - span[1]))
    chosen: list[tuple[int, int]] = []
    for start, end in found:
        if not chosen or start >= chosen[-1][1]:
            chosen.append((start, end))
    return chosen


# --- glossary -------------------------------------------------------------------------------------------

#: Scripts written without spaces between words, where a term may sit anywhere inside a run of letters.
_UNSPACED = (
    "\u0e00-\u0eff\u0f00-\u0fff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u2e80-\u2fdf\u3005-\u3007"
    "\u3021-\u3029\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
    "\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)
_UNSPACED_CHAR = re.compile(f"[{_UNSPACED}]")
#: A letter or digit of a spaced script: what may not touch a term's edge.
_SPACED_WORD = f"[^\\W{_UNSPACED}]"


def _is_spaced_word(c: str) -> bool:
    return (c.isalnum() or c == "_") and not _UNSPACED_CHAR.match(c)


@functools.lru_cache(maxsize=4096)
def _term_pattern(term: str, case_sensitive: bool) -> re.Pattern[str] | None:
    words = term.split()
    if not words:
        return None
    body = r"\s+".join(re.escape(w) for w in words)
    head = f"(?<!{_SPACED_WORD})" if _is_spaced_word(term.strip()[0]) else ""
    tail = f"(?!{_SPACED_WORD})" if _is_spaced_word(term.strip()[-1]) else ""
    return re.compile(head + body + tail, 0 if case_sensitive else re.IGNORECASE)


@dataclass(frozen=True)
class _Match:
    start: int
    end: int
    entry: GlossaryEntry
    order: int


def _fold(text: str) -> str:
    """A loose case fold for the prefilter: never stricter than ``re.IGNORECASE`` (İ/ı match i there)."""
    return text.casefold().replace("\u0307", "").replace("ı", "i")


def _glossary_matches(text: str, glossary: Sequence[GlossaryEntry]) -> list[_Match]:
    folded = _fold(text)
    matches: list[_Match] = []
    for order, entry in enumerate(glossary):
        words = entry.term.split()
        if not words:
            continue
        # cheap prefilter before the regex: the first word must occur at all
        if entry.case_sensitive:
            if words[0] not in text:
                continue
        elif _fold(words[0]) not in folded:
            continue
        pattern = _term_pattern(entry.term, entry.case_sensitive)
        if pattern is None:
            continue
        matches.extend(_Match(m.start(), m.end(), entry, order) for m in pattern.finditer(text))
    return matches


def protect(sentence: str, glossary: Sequence[GlossaryEntry] = ()) -> Pieces:
    """``sentence`` as plain strings and :class:`Protected` spans; joining their sources gives it back.

    Placeholders (kind "placeholder", output == source) win over glossary terms inside or across them;
    code in running text (identifiers, options, paths, calls, commands: :mod:`identifiers`) is a
    placeholder too, unless a glossary term matches exactly the same text.
    Glossary terms (kind "glossary", output == the entry's translation) match on word boundaries, or
    anywhere for terms and neighbours in scripts written without spaces; case-insensitively unless the
    entry is case-sensitive; where matches overlap the longest term wins, then the leftmost.
    """
    matches = _glossary_matches(sentence, glossary) if glossary else []
    terms = frozenset((m.start, m.end) for m in matches)
    spans: list[tuple[int, int, Protected]] = [
        (s, e, Protected(sentence[s:e], sentence[s:e], "placeholder"))
        for s, e in _placeholder_spans(sentence, terms)
    ]
    # the spans taken so far, disjoint and sorted: a candidate is checked against its two neighbours only
    starts = [s for s, _, _ in spans]
    ends = [e for _, e, _ in spans]
    candidates = sorted(
        matches,
        key=lambda m: (m.start - m.end, m.start, not m.entry.case_sensitive, m.order),
    )
    for m in candidates:
        at = bisect.bisect_right(starts, m.start)
        if (at == 0 or ends[at - 1] <= m.start) and (at == len(starts) or starts[at] >= m.end):
            starts.insert(at, m.start)
            ends.insert(at, m.end)
            spans.append(
                (m.start, m.end, Protected(sentence[m.start : m.end], m.entry.translation, "glossary"))
            )
    spans.sort(key=lambda span: span[0])
    pieces: list[str | Protected] = []
    pos = 0
    for start, end, span in spans:
        if start > pos:
            pieces.append(sentence[pos:start])
        pieces.append(span)
        pos = end
    if pos < len(sentence):
        pieces.append(sentence[pos:])
    return tuple(pieces)


def restore_check(pieces: Pieces, translation: str) -> list[str]:
    """The protected outputs that ``translation`` lacks (or has fewer times than ``pieces`` needs)."""
    needed: dict[str, int] = {}
    for piece in pieces:
        if isinstance(piece, Protected):
            needed[piece.output] = needed.get(piece.output, 0) + 1
    return [text for text, count in needed.items() if translation.count(text) < count]


# --- numbers --------------------------------------------------------------------------------------------

_GROUP_SPACES = "\u00a0\u202f\u2009'’"
_NUMBER = re.compile(rf"\d{{1,3}}(?:[{_GROUP_SPACES}]\d{{3}})+(?:[.,]\d+)?(?!\d)|\d+(?:[.,]\d+)*")
_GROUPED = re.compile(r"[1-9]\d{0,2}(?:([.,])\d{3})+")


def _ascii_digits(text: str) -> str:
    """Digits of every script as ASCII; Arabic decimal and thousands separators as '.' and ','."""
    if text.isascii():
        return text
    out: list[str] = []
    for c in text:
        if c == "\u066b":
            out.append(".")
        elif c == "\u066c":
            out.append(",")
        elif c.isdigit() and not c.isascii():
            value = unicodedata.decimal(c, None)
            out.append(str(value) if value is not None else c)
        else:
            out.append(c)
    return "".join(out)


def _normalise(number: str) -> list[str]:
    for c in _GROUP_SPACES:
        number = number.replace(c, "")
    has_dot, has_comma = "." in number, "," in number
    if has_dot and has_comma:  # the separator used last is the decimal one: 1,000.5 and 1.000,5
        decimal = "." if number.rfind(".") > number.rfind(",") else ","
        group = "," if decimal == "." else "."
        whole, _, fraction = number.replace(group, "").partition(decimal)
        return [_number(whole, fraction)]
    if not (has_dot or has_comma):
        return [_number(number, "")]
    sep = "." if has_dot else ","
    if _GROUPED.fullmatch(number):  # 1,000 / 1.000.000: thousands
        return [_number(number.replace(sep, ""), "")]
    if number.count(sep) == 1:  # 3.14 / 3,14: a decimal
        whole, _, fraction = number.partition(sep)
        return [_number(whole, fraction)]
    if sep == ",":  # 1,2,3: a list
        return [_number(n, "") for n in number.split(",")]
    return [number]  # 2.0.1: a version, an address, a date


def _number(whole: str, fraction: str) -> str:
    fraction = fraction.rstrip("0")
    return f"{whole}.{fraction}" if fraction else whole


def find_numbers(text: str) -> list[str]:
    """The numbers in ``text``, in order, normalised so that the same number written in another locale or
    script compares equal: 1,000.5 / 1000.5 / 1.000,5 / ١٠٠٠٫٥ all give "1000.5"; "3.50" gives "3.5";
    grouping by thin or no-break spaces is removed; version-like "2.0.1" is kept whole."""
    out: list[str] = []
    for m in _NUMBER.finditer(_ascii_digits(text)):
        out.extend(_normalise(m.group()))
    return out
