"""What the dubbing front doors' tests share (issue 16, D2: tests/test_cli_dub.py,
tests/server/test_mcp_dub.py): a short video of English speech (SVOX Pico, H.264 test video, AAC) with its
source subtitles written from where each sentence was placed, so no recogniser is needed; ffprobe's stream
kinds; and a fake pipeline result for tests of the front doors alone."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from dragoman.media.cues import Cue
from dragoman.media.subtitle_files import write_srt
from dragoman.pipelines.dub import DubLine, DubOutputs, DubResult
from dragoman.testing.media import make_speech_media

needs_ffmpeg = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="apt-get install ffmpeg")

SENTENCES = [("en", "Hello there, my friend."), ("en", "The house is red.")]


def make_dub_media(folder: Path) -> tuple[Path, Path]:
    """``talk.mp4`` (two English sentences, about 5 s) and ``source.srt`` (their placed timings) in
    ``folder``."""
    video = folder / "talk.mp4"
    clips = make_speech_media(video, SENTENCES, gap=1.0)
    srt = folder / "source.srt"
    srt.write_text(write_srt([Cue(c.start, c.end, (c.text,)) for c in clips]), encoding="utf-8")
    return video, srt


def stream_kinds(path: Path) -> list[str]:
    """The codec types of a media file's streams, in order (ffprobe)."""
    done = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "stream=codec_type", "-of", "json", str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return [str(s["codec_type"]) for s in json.loads(done.stdout)["streams"]]


def fake_result(media: Path, target: str, voices: tuple[str, ...] = ("aria", "marcus")) -> DubResult:
    """A result as the pipeline would answer it (no file written): a line per voice, the second one
    compressed beyond the natural range."""
    folder, stem = media.parent, media.stem
    lines = tuple(
        DubLine(
            index=i,
            start=1.0 + 2 * i,
            end=2.5 + 2 * i,
            source_text="Hello.",
            text="Hola.",
            voice=voice,
            gender=None,
            f0=None,
            speed=1.0,
            stretch=1.0 + i * 0.6,
            placed_start=1.0 + 2 * i,
            placed_end=2.5 + 2 * i,
            beyond_natural=i == 1,
        )
        for i, voice in enumerate(voices)
    )
    outputs = DubOutputs(
        folder / f"{stem}.{target}.mp4",
        folder / f"{stem}.{target}.dub.m4a",
        {f"srt:{target}": folder / f"{stem}.{target}.srt"},
    )
    return DubResult(
        "en", 1.0, target, 5.0, lines, outputs, {"probe": 0.01, "mix": 0.5}, ("line 1 compressed",)
    )
