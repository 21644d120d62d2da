"""``dragoman mcp`` as a real process: what an in-process client cannot show.

Start-up through the CLI (settings from the environment, DRAGOMAN_ALLOWED_DIRS and never the working
directory as the allowed directories,
no pack loaded before the first call), cancellation over the wire, stdout that carries nothing but JSON-RPC
whatever library code prints, and a third-party client (the MCP Inspector's command-line mode). Hooks that
need misbehaving library code (a stray print, an endless engine call) patch the engine in the server
subprocess only, through a ``python -c`` wrapper; the server code itself has no test hooks.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_support import FRENCH, SERVER_ARGS, TOOLS, error_text, hooked, stdio_session, structured

from dragoman import __version__

pytestmark = pytest.mark.anyio


# ----- start-up --------------------------------------------------------------------------------------
async def test_initialize_loads_no_pack_and_packs_load_on_first_use(
    server_env: dict[str, str], workdir: Path, errlog: Path, tmp_path: Path
) -> None:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    env = {**server_env, "DRAGOMAN_ALLOWED_DIRS": str(allowed)}
    async with stdio_session(env, workdir, errlog) as client:
        init = client.initialize_result
        tools = {tool.name for tool in (await client.list_tools()).tools}
        before = structured(await client.call_tool("engine_status", {}))
        result = structured(
            await client.call_tool("translate", {"text": "Hello.", "target": "es", "source": "en"})
        )
        after = structured(await client.call_tool("engine_status", {}))
        unknown = error_text(await client.call_tool("translate", {"text": "Hello.", "target": "spanlsh"}))
    assert init is not None
    assert (init.server_info.name, init.server_info.version) == ("dragoman", __version__)
    assert init.instructions and "On-device translation" in init.instructions
    assert init.capabilities.tools is not None and init.capabilities.logging is not None
    assert tools == TOOLS
    assert [p["loaded"] for p in before["packs"]] == [False]
    assert [p["loaded"] for p in after["packs"]] == [True]
    assert result["route"] and before["packs"][0]["id"] in result["route"][0]
    # the CLI reads its settings from the environment; its working directory is never allowed by itself
    assert before["packs_dir"] == server_env["DRAGOMAN_PACKS_DIR"]
    assert before["glossary"]["path"] == server_env["DRAGOMAN_GLOSSARY"]
    assert before["allowed_dirs"] == [str(allowed.resolve())]
    assert "[unknown_language]" in unknown


# ----- cancellation ----------------------------------------------------------------------------------
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

    async with stdio_session(server_env, workdir, errlog, args=hooked(patch)) as client:
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
    async with stdio_session(server_env, workdir, errlog, args=hooked(STRAY_PATCH)) as client:
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


# ----- speech (issue 14) -----------------------------------------------------------------------------
async def test_speak_over_stdio_writes_a_wav_and_stops_when_cancelled(
    server_env: dict[str, str], workdir: Path, errlog: Path, tmp_path: Path
) -> None:
    """A real render through the process, then a long render cancelled over the wire: the synthesizer
    stops before its next sentence and no file is written."""
    marker = tmp_path / "sentences.txt"
    patch = f"""
        import dragoman.speech.tts.synth as synth
        original = synth.Synthesizer._render
        def _render(self, plan, index):
            if len(plan.sentences) > 10:
                with open({str(marker)!r}, "a") as out:
                    out.write(f"{{index}}\\n")
                time.sleep(0.1)
            return original(self, plan, index)
        synth.Synthesizer._render = _render
    """
    started = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if progress >= 2:
            started.set()

    long_text = " ".join(f"Sentence {n} is here." for n in range(60))
    env = {**server_env, "DRAGOMAN_ALLOWED_DIRS": str(workdir)}
    async with stdio_session(env, workdir, errlog, args=hooked(patch)) as client:
        spoken = structured(await client.call_tool("speak", {"text": "Hello there.", "language": "en"}))
        async with anyio.create_task_group() as group:

            async def call() -> None:
                await client.call_tool(
                    "speak", {"text": long_text, "language": "en"}, progress_callback=on_progress
                )

            group.start_soon(call)
            with anyio.fail_after(60):
                await started.wait()
            group.cancel_scope.cancel()
        at_cancel = len(marker.read_text(encoding="utf-8").split())
        # the count once it stops growing (unchanged over a second; polled, not one fixed pause, which a busy
        # machine could outlast), then unchanged over one more second
        count, before = at_cancel, -1
        with anyio.fail_after(60):
            while count != before:
                before = count
                await anyio.sleep(1.0)
                count = len(marker.read_text(encoding="utf-8").split())
        await anyio.sleep(1.0)
        later = len(marker.read_text(encoding="utf-8").split())
        listed = structured(await client.call_tool("list_voices", {}))  # the session is still usable
    assert Path(spoken["path"]).is_file() and spoken["duration_seconds"] > 0.3
    # stopped within a few sentences of the cancel (in sentences, not seconds: load slows both alike)
    assert 2 <= at_cancel <= count <= at_cancel + 5 and count < 60 and later == count, (
        at_cancel,
        count,
        later,
    )
    assert sorted(p.name for p in workdir.glob("*.wav")) == [Path(spoken["path"]).name]
    assert len(listed["voices"]) == 10
