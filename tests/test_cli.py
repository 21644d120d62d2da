"""The command line, called in-process through ``main`` (and once as a real subprocess)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import HAVE_APERTIUM

from dragoman.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.skipif(
    not HAVE_APERTIUM, reason="apertium-eng-spa is not installed (apt-get install apertium-eng-spa)"
)
def test_translate_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "translate", "The house is red.", "--to", "es", "--from", "en", "--json")
    data = json.loads(out)
    assert code == 0 and "casa" in data["translation"]
    assert {k: data[k] for k in ("source", "target", "provenance")} == {
        "source": "eng_Latn",
        "target": "spa_Latn",
        "provenance": "on-device",
    }


def test_translate_with_a_pack_and_stdin(packs_dir: Path, tiny_argos_pack: Path) -> None:
    shutil.copytree(tiny_argos_pack, packs_dir / "translate-en_es")
    done = subprocess.run(
        [sys.executable, "-m", "dragoman.cli", "translate", "--to", "es", "--from", "en", "--json"],
        input="Hello world.\n",
        capture_output=True,
        text=True,
        check=False,
        env={**__import__("os").environ, "DRAGOMAN_APERTIUM": "0"},
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["route"] == ["argos-en-es:eng_Latn->spa_Latn"] and data["translation"].endswith("\n")


def test_detect_and_languages(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "detect", "Où est la gare, s'il vous plaît ?", "--json")
    assert code == 0 and json.loads(out)["flores"] == "fra_Latn"
    code, out, _ = run(capsys, "languages", "--all", "--json")
    rows = json.loads(out)
    assert len(rows) == 204 and set(rows[0]) == {"flores", "bcp47", "name", "rtl"}


def test_languages_lists_what_installed_packs_reach(
    capsys: pytest.CaptureFixture[str],
    packs_dir: Path,
    tiny_argos_pack: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DRAGOMAN_APERTIUM", "0")
    code, out, _ = run(capsys, "languages", "--json")
    assert code == 0 and json.loads(out) == []
    shutil.copytree(tiny_argos_pack, packs_dir / "translate-en_es")
    code, out, _ = run(capsys, "languages", "--json")
    assert [r["flores"] for r in json.loads(out)] == ["eng_Latn", "spa_Latn"]


def test_errors_exit_2_with_an_actionable_message(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "translate", "Hello", "--to", "klingon")
    assert code == 2 and out == ""
    assert "klingon" in err and "dragoman languages --all" in err


def test_packs_install_list_verify_remove(
    capsys: pytest.CaptureFixture[str], packs_dir: Path, argos_archive: Path
) -> None:
    code, out, _ = run(capsys, "packs", "install", str(argos_archive), "--json")
    assert code == 0 and json.loads(out)["installed"] == "argos-en-es"
    code, out, _ = run(capsys, "packs", "list", "--json")
    assert "argos-en-es" in [p["id"] for p in json.loads(out)]
    code, out, _ = run(capsys, "packs", "verify", "argos-en-es", "--json")
    assert code == 0
    code, out, _ = run(capsys, "packs", "remove", "argos-en-es", "--json")
    assert code == 0 and not (packs_dir / "argos-en-es").exists()
    code, _, err = run(capsys, "packs", "remove", "argos-en-es")
    assert code == 2 and "not installed" in err


def test_status_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "status", "--json")
    status = json.loads(out)
    assert code == 0
    assert status["platform"]["ctranslate2"] and "float32" in status["platform"]["compute_types_cpu"]
    assert status["detection"]["model"].endswith(".ftz")
    assert status["daemon"]["alive"] is False
    if HAVE_APERTIUM:
        assert "eng_Latn->spa_Latn" in status["apertium"]["pairs"]


@pytest.mark.skipif(
    not HAVE_APERTIUM, reason="apertium-eng-spa is not installed (apt-get install apertium-eng-spa)"
)
def test_translate_file_writes_beside_the_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "note.md"
    source.write_text("# The house\n\nThe house is red.\n\n```\ncode stays\n```\n", encoding="utf-8")
    code, out, _ = run(capsys, "translate-file", str(source), "--to", "es", "--json")
    data = json.loads(out)
    assert code == 0 and data["output_path"] == str(tmp_path / "note.es.md") and data["format"] == "markdown"
    written = (tmp_path / "note.es.md").read_text(encoding="utf-8")
    assert "casa" in written and "```\ncode stays\n```" in written
    code, _, err = run(capsys, "translate-file", str(source), "--to", "es")
    assert code == 2 and "already exists" in err


def test_the_user_glossary_file_applies_to_translate_and_translate_file(
    capsys: pytest.CaptureFixture[str],
    packs_dir: Path,
    tiny_argos_pack: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The engine owns no glossary: the command line reads the user's file and hands its entries over.
    monkeypatch.setenv("DRAGOMAN_APERTIUM", "0")
    from dragoman.server.local_store import GlossaryStore
    from dragoman.settings import Settings
    from dragoman.translation.types import GlossaryEntry

    shutil.copytree(tiny_argos_pack, packs_dir / "translate-en_es")
    store = GlossaryStore(Settings.from_env().local.glossary_path)
    store.add([GlossaryEntry("world", "MUNDO-CLI")], source="en", target="es")
    code, out, _ = run(capsys, "translate", "Hello world.", "--to", "es", "--from", "en")
    assert code == 0 and "MUNDO-CLI" in out
    source = tmp_path / "hello.txt"
    source.write_text("Hello world.\n", encoding="utf-8")
    code, _, _ = run(capsys, "translate-file", str(source), "--to", "es", "--from", "en")
    assert code == 0 and "MUNDO-CLI" in (tmp_path / "hello.es.txt").read_text(encoding="utf-8")


@pytest.mark.skipif(
    shutil.which("tesseract") is None, reason="tesseract is not installed (apt-get install tesseract-ocr)"
)
def test_ocr_prints_the_translation(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from PIL import Image, ImageDraw, ImageFont

    font = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
    if not font.is_file():
        pytest.skip("apt-get install fonts-dejavu-core")
    image = Image.new("RGB", (900, 160), "white")
    ImageDraw.Draw(image).text(
        (30, 50), "The house is red.", fill="black", font=ImageFont.truetype(str(font), 48)
    )
    image.save(tmp_path / "sign.png")
    code, out, _ = run(capsys, "ocr", str(tmp_path / "sign.png"), "--to", "es", "--from", "en", "--json")
    data = json.loads(out)
    assert code == 0 and "house" in data["extracted_text"] and data["output_path"] is None
    if HAVE_APERTIUM:
        assert "casa" in data["translated_text"]


@pytest.mark.parametrize(
    ("argv", "verbose"),
    [
        (["mcp", "-v"], True),  # issue 9, item 9: was refused
        (["mcp", "--verbose"], True),
        (["-v", "mcp"], True),  # the subcommand's flag must not reset the one before it
        (["mcp"], False),
        (["translate", "Hi", "--to", "es", "-v"], True),
        (["packs", "list", "-v"], True),
        (["-v", "packs", "list"], True),
    ],
)
def test_verbose_before_or_after_the_command(argv: list[str], verbose: bool) -> None:
    from dragoman.cli.main import build_parser

    assert build_parser().parse_args(argv).verbose is verbose


def test_an_unsupported_pair_suggests_a_pair_a_shell_keeps(
    capsys: pytest.CaptureFixture[str],
    packs_dir: Path,
    tiny_argos_pack: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`dragoman packs install en->ja` pasted in a shell writes to a file named `ja`; `en:ja` is safe."""
    monkeypatch.setenv("DRAGOMAN_APERTIUM", "0")
    shutil.copytree(tiny_argos_pack, packs_dir / "translate-en_es")
    code, _, err = run(capsys, "translate", "Hello.", "--to", "ja", "--from", "en")
    assert code == 2 and "`dragoman packs install en:ja`" in err
    assert "->ja`" not in err
