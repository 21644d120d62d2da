"""Every scanner of the translation layer is linear in its input (issue 9, item 1).

For each compiled pattern of ``protection`` and ``segmentation``, for the hand scanners, and for
:func:`protect`, :func:`segment`, :func:`find_numbers` and :func:`split_to_limit` as a whole, adversarial
inputs of n and 4n characters are timed side by side (the minimum of several repeats each, so machine load
touches both) and the ratio of the two costs must stay far from quadratic: linear work gives about 4, a
quadratic scanner about 16. Only ratios are compared, never absolute times.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from growth import assert_linear, repeat

from dragoman.translation import identifiers, protection, segmentation
from dragoman.translation.protection import find_numbers, protect
from dragoman.translation.segmentation import segment, split_to_limit
from dragoman.translation.types import GlossaryEntry

# About a minute of growth-ratio measurements: CI runs them, `make test-fast` leaves them out.
pytestmark = pytest.mark.slow

N = 8_000


#: Inputs that make a careless scanner go back over what it has read: unterminated openers, runs of the
#: characters that start a match, long bodies after an opener, long whitespace.
ADVERSARIAL: dict[str, Callable[[int], str]] = {
    **{
        f"run {unit!r}": repeat(unit)
        for unit in (
            "{",
            "{a",
            "}",
            "{{ x",
            "${",
            "<",
            "<a ",
            '<a b="',
            "</",
            "<!--",
            "-->",
            "%",
            "%(",
            "%1$",
            "%-",
            "$",
            "[(",
            "(",
            ")",
            "`",
            "``a",
            "&",
            "&#",
            "@",
            "a@",
            "a.",
            "x.y@",
            "http://",
            "www.",
            " ",
            "\t \u200b",
            "\n",
            "\r",
            ". ",
            "Mr. ",
            "etc. (",
            "A. ",
            "1.",
            "1'234",
            "1,",
            "; ",
            ": ",
            ", ",
            "—",
            "a",
            "!",
            "?!",
            "。",
            "«",
            " »",
            "- ",
            "#",
            "1) ",
            # code in running text (identifiers, issue 11 item 1)
            "a_",
            "_a",
            "__a",
            "a::",
            "::a",
            "--a",
            " -a",
            " -",
            "/a",
            "a/",
            "~/",
            "../",
            "a/a.",
            "C:\\",
            "\\\\a",
            "a\\",
            "a.a.",
            "f(",
            "f((",
            "f(a",
            "a.b(",
            "a->",
            "aA",
            "aA.",
            "make install ",
            "make ",
            "dpkg -a ",
            "dpkg ",
            "sudo ",
            "git > ",
            " | a",
            "--a=",
            "--a=.",
            "a.py ",
            "@a-",
        )
    },  # fmt: skip
    "{ + text": lambda n: "{" + "a" * n,
    "{ + spaces": lambda n: "{" + " " * n,
    "<a + text": lambda n: "<a " + "x" * n,
    "<!-- + dashes": lambda n: "<!--" + "-" * n,
    "`` + text": lambda n: "``" + "a" * n,
    "url + text": lambda n: "http://" + "a" * n,
    "url + closers": lambda n: "http://x" + ")" * n,
    "url + punctuation": lambda n: "http://x" + ".,;:!?*'\")]}" * (n // 12),
    "e-mail + dotted": lambda n: "x@" + "a." * (n // 2) + "1",
    "inner whitespace": lambda n: "a" + " " * n + "b",
    "inner edge spaces": lambda n: "a" + "\u200b " * (n // 2) + "b",
    "%( + text": lambda n: "%(" + "a" * n,
    "word + underscores": lambda n: "a" + "_" * n,
    "dunder + text": lambda n: "__" + "a" * n,
    "dotted + @": lambda n: "a." * (n // 2) + "a@",
    "dotted + long part": lambda n: "a.b.c" + "d" * n + "@",
    "call + text": lambda n: "f(" + "a" * n,
    "call + nested": lambda n: "f(" + "(a" * (n // 2),
    "camel + capitals": lambda n: "a" + "A" * n,
    "camel + lower": lambda n: "a" * n + "A",
    "path + dots": lambda n: "/" + "." * n,
    "path + parts": lambda n: "/a" * (n // 2) + ".",
    "relative path + parts": lambda n: "a/" * (n // 2) + "a.",
    "windows path + parts": lambda n: "a\\" * (n // 2) + "a.",
    "option + value dots": lambda n: "--a=" + "." * n,
    "command + options": lambda n: "dpkg" + " -a" * (n // 3),
    "command + redirects": lambda n: "dpkg" + " > a" * (n // 4),
    "make + targets": lambda n: "make" + " install" * (n // 8),
    "name + dashes + no ending": lambda n: "a" + "-a" * (n // 2) + ".pyz",
    "name + ending + dots": lambda n: "a.py" + "." * n,
    "handle + dashes": lambda n: "@a" + "-" * n,
}


def _patterns() -> dict[str, re.Pattern[str]]:
    found: dict[str, re.Pattern[str]] = {}
    for module in (protection, segmentation, identifiers):
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern):
                found[f"{module.__name__.rsplit('.', 1)[-1]}.{name}"] = value
            elif isinstance(value, tuple) and value and all(isinstance(v, re.Pattern) for v in value):
                for i, pattern in enumerate(value):
                    found[f"{module.__name__.rsplit('.', 1)[-1]}.{name}[{i}]"] = pattern
    return found


PATTERNS = _patterns()


def _assert_linear(work: Callable[[str], object]) -> None:
    assert_linear(work, ADVERSARIAL, N)


def test_every_pattern_is_found() -> None:
    """The list below covers the module's patterns; a new pattern is checked without naming it."""
    assert "protection._PLACEHOLDERS[0]" in PATTERNS
    assert "segmentation._BOUNDARY" in PATTERNS
    assert "segmentation._CUT_LEVELS[4]" in PATTERNS
    assert "identifiers._PATTERNS[11]" in PATTERNS
    assert len(PATTERNS) >= 25


#: Patterns only ever used with ``fullmatch`` on a bounded slice are checked the way they are used:
#: ``_BRACE_BODY`` sees at most ``_MAX_BRACE_SPAN`` characters (its ``finditer`` would be quadratic);
#: ``_LEADING`` is only matched at the start of a line.
FULLMATCH_ONLY = {"protection._BRACE_BODY"}
MATCH_ONLY = {"segmentation._LEADING"}


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_pattern_is_linear(name: str) -> None:
    pattern = PATTERNS[name]
    if name in FULLMATCH_ONLY:
        _assert_linear(pattern.fullmatch)
    elif name in MATCH_ONLY:
        _assert_linear(pattern.match)
    else:
        _assert_linear(lambda text: sum(1 for _ in pattern.finditer(text)))


def _all_placeholders(text: str) -> object:
    return protection._placeholder_spans(text)


def _braces(text: str) -> object:
    return list(protection._brace_spans(text))


def _comments(text: str) -> object:
    return list(protection._comment_spans(text))


def _identifiers(text: str) -> object:
    return identifiers.identifier_spans(text)


def _trim(text: str) -> object:
    return protection._trim_url(text, 0, len(text))


_GLOSSARY = (
    GlossaryEntry("a", "A"),
    GlossaryEntry("a a", "B"),
    GlossaryEntry("Mr", "Herr", case_sensitive=True),
    GlossaryEntry("x", "X"),
)


def _segment_and_rebuild(text: str) -> object:
    segmented = segment(text)
    return segmented.rebuild(segmented.sentences)


def _split(text: str) -> object:
    return split_to_limit(text, len, 50)


@pytest.mark.parametrize(
    "work",
    [
        _all_placeholders,
        _braces,
        _comments,
        _trim,
        _identifiers,
        protect,
        lambda text: protect(text, _GLOSSARY),
        find_numbers,
        segment,
        _segment_and_rebuild,
        _split,
    ],
    ids=[
        "placeholder_spans",
        "brace_spans",
        "comment_spans",
        "trim_url",
        "identifier_spans",
        "protect",
        "protect+glossary",
        "find_numbers",
        "segment",
        "segment+rebuild",
        "split_to_limit",
    ],
)
def test_scanner_is_linear(work: Callable[[str], object]) -> None:
    _assert_linear(work)
