"""``dragoman voices clone add|list|remove`` and ``dragoman speak --clone`` (issue 14), in-process."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from dragoman.cli import main
from dragoman.media.audio import read_wav

REFERENCE = (
    "Hello there, this is a reference recording for voice matching. It has several sentences, so that it "
    "lasts long enough. We speak clearly and not too fast, in a quiet room."
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_clone_add_list_speak_remove(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ref = tmp_path / "ref.wav"
    store = str(tmp_path / "clones")
    code, _, err = run(capsys, "speak", REFERENCE, "--voice", "atlas", "--lang", "en", "-o", str(ref))
    assert code == 0, err
    code, out, err = run(
        capsys, "voices", "clone", "add", str(ref), "--name", "Me", "--clone-dir", store, "--json"
    )
    assert code == 0, err
    clone = json.loads(out)
    assert clone["gender"] == "male" and clone["method"].startswith("voice matching")
    code, out, _ = run(capsys, "voices", "clone", "list", "--clone-dir", store, "--json")
    assert [c["id"] for c in json.loads(out)] == [clone["id"]]
    code, out, _ = run(capsys, "voices", "clone", "list", "--clone-dir", store)
    assert clone["id"] in out and "similarity" in out
    spoken = tmp_path / "cloned.wav"
    code, out, err = run(
        capsys, "speak", "Good morning.", "--lang", "en", "--clone", clone["id"], "--clone-dir", store,
        "-o", str(spoken), "--json",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["voice"] == clone["persona"] and read_wav(spoken).duration > 0.3
    code, out, _ = run(capsys, "voices", "clone", "remove", clone["id"], "--clone-dir", store)
    assert code == 0 and "removed" in out
    assert not (Path(store) / clone["id"]).exists()
    code, _, err = run(capsys, "voices", "clone", "remove", clone["id"], "--clone-dir", store)
    assert code != 0 and "no clone" in err


def test_clone_add_refuses_what_is_not_speech(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not audio at all " * 100)
    code, _, err = run(
        capsys, "voices", "clone", "add", str(text), "--name", "x", "--clone-dir", str(tmp_path)
    )
    assert code != 0 and "WAV" in err
    assert list(tmp_path.glob("*/clone.json")) == []


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs the ffmpeg program")
def test_clone_add_reads_an_mp3_made_by_ffmpeg(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A reference in another format than WAV (an mp3 encoded here by ffmpeg) is decoded in process."""
    ref = tmp_path / "ref.wav"
    code, _, err = run(capsys, "speak", REFERENCE, "--voice", "lyra", "--lang", "en", "-o", str(ref))
    assert code == 0, err
    mp3 = tmp_path / "ref.mp3"
    subprocess.run(
        ["ffmpeg", "-nostdin", "-loglevel", "error", "-i", str(ref), "-c:a", "libmp3lame", str(mp3)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    store = str(tmp_path / "clones")
    code, out, err = run(
        capsys, "voices", "clone", "add", str(mp3), "--name", "Me", "--clone-dir", store, "--json"
    )
    assert code == 0, err
    assert json.loads(out)["gender"] == "female"
    (tmp_path / "cut.mp3").write_bytes(b"ID3" + bytes(range(256)) * 8)
    code, _, err = run(
        capsys, "voices", "clone", "add", str(tmp_path / "cut.mp3"), "--name", "x", "--clone-dir", store
    )
    assert code != 0 and "not audio" in err
    assert len(list(Path(store).glob("*/clone.json"))) == 1
