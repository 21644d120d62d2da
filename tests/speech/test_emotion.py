"""Emotions and speed: the ranges (400 outside), how a preset and the object combine, and what they do to the
measured F0, duration and energy of real renders (issue 14)."""

from __future__ import annotations

import functools
import math

import pytest
from speech_support import (
    active_rms_db,
    f0_median,
    high_band_ratio_db,
    semitones,
    speech_seconds,
    synthesizer,
    voiced_fraction,
)

from dragoman.errors import InvalidRequest
from dragoman.media.audio import Audio
from dragoman.speech.tts.types import EMOTION_PRESETS, Emotion, SynthesisOptions

TEXT = "The quick brown fox jumps over the lazy dog near the river bank. Then it ran home."


# ----- ranges and combination ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("speed_ratio", 0.49),
        ("speed_ratio", 2.01),
        ("pitch_delta_st", -12.5),
        ("pitch_delta_st", 12.01),
        ("energy_ratio", 0.2),
        ("energy_ratio", 4.5),
        ("pause_scale", -0.1),
        ("pause_scale", 3.5),
        ("speed_ratio", math.nan),
        ("energy_ratio", math.inf),
        ("pause_scale", True),
        ("pitch_delta_st", "3"),
    ],
)
def test_an_emotion_out_of_range_is_a_400(field: str, bad: object) -> None:
    with pytest.raises(InvalidRequest) as caught:
        Emotion(**{field: bad})  # type: ignore[arg-type]
    assert caught.value.status == 400 and field in caught.value.message


def test_the_range_ends_are_accepted() -> None:
    Emotion(0.5, -12, 0.25, 0)
    Emotion(2.0, 12, 4.0, 3.0)


def test_an_emotion_object_from_json() -> None:
    assert Emotion.from_mapping({"pitch_delta_st": 2}) == Emotion(pitch_delta_st=2.0)
    with pytest.raises(InvalidRequest, match="unknown fields"):
        Emotion.from_mapping({"pitch": 2})
    with pytest.raises(InvalidRequest):
        Emotion.from_mapping([1, 2])
    options = SynthesisOptions("aria", "en", emotion={"energy_ratio": 2})  # type: ignore[arg-type]
    assert options.emotion == Emotion(energy_ratio=2.0)


@pytest.mark.parametrize("speed", [0.49, 1.81, 0.0, -1.0, math.nan])
def test_speed_out_of_range_is_a_400(speed: float) -> None:
    with pytest.raises(InvalidRequest) as caught:
        SynthesisOptions("aria", "en", speed=speed)
    assert caught.value.status == 400


def test_an_unknown_preset_is_a_400() -> None:
    with pytest.raises(InvalidRequest, match="unknown emotion"):
        SynthesisOptions("aria", "en", emotion_preset="angry")


def test_the_object_refines_the_preset() -> None:
    sad = EMOTION_PRESETS["sad"].emotion
    refined = SynthesisOptions(
        "aria", "en", emotion_preset="sad", emotion=Emotion(1.5, 2.0, 2.0, 0.5)
    ).effective
    assert refined.style == EMOTION_PRESETS["sad"].style
    assert refined.emotion.speed_ratio == pytest.approx(sad.speed_ratio * 1.5)
    assert refined.emotion.pitch_delta_st == pytest.approx(sad.pitch_delta_st + 2.0)
    assert refined.emotion.energy_ratio == pytest.approx(sad.energy_ratio * 2.0)
    assert refined.emotion.pause_scale == pytest.approx(sad.pause_scale * 0.5)
    # held inside the ranges
    loud = SynthesisOptions(
        "aria", "en", emotion_preset="shout", emotion=Emotion(2.0, 12, 4.0, 3.0)
    ).effective
    assert loud.emotion == Emotion(2.0, 12.0, 4.0, EMOTION_PRESETS["shout"].emotion.pause_scale * 3.0)


# ----- measured on real renders -------------------------------------------------------------------------
@functools.cache
def render(
    voice: str, preset: str | None = None, speed: float = 1.0, emotion: Emotion | None = None
) -> Audio:
    options = SynthesisOptions(voice, "en", speed=speed, emotion_preset=preset, emotion=emotion)
    return synthesizer().synthesize(TEXT, options).audio


VOICES = ["aria", "marcus"]  # Pico and the male English engine


@pytest.mark.parametrize("voice", VOICES)
@pytest.mark.parametrize(
    ("preset", "pitch", "pace", "energy"),
    [
        # direction of F0, of speaking time (+ = longer) and of energy, against neutral
        ("shout", +1, 0, +1),
        ("excited", +1, -1, +1),
        ("urgent", +1, -1, +1),
        ("sad", -1, +1, -1),
        ("calm", -1, +1, -1),
        ("warm", -1, +1, 0),
    ],
)
def test_presets_move_f0_duration_and_energy_in_their_direction(
    voice: str, preset: str, pitch: int, pace: int, energy: int
) -> None:
    neutral, moved = render(voice), render(voice, preset)
    st = semitones(f0_median(neutral), f0_median(moved))
    assert st * pitch >= 0.5, (preset, st)
    ratio = speech_seconds(moved) / speech_seconds(neutral)
    if pace:
        assert (ratio - 1) * pace >= 0.04, (preset, ratio)
    db = active_rms_db(moved) - active_rms_db(neutral)
    if energy:
        assert db * energy >= 1.0, (preset, db)


@pytest.mark.parametrize("voice", VOICES)
def test_whisper_has_no_pitch_and_less_energy(voice: str) -> None:
    neutral, whisper = render(voice), render(voice, "whisper")
    assert voiced_fraction(neutral) > 0.4 and voiced_fraction(whisper) < 0.15
    assert active_rms_db(whisper) < active_rms_db(neutral) - 6
    assert speech_seconds(whisper) > speech_seconds(neutral) * 1.03


@pytest.mark.parametrize("voice", VOICES)
def test_shout_is_brighter_and_warm_darker(voice: str) -> None:
    neutral = high_band_ratio_db(render(voice))
    assert high_band_ratio_db(render(voice, "shout")) > neutral + 2
    assert high_band_ratio_db(render(voice, "warm")) < neutral - 1


@pytest.mark.parametrize("voice", VOICES)
def test_the_emotion_object_moves_each_measure(voice: str) -> None:
    neutral = render(voice)
    up = render(voice, emotion=Emotion(pitch_delta_st=4.0))
    assert 2.5 <= semitones(f0_median(neutral), f0_median(up)) <= 5.5
    fast = render(voice, emotion=Emotion(speed_ratio=1.5))
    assert 1.25 <= speech_seconds(neutral) / speech_seconds(fast) <= 1.8
    loud = render(voice, emotion=Emotion(energy_ratio=2.0))
    assert active_rms_db(loud) - active_rms_db(neutral) >= 3.0
    quiet = render(voice, emotion=Emotion(energy_ratio=0.5))
    assert active_rms_db(quiet) - active_rms_db(neutral) == pytest.approx(-6.0, abs=0.5)
    long_pauses = render(voice, emotion=Emotion(pause_scale=3.0))
    no_pauses = render(voice, emotion=Emotion(pause_scale=0.0))
    # TEXT has two sentences: one pause of 0.3 s (standard), scaled
    assert long_pauses.duration - neutral.duration == pytest.approx(0.6, abs=0.05)
    assert neutral.duration - no_pauses.duration == pytest.approx(0.3, abs=0.05)


@pytest.mark.parametrize("voice", VOICES)
def test_speed_moves_duration_not_pitch(voice: str) -> None:
    neutral, slow, fast = render(voice), render(voice, speed=0.5), render(voice, speed=1.8)
    assert speech_seconds(slow) / speech_seconds(neutral) >= 1.6
    assert speech_seconds(neutral) / speech_seconds(fast) >= 1.4
    for other in (slow, fast):
        assert abs(semitones(f0_median(neutral), f0_median(other))) <= 1.0
