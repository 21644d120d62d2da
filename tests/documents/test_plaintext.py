"""Plain text: hard-wrapped paragraphs are translated whole and wrapped again (issue 11, item 4).

The chunking of long texts is tested in ``tests/adversarial/test_plaintext_chunks.py``.
"""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from dragoman.documents.plaintext import PlainTextHandler, rewrap, unwrap
from dragoman.testing.fakes import FakeTranslator

WRAPPED = (
    "The configuration file is read once when the daemon starts, and the\n"
    "settings it holds apply to every request that the daemon answers\n"
    "afterwards, until it is restarted.\n"
    "\n"
    "  * A list item that is long enough to be wrapped by the editor of\n"
    "    the author, with its continuation aligned under its text.\n"
    "  * A short item.\n"
    "\n"
    "Run these commands:\n"
    "    $ ./configure --prefix=/usr\n"
    "    $ make install\n"
    "\n"
    "| name | value |\n"
    "| a    | 1     |\n"
    "\n"
    "Ulisse Perusin <uli.peru@example.org>\n"
    "Riccardo Buzzotta <raozuzu@example.org>\n"
    "Lapo Calamandrei <calamandrei@example.org>\n"
    "\n"
    "Roses are red,\n"
    "violets are blue.\n"
)


def run(tmp_path: Path, text: str, translator: FakeTranslator, newline: str = "\n") -> str:
    source = tmp_path / "in.txt"
    source.write_bytes(text.replace("\n", newline).encode("utf-8"))
    output = tmp_path / "out.txt"
    PlainTextHandler().translate(source, output, translator, None)
    return output.read_bytes().decode("utf-8")


def longer(text: str) -> str:
    """Every word twice as long (and upper case), lines and spaces kept."""
    return "".join(c.upper() * 2 if not c.isspace() else c for c in text)


def test_wrapped_paragraph_is_translated_whole_and_wrapped_again(tmp_path: Path) -> None:
    fake = FakeTranslator(longer)
    out = run(tmp_path, WRAPPED, fake)
    sent = fake.calls[0][0]
    assert (
        "The configuration file is read once when the daemon starts, and the settings it holds apply to "
        "every request that the daemon answers afterwards, until it is restarted.\n"
    ) in sent
    assert (
        "  * A list item that is long enough to be wrapped by the editor of the author, with its "
        "continuation aligned under its text.\n"
    ) in sent
    lines = out.splitlines()
    paragraph = lines[: lines.index("")]
    assert len(paragraph) > 3 and all(len(line) <= 70 for line in paragraph)  # its width: 70
    assert " ".join(paragraph) == longer(" ".join(WRAPPED.split("\n\n")[0].split("\n")))
    item = lines[lines.index("") + 1 : lines.index("  ** AA SSHHOORRTT IITTEEMM..")]
    assert item[0].startswith("  ** AA LLIISSTT") and all(line.startswith("    ") for line in item[1:])
    assert all(len(line) <= 70 for line in item)
    # untouched: commands, a table, a list of names, short lines (each only made longer, line by line)
    rest = WRAPPED[WRAPPED.index("Run these") :]
    assert out.endswith(longer(rest))


def test_same_length_translation_gives_the_same_lines(tmp_path: Path) -> None:
    out = run(tmp_path, WRAPPED, FakeTranslator(str.upper), newline="\r\n")
    assert out == WRAPPED.upper().replace("\n", "\r\n")


def test_what_is_not_joined() -> None:
    text = (
        "A line that ends a sentence, though it is as long as the next one.\n"
        "Another sentence starts here on a line of much the same length.\n"
        "\n"
        "a line long enough, but the next word would have fitted on it\n"
        "ok and this line is long enough to be the longest one of the block\n"
    )
    assert unwrap(text) == (text, {})


def test_rewrap_leaves_a_translation_with_other_lines_as_it_is() -> None:
    text, joined = unwrap(WRAPPED)
    assert joined
    assert rewrap("one line", joined) == "one line"


REAL_TXT = Path(__file__).parent.parent / "data" / "real" / "txt"
REAL = sorted(p.name for p in REAL_TXT.glob("*.txt"))


@pytest.mark.parametrize("name", REAL)
def test_real_text_comes_back_with_every_word_in_its_place(tmp_path: Path, name: str) -> None:
    """A real README: every word comes back in order; the wrapped paragraphs are wrapped again within
    their width when the translation is longer; other lines are each translated as they were."""
    text = (REAL_TXT / name).read_text(encoding="utf-8")
    rot13 = FakeTranslator(lambda t: codecs.encode(t, "rot13"))
    same = run(tmp_path, text, rot13)
    # a same-length translation: the same lines (but for spaces at their ends)
    assert [line.rstrip() for line in same.splitlines()] == [
        codecs.encode(line, "rot13").rstrip() for line in text.splitlines()
    ]
    unwrapped, joined = unwrap(text)
    assert len(joined) >= 3  # each of these files has wrapped paragraphs
    out = run(tmp_path, text, FakeTranslator(longer))
    assert out.split() == longer(text).split()
    kept = {longer(line) for index, line in enumerate(unwrapped.splitlines()) if index not in joined}
    widths = {width for width, _ in joined.values()}
    for line in out.splitlines():
        if line not in kept and len(line.split()) > 1:  # a line of a rewrapped paragraph
            assert len(line) <= max(widths), line


def test_real_sentences_over_lines_are_sent_whole(tmp_path: Path) -> None:
    fake = FakeTranslator(str.upper)
    run(tmp_path, (REAL_TXT / "bc-README.txt").read_text(encoding="utf-8"), fake)
    assert (
        "bc is an arbitrary precision numeric processing language.  Syntax is similar to C, but differs "
        "in many substantial areas."
    ) in fake.calls[0][0]
    # a capital after a line of prose ending in a lower-case word goes on with the sentence
    assert "bc is a utility included in the POSIX P1003.2/D11 draft standard." in fake.calls[0][0]
