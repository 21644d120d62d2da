from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dragoman.errors import DragomanError, InvalidRequest, LimitExceeded
from dragoman.translation.segmentation import Segmented, segment, split_to_limit

# --- sentence boundaries --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("Dr. Smith arrived at 3.30 p.m. He left.", ["Dr. Smith arrived at 3.30 p.m.", "He left."]),
        ("Visit https://x.org/a.b. Then stop.", ["Visit https://x.org/a.b.", "Then stop."]),
        ("E-mail a.b@c.com. Thanks!", ["E-mail a.b@c.com.", "Thanks!"]),
        ("It costs $3.50. OK?", ["It costs $3.50.", "OK?"]),
        ("Wait... what?", ["Wait... what?"]),
        ('He said "Hi." Then left.', ['He said "Hi."', "Then left."]),
        ("第一句。第二句！", ["第一句。", "第二句！"]),
        ("यह है। वह है।", ["यह है।", "वह है।"]),
        ("هل أنت بخير؟ نعم.", ["هل أنت بخير؟", "نعم."]),
        ("One. Two! Three? Four…", ["One.", "Two!", "Three?", "Four…"]),
        ("Really?! Yes.", ["Really?!", "Yes."]),
        ("(He left.) Then she came.", ["(He left.)", "Then she came."]),
        ("She said: «Non.» Puis elle partit.", ["She said: «Non.»", "Puis elle partit."]),
        ("« Bonjour. » Il est parti.", ["« Bonjour. »", "Il est parti."]),
        ("Hola. ¿Qué tal? ¡Bien!", ["Hola.", "¿Qué tal?", "¡Bien!"]),
        ('Stop. "Why?" she asked.', ["Stop.", '"Why?" she asked.']),
        (
            "I live in the U.S. He lives in the U.S. Army base.",
            ["I live in the U.S.", "He lives in the U.S. Army base."],
        ),
        ("apples, pears, etc. Then we left.", ["apples, pears, etc.", "Then we left."]),
        ("I was thinking... Then I left.", ["I was thinking...", "Then I left."]),
        ("Read config.yaml. It is short.", ["Read config.yaml.", "It is short."]),
        ("He said no. Then he left.", ["He said no.", "Then he left."]),
        ("We saw the sun. Then rain.", ["We saw the sun.", "Then rain."]),
        ("Ты где? Я дома.", ["Ты где?", "Я дома."]),
        ("「你好。」他说。我走了。", ["「你好。」他说。", "我走了。"]),
        ("你好!我是小明。", ["你好!", "我是小明。"]),
        ("Это так. Да.", ["Это так.", "Да."]),
        ("Բարեւ։ Ինչպե՞ս ես։", ["Բարեւ։", "Ինչպե՞ս ես։"]),
    ],
)
def test_sentence_boundaries(text: str, sentences: list[str]) -> None:
    assert list(segment(text).sentences) == sentences


@pytest.mark.parametrize(
    "text",
    [
        "Mr. Smith and Mrs. Jones met Dr. Who and Prof. X yesterday.",
        "Use a tool, e.g. A hammer, i.e. Something heavy.",
        "J. R. R. Tolkien wrote it.",
        "We met on Jan. 5 and again in Feb. 2020.",
        "Pi is 3.14 and the price is 1,000.50 dollars.",
        "Install v2.0.1 from https://example.com/a.b?x=1 today.",
        "Mail a.b@c.co.uk or read config.yaml now.",
        "Wait... what happened here?",
        "Go to St. Louis by Mt. Everest.",
        "The U.S. Army arrived.",
        "See No. 5 and Fig. 3 and pp. 12-14 for details.",
        "Yahoo! is a company.",
        "The price rose 5. 6 people noticed.",
        "Meet Gen. Patton.",
        "Born in Ph.D. Programs abroad.",
    ],
)
def test_no_boundary(text: str) -> None:
    assert segment(text).sentences == (text,)


def test_each_line_is_its_own_segment() -> None:
    text = "# Title\n- first item\n- second item\n1. Buy milk. Then eggs.\n2) Done\n> quoted"
    assert segment(text).sentences == (
        "Title",
        "first item",
        "second item",
        "Buy milk.",
        "Then eggs.",
        "Done",
        "quoted",
    )


# --- exact layout ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parts", "is_text"),
    [
        ("  Hello.  ", ("  ", "Hello.", "  "), (False, True, False)),
        ("A b.\r\nC d.", ("A b.", "\r\n", "C d."), (True, False, True)),
        ("\tIndented.\n\n\nNext.", ("\t", "Indented.", "\n\n\n", "Next."), (False, True, False, True)),
        ("One.\u00a0\u00a0Two.", ("One.", "\u00a0\u00a0", "Two."), (True, False, True)),
        ("One.   Two.\t", ("One.", "   ", "Two.", "\t"), (True, False, True, False)),
        ("Keep  inner   space.", ("Keep  inner   space.",), (True,)),
        ("x\u2028y\u2029z\rw", ("x", "\u2028", "y", "\u2029", "z", "\r", "w"), (True, False) * 3 + (True,)),
        ("\ufeffHello", ("\ufeff", "Hello"), (False, True)),
        ("Text\n---\nMore", ("Text", "\n---\n", "More"), (True, False, True)),
    ],
)
def test_layout_is_kept_exactly(text: str, parts: tuple[str, ...], is_text: tuple[bool, ...]) -> None:
    seg = segment(text)
    assert seg.parts == parts
    assert seg.is_text == is_text
    assert seg.rebuild(seg.sentences) == text


@pytest.mark.parametrize("text", ["", " ", "\n\n", " \t\r\n \u00a0", "---", "* * *", "...", "\u3000"])
def test_nothing_to_translate(text: str) -> None:
    seg = segment(text)
    assert seg.sentences == ()
    assert seg.rebuild([]) == text


def test_rebuild_puts_translations_between_separators() -> None:
    seg = segment("  Hello there.  How are you?\n\n- Fine.\n")
    assert seg.sentences == ("Hello there.", "How are you?", "Fine.")
    assert seg.rebuild(["Hallo.", "Wie geht's?", "Gut."]) == "  Hallo.  Wie geht's?\n\n- Gut.\n"


def test_rebuild_needs_one_translation_per_sentence() -> None:
    seg = segment("One. Two.")
    with pytest.raises(DragomanError, match="one translation per sentence"):
        seg.rebuild(["Eins."])


def test_segmented_checks_its_flags() -> None:
    with pytest.raises(DragomanError):
        Segmented(("a", "b"), (True,))


_LAYOUT = st.sampled_from(list(" \t\n\r\u00a0\u2009\u3000\u2028\ufeff.!?…。！？।؟\"'«»()[]「」-*#>1:,;$%@/"))
_WORDS = st.sampled_from(
    ["Mr", "Dr", "U.S", "e.g", "He", "the", "3.14", "x.org", "第一", "यह", "Ab", "ok", "J"]
)
_TEXT = st.lists(st.one_of(_LAYOUT, _WORDS, st.characters()), max_size=60).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), _TEXT))
def test_round_trip_is_identity(text: str) -> None:
    seg = segment(text)
    assert seg.rebuild(seg.sentences) == text
    assert "".join(seg.parts) == text
    for sentence in seg.sentences:
        assert sentence == sentence.strip(" \t\u00a0\u3000\u2009\ufeff")
        assert not any(c in sentence for c in "\n\r\u2028\u2029\x0b\x0c\x85")
        assert any(c.isalnum() for c in sentence)
    for a, b, ta, tb in zip(seg.parts, seg.parts[1:], seg.is_text, seg.is_text[1:], strict=False):
        assert ta or tb, f"two separators not merged: {a!r} {b!r}"


@settings(max_examples=200, deadline=None)
@given(_TEXT)
def test_rebuild_replaces_only_sentences(text: str) -> None:
    seg = segment(text)
    marked = seg.rebuild(["\x00"] * len(seg.sentences))
    assert marked.count("\x00") >= len(seg.sentences)
    separators = [p for p, t in zip(seg.parts, seg.is_text, strict=True) if not t]
    assert marked.replace("\x00", "") == "".join(separators) or "\x00" in text


# --- split_to_limit -------------------------------------------------------------------------------------


def words(text: str) -> int:
    return len(text.split())


def chars(text: str) -> int:
    return len(text)


def test_short_text_is_one_piece() -> None:
    assert split_to_limit("a b c", words, 3) == ["a b c"]
    assert split_to_limit("", words, 3) == []


def test_prefers_semicolons_then_commas_then_spaces() -> None:
    text = "one two three; four five, six seven eight nine"
    pieces = split_to_limit(text, words, 4)
    assert pieces == ["one two three; ", "four five, ", "six seven eight nine"]


def test_prefers_colon_and_dash_over_space() -> None:
    assert split_to_limit("alpha beta: gamma delta", words, 3) == ["alpha beta: ", "gamma delta"]
    assert split_to_limit("alpha beta—gamma delta", words, 2) == ["alpha beta—", "gamma delta"]


def test_numbers_and_urls_are_not_cut_at_their_punctuation() -> None:
    pieces = split_to_limit("pay 1,000.50 at https://x.org/a;b now", words, 2)
    assert pieces == ["pay 1,000.50 ", "at https://x.org/a;b ", "now"]


def test_packs_greedily() -> None:
    text = " ".join(f"w{i}" for i in range(10))
    pieces = split_to_limit(text, words, 3)
    assert [words(p) for p in pieces] == [3, 3, 3, 1]
    assert all(p.endswith(" ") for p in pieces[:-1])


def test_spaceless_script_splits_by_character() -> None:
    text = "这是一个非常长的句子没有任何空格"
    pieces = split_to_limit(text, chars, 5)
    assert "".join(pieces) == text
    assert [len(p) for p in pieces] == [5, 5, 5, 1]


def test_cjk_commas_are_preferred() -> None:
    text = "这是第一部分，这是第二部分"
    assert split_to_limit(text, chars, 8) == ["这是第一部分，", "这是第二部分"]


def test_long_word_is_split_by_characters_keeping_combining_marks() -> None:
    text = "e\u0301" * 6  # six é written with a combining accent
    pieces = split_to_limit(text, chars, 4)
    assert "".join(pieces) == text
    assert all(chars(p) <= 4 and not p.startswith("\u0301") for p in pieces)


def test_limit_too_small() -> None:
    with pytest.raises(InvalidRequest):
        split_to_limit("abc", chars, 0)
    with pytest.raises(LimitExceeded, match="raise it"):
        split_to_limit("abc", lambda s: len(s) + 2, 2)


def test_few_token_counts_for_a_long_sentence() -> None:
    calls = 0

    def counting(text: str) -> int:
        nonlocal calls
        calls += 1
        return words(text)

    text = " ".join(["word"] * 5000)
    pieces = split_to_limit(text, counting, 100)
    assert len(pieces) == 50
    assert calls < 50 * 20


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), _TEXT), st.integers(min_value=1, max_value=12))
def test_split_to_limit_keeps_every_character(text: str, limit: int) -> None:
    pieces = split_to_limit(text, chars, limit)
    assert "".join(pieces) == text
    assert all(0 < len(p) <= limit for p in pieces)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "bb", "ccc ", " ", ", ", "; ", "：", "—", "\t", "長"]), max_size=80))
def test_split_to_limit_with_word_counts(parts: list[str]) -> None:
    text = "".join(parts)

    def cost(piece: str) -> int:
        return len(piece.split()) + piece.count("長")

    pieces = split_to_limit(text, cost, 3)
    assert "".join(pieces) == text
    assert all(cost(p) <= 3 for p in pieces)
