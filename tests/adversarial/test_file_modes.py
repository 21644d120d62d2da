# mypy: disallow-untyped-calls=False
# (PyMuPDF's functions carry no annotations)
"""Issue 9, item 9: the files dragoman writes get the permissions any program's files get.

Outputs were created mode 0600 whatever the umask (tempfile's default). A new file now gets ``0o666`` less
the umask; a file overwritten keeps the mode it had. Checked under several umasks for every writer: a
translated document, a PDF's DOCX export, the glossary file (also through a symlink).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pymupdf
import pytest

from dragoman.documents.base import atomic_output
from dragoman.pipelines.translate_file import translate_file
from dragoman.server.local_store import GlossaryStore
from dragoman.translation.types import GlossaryEntry

UMASKS = [0o022, 0o077, 0o002, 0o027, 0o000]


@pytest.fixture(params=UMASKS, ids=[f"umask{u:03o}" for u in UMASKS])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    value: int = request.param
    before = os.umask(value)
    try:
        yield value
    finally:
        os.umask(before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


class FakeEngine:
    """What translate_file asks of an engine, upper-casing every text."""

    provenance = "on-device"

    def detect(self, text: str) -> Any:
        return SimpleNamespace(flores="eng_Latn", reason="")

    def translate_many(self, texts: list[str], options: Any, context: Any = None) -> list[Any]:
        return [SimpleNamespace(translation=t.upper(), warnings=()) for t in texts]


def _engine() -> Any:
    return FakeEngine()


def test_a_new_output_gets_the_umask_mode(tmp_path: Path, umask: int) -> None:
    destination = tmp_path / "new.txt"
    with atomic_output(destination) as partial:
        partial.write_text("x")
    assert mode(destination) == 0o666 & ~umask


@pytest.mark.parametrize("existing", [0o640, 0o604, 0o600, 0o664])
def test_an_overwritten_output_keeps_its_mode(tmp_path: Path, umask: int, existing: int) -> None:
    destination = tmp_path / "old.txt"
    destination.write_text("old")
    destination.chmod(existing)
    with atomic_output(destination, overwrite=True) as partial:
        partial.write_text("new")
    assert destination.read_text() == "new"
    assert mode(destination) == existing


def test_translate_file_outputs_follow_the_umask(tmp_path: Path, umask: int) -> None:
    source = tmp_path / "in.txt"
    source.write_text("Hello.\n", encoding="utf-8")
    source.chmod(0o644)
    result = translate_file(_engine(), source, "spa_Latn")
    assert result.output_path.read_text(encoding="utf-8") == "HELLO.\n"
    assert mode(result.output_path) == 0o666 & ~umask
    result.output_path.chmod(0o640)
    again = translate_file(_engine(), source, "spa_Latn", overwrite=True)
    assert mode(again.output_path) == 0o640


def test_a_pdf_and_its_docx_export_follow_the_umask(tmp_path: Path, umask: int) -> None:
    source = tmp_path / "in.pdf"
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "Hello world.", fontsize=12)
    doc.save(source)
    doc.close()
    result = translate_file(_engine(), source, "spa_Latn", output=tmp_path / "out.pdf")
    assert set(result.extra_outputs) == {"docx"}
    assert mode(result.output_path) == 0o666 & ~umask
    assert mode(result.extra_outputs["docx"]) == 0o666 & ~umask


def test_the_glossary_file_follows_the_umask_and_keeps_its_mode(tmp_path: Path, umask: int) -> None:
    path = tmp_path / "config" / "glossary.json"
    store = GlossaryStore(path)
    store.add([GlossaryEntry("a", "b")])
    assert mode(path) == 0o666 & ~umask
    path.chmod(0o640)
    store.add([GlossaryEntry("c", "d")])
    assert mode(path) == 0o640


def test_a_symlinked_glossary_keeps_its_link_and_its_target_mode(tmp_path: Path, umask: int) -> None:
    target = tmp_path / "dotfiles" / "glossary.json"
    target.parent.mkdir()
    GlossaryStore(target).add([GlossaryEntry("old", "viejo")])
    target.chmod(0o600)
    link = tmp_path / "config" / "glossary.json"
    link.parent.mkdir()
    link.symlink_to(target)
    GlossaryStore(link).add([GlossaryEntry("new", "nuevo")])
    assert link.is_symlink() and link.resolve() == target.resolve()
    assert mode(target) == 0o600
    assert [e.term for e in GlossaryStore(target).load()] == ["old", "new"]
