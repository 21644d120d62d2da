"""Dubbing on media made in the test (issue 16's proof): a dialogue of a woman (Pico) and a man (flite)
over a music-like chord with gaps, on ffmpeg's test card. The output plays (the video stream copied bit for
bit, the dubbed and original audio and both languages' subtitles present, the duration within a frame),
each line starts within 200 ms of its original (measured in the output audio), ``match`` mode gives the two
speakers two voices, and the background is still there between lines at its own level."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dub_support import (
    DIALOGUE,
    SPANISH,
    DictEngine,
    ScriptedRecognizer,
    ebur128,
    first_audio,
    format_duration,
    levels_db,
    speech_onset,
    streams,
    tone_power_db,
    video_md5,
)

from dragoman.pipelines.dub import DubOptions, DubResult, dub_batch, dub_file
from dragoman.pipelines.dub.mix import TRUE_PEAK_DBTP
from dragoman.speech.tts.synth import Synthesizer
from dragoman.testing.dub import clips_srt, make_dialogue_media
from dragoman.testing.media import SpeechClip

pytestmark = pytest.mark.skipif(
    shutil.which("ffmpeg") is None or shutil.which("flite") is None, reason="apt-get install ffmpeg flite"
)

FPS = 25


@pytest.fixture(scope="module")
def dialogue(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[SpeechClip], Path]:
    folder = tmp_path_factory.mktemp("dialogue")
    media = folder / "talk.mp4"
    clips = make_dialogue_media(media, DIALOGUE, gap=1.2, background_db=-30.0, fps=FPS)
    srt = folder / "source.srt"
    srt.write_text(clips_srt(clips), encoding="utf-8")
    return media, clips, srt


@pytest.fixture(scope="module")
def synthesizer() -> Synthesizer:
    return Synthesizer()


@pytest.fixture(scope="module")
def preset(
    dialogue: tuple[Path, list[SpeechClip], Path],
    synthesizer: Synthesizer,
    tmp_path_factory: pytest.TempPathFactory,
) -> DubResult:
    media, clips, _ = dialogue
    recognizer: Any = ScriptedRecognizer(clips)
    return dub_file(
        media,
        DubOptions("es", voice="aria"),
        synthesizer=synthesizer,
        recognizer=recognizer,
        engine=DictEngine(),
        out_dir=tmp_path_factory.mktemp("out"),
    )


def test_the_output_plays_with_the_video_copied_bit_for_bit(
    dialogue: tuple[Path, list[SpeechClip], Path], preset: DubResult
) -> None:
    media, clips, _ = dialogue
    video = preset.outputs.video
    assert video is not None and video.name == "talk.es.mp4"
    assert video_md5(video) == video_md5(media)
    found = [(s["codec_type"], s.get("tags", {}).get("language")) for s in streams(video)]
    assert found == [
        ("video", "und"),
        ("audio", "spa"),
        ("audio", "eng"),
        ("subtitle", "spa"),
        ("subtitle", "eng"),
    ]
    assert abs(format_duration(video) - format_duration(media)) <= 1 / FPS
    assert preset.source_language == "en" and preset.target == "es"
    assert [line.text for line in preset.lines] == [SPANISH[text] for _, text in DIALOGUE]
    names = sorted(p.name for p in preset.outputs.paths())
    assert names == sorted(
        [
            "talk.es.mp4",
            "talk.es.dub.m4a",
            "talk.es.srt",
            "talk.es.vtt",
            "talk.es.txt",
            "talk.en.srt",
            "talk.en-es.srt",
        ]
    )
    assert "Hoy hace buen tiempo." in preset.outputs.subtitles["srt:es"].read_text(encoding="utf-8")
    assert set(preset.stage_seconds) >= {"probe", "recognise", "translate", "synthesise", "mix", "mux"}
    assert streams(preset.outputs.audio)[0]["codec_type"] == "audio"


def test_the_dub_meets_its_loudness_and_true_peak_targets(preset: DubResult) -> None:
    """ffmpeg's EBU R128 meter reads the dubbed track (in the video and in the audio file) at the
    options' loudness within 1 LU, its true peak under the limiter's ceiling (0.5 dB for the AAC encode)."""
    target = DubOptions("es").loudness_lufs
    assert preset.outputs.video is not None and preset.outputs.audio is not None
    for path in (preset.outputs.video, preset.outputs.audio):
        integrated, peak = ebur128(path)
        assert abs(integrated - target) <= 1.0, (path.name, integrated)
        assert peak <= TRUE_PEAK_DBTP + 0.5, (path.name, peak)


def _background_db(audio: Any) -> float:
    return float(np.median(levels_db(audio)[5:30]))  # the lead: 0.1..0.6 s, background only


def test_each_line_starts_within_200_ms_of_its_original(
    dialogue: tuple[Path, list[SpeechClip], Path], preset: DubResult
) -> None:
    _, clips, _ = dialogue
    assert preset.outputs.video is not None
    audio = first_audio(preset.outputs.video)
    floor = _background_db(audio)
    for clip in clips:
        onset = speech_onset(audio, clip.start - 0.5, clip.start + 0.8, floor + 10.0)
        assert onset is not None and abs(onset - clip.start) <= 0.2, (clip, onset)
    for line, clip in zip(preset.lines, clips, strict=True):
        assert abs(line.placed_start - clip.start) <= 0.2


def test_the_background_is_still_there_between_lines(
    dialogue: tuple[Path, list[SpeechClip], Path], preset: DubResult
) -> None:
    media, clips, _ = dialogue
    assert preset.outputs.video is not None
    audio = first_audio(preset.outputs.video)
    before = first_audio(media)
    gain = _background_db(audio) - _background_db(before)  # the loudness normalisation's
    gaps = 0
    for line, after in zip(preset.lines, clips[1:], strict=False):
        lo, hi = max(line.placed_end, line.end) + 0.15, after.start - 0.15
        if hi - lo < 0.3:
            continue
        gaps += 1
        span = slice(int(lo / 0.02), int(hi / 0.02))
        level = float(np.median(levels_db(audio)[span])) - float(np.median(levels_db(before)[span]))
        assert abs(level - gain) <= 1.5  # the background as it was (but for the overall gain): not ducked
        assert tone_power_db(audio, lo, hi, 220.0) - tone_power_db(audio, lo, hi, 250.0) > 15.0  # the chord
    assert gaps >= 2


def test_match_mode_gives_the_two_speakers_two_voices(
    dialogue: tuple[Path, list[SpeechClip], Path], synthesizer: Synthesizer, tmp_path: Path
) -> None:
    media, _, srt = dialogue
    result = dub_file(
        media,
        DubOptions("es", source="en", voice_mode="match", subtitles=srt),
        synthesizer=synthesizer,
        engine=DictEngine(),
        out_dir=tmp_path,
    )
    by_speaker: dict[str, set[str]] = {}
    for (speaker, _), line in zip(DIALOGUE, result.lines, strict=True):
        by_speaker.setdefault(speaker, set()).add(line.voice)
        assert line.gender == speaker
    assert len(by_speaker["female"]) == 1 and len(by_speaker["male"]) == 1
    assert by_speaker["female"] != by_speaker["male"]


def test_a_batch_recognises_once(
    dialogue: tuple[Path, list[SpeechClip], Path], synthesizer: Synthesizer, tmp_path: Path
) -> None:
    media, clips, _ = dialogue
    recognizer = ScriptedRecognizer(clips)
    results = dub_batch(
        media,
        ["es", "it"],
        DubOptions("es"),
        synthesizer=synthesizer,
        recognizer=recognizer,  # type: ignore[arg-type]
        engine=DictEngine(),
        out_dir=tmp_path,
    )
    assert recognizer.calls == 1 and [r.target for r in results] == ["es", "it"]
    assert (tmp_path / "talk.en.srt").is_file() and (tmp_path / "talk.it.mp4").is_file()
    assert "srt:en" not in results[1].outputs.subtitles


@pytest.mark.parametrize("suffix", [".mkv", ".m4a"])
def test_other_containers(
    dialogue: tuple[Path, list[SpeechClip], Path], synthesizer: Synthesizer, tmp_path: Path, suffix: str
) -> None:
    media, _, srt = dialogue
    other = tmp_path / f"talk{suffix}"
    args = ["-map", "0:a", "-c", "copy"] if suffix == ".m4a" else ["-c", "copy"]
    import subprocess

    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-i", str(media), *args, str(other)], check=True)
    result = dub_file(
        other,
        DubOptions("es", source="en", subtitles=srt),
        synthesizer=synthesizer,
        engine=DictEngine(),
        out_dir=tmp_path / "out",
    )
    if suffix == ".m4a":
        assert result.outputs.video is None
    else:
        assert result.outputs.video is not None and result.outputs.video.suffix == ".mkv"
        kinds = [s["codec_type"] for s in streams(result.outputs.video)]
        assert kinds == ["video", "audio", "audio", "subtitle", "subtitle"]
        assert video_md5(result.outputs.video) == video_md5(media)
    assert result.outputs.audio.is_file()


def test_clone_mode_speaks_every_line_in_the_clone_s_voice(
    dialogue: tuple[Path, list[SpeechClip], Path], synthesizer: Synthesizer, tmp_path: Path
) -> None:
    import uuid

    from dragoman.errors import CloneNotFound
    from dragoman.media.audio import Audio
    from dragoman.speech.tts.clones import Clone, LocalCloneStore

    media, _, srt = dialogue
    store = LocalCloneStore(tmp_path / "clones")
    clone = Clone(
        id=str(uuid.uuid4()), name="Sam", description="", gender="male", f0_median=110.0, persona="atlas",
        pitch_st=-1.0, formant=0.97, similarity=0.6, similarity_unmatched=0.5, reference_seconds=8.0,
        created_at=0.0,
    )  # fmt: skip
    store.add(clone, Audio(np.zeros(16000, dtype=np.float32), 16000))
    with pytest.raises(CloneNotFound):  # an unknown clone: refused before any work
        dub_file(
            media,
            DubOptions("es", source="en", voice_mode="clone", clone_id="nope", subtitles=srt),
            synthesizer=synthesizer,
            engine=DictEngine(),
            out_dir=tmp_path / "out",
            clone_store=store,
        )
    assert not (tmp_path / "out").exists()
    result = dub_file(
        media,
        DubOptions("es", source="en", voice_mode="clone", clone_id=clone.id, subtitles=srt),
        synthesizer=synthesizer,
        engine=DictEngine(),
        out_dir=tmp_path / "out",
        clone_store=store,
    )
    assert {line.voice for line in result.lines} == {"atlas"} and len(result.lines) == len(DIALOGUE)
    assert {line.gender for line in result.lines} == {"male"}
