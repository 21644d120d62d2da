"""What the speech recognition tests share (issue 15): audio made in the test (noise that the tiny random
Whisper hears words in; a sentence spoken by espeak-ng, run as a program)."""

from __future__ import annotations

import subprocess

import numpy as np

from dragoman.media.audio import Audio, read_wav


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
