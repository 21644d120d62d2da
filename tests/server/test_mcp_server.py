"""The MCP stdio server, driven for real: ``python -m dragoman.cli mcp`` as a subprocess, the SDK's client.

Every tool is listed and called over stdio against a tiny real pack (and Apertium where installed). Hooks
that need misbehaving library code (a stray print, a slow or endless engine call) patch the engine in the
server subprocess only, through a ``python -c`` wrapper; the server code itself has no test hooks.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import CallToolResult, ListRootsResult, LoggingMessageNotificationParams, Root
from pydantic import FileUrl

from dragoman.limits import MAX_BATCH_TEXTS, MAX_GLOSSARY_ENTRIES, MAX_TEXT_CHARS

pytestmark = pytest.mark.anyio

SERVER_ARGS = ["-m", "dragoman.cli", "mcp"]
TOOLS = {
    "translate",
    "translate_batch",
    "detect_language",
    "list_languages",
    "engine_status",
    "glossary_add",
    "glossary_list",
    "glossary_remove",
    "translate_file",
    "ocr_translate",
}
READ_ONLY = {
    "translate",
    "translate_batch",
    "detect_language",
    "list_languages",
    "engine_status",
    "glossary_list",
}
FRENCH = "Bonjour, je voudrais réserver une table pour deux personnes ce soir, s'il vous plaît."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def server_env(packs_dir: Path, tiny_argos_pack: Path, tmp_path: Path) -> dict[str, str]:
    """The test's isolated DRAGOMAN_* environment with the tiny en->es pack installed; Apertium off."""
    shutil.copytree(tiny_argos_pack, packs_dir / tiny_argos_pack.name)
    env = dict(os.environ)
    env.update(DRAGOMAN_APERTIUM="0", DRAGOMAN_PORT="9", PYTHONUNBUFFERED="1")
    return env


@pytest.fixture
def errlog(tmp_path: Path) -> Path:
    return tmp_path / "server-stderr.log"


def hooked(patch: str) -> list[str]:
    """Arguments running the server after ``patch`` (Python source) ran in the server process."""
    code = "import os, sys, time\nimport dragoman.translation.engine as eng\n" + textwrap.dedent(patch)
    code += "\nfrom dragoman.cli import main\nsys.exit(main(['mcp']))\n"
    return ["-c", code]


@contextlib.asynccontextmanager
async def session(
    env: dict[str, str],
    cwd: Path,
    errlog: Path,
    *,
    args: list[str] | None = None,
    roots: list[Path] | None = None,
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=args or SERVER_ARGS, env=env, cwd=cwd)

    async def list_roots(context: ClientRequestContext) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=FileUrl(p.as_uri()), name=p.name) for p in roots or []])

    with errlog.open("a", encoding="utf-8") as log:
        async with stdio_client(params, errlog=log) as (read, write):
            callback = list_roots if roots is not None else None
            async with ClientSession(read, write, list_roots_callback=callback) as client:
                with anyio.fail_after(60):
                    await client.initialize()
                yield client


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert result.structured_content["provenance"] == "on-device"
    return dict(result.structured_content)


def error_text(result: CallToolResult) -> str:
    assert result.is_error, result
    text = " ".join(getattr(block, "text", "") for block in result.content)
    assert text
    return text


# ----- listing ---------------------------------------------------------------------------------------
async def test_every_tool_listed_with_bounded_inputs_output_schema_and_true_annotations(
    server_env: dict[str, str], workdir: Path, errlog: Path
) -> None:
    async with session(server_env, workdir, errlog) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        assert tool.description, name
        assert tool.output_schema is not None, name
        assert "provenance" in tool.output_schema["properties"], name
        assert tool.annotations is not None, name
        assert tool.annotations.open_world_hint is False, name
        assert tool.annotations.read_only_hint is (name in READ_ONLY), name
        assert tool.annotations.idempotent_hint is (name not in {"translate_file", "ocr_translate"}), name
    assert tools["glossary_remove"].annotations.destructive_hint is True  # type: ignore[union-attr]
    assert tools["glossary_add"].annotations.destructive_hint is False  # type: ignore[union-attr]
    batch = tools["translate_batch"].input_schema["properties"]
    assert batch["texts"]["maxItems"] == MAX_BATCH_TEXTS
    assert batch["texts"]["items"]["maxLength"] == MAX_TEXT_CHARS
    assert batch["glossary"]["anyOf"][0]["maxItems"] == MAX_GLOSSARY_ENTRIES
    assert tools["translate"].input_schema["required"] == ["text", "target"]
    assert tools["translate"].input_schema["properties"]["text"]["maxLength"] == MAX_TEXT_CHARS
    assert tools["translate"].input_schema["properties"]["tier"]["anyOf"][0]["enum"] == ["best", "fast"]
    assert tools["glossary_add"].input_schema["properties"]["entries"]["maxItems"] == MAX_GLOSSARY_ENTRIES
    assert "ctx" not in tools["translate"].input_schema["properties"]
    assert "roots" not in tools["translate_file"].input_schema["properties"]
    assert set(tools["translate"].output_schema["required"]) >= {  # type: ignore[index]
        "translation",
        "source",
        "target",
        "seconds",
        "warnings",
    }


def test_limits_match_the_engine() -> None:
    from dragoman.translation import engine

    assert engine.MAX_BATCH_TEXTS == MAX_BATCH_TEXTS
    assert engine.MAX_TEXT_CHARS == MAX_TEXT_CHARS


# ----- calls -----------------------------------------------------------------------------------------
async def test_initialize_loads_no_pack_and_packs_load_on_first_use(
    server_env: dict[str, str], workdir: Path, errlog: Path
) -> None:
    async with session(server_env, workdir, errlog) as client:
        before = structured(await client.call_tool("engine_status", {}))
        result = structured(
            await client.call_tool("translate", {"text": "Hello.", "target": "es", "source": "en"})
        )
        after = structured(await client.call_tool("engine_status", {}))
    assert [p["loaded"] for p in before["packs"]] == [False]
    assert [p["loaded"] for p in after["packs"]] == [True]
    assert result["route"] and before["packs"][0]["id"] in result["route"][0]


async def test_translate_returns_a_structured_result_and_a_text_block(
    server_env: dict[str, str], workdir: Path, errlog: Path
) -> None:
    async with session(server_env, workdir, errlog) as client:
        result = await client.call_tool(
            "translate", {"text": "The house is red.", "target": "es", "source": "en"}
        )
    data = structured(result)
    assert data["source"] == "eng_Latn" and data["target"] == "spa_Latn"
    assert isinstance(data["translation"], str) and data["translation"].strip()
    assert data["seconds"] >= 0 and isinstance(data["warnings"], list)
    assert data["tier"] == "best"
    assert result.content[0].text.startswith(data["translation"])  # type: ignore[union-attr]


async def test_translate_batch_keeps_order_and_detects_each_text(
    server_env: dict[str, str], workdir: Path, errlog: Path
) -> None:
    texts = [
        "The weather is lovely today and we are going for a walk.",
        "",
        "A second English sentence here.",
    ]
    async with session(server_env, workdir, errlog) as client:
        data = structured(await client.call_tool("translate_batch", {"texts": texts, "target": "spa_Latn"}))
    assert data["count"] == 3 and len(data["results"]) == 3
    assert data["results"][1]["translation"] == ""  # empty stays empty, in its place
    assert all(r["provenance"] == "on-device" and r["target"] == "spa_Latn" for r in data["results"])
    assert data["results"][0]["source"] == "eng_Latn"


async def test_detect_language_and_list_languages(
    server_env: dict[str, str], workdir: Path, errlog: Path
) -> None:
    async with session(server_env, workdir, errlog) as client:
        found = structured(await client.call_tool("detect_language", {"text": FRENCH}))
        short = structured(await client.call_tool("detect_language", {"text": "ok"}))
        installed = structured(await client.call_tool("list_languages", {}))
        catalogue = structured(await client.call_tool("list_languages", {"installed_only": False}))
    assert (found["flores"], found["bcp47"]) == ("fra_Latn", "fr") and found["confidence"] > 0.5
    assert short["flores"] is None and short["reason"]
    assert {row["flores"] for row in installed["languages"]} == {"eng_Latn", "spa_Latn"}
    assert catalogue["count"] >= 200 and catalogue["installed_only"] is False
    rtl = {row["flores"] for row in catalogue["languages"] if row["rtl"]}
    assert "arb_Arab" in rtl and "eng_Latn" not in rtl


async def test_engine_status_reports_paths_packs_and_allowed_dirs(
    server_env: dict[str, str], workdir: Path, errlog: Path
) -> None:
    async with session(server_env, workdir, errlog) as client:
        data = structured(await client.call_tool("engine_status", {}))
    assert data["packs_dir"] == server_env["DRAGOMAN_PACKS_DIR"]
    assert data["glossary"]["path"] == server_env["DRAGOMAN_GLOSSARY"]
    assert data["allowed_dirs"] == [str(workdir.resolve())]
    assert data["daemon"]["alive"] is False
    assert "system" in data["platform"]


async def test_glossary_add_list_remove_round_trip_and_applies_to_translate(
    server_env: dict[str, str], workdir: Path, errlog: Path
) -> None:
    entries = [{"term": "Dragoman", "translation": "DRAGOMAN-ES", "caseSensitive": True}]
    async with session(server_env, workdir, errlog) as client:
        added = structured(await client.call_tool("glossary_add", {"entries": entries}))
        scoped = structured(
            await client.call_tool(
                "glossary_add",
                {"entries": [{"term": "tea", "translation": "té"}], "source": "en", "target": "es"},
            )
        )
        listed = structured(await client.call_tool("glossary_list", {}))
        pair = structured(await client.call_tool("glossary_list", {"source": "en", "target": "fr"}))
        used = structured(
            await client.call_tool(
                "translate", {"text": "Dragoman works offline.", "target": "es", "source": "en"}
            )
        )
        removed = structured(await client.call_tool("glossary_remove", {"terms": ["Dragoman"]}))
        again = structured(await client.call_tool("glossary_remove", {"terms": ["Dragoman"]}))
    assert added["added"] == 1 and added["path"] == server_env["DRAGOMAN_GLOSSARY"]
    tea = {
        "term": "tea",
        "translation": "té",
        "caseSensitive": False,
        "source": "eng_Latn",
        "target": "spa_Latn",
    }
    assert tea in scoped["entries"] and scoped["count"] == 2  # the scope's own entry plus the unscoped one
    assert {e["term"] for e in listed["entries"]} == {"Dragoman", "tea"}
    assert [e["term"] for e in pair["entries"]] == ["Dragoman"]  # the en->es entry does not apply to en->fr
    assert "DRAGOMAN-ES" in used["translation"]
    assert removed["removed"] == 1 and again["removed"] == 0
    assert json.loads(Path(server_env["DRAGOMAN_GLOSSARY"]).read_text(encoding="utf-8"))


# ----- errors ----------------------------------------------------------------------------------------
async def test_errors_are_tool_errors_with_actionable_text(
    server_env: dict[str, str], workdir: Path, errlog: Path
) -> None:
    async with session(server_env, workdir, errlog) as client:
        unknown = error_text(await client.call_tool("translate", {"text": "Hello.", "target": "spanlsh"}))
        pair = error_text(
            await client.call_tool("translate", {"text": "Hello.", "target": "de", "source": "en"})
        )
        too_many = error_text(
            await client.call_tool("translate_batch", {"texts": ["x"] * 65, "target": "es"})
        )
        bad_tier = error_text(
            await client.call_tool("translate", {"text": "Hello.", "target": "es", "tier": "ultra"})
        )
        ocr = error_text(await client.call_tool("ocr_translate", {"path": "scan.png", "target": "es"}))
        fake_png = workdir / "fake.png"
        fake_png.write_bytes(b"not an image at all")
        not_image = error_text(await client.call_tool("ocr_translate", {"path": "fake.png", "target": "es"}))
        still_fine = structured(
            await client.call_tool("translate", {"text": "Hi.", "target": "es", "source": "en"})
        )
    assert "spanlsh" in unknown and "spa_Latn" in unknown and "[unknown_language]" in unknown
    assert "dragoman packs install" in pair and "eng_Latn->spa_Latn" in pair
    assert "64" in too_many
    assert "tier" in bad_tier
    assert "scan.png" in ocr and "does not exist" in ocr and "[invalid_request]" in ocr
    assert "fake.png" in not_image and "[unsupported_document]" in not_image
    assert still_fine["target"] == "spa_Latn"


# ----- progress, concurrency, cancellation ----------------------------------------------------------
async def test_batch_sends_progress_when_given_a_token(
    server_env: dict[str, str], workdir: Path, errlog: Path
) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    texts = [f"Sentence number {i} is here." for i in range(40)]
    async with session(server_env, workdir, errlog) as client:
        data = structured(
            await client.call_tool(
                "translate_batch",
                {"texts": texts, "target": "es", "source": "en"},
                progress_callback=on_progress,
            )
        )
        with anyio.fail_after(5):
            while not any(total and progress >= total for progress, total, _ in seen):
                await anyio.sleep(0.01)
    assert data["count"] == 40
    values = [p for p, _, _ in seen]
    assert values == sorted(set(values)) and values[0] == 0 and len(values) >= 2
    assert seen[-1][1] == seen[-1][0] and seen[-1][2]


async def test_calls_run_concurrently_without_blocking_the_loop(
    server_env: dict[str, str], workdir: Path, errlog: Path
) -> None:
    # A rendezvous in the engine: each call waits inside the engine until the other one is in there too, so
    # both can only succeed if the server runs them at the same time and its loop stays free while one
    # waits (run one after the other, the first waits in vain and fails).
    patch = """
        import threading
        detecting, translating = threading.Event(), threading.Event()
        original_detect, original_translate = eng.Engine.detect, eng.Engine.translate
        def detect(self, text, *args, **kwargs):
            if text == "SLOW":
                detecting.set()
                if not translating.wait(60):
                    raise RuntimeError("translate never ran while detect_language was in the engine")
            return original_detect(self, text, *args, **kwargs)
        def translate(self, *args, **kwargs):
            translating.set()
            if not detecting.wait(60):
                raise RuntimeError("detect_language never ran while translate was in the engine")
            return original_translate(self, *args, **kwargs)
        eng.Engine.detect, eng.Engine.translate = detect, translate
    """
    finished: list[str] = []
    async with session(server_env, workdir, errlog, args=hooked(patch)) as client:
        structured(await client.call_tool("list_languages", {}))  # the engine exists before the race

        async def call(name: str, args: dict[str, Any]) -> None:
            structured(await client.call_tool(name, args))
            finished.append(name)

        async with anyio.create_task_group() as group:
            group.start_soon(call, "detect_language", {"text": "SLOW"})
            group.start_soon(call, "translate", {"text": "Fast one.", "target": "es", "source": "en"})
    assert sorted(finished) == ["detect_language", "translate"]


async def test_cancelling_a_call_stops_the_engine_work(
    server_env: dict[str, str], workdir: Path, errlog: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "engine-marker.txt"
    patch = f"""
        def translate_batch(self, texts, options, *, context=None):
            step = 0
            try:
                for step in range(1, 401):
                    context.report(step, 400, "working")
                    time.sleep(0.02)
            except BaseException:
                open({str(marker)!r}, "w").write(f"stopped at {{step}}")
                raise
            open({str(marker)!r}, "w").write("finished")
            return []
        eng.Engine.translate_batch = translate_batch
    """
    started = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if progress >= 3:
            started.set()

    async with session(server_env, workdir, errlog, args=hooked(patch)) as client:
        async with anyio.create_task_group() as group:

            async def call() -> None:
                await client.call_tool(
                    "translate_batch", {"texts": ["x"], "target": "es"}, progress_callback=on_progress
                )

            group.start_soon(call)
            with anyio.fail_after(30):
                await started.wait()
            group.cancel_scope.cancel()
        with anyio.fail_after(10):
            while not marker.exists():
                await anyio.sleep(0.05)
        text = marker.read_text(encoding="utf-8")
        # the session is still usable after the cancellation
        structured(await client.call_tool("detect_language", {"text": FRENCH}))
    assert text.startswith("stopped at"), text
    assert int(text.split()[-1]) < 400


# ----- stdout stays protocol-only --------------------------------------------------------------------
STRAY_PATCH = """
    original = eng.Engine.detect
    def detect(self, text):
        print("STRAY-PRINT-FROM-LIBRARY")
        os.write(1, b"STRAY-FD-WRITE\\n")
        return original(self, text)
    eng.Engine.detect = detect
"""


async def test_stray_prints_go_to_stderr_and_the_session_survives(
    server_env: dict[str, str], workdir: Path, errlog: Path
) -> None:
    async with session(server_env, workdir, errlog, args=hooked(STRAY_PATCH)) as client:
        first = structured(await client.call_tool("detect_language", {"text": FRENCH}))
        second = structured(await client.call_tool("detect_language", {"text": FRENCH}))
    assert first["flores"] == second["flores"] == "fra_Latn"
    logged = errlog.read_text(encoding="utf-8")
    assert logged.count("STRAY-PRINT-FROM-LIBRARY") == 2 and logged.count("STRAY-FD-WRITE") == 2


def _rpc(method: str, params: dict[str, Any], id_: int | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if id_ is not None:
        message["id"] = id_
    return (json.dumps(message) + "\n").encode()


def _lines_of(read: Callable[[], bytes], want: int, deadline: float) -> dict[int, dict[str, Any]]:
    """Parse JSON-RPC lines until ``want`` answers arrived; anything but JSON on stdout fails here."""
    answers: dict[int, dict[str, Any]] = {}
    while len(answers) < want and time.monotonic() < deadline:
        line = read()
        if not line:
            time.sleep(0.05)
            continue
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0"
        if "id" in message:
            answers[message["id"]] = message
    return answers


@pytest.mark.parametrize("stdout_kind", ["pipe", "file"])
def test_every_stdout_line_is_json_rpc_even_when_library_code_prints(
    server_env: dict[str, str], workdir: Path, errlog: Path, tmp_path: Path, stdout_kind: str
) -> None:
    """Raw bytes, no SDK client in between: a stray line on stdout fails this test. A pipe is served by
    dragoman's own transport; a regular file falls back to the SDK's, which must be just as clean."""
    requests = b"".join(
        [
            _rpc(
                "initialize",
                {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
                1,
            ),
            _rpc("notifications/initialized", {}),
            _rpc("tools/call", {"name": "detect_language", "arguments": {"text": FRENCH}}, 2),
            _rpc("tools/call", {"name": "translate", "arguments": {"text": "Hi.", "target": "xx-nope"}}, 3),
        ]
    )
    out_file = tmp_path / "stdout.jsonl"
    with (
        errlog.open("w", encoding="utf-8") as log,
        out_file.open("w+b") as sink,
        subprocess.Popen(
            [sys.executable, *hooked(STRAY_PATCH)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE if stdout_kind == "pipe" else sink,
            stderr=log,
            env=server_env,
            cwd=workdir,
        ) as proc,
    ):
        assert proc.stdin is not None
        proc.stdin.write(requests)
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        if proc.stdout is not None:
            answers = _lines_of(proc.stdout.readline, 3, deadline)
        else:
            with out_file.open("rb") as reader:
                answers = _lines_of(reader.readline, 3, deadline)
        proc.stdin.close()
        rest = proc.stdout.read() if proc.stdout is not None else b""  # the server exits on EOF
        assert proc.wait(timeout=30) == 0
    assert rest == b"", rest
    for line in out_file.read_bytes().splitlines():
        assert json.loads(line)["jsonrpc"] == "2.0"
    assert answers[2]["result"]["structuredContent"]["flores"] == "fra_Latn"
    assert answers[3]["result"]["isError"] is True
    logged = errlog.read_text(encoding="utf-8")
    assert "STRAY-PRINT-FROM-LIBRARY" in logged and "STRAY-FD-WRITE" in logged


async def test_dragoman_warnings_reach_the_client_logging_capability(
    server_env: dict[str, str], workdir: Path, errlog: Path
) -> None:
    patch = """
        import logging
        original = eng.Engine.detect
        def detect(self, text):
            logging.getLogger("dragoman.translation.hook").warning("HOOK-WARNING for %s", text[:5])
            logging.getLogger("dragoman.translation.hook").info("HOOK-INFO")
            return original(self, text)
        eng.Engine.detect = detect
    """
    received: list[LoggingMessageNotificationParams] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        received.append(params)

    params = StdioServerParameters(command=sys.executable, args=hooked(patch), env=server_env, cwd=workdir)
    with errlog.open("a", encoding="utf-8") as log:
        async with (
            stdio_client(params, errlog=log) as (read, write),
            ClientSession(read, write, logging_callback=on_log) as client,
        ):
            init = await client.initialize()
            assert init.capabilities.logging is not None
            structured(await client.call_tool("detect_language", {"text": FRENCH}))
            with pytest.warns(MCPDeprecationWarning):  # deprecated by the 2026-07-28 spec, still served
                await client.set_logging_level("error")
            structured(await client.call_tool("detect_language", {"text": FRENCH}))
            with pytest.warns(MCPDeprecationWarning):
                await client.set_logging_level("info")
            structured(await client.call_tool("detect_language", {"text": FRENCH}))
            with anyio.fail_after(5):
                while len(received) < 2:
                    await anyio.sleep(0.01)
            await anyio.sleep(0.2)  # room for a wrongly forwarded third record to show up
    # The second call's warning is below the client's level (error); INFO is below the server's own level
    # (WARNING unless `dragoman -v`), so it is never logged at all.
    assert [(r.level, r.data) for r in received] == [
        ("warning", "HOOK-WARNING for Bonjo"),
        ("warning", "HOOK-WARNING for Bonjo"),
    ]
    assert received[0].logger == "dragoman.translation.hook"


# ----- files ---------------------------------------------------------------------------------------------
async def test_translate_file_writes_next_to_the_input_and_never_overwrites(
    server_env: dict[str, str], workdir: Path, errlog: Path
) -> None:
    source = workdir / "notes.md"
    source.write_text(
        "# Title\n\nFirst paragraph here.\n\nSecond paragraph, two sentences. Yes.\n", encoding="utf-8"
    )
    (workdir / "report.pdf").write_bytes(b"%PDF-1.4 fake")
    (workdir / "blob.txt").write_bytes(b"\x00\x01\x02binary")
    async with session(server_env, workdir, errlog) as client:
        first = structured(
            await client.call_tool("translate_file", {"path": "notes.md", "target": "es", "source": "en"})
        )
        again = error_text(
            await client.call_tool("translate_file", {"path": "notes.md", "target": "es", "source": "en"})
        )
        forced = structured(
            await client.call_tool(
                "translate_file", {"path": str(source), "target": "es", "source": "en", "overwrite": True}
            )
        )
        onto_input = error_text(
            await client.call_tool(
                "translate_file",
                {"path": "notes.md", "target": "es", "output_path": "notes.md", "overwrite": True},
            )
        )
        pdf = error_text(await client.call_tool("translate_file", {"path": "report.pdf", "target": "es"}))
        binary = error_text(await client.call_tool("translate_file", {"path": "blob.txt", "target": "es"}))
    out = workdir / "notes.es.md"
    assert first["output_path"] == str(out) == forced["output_path"]
    assert first["input_path"] == str(source.resolve()) and first["format"] == "markdown"
    translated = out.read_text(encoding="utf-8")
    assert translated.count("\n\n") == source.read_text(encoding="utf-8").count("\n\n")
    assert "already exists" in again and "overwrite" in again
    assert "input" in onto_input
    assert source.read_text(encoding="utf-8").startswith("# Title")
    assert "report.pdf" in pdf and "[unsupported_document]" in pdf  # named .pdf, not a readable PDF
    assert "blob.txt" in binary and "[unsupported_document]" in binary


@pytest.mark.skipif(
    shutil.which("tesseract") is None, reason="apt-get install tesseract-ocr tesseract-ocr-eng"
)
async def test_ocr_translate_reads_the_image_and_answers_boxes(
    server_env: dict[str, str], workdir: Path, errlog: Path
) -> None:
    from PIL import Image, ImageDraw, ImageFont

    font_path = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
    if not font_path.is_file():
        pytest.skip("apt-get install fonts-dejavu-core")
    image = Image.new("RGB", (900, 160), "white")
    ImageDraw.Draw(image).text(
        (30, 50), "The house is red.", fill="black", font=ImageFont.truetype(str(font_path), 48)
    )
    image.save(workdir / "sign.png")
    async with session(server_env, workdir, errlog) as client:
        read = structured(
            await client.call_tool("ocr_translate", {"path": "sign.png", "target": "es", "source": "en"})
        )
        assert not (workdir / "sign.es.png").exists()
        rendered = structured(
            await client.call_tool(
                "ocr_translate", {"path": "sign.png", "target": "es", "source": "en", "render": True}
            )
        )
    assert "house" in read["text"] and read["translation"].strip() and read["provenance"] == "on-device"
    assert read["boxes"] and read["boxes"][0]["page"] == 1 and len(read["boxes"][0]["bbox"]) == 4
    assert read["output_path"] is None
    assert rendered["output_path"] == str(workdir / "sign.es.png") and (workdir / "sign.es.png").is_file()


async def test_file_tools_refuse_paths_outside_the_allowed_dirs(
    server_env: dict[str, str], workdir: Path, errlog: Path, tmp_path: Path
) -> None:
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    secret = secret_dir / "id_rsa.txt"
    secret.write_text("PRIVATE KEY", encoding="utf-8")
    (workdir / "link.txt").symlink_to(secret)
    (workdir / "ok.txt").write_text("Hello there.", encoding="utf-8")
    async with session(server_env, workdir, errlog) as client:
        direct = error_text(await client.call_tool("translate_file", {"path": str(secret), "target": "es"}))
        dotdot = error_text(
            await client.call_tool("translate_file", {"path": "../secret/id_rsa.txt", "target": "es"})
        )
        link = error_text(await client.call_tool("translate_file", {"path": "link.txt", "target": "es"}))
        out = error_text(
            await client.call_tool(
                "translate_file", {"path": "ok.txt", "target": "es", "output_path": str(secret_dir / "x.txt")}
            )
        )
        ocr = error_text(await client.call_tool("ocr_translate", {"path": str(secret), "target": "es"}))
    for text in (direct, dotdot, link, out, ocr):
        assert "outside the allowed directories" in text and str(workdir.resolve()) in text
        assert "[path_not_allowed]" in text
    assert not (secret_dir / "x.txt").exists() and not (secret_dir / "id_rsa.es.txt").exists()


async def test_client_roots_replace_the_working_directory_and_allowed_dirs_add(
    server_env: dict[str, str], workdir: Path, errlog: Path, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    extra = tmp_path / "shared"
    for directory in (root, extra):
        directory.mkdir()
        (directory / "a.txt").write_text("Good morning.", encoding="utf-8")
    (workdir / "a.txt").write_text("Good morning.", encoding="utf-8")
    env = {**server_env, "DRAGOMAN_ALLOWED_DIRS": str(extra)}
    async with session(env, workdir, errlog, roots=[root]) as client:
        in_root = structured(
            await client.call_tool("translate_file", {"path": "a.txt", "target": "es", "source": "en"})
        )
        in_extra = structured(
            await client.call_tool(
                "translate_file", {"path": str(extra / "a.txt"), "target": "es", "source": "en"}
            )
        )
        in_cwd = error_text(
            await client.call_tool("translate_file", {"path": str(workdir / "a.txt"), "target": "es"})
        )
    assert in_root["output_path"] == str(root.resolve() / "a.es.txt")
    assert in_extra["output_path"] == str(extra.resolve() / "a.es.txt")
    assert str(root.resolve()) in in_cwd and str(extra.resolve()) in in_cwd


# ----- a real translation through Apertium -----------------------------------------------------------
@pytest.mark.apertium
async def test_translate_through_apertium(server_env: dict[str, str], workdir: Path, errlog: Path) -> None:
    if not Path("/usr/share/apertium/modes/eng-spa.mode").exists():
        pytest.skip("apertium eng-spa is not installed")
    env = {**server_env, "DRAGOMAN_APERTIUM": "1", "DRAGOMAN_PACKS_DIR": str(workdir / "no-packs")}
    async with session(env, workdir, errlog) as client:
        data = structured(
            await client.call_tool("translate", {"text": "The house is red.", "target": "es", "source": "en"})
        )
    assert "casa" in data["translation"].lower()
    assert any("apertium" in hop for hop in data["route"])


# ----- the MCP Inspector's command-line mode -------------------------------------------------------
def _inspector(args: list[str], env: dict[str, str], cwd: Path) -> Any:
    # The Inspector hands the server only a default environment plus what -e gives it.
    passed = [item for k, v in env.items() if k.startswith("DRAGOMAN_") for item in ("-e", f"{k}={v}")]
    command = [
        "npx",
        "-y",
        "@modelcontextprotocol/inspector",
        *passed,
        "--cli",
        sys.executable,
        *SERVER_ARGS,
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("npx") is None, reason="npx is not installed")
def test_mcp_inspector_cli_lists_and_calls_tools(server_env: dict[str, str], workdir: Path) -> None:
    listed = _inspector(["--method", "tools/list"], server_env, workdir)
    assert {tool["name"] for tool in listed["tools"]} == TOOLS
    called = _inspector(
        ["--method", "tools/call", "--tool-name", "detect_language", "--tool-arg", f"text={FRENCH}"],
        server_env,
        workdir,
    )
    assert called.get("isError") in (None, False)
    assert called["structuredContent"]["flores"] == "fra_Latn"
    assert called["structuredContent"]["provenance"] == "on-device"


# ----- the pieces, in process ---------------------------------------------------------------------------
def test_roots_from_uris_takes_local_file_uris_only(tmp_path: Path) -> None:
    from dragoman.server.paths import allowed_roots, roots_from_uris

    uris = [(tmp_path / "with space").as_uri(), "https://example.com/x", "file://otherhost/x"]
    assert roots_from_uris(uris) == [tmp_path / "with space"]
    assert allowed_roots(None, (tmp_path,), Path("/")) == (Path("/"), tmp_path.resolve())
    assert allowed_roots([tmp_path], (tmp_path,), Path("/")) == (tmp_path.resolve(),)


async def test_job_context_forwards_in_order_and_stops_the_worker_on_cancel() -> None:
    from dragoman.errors import Cancelled
    from dragoman.server.mcp._runtime import job_context

    reports: list[float] = []
    steps: list[int] = []

    async def report(progress: float, total: float | None, message: str | None) -> None:
        reports.append(progress)

    context = job_context(report)
    assert not context.cancel.cancelled  # read off the call's worker thread: only an explicit cancel counts

    def worker() -> None:
        for step in (1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20):
            steps.append(step)
            context.report(step, 20, "step")
            time.sleep(0.02)

    stopped: list[Cancelled] = []
    with anyio.move_on_after(0.1):
        try:
            await anyio.to_thread.run_sync(worker)
        except Cancelled as exc:
            stopped.append(exc)
    assert stopped and 0 < len(steps) < 20  # the worker stopped at its next check after the cancellation
    assert context.cancel.reason == "the client cancelled the call"
    assert reports == sorted(set(reports)) and reports[0] == 1
