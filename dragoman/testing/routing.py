"""The route search as it was before pruning (issue 17), kept as the reference the pruned
:func:`dragoman.translation.routing.find_routes` is checked against (tests) and timed against (benchmarks)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from dragoman.limits import Tier
from dragoman.translation.routing import MAX_HOPS, _rank
from dragoman.translation.types import Hop, Route


def exhaustive_routes(edges: Sequence[Hop], source: str, target: str, tier: Tier = "best") -> list[Route]:
    """Every simple path of up to ``MAX_HOPS`` hops expanded level by level; the shortest found, ranked."""
    if source == target:
        return []
    by_source: dict[str, list[Hop]] = defaultdict(list)
    for edge in edges:
        by_source[edge.source].append(edge)
    found: list[Route] = []
    frontier: list[tuple[Hop, ...]] = [(e,) for e in by_source.get(source, [])]
    for _depth in range(MAX_HOPS):
        next_frontier: list[tuple[Hop, ...]] = []
        for path in frontier:
            last = path[-1]
            if last.target == target:
                found.append(Route(path))
                continue
            visited = {source} | {h.target for h in path}
            next_frontier.extend(
                path + (edge,) for edge in by_source.get(last.target, []) if edge.target not in visited
            )
        if found:
            break
        frontier = next_frontier
    return sorted(found, key=lambda r: _rank(r, tier))
