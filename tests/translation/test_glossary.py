from __future__ import annotations

import logging

import pytest

from dragoman.errors import InvalidRequest, LimitExceeded, UnknownLanguage
from dragoman.translation.glossary import MAX_GLOSSARY_ENTRIES, for_pair, validate_entries
from dragoman.translation.types import GlossaryEntry as E

EN, FR, DE = "eng_Latn", "fra_Latn", "deu_Latn"


def _terms(entries: tuple[E, ...]) -> list[str]:
    return [e.term for e in entries]


# ----- validate_entries ---------------------------------------------------------------------------
def test_validate_rejects_empty_strings() -> None:
    with pytest.raises(InvalidRequest, match=r"glossary\[1\]\.term"):
        validate_entries([E("ok", "ok"), E("", "x")])
    with pytest.raises(InvalidRequest, match=r"glossary\[0\]\.translation"):
        validate_entries([E("term", "   ")])


def test_validate_limit_names_limit_and_count() -> None:
    entries = [E(f"t{i}", f"u{i}") for i in range(MAX_GLOSSARY_ENTRIES + 1)]
    with pytest.raises(LimitExceeded) as err:
        validate_entries(entries)
    assert "200" in err.value.message and "201" in err.value.message
    assert len(validate_entries(entries[:MAX_GLOSSARY_ENTRIES])) == MAX_GLOSSARY_ENTRIES
    assert len(validate_entries(entries, limit=None)) == MAX_GLOSSARY_ENTRIES + 1  # as the engine takes them


def test_validate_duplicates_last_wins_and_codes_normalized() -> None:
    got = validate_entries(
        [
            E("API", "API-1"),
            E("api", "API-2"),  # same term under the case-insensitive rule
            E("API", "API-3", case_sensitive=True),  # another case rule: another entry
            E("Kit", "Kit-1", source="en", target="fr"),
            E("Kit", "Kit-2", source=EN, target=FR),  # same scope once normalized
        ]
    )
    assert [(e.term, e.translation, e.case_sensitive) for e in got] == [
        ("api", "API-2", False),
        ("API", "API-3", True),
        ("Kit", "Kit-2", False),
    ]
    assert (got[2].source, got[2].target) == (EN, FR)
    with pytest.raises(UnknownLanguage):
        validate_entries([E("x", "y", source="not-a-language-at-all")])


# ----- for_pair: what one language pair applies -----------------------------------------------------
def test_for_pair_keeps_scope_and_order() -> None:
    entries = validate_entries(
        [
            E("everywhere", "x"),
            E("cloud", "nuage", source=EN, target=FR),
            E("cloud", "Wolke", source=EN, target=DE),
            E("from-english", "x", source=EN),
            E("into-french", "x", target=FR),
        ]
    )
    assert _terms(for_pair(entries, EN, FR)) == ["everywhere", "cloud", "from-english", "into-french"]
    assert [e.translation for e in for_pair(entries, EN, DE) if e.term == "cloud"] == ["Wolke"]
    assert _terms(for_pair(entries, FR, EN)) == ["everywhere"]
    assert for_pair((), EN, FR) == ()


def test_for_pair_applies_at_most_the_limit_most_specific_first(caplog: pytest.LogCaptureFixture) -> None:
    entries = [E(f"u{i}", "x") for i in range(150)]
    entries += [E(f"s{i}", "y", source=EN) for i in range(40)]
    entries += [E(f"p{i}", "z", source=EN, target=FR) for i in range(30)]
    entries += [E(f"other{i}", "w", source=DE, target=FR) for i in range(500)]  # another pair: no effect
    with caplog.at_level(logging.WARNING, logger="dragoman.translation.glossary"):
        applied = for_pair(entries, EN, FR)
    assert len(applied) == MAX_GLOSSARY_ENTRIES
    assert sum(1 for e in applied if e.target == FR) == 30 and sum(1 for e in applied if e.source == EN) == 70
    assert _terms(applied)[:3] == ["u0", "u1", "u2"]  # kept in their order: the least specific are cut
    assert "220 glossary entries apply to eng_Latn->fra_Latn" in caplog.text
    caplog.clear()
    assert len(for_pair(entries, DE, FR)) == MAX_GLOSSARY_ENTRIES and "650" in caplog.text
    assert len(for_pair(entries, EN, FR, limit=10)) == 10
