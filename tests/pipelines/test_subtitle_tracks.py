"""The subtitles pipeline's translation and files (issue 15): sentences merged over cues, translated once,
laid back over the same timing; output names; never over an existing file; all files or none."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pysrt
import pytest

from dragoman.errors import Cancelled, InvalidRequest
from dragoman.media.cues import Cue, CueRules
from dragoman.pipelines import subtitles as pipeline
from dragoman.pipelines.subtitles import (
    SubtitleTrack,
    sentence_groups,
    translate_track,
    write_outputs,
)
from dragoman.progress import JobContext
from dragoman.translation.types import TranslateOptions, TranslationResult


class WordEngine:
    """A stand-in engine: each text rewritten word by word with ``word``; records every call."""

    provenance = "on-device"

    def __init__(self, word: Callable[[str], str] = str.upper, *, whole: Callable[[str], str] | None = None):
        self.word = word
        self.whole = whole
        self.calls: list[list[str]] = []
        self.options: list[TranslateOptions] = []

    def translate_many(
        self, texts: Sequence[str], options: TranslateOptions, *, context: JobContext | None = None
    ) -> list[TranslationResult]:
        self.calls.append(list(texts))
        self.options.append(options)
        if context is not None:
            context.report(len(texts), len(texts), "fake")
        out = []
        for text in texts:
            translated = self.whole(text) if self.whole else " ".join(self.word(w) for w in text.split())
            out.append(
                TranslationResult(
                    translated,
                    "eng_Latn",
                    "spa_Latn",
                    "on-device",
                    0.0,
                    warnings=("fake_warning",),
                    route=("fake: eng_Latn->spa_Latn",),
                    options=options,
                )
            )
        return out


def cue(start: float, end: float, *lines: str) -> Cue:
    return Cue(start=start, end=end, lines=tuple(lines))


def track(*cues: Cue, language: str = "en") -> SubtitleTrack:
    return SubtitleTrack(language, tuple(cues), language, False)


# A sentence over three cues, then one of one cue, then a sentence cut by a pause and going on in lower case.
CUES = (
    cue(0.5, 2.5, "When the rain stopped we walked"),
    cue(2.6, 4.6, "along the river to the old bridge"),
    cue(4.7, 6.0, "near the mill."),
    cue(6.5, 8.0, "It was late."),
    cue(8.2, 9.5, "and then we went"),
    cue(11.5, 13.0, "home to sleep."),  # after a 2 s pause: a group of its own, starting in lower case
)


def test_cues_are_merged_into_sentences_at_ends_and_pauses() -> None:
    assert sentence_groups(CUES) == [[0, 1, 2], [3], [4], [5]]
    run_on = [cue(k * 2.0, k * 2.0 + 1.9, f"word{k} goes on") for k in range(pipeline.MAX_SENTENCE_CUES + 2)]
    groups = sentence_groups(run_on)
    assert [len(g) for g in groups] == [pipeline.MAX_SENTENCE_CUES, 2]
    assert sentence_groups([]) == []


def test_sentences_are_translated_in_one_call_and_laid_back_in_proportion() -> None:
    doubled = WordEngine(lambda w: f"{w.upper()} {w.upper()}")  # twice as long, in the same order
    out = translate_track(track(*CUES), doubled, "es")
    assert len(doubled.calls) == 1  # one engine call for the whole track
    assert doubled.calls[0][0] == (
        "When the rain stopped we walked along the river to the old bridge near the mill."
    )
    assert len(doubled.calls[0]) == 4
    assert doubled.options[0].source == "en" and doubled.options[0].target == "es"
    # each cue got exactly the translation of its own words: proportional shares cut at word breaks
    for source, translated in zip(CUES, out.cues, strict=True):
        expected = " ".join(f"{w.upper()} {w.upper()}" for w in source.text.split())
        assert translated.text == expected
        assert (translated.start, translated.end) == (source.start, source.end)  # timing unchanged
    assert out.language == "es" and out.source_language == "en" and out.translated
    assert out.route == ("fake: eng_Latn->spa_Latn",) and out.warnings == ("fake_warning",)
    assert out.provenance == "on-device"


def test_translated_cues_are_rewrapped_to_the_rules() -> None:
    long = WordEngine(lambda w: w.upper() + "issimo")
    rules = CueRules()
    out = translate_track(track(*CUES), long, "es", rules=rules)
    for translated in out.cues:
        assert 1 <= len(translated.lines) <= rules.max_lines
        assert all(len(line) <= rules.max_line_chars for line in translated.lines), translated.lines
    assert out.cues[0].text.startswith("WHENissimo THEissimo")
    assert len(out.cues[0].lines) == 2 and len(CUES[0].lines) == 1  # too long for one line now: rewrapped


def test_shares_follow_the_source_lengths_not_the_cue_count() -> None:
    cues = (cue(0.0, 3.0, "a b c d e f g h"), cue(3.1, 4.0, "i j"))  # 15 and 3 characters
    out = translate_track(track(*cues), WordEngine(lambda w: w * 3), "es")
    assert out.cues[0].text == "aaa bbb ccc ddd eee fff ggg hhh"
    assert out.cues[1].text == "iii jjj"


def test_a_translation_too_short_to_share_is_translated_cue_by_cue() -> None:
    cues = (cue(0.0, 2.0, "Once upon"), cue(2.1, 4.0, "a time."))
    engine = WordEngine(whole=lambda t: "Érase" if t == "Once upon a time." else t.upper())
    out = translate_track(track(*cues), engine, "es")
    assert engine.calls == [["Once upon a time."], ["Once upon", "a time."]]
    assert [c.text for c in out.cues] == ["ONCE UPON", "a TIME."]  # its lower-case start kept
    assert [(c.start, c.end) for c in out.cues] == [(0.0, 2.0), (2.1, 4.0)]


def test_a_cue_starting_in_lower_case_keeps_its_lower_case_start() -> None:
    # models capitalise whatever they are given: "and then we went" came back "And then..."
    def capitalise(text: str) -> str:
        words = [w[::-1] for w in text.split()]
        return " ".join(words)[:1].upper() + " ".join(words)[1:]

    out = translate_track(track(*CUES), WordEngine(whole=capitalise), "es")
    texts = [c.text for c in out.cues]
    assert texts[0].startswith("NehW")  # a sentence that starts with a capital keeps it
    assert texts[4].startswith("dna")  # the lower-case start is kept
    assert texts[5].startswith("emoh")


def test_bilingual_srt_pairs_each_cue_with_its_own_translation(tmp_path: Path) -> None:
    source = track(*CUES)
    translated = translate_track(source, WordEngine(), "es")
    text = pipeline.render_track(translated, "bilingual_srt", source)
    items = pysrt.from_string(text)
    assert len(items) == len(CUES)
    for item, src, tgt in zip(items, source.cues, translated.cues, strict=True):
        lines = item.text.split("\n")
        assert lines == [*src.lines, *tgt.lines]
        assert item.start.ordinal == round(src.start * 1000) and item.end.ordinal == round(src.end * 1000)
    with pytest.raises(InvalidRequest, match="source"):
        pipeline.render_track(translated, "bilingual_srt")


def test_an_empty_track_translates_to_an_empty_track() -> None:
    engine = WordEngine()
    out = translate_track(track(), engine, "es")
    assert out.cues == () and engine.calls == [] and out.translated


# ----- files -----------------------------------------------------------------------------------------
@pytest.fixture
def tracks() -> tuple[SubtitleTrack, SubtitleTrack]:
    source = track(*CUES)
    return source, translate_track(source, WordEngine(), "es")


def test_outputs_are_named_after_the_media_and_the_languages(
    tmp_path: Path, tracks: tuple[SubtitleTrack, SubtitleTrack]
) -> None:
    media = tmp_path / "talk.final.mp4"
    media.write_bytes(b"not read")
    written = write_outputs(media, tracks, ["srt", "vtt", "txt", "bilingual_srt"])
    names = [p.name for p in written]
    assert names == [
        "talk.final.en.srt",
        "talk.final.en.vtt",
        "talk.final.en.txt",
        "talk.final.es.srt",
        "talk.final.es.vtt",
        "talk.final.es.txt",
        "talk.final.en-es.srt",
    ]
    assert all(p.parent == tmp_path for p in written)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*names, "talk.final.mp4"])  # no temporaries
    assert len(pysrt.open(str(tmp_path / "talk.final.es.srt"))) == len(CUES)
    assert (tmp_path / "talk.final.en.vtt").read_text(encoding="utf-8").startswith("WEBVTT")
    assert "near the mill." in (tmp_path / "talk.final.en.txt").read_text(encoding="utf-8")
    other = tmp_path / "out" / "deeper"
    written = write_outputs(media, tracks[:1], ["srt"], out_dir=other)
    assert written == [other / "talk.final.en.srt"] and written[0].is_file()


def test_an_existing_file_is_never_touched_and_nothing_else_is_written(
    tmp_path: Path, tracks: tuple[SubtitleTrack, SubtitleTrack]
) -> None:
    media = tmp_path / "clip.mkv"
    media.write_bytes(b"media")
    existing = tmp_path / "clip.es.srt"
    existing.write_text("mine", encoding="utf-8")
    os.utime(existing, (1_000_000, 1_000_000))
    with pytest.raises(InvalidRequest, match="already exists"):
        write_outputs(media, tracks, ["srt", "vtt"])
    assert existing.read_text(encoding="utf-8") == "mine" and existing.stat().st_mtime == 1_000_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.es.srt", "clip.mkv"]  # all or none
    written = write_outputs(media, tracks, ["srt", "vtt"], overwrite=True)
    assert existing in written and "mine" not in existing.read_text(encoding="utf-8")


def test_a_file_appearing_meanwhile_is_not_replaced_and_nothing_is_left(
    tmp_path: Path, tracks: tuple[SubtitleTrack, SubtitleTrack], monkeypatch: pytest.MonkeyPatch
) -> None:
    media = tmp_path / "clip.mp4"
    media.write_bytes(b"media")
    from dragoman.documents.base import atomic_output as real

    @contextlib.contextmanager
    def racing(destination: Path, *, overwrite: bool = False) -> Iterator[Path]:
        with real(destination, overwrite=overwrite) as partial:
            yield partial
            if destination.name == "clip.es.srt":  # another writer gets there first
                destination.write_text("theirs", encoding="utf-8")

    monkeypatch.setattr(pipeline, "atomic_output", racing)
    with pytest.raises(InvalidRequest, match="appeared"):
        write_outputs(media, tracks, ["srt"])
    assert (tmp_path / "clip.es.srt").read_text(encoding="utf-8") == "theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.es.srt", "clip.mp4"]


def test_the_media_itself_and_folders_are_never_replaced(
    tmp_path: Path, tracks: tuple[SubtitleTrack, SubtitleTrack]
) -> None:
    media = tmp_path / "x.en.srt"  # even named like an output, the media is never one (NAME.<lang>.<ext>)
    media.write_text("1\n00:00:00,000 --> 00:00:01,000\nhi\n", encoding="utf-8")
    assert write_outputs(media, tracks[:1], ["srt"]) == [tmp_path / "x.en.en.srt"]
    with pytest.raises(InvalidRequest, match="media file"):
        pipeline.refuse_existing([media], media, overwrite=True)
    (tmp_path / "y.en.srt").mkdir()
    with pytest.raises(InvalidRequest, match="folder"):
        write_outputs(tmp_path / "y.mp4", tracks[:1], ["srt"], overwrite=True)


def test_formats_are_checked(tmp_path: Path, tracks: tuple[SubtitleTrack, SubtitleTrack]) -> None:
    with pytest.raises(InvalidRequest, match="unknown subtitle format 'ass'"):
        write_outputs(tmp_path / "a.mp4", tracks, ["srt", "ass"])
    with pytest.raises(InvalidRequest, match="formats are"):
        pipeline.check_formats([])
    assert pipeline.check_formats(["SRT", "srt", " vtt "]) == ("srt", "vtt")


def test_a_cancelled_write_leaves_no_file(
    tmp_path: Path, tracks: tuple[SubtitleTrack, SubtitleTrack]
) -> None:
    context = JobContext()
    context.cancel.cancel("stop")
    with pytest.raises(Cancelled):
        write_outputs(tmp_path / "a.mp4", tracks, ["srt"], context=context)
    assert list(tmp_path.iterdir()) == []


def test_stage_progress_maps_onto_one_growing_scale() -> None:
    seen: list[tuple[int, int, str]] = []
    outer = JobContext.of(lambda d, t, m: seen.append((d, t, m)))
    stage = pipeline.stage_context(outer, 100, 700, "recognising")
    stage.report(0, 10, "x")
    stage.report(5, 10, "x")
    stage.report(3, 10, "second hop restarts")  # not a step back
    stage.report(10, 10, "x")
    assert seen == [
        (100, 1000, "recognising: x"),
        (400, 1000, "recognising: x"),
        (700, 1000, "recognising: x"),
    ]
    assert stage.cancel is outer.cancel
