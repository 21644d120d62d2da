"""Adversarial inputs to the word timing snap and the word error rate (issue 15, H5): many words and speech
regions (linear by ratio), words with odd times (zero length, touching, at the very edges of regions, far
outside any), and texts that normalise to nothing."""

from __future__ import annotations

import functools

from growth import assert_linear, repeat

from dragoman.media.cues import Word
from dragoman.speech.asr.score import normalised_words, word_error_rate
from dragoman.speech.asr.timing import snap_words


@functools.cache
def _case(n: int) -> tuple[list[Word], list[tuple[float, float]]]:
    """n words of 0.3 s with 0.5 s pauses every 4 words; a speech region per 4 words starting 0.2 s late."""
    words: list[Word] = []
    regions: list[tuple[float, float]] = []
    at = 0.0
    for i in range(n):
        if i % 4 == 0:
            at += 0.5
            regions.append((at + 0.2, at + 1.4))
        words.append(Word(f"w{i}", at, at + 0.3))
        at += 0.3
    return words, regions


def test_snapping_is_linear_in_words_and_regions() -> None:
    def work(text: str) -> object:
        words, regions = _case(len(text))
        return snap_words(words, regions)

    assert_linear(work, {"words and regions": repeat("x")}, 2000)


def test_every_first_word_of_a_region_is_moved_onto_it() -> None:
    words, regions = _case(40)
    snapped = snap_words(words, regions)
    assert [round(w.start, 6) for w in snapped[::4]] == [round(r[0], 6) for r in regions]
    assert all(a.end <= b.start + 1e-9 for a, b in zip(snapped, snapped[1:], strict=False))


def test_odd_word_times_never_break_order() -> None:
    regions = [(1.0, 2.0), (2.0, 3.0), (5.0, 5.0), (7.0, 9.0)]
    words = [
        Word("zero", 0.5, 0.5),  # zero length in the silence
        Word("edge", 1.0, 1.0),  # zero length on a region start
        Word("touch", 1.0, 2.0),  # exactly a region
        Word("span", 2.0, 6.0),  # over two regions and an empty one
        Word("far", 100.0, 101.0),  # after every region
    ]
    snapped = snap_words(words, regions)
    assert [w.text for w in snapped] == [w.text for w in words]
    assert all(w.start <= w.end for w in snapped)
    assert all(a.end <= b.start + 1e-9 for a, b in zip(snapped, snapped[1:], strict=False))
    assert snapped[-1] == words[-1]


def test_texts_without_words_and_hostile_text() -> None:
    assert normalised_words("... --- !!! \u200b\u00a0") == []
    assert word_error_rate("...", "") == 0.0
    assert word_error_rate("...", "hello") == 1.0
    assert word_error_rate("a " * 300, "b " * 300) == 1.0  # all substituted
    assert word_error_rate("ﬁne", "fine") == 0.0  # NFKC: the ligature is two letters
