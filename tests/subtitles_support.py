"""What the subtitle front doors' tests share (issue 15, H3: tests/pipelines/test_subtitles*.py,
tests/test_cli_subtitles.py, tests/server/test_mcp_subtitles.py): the tiny Whisper installed as a model of
kind ``asr`` in a test's store, a recogniser that makes it speak (TINY_DECODE), and small media made with
ffmpeg."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dragoman.models.asr import install
from dragoman.settings import Settings
from dragoman.speech.asr import Recognizer
from dragoman.testing.whisper import TINY_DECODE, build_tiny_whisper

TINY_ID = "tiny-whisper"

needs_ffmpeg = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="apt-get install ffmpeg")


def build_tiny(directory: Path) -> Path:
    return build_tiny_whisper(directory / TINY_ID)


def install_tiny(model: Path, settings: Settings) -> str:
    """The tiny Whisper built at ``model`` installed in ``settings``' store; answers its id."""
    install(model, settings, model_id=TINY_ID)
    return TINY_ID


def tiny_recognizer(settings: Settings) -> Recognizer:
    """A recogniser under which the tiny Whisper emits words; VAD off, so a tone is heard as speech."""
    return Recognizer(settings, decode_overrides={**TINY_DECODE, "vad_filter": False})


def make_media(path: Path, *, seconds: float = 6.0, video: bool = True, audio: bool = True) -> Path:
    """A small media file made with ffmpeg (``.mp4``/``.mkv``/``.mov`` with AAC, ``.wav``): a warbling tone
    with noise (random weights hear words in anything), over a test pattern when ``video``."""
    args = ["ffmpeg", "-nostdin", "-loglevel", "error", "-y"]
    if video:
        args += ["-f", "lavfi", "-i", f"testsrc=size=160x120:rate=10:duration={seconds}"]
    if audio:
        args += [
            "-f",
            "lavfi",
            "-i",
            f"aevalsrc='0.3*sin(2*PI*(220+80*sin(2*PI*3*t))*t)+0.02*(random(0)-0.5)':s=16000:d={seconds}",
        ]
    if video:
        args += ["-c:v", "mpeg4"]
    if audio:
        args += ["-c:a", "pcm_s16le" if path.suffix == ".wav" else "aac"]
    args += ["-shortest", str(path)]
    subprocess.run(args, check=True, capture_output=True, timeout=60)
    return path
