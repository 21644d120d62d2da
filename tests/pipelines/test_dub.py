"""The parts of the dubbing pipeline on their own (issue 16): options, lines, speaker matching, fitting,
the mix's ducking and streaming loudness."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from dragoman.errors import DocumentFormatError, InvalidRequest
from dragoman.media.audio import Audio, loudness_lufs
from dragoman.media.cues import Cue
from dragoman.pipelines.dub import DubOptions, planned_files
from dragoman.pipelines.dub.fit import BORROW_MARGIN, fit_line, room_for
from dragoman.pipelines.dub.lines import parse_subtitles, read_subtitle_file, slots_from_tracks
from dragoman.pipelines.dub.mix import MIX_RATE, LineStore, LoudnessMeter, gain_to, mix_to_file
from dragoman.pipelines.dub.voices import match_speakers
from dragoman.pipelines.subtitles import SubtitleTrack


# ----- options ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "changes",
    [
        {"target": " "},
        {"voice_mode": "robot"},
        {"voice_mode": "clone"},
        {"clone_id": "abc"},
        {"duck_db": 3.0},
        {"duck_db": float("nan")},
        {"loudness_lufs": 0.0},
        {"natural_speed": (1.1, 1.2)},
        {"natural_speed": (0.9, 2.5)},
        {"max_stretch": 0.5},
    ],
)
def test_options_refuse_what_cannot_be_done(changes: dict[str, object]) -> None:
    with pytest.raises(InvalidRequest):
        DubOptions(**{"target": "es", **changes})  # type: ignore[arg-type]


def test_output_names(tmp_path: Path) -> None:
    plan = planned_files(tmp_path / "talk.mp4", "es", "en", has_video=True)
    assert plan.video == tmp_path / "talk.es.mp4" and plan.audio == tmp_path / "talk.es.dub.m4a"
    assert {p.name for p in plan.subtitles.values()} == {
        "talk.es.srt",
        "talk.es.vtt",
        "talk.es.txt",
        "talk.en.srt",
        "talk.en-es.srt",
    }
    assert planned_files(tmp_path / "talk.avi", "es", None, has_video=True).video == tmp_path / "talk.es.mkv"
    assert planned_files(tmp_path / "talk.m4a", "es", "en", has_video=False).video is None


# ----- lines -----------------------------------------------------------------------------------------------
def test_lines_are_sentences_over_their_cues() -> None:
    source = SubtitleTrack(
        "en",
        (Cue(1.0, 2.0, ("The weather is",)), Cue(2.1, 3.0, ("fine today.",)), Cue(4.0, 5.0, ("Yes.",))),
        "en",
        False,
    )
    translated = SubtitleTrack(
        "es",
        (Cue(1.0, 2.0, ("Hoy hace",)), Cue(2.1, 3.0, ("buen tiempo.",)), Cue(4.0, 5.0, ("Sí.",))),
        "en",
        True,
    )
    slots = slots_from_tracks(source, translated)
    assert [(s.start, s.end, s.source_text, s.text) for s in slots] == [
        (1.0, 3.0, "The weather is fine today.", "Hoy hace buen tiempo."),
        (4.0, 5.0, "Yes.", "Sí."),
    ]


def test_a_long_pause_inside_a_sentence_ends_a_line() -> None:
    # a transcript without punctuation: one sentence for the translation, two lines for the dub
    cues = (Cue(1.0, 2.0, ("the weather is",)), Cue(3.2, 4.0, ("fine today",)), Cue(4.3, 5.0, ("really",)))
    track = SubtitleTrack("en", cues, "en", False)
    slots = slots_from_tracks(track, SubtitleTrack("es", cues, "en", True))
    assert [(s.start, s.end, s.text) for s in slots] == [
        (1.0, 2.0, "the weather is"),
        (3.2, 5.0, "fine today really"),
    ]


def test_sound_descriptions_and_music_are_not_spoken() -> None:
    cues = (Cue(1.0, 2.0, ("♪ ♪",)), Cue(3.0, 4.0, ("[MUSIC] Hello.",)), Cue(5.0, 6.0, ("...",)))
    track = SubtitleTrack("en", cues, "en", False)
    slots = slots_from_tracks(track, SubtitleTrack("es", cues, "en", True))
    assert [(s.start, s.text) for s in slots] == [(3.0, "Hello.")]


def test_srt_and_vtt_are_read(tmp_path: Path) -> None:
    srt = (
        "1\n00:00:01,500 --> 00:00:03,000\n<i>Hello</i> there.\nSecond line.\n\n"
        "2\n00:00:04,000 --> 00:00:05,250\n{\\an8}Bye.\n"
    )
    cues = parse_subtitles(srt)
    assert cues == [Cue(1.5, 3.0, ("Hello there.", "Second line.")), Cue(4.0, 5.25, ("Bye.",))]
    vtt = (
        "WEBVTT\n\nNOTE a note\n\n00:01.000 --> 00:02.500 align:start\nHi.\n\n"
        "01:00:00.000 --> 01:00:01.000\nLate.\n"
    )
    assert parse_subtitles(vtt) == [Cue(1.0, 2.5, ("Hi.",)), Cue(3600.0, 3601.0, ("Late.",))]
    (tmp_path / "bad.srt").write_text("not subtitles at all", encoding="utf-8")
    with pytest.raises(DocumentFormatError):
        read_subtitle_file(tmp_path / "bad.srt")


# ----- voices ----------------------------------------------------------------------------------------------
def test_match_keeps_one_voice_per_speaker() -> None:
    # a woman (~210 Hz), a man (~110 Hz), a second woman much lower (~160 Hz, 4.6 semitones under),
    # an unvoiced line
    f0s = [210.0, 110.0, 205.0, 115.0, 0.0, 158.0, 212.0]
    voices = [c.voice for c in match_speakers(f0s, "aria")]
    assert voices[0] == voices[2] == voices[6] == "aria"
    assert voices[1] == voices[3] == voices[4] == "marcus"  # the unvoiced line keeps the last speaker
    assert voices[5] not in ("aria", "marcus")
    assert [c.gender for c in match_speakers([210.0, 110.0], "marcus")] == ["female", "male"]
    assert [c.voice for c in match_speakers([210.0, 110.0], "marcus")] == ["aria", "marcus"]
    assert match_speakers([0.0], "nova")[0].voice == "nova"


# ----- fit -------------------------------------------------------------------------------------------------
def _renderer(seconds_at_1: float, calls: list[float]) -> Callable[[float], Audio]:
    def render(speed: float) -> Audio:
        calls.append(speed)
        return Audio(np.full(round(16000 * seconds_at_1 / speed), 0.1, dtype=np.float32), 16000)

    return render


def test_fit_within_the_natural_range_then_borrow_then_stretch() -> None:
    options = DubOptions("es")
    calls: list[float] = []
    fitted = fit_line(_renderer(2.0, calls), 2.2, 2.2, options)  # fits as it is
    assert (fitted.speed, fitted.stretch, fitted.beyond_natural, calls) == (1.0, 1.0, False, [1.0])
    calls.clear()
    fitted = fit_line(_renderer(2.2, calls), 2.0, 2.0, options)  # 10% faster fits
    assert 1.1 <= fitted.speed <= 1.2 and fitted.stretch == 1.0 and not fitted.beyond_natural
    assert fitted.audio.duration <= 2.0
    calls.clear()
    fitted = fit_line(_renderer(3.0, calls), 2.0, 2.6, options)  # 1.2x, then 0.1 s of borrowed silence
    assert fitted.speed == pytest.approx(1.2) and fitted.stretch == 1.0 and not fitted.beyond_natural
    calls.clear()
    fitted = fit_line(_renderer(3.6, calls), 2.0, 2.0, options)  # 1.2x then stretched 1.5x (the most)
    assert fitted.speed == pytest.approx(1.2) and fitted.beyond_natural
    assert fitted.stretch == pytest.approx(1.5) and fitted.audio.duration == pytest.approx(2.0, abs=0.02)
    calls.clear()
    fitted = fit_line(_renderer(10.0, calls), 2.0, 2.0, options)  # far too long: capped, it overlaps
    assert fitted.stretch == 1.5 and fitted.audio.duration > 2.0 and len(calls) == 2


def test_a_short_line_is_slowed_within_the_natural_range() -> None:
    calls: list[float] = []
    fitted = fit_line(_renderer(1.0, calls), 3.0, 3.0, DubOptions("es"))
    assert fitted.speed == pytest.approx(0.9) and not fitted.beyond_natural


def test_room_borrows_the_silence_before_the_next_line() -> None:
    assert room_for(1.0, 2.0, 4.0, 10.0) == pytest.approx(3.0 - BORROW_MARGIN)
    assert room_for(1.0, 2.0, 2.0, 10.0) == pytest.approx(1.0)  # never less than the slot
    assert room_for(1.0, 2.0, None, 5.0) == pytest.approx(4.0)  # the last line: up to the media's end


# ----- mix -------------------------------------------------------------------------------------------------
def test_streaming_loudness_matches_the_whole_measure() -> None:
    rng = np.random.default_rng(3)
    t = np.arange(20 * MIX_RATE) / MIX_RATE
    x = (0.2 * np.sin(2 * np.pi * 440 * t) * (t % 3 < 2) + 0.01 * rng.standard_normal(len(t))).astype(
        np.float32
    )
    meter = LoudnessMeter(MIX_RATE)
    for a in range(0, len(x), 7 * MIX_RATE + 123):  # chunks that do not line up with blocks
        meter.feed(x[a : a + 7 * MIX_RATE + 123])
    assert meter.lufs() == pytest.approx(loudness_lufs(Audio(x, MIX_RATE)), abs=0.05)
    assert LoudnessMeter(MIX_RATE).lufs() == -math.inf


def test_the_original_is_ducked_under_lines_only(tmp_path: Path) -> None:
    seconds = 6.0
    background = Audio(np.full(round(seconds * MIX_RATE), 0.1, dtype=np.float32), MIX_RATE)
    store = LineStore(tmp_path / "lines.f32")
    line = store.add(2.0, Audio(np.full(MIX_RATE, 0.2, dtype=np.float32), MIX_RATE))  # 2.0..3.0 s
    chunks = [Audio(background.samples[a : a + 50_000], MIX_RATE) for a in range(0, len(background), 50_000)]
    out = tmp_path / "mix.f32"
    mix_to_file(chunks, len(background), [line], store, out, duck_db=-20.0)
    mixed = np.fromfile(out, dtype="<f4")
    assert len(mixed) == len(background)

    def at(seconds: float) -> float:
        return float(mixed[round(seconds * MIX_RATE)])

    assert at(1.0) == pytest.approx(0.1) and at(4.0) == pytest.approx(0.1)  # background untouched
    assert at(2.5) == pytest.approx(0.2 + 0.01, abs=1e-4)  # the line over the original at -20 dB
    assert 0.01 < at(1.97) < 0.1  # ramped, not switched
    store.close()


def test_gain_leaves_silence_and_lineless_mixes_alone() -> None:
    assert gain_to(-30.0, -16.0, lines=3) == pytest.approx(14.0)
    assert gain_to(-70.0, -16.0, lines=3) == pytest.approx(20.0)  # capped
    assert gain_to(-30.0, -16.0, lines=0) == 0.0
    assert gain_to(-math.inf, -16.0, lines=3) == 0.0
