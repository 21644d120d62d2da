from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dragoman.translation.protection import find_numbers, protect, restore_check
from dragoman.translation.types import GlossaryEntry, Pieces, Protected


def sources(pieces: Pieces) -> str:
    return "".join(p.source if isinstance(p, Protected) else p for p in pieces)


def spans(pieces: Pieces, kind: str | None = None) -> list[str]:
    return [p.source for p in pieces if isinstance(p, Protected) and (kind is None or p.kind == kind)]


def outputs(pieces: Pieces) -> list[str]:
    return [p.output for p in pieces if isinstance(p, Protected)]


# --- placeholders ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("Hello {name}, you have {0} new messages.", ["{name}", "{0}"]),
        ("Dear {{ var }} and {{x}}!", ["{{ var }}", "{{x}}"]),
        ("Path is ${var}/bin and $HOME too.", ["${var}", "$HOME"]),
        ("Use %s and %d here.", ["%s", "%d"]),
        ("Positional %1$s and %2$d.", ["%1$s", "%2$d"]),
        ("Named %(name)s has %(count)d items.", ["%(name)s", "%(count)d"]),
        ("Price %.2f or %-10s or %ld or %@.", ["%.2f", "%-10s", "%ld", "%@"]),
        ("A literal %% sign.", ["%%"]),
        ("Qt says %1 of %2 files.", ["%1", "%2"]),
        ("Press <b>Save</b> now.", ["<b>", "</b>"]),
        ("Line<br/>break and <br /> again.", ["<br/>", "<br />"]),
        (
            'Click <a href="https://x.org/?a=1&b=2" class="x">here</a>.',
            ['<a href="https://x.org/?a=1&b=2" class="x">', "</a>"],
        ),
        ("Tom &amp; Jerry &#169; &#x1F600; &nbsp;end", ["&amp;", "&#169;", "&#x1F600;", "&nbsp;"]),
        ("A <!-- note --> comment.", ["<!-- note -->"]),
        ("Numbered <0>tags</0> work.", ["<0>", "</0>"]),
        ("Visit https://example.com/a.b?x=1 today.", ["https://example.com/a.b?x=1"]),
        ("Visit https://x.org/a.b. Then stop.", ["https://x.org/a.b"]),
        (
            "Get it from ftp://files.example.org/pub, or www.example.com!",
            ["ftp://files.example.org/pub", "www.example.com"],
        ),
        ("(see https://en.wikipedia.org/wiki/Foo_(bar)).", ["https://en.wikipedia.org/wiki/Foo_(bar)"]),
        ("(see https://x.org/page).", ["https://x.org/page"]),
        ("E-mail a.b@c.com. Thanks!", ["a.b@c.com"]),
        (
            "Write to a.b@c.co.uk or mailto:x+y@mail.example.org now.",
            ["a.b@c.co.uk", "mailto:x+y@mail.example.org"],
        ),
        ("Run `x = 1` then ``a `b` c``.", ["`x = 1`", "``a `b` c``"]),
        (
            "You have {count, plural, one {# item} other {# items}} left.",
            ["{count, plural, one {# item} other {# items}}"],
        ),
        ("{% if user %}Hi{% endif %}", ["{% if user %}", "{% endif %}"]),
        ("Ruby #{name} interpolation.", ["#{name}"]),
        ("Format {0:>10} and {} and {user.name!r}.", ["{0:>10}", "{}", "{user.name!r}"]),
        ("A set { a few words } holds {item}.", ["{item}"]),
    ],
)
def test_placeholders(sentence: str, expected: list[str]) -> None:
    pieces = protect(sentence)
    assert sources(pieces) == sentence
    assert spans(pieces, "placeholder") == expected
    assert all(p.output == p.source for p in pieces if isinstance(p, Protected))


@pytest.mark.parametrize(
    "sentence",
    [
        "It is 50% cheaper.",
        "I am 100 % sure.",
        "Save 50%off today.",
        "Call me at :name or :id.",
        "Math: a < b and c > 1.",
        "An unclosed { brace and } later on\nanother line {",
        "Cost is $5 and 3 < 4.",
        "A lone & ampersand; and AT&T.",
        "Plain sentence with nothing special.",
        "Sentences.Joined without a space, and e.g. or i.e. stay text.",
    ],
)
def test_not_placeholders(sentence: str) -> None:
    assert protect(sentence) == (sentence,)


def test_empty_sentence() -> None:
    assert protect("") == ()


def test_code_wins_over_what_is_inside_it() -> None:
    pieces = protect("Run `curl https://x.org/{id}` now.")
    assert spans(pieces) == ["`curl https://x.org/{id}`"]


# --- glossary -------------------------------------------------------------------------------------------


def entry(term: str, translation: str, case_sensitive: bool = False) -> GlossaryEntry:
    return GlossaryEntry(term=term, translation=translation, case_sensitive=case_sensitive)


def test_glossary_term_is_replaced_by_its_translation() -> None:
    pieces = protect("The cat sleeps.", [entry("cat", "Katze")])
    assert pieces == ("The ", Protected("cat", "Katze", "glossary"), " sleeps.")


@pytest.mark.parametrize(
    ("sentence", "found"),
    [
        ("The cat can concatenate cats.", ["cat"]),
        ("CAT and Cat and cat.", ["CAT", "Cat", "cat"]),
        ("bobcat, cat_x, cat9, (cat)", ["cat"]),
        ("Über-cat! cat's toy", ["cat", "cat"]),
    ],
)
def test_glossary_word_boundaries(sentence: str, found: list[str]) -> None:
    assert spans(protect(sentence, [entry("cat", "Katze")]), "glossary") == found


def test_glossary_unicode_word_boundaries() -> None:
    glossary = [entry("über", "over"), entry("café", "coffee")]
    pieces = protect("überall über cafés café", glossary)
    assert spans(pieces, "glossary") == ["über", "café"]


def test_glossary_case_sensitive() -> None:
    glossary = [entry("Python", "Python", case_sensitive=True)]
    assert spans(protect("python and Python and PYTHON", glossary)) == ["Python"]


def test_glossary_case_insensitive_beyond_ascii() -> None:
    glossary = [entry("straße", "street"), entry("İstanbul", "Istanbul"), entry("Ωμέγα", "Omega")]
    pieces = protect("STRAßE in istanbul, ωμέγα", glossary)
    assert spans(pieces) == ["STRAßE", "istanbul", "ωμέγα"]


def test_glossary_longest_term_wins() -> None:
    glossary = [entry("New York", "NY"), entry("New York City", "NYC"), entry("York", "Y")]
    pieces = protect("I love New York City and New York and York.", glossary)
    assert [(p.source, p.output) for p in pieces if isinstance(p, Protected)] == [
        ("New York City", "NYC"),
        ("New York", "NY"),
        ("York", "Y"),
    ]


def test_glossary_overlap_keeps_the_longer_match_then_the_leftmost() -> None:
    glossary = [entry("machine learning", "ML"), entry("learning rate", "LR")]
    assert outputs(protect("machine learning rate", glossary)) == ["ML"]
    glossary = [entry("ab cd", "1"), entry("cd ef", "2")]
    assert outputs(protect("ab cd ef", glossary)) == ["1"]


def test_glossary_term_matches_across_other_whitespace() -> None:
    pieces = protect("in New\u00a0York  City", [entry("New York City", "NYC")])
    assert spans(pieces) == ["New\u00a0York  City"]


def test_glossary_cjk_is_a_substring_match() -> None:
    glossary = [entry("東京", "Tokyo"), entry("Python", "Python"), entry("서울", "Seoul")]
    pieces = protect("我住在東京都，喜欢Python语言。서울에서", glossary)
    assert spans(pieces) == ["東京", "Python", "서울"]


def test_glossary_symbols_at_term_edges() -> None:
    glossary = [entry("C++", "C++"), entry(".NET", ".NET")]
    assert spans(protect("I use C++ and .NET, not ABC++.", glossary)) == ["C++", ".NET"]


def test_placeholders_take_precedence_over_glossary() -> None:
    glossary = [entry("cat", "Katze"), entry("x.org", "XX"), entry("name", "Name")]
    pieces = protect("See https://x.org/cat and {name} about the cat at x.org", glossary)
    assert [(p.source, p.kind) for p in pieces if isinstance(p, Protected)] == [
        ("https://x.org/cat", "placeholder"),
        ("{name}", "placeholder"),
        ("cat", "glossary"),
        ("x.org", "glossary"),
    ]


def test_glossary_ignores_empty_terms() -> None:
    assert protect("a b", [entry("   ", "x"), entry("", "y")]) == ("a b",)


# --- round trip -----------------------------------------------------------------------------------------

_ALPHABET = st.sampled_from(list("abc AB{}%$<>/&;`@.:#()'\"=_-1s d\n\u00a0東京"))
_CHUNKS = st.sampled_from(
    [
        "{name}",
        "%s",
        "%(x)d",
        "<b>",
        "</b>",
        "&amp;",
        "https://x.org/a.b",
        "a@b.co",
        "`c`",
        "cat",
        "New York",
        "東京",
    ]
)
_SENTENCE = st.lists(st.one_of(_ALPHABET, _CHUNKS, st.characters()), max_size=40).map("".join)
_TERMS = st.lists(
    st.builds(
        GlossaryEntry,
        term=st.one_of(
            st.sampled_from(["cat", "New York", "York", "東京", "a", "b.c", "%s"]), st.text(max_size=4)
        ),
        translation=st.text(max_size=5),
        case_sensitive=st.booleans(),
    ),
    max_size=5,
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), _SENTENCE), _TERMS)
def test_protect_round_trip(sentence: str, glossary: list[GlossaryEntry]) -> None:
    pieces = protect(sentence, glossary)
    assert sources(pieces) == sentence
    assert all(p != "" for p in pieces)
    for a, b in zip(pieces, pieces[1:], strict=False):
        assert not (isinstance(a, str) and isinstance(b, str))
    for p in pieces:
        if isinstance(p, Protected):
            assert p.source
            if p.kind == "placeholder":
                assert p.output == p.source


# --- restore_check --------------------------------------------------------------------------------------


def test_restore_check_names_missing_outputs() -> None:
    pieces = protect("Hi {name}, the cat is at https://x.org.", [entry("cat", "Katze")])
    assert restore_check(pieces, "Hallo {name}, die Katze ist bei https://x.org.") == []
    assert restore_check(pieces, "Hallo {Name}, die Katze ist bei https://x.org.") == ["{name}"]
    assert restore_check(pieces, "Hallo, die Katz.") == ["{name}", "Katze", "https://x.org"]


def test_restore_check_counts_repeats() -> None:
    pieces = protect("%s and %s")
    assert restore_check(pieces, "%s und %s") == []
    assert restore_check(pieces, "%s und") == ["%s"]


# --- numbers --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("1,000.5", "1000.5"),
        ("1,000.5", "1.000,5"),
        ("1\u202f000,5", "1000.5"),  # narrow no-break space grouping
        ("1\u00a0000\u00a0000", "1000000"),
        ("1'000'000", "1000000"),
        ("3.50", "3,5"),
        ("costs 1,000", "kostet 1.000"),
        ("٣", "3"),
        ("١٬٠٠٠٫٥", "1,000.5"),
        ("۱۲۳", "123"),  # Persian digits
        ("१२३", "123"),  # Devanagari digits
        ("１２３", "123"),  # full-width digits
        ("version 2.0.1", "Version 2.0.1"),
        ("1,2,3", "1, 2, 3"),
        ("It costs $3.50.", "Es kostet 3,50 $."),
    ],
)
def test_numbers_compare_equal(a: str, b: str) -> None:
    assert find_numbers(a) == find_numbers(b)
    assert find_numbers(a)


@pytest.mark.parametrize(
    ("a", "b"),
    [("1000", "100"), ("3.14", "3.15"), ("2.0.1", "2.0.2"), ("12", "1 2"), ("0.5", "5")],
)
def test_numbers_differ(a: str, b: str) -> None:
    assert find_numbers(a) != find_numbers(b)


def test_find_numbers_lists_in_order() -> None:
    assert find_numbers("At 3.30 p.m. on day 12 of 2024, 1,000.50 people paid 7.") == [
        "3.3",
        "12",
        "2024",
        "1000.5",
        "7",
    ]
    assert find_numbers("no digits here") == []
