"""Every scanner and parser of the document formats is linear in its input (issue 9, item 1).

Three kinds of check, each with adversarial inputs of n and 4n characters compared by the ratio of their costs
(see ``tests/growth.py``; linear work gives about 4, quadratic about 16, the bound is 8):

* per pattern: every compiled regular expression of the text-format modules, run the way it is used
  (``finditer``/``search``/``sub`` over a text, or ``match`` at the start of a line), on runs of the
  characters that start or continue a match;
* per scanner: the hand-written scanners (inline Markdown masking, table cells, ATX headings, ICU messages,
  subtitle words and line splitting, placeholder parsing) on the same inputs;
* per format: each handler (Markdown, HTML, SRT, WebVTT, gettext, XLIFF, JSON, and DOCX) translating a file
  built to make a careless scanner go back over what it read (nested and unterminated brackets, braces,
  backticks, delimiters, quotes, ``<`` runs, long lines, deep nesting), with a translator that gives each
  text back as it came (placeholders and all).

Before this was fixed, a 50 KB Markdown file of nested brackets ran past 60 s and a 20 KB JSON file of braces
took 17 s; on the old code the inline masker grew 12 to 22 times for x4 input (runs of ``[``, ``*a ``,
``[^``, ``a <!--``) and the ICU parser about 20 times, where they now grow about 4 times.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from growth import assert_linear, repeat

from dragoman.documents import (
    _i18n,
    _inline,
    _markdown_inline,
    _runs,
    html,
    markdown,
    plaintext,
    strings,
    subtitles,
)
from dragoman.documents.base import FormatHandler
from dragoman.documents.docx import DocxHandler
from dragoman.documents.html import HtmlHandler
from dragoman.documents.markdown import MarkdownHandler
from dragoman.documents.plaintext import PlainTextHandler
from dragoman.documents.strings import JsonHandler, PoHandler, XliffHandler
from dragoman.documents.subtitles import SrtHandler, WebVttHandler
from dragoman.testing.fakes import FakeTranslator

# About a minute of growth-ratio measurements: CI runs them, `make test-fast` leaves them out.
pytestmark = pytest.mark.slow

#: Characters of the smaller input of each pair (the larger has four times as many).
N = 4_000
#: Whole-file checks are slower per character; they use a smaller n.
FILE_N = 3_000

# --- per pattern -------------------------------------------------------------------------------------------

_MODULES = (markdown, _markdown_inline, _i18n, subtitles, strings, html, _inline, _runs, plaintext)

#: Patterns only ever used with ``match`` at the start of a line or a given position (their ``finditer``
#: is not what runs): checked with ``match``.
MATCH_ONLY = {
    "markdown._FENCE",
    "markdown._BLOCKQUOTE",
    "markdown._LIST_ITEM",
    "markdown._THEMATIC",
    "markdown._SETEXT",
    "markdown._ATX_OPEN",
    "markdown._TABLE_DELIMITER",
    "markdown._REFERENCE",
    "markdown._REFERENCE_TITLE",
    "markdown._FOOTNOTE",
    "markdown._HTML_BLOCK",
    "markdown._HTML_LONE_TAG",
    "markdown._BAD_LINE_START",
    "markdown._HTML_RAW[0]",
    "markdown._HTML_RAW[2]",
    "markdown._HTML_RAW[4]",
    "markdown._HTML_RAW[6]",
    "markdown._HTML_RAW[8]",
    "_markdown_inline._AUTOLINK",
    "_markdown_inline._HTML_TAG",
    "_markdown_inline._FOOTNOTE_REF",
    "_i18n._ICU_HEAD",
    "_i18n._ICU_SELECTOR",
    "subtitles._TIMING",
    "subtitles._DIALOGUE",
    "subtitles._VTT_HEADER",
    "subtitles._VTT_RAW_BLOCK",
    "plaintext._ITEM",
    "html._XML_DECLARATION",
}
#: Bytes patterns run on a bounded head of the file only (8 KB or 64 KB): bounded, not checked here.
BOUNDED_HEAD = {
    "html._DOCUMENT",
    "html._META_CHARSET",
    "html._HTML_TAG",
    "html._XHTML_XMLNS",  # within the first <html ...> tag of the 64 KB head
    "html._XML_ENCODING",  # anchored at the file's start, every repeat bounded
    "strings._XML_DECLARATION",
}


def _patterns() -> dict[str, re.Pattern[str]]:
    found: dict[str, re.Pattern[str]] = {}
    for module in _MODULES:
        short = module.__name__.rsplit(".", 1)[-1]
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern):
                found[f"{short}.{name}"] = value
            elif isinstance(value, tuple):
                flat = [p for v in value for p in (v if isinstance(v, tuple) else (v,))]
                if flat and all(isinstance(p, re.Pattern) for p in flat):
                    for index, pattern in enumerate(flat):
                        found[f"{short}.{name}[{index}]"] = pattern
    return found


PATTERNS = _patterns()

#: Runs of what starts or continues a match in these formats, and long bodies after an opener.
ADVERSARIAL: dict[str, Callable[[int], str]] = {
    **{
        f"run {unit!r}": repeat(unit)
        for unit in (
            "[",
            "]",
            "[a",
            "![",
            "[a][",
            "[^",
            "(",
            "`",
            "``a",
            "*",
            "*a ",
            "_a ",
            "~",
            "~~a ",
            "\\",
            "<",
            "<a ",
            "<a b='",
            '<a b="',
            "</",
            "<!--",
            "<!",
            "<?",
            "{",
            "{a",
            "}",
            "{a, plural, ",
            "{a, plural, x {",
            "#",
            "# ",
            "> ",
            "- ",
            "1. ",
            "|",
            "|-",
            "-",
            "=",
            " ",
            "\t",
            "\n",
            "\r\n",
            " \n",
            "&",
            "%",
            "<00:",
            "00:00:01,000 ",
            "-->",
            "a",
        )
    },  # fmt: skip
    "# + spaces + text": lambda n: "# a" + " " * n + "b",
    "delimiter + spaces": lambda n: "-" + " " * n + "x",
    "< + attributes": lambda n: "<a" + " b" * (n // 2),
    "< + quote": lambda n: "<a b='" + "x" * n,
    "{ + spaces": lambda n: "{" + " " * n,
    "spaces + x": lambda n: " " * n + "x",
}


def _pattern_work(name: str) -> Callable[[str], object]:
    pattern = PATTERNS[name]
    if name in MATCH_ONLY:
        return pattern.match
    return lambda text: sum(1 for _ in pattern.finditer(text))


def test_every_pattern_is_found() -> None:
    """The modules' patterns are found by walking them; a new pattern is checked without naming it."""
    assert "markdown._TABLE_DELIMITER" in PATTERNS
    assert "subtitles._TIMING" in PATTERNS
    assert "markdown._HTML_RAW[9]" in PATTERNS
    assert len(PATTERNS) >= 30
    assert not (MATCH_ONLY | BOUNDED_HEAD) - set(PATTERNS), "a listed pattern is gone: update the lists"


@pytest.mark.parametrize("name", sorted(set(PATTERNS) - BOUNDED_HEAD))
def test_pattern_is_linear(name: str) -> None:
    if isinstance(PATTERNS[name].pattern, bytes):
        pytest.fail(f"{name} is a bytes pattern: list it in BOUNDED_HEAD only if it runs on a bounded head")
    assert_linear(_pattern_work(name), ADVERSARIAL, N)


# --- per scanner -------------------------------------------------------------------------------------------


def _mask(text: str) -> object:
    return _markdown_inline.InlineMasker(_inline.numbering(text), {"a"}).mask(text).masked


def _mask_html(text: str) -> object:
    return _markdown_inline.InlineMasker(_inline.numbering(text), set()).mask_html(text).masked


def _split_lines(text: str) -> object:
    return subtitles.split_lines(text, 3)


def _split_many_lines(text: str) -> object:
    return subtitles.split_lines(text, max(2, len(text) // 8))


def _distribute(text: str) -> object:
    return subtitles.distribute(text, [3] * max(2, len(text) // 40))


def _distribute_unspaced(text: str) -> object:  # one word of a script without spaces: cut between letters
    return subtitles.distribute("\u6211" + "".join(text.split()), [3] * max(2, len(text) // 40))


@pytest.mark.parametrize(
    "work",
    [
        _mask,
        _mask_html,
        markdown._split_cells,
        markdown._atx,
        _i18n.parse_message,
        subtitles._words,
        _split_lines,
        _split_many_lines,
        _distribute,
        _distribute_unspaced,
        lambda text: _inline.parse(text, {1: True, 2: False}),
    ],
    ids=[
        "inline_mask",
        "inline_mask_html",
        "table_cells",
        "atx_heading",
        "icu_parse",
        "subtitle_words",
        "subtitle_split_3",
        "subtitle_split_many",
        "subtitle_distribute",
        "subtitle_distribute_unspaced",
        "placeholder_parse",
    ],
)
def test_scanner_is_linear(work: Callable[[str], object]) -> None:
    assert_linear(work, ADVERSARIAL, N)


# --- per format --------------------------------------------------------------------------------------------


def _srt(body: str) -> str:
    return f"1\n00:00:01,000 --> 00:00:02,000\n{body}\n"


def _vtt(body: str) -> str:
    return f"WEBVTT\n\n00:00:01.000 --> 00:00:02.000\n{body}\n"


def _json(value: str) -> str:
    return json.dumps({"key": value, "other": "A house"})


def _po(value: str) -> str:
    return f'msgid "{value}"\nmsgstr ""\n'


def _html(body: str) -> str:
    return f"<html><body><p>A house {body}</p></body></html>"


def _xliff(source: str) -> str:
    return (
        '<?xml version="1.0"?><xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">'
        '<file source-language="en" datatype="plaintext" original="x"><body>'
        f'<trans-unit id="1"><source>{source}</source></trans-unit></body></file></xliff>'
    )


def _nested(opener: str, middle: str, closer: str) -> Callable[[int], str]:
    return lambda n: (
        opener * (n // (len(opener) + len(closer))) + middle + closer * (n // (len(opener) + len(closer)))
    )


def _lines(line: str) -> Callable[[int], str]:
    return lambda n: line * (n // len(line))


FORMATS: dict[str, tuple[FormatHandler, str, dict[str, Callable[[int], str]]]] = {
    "markdown": (
        MarkdownHandler(),
        ".md",
        {
            "nested brackets": _nested("[", "a", "]"),
            "nested links": _nested("[", "a", "](u)"),
            "nested images": _nested("![", "a", "](u)"),
            "unclosed brackets": repeat("[a "),
            "unclosed links": repeat("[a]("),
            "reference tails": repeat("[a]["),
            "unclosed emphasis": repeat("*a "),
            "unclosed strong": repeat("**a "),
            "unclosed underscores": repeat("_a "),
            "unclosed strikethrough": repeat("~~a "),
            "backtick runs": lambda n: "a".join("`" * k for k in range(1, n))[:n],
            "backticks in brackets": lambda n: "[" + "`" * n,
            "table of backticks": lambda n: "a|b\n-|-\n|" + "`" * n + "\n",
            "table of pipes": lambda n: "a|b\n-|-\n" + "|" * n + "\n",
            "less-than run": lambda n: "a " + "<" * n,
            "unclosed tags": repeat("a <b c='"),
            "unclosed comments": repeat("a <!--"),
            "html block comments": lambda n: "<div>\n" + "<!--" * (n // 4) + "\n",
            "heading spaces": lambda n: "# a" + " " * n + "b\n",
            "delimiter spaces": lambda n: "a|b\n-" + " " * n + "|x\n",
            "quote nesting": lambda n: "> " * (n // 2) + "a\n",
            "list nesting": _lines("- a\n  "),
            "one long line": repeat("word "),
            "many lines": _lines("a b\n"),
            "hard breaks": _lines("a  \n"),
            "fence openers": _lines("```\n"),
            "reference definitions": _lines("[a]: http://x\n"),
        },
    ),
    "json": (
        JsonHandler(),
        ".json",
        {
            "braces": lambda n: _json("a " + "{" * n),
            "closed braces": lambda n: _json("a " + "{a}" * (n // 3)),
            "unclosed plural heads": lambda n: _json("a " + "{a, plural, " * (n // 12)),
            "unclosed plural branches": lambda n: _json("a " + "{a, plural, x {" * (n // 15)),
            "nested plurals": lambda n: _json(_nested("{a, plural, x {b ", "c", "}}")(n)),
            "many keys": lambda n: json.dumps({f"k{i}": "a b" for i in range(n // 12)}),
        },
    ),
    "gettext": (
        PoHandler(),
        ".po",
        {
            "braces": lambda n: _po("a " + "{" * n),
            "unclosed plural branches": lambda n: _po("a " + "{a, plural, x {" * (n // 15)),
            "escaped quotes": lambda n: _po("a " + '\\"' * (n // 2)),
            "many entries": lambda n: "".join(f'msgid "a{i} b"\nmsgstr ""\n\n' for i in range(n // 20)),
        },
    ),
    "srt": (
        SrtHandler(),
        ".srt",
        {
            "less-than run": lambda n: _srt("a " + "<" * n),
            "brace run": lambda n: _srt("a " + "{" * n),
            "karaoke-like": lambda n: _srt("a " + "<00:" * (n // 4)),
            "long line": lambda n: _srt("ab " * (n // 3)),
            "many lines": lambda n: _srt("ab\n" * (n // 3)),
            "dialogue lines": lambda n: _srt("-a b\n" * (n // 5)),
            "spaces": lambda n: _srt("a" + " " * n + "b"),
            "many cues": lambda n: "".join(
                f"{i}\n00:00:01,000 --> 00:00:02,000\na b\n\n" for i in range(n // 40)
            ),
            "sentences over cues": lambda n: "".join(
                f"{i}\n00:00:01,000 --> 00:00:02,000\nand so on\n\n" for i in range(n // 48)
            ),
            "cues without blank lines": lambda n: "".join(
                f"{i}\n00:00:01,000 --> 00:00:02,000\nand so on\n" for i in range(n // 47)
            ),
            "long sentence cues": lambda n: "".join(
                f"{i}\n00:00:01,000 --> 00:00:02,000\n{'a ' * 100}\n\n" for i in range(n // 240)
            ),
        },
    ),
    "webvtt": (
        WebVttHandler(),
        ".vtt",
        {
            "less-than run": lambda n: _vtt("a " + "<" * n),
            "karaoke": lambda n: _vtt("a " + "<00:00:01.000>b " * (n // 16)),
            "many lines": lambda n: _vtt("ab\n" * (n // 3)),
            "timing lines": lambda n: "WEBVTT\n\n" + "00:00:01.000 --> 00:00:02.000\n" * (n // 30),
            "cues without blank lines": lambda n: (
                "WEBVTT\n\n" + "00:00:01.000 --> 00:00:02.000\n<i>and so on</i>\n" * (n // 47)
            ),
        },
    ),
    "txt": (
        PlainTextHandler(),
        ".txt",
        {
            "wrapped paragraph": _lines("and so the words of a wrapped paragraph go on and on here\n"),
            "wrapped list items": _lines("- and so the words of an item go on and on and on\n  and on\n"),
            "pipes": _lines("|" * 70 + "\n"),
            "spaced lines": _lines("a" + " " * 60 + "b\n"),
            "one long line": repeat("word "),
            "many short lines": _lines("a b\n"),
        },
    ),
    "html": (
        HtmlHandler(),
        ".html",
        {
            "less-than run": lambda n: _html("&lt;" * (n // 4)),
            # nested as deep as the parser reads (deeper is refused), again and again
            "nested inline": lambda n: _html(("<b>a " * 200 + "</b>" * 200) * (n // 2000 + 1)),
            "many paragraphs": lambda n: "<html><body>" + "<p>a b</p>" * (n // 10) + "</body></html>",
            "spaces": lambda n: _html("a" + " " * n + "b"),
            "spaced lines": lambda n: _html("a" + " \t" * (n // 2) + "\nb"),
            "entities": lambda n: _html("&amp;" * (n // 5)),
        },
    ),
    "xliff": (
        XliffHandler(),
        ".xlf",
        {
            "nested inline": lambda n: _xliff(('<g id="1">a ' * 20 + "</g>" * 20) * (n // 300)),
            "many inline": lambda n: _xliff('a <x id="1"/>' * (n // 14)),
            "braces": lambda n: _xliff("a " + "{" * n),
        },
    ),
}

CASES = [(fmt, case) for fmt, (_, _, inputs) in FORMATS.items() for case in inputs]


@pytest.mark.parametrize(("fmt", "case"), CASES, ids=[f"{f}-{c}" for f, c in CASES])
def test_format_is_linear(tmp_path: Path, fmt: str, case: str) -> None:
    handler, suffix, inputs = FORMATS[fmt]
    source, output = tmp_path / f"in{suffix}", tmp_path / f"out{suffix}"

    def work(text: str) -> object:
        source.write_text(text, encoding="utf-8")
        return handler.translate(source, output, FakeTranslator(str), None)

    assert_linear(work, {case: inputs[case]}, FILE_N, repeats=3)


# --- DOCX ---------------------------------------------------------------------------------------------------

_W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def _docx_bytes(body: str) -> bytes:
    """A DOCX (python-docx's template) whose document body is ``body``."""
    import docx

    base, out = io.BytesIO(), io.BytesIO()
    docx.Document().save(base)
    document = f"<w:document {_W}><w:body>{body}</w:body></w:document>".encode()
    with zipfile.ZipFile(base) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, document if info.filename == "word/document.xml" else src.read(info))
    return out.getvalue()


#: DOCX bodies of n units: runs with alternating formatting in one paragraph (merged and split again),
#: paragraphs, hyperlinks between runs, and text full of markup characters.
DOCX: dict[str, Callable[[int], str]] = {
    "runs in one paragraph": lambda n: (
        "<w:p>" + "<w:r><w:rPr><w:b/></w:rPr><w:t>a </w:t></w:r><w:r><w:t>b </w:t></w:r>" * n + "</w:p>"
    ),
    "paragraphs": lambda n: "<w:p><w:r><w:t>a b</w:t></w:r></w:p>" * n,
    "hyperlinks": lambda n: (
        "<w:p>" + "<w:hyperlink><w:r><w:t>a</w:t></w:r></w:hyperlink><w:r><w:t> b </w:t></w:r>" * n + "</w:p>"
    ),
    "markup characters": lambda n: "<w:p><w:r><w:t>a " + "&lt;1&gt;{" * n + "</w:t></w:r></w:p>",
}


@pytest.mark.parametrize("case", sorted(DOCX))
def test_docx_is_linear(tmp_path: Path, case: str) -> None:
    source, output = tmp_path / "in.docx", tmp_path / "out.docx"

    def work(units: str) -> object:
        source.write_bytes(_docx_bytes(DOCX[case](len(units))))
        return DocxHandler().translate(source, output, FakeTranslator(str), None)

    assert_linear(work, {case: lambda n: "x" * n}, 400, repeats=3)
