"""The reach tools of the MCP server against hostile and careless use (issue 17, R3).

* ``translate_files`` over a glob matching thousands of files is refused before any work with a typed
  ``limit_exceeded`` (the file-count limit), and so is a ``**`` over more entries than it may look at;
* a folder holding links that lead out of the allowed directories (to a file, to a folder) has those
  refused per file (``path_not_allowed``): nothing outside is read or written, the rest is translated;
* ``packs_install`` is refused (``install_not_allowed``) unless the user allowed installs, before anything is
  downloaded or read; allowed, a local source outside the allowed directories is ``path_not_allowed``;
* a cancelled run over a folder keeps the files it finished and leaves no partial file.

Inputs are generated here.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_support import error_text, in_process, structured

import dragoman.translation.engine as eng
from dragoman.documents.partials import is_partial
from dragoman.errors import Cancelled
from dragoman.limits import MAX_MCP_FILES
from dragoman.progress import JobContext

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def env(packs_dir: Path, tiny_argos_pack: Path, workdir: Path) -> dict[str, str]:
    """The tiny en->es pack, Apertium off, file tools in ``workdir`` only, installs not allowed."""
    shutil.copytree(tiny_argos_pack, packs_dir / tiny_argos_pack.name)
    return {**os.environ, "DRAGOMAN_APERTIUM": "0", "DRAGOMAN_ALLOWED_DIRS": str(workdir)}


def _shape(text: str, tool: str, code: str) -> None:
    assert text.startswith(f"Error executing tool {tool}: ") and text.endswith(f"[{code}]"), text
    assert "Traceback" not in text and "pydantic" not in text, text


def _listing(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


# ----- too many files ----------------------------------------------------------------------------------
async def test_a_glob_matching_thousands_of_files_is_refused_before_any_work(
    env: dict[str, str], workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    many = workdir / "many"
    many.mkdir()
    for i in range(3000):
        (many / f"f{i:05}.txt").write_text("Hello.", encoding="utf-8")
    before = _listing(workdir)
    calls: list[int] = []
    real = eng.Engine.translate_many

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(eng.Engine, "translate_many", counted)
    async with in_process(env) as client:
        glob = error_text(await client.call_tool("translate_files", {"path": "many/*.txt", "target": "es"}))
        folder = error_text(await client.call_tool("translate_files", {"path": "many", "target": "es"}))
        deep = error_text(
            await client.call_tool("translate_files", {"path": "**/*", "target": "es", "source": "en"})
        )
    for text in (glob, folder, deep):
        _shape(text, "translate_files", "limit_exceeded")
        assert f"{MAX_MCP_FILES:,}" in text and "narrow" in text
    assert calls == [] and _listing(workdir) == before  # nothing translated, nothing written


async def test_a_glob_walking_too_many_entries_is_refused(
    env: dict[str, str], workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dragoman.server.mcp import _files

    monkeypatch.setattr(_files, "MAX_MCP_SCAN_ENTRIES", 200)
    for i in range(30):
        folder = workdir / f"d{i:02}"
        folder.mkdir()
        for j in range(10):
            (folder / f"x{j}.bin").write_bytes(b"x")
    (workdir / "d00" / "wanted.txt").write_text("Hello.", encoding="utf-8")
    async with in_process(env) as client:
        refused = error_text(await client.call_tool("translate_files", {"path": "**/*.txt", "target": "es"}))
        narrow = structured(
            await client.call_tool("translate_files", {"path": "d00/*.txt", "target": "es", "source": "en"})
        )
    _shape(refused, "translate_files", "limit_exceeded")
    assert "folder entries" in refused
    assert narrow["translated"] == 1


# ----- links out of the allowed directories ------------------------------------------------------------
async def test_links_leading_out_of_the_allowed_dirs_are_refused_per_file(
    env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key.txt").write_text("Private key material.", encoding="utf-8")
    (secret / "inner.txt").write_text("Inner secret.", encoding="utf-8")
    docs = workdir / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Hello world.", encoding="utf-8")
    (docs / "leak.txt").symlink_to(secret / "key.txt")
    (docs / "dir_link").symlink_to(secret, target_is_directory=True)
    (docs / "loop").symlink_to(docs, target_is_directory=True)  # a link loop is never walked
    secret_before = _listing(secret)
    async with in_process(env) as client:
        flat = structured(
            await client.call_tool("translate_files", {"path": "docs", "target": "es", "source": "en"})
        )
        deep = structured(
            await client.call_tool(
                "translate_files",
                {"path": "docs/**/*.txt", "target": "es", "source": "en", "overwrite": True},
            )
        )
        through = error_text(
            await client.call_tool("translate_files", {"path": "docs/dir_link/*.txt", "target": "es"})
        )
    rows = {Path(r["input_path"]).name: r for r in flat["files"]}
    assert set(rows) == {"a.txt", "leak.txt"}  # the linked folders are not entered
    assert rows["a.txt"]["status"] == "translated"
    assert rows["leak.txt"]["status"] == "failed" and rows["leak.txt"]["error"]["code"] == "path_not_allowed"
    assert str(secret) not in (rows["leak.txt"]["output_path"] or "")
    deep_rows = {Path(r["input_path"]).name: r for r in deep["files"]}
    assert set(deep_rows) == {"a.txt", "a.es.txt", "leak.txt"} and deep_rows["leak.txt"]["status"] == "failed"
    assert deep_rows["a.es.txt"]["status"] == "skipped"  # the first run's translation of a.txt
    _shape(through, "translate_files", "path_not_allowed")
    assert _listing(secret) == secret_before  # nothing written beside the secrets
    assert sorted(p.name for p in docs.iterdir()) == ["a.es.txt", "a.txt", "dir_link", "leak.txt", "loop"]


async def test_an_output_link_leading_out_is_refused_and_not_followed(
    env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    target = tmp_path / "victim.txt"
    target.write_text("Do not touch.", encoding="utf-8")
    (workdir / "a.txt").write_text("Hello world.", encoding="utf-8")
    (workdir / "a.es.txt").symlink_to(target)  # the translation's name, planted as a link out
    async with in_process(env) as client:
        out = structured(
            await client.call_tool(
                "translate_files", {"path": "*.txt", "target": "es", "source": "en", "overwrite": True}
            )
        )
    rows = {Path(r["input_path"]).name: r for r in out["files"]}
    assert rows["a.txt"]["status"] == "failed" and rows["a.txt"]["error"]["code"] == "path_not_allowed"
    assert target.read_text(encoding="utf-8") == "Do not touch."


# ----- installs ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("allow", [None, "0", "no"])
async def test_packs_install_is_refused_unless_the_user_allowed_it(
    env: dict[str, str],
    packs_dir: Path,
    workdir: Path,
    argos_archive: Path,
    monkeypatch: pytest.MonkeyPatch,
    allow: str | None,
) -> None:
    import dragoman.models.packs as packs

    called: list[object] = []
    monkeypatch.setattr(packs, "install", lambda *a, **k: called.append(a))
    shutil.copy(argos_archive, workdir / "p.argosmodel")
    if allow is not None:
        env["DRAGOMAN_MCP_ALLOW_INSTALLS"] = allow
    before = _listing(packs_dir)
    async with in_process(env) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}["packs_install"]
        texts = [
            error_text(await client.call_tool("packs_install", {"source": source}))
            for source in ("en:de", "https://example.invalid/x.argosmodel", "hf:a/b", "p.argosmodel")
        ]
        status = structured(await client.call_tool("packs_list", {}))
    assert listed.annotations is not None and listed.annotations.open_world_hint is True
    for text in texts:
        _shape(text, "packs_install", "install_not_allowed")
        assert "DRAGOMAN_MCP_ALLOW_INSTALLS=1" in text and "dragoman packs install" in text
    assert called == [] and _listing(packs_dir) == before
    assert status["installs_allowed"] is False


async def test_an_allowed_install_still_reads_local_sources_only_inside_the_allowed_dirs(
    env: dict[str, str], packs_dir: Path, tmp_path: Path, argos_archive: Path, workdir: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.copy(argos_archive, outside / "p.argosmodel")
    (workdir / "link.argosmodel").symlink_to(outside / "p.argosmodel")
    env["DRAGOMAN_MCP_ALLOW_INSTALLS"] = "1"
    before = _listing(packs_dir)
    async with in_process(env) as client:
        direct = error_text(
            await client.call_tool("packs_install", {"source": str(outside / "p.argosmodel")})
        )
        linked = error_text(await client.call_tool("packs_install", {"source": "link.argosmodel"}))
        dotted = error_text(await client.call_tool("packs_install", {"source": "../elsewhere/p.argosmodel"}))
    for text in (direct, linked, dotted):
        _shape(text, "packs_install", "path_not_allowed")
    assert _listing(packs_dir) == before


# ----- cancellation ------------------------------------------------------------------------------------
async def test_a_cancelled_folder_run_keeps_finished_files_and_leaves_no_partial_one(
    env: dict[str, str], workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [f"{c}.txt" for c in "abcde"]
    for name in names:
        (workdir / name).write_text(f"Hello world from {name}.", encoding="utf-8")
    entered = threading.Event()
    stopped: list[str] = []
    partial_seen: list[list[str]] = []
    calls = [0]
    real = eng.Engine.translate_many

    def slow_third(self: eng.Engine, texts: Any, options: Any, *, context: JobContext | None = None) -> Any:
        calls[0] += 1
        if calls[0] == 3:  # the third file: its partial output is open now
            partial_seen.append([p.name for p in workdir.iterdir() if is_partial(p.name)])
            entered.set()
            assert context is not None
            deadline = time.monotonic() + 30
            try:
                while time.monotonic() < deadline:
                    context.check()
                    time.sleep(0.02)
            except Cancelled:
                stopped.append("cancelled")
                raise
        return real(self, texts, options, context=context)

    monkeypatch.setattr(eng.Engine, "translate_many", slow_third)
    async with in_process(env) as client:
        async with anyio.create_task_group() as group:

            async def call() -> None:
                await client.call_tool("translate_files", {"path": ".", "target": "es", "source": "en"})

            group.start_soon(call)
            with anyio.fail_after(60):
                while not entered.is_set():
                    await anyio.sleep(0.02)
            group.cancel_scope.cancel()
        with anyio.fail_after(10):
            while not stopped:
                await anyio.sleep(0.02)
        with anyio.fail_after(10):  # the worker thread unwinds: its partial file is removed
            while any(is_partial(p.name) for p in workdir.iterdir()):
                await anyio.sleep(0.02)
        listed = structured(await client.call_tool("packs_list", {}))  # the session is still usable
    assert stopped == ["cancelled"] and listed["count"] == 1
    assert partial_seen and len(partial_seen[0]) == 1  # the third file was being written
    assert sorted(p.name for p in workdir.iterdir()) == sorted([*names, "a.es.txt", "b.es.txt"])
    assert (workdir / "a.es.txt").read_text(encoding="utf-8").strip()


# ----- patterns and deep folders -----------------------------------------------------------------------
def test_glob_matching_is_linear_in_the_depth_of_the_path() -> None:
    from growth import assert_linear

    from dragoman.server.mcp._files import _Pattern

    # several ** and a near miss at every depth: naive backtracking is polynomial (exponential in the **s)
    pattern = _Pattern(("**", "d*", "**", "d*", "**", "d*", "**", "*.txt"))

    def work(text: str) -> object:
        return pattern.matches(tuple(text.split("/")))

    assert_linear(work, {"deep": lambda n: "/".join(["d"] * n) + "/x.md"}, 200)


async def test_a_file_hundreds_of_folders_deep_is_found_and_translated(
    env: dict[str, str], workdir: Path
) -> None:
    folder = workdir
    for _ in range(600):  # (made a level at a time: mkdir recurses; pytest's clean-up does too, up to 1000)
        folder = folder / "d"
        folder.mkdir()
    (folder / "deep.txt").write_text("Hello from the bottom.", encoding="utf-8")
    try:
        async with in_process(env) as client:
            out = structured(
                await client.call_tool(
                    "translate_files", {"path": "**/*.txt", "target": "es", "source": "en"}
                )
            )
            folder_given = error_text(
                await client.call_tool("translate_file", {"path": ".", "target": "es", "source": "en"})
            )
        assert out["translated"] == 1 and (folder / "deep.es.txt").is_file()
        assert (
            "translate_files" in folder_given
        )  # translate_file on a folder points at the tool that takes one
    finally:
        # Taken down a level at a time, bottom up: pytest's recursive clean-up of its temporary folders
        # would hit Python's recursion limit on 600 levels (a RecursionError at the end of the session).
        for level in [folder, *folder.parents]:
            if level == workdir:
                break
            for child in level.iterdir():
                if not child.is_dir():
                    child.unlink()
            level.rmdir()
