from __future__ import annotations

import pytest

from dragoman.languages.types import Detection
from dragoman.translation.guards import check
from dragoman.translation.types import Protected

SOURCE = ("The meeting starts at 10 and ends at 12 with 3 speakers.",)


@pytest.mark.parametrize(
    ("pieces", "output", "expected"),
    [
        (SOURCE, "La reunión empieza a las 10 y termina a las 12 con 3 ponentes.", []),
        (SOURCE, "", ["empty"]),
        (SOURCE, "   ", ["empty"]),
        (SOURCE, SOURCE[0], ["untranslated"]),
        (SOURCE, "La reunión empieza a las 10 y termina a las 12.", ["numbers_lost"]),
        (SOURCE, "10 12 3.", ["length_ratio"]),
        (SOURCE, "La reunión " + "muy " * 60 + "10 12 3", ["length_ratio", "repetition"]),
        (("Hello ", Protected("{name}", "{name}"), ", welcome."), "Hola, bienvenido.", ["placeholders_lost"]),
        (("Hello ", Protected("{name}", "{name}"), ", welcome."), "Hola {name}, bienvenido.", []),
        (
            ("Use the ", Protected("Widget", "Artilugio", "glossary"), " daily."),
            "Usa el Widget a diario.",
            ["placeholders_lost"],
        ),
        (("OK",), "OK", []),  # nothing that needed translating
        (("12345",), "12345", []),
        (("   ",), "", []),
    ],
)
def test_guards(pieces: tuple[object, ...], output: str, expected: list[str]) -> None:
    assert check(pieces, output, target="spa_Latn") == expected  # type: ignore[arg-type]


def test_repetition_in_source_is_not_runaway() -> None:
    text = "no no no no no, I said no."
    assert "repetition" not in check((text,), "no no no no no, dije que no.", target="spa_Latn")


def _detector(flores: str | None, confidence: float):  # type: ignore[no-untyped-def]
    return lambda text: Detection(flores, None, None, confidence, flores)


def test_wrong_language_needs_confident_detection() -> None:
    source = ("This is a fairly long sentence about the weather today.",)
    output = "Ceci est une phrase assez longue sur le temps qu'il fait."
    assert check(source, output, target="spa_Latn", detect=_detector("fra_Latn", 0.97)) == ["wrong_language"]
    assert check(source, output, target="spa_Latn", detect=_detector("fra_Latn", 0.5)) == []
    assert check(source, output, target="spa_Latn", detect=_detector(None, 0.99)) == []
    assert check(source, output, target="fra_Latn", detect=_detector("fra_Latn", 0.99)) == []
