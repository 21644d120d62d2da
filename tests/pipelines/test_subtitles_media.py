"""The whole subtitles run on media with real speech at known times (dragoman.testing.media: Pico sentences,
silence and noise between them, ffmpeg's test card), recognised by the tiny Whisper with VAD on: cues only
where someone speaks, every file written or none, cancellation mid-way leaves nothing (issue 15)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from subtitles_support import TINY_ID, build_tiny, install_tiny

from dragoman.errors import Cancelled
from dragoman.pipelines.subtitles import PROGRESS_TOTAL, make_subtitles
from dragoman.progress import JobContext
from dragoman.settings import Settings
from dragoman.speech.asr import Recognizer, TranscribeOptions
from dragoman.testing.media import SpeechClip, make_speech_media
from dragoman.testing.whisper import TINY_DECODE
from dragoman.translation.engine import Engine

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="apt-get install ffmpeg")

SENTENCES = [("en", "The weather is fine today."), ("en", "We will walk along the river after lunch.")]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny(tmp_path_factory.mktemp("whisper"))


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[SpeechClip]]:
    path = tmp_path_factory.mktemp("media") / "talk.mkv"
    return path, make_speech_media(path, SENTENCES, gap=2.5)


@pytest.fixture
def settings(
    tiny_model: Path, packs_dir: Path, tiny_argos_pack: Path, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    monkeypatch.setenv("DRAGOMAN_APERTIUM", "0")
    shutil.copytree(tiny_argos_pack, packs_dir / tiny_argos_pack.name)
    chosen = Settings.from_env()
    install_tiny(tiny_model, chosen)
    return chosen


def test_cues_only_where_someone_speaks_and_every_file_written(
    settings: Settings, speech: tuple[Path, list[SpeechClip]], tmp_path: Path
) -> None:
    media, clips = speech
    seen: list[tuple[int, int, str]] = []
    with Engine(settings) as engine:
        result = make_subtitles(
            media,
            Recognizer(settings, decode_overrides=TINY_DECODE),  # VAD on: silence and noise are skipped
            engine,
            targets=["es"],
            formats=["srt", "vtt", "txt", "bilingual_srt"],
            options=TranscribeOptions(language="en", model=TINY_ID),
            out_dir=tmp_path / "subs",
            context=JobContext.of(lambda d, t, m: seen.append((d, t, m))),
        )
    source, target = result.tracks
    assert source.cues and len(source.cues) == len(target.cues)
    assert [(c.start, c.end) for c in source.cues] == [(c.start, c.end) for c in target.cues]
    for cue in source.cues:  # each cue starts within a sentence (VAD pads speech by 0.4 s), none in the gap
        assert any(clip.start - 0.6 <= cue.start <= clip.end + 0.6 for clip in clips), (cue, clips)
    gap = (clips[0].end + 0.6, clips[1].start - 0.6)
    assert not any(gap[0] < c.start and c.end < gap[1] for c in source.cues)
    assert result.media.duration == pytest.approx(clips[-1].end + 0.7, abs=0.15)
    names = sorted(p.name for p in result.paths)
    assert names == sorted(
        [
            "talk.en.srt",
            "talk.en.vtt",
            "talk.en.txt",
            "talk.es.srt",
            "talk.es.vtt",
            "talk.es.txt",
            "talk.en-es.srt",
        ]
    )
    assert sorted(p.name for p in (tmp_path / "subs").iterdir()) == names
    done = [d for d, _, _ in seen]
    assert done == sorted(done) and done[-1] == PROGRESS_TOTAL and {t for _, t, _ in seen} == {PROGRESS_TOTAL}
    messages = {m.split(":")[0] for _, _, m in seen}
    assert {"decoding", "recognising", "translating to es", "writing", "done"} <= messages


@pytest.mark.parametrize("stage", ["decoding", "recognising", "translating to es", "writing"])
def test_cancelling_at_any_stage_leaves_no_file(
    settings: Settings, speech: tuple[Path, list[SpeechClip]], tmp_path: Path, stage: str
) -> None:
    media, _ = speech
    folder = tmp_path / "work"
    folder.mkdir()
    shutil.copy(media, folder / "talk.mkv")
    context = JobContext()
    reached: list[str] = []

    def progress(done: int, total: int, message: str) -> None:
        if message.startswith(stage):
            reached.append(message)
            context.cancel.cancel(f"cancelled while {stage}")

    context = JobContext(progress, context.cancel)
    with Engine(settings) as engine, pytest.raises(Cancelled, match=stage):
        make_subtitles(
            folder / "talk.mkv",
            Recognizer(settings, decode_overrides=TINY_DECODE),
            engine,
            targets=["es"],
            formats=["srt", "bilingual_srt"],
            options=TranscribeOptions(language="en", model=TINY_ID),
            context=context,
        )
    assert reached
    assert [p.name for p in folder.iterdir()] == ["talk.mkv"]  # no subtitle, no temporary


def test_a_target_that_is_the_spoken_language_is_its_captions(
    settings: Settings, speech: tuple[Path, list[SpeechClip]], tmp_path: Path
) -> None:
    media, _ = speech
    with Engine(settings) as engine:
        result = make_subtitles(
            media,
            Recognizer(settings, decode_overrides=TINY_DECODE),
            engine,
            targets=["eng_Latn", "es", "es-ES"],
            options=TranscribeOptions(language="en", model=TINY_ID),
            out_dir=tmp_path / "subs",
        )
    assert result.skipped == ("en",)
    assert [t.language for t in result.tracks] == ["en", "es"]  # es and es-ES name one language
    assert sorted(p.name for p in (tmp_path / "subs").iterdir()) == ["talk.en.srt", "talk.es.srt"]
    assert "same_language: the speech is en; its captions are the en track" in result.warnings
