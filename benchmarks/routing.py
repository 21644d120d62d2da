"""Route finding over a big multilingual pack graph (issue 17): the pruned :func:`find_routes` against the
exhaustive search it replaced (every path expanded to three hops), on the same pairs, alternated round by
round; the ratio is the median of the rounds' own ratios (the machine is shared: ratios, not times).

The graph: ``--languages`` languages (200) all-to-all through one multilingual pack (39,800 edges) plus the
88 Apertium directions dragoman reaches on Debian (their FLORES codes; the ones outside the pack added as
languages of their own). The pairs timed against the exhaustive search: Apertium-only languages to pack
languages (a pivot through the pack: two hops), two pairs between Apertium-only languages and a direct
pack pair. Both searches must return the same routes in the same order; the run stops if they differ.
Then the pruned search alone over pack languages into Apertium-only ones and an unreachable pair, where
the exhaustive one builds millions of 3-hop paths (arg->afr took it 39 s here).

    .venv/bin/python benchmarks/routing.py            # 5 rounds
    .venv/bin/python benchmarks/routing.py --quick    # 1 round, 40 languages
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import _harness as harness

from dragoman.testing.routing import exhaustive_routes
from dragoman.translation.routing import find_routes
from dragoman.translation.types import Hop, Route

#: 88 Apertium directions as (source, target) FLORES codes: Debian's 46 pairs, both ways where they work.
_APERTIUM_PAIRS = (
    "afr-nld arg-cat bel-rus bre-fra cat-ita cat-srd dan-nob eng-glg eng-cat eng-spa epo-cat epo-eng epo-spa "
    "epo-fra eus-eng eus-spa fra-spa fra-cat fra-frp hrv-eng hrv-mkd hrv-slv ind-zsm isl-eng isl-swe mkd-bul "
    "mkd-eng nno-nob oci-cat oci-spa oci-fra pol-szl por-cat por-glg rus-ukr spa-arg spa-ast spa-cat spa-ita "
    "spa-glg spa-por spa-ron srd-ita swe-dan swe-nob urd-hin"
).split()


def graph(languages: int) -> tuple[list[Hop], list[str], list[str]]:
    """The edges, the pack's languages and the Apertium-only languages."""
    apertium: list[Hop] = []
    codes: set[str] = set()
    for pair in _APERTIUM_PAIRS:
        a, b = (f"{c}_Latn" for c in pair.split("-"))
        codes |= {a, b}
        apertium += [Hop(f"apertium-{pair}", "apertium", a, b, 2, 5)]
        apertium += [Hop(f"apertium-{pair}-r", "apertium", b, a, 2, 5)]
    apertium = apertium[:88]
    common = ["eng_Latn", "spa_Latn", "fra_Latn", "cat_Latn", "por_Latn", "ita_Latn", "rus_Latn", "nob_Latn"]
    pack = common + [f"x{i:03d}_Latn" for i in range(languages - len(common))]
    multi = [Hop("nllb", "multilingual", s, t, 4, 1) for s in pack for t in pack if s != t]
    only = sorted({h.source for h in apertium} - set(pack))
    return apertium + multi, pack, only


def _searches(
    search: Callable[..., list[Route]], edges: list[Hop], pairs: list[tuple[str, str]]
) -> Callable[[], object]:
    def run() -> object:
        return [search(edges, source, target) for source, target in pairs]

    return run


def main(argv: list[str] | None = None) -> int:
    parser = harness.parser(__doc__, rounds=5, quick_rounds=1)
    parser.add_argument(
        "--languages", type=int, default=None, help="the pack's languages (200; 40 with --quick)"
    )
    args = parser.parse_args(argv)
    rounds = harness.rounds_of(args)
    languages = args.languages or (40 if args.quick else 200)
    edges, pack, only = graph(languages)
    pairs = [(a, p) for a in only[:10] for p in pack[-3:]]  # a pivot through the pack: two hops
    pairs += [("arg_Latn", "srd_Latn"), ("ast_Latn", "frp_Latn"), (pack[-1], pack[-2])]
    for source, target in pairs:
        for tier in ("best", "fast"):
            if find_routes(edges, source, target, tier) != exhaustive_routes(edges, source, target, tier):
                print(f"routes differ for {source}->{target} ({tier})", file=sys.stderr)
                return 1
    print(f"{len(edges)} edges ({languages} pack languages all-to-all, 88 Apertium directions)")
    measured = harness.alternate(
        {
            "exhaustive": _searches(exhaustive_routes, edges, pairs),
            "pruned": _searches(find_routes, edges, pairs),
        },
        rounds,
    )
    per_pair = 1e3 / len(pairs)
    speedup = measured.ratio("exhaustive", "pruned")
    print(
        f"find_routes over {len(pairs)} pairs (Apertium-only to pack languages, Apertium to Apertium, "
        "direct): "
        f"exhaustive {measured.spread('exhaustive').median * per_pair:.1f} ms/pair, pruned "
        f"{measured.spread('pruned').median * per_pair:.1f} ms/pair: {speedup.median:.1f}x faster "
        f"(rounds {speedup.low:.1f}-{speedup.high:.1f}x)"
    )
    # Pack languages into Apertium-only ones, and a pair no route joins: the exhaustive search builds every
    # 3-hop path through the pack there (millions of paths, tens of seconds each): only the pruned one runs.
    hard = [(p, a) for p in pack[-3:] for a in only[:10]] + [("arg_Latn", "afr_Latn")]
    alone = harness.alternate({"pruned": _searches(find_routes, edges, hard)}, rounds)
    print(
        f"find_routes over {len(hard)} pairs the exhaustive search takes seconds each on (pack languages to "
        f"Apertium-only ones, one unreachable): pruned {alone.spread('pruned').median * 1e3 / len(hard):.1f} "
        "ms/pair"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
