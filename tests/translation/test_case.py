"""No forced capital at the start of a translation whose source starts in lower case (issue 11, item 3)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_backend_support import capitalise, fake_engine

from dragoman.translation.case import match_first_case
from dragoman.translation.engine import Engine
from dragoman.translation.protection import protect
from dragoman.translation.types import GlossaryEntry, TranslateOptions


@pytest.mark.parametrize(
    ("source", "translation", "target", "expected"),
    [
        # the source starts in lower case: the forced capital goes
        ("and then we left.", "Y luego nos fuimos.", "spa_Latn", "y luego nos fuimos."),
        ("%(num)d year", "%(num)d Año", "spa_Latn", "%(num)d año"),
        ("{count} files left", "{count} Archivos restantes", "spa_Latn", "{count} archivos restantes"),
        ("<b>hello</b> there", "<b>Hola</b> allí", "spa_Latn", "<b>hola</b> allí"),
        ("«quoted» word", "«Citado» palabra", "fra_Latn", "«citado» palabra"),
        ("3 apples", "3 Manzanas", "spa_Latn", "3 manzanas"),
        ("ok then", "Ok dann", "deu_Latn", "ok dann"),  # German: the source's own first word
        ("istanbul is big", "Istanbul büyük", "tur_Latn", "ıstanbul büyük"),
        ("éclair", "Éclair", "fra_Latn", "éclair"),
        # left alone
        ("And then we left.", "Y luego nos fuimos.", "spa_Latn", "Y luego nos fuimos."),
        ("and NASA said", "NASA dijo", "spa_Latn", "NASA dijo"),
        ("and the Mac", "McDonald y", "spa_Latn", "McDonald y"),
        ("je pense", "I think", "eng_Latn", "I think"),
        ("%(num)d year", "%(num)d Jahr", "deu_Latn", "%(num)d Jahr"),  # a German noun keeps its capital
        ("and a house", "Und ein Haus", "deu_Latn", "Und ein Haus"),  # German: not the source's word
        ("setFillColor sets the colour", "La función setFillColor", "spa_Latn", "La función setFillColor"),
        ("hello", "你好", "zho_Hans", "你好"),
        ("你好", "Hello", "eng_Latn", "Hello"),
        ("123", "Uno", "spa_Latn", "Uno"),
        ("", "", "spa_Latn", ""),
    ],
)
def test_match_first_case(source: str, translation: str, target: str, expected: str) -> None:
    assert match_first_case(protect(source), translation, target) == expected


def test_a_glossary_output_decides_its_own_case() -> None:
    pieces = protect("cat food", [GlossaryEntry("cat", "Gato")])
    assert match_first_case(pieces, "Gato Comida", "spa_Latn") == "Gato Comida"
    pieces = protect("Cat food", [GlossaryEntry("cat", "gato")])  # the term as written is upper case
    assert match_first_case(pieces, "La comida del gato", "spa_Latn") == "La comida del gato"
    pieces = protect("the cat", [GlossaryEntry("cat", "Gato")])
    assert match_first_case(pieces, "El Gato", "spa_Latn") == "el Gato"


# --- the engine, with a backend that capitalises every segment as models do -----------------------------


@pytest.fixture
def capitalising_engine(packs_dir: Path, tiny_argos_pack: Path) -> Iterator[Engine]:
    with fake_engine(packs_dir, tiny_argos_pack, capitalise) as engine:
        yield engine


def test_engine_keeps_a_lower_case_start(capitalising_engine: Engine) -> None:
    texts = [
        "%(num)d year",
        "%(num)d years ago",
        "and then we went home.",
        "continues here. And a new sentence.",
        "Starts with a capital.",
        "{name} was here",
        "NASA",
    ]
    results = capitalising_engine.translate_batch(texts, TranslateOptions("es", source="en"))
    assert [r.translation for r in results] == [
        "%(num)d year",
        "%(num)d years ago",
        "and then we went home.",
        "continues here. And a new sentence.",
        "Starts with a capital.",
        "{name} was here",
        "NASA",
    ]


def test_engine_without_the_step_would_capitalise(capitalising_engine: Engine) -> None:
    """The fake backend does capitalise: the test above proves the engine's step, not the fake."""
    out = capitalise([protect("%(num)d year"), protect("and then")], "eng_Latn", "spa_Latn")
    assert out.texts == ("%(num)d Year", "And then")
