from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dragoman.limits import Tier
from dragoman.testing.routing import exhaustive_routes
from dragoman.translation.routing import MAX_HOPS, find_routes, reachable_pairs
from dragoman.translation.types import Hop


def hop(pack: str, src: str, tgt: str, quality: int = 3, speed: int = 3, kind: str = "argos") -> Hop:
    return Hop(pack, kind, src, tgt, quality, speed)  # type: ignore[arg-type]


APERTIUM_FR_ES = hop("apertium-fra-spa", "fra_Latn", "spa_Latn", 2, 5, "apertium")
ARGOS_ES_EN = hop("argos-es-en", "spa_Latn", "eng_Latn", 3, 3)
ARGOS_FR_EN = hop("argos-fr-en", "fra_Latn", "eng_Latn", 3, 3)
ARGOS_EN_DE = hop("argos-en-de", "eng_Latn", "deu_Latn", 3, 3)
NLLB = [
    hop("nllb", s, t, 4, 1, "multilingual")
    for s in ("fra_Latn", "deu_Latn")
    for t in ("fra_Latn", "deu_Latn")
    if s != t
]


def test_direct_route_preferred_over_pivot() -> None:
    routes = find_routes([ARGOS_FR_EN, ARGOS_EN_DE, *NLLB], "fra_Latn", "deu_Latn")
    assert [r.hops for r in routes] == [(NLLB[0],)]


def test_pivot_through_english_when_no_direct_pair() -> None:
    routes = find_routes([ARGOS_FR_EN, ARGOS_EN_DE, ARGOS_ES_EN], "fra_Latn", "deu_Latn")
    assert len(routes) == 1
    assert [h.pack_id for h in routes[0].hops] == ["argos-fr-en", "argos-en-de"]
    assert routes[0].describe() == ["argos-fr-en:fra_Latn->eng_Latn", "argos-en-de:eng_Latn->deu_Latn"]


def test_chain_mixes_kinds() -> None:
    # fra->spa by Apertium, then spa->eng by a CTranslate2 pack: the example of the issue.
    routes = find_routes([APERTIUM_FR_ES, ARGOS_ES_EN], "fra_Latn", "eng_Latn")
    assert [h.kind for h in routes[0].hops] == ["apertium", "argos"]


def test_same_hop_count_best_prefers_quality_fast_prefers_speed() -> None:
    slow_good = hop("nllb", "eng_Latn", "spa_Latn", 4, 1, "multilingual")
    fast_rough = hop("apertium-eng-spa", "eng_Latn", "spa_Latn", 2, 5, "apertium")
    assert find_routes([fast_rough, slow_good], "eng_Latn", "spa_Latn", "best")[0].hops == (slow_good,)
    assert find_routes([slow_good, fast_rough], "eng_Latn", "spa_Latn", "fast")[0].hops == (fast_rough,)


def test_route_quality_is_weakest_hop() -> None:
    routes = find_routes([APERTIUM_FR_ES, ARGOS_ES_EN], "fra_Latn", "eng_Latn")
    assert routes[0].quality == 2 and routes[0].speed == 3


def test_no_route_and_no_cycles() -> None:
    assert find_routes([ARGOS_FR_EN], "eng_Latn", "fra_Latn") == []
    assert find_routes([ARGOS_FR_EN], "fra_Latn", "fra_Latn") == []
    loop = [hop("a", "x_Latn", "y_Latn"), hop("b", "y_Latn", "x_Latn"), hop("c", "y_Latn", "z_Latn")]
    routes = find_routes(loop, "x_Latn", "z_Latn")
    assert [[h.pack_id for h in r.hops] for r in routes] == [["a", "c"]]


@pytest.mark.parametrize("hops", [MAX_HOPS, MAX_HOPS + 1])
def test_hop_limit(hops: int) -> None:
    chain = [hop(f"p{i}", f"l{i}_Latn", f"l{i + 1}_Latn") for i in range(hops)]
    routes = find_routes(chain, "l0_Latn", f"l{hops}_Latn")
    assert bool(routes) == (hops <= MAX_HOPS)


def test_reachable_pairs_include_pivots() -> None:
    pairs = reachable_pairs([ARGOS_FR_EN, ARGOS_EN_DE])
    assert pairs == {("fra_Latn", "eng_Latn"), ("eng_Latn", "deu_Latn"), ("fra_Latn", "deu_Latn")}


def test_equal_weakest_hop_prefers_the_stronger_chain() -> None:
    apertium_es_en = hop("apertium-spa-eng", "spa_Latn", "eng_Latn", 2, 5, "apertium")
    routes = find_routes([APERTIUM_FR_ES, apertium_es_en, ARGOS_ES_EN], "fra_Latn", "eng_Latn", "best")
    assert [h.pack_id for h in routes[0].hops] == ["apertium-fra-spa", "argos-es-en"]
    fast = find_routes([APERTIUM_FR_ES, apertium_es_en, ARGOS_ES_EN], "fra_Latn", "eng_Latn", "fast")
    assert [h.pack_id for h in fast[0].hops] == ["apertium-fra-spa", "apertium-spa-eng"]


_LANGS = [f"l{i}_Latn" for i in range(7)]
_random_hops = st.builds(
    hop,
    st.sampled_from(["p0", "p1", "p2", "multi"]),  # repeated pack ids: ties broken by discovery order
    st.sampled_from(_LANGS),
    st.sampled_from(_LANGS),  # self-loops included
    st.integers(1, 3),
    st.integers(1, 3),
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(_random_hops, max_size=40),
    st.sampled_from(_LANGS),
    st.sampled_from(_LANGS),
    st.sampled_from(["best", "fast"]),
)
def test_pruned_routes_equal_exhaustive_search(
    edges: list[Hop], source: str, target: str, tier: Tier
) -> None:
    assert find_routes(edges, source, target, tier) == exhaustive_routes(edges, source, target, tier)


def test_pruned_routes_equal_exhaustive_on_a_multilingual_pack() -> None:
    langs = [f"m{i}_Latn" for i in range(30)]
    multi = [hop("multi", s, t, 4, 1, "multilingual") for s in langs for t in langs if s != t]
    chain = [hop("ap-a", "a_Latn", "m0_Latn", 2, 5), hop("ap-b", "m1_Latn", "b_Latn", 2, 5)]
    extra = [hop("ap-c", "a_Latn", "c_Latn"), hop("ap-d", "c_Latn", "m3_Latn")]
    edges = chain + multi + extra
    for source, target in [("a_Latn", "b_Latn"), ("a_Latn", "m5_Latn"), ("m2_Latn", "b_Latn")]:
        for tier in ("best", "fast"):
            routes = find_routes(edges, source, target, tier)
            assert routes and routes == exhaustive_routes(edges, source, target, tier)
