"""Code stays code in every format (issue 11, item 1): code blocks and inline code are never sent for
translation (Markdown fences and indented blocks, HTML ``pre``/``code``/``kbd``/``samp``/``var``), and code
in running text (identifiers, options, paths, commands) comes back from the engine as it was written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_backend_support import RUNNING_CODE, assert_code_kept, fake_engine, shout

from dragoman.pipelines import translate_file as files
from dragoman.translation.engine import Engine


@pytest.fixture
def engine(packs_dir: Path, tiny_argos_pack: Path) -> Iterator[Engine]:
    with fake_engine(packs_dir, tiny_argos_pack, shout) as eng:
        yield eng


CODE = [*RUNNING_CODE, "C:\\Windows\\System32"]
SENTENCE = (
    "Call c.setFillColor(blue) after dpkg --get-selections > file, read /usr/share/doc/ and check "
    "ASN1_SUCCESS; then make install with os.path.join, std::vector and C:\\Windows\\System32 here."
)


def _translate(engine: Engine, path: Path) -> str:
    result = files.translate_file(engine, path, "es", source="en")
    return Path(result.output_path).read_text(encoding="utf-8")


def test_markdown_code_blocks_inline_code_and_running_code(engine: Engine, tmp_path: Path) -> None:
    source = tmp_path / "doc.md"
    fenced = "```sh\nmake the house\n```\n"
    tilde = "~~~\nkeep this line\n~~~\n"
    indented = "    indented code stays\n"
    source.write_text(
        f"# A title\n\n{SENTENCE}\n\nRun `keep inline code` now.\n\n{fenced}\n{tilde}\nText.\n\n{indented}",
        encoding="utf-8",
    )
    out = _translate(engine, source)
    assert "# A TITLE" in out and "RUN `keep inline code` NOW." in out
    assert fenced in out and tilde in out and indented in out
    assert_code_kept(out, CODE)
    assert "CALL " in out and " HERE." in out


def test_html_code_elements_and_running_code(engine: Engine, tmp_path: Path) -> None:
    source = tmp_path / "doc.html"
    kept = [
        "<pre>make   the house\n  stay</pre>",
        "<code>keep this code</code>",
        "<kbd>press the key</kbd>",
        "<samp>the sample output</samp>",
        "<var>the variable</var>",
    ]
    body = "".join(f"<p>Say {k} there.</p>" for k in kept)
    source.write_text(
        f"<!DOCTYPE html><html><head><title>Code</title></head><body><p>{SENTENCE}</p>{body}</body></html>",
        encoding="utf-8",
    )
    out = _translate(engine, source)
    for k in kept:
        assert k in out
    for code in CODE:
        assert code.replace(">", "&gt;") in out or code in out
    assert "<p>SAY <code>keep this code</code> THERE.</p>" in out


def test_plain_text_running_code(engine: Engine, tmp_path: Path) -> None:
    source = tmp_path / "doc.txt"
    source.write_text(SENTENCE + "\n", encoding="utf-8")
    out = _translate(engine, source)
    assert_code_kept(out, CODE)
    assert out.startswith("CALL c.setFillColor(blue) AFTER dpkg")
