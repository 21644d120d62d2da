"""The MCP tools over routes and packs (issue 17): ``list_pairs``, ``packs_list`` and ``packs_install``.

``list_pairs`` answers which language pairs this device translates and how: the best route of each pair
(direct, or through pivot languages), with the packs and engines (Argos, multilingual CTranslate2, Apertium)
of each hop, ranked as the engine ranks them for the tier asked. ``packs_list`` lists the installed packs
and the broken pack folders. ``packs_install`` installs a pack the way ``dragoman packs install`` does (the
same function: an Argos index name such as ``en:es``, an http(s) URL, ``hf:OWNER/REPO[@REVISION]``, or an
archive or folder inside the allowed directories), with the same integrity checks and atomic install. It
reaches the network, so it is annotated open-world and refused (``install_not_allowed``) unless the user
allowed installs in the server's configuration (``DRAGOMAN_MCP_ALLOW_INSTALLS=1``).
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from mcp_types import CallToolResult
from pydantic import BaseModel, Field

from dragoman.errors import DragomanError, InstallNotAllowed, InvalidRequest
from dragoman.limits import MAX_LIST_PAIRS, Provenance
from dragoman.limits import Tier as TierName
from dragoman.server import paths
from dragoman.server.mcp._models import Source, Tier
from dragoman.server.mcp._runtime import (
    Ctx,
    ServerState,
    answer,
    job_context,
    run_engine,
    state_of,
    tool_error,
)
from dragoman.server.mcp._subtitles import ClientRoots, _allowed, _run

if TYPE_CHECKING:
    from dragoman.translation.engine import Engine
    from dragoman.translation.types import Hop, Route

_PROVENANCE = Field(description="Where the work ran: 'on-device' for this server (nothing left the machine).")
#: Routes of one pair answered besides the best, when both source and target are given.
MAX_ALTERNATIVES = 10
#: The variable that lets packs_install run (read into ``settings.local.mcp_allow_installs``).
ALLOW_VARIABLE = "DRAGOMAN_MCP_ALLOW_INSTALLS"


class HopRow(BaseModel):
    pack: str = Field(description="the pack (or Apertium pair) translating this hop")
    engine: str = Field(description="its engine: 'argos', 'multilingual' (CTranslate2) or 'apertium'")
    source: str = Field(description="FLORES-200 code")
    target: str = Field(description="FLORES-200 code")


class PairRow(BaseModel):
    source: str = Field(description="FLORES-200 code")
    target: str = Field(description="FLORES-200 code")
    direct: bool = Field(description="true when one pack translates the pair; false through pivot languages")
    hops: int
    engines: list[str] = Field(description="the engines of the best route, in hop order, without repeats")
    route: list[HopRow] = Field(description="the best route for the tier asked, as the engine takes it")
    alternatives: list[list[HopRow]] = Field(
        default_factory=list,
        description="other routes of the same length, best first (only when source and target are given)",
    )


class PairsOutput(BaseModel):
    pairs: list[PairRow]
    count: int = Field(description="pairs answered")
    total: int = Field(description="pairs the installed packs reach that match the filters")
    direct: int = Field(description="how many of total one pack translates")
    pivot: int = Field(description="how many of total go through pivot languages")
    truncated: bool = Field(
        description="true when total is over the pairs answered; narrow with source/target"
    )
    tier: str
    provenance: Provenance = _PROVENANCE


class PackRow(BaseModel):
    id: str
    kind: str = Field(description="'argos', 'multilingual' or 'apertium'")
    languages: list[str] = Field(description="FLORES-200 codes")
    pairs: int = Field(description="ordered language pairs the pack translates")
    path: str
    size_bytes: int
    version: str
    license: str
    quality: int
    speed: int
    loaded: bool
    extra: dict[str, str] = Field(default_factory=dict)


class BrokenPackRow(BaseModel):
    path: str
    error: str


class PacksOutput(BaseModel):
    packs: list[PackRow]
    broken: list[BrokenPackRow] = Field(description="pack folders that cannot be used, with the reason")
    count: int
    packs_dir: str
    installs_allowed: bool = Field(description=f"whether packs_install may run ({ALLOW_VARIABLE}=1)")
    provenance: Provenance = _PROVENANCE


class InstallOutput(BaseModel):
    id: str = Field(description="the installed pack's id")
    kind: str
    languages: list[str]
    version: str
    license: str
    path: str
    source: str = Field(description="what was installed from, as given")
    replaced: bool = Field(description="true when an installed pack of the same id was replaced")
    seconds: float
    provenance: Provenance = _PROVENANCE


# ----- list_pairs ---------------------------------------------------------------------------------------
def _hops(route: Route) -> list[HopRow]:
    return [HopRow(pack=h.pack_id, engine=h.kind, source=h.source, target=h.target) for h in route.hops]


def _row(routes: tuple[Route, ...] | list[Route], alternatives: bool) -> PairRow:
    best = routes[0]
    first, last = best.hops[0], best.hops[-1]
    return PairRow(
        source=first.source,
        target=last.target,
        direct=len(best.hops) == 1,
        hops=len(best.hops),
        engines=list(dict.fromkeys(h.kind for h in best.hops)),
        route=_hops(best),
        alternatives=[_hops(r) for r in routes[1 : 1 + MAX_ALTERNATIVES]] if alternatives else [],
    )


class _Graph:
    """The installed packs' edges, indexed once per call, and for a pair the edges its shortest routes may
    use: :func:`find_routes` over those alone gives the very routes (and order) it gives over all edges,
    since they hold every route of the shortest length and none shorter. Over a multilingual pack's 40,000
    edges that is what keeps a pivot pair cheap (the whole graph costs a search 0.1 s)."""

    def __init__(self, edges: list[Hop]) -> None:
        self.pairs: dict[tuple[str, str], list[Hop]] = defaultdict(list)
        self.out: dict[str, list[Hop]] = defaultdict(list)
        self.into: dict[str, list[Hop]] = defaultdict(list)
        for edge in edges:
            self.pairs[(edge.source, edge.target)].append(edge)
            self.out[edge.source].append(edge)
            self.into[edge.target].append(edge)

    def shortest_edges(self, source: str, target: str) -> list[Hop]:
        """The edges of every shortest route from ``source`` to ``target`` of at most three hops (empty
        when there is none that short)."""
        direct = self.pairs.get((source, target))
        if direct:
            return direct
        ends = {source, target}
        first = {e.target for e in self.out.get(source, ())} - ends
        last = {e.source for e in self.into.get(target, ())} - ends
        mids = first & last
        if mids:
            return [e for e in self.out[source] if e.target in mids] + [
                e for e in self.into[target] if e.source in mids
            ]
        middle = [e for a in first for e in self.out.get(a, ()) if e.target in last]
        if not middle:
            return []
        starts = {e.source for e in middle}
        stops = {e.target for e in middle}
        return (
            [e for e in self.out[source] if e.target in starts]
            + middle
            + [e for e in self.into[target] if e.source in stops]
        )


def pairs_of(
    engine: Engine, source: str | None, target: str | None, tier: TierName, limit: int = MAX_LIST_PAIRS
) -> PairsOutput:
    """The pairs the installed packs reach (filtered by ``source``/``target``, FLORES-200), each with its
    best route for ``tier`` as the engine ranks routes; the first ``limit`` of them (sorted by source,
    then target) are answered. With both ``source`` and ``target`` the engine's own search answers, with
    the other routes of the pair."""
    from dragoman.translation.routing import find_routes, reachable_pairs

    cache = engine.pack_cache
    edges = cache.edges()
    graph = _Graph(edges)
    reached = sorted(
        pair
        for pair in reachable_pairs(edges)
        if (source is None or pair[0] == source) and (target is None or pair[1] == target)
    )
    both = source is not None and target is not None
    rows: list[PairRow] = []
    for src, tgt in reached[:limit]:
        shortest = [] if both else graph.shortest_edges(src, tgt)
        routes: tuple[Route, ...] | list[Route] = (
            find_routes(shortest, src, tgt, tier) if shortest else cache.routes(src, tgt, tier)
        )
        if routes:
            rows.append(_row(routes, both))
    direct_count = sum(1 for pair in reached if pair in graph.pairs)
    return PairsOutput(
        pairs=rows,
        count=len(rows),
        total=len(reached),
        direct=direct_count,
        pivot=len(reached) - direct_count,
        truncated=len(reached) > len(rows),
        tier=tier,
        provenance=engine.provenance,
    )


def _code(code: str | None) -> str | None:
    from dragoman.languages.catalogue import resolve

    return resolve(code) if code is not None else None


async def list_pairs(
    ctx: Ctx,
    source: Source = None,
    target: Annotated[
        str | None,
        Field(max_length=64, description="Only pairs into this language (BCP-47 or FLORES-200)."),
    ] = None,
    tier: Tier = None,
    limit: Annotated[
        int,
        Field(ge=1, le=MAX_LIST_PAIRS, description=f"The most pairs answered (1 to {MAX_LIST_PAIRS})."),
    ] = MAX_LIST_PAIRS,
) -> Annotated[CallToolResult, PairsOutput]:
    """Language pairs this device translates, direct (one pack) and through pivot languages, each with the
    best route the engine takes for the tier and the packs and engines of each hop (argos, multilingual
    CTranslate2, apertium). Filter with source and/or target; with both, other routes of the pair come too.
    Counts say how many pairs are direct or pivoted; truncated says some were left out."""

    def work(engine: Engine) -> PairsOutput:
        chosen: TierName = tier or engine.settings.engine.default_tier
        return pairs_of(engine, _code(source), _code(target), chosen, limit)

    out = await run_engine(ctx, work)
    shown = "; ".join(
        f"{p.source}->{p.target} via {' > '.join(h.pack for h in p.route)}" for p in out.pairs[:20]
    )
    more = f" (and {out.count - 20} more)" if out.count > 20 else ""
    cut = f"; {out.total - out.count} left out (narrow with source/target)" if out.truncated else ""
    text = f"{out.total} pairs ({out.direct} direct, {out.pivot} through a pivot){cut}" + (
        f": {shown}{more}" if shown else "; install a pack (packs_install) or see engine_status"
    )
    return answer(out, text)


# ----- packs_list ---------------------------------------------------------------------------------------
async def packs_list(ctx: Ctx) -> Annotated[CallToolResult, PacksOutput]:
    """The translation packs installed on this device (and the Apertium pairs found), each with its kind,
    languages, number of pairs, size, version, licence and whether it is loaded; pack folders that cannot
    be used, with the reason; and whether packs_install may run here."""
    state = state_of(ctx)

    def work(engine: Engine) -> PacksOutput:
        infos = engine.packs()
        rows = [
            PackRow(
                id=i.id,
                kind=i.kind,
                languages=list(i.languages),
                pairs=len(i.pairs),
                path=i.path,
                size_bytes=i.size_bytes,
                version=i.version,
                license=i.license,
                quality=i.quality,
                speed=i.speed,
                loaded=i.loaded,
                extra=dict(i.extra),
            )
            for i in infos
        ]
        broken = [BrokenPackRow(path=str(p), error=why) for p, why in engine.pack_cache.store.broken()]
        return PacksOutput(
            packs=rows,
            broken=broken,
            count=len(rows),
            packs_dir=str(engine.settings.engine.packs_dir),
            installs_allowed=state.settings.local.mcp_allow_installs,
            provenance=engine.provenance,
        )

    out = await run_engine(ctx, work)
    shown = ", ".join(f"{p.id} ({p.kind}{', loaded' if p.loaded else ''})" for p in out.packs) or "none"
    text = f"{out.count} packs: {shown}" + (f"; {len(out.broken)} broken" if out.broken else "")
    return answer(out, text)


# ----- packs_install ------------------------------------------------------------------------------------
def _remote(source: str) -> bool:
    """Whether ``source`` names something to download (a URL, ``hf:``, an index name), not a local path."""
    from urllib.parse import urlparse

    from dragoman.models.index import is_index_name

    scheme = urlparse(source).scheme.lower()
    return scheme in ("http", "https") or source.lower().startswith("hf:") or is_index_name(source)


def install_source(source: str, allowed: tuple[Path, ...]) -> str | Path:
    """What to hand the installer: a remote name as given, or a local archive or folder inside the allowed
    directories (resolved; anywhere else is ``path_not_allowed``, as for every file tool)."""
    text = source.strip()
    if _remote(text):
        if Path(text).expanduser().exists():  # the installer would read that file of the working directory
            raise InvalidRequest(
                f"{text!r} names a download and also a file in the server's working directory; give the "
                "file's absolute path inside the allowed directories, or a URL"
            )
        return text
    return paths.check_allowed(text, allowed)


async def packs_install(
    source: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4096,
            description="An Argos index name ('en:es', 'translate-en_es'), an http(s) URL, "
            "'hf:OWNER/REPO[@REVISION]' (Hugging Face), or an archive or folder inside the allowed "
            "directories.",
        ),
    ],
    ctx: Ctx,
    roots: ClientRoots,
    sha256: Annotated[
        str | None, Field(max_length=80, description="Expected SHA-256 of the archive (hex).")
    ] = None,
    replace: Annotated[bool, Field(description="Replace an installed pack with the same id.")] = False,
) -> Annotated[CallToolResult, InstallOutput]:
    """Install a translation pack on this device, as `dragoman packs install` does: downloaded (or copied)
    into a staging folder, checked (checksum, archive safety, size, a model of the kind inside) and moved
    into place atomically; never half-installed. Reaches the network. Refused [install_not_allowed] unless
    the user set DRAGOMAN_MCP_ALLOW_INSTALLS=1 in the server's configuration. Sends progress; a cancelled
    call installs nothing."""
    from dragoman.models.packs import PackStore, install

    state = state_of(ctx)
    try:
        if not state.settings.local.mcp_allow_installs:
            raise InstallNotAllowed(
                "installing packs from this MCP server is off; the user can allow it by setting "
                f"{ALLOW_VARIABLE}=1 in the server's environment (the \"env\" block of the host's MCP "
                "config) and restarting the server, or install it in a terminal with `dragoman packs "
                f"install {source.strip()}`"
            )
        chosen = install_source(source, _allowed(ctx, roots))
    except DragomanError as exc:
        raise tool_error(exc) from exc
    context = job_context(ctx.report_progress)

    def work(state: ServerState) -> InstallOutput:
        started = time.perf_counter()
        store = PackStore(state.settings)
        before = {m.id for m, _ in store.installed()}
        context.check()
        manifest = install(chosen, state.settings, sha256=sha256, progress=context.report, replace=replace)
        path = state.settings.engine.packs_dir / manifest.id
        return InstallOutput(
            id=manifest.id,
            kind=manifest.kind,
            languages=list(manifest.languages),
            version=manifest.version,
            license=manifest.license,
            path=str(path),
            source=source.strip(),
            replaced=manifest.id in before,
            seconds=round(time.perf_counter() - started, 3),
            provenance="on-device",
        )

    out = await _run(ctx, work)
    text = f"installed {out.id} ({out.kind}: {', '.join(out.languages)}; licence {out.license or 'unknown'})"
    return answer(out, text)


__all__ = ["list_pairs", "packs_install", "packs_list"]
