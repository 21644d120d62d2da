"""Dubbing (issue 16, D4): the user's own source subtitles are never written over (``dragoman dub talk.mp4
--subtitles talk.en.srt``, the name ``dragoman subtitles`` gives them), an existing output is refused in the
dub's own words, and a batch's progress passes on every stage (a stage change at an unchanged value
included)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from dub_support import DictEngine

from dragoman.errors import InvalidRequest
from dragoman.media.audio import Audio, write_wav
from dragoman.media.subtitle_files import srt_timestamp
from dragoman.pipelines.dub import DubOptions, dub_batch, dub_file
from dragoman.pipelines.subtitles import stage_context
from dragoman.progress import JobContext
from dragoman.speech.tts.synth import Synthesizer

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="apt-get install ffmpeg")

TEXTS = ["The weather is fine today.", "Bring your coat, it may rain later."]


@pytest.fixture(scope="module")
def synthesizer() -> Synthesizer:
    return Synthesizer()


def _talk(folder: Path) -> tuple[Path, Path]:
    """``talk.wav`` (quiet noise) and its source subtitles ``talk.en.srt`` beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    media = folder / "talk.wav"
    rng = np.random.default_rng(16)
    write_wav(Audio((rng.standard_normal(8 * 16000) * 0.01).astype(np.float32), 16000), media)
    srt = folder / "talk.en.srt"
    srt.write_text(
        "".join(
            f"{i + 1}\n{srt_timestamp(0.5 + 3 * i)} --> {srt_timestamp(2.5 + 3 * i)}\n{text}\n\n"
            for i, text in enumerate(TEXTS)
        ),
        encoding="utf-8",
    )
    return media, srt


@pytest.mark.parametrize("overwrite", [False, True])
def test_the_source_subtitles_given_are_never_written_over(
    synthesizer: Synthesizer, tmp_path: Path, overwrite: bool
) -> None:
    media, srt = _talk(tmp_path)
    before = srt.read_bytes()
    inode = srt.stat().st_ino
    result = dub_file(
        media,
        DubOptions("es", source="en", subtitles=srt),
        synthesizer=synthesizer,
        engine=DictEngine(),
        overwrite=overwrite,
    )
    assert srt.read_bytes() == before and srt.stat().st_ino == inode
    assert "srt:en" not in result.outputs.subtitles and srt not in result.outputs.subtitles.values()
    assert any(w.startswith("source_subtitles:") and "talk.en.srt" in w for w in result.warnings)
    # the rest is written as always
    assert result.outputs.audio.is_file() and (tmp_path / "talk.es.srt").is_file()
    assert (tmp_path / "talk.en-es.srt").is_file()


def test_a_batch_never_writes_over_the_source_subtitles_either(
    synthesizer: Synthesizer, tmp_path: Path
) -> None:
    media, srt = _talk(tmp_path)
    before = srt.read_bytes()
    results = dub_batch(
        media,
        ["es", "en"],
        DubOptions("es", source="en", subtitles=srt),
        synthesizer=synthesizer,
        engine=DictEngine(),
        overwrite=True,
    )
    assert srt.read_bytes() == before
    assert all(srt not in r.outputs.subtitles.values() for r in results)
    assert any(w.startswith("source_subtitles:") for w in results[0].warnings)


def test_source_subtitles_elsewhere_still_give_the_source_srt(
    synthesizer: Synthesizer, tmp_path: Path
) -> None:
    media, srt = _talk(tmp_path / "in")
    result = dub_file(
        media,
        DubOptions("es", source="en", subtitles=srt),
        synthesizer=synthesizer,
        engine=DictEngine(),
        out_dir=tmp_path / "out",
    )
    assert result.outputs.subtitles["srt:en"] == tmp_path / "out" / "talk.en.srt"
    assert not any(w.startswith("source_subtitles:") for w in result.warnings)


def test_an_existing_output_is_refused_in_the_dub_s_words(synthesizer: Synthesizer, tmp_path: Path) -> None:
    media, srt = _talk(tmp_path)
    mine = tmp_path / "talk.es.srt"
    mine.write_text("mine", encoding="utf-8")
    with pytest.raises(InvalidRequest) as refused:
        dub_file(
            media,
            DubOptions("es", source="en", subtitles=srt),
            synthesizer=synthesizer,
            engine=DictEngine(),
            hint="give --overwrite",
        )
    message = str(refused.value)
    assert "a dub never overwrites" in message and "give --overwrite" in message
    assert "subtitles never overwrite" not in message
    assert mine.read_text(encoding="utf-8") == "mine"


def test_a_stage_change_at_the_same_value_is_passed_on() -> None:
    seen: list[tuple[int, str]] = []
    outer = JobContext(lambda done, total, message: seen.append((done, message)))
    stage = stage_context(outer, 100, 200, "dubbing into es")
    stage.report(500, 1000, "synthesise: line 3 of 3")
    stage.report(500, 1000, "synthesise: line 3 of 3")  # the same again: dropped
    stage.report(500, 1000, "mix")  # another stage at the same value: passed on
    stage.report(400, 1000, "mux")  # going back: dropped
    assert seen == [(150, "dubbing into es: synthesise: line 3 of 3"), (150, "dubbing into es: mix")]


def test_a_batch_reports_every_stage_of_every_target(synthesizer: Synthesizer, tmp_path: Path) -> None:
    media, srt = _talk(tmp_path)
    seen: list[tuple[int, str]] = []
    dub_batch(
        media,
        ["es", "it"],
        DubOptions("es", source="en", subtitles=srt),
        synthesizer=synthesizer,
        engine=DictEngine(),
        out_dir=tmp_path / "out",
        context=JobContext(lambda done, total, message: seen.append((done, message))),
    )
    values = [v for v, _ in seen]
    assert values == sorted(values)  # never going back
    for target in ("es", "it"):
        stages = [
            m.removeprefix(f"dubbing into {target}: ").split(":")[0]
            for _, m in seen
            if m.startswith(f"dubbing into {target}:")
        ]
        for name in ("translate", "voices", "synthesise", "mix", "mux", "done"):
            assert name in stages, (target, name, stages)


def test_scratch_is_not_left_in_the_folder(synthesizer: Synthesizer, tmp_path: Path) -> None:
    media, srt = _talk(tmp_path)
    dub_file(
        media, DubOptions("es", source="en", subtitles=srt), synthesizer=synthesizer, engine=DictEngine()
    )
    names = sorted(os.listdir(tmp_path))
    assert names == sorted(
        [
            "talk.wav",
            "talk.en.srt",
            "talk.es.dub.m4a",
            "talk.es.srt",
            "talk.es.vtt",
            "talk.es.txt",
            "talk.en-es.srt",
        ]
    )
