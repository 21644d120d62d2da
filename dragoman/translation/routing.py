"""Routes: which packs, alone or chained, take a text from one language to another.

Every installed pack contributes edges (an Argos pack one, a multilingual pack one per ordered pair, an
Apertium mode one). A route is a path of at most ``MAX_HOPS`` edges. Routes are ranked by fewer hops first,
then by the tier's preference: ``best`` by quality (the weakest hop's, then the sum over hops), then
speed; ``fast`` by speed (the slowest hop's), then quality. Ties break on pack ids so the choice is stable.
Pivoting through English is
what this finds for Argos pairs (fra->eng->spa), but any language may be the pivot.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from dragoman.limits import Tier
from dragoman.translation.types import Hop, Route

MAX_HOPS = 3


def _rank(route: Route, tier: Tier) -> tuple[int, int, int, int, tuple[str, ...]]:
    ids = tuple(h.pack_id for h in route.hops)
    total_quality = sum(h.quality for h in route.hops)
    if tier == "fast":
        return (len(route.hops), -route.speed, -route.quality, -total_quality, ids)
    return (len(route.hops), -route.quality, -total_quality, -route.speed, ids)


def find_routes(edges: Iterable[Hop], source: str, target: str, tier: Tier = "best") -> list[Route]:
    """Every simple route from ``source`` to ``target`` of at most ``MAX_HOPS`` hops, best first.

    Breadth first, pruned: a path is only extended by an edge whose end can still reach ``target`` in the
    hops left (asked of each language at most once per hops left, from the languages one hop away), and no
    deeper level is built once a level found a route. The routes found, and their order (discovery
    order breaks the ranking's exact ties), are those of expanding every path (the test compares both),
    without building the 3-hop paths through a multilingual pack's all-to-all edges.
    """
    if source == target:
        return []
    by_source: dict[str, list[Hop]] = defaultdict(list)
    near: set[str] = set()  # the languages one hop from target
    for edge in edges:
        by_source[edge.source].append(edge)
        if edge.target == target:
            near.add(edge.source)
    memo: dict[tuple[str, int], bool] = {}

    def reaches(node: str, hops: int) -> bool:
        """Whether ``node`` can reach target in at most ``hops`` hops (paths not necessarily simple)."""
        if node == target:
            return True
        if hops <= 1:
            return hops == 1 and node in near
        key = (node, hops)
        if key not in memo:
            memo[key] = node in near or any(reaches(e.target, hops - 1) for e in by_source.get(node, ()))
        return memo[key]

    found: list[Route] = []
    frontier: list[tuple[Hop, ...]] = [
        (e,) for e in by_source.get(source, []) if reaches(e.target, MAX_HOPS - 1)
    ]
    for length in range(1, MAX_HOPS + 1):
        next_frontier: list[tuple[Hop, ...]] = []
        left = MAX_HOPS - length - 1  # hops a path extended now may still take after its new edge
        for path in frontier:
            last = path[-1]
            if last.target == target:
                found.append(Route(path))
                continue
            if found or left < 0:
                continue  # this level already holds the shortest routes: nothing longer is built
            visited = {source} | {h.target for h in path}
            next_frontier.extend(
                path + (edge,)
                for edge in by_source.get(last.target, [])
                if edge.target not in visited and reaches(edge.target, left)
            )
        if found:  # fewer hops always win; longer paths need not be explored
            break
        frontier = next_frontier
    return sorted(found, key=lambda r: _rank(r, tier))


def reachable_pairs(edges: Iterable[Hop]) -> set[tuple[str, str]]:
    """Every (source, target) pair some route connects, for ``languages`` and error messages."""
    by_source: dict[str, set[str]] = defaultdict(set)
    for edge in edges:
        by_source[edge.source].add(edge.target)
    pairs: set[tuple[str, str]] = set()
    for start in list(by_source):
        seen = {start}
        frontier = {start}
        for _depth in range(MAX_HOPS):
            frontier = {t for s in frontier for t in by_source.get(s, ())} - seen
            seen |= frontier
        pairs.update((start, t) for t in seen if t != start)
    return pairs
