"""``dragoman dub`` (issue 16), called in-process through ``main``: a short video of English speech made in
the test (SVOX Pico), its own source subtitles given (no recogniser needed), the tiny en->es pack
translating (random weights: gibberish, spoken by the real Spanish voice), the real synthesizer, mixer and
ffmpeg."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from dub_front_support import fake_result, make_dub_media, needs_ffmpeg, stream_kinds

import dragoman.cli.dub as cli_dub
from dragoman.cli import main
from dragoman.pipelines import dub as pipeline

pytestmark = needs_ffmpeg


@pytest.fixture(scope="module")
def media_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("dub-media")
    make_dub_media(folder)
    return folder


@pytest.fixture
def setup(
    media_dir: Path, packs_dir: Path, tiny_argos_pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """The tiny en->es pack, Apertium off; answers a folder holding talk.mp4 and source.srt."""
    monkeypatch.setenv("DRAGOMAN_APERTIUM", "0")
    shutil.copytree(tiny_argos_pack, packs_dir / tiny_argos_pack.name)
    work = tmp_path / "work"
    work.mkdir()
    for name in ("talk.mp4", "source.srt"):
        shutil.copy(media_dir / name, work / name)
    return work


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def dub_args(folder: Path, *extra: str) -> list[str]:
    return [
        "dub",
        str(folder / "talk.mp4"),
        "--to",
        "es",
        "--from",
        "en",
        "--subtitles",
        str(folder / "source.srt"),
        *extra,
    ]


@pytest.fixture
def no_pipeline(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The pipeline replaced by a recorder answering fake results (no file written)."""
    calls: list[Any] = []

    def recorded(media: Path, targets: Any, options: Any, **kwargs: Any) -> list[Any]:
        calls.append((media, list(targets), options, kwargs))
        return [fake_result(media, target) for target in targets]

    monkeypatch.setattr(pipeline, "dub_batch", recorded)
    return calls


def test_dub_writes_the_video_its_audio_and_both_languages_subtitles(
    setup: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, *dub_args(setup, "--json"))
    assert code == 0, err
    data = json.loads(out)
    (dub,) = data["dubs"]
    assert dub["target"] == "es" and dub["source_language"] == "en" and dub["provenance"] == "on-device"
    assert dub["lines"] == 2 and dub["voices"] == ["aria"]
    assert dub["duration"] == pytest.approx(5.0, abs=2.5)
    video, audio = Path(dub["video"]), Path(dub["audio"])
    assert video.name == "talk.es.mp4" and audio.name == "talk.es.dub.m4a"
    assert video.parent == setup and audio.is_file()
    kinds = stream_kinds(video)
    assert kinds.count("video") == 1 and "audio" in kinds
    assert all(Path(p).is_file() for p in dub["subtitles"].values())
    assert any(k.startswith("srt:") and k.endswith("es") for k in dub["subtitles"])
    assert set(dub["stage_seconds"]) >= {"probe", "translate", "synthesise", "mix", "mux"}
    written = {video, audio, *(Path(p) for p in dub["subtitles"].values())}
    assert set(setup.iterdir()) == written | {setup / "talk.mp4", setup / "source.srt"}


def test_dub_never_overwrites_without_being_asked_and_shows_a_bar_per_stage(
    setup: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = setup / "talk.es.mp4"
    taken.write_bytes(b"mine")
    synthesised: list[str] = []
    real = cli_dub.make_synthesizer

    def counted(settings: Any) -> Any:
        synthesizer = real(settings)
        speak = synthesizer.synthesize

        def counting(*args: Any, **kwargs: Any) -> Any:
            synthesised.append("line")
            return speak(*args, **kwargs)

        monkeypatch.setattr(synthesizer, "synthesize", counting)
        return synthesizer

    monkeypatch.setattr(cli_dub, "make_synthesizer", counted)
    code, _, err = run(capsys, *dub_args(setup))
    assert code == 2 and "already exists" in err and "--overwrite" in err
    assert taken.read_bytes() == b"mine" and synthesised == []  # refused before any work
    assert sorted(p.name for p in setup.iterdir()) == ["source.srt", "talk.es.mp4", "talk.mp4"]

    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    code, out, err = run(capsys, *dub_args(setup, "--overwrite"))
    assert code == 0, err
    assert f"wrote {taken}" in out and taken.read_bytes() != b"mine"
    assert "es stages:" in err
    bars = [stage for stage in ("probe", "translate", "synthesise", "mix", "mux") if f"{stage} " in err]
    assert len(bars) >= 4 and "%" in err, err  # one bar per stage, on stderr only
    assert "%" not in out


@pytest.mark.parametrize(
    ("message", "stage"),
    [
        ("dubbing into es: synthesise: line 3 of 9", "es synthesise"),
        ("dubbing into fr: probed", "fr probe"),
        ("dubbing into es: mixing", "es mix"),
        ("recognising: recognising", "recognise"),
        ("translate", "translate"),
        ("dubbing into es: done", ""),
        ("", "working"),
    ],
)
def test_progress_messages_name_their_stage(message: str, stage: str) -> None:
    assert cli_dub._stage(message) == stage


def test_an_interrupted_dub_leaves_no_file(
    setup: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = cli_dub.make_synthesizer

    def interrupting(settings: Any) -> Any:
        synthesizer = real(settings)

        def interrupted(*args: object, **kwargs: object) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(synthesizer, "synthesize", interrupted)
        return synthesizer

    monkeypatch.setattr(cli_dub, "make_synthesizer", interrupting)
    code, _, _ = run(capsys, *dub_args(setup))
    assert code == 130
    assert sorted(p.name for p in setup.iterdir()) == ["source.srt", "talk.mp4"]
    assert not list(setup.glob(".*"))


def test_several_targets_make_one_batch_with_the_voice_options(
    setup: Path, capsys: pytest.CaptureFixture[str], no_pipeline: list[Any]
) -> None:
    out_dir = setup / "out"
    argv = ["dub", str(setup / "talk.mp4"), "--to", "es, fr,es", "--voice-mode", "match", "-o", str(out_dir)]
    code, out, err = run(
        capsys, *argv, "--subtitles", str(setup / "source.srt"), "--tier", "fast", "--model", "m1", "--json"
    )
    assert code == 0, err
    ((media, targets, options, kwargs),) = no_pipeline  # one batch: the speech is recognised once
    assert media == setup / "talk.mp4" and targets == ["es", "fr"]
    assert (options.voice_mode, options.source, options.tier) == ("match", "auto", "fast")
    assert options.subtitles == setup / "source.srt"
    assert kwargs["out_dir"] == out_dir and kwargs["overwrite"] is False and kwargs["clone_store"] is None
    assert kwargs["hint"] == "give --overwrite" and kwargs["transcribe_options"].language == "auto"
    assert kwargs["transcribe_options"].model == "m1"
    data = json.loads(out)
    assert [d["target"] for d in data["dubs"]] == ["es", "fr"]
    assert data["dubs"][0]["voices"] == ["aria", "marcus"] and data["dubs"][0]["beyond_natural"] == [1]


def test_text_output_names_the_files_and_warns_on_stderr(
    setup: Path, capsys: pytest.CaptureFixture[str], no_pipeline: list[Any]
) -> None:
    code, out, err = run(capsys, "dub", str(setup / "talk.mp4"), "--to", "es", "--voice", "nova")
    assert code == 0, err
    options = no_pipeline[0][2]
    assert options.voice == "nova" and options.voice_mode == "preset" and options.subtitles is None
    assert "es: 2 lines from en" in out and "1 fitted within the natural range" in out
    assert f"wrote {setup / 'talk.es.mp4'}" in out and f"wrote {setup / 'talk.es.dub.m4a'}" in out
    assert "warning: line 1 compressed" in err and "warning" not in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--to", ","], "--to names at least one"),
        (["--to", "es", "--voice", "aria", "--voice-mode", "match"], "--voice names the one voice"),
        (["--to", "es", "--voice", "aria", "--clone", "x"], "--voice and --clone"),
        (["--to", "es", "--voice-mode", "clone"], "needs --clone"),
        (["--to", "es", "--voice-mode", "match", "--clone", "x"], "does not go with --voice-mode match"),
    ],
)
def test_contradicting_options_are_refused_before_any_work(
    setup: Path, capsys: pytest.CaptureFixture[str], no_pipeline: list[Any], argv: list[str], message: str
) -> None:
    code, _, err = run(capsys, "dub", str(setup / "talk.mp4"), *argv, "--json")
    assert code == 2
    error = json.loads(err)
    assert error["code"] == "invalid_request" and message in error["error"], error
    assert no_pipeline == []


def test_an_unknown_clone_is_a_typed_error(
    setup: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    clones = tmp_path / "clones"
    argv = ["dub", str(setup / "talk.mp4"), "--to", "es", "--from", "en", "--clone", "nope"]
    code, _, err = run(
        capsys, *argv, "--clone-dir", str(clones), "--subtitles", str(setup / "source.srt"), "--json"
    )
    assert code == 2
    error = json.loads(err)
    assert error["code"] == "clone_not_found" and "nope" in error["error"], error
    assert sorted(p.name for p in setup.iterdir()) == ["source.srt", "talk.mp4"]


def test_a_file_that_is_not_media_is_a_typed_error(setup: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (setup / "notes.mp4").write_text("this is not a video at all", encoding="utf-8")
    code, _, err = run(capsys, "dub", str(setup / "notes.mp4"), "--to", "es", "--from", "en", "--json")
    assert code == 2
    error = json.loads(err)
    assert error["code"] == "unsupported_media" and "notes.mp4" in error["error"], error
    assert sorted(p.name for p in setup.iterdir()) == ["notes.mp4", "source.srt", "talk.mp4"]
