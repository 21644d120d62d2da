"""Test media for dubbing (issue 16): a dialogue of two speakers of different gender at known times, over a
music-like background, with ffmpeg's test card; and the same lines as a source-language SRT.

The female speaker is SVOX Pico (en-US, in process), the male one flite's ``rms`` voice (US English male;
the flite program). The background is a soft chord of three sine tones with a slow tremolo (music-like:
steady, tonal, present in the gaps), at ``background_db`` dBFS RMS. Speech is placed as
:func:`dragoman.testing.media.make_speech_audio` places it: ``lead`` seconds of background first and last,
``gap`` seconds between lines, each :class:`~dragoman.testing.media.SpeechClip` where its voice starts and
stops."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dragoman.media.audio import Audio, resample, write_wav
from dragoman.media.cues import Cue
from dragoman.media.ffmpeg import run_ffmpeg
from dragoman.media.subtitle_files import write_srt
from dragoman.testing.media import RATE, SpeechClip, _trimmed, synthesize

#: The background chord (Hz): A3, C#4, E4.
BACKGROUND_TONES = (220.0, 277.18, 329.63)
#: Speaker names and the voices speaking them.
SPEAKERS = ("female", "male")


def speak(speaker: str, text: str) -> Audio:
    """``text`` in English by the ``female`` (Pico) or ``male`` (flite rms) speaker, 16 kHz, trimmed."""
    if speaker == "female":
        return synthesize("en", text)
    if speaker != "male":
        raise ValueError(f"speaker {speaker!r}: use one of {', '.join(SPEAKERS)}")
    from dragoman.speech.tts.engines.base import clean_text
    from dragoman.speech.tts.engines.flite import FliteEngine

    audio = FliteEngine().synthesize(clean_text(text), "rms").audio
    return _trimmed(resample(audio, RATE))


def background(seconds: float, level_db: float, rate: int = RATE) -> Audio:
    """The music-like background (module docstring), ``level_db`` dBFS RMS."""
    t = np.arange(round(seconds * rate), dtype=np.float64) / rate
    chord = sum(np.sin(2 * np.pi * f * t) for f in BACKGROUND_TONES)
    signal = np.asarray(chord, dtype=np.float64) * (1.0 + 0.3 * np.sin(2 * np.pi * 0.5 * t))
    rms = float(np.sqrt(np.mean(signal**2))) if len(signal) else 1.0
    return Audio((signal * (10 ** (level_db / 20) / max(rms, 1e-12))).astype(np.float32), rate)


def make_dialogue_audio(
    lines: Sequence[tuple[str, str]],
    *,
    gap: float = 1.0,
    lead: float = 0.7,
    background_db: float | None = -30.0,
) -> tuple[Audio, list[SpeechClip]]:
    """``lines`` ((speaker, English text)) spoken in turn over the background; where each was placed (the
    clip's ``language`` is the speaker)."""
    pieces: list[np.ndarray] = [np.zeros(round(lead * RATE), dtype=np.float32)]
    clips: list[SpeechClip] = []
    at = len(pieces[0])
    for index, (speaker, text) in enumerate(lines):
        if index:
            pieces.append(np.zeros(round(gap * RATE), dtype=np.float32))
            at += len(pieces[-1])
        speech = speak(speaker, text).samples
        clips.append(SpeechClip(text, speaker, at / RATE, (at + len(speech)) / RATE))
        pieces.append(speech)
        at += len(speech)
    pieces.append(np.zeros(round(lead * RATE), dtype=np.float32))
    track = np.concatenate(pieces).astype(np.float32)
    if background_db is not None:
        track = track + background(len(track) / RATE, background_db).samples
    return Audio(track.astype(np.float32), RATE), clips


def clips_srt(clips: Sequence[SpeechClip]) -> str:
    """The clips as an SRT (one cue per clip, its text as said)."""
    return write_srt([Cue(c.start, c.end, (c.text,)) for c in clips])


def make_dialogue_media(
    path: str | Path,
    lines: Sequence[tuple[str, str]],
    *,
    gap: float = 1.0,
    lead: float = 0.7,
    background_db: float | None = -30.0,
    video: bool = True,
    fps: int = 25,
) -> list[SpeechClip]:
    """Write the dialogue (:func:`make_dialogue_audio`) to ``path`` (MP4, MKV or MOV: H.264 test card at
    ``fps`` and AAC; without ``video``, the container's audio only) and answer where each line was placed."""
    path = Path(path)
    audio, clips = make_dialogue_audio(lines, gap=gap, lead=lead, background_db=background_db)
    with tempfile.TemporaryDirectory() as folder:
        wav = Path(folder) / "dialogue.wav"
        write_wav(audio, wav)
        args = ["-y", "-i", str(wav)]
        if video:
            card = f"testsrc=size=160x120:rate={fps}:duration={audio.duration:.3f}"
            args += ["-f", "lavfi", "-i", card, "-map", "1:v", "-map", "0:a"]
            args += ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-preset", "ultrafast"]
        args += ["-c:a", "aac", "-shortest", str(path)]
        run_ffmpeg(args, timeout=120)
    return clips
