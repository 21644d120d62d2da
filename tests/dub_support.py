"""What the dubbing tests share (issue 16): a stand-in translation engine with fixed Spanish for the test
dialogue, the dialogue itself (two speakers of different gender over a music-like background, made by
dragoman.testing.dub), and ffprobe/ffmpeg readings of the output."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dragoman.media.audio import Audio
from dragoman.media.decode import decode_audio
from dragoman.progress import JobContext
from dragoman.translation.types import TranslateOptions, TranslationResult

#: The test dialogue: (speaker, English) and the Spanish each line is translated to.
DIALOGUE: list[tuple[str, str]] = [
    ("female", "The weather is fine today."),
    ("male", "We will walk along the river after lunch."),
    ("female", "Bring your coat, it may rain later."),
    ("male", "I will take an umbrella for both of us."),
]
SPANISH: dict[str, str] = {
    "The weather is fine today.": "Hoy hace buen tiempo.",
    "We will walk along the river after lunch.": "Caminaremos junto al río después de comer.",
    "Bring your coat, it may rain later.": "Trae tu abrigo, puede llover más tarde.",
    "I will take an umbrella for both of us.": "Llevaré un paraguas para los dos.",
}


def _key(text: str) -> str:
    return " ".join("".join(c for c in text.casefold() if c.isalnum() or c.isspace()).split())


class DictEngine:
    """A stand-in engine: known sentences get their fixed translation, anything else ``fallback(text)``;
    records every call."""

    provenance = "on-device"

    def __init__(self, table: dict[str, str] | None = None, fallback: Callable[[str], str] = str.upper):
        self.table = SPANISH if table is None else table
        self.fallback = fallback
        self.calls: list[list[str]] = []
        self._known = {_key(k): v for k, v in self.table.items()}

    def lookup(self, text: str) -> str:
        """The fixed translation of ``text`` (case and punctuation aside: a recogniser's transcript); a text
        made of several known sentences (a transcript without punctuation) gives their translations in
        order; anything else ``fallback(text)``."""
        key = _key(text)
        if key in self._known:
            return self._known[key]
        found: list[str] = []
        while key:
            known = next((k for k in self._known if key == k or key.startswith(k + " ")), None)
            if known is None:
                return self.fallback(text)
            found.append(self._known[known])
            key = key[len(known) :].strip()
        return " ".join(found)

    def translate_many(
        self, texts: Sequence[str], options: TranslateOptions, *, context: JobContext | None = None
    ) -> list[TranslationResult]:
        self.calls.append(list(texts))
        if context is not None:
            context.report(len(texts), len(texts), "fake")
        return [
            TranslationResult(
                self.lookup(t),
                "eng_Latn",
                "spa_Latn",
                "on-device",
                0.0,
                options=options,
            )
            for t in texts
        ]


def streams(path: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        [
            "ffprobe",
            "-v",
            "error",
            "-show_entries",
            "stream=index,codec_type,codec_name:stream_tags=language",
            "-of",
            "json",
            str(path),
        ],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    found: list[dict[str, Any]] = json.loads(out)["streams"]
    return found


def format_duration(path: Path) -> float:
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", str(path)],
        capture_output=True,
        check=True,
        timeout=60,
        text=True,
    ).stdout
    return float(out.strip())


def video_md5(path: Path) -> str:
    """The MD5 of the video stream's packets (copied, not decoded)."""
    return subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "error", "-i", str(path), "-map", "0:v", "-c", "copy", "-f", "md5", "-"],
        capture_output=True,
        check=True,
        timeout=60,
        text=True,
    ).stdout.strip()


def ebur128(path: Path) -> tuple[float, float]:
    """The integrated loudness (LUFS) and true peak (dBTP) of ``path``'s first audio stream as ffmpeg's
    ``ebur128`` filter measures them (EBU R128 / ITU-R BS.1770-4; a meter nobody here wrote)."""
    log = subprocess.run(
        [
            "ffmpeg",
            "-nostdin",
            "-nostats",
            "-i",
            str(path),
            "-map",
            "0:a:0",
            "-af",
            "ebur128=peak=true",
            "-f",
            "null",
            "-",
        ],
        capture_output=True,
        check=True,
        timeout=120,
        text=True,
    ).stderr
    summary = log[log.rindex("Summary:") :]
    integrated = re.search(r"I:\s+(-?[\d.]+|-inf) LUFS", summary)
    peak = re.search(r"True peak:\s+Peak:\s+(-?[\d.]+|-inf) dBFS", summary)
    assert integrated and peak, summary
    return float(integrated[1]), float(peak[1])


def first_audio(path: Path, rate: int = 16000) -> Audio:
    """The first audio stream of ``path`` (the dub's default track)."""
    return decode_audio(path, rate=rate)


def levels_db(audio: Audio, frame: float = 0.02) -> np.ndarray:
    """RMS level (dBFS) of each ``frame``-second frame."""
    size = round(frame * audio.rate)
    n = len(audio.samples) // size
    frames = audio.samples[: n * size].astype(np.float64).reshape(n, size)
    levels: np.ndarray = 20 * np.log10(np.sqrt((frames**2).mean(axis=1)) + 1e-12)
    return levels


def speech_onset(audio: Audio, after: float, before: float, threshold_db: float) -> float | None:
    """The first moment in ``after..before`` where a 20 ms frame is louder than ``threshold_db``."""
    levels = levels_db(audio)
    lo, hi = max(0, int(after / 0.02)), min(len(levels), int(before / 0.02))
    loud = np.flatnonzero(levels[lo:hi] > threshold_db)
    return None if len(loud) == 0 else (lo + int(loud[0])) * 0.02


def tone_power_db(audio: Audio, start: float, end: float, frequency: float) -> float:
    """Power (dB) of ``audio`` in ``start..end`` at ``frequency`` (Hann-windowed FFT bin)."""
    x = audio.samples[round(start * audio.rate) : round(end * audio.rate)].astype(np.float64)
    spectrum = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    k = round(frequency * len(x) / audio.rate)
    return float(20 * np.log10(spectrum[max(0, k - 1) : k + 2].max() + 1e-12))


class ScriptedRecognizer:
    """A stand-in recogniser that hears ``clips`` (their words spread evenly over each clip) in
    ``language``; counts its calls."""

    def __init__(self, clips: Sequence[object], language: str = "en") -> None:
        self.clips = list(clips)
        self.language = language
        self.calls = 0

    def transcribe(self, audio: Audio, options: object, context: JobContext | None = None) -> object:
        from dragoman.speech.asr import Segment, Transcript, Word

        self.calls += 1
        segments = []
        for clip in self.clips:
            start, end, text = clip.start, clip.end, clip.text  # type: ignore[attr-defined]
            parts = text.split()
            step = (end - start) / len(parts)
            words = tuple(Word(w, start + k * step, start + (k + 1) * step, 1.0) for k, w in enumerate(parts))
            segments.append(Segment(start, end, text, words, -0.1, 0.01))
        return Transcript(
            self.language, 0.98, False, audio.duration, tuple(segments), "scripted", "on-device", 0.0
        )
