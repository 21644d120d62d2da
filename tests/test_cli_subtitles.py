"""``dragoman transcribe`` and ``dragoman subtitles`` (issue 15), called in-process through ``main`` with the
tiny Whisper (random weights: gibberish words, real loading, decoding and word timestamps) and the tiny
en->es pack."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pysrt
import pytest
from subtitles_support import TINY_ID, build_tiny, install_tiny, make_media, needs_ffmpeg, tiny_recognizer

import dragoman.cli.subtitles as cli_subtitles
from dragoman.cli import main
from dragoman.pipelines import subtitles as pipeline
from dragoman.settings import Settings

pytestmark = needs_ffmpeg


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny(tmp_path_factory.mktemp("whisper"))


@pytest.fixture(scope="module")
def media_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("media")
    make_media(folder / "talk.mp4")
    make_media(folder / "silent.mp4", audio=False)
    return folder


@pytest.fixture
def setup(
    tiny_model: Path,
    media_dir: Path,
    packs_dir: Path,
    tiny_argos_pack: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    """The tiny Whisper installed, the tiny en->es pack, Apertium off; answers a folder holding talk.mp4."""
    monkeypatch.setenv("DRAGOMAN_APERTIUM", "0")
    shutil.copytree(tiny_argos_pack, packs_dir / tiny_argos_pack.name)
    install_tiny(tiny_model, Settings.from_env())
    monkeypatch.setattr(cli_subtitles, "make_recognizer", tiny_recognizer)
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(media_dir / "talk.mp4", work / "talk.mp4")
    return work


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_transcribe_json_names_the_language_its_confidence_and_word_timings(
    setup: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "transcribe", str(setup / "talk.mp4"), "--model", TINY_ID, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["model"] == TINY_ID and data["provenance"] == "on-device"
    assert isinstance(data["language"], str) and 0 < data["language_probability"] <= 1
    assert data["language_given"] is False and data["duration"] == pytest.approx(6.0, abs=0.1)
    assert data["segments"] and data["media"] == str(setup / "talk.mp4")
    words = [w for s in data["segments"] for w in s["words"]]
    assert words and all(0 <= w["start"] <= w["end"] <= 6.1 for w in words)
    assert data["text"].split()[0] == words[0]["text"]


def test_transcribe_prints_the_text_and_says_the_language_on_stderr(
    setup: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "transcribe", str(setup / "talk.mp4"), "--model", TINY_ID, "--lang", "de")
    assert code == 0, err
    assert out.strip() and "language de (given)" in err and TINY_ID in err


def test_subtitles_writes_every_track_and_format_beside_the_media(
    setup: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    media = setup / "talk.mp4"
    argv = ["subtitles", str(media), "--model", TINY_ID, "--from", "en", "--to", "es"]
    code, out, err = run(capsys, *argv, "--format", "srt,vtt,txt,bilingual_srt", "--json")
    assert code == 0, err
    data = json.loads(out)
    names = ["talk.en.srt", "talk.en.vtt", "talk.en.txt", "talk.es.srt", "talk.es.vtt", "talk.es.txt"]
    assert [Path(p).name for p in data["paths"]] == [*names, "talk.en-es.srt"]
    assert sorted(p.name for p in setup.iterdir()) == sorted([*names, "talk.en-es.srt", "talk.mp4"])
    assert data["language"] == "en" and data["tracks"][1]["route"]
    source, target = pysrt.open(str(setup / "talk.en.srt")), pysrt.open(str(setup / "talk.es.srt"))
    assert len(source) == len(target) == data["tracks"][0]["cues"] > 0
    assert [(c.start, c.end) for c in source] == [(c.start, c.end) for c in target]  # the same timing
    bilingual = pysrt.open(str(setup / "talk.en-es.srt"))
    for pair, src, tgt in zip(bilingual, source, target, strict=True):
        assert pair.text == src.text + "\n" + tgt.text


def test_subtitles_never_overwrite_without_being_asked(
    setup: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    media = setup / "talk.mp4"
    taken = setup / "talk.es.srt"
    taken.write_text("mine", encoding="utf-8")
    recognised: list[str] = []
    real = pipeline.recognise_file

    def counted(*args: Any, **kwargs: Any) -> Any:
        recognised.append("called")
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "recognise_file", counted)
    code, _, err = run(capsys, "subtitles", str(media), "--model", TINY_ID, "--to", "es")
    assert code == 2 and "already exists" in err and "--overwrite" in err
    assert recognised == []  # refused before any work
    assert taken.read_text(encoding="utf-8") == "mine"
    assert sorted(p.name for p in setup.iterdir()) == ["talk.es.srt", "talk.mp4"]
    argv = ["subtitles", str(media), "--model", TINY_ID, "--from", "en", "--to", "es", "--overwrite"]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert "wrote" in out and taken.read_text(encoding="utf-8") != "mine"
    assert len(pysrt.open(str(taken))) > 0


def test_subtitles_into_another_folder_and_captions_only(
    setup: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = setup / "subs"
    code, out, err = run(
        capsys, "subtitles", str(setup / "talk.mp4"), "--model", TINY_ID, "--from", "en", "-o", str(out_dir)
    )
    assert code == 0, err
    assert [p.name for p in out_dir.iterdir()] == [
        "talk.en.srt"
    ] and f"wrote {out_dir / 'talk.en.srt'}" in out


def test_a_progress_bar_goes_to_stderr_on_a_terminal(
    setup: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    code, out, err = run(capsys, "subtitles", str(setup / "talk.mp4"), "--model", TINY_ID, "--from", "en")
    assert code == 0, err
    assert "recognising" in err and "%" in err and "recognising" not in out


def test_an_interrupted_run_leaves_no_file(
    setup: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "translate_track", interrupted)
    code, _, _ = run(capsys, "subtitles", str(setup / "talk.mp4"), "--model", TINY_ID, "--to", "es")
    assert code == 130
    assert [p.name for p in setup.iterdir()] == ["talk.mp4"]


@pytest.mark.parametrize(
    ("name", "argv", "code_name", "message"),
    [
        ("silent.mp4", [], "no_audio_stream", "no audio"),
        ("notes.mp4", [], "unsupported_media", "notes.mp4"),
        ("talk.mp4", ["--format", "srt,ass"], "invalid_request", "unknown subtitle format 'ass'"),
        ("talk.mp4", ["--format", "bilingual_srt"], "invalid_request", "target"),
        ("talk.mp4", ["--to", "xx-nope"], "unknown_language", "xx-nope"),
        ("talk.mp4", ["--model", "absent"], "asr_model_not_installed", "absent"),
        ("talk.mp4", ["-o", "{dir}/talk.mp4"], "invalid_request", "is not a folder"),
    ],
)
def test_bad_media_and_options_are_typed_errors(
    setup: Path,
    media_dir: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    argv: list[str],
    code_name: str,
    message: str,
) -> None:
    shutil.copy(media_dir / "silent.mp4", setup / "silent.mp4")
    (setup / "notes.mp4").write_text("this is not a video at all", encoding="utf-8")
    before = sorted(p.name for p in setup.iterdir())
    model = [] if "--model" in argv else ["--model", TINY_ID]
    argv = [arg.format(dir=setup) for arg in argv]
    code, _, err = run(capsys, "subtitles", str(setup / name), *model, *argv, "--json")
    assert code == 2
    error = json.loads(err)
    assert error["code"] == code_name and message in error["error"], error
    assert sorted(p.name for p in setup.iterdir()) == before


def test_a_full_disk_is_a_typed_error_that_says_where_else_to_write(
    setup: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import os

    from dragoman.documents import partials

    def full(destination: Path) -> Path:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(destination))

    monkeypatch.setattr(partials, "create", full)
    code, _, err = run(
        capsys, "subtitles", str(setup / "talk.mp4"), "--model", TINY_ID, "--from", "en", "--json"
    )
    error = json.loads(err)
    assert code == 2 and error["code"] == "file_access"
    assert "no space left" in error["error"] and "-o/--output" in error["error"]
    assert [p.name for p in setup.iterdir()] == ["talk.mp4"]


def test_a_given_spoken_languages_captions_are_checked_before_any_work(
    setup: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (setup / "talk.en.srt").write_text("mine", encoding="utf-8")

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("recognition ran for a file that could not be written")

    monkeypatch.setattr(pipeline, "recognise_file", never)
    code, _, err = run(capsys, "subtitles", str(setup / "talk.mp4"), "--model", TINY_ID, "--from", "en-US")
    assert code == 2 and "talk.en.srt already exists" in err
    assert (setup / "talk.en.srt").read_text(encoding="utf-8") == "mine"
