"""The MCP tools of issue 17 (reach), in process: ``list_pairs``, ``packs_list``, ``packs_install`` and
``translate_files``, against tiny real packs built in the tests.

``list_pairs`` answers direct and pivot routes with the engines of each hop, ranked as the engine takes them;
``packs_list`` the installed packs; ``packs_install`` installs through the CLI's own function (a folder or an
archive inside the allowed directories here; index names, URLs and ``hf:`` go through it the same way) only
when the user allowed installs; ``translate_files`` translates a folder or a glob with one row per file.
"""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from mcp_support import error_text, in_process, structured

from dragoman.errors import PackInstallError
from dragoman.limits import Tier
from dragoman.server.mcp._packs import pairs_of
from dragoman.testing.tinypack import build_argos_pack
from dragoman.translation.engine import Engine
from dragoman.translation.routing import find_routes, reachable_pairs
from dragoman.translation.types import Hop, PackKind, Route

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def tiny_es_ca_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Argos es->ca pack: with en->es it makes en->ca a route through Spanish."""
    return build_argos_pack(tmp_path_factory.mktemp("packs") / "argos-es-ca", "es", "ca", seed=3)


# ----- list_pairs --------------------------------------------------------------------------------------
async def test_list_pairs_answers_direct_and_pivot_routes_with_their_engines(
    server_env: dict[str, str], packs_dir: Path, tiny_es_ca_pack: Path
) -> None:
    shutil.copytree(tiny_es_ca_pack, packs_dir / tiny_es_ca_pack.name)
    async with in_process(server_env) as client:
        every = structured(await client.call_tool("list_pairs", {}))
        into_catalan = structured(await client.call_tool("list_pairs", {"target": "ca"}))
        one = structured(await client.call_tool("list_pairs", {"source": "en", "target": "cat_Latn"}))
        fast = structured(await client.call_tool("list_pairs", {"tier": "fast", "limit": 1}))
    pairs = {(p["source"], p["target"]): p for p in every["pairs"]}
    assert set(pairs) == {("eng_Latn", "spa_Latn"), ("spa_Latn", "cat_Latn"), ("eng_Latn", "cat_Latn")}
    assert (every["total"], every["direct"], every["pivot"], every["truncated"]) == (3, 2, 1, False)
    direct = pairs[("eng_Latn", "spa_Latn")]
    assert direct["direct"] is True and direct["hops"] == 1 and direct["engines"] == ["argos"]
    assert direct["route"] == [
        {"pack": "argos-en-es", "engine": "argos", "source": "eng_Latn", "target": "spa_Latn"}
    ]
    pivot = pairs[("eng_Latn", "cat_Latn")]
    assert pivot["direct"] is False and pivot["hops"] == 2 and pivot["engines"] == ["argos"]
    assert [h["target"] for h in pivot["route"]] == ["spa_Latn", "cat_Latn"]
    assert [h["pack"] for h in pivot["route"]] == ["argos-en-es", "argos-es-ca"]
    assert {(p["source"], p["target"]) for p in into_catalan["pairs"]} == {
        ("eng_Latn", "cat_Latn"),
        ("spa_Latn", "cat_Latn"),
    }
    assert one["count"] == 1 and one["pairs"][0]["alternatives"] == []
    assert fast["tier"] == "fast" and fast["count"] == 1 and fast["total"] == 3 and fast["truncated"] is True


async def test_list_pairs_takes_the_route_the_engine_takes(
    server_env: dict[str, str], packs_dir: Path, tiny_multilingual_pack: Path
) -> None:
    """With an Argos en->es pack and a multilingual pack, each pair's route is the engine's own choice."""
    shutil.copytree(tiny_multilingual_pack, packs_dir / tiny_multilingual_pack.name)
    from dragoman.settings import Settings
    from dragoman.translation.engine import Engine

    async with in_process(server_env) as client:
        every = structured(await client.call_tool("list_pairs", {}))
        both = structured(await client.call_tool("list_pairs", {"source": "en", "target": "es"}))
    with Engine(Settings.from_env(server_env)) as engine:
        for pair in every["pairs"]:
            chosen = engine.route(pair["source"], pair["target"], "best")
            assert [h["pack"] for h in pair["route"]] == [h.pack_id for h in chosen.hops], pair
    assert every["total"] == 12 and every["direct"] == 12  # 4 languages, every ordered pair, one hop
    assert {h["engine"] for p in every["pairs"] for h in p["route"]} <= {"argos", "multilingual"}
    assert len(both["pairs"][0]["alternatives"]) == 1  # the other pack of en->es


async def test_list_pairs_refuses_an_unknown_language_and_answers_nothing_installed(
    server_env: dict[str, str], packs_dir: Path
) -> None:
    async with in_process(server_env) as client:
        unknown = error_text(await client.call_tool("list_pairs", {"source": "klingonese"}))
        none = structured(await client.call_tool("list_pairs", {"source": "fr", "target": "de"}))
    assert "[unknown_language]" in unknown
    assert none["pairs"] == [] and none["total"] == 0


# ----- packs_list and packs_install --------------------------------------------------------------------
async def test_packs_list_lists_the_packs_and_broken_folders(
    server_env: dict[str, str], packs_dir: Path
) -> None:
    (packs_dir / "half-copied").mkdir()
    (packs_dir / "half-copied" / "metadata.json").write_text("{not json", encoding="utf-8")
    async with in_process(server_env) as client:
        out = structured(await client.call_tool("packs_list", {}))
    assert out["count"] == 1 and out["installs_allowed"] is False
    pack = out["packs"][0]
    assert pack["id"] == "argos-en-es" and pack["kind"] == "argos" and pack["pairs"] == 1
    assert pack["languages"] == ["eng_Latn", "spa_Latn"] and pack["size_bytes"] > 0
    assert [Path(b["path"]).name for b in out["broken"]] == ["half-copied"]
    assert out["packs_dir"] == str(packs_dir)


async def test_packs_install_installs_a_folder_and_an_archive_inside_the_allowed_dirs(
    server_env: dict[str, str],
    packs_dir: Path,
    workdir: Path,
    tiny_es_ca_pack: Path,
    argos_archive: Path,
) -> None:
    for child in packs_dir.iterdir():
        shutil.rmtree(child)
    shutil.copytree(tiny_es_ca_pack, workdir / "es_ca")
    shutil.copy(argos_archive, workdir / argos_archive.name)
    env = {**server_env, "DRAGOMAN_MCP_ALLOW_INSTALLS": "1"}
    async with in_process(env, roots=[workdir]) as client:
        before = structured(await client.call_tool("list_pairs", {}))
        folder = structured(await client.call_tool("packs_install", {"source": "es_ca"}))
        archive = structured(
            await client.call_tool("packs_install", {"source": str(workdir / argos_archive.name)})
        )
        again = error_text(await client.call_tool("packs_install", {"source": "es_ca"}))
        replaced = structured(await client.call_tool("packs_install", {"source": "es_ca", "replace": True}))
        after = structured(await client.call_tool("list_pairs", {}))
        listed = structured(await client.call_tool("packs_list", {}))
    assert before["total"] == 0
    assert folder["id"] == "argos-es-ca" and folder["kind"] == "argos" and folder["replaced"] is False
    assert folder["languages"] == ["spa_Latn", "cat_Latn"] and Path(folder["path"]).parent == packs_dir
    assert archive["id"] == "argos-en-es" and archive["source"] == str(workdir / argos_archive.name)
    assert "[pack_install_failed]" in again and "already installed" in again
    assert replaced["replaced"] is True
    assert after["total"] == 3 and after["pivot"] == 1  # en->ca through Spanish, at once
    assert listed["installs_allowed"] is True and {p["id"] for p in listed["packs"]} == {
        "argos-en-es",
        "argos-es-ca",
    }


async def test_packs_install_calls_the_clis_install_with_remote_sources_as_given(
    server_env: dict[str, str], workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Index names, URLs and hf: sources go to the one install function `dragoman packs install` calls."""
    import dragoman.models.packs as packs

    seen: list[object] = []

    def fake_install(source: object, settings: object, **options: object) -> object:
        seen.append(source)
        raise PackInstallError("offline in this test")

    monkeypatch.setattr(packs, "install", fake_install)
    env = {**server_env, "DRAGOMAN_MCP_ALLOW_INSTALLS": "1"}
    sources = ["en:es", "https://example.invalid/p.argosmodel", "hf:someone/opus-mt-en-es@abc123"]
    async with in_process(env, roots=[workdir]) as client:
        errors = [error_text(await client.call_tool("packs_install", {"source": s})) for s in sources]
    assert seen == sources
    assert all("[pack_install_failed]" in e and "offline in this test" in e for e in errors)


# ----- translate_files ---------------------------------------------------------------------------------
def _texts(folder: Path, names: list[str]) -> None:
    for name in names:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"Hello world, this is {path.stem}.\n", encoding="utf-8")


async def test_translate_files_over_a_folder_reports_each_file(
    server_env: dict[str, str], workdir: Path
) -> None:
    _texts(workdir, ["a.txt", "b.md", "sub/c.txt"])
    (workdir / "notes.xyz").write_bytes(b"\x00\x01binary")
    (workdir / ".hidden.txt").write_text("Hidden.", encoding="utf-8")
    async with in_process(server_env, roots=[workdir]) as client:
        flat = structured(
            await client.call_tool("translate_files", {"path": ".", "target": "es", "source": "en"})
        )
        again = structured(
            await client.call_tool("translate_files", {"path": str(workdir), "target": "es", "source": "en"})
        )
        deep = structured(
            await client.call_tool(
                "translate_files", {"path": ".", "target": "es", "source": "en", "recursive": True}
            )
        )
    rows = {Path(r["input_path"]).name: r for r in flat["files"]}
    assert set(rows) == {"a.txt", "b.md", "notes.xyz"}  # not the hidden file, not the sub-folder's
    assert (flat["translated"], flat["failed"], flat["skipped"]) == (2, 1, 0)
    assert rows["a.txt"]["status"] == "translated" and rows["a.txt"]["format"] == "txt"
    assert (
        rows["a.txt"]["output_path"] == str(workdir.resolve() / "a.es.txt") and rows["a.txt"]["segments"] >= 1
    )
    assert rows["notes.xyz"]["status"] == "failed"
    assert rows["notes.xyz"]["error"]["code"] == "unsupported_document"
    assert (workdir / "a.es.txt").is_file() and (workdir / "b.es.md").is_file()
    # run again: the translations are the run's own outputs, the inputs' translations exist
    again_rows = {Path(r["input_path"]).name: r for r in again["files"]}
    assert (
        again_rows["a.es.txt"]["status"] == "skipped" and "translation of" in again_rows["a.es.txt"]["reason"]
    )
    assert again_rows["a.txt"]["status"] == "skipped" and "overwrite" in again_rows["a.txt"]["reason"]
    assert again["translated"] == 0
    deep_rows = {r["input_path"]: r for r in deep["files"]}
    assert deep_rows[str(workdir / "sub" / "c.txt")]["status"] == "translated"
    assert (workdir / "sub" / "c.es.txt").is_file()


async def test_translate_files_over_a_glob_into_an_output_dir(
    server_env: dict[str, str], workdir: Path
) -> None:
    _texts(workdir, ["docs/a.txt", "docs/deep/b.txt", "docs/deep/c.md", "other/d.txt"])
    async with in_process(server_env, roots=[workdir]) as client:
        out = structured(
            await client.call_tool(
                "translate_files",
                {"path": "docs/**/*.txt", "target": "fr", "source": "en", "output_dir": "out"},
            )
        )
        missing_pair = structured(
            await client.call_tool("translate_files", {"path": "other/*.txt", "target": "de", "source": "en"})
        )
    assert [Path(r["input_path"]).relative_to(workdir).as_posix() for r in out["files"]] == [
        "docs/a.txt",
        "docs/deep/b.txt",
    ]
    # no en->fr pack: each file fails with the engine's typed error, nothing is written
    assert out["failed"] == 2 and {r["error"]["code"] for r in out["files"]} == {"unsupported_pair"}
    assert not (workdir / "out").exists() or not any((workdir / "out").rglob("*.*"))
    assert missing_pair["failed"] == 1
    async with in_process(server_env, roots=[workdir]) as client:
        ok = structured(
            await client.call_tool(
                "translate_files",
                {"path": "docs/**/*.txt", "target": "es", "source": "en", "output_dir": "out"},
            )
        )
    assert ok["translated"] == 2
    assert (workdir / "out" / "a.es.txt").is_file() and (workdir / "out" / "deep" / "b.es.txt").is_file()
    assert not (workdir / "docs" / "a.es.txt").exists()


async def test_translate_files_refuses_paths_outside_and_empty_matches_answer_no_rows(
    server_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    _texts(outside, ["x.txt"])
    async with in_process(server_env, roots=[workdir]) as client:
        refused = error_text(
            await client.call_tool("translate_files", {"path": str(outside / "*.txt"), "target": "es"})
        )
        dotdot = error_text(
            await client.call_tool("translate_files", {"path": "*/../../x.txt", "target": "es"})
        )
        nothing = structured(await client.call_tool("translate_files", {"path": "*.docx", "target": "es"}))
    assert "[path_not_allowed]" in refused and "[invalid_request]" in dotdot
    assert nothing["files"] == [] and nothing["translated"] == 0
    assert not (outside / "x.es.txt").exists()


# ----- list_pairs' routes are the engine's, and cheap over a multilingual pack --------------------------
class _FakeCache:
    def __init__(self, edges: list[Hop]) -> None:
        self._edges = edges

    def edges(self) -> list[Hop]:
        return self._edges

    def routes(self, source: str, target: str, tier: Tier) -> tuple[Route, ...]:
        return tuple(find_routes(self._edges, source, target, tier))


def _engine(edges: list[Hop]) -> Engine:
    return cast("Engine", SimpleNamespace(pack_cache=_FakeCache(edges), provenance="on-device"))


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("tier", ["best", "fast"])
def test_each_pairs_route_is_the_best_route_over_every_edge(seed: int, tier: Tier) -> None:
    rng = random.Random(seed)
    langs = [f"l{i}_Latn" for i in range(9)]
    kinds: list[PackKind] = ["argos", "multilingual", "apertium"]
    edges = [
        Hop(f"p{k}", rng.choice(kinds), a, b, rng.randint(1, 4), rng.randint(1, 4))
        for k in range(rng.randint(6, 22))
        for a, b in [rng.sample(langs, 2)]
    ]
    out = pairs_of(_engine(edges), None, None, tier)
    assert out.total == len(reachable_pairs(edges)) == out.count
    for row in out.pairs:
        best = find_routes(edges, row.source, row.target, tier)[0]
        assert [(h.pack, h.source, h.target) for h in row.route] == [
            (h.pack_id, h.source, h.target) for h in best.hops
        ], (seed, row.source, row.target)


def test_list_pairs_over_a_multilingual_pack_and_pivots_answers_quickly() -> None:
    """200 languages all connected (an NLLB-200 pack) plus a language only an Apertium pair reaches: every
    search over the whole graph cost 0.1 s a pivot pair (93 s for the first 2,000 pairs); now < 2 s."""
    langs = [f"l{i:03}_Latn" for i in range(200)]
    edges = [Hop("nllb", "multilingual", a, b, 3, 1) for a in langs for b in langs if a != b]
    edges += [
        Hop("ap", "apertium", "zzz_Latn", "l000_Latn", 2, 3),
        Hop("pa", "apertium", "l000_Latn", "zzz_Latn", 2, 3),
    ]
    started = time.perf_counter()
    every = pairs_of(_engine(edges), None, None, "best")
    into = pairs_of(_engine(edges), None, "zzz_Latn", "best")
    seconds = time.perf_counter() - started
    assert every.total == 40_200 and every.count == 2_000 and every.truncated
    assert into.total == 200 and into.pivot == 199
    assert [h.pack for h in into.pairs[5].route] == ["nllb", "pa"]
    assert seconds < 20, seconds  # was 90 s and more
