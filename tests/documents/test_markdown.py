"""Markdown: prose translated whole, code, link targets, front matter and HTML tags untouched."""

from __future__ import annotations

import codecs
import email.parser
import re
from importlib import metadata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from support import needs_apertium

from dragoman.documents import _inline, handlers
from dragoman.documents.markdown import MarkdownHandler
from dragoman.errors import DocumentFormatError
from dragoman.pipelines import translate_file as files
from dragoman.settings import Settings
from dragoman.testing.fakes import UpperTranslator
from dragoman.translation.engine import Engine

#: What the engine keeps as it is: tags (numbered ones too), braces, printf, code, URLs, entities.
PROTECTED = re.compile(r"<[^<>]*>|\{[^{}]*\}|%\([^)]*\)[sd]|%[sd]|`[^`]*`|https?://\S+|&\w+;")


class Upper(UpperTranslator):
    protected = PROTECTED


class DropsTags(Upper):
    """Loses every numbered placeholder, as a careless model might."""

    def one(self, text: str) -> str:
        return super().one(re.sub(r"</?\d+/?>", "", text))


class Longer(Upper):
    """Makes each text much longer, with words that would start a block at the start of a line."""

    def one(self, text: str) -> str:
        return " ".join(f"{w} - 1. # > {w}" for w in super().one(text).split(" "))


DOCUMENT = """\
---
title: The guide
tags: [a, b]
---

# The *big* house #

Some text with `inline code` and a [link text](https://example.com/a_b "Title here") and
an ![alt text](img/x.png) image, **bold _nested_ words** and a [ref link][ref] plus [shortcut].

* item one
* item two with [^1] note
  continued here
  1. nested ordered

     ```python
     def f(): return "the house"
     ```

> quoted text
> continues

    indented code block

| Name | Value |
|------|------:|
| apple | `a|b` |
| pear  | 2     |

<div align="center">
  <img src="logo.png" alt="Logo"> Welcome text
</div>

<!-- a comment
over lines -->

Hard break here  
next line.

[ref]: https://example.com/ref
[shortcut]: https://example.com/s
[^1]: The footnote text.
"""


def run(tmp_path: Path, text: str, translator: Upper, name: str = "doc.md") -> tuple[str, Upper, list[str]]:
    source = tmp_path / name
    source.write_bytes(text.encode("utf-8"))
    output = tmp_path / "out.md"
    report = MarkdownHandler().translate(source, output, translator, None)
    return output.read_bytes().decode("utf-8"), translator, report.warnings


def lines_between(text: str, start: str, stop: str) -> list[str]:
    lines = text.splitlines()
    first = lines.index(start)
    return lines[first : lines.index(stop, first + 1) + 1]


def test_untouched_parts_stay_exactly_as_written(tmp_path: Path) -> None:
    out, fake, warnings = run(tmp_path, DOCUMENT, Upper())
    assert len(fake.calls) == 1 and warnings == []
    assert out.startswith("---\ntitle: The guide\ntags: [a, b]\n---\n")
    fence = '     def f(): return "the house"'
    assert lines_between(out, "     ```python", "     ```") == ["     ```python", fence, "     ```"]
    assert "\n    indented code block\n" in out
    assert "|------|------:|\n" in out
    assert "<!-- a comment\nover lines -->\n" in out
    assert '<img src="logo.png" alt="Logo"> WELCOME TEXT' in out
    for line in ("[ref]: https://example.com/ref", "[shortcut]: https://example.com/s"):
        assert line in out.splitlines()
    # Same-length translation: same lines, but for the shortcut reference written in full form
    # ("[SHORTCUT][shortcut]", issue 11), which makes its paragraph wrap onto a third line.
    assert out.count("\n") == DOCUMENT.count("\n") + 1


def test_prose_is_translated_with_its_markers(tmp_path: Path) -> None:
    out, _, _ = run(tmp_path, DOCUMENT, Upper())
    assert "# THE *BIG* HOUSE #\n" in out
    assert "`inline code`" in out and '[LINK TEXT](https://example.com/a_b "Title here")' in out
    assert "![ALT TEXT](img/x.png)" in out and "**BOLD _NESTED_ WORDS**" in out
    assert "[REF LINK][ref]" in out and "[SHORTCUT][shortcut]" in out and "[^1]" in out
    assert "* ITEM ONE\n* ITEM TWO WITH [^1] NOTE\n  CONTINUED HERE\n  1. NESTED ORDERED\n" in out
    assert "> QUOTED TEXT\n> CONTINUES\n" in out
    assert "| APPLE | `a|b` |" in out and "| NAME | VALUE |" in out and "| PEAR  | 2     |" in out
    assert "HARD BREAK HERE  \nNEXT LINE.\n" in out
    assert "[^1]: THE FOOTNOTE TEXT.\n" in out


def test_markup_goes_to_the_engine_as_numbered_placeholders(tmp_path: Path) -> None:
    _, fake, _ = run(tmp_path, "Read [the guide](https://x.org/a) and `run it` **now**.\n", Upper())
    [[text]] = fake.calls
    assert re.fullmatch(r"Read <(\d+)>the guide</\1> and <\d+/> <(\d+)>now</\2>\.", text)


def test_paragraph_is_one_text_and_is_wrapped_again(tmp_path: Path) -> None:
    source = "- The first line of a long item\n  that goes on over a second line\n  and a third.\n"
    out, fake, _ = run(tmp_path, source, Longer())
    assert fake.calls == [["The first line of a long item that goes on over a second line and a third."]]
    lines = out.splitlines()
    assert lines[0].startswith("- THE - 1. # > THE ")
    assert len(lines) > 3
    for line in lines[1:]:
        assert line.startswith("  ") and not re.match(r"\s*(?:[-+*>#]|\d+\.)\s", line), line
    expected = Longer().one(fake.calls[0][0])
    assert " ".join(line.strip() for line in lines) == "- " + expected  # every word, in order
    assert min(len(line) for line in lines[:-1]) >= 28  # filled up to about the source width (34)


def test_list_items_and_paragraph_continuations(tmp_path: Path) -> None:
    source = "1. First step\n2. Second step\n   goes on\n\nThe year\n2020. was fine.\n\n- [ ] Open task\n"
    out, fake, _ = run(tmp_path, source, Upper())
    assert fake.calls == [["First step", "Second step goes on", "The year 2020. was fine.", "Open task"]]
    assert (
        out == "1. FIRST STEP\n2. SECOND STEP\n   GOES ON\n\nTHE YEAR 2020.\nWAS FINE.\n\n- [ ] OPEN TASK\n"
    )


def test_lost_placeholders_put_the_markup_back(tmp_path: Path) -> None:
    source = "See [the docs](https://x.org/docs) and `pip install x` today.\n"
    out, _, warnings = run(tmp_path, source, DropsTags())
    assert out.count("](https://x.org/docs)") == 1 and out.count("`pip install x`") == 1
    assert out.startswith("SEE THE DOCS AND") and warnings and "markup_moved" in warnings[0]


def test_literal_numbered_tags_of_the_document_stay_literal(tmp_path: Path) -> None:
    out, fake, _ = run(tmp_path, "Press <1> then **go**.\n", Upper())
    assert "<1>" in fake.calls[0][0] and "**GO**" in out and out.startswith("PRESS <1> THEN")


def test_toml_front_matter_crlf_and_untranslatable_lines(tmp_path: Path) -> None:
    source = "+++\ntitle = 'x'\n+++\r\n\r\nThe text.\r\n\r\n---\r\n\r\n12345\r\n"
    out, fake, _ = run(tmp_path, source, Upper())
    assert out == "+++\ntitle = 'x'\n+++\r\n\r\nTHE TEXT.\r\n\r\n---\r\n\r\n12345\r\n"
    assert fake.calls == [["The text."]]


@given(
    pieces=st.lists(
        st.one_of(
            st.sampled_from(["<1>", "</1>", "<2/>", "<3>", "</3>", "<9>", "</4>"]),
            st.text("ab <>/", max_size=4),
        ),
        max_size=12,
    )
)
def test_placeholder_reading_never_loses_text(pieces: list[str]) -> None:
    """Whatever a translation does to the placeholders (moved, repeated, dropped, unbalanced), the text
    survives, each of ours is used at most once, and the ones not used are reported missing."""
    translated = "".join(pieces)
    ours = {1: True, 2: False, 3: True, 4: True}
    nodes, missing = _inline.parse(translated, ours)
    used: list[int] = []

    def walk(items: list[_inline.Node]) -> None:
        for item in items:
            if isinstance(item, _inline.Tag):
                used.append(item.id)
                walk(item.children)

    walk(nodes)
    assert sorted(used + missing) == sorted(ours)
    assert _inline.plain(nodes) == re.sub(r"</?[1-4]/?>", "", translated)


def test_wrong_content_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "notes.md"
    fake.write_bytes(b"\x00\x01binary\x00" * 20)
    with pytest.raises(DocumentFormatError):
        handlers.find_handler(fake)
    good = tmp_path / "ok.md"
    good.write_text("# Title\n", encoding="utf-8")
    assert handlers.find_handler(good).name == "markdown"


@needs_apertium
def test_end_to_end_through_apertium(tmp_path: Path) -> None:
    source = tmp_path / "guide.md"
    source.write_text(
        "# The house\n\nThe house is red. Run `make all` and read [the guide](https://example.com/guide).\n\n"
        "```sh\necho the house\n```\n",
        encoding="utf-8",
    )
    with Engine(Settings.from_env()) as engine:
        result = files.translate_file(engine, source, "es")
    out = result.output_path.read_text(encoding="utf-8")
    assert result.output_path.name == "guide.es.md" and result.format == "markdown"
    assert out.startswith("# ") and "casa" in out.lower()
    assert "`make all`" in out and "](https://example.com/guide)" in out
    assert "```sh\necho the house\n```\n" in out


# --- reference links and real-world files (issue 11, item 5) ------------------------------------------------


class Rot13(Upper):
    """Changes every letter, as a translation does: a label taken from the text no longer names its
    definition, case-folded or not (upper-casing alone would still match)."""

    def one(self, text: str) -> str:
        parts = self.protected.split(text)
        out = [codecs.encode(parts[0], "rot13")]
        for kept, part in zip(self.protected.findall(text), parts[1:], strict=True):
            out += [kept, codecs.encode(part, "rot13")]
        return "".join(out)


_MARKDOWN_IT = MarkdownIt("commonmark").enable("table")


def links(text: str) -> list[tuple[str, object]]:
    """The links and images markdown-it finds in ``text``, with their targets, in order."""
    found: list[tuple[str, object]] = []
    for token in _MARKDOWN_IT.parse(text):
        for child in token.children or []:
            if child.type == "link_open":
                found.append(("a", child.attrs.get("href")))
            elif child.type == "image":
                found.append(("img", child.attrs.get("src")))
    return found


def blocks(text: str) -> list[tuple[str, str]]:
    """markdown-it's block token tree of ``text`` (types and tags, not line numbers: wrapping moves them)."""
    return [(token.type, token.tag) for token in _MARKDOWN_IT.parse(text) if token.type != "inline"]


def test_reference_links_still_resolve_after_translation(tmp_path: Path) -> None:
    source = (
        "See [the docs][], [Docs], [the guide][g], ![logo][] and [multi].\n"
        "Not links: [not defined][] and [nothing].\n"
        "\n"
        "[the docs]: https://a.example\n"
        "[docs]: https://b.example\n"
        "[g]: https://c.example\n"
        "[logo]: logo.png\n"
        "[multi]:\n"
        "  https://d.example\n"
        '  "A title"\n'
    )
    out, _, _ = run(tmp_path, source, Rot13())
    assert links(source) == [
        ("a", "https://a.example"),
        ("a", "https://b.example"),
        ("a", "https://c.example"),
        ("img", "logo.png"),
        ("a", "https://d.example"),
    ]
    assert links(out) == links(source)
    flat = " ".join(out.split())  # the paragraph is wrapped again
    assert "[gur qbpf][the docs], [Qbpf][Docs], [gur thvqr][g], ![ybtb][logo] naq [zhygv][multi]." in flat
    assert "[abg qrsvarq][] naq [abguvat]." in flat  # not references: written as they were
    assert out.endswith('[multi]:\n  https://d.example\n  "A title"\n')  # a definition over three lines


def test_block_quote_interrupts_a_paragraph(tmp_path: Path) -> None:
    source = "The code from its\ncomponents, e.g.\n>  if (x < Y(2,5,41))\n>     /* blah */\nA call.\n"
    out, _, _ = run(tmp_path, source, Rot13())
    assert blocks(out) == blocks(source)
    assert out.startswith("Gur pbqr sebz vgf\npbzcbaragf, r.t.\n>  ")


def _real_markdown() -> list[tuple[str, str]]:
    """Markdown written by others: the files of ``tests/data/real/markdown`` (see its README) and the
    Markdown descriptions of the Python packages installed beside dragoman (their METADATA)."""
    found = [
        (p.name, p.read_text(encoding="utf-8"))
        for p in sorted(REAL_MARKDOWN.glob("*.md"))
        if p.name != "README.md"
    ]
    seen = set()
    for dist in sorted(metadata.distributions(), key=lambda d: str(d.metadata["Name"]).lower()):
        meta = email.parser.Parser().parsestr(dist.read_text("METADATA") or "")
        name, text = str(meta["Name"]), meta.get_payload()
        kind = str(meta.get("Description-Content-Type") or "")
        if name in seen or name == "dragoman" or "markdown" not in kind or not isinstance(text, str):
            continue
        seen.add(name)
        if 2_000 <= len(text) <= 40_000:
            found.append((f"pypi:{name}", text))
    return found


REAL_MARKDOWN = Path(__file__).parent.parent / "data" / "real" / "markdown"
REAL = _real_markdown()


@pytest.mark.parametrize(("name", "text"), REAL, ids=[name for name, _ in REAL])
def test_real_markdown_keeps_its_links_and_blocks(tmp_path: Path, name: str, text: str) -> None:
    """markdown-it (an independent CommonMark parser) finds the same links and images, with the same
    targets, and the same block tree in the translation as in the source. Before issue 11, 1,143 of 5,597
    links in the Debian docs of this machine (and 7 of 13 in git's README) were lost."""
    out, _, _ = run(tmp_path, text, Rot13())
    assert out != text
    assert links(out) == links(text)
    assert blocks(out) == blocks(text)


def test_the_real_corpus_is_there() -> None:
    assert len([n for n, _ in REAL if not n.startswith("pypi:")]) == 5
    assert sum(len(links(text)) for _, text in REAL) > 100
