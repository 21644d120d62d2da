"""What the speech recognition tests share (issue 15): audio made in the test (noise that the tiny random
Whisper hears words in; a sentence spoken by espeak-ng, run as a program)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np

from dragoman.media.audio import Audio, read_wav
from dragoman.pipelines.subtitles import SubtitleResult, make_subtitles
from dragoman.speech.asr import Recognizer, TranscribeOptions

#: Three short English sentences Pico speaks, for media with long pauses or music between them.
THREE_SENTENCES = (
    "The old man bought a red car yesterday.",
    "My sister opened the blue door this morning.",
    "We will walk along the river after lunch.",
)


def noise(seconds: float, rate: int = 16000, seed: int = 1) -> Audio:
    """Quiet noise: random weights hear words in anything."""
    rng = np.random.default_rng(seed)
    return Audio((rng.standard_normal(int(seconds * rate)) * 0.1).astype(np.float32), rate)


def espeak(text: str, voice: str = "en-us") -> Audio:
    """``text`` spoken by espeak-ng at its 22.05 kHz."""
    wav = subprocess.run(
        ["espeak-ng", "-v", voice, "-s", "150", "--stdout", text],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    return read_wav(wav)


def subtitles_by_language(
    media: Path, recognizer: Recognizer, folder: Path, languages: tuple[str, ...] = ("en", "auto")
) -> dict[str, SubtitleResult]:
    """``media`` through the subtitles pipeline (SRT, no translation) once per source language given
    (``auto``: detected), each into its own folder under ``folder``."""
    return {
        language: make_subtitles(
            media,
            recognizer,
            None,
            formats=["srt"],
            options=TranscribeOptions(language=language),
            out_dir=folder / language,
        )
        for language in languages
    }
