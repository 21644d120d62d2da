"""Test media with synthesised speech (dragoman/testing/media.py): the speech is where the clips say."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dragoman.media.audio import Audio
from dragoman.media.decode import decode_audio
from dragoman.media.probe import probe
from dragoman.speech.tts.engines.pico import PicoEngine
from dragoman.testing.media import SpeechClip, make_speech_audio, make_speech_media

SENTENCES = [
    ("en", "The quick brown fox jumps over the lazy dog."),
    ("es", "Buenos días, ¿cómo estás?"),
    ("ru", "Доброе утро."),  # espeak-ng
]


def _rms_db(audio: Audio, start: float, end: float) -> float:
    piece = audio.samples[int(start * audio.rate) : int(end * audio.rate)].astype(np.float64)
    return float(10 * np.log10(np.mean(piece**2) + 1e-20))


def _check_placement(audio: Audio, clips: list[SpeechClip], lead: float, gap: float) -> None:
    assert abs(clips[0].start - lead) < 1e-6
    for before, after in zip(clips, clips[1:], strict=False):
        assert abs(after.start - before.end - gap) < 1e-3
    assert abs(audio.duration - (clips[-1].end + lead)) < 0.1  # lossy codecs pad the last frame
    for clip in clips:
        assert clip.end - clip.start > 0.5
        assert _rms_db(audio, clip.start, clip.end) > -30  # speech
        # the edges are the voice's: loud just inside, quiet just outside
        assert _rms_db(audio, clip.start - 0.25, clip.start - 0.02) < -35
        assert _rms_db(audio, clip.end + 0.02, clip.end + 0.25) < -35


def test_speech_audio_is_placed_where_the_clips_say() -> None:
    audio, clips = make_speech_audio(SENTENCES, gap=1.0, lead=0.7, noise_db=-40)
    assert [(c.language, c.text) for c in clips] == SENTENCES
    _check_placement(audio, clips, 0.7, 1.0)
    assert abs(_rms_db(audio, 0.0, 0.6) - -40) < 1.5  # the noise floor asked for
    again, clips_again = make_speech_audio(SENTENCES)
    # the same track every time, sample for sample, though Pico rendered in this process meanwhile (its C
    # library keeps state between renders: the sentences are rendered in a fresh process)
    PicoEngine().synthesize("Something else entirely, said first.", "de-DE")
    assert clips_again == clips
    assert np.array_equal(again.samples, audio.samples)


@pytest.mark.parametrize(
    ("name", "has_video"), [("talk.mp4", True), ("talk.webm", True), ("talk.wav", False)]
)
def test_speech_media_round_trips(tmp_path: Path, name: str, has_video: bool) -> None:
    path = tmp_path / name
    clips = make_speech_media(path, SENTENCES[:2], gap=0.8, lead=0.5)
    info = probe(path)
    assert info.has_audio and info.has_video == has_video
    decoded = decode_audio(path)
    assert abs(info.duration - (clips[-1].end + 0.5)) < 0.15
    _check_placement(decoded, clips, 0.5, 0.8)


def test_unknown_language_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no voice"):
        make_speech_media(tmp_path / "x.mp4", [("xx", "nothing")])
