"""Word timings of a render and per-word edits (issue 14)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from speech_support import synthesizer

from dragoman.errors import InvalidRequest
from dragoman.speech.tts.types import SynthesisOptions, SynthesisResult
from dragoman.speech.tts.words import WordEdit, align_render, apply_edits, parse_edits

TEXT = "Good morning everyone. The weather today is bright and sunny. We will meet at noon by the river."


@functools.cache
def render(voice: str = "aria", studio: bool = False) -> SynthesisResult:
    return synthesizer().synthesize(TEXT, SynthesisOptions(voice, "en", studio=studio))


@pytest.mark.parametrize(("voice", "studio"), [("aria", False), ("marcus", False), ("nova", True)])
def test_timings_are_monotonic_and_within_the_audio(voice: str, studio: bool) -> None:
    result = render(voice, studio)
    words = align_render(result.audio, TEXT, "en")
    assert [w.word for w in words] == TEXT.split()
    previous_end = 0.0
    for w in words:
        assert previous_end <= w.start <= w.end <= result.audio.duration, words
        previous_end = w.end
    assert sum(w.end - w.start for w in words) > 0.5 * result.audio.duration * 0.6
    # the sentence pauses fall between sentences: the last word of a sentence ends before the next starts
    assert words[3].start - words[2].end > 0.1 and words[10].start - words[9].end > 0.1


def test_words_start_where_there_is_sound() -> None:
    result = render()
    x = result.audio.samples.astype(np.float64)
    rate = result.audio.rate
    peak = float(np.max(np.abs(x)))
    for w in align_render(result.audio, TEXT, "en"):
        span = x[round(w.start * rate) : round(w.end * rate)]
        assert len(span) and float(np.max(np.abs(span))) > peak * 0.05, w


def test_an_edit_changes_only_its_span() -> None:
    result = render()
    audio = result.audio
    words = align_render(audio, TEXT, "en")
    index = 5  # "today"
    edited, after = apply_edits(
        audio, words, [WordEdit(index, pitch_st=3.0, speed=0.8, gain_db=3.0, pause_ms=200)]
    )
    rate = audio.rate
    a = round(words[index].start * rate)
    b = round(words[index].end * rate)
    tail = len(audio.samples) - b
    assert edited.samples[:a].tobytes() == audio.samples[:a].tobytes()
    assert edited.samples[-tail:].tobytes() == audio.samples[-tail:].tobytes()
    assert edited.samples[a : len(edited.samples) - tail].tobytes() != audio.samples[a:b].tobytes()
    # the word got longer (slower) and a 200 ms pause follows it; later words moved by the same amount
    growth = edited.duration - audio.duration
    assert growth == pytest.approx((b - a) / rate * 0.25 + 0.2, abs=0.02)
    assert after[index + 1].start == pytest.approx(words[index + 1].start + growth, abs=1e-3)
    assert after[:index] == words[:index]
    assert after[index].end - after[index].start > words[index].end - words[index].start


def test_a_gain_edit_keeps_the_length_and_the_rest_byte_identical() -> None:
    audio = render().audio
    words = align_render(audio, TEXT, "en")
    edited, after = apply_edits(audio, words, [WordEdit(1, gain_db=-12.0), WordEdit(12, pause_ms=0)])
    assert len(edited.samples) == len(audio.samples) and after == words
    rate = audio.rate
    a, b = round(words[1].start * rate), round(words[1].end * rate)
    assert edited.samples[:a].tobytes() == audio.samples[:a].tobytes()
    assert edited.samples[b:].tobytes() == audio.samples[b:].tobytes()
    inner = slice(a + rate // 50, b - rate // 50)
    ratio = np.sqrt(np.mean(edited.samples[inner] ** 2) / np.mean(audio.samples[inner] ** 2))
    assert ratio == pytest.approx(10 ** (-12 / 20), rel=0.05)


def test_edit_bodies_are_checked() -> None:
    words = align_render(render().audio, TEXT, "en")
    assert parse_edits({"edits": [{"index": 0, "word": "Good", "speed": 1.5}]}, words) == [
        WordEdit(0, speed=1.5)
    ]
    bodies: list[object] = [
        {},
        {"edits": []},
        {"edits": [{"index": len(words)}]},
        {"edits": [{"index": 0, "word": "Bad"}]},
        {"edits": [{"index": 0, "speed": 3}]},
        {"edits": [{"index": 0, "pitch_st": float("nan")}]},
        {"edits": [{"index": 0, "colour": "red"}]},
        {"edits": [{"index": 0}, {"index": 0}]},
        {"edits": [{"index": True}]},
    ]
    for body in bodies:
        with pytest.raises(InvalidRequest):
            parse_edits(body, words)


def test_every_render_has_word_timings() -> None:
    """No engine here gives word events: the synthesizer answers the alignment against the text."""
    for voice, studio in (("aria", False), ("nova", True)):
        result = render(voice, studio)
        assert result.words is not None
        assert result.words == align_render(result.audio, TEXT, "en")
        assert result.to_dict()["words"][0]["word"] == "Good"  # type: ignore[index]


def test_several_edits_change_only_their_spans_and_move_the_words_between() -> None:
    audio = render().audio
    words = align_render(audio, TEXT, "en")
    rate = audio.rate
    edits = [WordEdit(9, speed=0.7), WordEdit(2, pause_ms=250), WordEdit(5, pitch_st=-2.0)]
    edited, after = apply_edits(audio, words, edits)
    x, y = audio.samples, edited.samples
    # each stretch of untouched input (before, between and after the edited words) is in the output byte for
    # byte, moved by what the timings of its first word say (within the timings' 0.1 ms rounding)
    stretches = [(0, 2, None), (2, 5, 3), (5, 9, 6), (9, len(words), 10)]
    for before, after_word, first in stretches:
        lo = 0 if first is None else round(words[before].end * rate)
        hi = round(words[after_word].start * rate) if after_word < len(words) else len(x)
        guess = 0 if first is None else round((after[first].start - words[first].start) * rate)
        matches = [
            m for m in range(guess - 3, guess + 4) if y[lo + m : hi + m].tobytes() == x[lo:hi].tobytes()
        ]
        assert matches, (before, after_word, guess)
    for i in range(1, len(after)):
        assert after[i - 1].end <= after[i].start + 1e-6
    assert after[3].start - words[3].start == pytest.approx(0.25, abs=2 / rate)
    assert after[10].start - words[10].start > 0.25 + (words[9].end - words[9].start) * 0.3
