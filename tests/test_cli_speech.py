"""``dragoman speak`` and ``dragoman voices list`` (issue 14), called in-process through ``main``."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dragoman.cli import main
from dragoman.media.audio import read_wav


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_speak_writes_a_wav(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "out.wav"
    code, out, err = run(
        capsys, "speak", "Hello there. How are you?", "--voice", "aria", "--lang", "en", "-o", str(out_file)
    )
    assert code == 0, err
    audio = read_wav(out_file)
    assert audio.rate == 16000 and 1.0 < audio.duration < 5.0
    assert f"wrote {out_file}" in out and "pico" in out


def test_speak_json_studio_emotion_speed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "studio.wav"
    code, out, err = run(
        capsys,
        "speak",
        "Guten Morgen. Wie geht es dir?",
        "--voice",
        "marcus",
        "--lang",
        "de",
        "-o",
        str(out_file),
        "--emotion",
        "warm",
        "--studio",
        "--speed",
        "1.2",
        "--pitch-st",
        "1",
        "--json",
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["path"] == str(out_file) and data["sample_rate"] == 48000 and data["voice"] == "marcus"
    assert data["options"]["emotion_preset"] == "warm" and data["options"]["speed"] == 1.2
    assert data["options"]["emotion"]["pitch_delta_st"] == 1.0 and data["options"]["studio"] is True
    assert read_wav(out_file).rate == 48000


def test_speak_reads_stdin_and_writes_stdout(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dragoman.cli", "speak", "--lang", "pl", "--voice", "kai", "-o", "-"],
        input="Dzień dobry. Jak się masz?".encode(),
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout[:4] == b"RIFF" and read_wav(io.BytesIO(done.stdout).getvalue()).duration > 0.5


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--speed", "2.0"], "speed must be between 0.5 and 1.8"),
        (["--speed", "0.4"], "speed must be between 0.5 and 1.8"),
        (["--energy", "9"], "energy_ratio must be between"),
        (["--pause-scale", "-1"], "pause_scale must be between"),
        (["--lang", "xx"], "is not served"),
    ],
)
def test_bad_options_are_typed_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    out_file = tmp_path / "x.wav"
    code, _, err = run(capsys, "speak", "Hello.", "--lang", "en", "-o", str(out_file), *extra, "--json")
    assert code == 2 and not out_file.exists()
    error = json.loads(err)
    assert error["code"] == "invalid_request" and message in error["error"]


def test_an_existing_file_is_kept_without_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "kept.wav"
    out_file.write_bytes(b"mine")
    code, _, err = run(capsys, "speak", "Hello.", "--lang", "en", "-o", str(out_file))
    assert code == 2 and "--overwrite" in err and out_file.read_bytes() == b"mine"
    code, _, err = run(capsys, "speak", "Hello.", "--lang", "en", "-o", str(out_file), "--overwrite")
    assert code == 0 and read_wav(out_file).duration > 0.2


def test_too_long_text_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "speak", "a" * 50_001, "--lang", "en", "-o", str(tmp_path / "x.wav"), "--json")
    assert code == 2 and json.loads(err)["code"] == "limit_exceeded"


def test_voices_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "voices", "list", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert [v["name"] for v in data["voices"]] == [
        "aria",
        "nova",
        "lyra",
        "iris",
        "maya",
        "marcus",
        "atlas",
        "felix",
        "orion",
        "kai",
    ]
    assert len(data["languages"]) == 31
    assert data["voices"][0]["languages"]["en"]["standard"]["engine"] == "pico"
    code, out, _ = run(capsys, "voices", "list")
    assert code == 0 and "aria" in out and "en  English" in out and "pico:en-US" in out
    assert len([line for line in out.splitlines() if line.startswith("  ") and line[4:6] == "  "]) == 31
