"""The run mapping shared by DOCX, PPTX and XLSX rich text (:mod:`dragoman.documents._runs`): encoding a
paragraph with tags, decoding translations whose tags came back whole, reordered, lost or mangled."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dragoman.documents import _runs


class ListWriter:
    """A RunWriter over a list of (key, text) slots; rebuilds when allowed, recording the new runs."""

    def __init__(self, pieces: Sequence[_runs.Piece], can_rebuild: bool = True) -> None:
        self.texts = [p.text for p in pieces]
        self.keys = [p.key for p in pieces]
        self.can_rebuild = can_rebuild
        self.rebuilt: list[tuple[object, str]] = []

    def set_text(self, slot: int, text: str) -> None:
        self.texts[slot] = text

    def rebuild(self, slots: Sequence[int], runs: Sequence[tuple[int, str]]) -> bool:
        if not self.can_rebuild:
            return False
        self.rebuilt = [(self.keys[s], t) for s, t in runs]
        return True


def pieces(*spec: tuple[str, str] | None) -> list[_runs.Piece]:
    return [_runs.BARRIER if s is None else _runs.Piece(s[0], s[1]) for s in spec]


def test_encode_merges_same_formatting_and_trims_barriers() -> None:
    ps = pieces(
        None,
        ("n", "The "),
        ("n", "big "),
        ("b", "red"),
        ("b", ""),
        ("n", " house"),
        None,
        None,
        ("i", "  "),
        ("n", "next"),
        None,
    )
    enc = _runs.encode(ps)
    assert enc.text == "The big <1>red</1> house<2/>  next"
    assert enc.source == "The big red house  next" and enc.translatable
    writer = ListWriter(ps)
    _runs.apply(_runs.decode(enc, "La casa <1>roja</1> grande<2/>  siguiente"), writer)
    assert writer.texts == ["", "La casa ", "", "roja", "", " grande", "", "", "", "  siguiente", ""]


def test_literal_tags_in_the_text_are_not_ours() -> None:
    ps = pieces(("n", "Press <1> then "), ("b", "OK"))
    enc = _runs.encode(ps)
    assert enc.text == "Press <1> then <2>OK</2>"
    decoded = _runs.decode(enc, "Pulse <1> y <2>Aceptar</2>")
    assert decoded.exact and decoded.text == "Pulse <1> y Aceptar"


def test_reordered_spans_rebuild_or_stay_on_their_chunks() -> None:
    ps = pieces(("b", "Big"), ("n", " houses"))
    enc = _runs.encode(ps)
    assert enc.text == "<1>Big</1> houses"
    rebuilt = ListWriter(ps)
    _runs.apply(_runs.decode(enc, "Casas <1>grandes</1>"), rebuilt)
    assert rebuilt.rebuilt == [("n", "Casas "), ("b", "grandes")]
    stuck = ListWriter(ps, can_rebuild=False)
    _runs.apply(_runs.decode(enc, "Casas <1>grandes</1>"), stuck)
    assert stuck.texts == ["grandes", "Casas "]  # each text keeps its formatting, order given up


def test_broken_barriers_spread_the_text() -> None:
    ps = pieces(("n", "one two"), None, ("n", "three four"))
    enc = _runs.encode(ps)
    decoded = _runs.decode(enc, "uno dos tres cuatro")
    assert not decoded.exact
    writer = ListWriter(ps)
    _runs.apply(decoded, writer)
    assert writer.texts[0] + writer.texts[2] == "uno dos tres cuatro"
    assert writer.texts[0] and writer.texts[2]


def test_nothing_to_translate() -> None:
    assert not _runs.encode(pieces(None, ("n", " 42 "))).translatable
    assert _runs.encode(pieces(None, None)).regions == ()


piece_lists = st.lists(
    st.one_of(
        st.none(),
        st.tuples(st.sampled_from("nbi"), st.text(alphabet="ab <>/1 \t", max_size=6)),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(piece_lists)
def test_identity_translation_puts_every_text_back(spec: list[tuple[str, str] | None]) -> None:
    ps = pieces(*spec)
    enc = _runs.encode(ps)
    writer = ListWriter(ps)
    decoded = _runs.decode(enc, enc.text)
    assert decoded.exact
    _runs.apply(decoded, writer)
    assert writer.rebuilt == []  # nothing moved: everything in place

    # per region (between barriers), the text reads the same; whitespace-only runs in another
    # formatting hand their blanks to a neighbour
    def regions(texts: list[str]) -> list[str]:
        out = [""]
        for p, text in zip(ps, texts, strict=True):
            if p.is_barrier:
                out.append("")
            else:
                out[-1] += text
        return [r for r in out if r]

    assert regions(writer.texts) == regions([p.text for p in ps])
    for key in "nbi":  # every formatting keeps exactly its own words
        mine = [i for i, p in enumerate(ps) if p.key == key]
        assert "".join("".join(writer.texts[i].split()) for i in mine) == "".join(
            "".join(ps[i].text.split()) for i in mine
        )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.tuples(st.sampled_from("nbi"), st.text(alphabet="abc \t", max_size=6)))),
    st.randoms(use_true_random=False),
)
def test_mangled_tags_never_lose_text(spec: list[tuple[str, str] | None], rnd: Any) -> None:
    ps = pieces(*spec)
    enc = _runs.encode(ps)
    tokens = re.split(r"(</?\d+/?>)", enc.text)
    ours = [i for i, t in enumerate(tokens) if re.fullmatch(r"</?\d+/?>", t)]
    for i in ours:  # drop, keep or move each tag
        choice = rnd.random()
        if choice < 0.3:
            tokens[i] = ""
        elif choice < 0.5:
            j = rnd.randrange(len(tokens))
            tokens[i], tokens[j] = tokens[j], tokens[i]
    mangled = "".join(tokens)
    decoded = _runs.decode(enc, mangled)
    writer = ListWriter(ps, can_rebuild=False)
    _runs.apply(decoded, writer)

    def letters(text: str) -> list[str]:
        return sorted("".join(text.split()))

    assert letters("".join(writer.texts)) == letters(re.sub(r"</?\d+/?>", "", mangled))  # nothing lost
