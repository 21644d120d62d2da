"""The cue builder: property tests of each documented rule (dragoman/media/cues.py), and examples."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dragoman.media.cues import (
    Cue,
    CueRules,
    Word,
    build_cues,
    rule_violations,
    width,
    wrap_lines,
)

RULES = CueRules()
_WORD_TEXT = st.one_of(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyzéñü", min_size=1, max_size=12),
    st.sampled_from(["and", "but,", "that", "well.", "yes?", "no!", "because", "o", "¿qué", "très,"]),
    st.text(alphabet="abcdefghij", min_size=43, max_size=60),  # a word longer than a line
    st.text(alphabet="你好世界中文字幕测试", min_size=1, max_size=4),
)


@st.composite
def timed_words(draw: st.DrawFn) -> list[Word]:
    """Words in order with realistic times: each 0.05-1.5 s long, gaps of 0-2 s between them."""
    count = draw(st.integers(min_value=0, max_value=60))
    t = draw(st.floats(min_value=0, max_value=5))
    words = []
    for _ in range(count):
        t += draw(st.sampled_from([0.0, 0.0, 0.02, 0.1, 0.3, 0.7, 2.0]))
        length = draw(st.floats(min_value=0.05, max_value=1.5))
        words.append(Word(" " + draw(_WORD_TEXT), t, t + length))
        t += length
    return words


@st.composite
def messy_words(draw: st.DrawFn) -> list[Word]:
    """Words with any times: equal, backwards, zero-length, negative."""
    count = draw(st.integers(min_value=0, max_value=30))
    times = st.floats(min_value=-1, max_value=30, allow_nan=False)
    return [Word(draw(_WORD_TEXT), draw(times), draw(times)) for _ in range(count)]


def _cue_words(cues: list[Cue]) -> list[str]:
    return [token for cue in cues for token in cue.text.split()]


def _assert_words_kept(cues: list[Cue], words: list[Word]) -> None:
    """Every word, in order, wholly inside one cue, and nothing else in the cues."""
    texts = [cue.text.replace(" ", "") for cue in cues]
    assert "".join(texts) == "".join(w.text.replace(" ", "") for w in words)
    at, rest = 0, texts[0] if texts else ""
    for word in (w.text.replace(" ", "") for w in words if w.text.strip()):
        if not rest:
            at += 1
            rest = texts[at]
        assert rest.startswith(word), (word, rest)  # a cue boundary falls between words only
        rest = rest[len(word) :]
    assert not rest and at == len(texts) - 1 or not texts


@settings(max_examples=60, deadline=None)
@given(timed_words())
def test_every_word_is_kept_in_order_and_never_split(words: list[Word]) -> None:
    cues = build_cues(words)
    # the words, in order, with nothing added, lost or cut (a cue's text re-joins its lines)
    _assert_words_kept(cues, words)
    for cue in cues:
        for line in cue.lines:
            assert line == line.strip() and line


@settings(max_examples=60, deadline=None)
@given(timed_words())
def test_lines_and_layout(words: list[Word]) -> None:
    for cue in build_cues(words):
        assert 1 <= len(cue.lines) <= RULES.max_lines
        for line in cue.lines:
            assert width(line) <= RULES.max_line_chars or len(line.split()) == 1, cue


@settings(max_examples=60, deadline=None)
@given(timed_words())
def test_timing_rules(words: list[Word]) -> None:
    cues = build_cues(words)
    for index, cue in enumerate(cues):
        following = cues[index + 1] if index + 1 < len(cues) else None
        assert cue.end > cue.start
        if following is not None:
            assert following.start - cue.end >= RULES.min_gap - 1e-9  # min gap, so no overlap
        # at most 7 s, except a single word spoken for longer
        if cue.duration > RULES.max_duration + 1e-9:
            long_words = [w for w in words if w.text.strip() == cue.text and w.end - w.start > 7]
            assert long_words, cue
        # at least 1 s, except where the next cue (and its gap) leaves no room
        if cue.duration < RULES.min_duration - 1e-9:
            assert following is not None
            assert abs(following.start - RULES.min_gap - cue.end) < 1e-6 or cue.duration <= 0.2 + 1e-9


@settings(max_examples=60, deadline=None)
@given(timed_words())
def test_cues_start_with_their_first_word(words: list[Word]) -> None:
    """Where words are in order and do not overlap, each cue starts when its first word is spoken."""
    cues = build_cues(words)
    starts = {round(w.start, 9) for w in words}
    for cue in cues:
        assert round(cue.start, 9) in starts or cue.start > 0  # pushed only by the gap after a butted cue


@settings(max_examples=60, deadline=None)
@given(messy_words())
def test_messy_times_still_give_ordered_cues(words: list[Word]) -> None:
    cues = build_cues(words)
    _assert_words_kept(cues, words)
    for index, cue in enumerate(cues):
        assert cue.start >= 0 and cue.end > cue.start
        if index + 1 < len(cues):
            assert cues[index + 1].start - cue.end >= RULES.min_gap - 1e-9


@settings(max_examples=80, deadline=None)
@given(st.lists(_WORD_TEXT, max_size=30))
def test_wrap_lines_never_splits_a_word(tokens: list[str]) -> None:
    text = " ".join(tokens)
    lines = wrap_lines(text)
    assert " ".join(lines).split() == text.split() or "".join(lines).replace(" ", "") == text.replace(" ", "")
    for line in lines:
        assert width(line) <= RULES.max_line_chars or len(line.split()) == 1


def _speak(text: str, start: float = 0.0, per_char: float = 0.06, gap: float = 0.02) -> list[Word]:
    words, t = [], start
    for token in text.split():
        d = per_char * len(token) + 0.1
        words.append(Word(" " + token, t, t + d))
        t += d + gap
    return words


def test_sentence_ends_and_pauses_end_cues() -> None:
    words = _speak("Hello there. How are you", per_char=0.12)
    later = _speak("today my friend", start=words[-1].end + 1.0)
    cues = build_cues(words + later)
    assert [c.text for c in cues] == ["Hello there.", "How are you", "today my friend"]
    # a sentence too short to be read alone shares its cue with the next one
    quick = build_cues(_speak("Yes. I think so, my dear friend, and so does everybody else here."))
    assert quick[0].text.startswith("Yes. I think") and quick[0].duration >= 1.0


def test_silence_gets_no_cue_and_a_short_cue_is_held_into_it() -> None:
    words = [Word("Yes.", 1.0, 1.3), Word("No.", 9.0, 9.2)]
    cues = build_cues(words)
    assert [(c.start, c.end, c.text) for c in cues] == [(1.0, 2.0, "Yes."), (9.0, 10.0, "No.")]
    assert all(not rule_violations(c, n) for c, n in zip(cues, [*cues[1:], None], strict=True))


def test_long_speech_breaks_at_a_phrase_boundary() -> None:
    text = "We walked along the river for hours, and when the sun went down we finally found the old bridge"
    cues = build_cues(_speak(text))
    assert len(cues) >= 2
    assert cues[0].text.endswith("hours,") or cues[1].text.startswith(("and", "when"))
    for cue, following in zip(cues, [*cues[1:], None], strict=True):
        assert not [v for v in rule_violations(cue, following) if "reading speed" not in v]


def test_two_lines_are_balanced_and_break_at_phrases() -> None:
    lines = wrap_lines("I never said that she stole my money, but someone did it anyway")
    assert len(lines) == 2
    assert lines[0].endswith("money,")
    lines = wrap_lines("The quick brown fox jumps over the lazy dog near the bank")
    assert len(lines) == 2 and abs(len(lines[0]) - len(lines[1])) <= 12
    assert wrap_lines("Short line.") == ("Short line.",)
    assert wrap_lines("   ") == ()


def test_unspaced_scripts_break_between_characters() -> None:
    text = "这是一个很长的中文句子用来测试没有空格的文字如何换行我们希望它在标点后面断开"
    lines = wrap_lines(text)
    assert len(lines) == 2 and "".join(lines) == text
    assert all(width(line) <= 42 for line in lines)
    cue = build_cues([Word("你好", 0, 0.5), Word("世界", 0.5, 1.0), Word("。", 1.0, 1.1)])[0]
    assert cue.text == "你好世界。"


def test_a_word_longer_than_a_line_keeps_its_own_line() -> None:
    long_word = "x" * 50
    cues = build_cues([Word("see", 0, 0.3), Word(long_word, 0.3, 2.0), Word("here", 2.0, 2.4)])
    assert _cue_words(cues) == ["see", long_word, "here"]
    assert any(line == long_word for c in cues for line in c.lines)


def test_rule_violations_names_each_rule() -> None:
    bad = Cue(0.0, 0.5, ("a" * 50, "b", "c"))
    found = " ".join(rule_violations(bad, Cue(0.45, 2.0, ("x",))))
    for phrase in ("3 lines", "line of 50", "on screen 0.500 s < 1.0", "reading speed", "overlaps"):
        assert phrase in found
    assert "> 7.0 s" in " ".join(rule_violations(Cue(0.0, 8.0, ("hello",))))
    assert "gap" in " ".join(rule_violations(Cue(0.0, 1.0, ("a",)), Cue(1.05, 2.1, ("b",))))
