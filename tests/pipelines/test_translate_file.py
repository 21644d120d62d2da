"""The formats orchestrator: content sniffing, output naming, atomic writes, never over the input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import needs_apertium

from dragoman.documents import base, handlers
from dragoman.errors import Cancelled, DocumentFormatError, EngineTimeout, FileTooLarge, InvalidRequest
from dragoman.pipelines import translate_file as files
from dragoman.progress import JobContext
from dragoman.settings import Settings
from dragoman.translation.engine import Engine
from dragoman.translation.types import GlossaryEntry, TranslateOptions


@pytest.fixture
def engine() -> Any:
    with Engine(Settings.from_env()) as eng:
        yield eng


@needs_apertium
def test_text_file_translated_beside_the_input(engine: Engine, tmp_path: Path) -> None:
    source = tmp_path / "notes.txt"
    source.write_text("The house is red.\r\n\r\n  The garden is big.\r\n", encoding="utf-8")
    before = source.read_bytes()
    result = files.translate_file(engine, source, "es")
    assert result.output_path == tmp_path / "notes.es.txt"
    out = result.output_path.read_bytes().decode("utf-8")
    assert "casa" in out and out.count("\r\n") == 3 and "\r\n  " in out
    assert source.read_bytes() == before
    assert (result.source, result.target, result.provenance, result.format) == (
        "eng_Latn",
        "spa_Latn",
        "on-device",
        "txt",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.es.txt", "notes.txt"]


@needs_apertium
def test_existing_output_is_kept_unless_overwrite(engine: Engine, tmp_path: Path) -> None:
    source = tmp_path / "a.txt"
    source.write_text("The house is red.", encoding="utf-8")
    existing = tmp_path / "a.es.txt"
    existing.write_text("keep me", encoding="utf-8")
    with pytest.raises(InvalidRequest, match="exists"):
        files.translate_file(engine, source, "es")
    assert existing.read_text(encoding="utf-8") == "keep me"
    files.translate_file(engine, source, "es", overwrite=True)
    assert "casa" in existing.read_text(encoding="utf-8")
    with pytest.raises(InvalidRequest, match="input"):
        files.translate_file(engine, source, "es", output=source, overwrite=True)


def test_failing_handler_leaves_nothing_behind(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "a.txt"
    source.write_text("Hello.", encoding="utf-8")

    def broken(*args: object, **kwargs: object) -> list[str]:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(files.EngineTextTranslator, "__call__", broken)
    with pytest.raises(RuntimeError):
        files.translate_file(engine, source, "es", source="en")
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_binary_content_is_refused_whatever_the_name(engine: Engine, tmp_path: Path) -> None:
    fake = tmp_path / "image.txt"
    fake.write_bytes(b"\x00\x01\x02binary\x00" * 50)
    with pytest.raises(DocumentFormatError) as info:
        files.translate_file(engine, fake, "es")
    assert info.value.status == 415


def test_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "big.txt"
    big.write_text("x" * 2048, encoding="utf-8")
    with pytest.raises(FileTooLarge) as info:
        base.check_size(big, limit=1024)
    assert info.value.status == 413
    with pytest.raises(InvalidRequest, match="does not exist"):
        base.check_size(tmp_path / "missing.txt")


def test_atomic_output_refuses_a_name_taken_meanwhile(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    with pytest.raises(InvalidRequest), base.atomic_output(target) as partial:
        partial.write_text("new", encoding="utf-8")
        target.write_text("someone else", encoding="utf-8")
    assert target.read_text(encoding="utf-8") == "someone else"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_default_output_uses_the_bcp47_tag() -> None:
    assert handlers.default_output(Path("/x/report.docx"), "spa_Latn") == Path("/x/report.es.docx")
    assert handlers.default_output(Path("/x/a.txt"), "zh-TW") == Path("/x/a.zh-Hant.txt")


@needs_apertium
def test_glossary_is_what_the_caller_gives(engine: Engine, tmp_path: Path) -> None:
    source = tmp_path / "a.txt"
    source.write_text("The garden is big.", encoding="utf-8")
    entries = [GlossaryEntry("garden", "VERGEL", source="en", target="es")]
    result = files.translate_file(engine, source, "es", source="en", glossary=entries)
    assert "VERGEL" in result.output_path.read_text(encoding="utf-8")
    plain = files.translate_file(engine, source, "es", source="en", output=tmp_path / "plain.txt")
    assert "VERGEL" not in plain.output_path.read_text(encoding="utf-8")  # no entries: none applies


def test_cancelled_or_late_file_work_stops_and_leaves_nothing(engine: Engine, tmp_path: Path) -> None:
    source = tmp_path / "a.txt"
    source.write_text("The house is red.\n\nThe garden is big.\n", encoding="utf-8")
    cancelled = JobContext()
    cancelled.cancel.cancel("stop")
    with pytest.raises(Cancelled):
        files.translate_file(engine, source, "es", source="en", context=cancelled)
    with pytest.raises(EngineTimeout):
        files.translate_file(engine, source, "es", source="en", context=JobContext(deadline=0.0))
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_translator_counts_progress_across_calls(engine: Engine) -> None:
    seen: list[tuple[int, int, str]] = []
    translator = files.EngineTextTranslator(
        engine, TranslateOptions("es", source="es"), context=JobContext.of(lambda *a: seen.append(a))
    )
    texts = ["Hola."] * (files.TEXTS_PER_PASS + 4)  # same language: returned as they are, in two passes
    assert translator(texts, done=10, total=500) == texts
    assert seen == [(10 + files.TEXTS_PER_PASS, 500, "translating"), (10 + len(texts), 500, "translating")]
    seen.clear()
    translator(["Hola."])
    assert seen == [(1, 1, "translating")]
