"""Cover art is not video (issue 16): an MP3 (or M4A) with a picture attached holds a video stream of one
frame that libav marks ``attached_pic``; the probe does not count it as video, so dubbing it gives the dubbed
audio and subtitles and no video file (before, the dub of an MP3 with a cover came out as an MP4)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from dub_support import DictEngine

from dragoman.media.audio import Audio, write_wav
from dragoman.media.probe import probe
from dragoman.media.subtitle_files import srt_timestamp
from dragoman.pipelines.dub import DubOptions, dub_file
from dragoman.speech.tts.synth import Synthesizer

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="apt-get install ffmpeg")

TEXTS = ["The weather is fine today.", "Bring your coat, it may rain later."]


def _ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-v", "error", "-y", *args], check=True, capture_output=True, timeout=120)


def _with_cover(folder: Path, suffix: str = ".mp3") -> Path:
    """``talk<suffix>``: 7 s of quiet noise with a PNG cover attached (ffmpeg's test pattern)."""
    folder.mkdir(parents=True, exist_ok=True)
    wav = folder / "plain.wav"
    rng = np.random.default_rng(16)
    write_wav(Audio((rng.standard_normal(7 * 16000) * 0.01).astype(np.float32), 16000), wav)
    cover = folder / "cover.png"
    _ffmpeg("-f", "lavfi", "-i", "testsrc=size=64x64:rate=1", "-frames:v", "1", str(cover))
    out = folder / f"talk{suffix}"
    audio_codec = ["-c:a", "libmp3lame"] if suffix == ".mp3" else ["-c:a", "aac"]
    _ffmpeg(
        "-i",
        str(wav),
        "-i",
        str(cover),
        "-map",
        "0:a",
        "-map",
        "1:v",
        *audio_codec,
        "-c:v",
        "png" if suffix == ".m4a" else "mjpeg",
        "-disposition:v",
        "attached_pic",
        str(out),
    )
    return out


@pytest.mark.parametrize("suffix", [".mp3", ".m4a"])
def test_cover_art_is_not_video(tmp_path: Path, suffix: str) -> None:
    media = _with_cover(tmp_path, suffix)
    info = probe(media)
    pictures = [s for s in info.streams if s.kind == "video"]
    assert len(pictures) == 1 and pictures[0].attached_pic  # the stream is there, marked
    assert info.has_audio and not info.has_video


def test_a_real_video_stream_is_still_video(tmp_path: Path) -> None:
    clip = tmp_path / "clip.mp4"
    _ffmpeg(
        "-f", "lavfi", "-i", "testsrc=size=64x64:rate=10:duration=2",
        "-f", "lavfi", "-i", "sine=frequency=440:duration=2",
        "-c:v", "mpeg4", "-c:a", "aac", "-shortest", str(clip),
    )  # fmt: skip
    info = probe(clip)
    assert info.has_video and not any(s.attached_pic for s in info.streams)


def test_dubbing_an_mp3_with_a_cover_gives_audio_not_an_mp4(tmp_path: Path) -> None:
    media = _with_cover(tmp_path / "in")
    srt = tmp_path / "in" / "talk.en.srt"
    srt.write_text(
        "".join(
            f"{i + 1}\n{srt_timestamp(0.5 + 3 * i)} --> {srt_timestamp(2.5 + 3 * i)}\n{text}\n\n"
            for i, text in enumerate(TEXTS)
        ),
        encoding="utf-8",
    )
    out = tmp_path / "out"
    result = dub_file(
        media,
        DubOptions("es", source="en", subtitles=srt),
        synthesizer=Synthesizer(),
        engine=DictEngine(),
        out_dir=out,
    )
    assert result.outputs.video is None
    assert result.outputs.audio.is_file() and result.outputs.audio.suffix == ".m4a"
    assert not list(out.glob("*.mp4")) and not list(out.glob("*.mp3"))
    kinds = subprocess.run(
        [
            "ffprobe",
            "-v",
            "error",
            "-show_entries",
            "stream=codec_type",
            "-of",
            "csv=p=0",
            str(result.outputs.audio),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split()
    assert kinds == ["audio"]
