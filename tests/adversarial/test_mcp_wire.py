"""Hostile bytes on the MCP stdio wire: every message the server cannot use is answered, none is dropped.

JSON-RPC 2.0 asks a server to answer a line it cannot parse (-32700) or that is not a request (-32600); the
SDK drops both, so a client that sent ``id: 2`` nested 100,000 deep waited forever. Raw bytes are written to
a real ``dragoman mcp`` process: no SDK client in between would send them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from dragoman.server.mcp import _malformed
from dragoman.server.mcp._stdio import READ_CHUNK, PipeLines

HELLO = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server_env() -> dict[str, str]:
    """The test's isolated DRAGOMAN_* environment (no pack: nothing here translates); Apertium off."""
    return {**os.environ, "DRAGOMAN_APERTIUM": "0", "PYTHONUNBUFFERED": "1"}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def errlog(tmp_path: Path) -> Path:
    return tmp_path / "server-stderr.log"


def _line(message: dict[str, Any] | str | bytes) -> bytes:
    if isinstance(message, bytes):
        return message + b"\n"
    if isinstance(message, str):
        return message.encode("utf-8") + b"\n"
    return json.dumps(message).encode("utf-8") + b"\n"


def _ping(request_id: int) -> bytes:
    return _line({"jsonrpc": "2.0", "id": request_id, "method": "ping"})


def _deep(request_id: int, depth: int) -> bytes:
    head = f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call","params":{{"name":"translate",'
    return _line(head + '"arguments":{"text":' + "[" * depth + "]" * depth + ',"target":"de"}}}')


# (what is sent, the code answered, the id answered)
MALFORMED: dict[str, tuple[bytes, int, int | str | None]] = {
    "nested 100k deep, id first": (_deep(7, 100_000), -32700, 7),
    "nested 1k deep": (_deep(8, 1_000), -32700, 8),
    "not json": (_line("garbage"), -32700, None),
    "truncated object": (_line('{"jsonrpc":"2.0","id":9,"method":"pi'), -32700, 9),
    "string id, truncated": (_line('{"jsonrpc":"2.0","id":"abc","method":'), -32700, "abc"),
    "invalid utf-8, cut": (b'{"jsonrpc":"2.0","id":10,"method":"ping\xff\xfe"' + b"\n", -32700, 10),
    "array": (_line("[1, 2, 3]"), -32600, None),
    "object without method": (_line({"jsonrpc": "2.0", "id": 11, "foo": 1}), -32600, 11),
    "wrong jsonrpc version": (_line({"jsonrpc": "1.0", "id": 12, "method": "ping"}), -32600, 12),
    "id nested after params": (_line('{"params":{"a":[' + "[" * 500 + '1]}, "id": 13}'), -32700, None),
    "bare number": (_line("42"), -32600, None),
    "empty object": (_line("{}"), -32600, None),
}


def _serve(env: dict[str, str], cwd: Path, stdin: bytes, answers: int, errlog: Path) -> list[dict[str, Any]]:
    """Write ``stdin`` to a fresh server and read ``answers`` lines back (then close, check a clean exit)."""
    with (
        errlog.open("w", encoding="utf-8") as log,
        subprocess.Popen(
            [sys.executable, "-m", "dragoman.cli", "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
            cwd=cwd,
        ) as proc,
    ):
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(stdin)
        proc.stdin.flush()
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + 60
        while len(got) < answers:
            assert time.monotonic() < deadline, f"only {len(got)} of {answers} answers"
            line = proc.stdout.readline()
            assert line, f"the server closed stdout after {len(got)} answers: {errlog.read_text()}"
            got.append(json.loads(line))
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    return got


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_line_is_answered_and_the_session_goes_on(
    case: str, server_env: dict[str, str], workdir: Path, errlog: Path
) -> None:
    sent, code, request_id = MALFORMED[case]
    stdin = _line(HELLO) + _line(INITIALIZED) + sent + _ping(99)
    hello, refusal, pong = _serve(server_env, workdir, stdin, 3, errlog)
    assert hello["id"] == 0 and "result" in hello
    assert refusal["error"]["code"] == code, refusal
    assert refusal["id"] == request_id, refusal
    assert refusal["error"]["message"].startswith("Parse error" if code == -32700 else "Invalid Request")
    assert pong == {"jsonrpc": "2.0", "id": 99, "result": {}}


@pytest.mark.slow
def test_a_line_over_the_limit_is_skipped_unread_and_answered(
    server_env: dict[str, str], workdir: Path, errlog: Path
) -> None:
    """33 MiB of one string: refused by its length with its id, never parsed, and the server goes on."""
    body = b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"translate","arguments":{"text":"'
    huge = body + b"a" * (_malformed.MAX_LINE_BYTES + 1024 * 1024) + b'","target":"de"}}}'
    stdin = _line(HELLO) + _line(INITIALIZED) + _line(huge) + _ping(6)
    _, refusal, pong = _serve(server_env, workdir, stdin, 3, errlog)
    assert refusal["id"] == 5 and refusal["error"]["code"] == -32700
    assert "longer than 32 MiB" in refusal["error"]["message"]
    assert pong["id"] == 6


@pytest.mark.anyio
async def test_pipe_lines_skip_an_over_long_line_in_bounded_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader never holds much more than the limit: an endless line is dropped as it comes."""
    monkeypatch.setattr(_malformed, "MAX_LINE_BYTES", 1024 * 1024)
    bound = _malformed.MAX_LINE_BYTES + 2 * READ_CHUNK
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    lines = PipeLines(read_fd)
    result: list[str] = []
    peak = 0

    async def collect() -> None:
        result.extend([line async for line in lines])

    async def write() -> None:
        nonlocal peak
        with os.fdopen(write_fd, "wb", buffering=0) as out:
            await anyio.to_thread.run_sync(out.write, b'{"id": 3, "x": "')
            for _ in range(64):  # 4 MiB of one line, four times the limit
                await anyio.to_thread.run_sync(out.write, b"z" * (1 << 16))
                peak = max(peak, len(lines._buffer))
            await anyio.to_thread.run_sync(out.write, b'"}\n{"jsonrpc":"2.0","id":4,"method":"ping"}\n')

    async with anyio.create_task_group() as group:
        group.start_soon(collect)
        group.start_soon(write)
    os.close(read_fd)
    assert len(result) == 2
    assert result[0].startswith(_malformed.TOO_LONG_MARKER + '{"id": 3')
    assert json.loads(result[1])["id"] == 4
    assert 0 < peak <= bound
