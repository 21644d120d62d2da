"""The subtitles pipeline under hostile inputs (issue 15, H3): the translation lay-back stays linear, odd
translations (empty, multi-line, with ``-->``, in a script without spaces) keep the tracks paired cue for cue
and the files valid, and an output name taken by a symlink or a folder is never written through."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pysrt
import pytest
from growth import assert_linear

from dragoman.errors import InvalidRequest
from dragoman.media.cues import Cue
from dragoman.pipelines.subtitles import SubtitleTrack, render_track, translate_track, write_outputs
from dragoman.progress import JobContext
from dragoman.translation.types import TranslateOptions, TranslationResult


class Rewriter:
    """A stand-in engine rewriting each whole text with ``rewrite``."""

    def __init__(self, rewrite: object = str.upper) -> None:
        self.rewrite = rewrite

    def translate_many(
        self, texts: Sequence[str], options: TranslateOptions, *, context: JobContext | None = None
    ) -> list[TranslationResult]:
        rewrite = self.rewrite
        assert callable(rewrite)
        return [
            TranslationResult(str(rewrite(t)), "eng_Latn", "spa_Latn", "on-device", 0.0, options=options)
            for t in texts
        ]


def _track(texts: Sequence[str], language: str = "en") -> SubtitleTrack:
    cues = tuple(Cue(k * 2.0, k * 2.0 + 1.8, (text,)) for k, text in enumerate(texts))
    return SubtitleTrack(language, cues, language, False)


def _cues_of(text: str, size: int) -> list[str]:
    words = text.split()
    return [" ".join(words[i : i + size]) for i in range(0, len(words), size)] or [text]


def test_the_lay_back_is_linear_in_the_track() -> None:
    engine = Rewriter(lambda t: t.upper() + " mas")

    def lay_back(text: str) -> object:
        return translate_track(_track(_cues_of(text, 6)), engine, "es")

    def unspaced(text: str) -> object:
        cues = [text[i : i + 20] for i in range(0, len(text), 20)]
        return translate_track(_track(cues, "ja"), Rewriter(lambda t: t[::-1]), "zh")

    assert_linear(
        lay_back,
        {
            "run-on speech": lambda n: ("and so we went on " * (n // 18 + 1))[:n],
            "short sentences": lambda n: ("Yes. No. Maybe so. " * (n // 19 + 1))[:n],
        },
        n=4000,
    )
    assert_linear(unspaced, {"no spaces": lambda n: ("今日は天気がいいです" * (n // 10 + 1))[:n]}, n=4000)


def test_an_empty_translation_keeps_the_source_text_and_the_pairing() -> None:
    source = _track(["When we came", "home it was late.", "Then we slept."])
    out = translate_track(source, Rewriter(lambda t: ""), "es")
    assert [c.text for c in out.cues] == [c.text for c in source.cues]
    assert any(w.startswith("empty_translation: 3 cue(s)") for w in out.warnings)
    assert len(pysrt.from_string(render_track(out, "srt"))) == 3


def test_translations_with_line_breaks_and_arrows_keep_the_files_valid() -> None:
    source = _track(["One two three", "four five six.", "Seven."])
    hostile = Rewriter(lambda t: "\n\n".join(t.split()) + " --> 00:00:01,000\n\n99")
    out = translate_track(source, hostile, "es")
    for fmt in ("srt", "bilingual_srt"):
        items = pysrt.from_string(render_track(out, fmt, source))
        assert len(items) == 3
        assert [(i.start.ordinal, i.end.ordinal) for i in items] == [
            (round(c.start * 1000), round(c.end * 1000)) for c in source.cues
        ]
    vtt = render_track(out, "vtt")
    assert vtt.count(" --> ") == 3


def test_a_sentence_in_a_script_without_spaces_is_cut_between_characters() -> None:
    source = _track(["今日は天気が", "いいですね。"], "ja")
    out = translate_track(
        source, Rewriter(lambda t: t.replace("。", "").replace("今日", "今天") + "。"), "zh"
    )
    assert [c.text for c in out.cues] == ["今天は天気が", "いいですね。"]


def test_an_output_name_taken_by_a_symlink_or_folder_is_never_written_through(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("precious", encoding="utf-8")
    media = tmp_path / "clip.mp4"
    media.write_bytes(b"media")
    (tmp_path / "clip.en.srt").symlink_to(elsewhere)
    source = _track(["Hello there."])
    with pytest.raises(InvalidRequest, match="already exists"):
        write_outputs(media, [source], ["srt"])
    assert elsewhere.read_text(encoding="utf-8") == "precious"
    write_outputs(media, [source], ["srt"], overwrite=True)  # the link is replaced, never its target
    assert elsewhere.read_text(encoding="utf-8") == "precious"
    assert (
        not (tmp_path / "clip.en.srt").is_symlink()
        and "Hello there." in (tmp_path / "clip.en.srt").read_text()
    )
    (tmp_path / "clip.en.vtt").mkdir()
    with pytest.raises(InvalidRequest, match="folder"):
        write_outputs(media, [source], ["vtt"], overwrite=True)


def test_two_tracks_of_one_language_are_refused(tmp_path: Path) -> None:
    source = _track(["Hello there."])
    with pytest.raises(InvalidRequest, match="same file"):
        write_outputs(tmp_path / "a.mp4", [source, source], ["srt"])
    assert list(tmp_path.iterdir()) == []
