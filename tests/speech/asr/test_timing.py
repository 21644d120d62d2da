"""Word timings snapped onto the speech (issue 15): Whisper starts a stretch's first word where its padded
VAD chunk starts and ends its last word early; dragoman.speech.asr.timing moves those edges onto the voice
and leaves every other word as Whisper timed it."""

from __future__ import annotations

import numpy as np

from dragoman.media.cues import Word
from dragoman.speech.asr.score import edit_distance, normalised_words, word_error_rate
from dragoman.speech.asr.timing import MAX_EXTEND, snap_words, speech_regions

REGIONS = [(0.70, 3.10), (4.10, 6.50)]


def _times(words: list[Word]) -> list[tuple[float, float]]:
    return [(round(w.start, 3), round(w.end, 3)) for w in words]


def test_a_first_word_starting_in_the_silence_starts_with_the_voice() -> None:
    words = [Word("The", 0.34, 0.84), Word("old", 0.84, 1.06), Word("car.", 2.2, 2.8)]
    snapped = snap_words(words, REGIONS)
    assert _times(snapped) == [(0.70, 0.84), (0.84, 1.06), (2.2, 3.1)]
    assert [w.text for w in snapped] == ["The", "old", "car."]


def test_each_sentence_after_a_pause_is_snapped_and_inner_words_keep_their_times() -> None:
    words = [
        Word("yes.", 0.5, 2.9),
        Word("My", 3.86, 4.26),
        Word("sister", 4.26, 4.66),
        Word("door.", 5.5, 6.3),
    ]
    snapped = snap_words(words, REGIONS)
    assert _times(snapped) == [(0.7, 3.1), (4.1, 4.26), (4.26, 4.66), (5.5, 6.5)]


def test_an_end_is_extended_at_most_max_extend_and_never_into_the_next_word() -> None:
    long_region = [(0.0, 10.0)]
    alone = snap_words([Word("a", 1.0, 2.0)], long_region)
    assert _times(alone) == [(1.0, round(2.0 + MAX_EXTEND, 3))]
    # the next word is in the same region: the end stays
    pair = snap_words([Word("a", 1.0, 2.0), Word("b", 2.1, 2.5)], long_region)
    assert _times(pair) == [(1.0, 2.0), (2.1, 3.0)]  # b, the last word, is extended


def test_words_outside_any_speech_or_without_regions_are_left_alone() -> None:
    words = [Word("hm", 3.3, 3.6), Word("x", 7.0, 7.5)]
    assert snap_words(words, REGIONS) == words
    assert snap_words(words, []) == words


def test_snapped_words_stay_in_order_without_overlaps() -> None:
    rng = np.random.default_rng(3)
    starts = np.sort(rng.uniform(0, 60, 400))
    words: list[Word] = []
    for i, at in enumerate(starts):
        start = max(float(at), words[-1].end if words else 0.0)
        words.append(Word(f"w{i}", start, max(start, float(at) + float(rng.uniform(0.05, 0.4)))))
    edges = np.sort(rng.uniform(0, 60, 40))
    regions = [(float(a), float(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]
    snapped = snap_words(words, regions)
    assert [w.text for w in snapped] == [w.text for w in words]
    assert all(w.start <= w.end for w in snapped)
    assert all(a.end <= b.start + 1e-9 for a, b in zip(snapped, snapped[1:], strict=False))


def test_speech_regions_find_a_tone_burst_unpadded() -> None:
    rate = 16000
    t = np.arange(int(1.5 * rate)) / rate
    voice = (0.5 * np.sin(2 * np.pi * 180 * t) * (1 + 0.5 * np.sin(2 * np.pi * 4 * t))).astype(np.float32)
    silence = np.zeros(rate, dtype=np.float32)
    regions = speech_regions(np.concatenate([silence, voice, silence]), rate)
    assert speech_regions(np.zeros(0, dtype=np.float32)) == []
    assert all(0.0 <= a < b <= 3.5 for a, b in regions)


def test_word_error_rate_is_word_levenshtein_on_normalised_text() -> None:
    assert normalised_words("L'homme, À midi!  Don't-stop") == ["l", "homme", "à", "midi", "don", "t", "stop"]
    assert word_error_rate("The old man.", "the OLD man") == 0.0
    assert word_error_rate("a b c d", "a x c") == 0.5  # one substitution, one deletion
    assert word_error_rate("a b", "a b c d") == 1.0  # two insertions
    assert word_error_rate("", "") == 0.0 and word_error_rate("", "x") == 1.0
    # numbers 0-20 in digits are their words, given the language (French 17 is two words)
    assert word_error_rate("Um neun Uhr.", "um 9 Uhr", "de") == 0.0
    assert word_error_rate("Um neun Uhr.", "um 9 Uhr") == 1 / 3  # no language: a digit is no word
    assert word_error_rate("dix-sept ans", "17 ans", "fr") == 0.0
    assert word_error_rate("twenty one", "21", "en") == 1.0  # past 20: left as written (2 words vs 1)
    assert word_error_rate("nine", "09", "en") == 1.0  # a leading zero is no number word
    assert edit_distance(["k", "i", "t", "t", "e", "n"], list("sitting")) == 3


def test_a_word_bridging_a_pause_moves_onto_the_side_holding_more_of_it() -> None:
    # Whisper base put a German sentence's first word at 3.42-4.76 s: the previous sentence's voice ends at
    # 3.50 s and the next begins at 4.50 s, so the word starts with the voice at 4.50 s.
    regions = [(0.7, 3.5), (4.5, 7.3)]
    words = [Word("Auto.", 3.0, 3.4), Word("Meine", 3.42, 4.76), Word("Schwester", 4.8, 5.3)]
    snapped = snap_words(words, regions)
    assert (snapped[1].start, snapped[1].end) == (4.5, 4.76)
    # the other way: a last word running on into the pause ends with its region's voice
    words = [Word("rotes", 2.8, 3.2), Word("Auto.", 3.2, 4.6), Word("Meine", 4.7, 5.0)]
    assert snap_words(words, regions)[1].end == 3.5
    # a pause shorter than SPLIT_GAP inside a word is not split on (neither cut at 1.2 nor moved to 1.35)
    (whole,) = snap_words([Word("ja", 1.0, 1.6)], [(0.9, 1.2), (1.35, 2.0)])
    assert whole.start == 1.0 and whole.end >= 1.6
