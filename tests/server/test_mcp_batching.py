"""MCP tool calls feed the engine's dynamic batcher: concurrent ``translate`` calls share backend calls.

The SDK handles each request in a task of its own and the tools run the engine on worker threads, so calls
made at once meet in the batcher. The CTranslate2 backend's calls are recorded; the first one is held so
that the calls behind it queue deterministically.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp_support import in_process, structured

from dragoman.translation.backends.base import joined
from dragoman.translation.backends.ctranslate2_backend import CTranslate2Backend
from dragoman.translation.types import Pieces

pytestmark = pytest.mark.anyio

TEXTS = [f"The house number {n} is red." for n in range(8)]


async def test_concurrent_translate_calls_share_backend_calls(
    server_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, ...]] = []
    held, release = threading.Event(), threading.Event()
    original = CTranslate2Backend.translate_batch

    def recorded(self: CTranslate2Backend, batch: Sequence[Pieces], source: str, target: str) -> Any:
        calls.append(tuple(joined(p) for p in batch))
        if not held.is_set():
            held.set()
            assert release.wait(30)
        return original(self, batch, source, target)

    env = {**server_env, "DRAGOMAN_INTER_THREADS": "1"}  # one backend call at a time
    async with in_process(env) as client:
        alone = {
            t: structured(await client.call_tool("translate", {"text": t, "target": "es", "source": "en"}))
            for t in TEXTS
        }
        monkeypatch.setattr(CTranslate2Backend, "translate_batch", recorded)
        got: dict[str, dict[str, Any]] = {}

        async def translate(text: str) -> None:
            result = await client.call_tool("translate", {"text": text, "target": "es", "source": "en"})
            got[text] = structured(result)

        async with anyio.create_task_group() as group:
            group.start_soon(translate, TEXTS[0])
            assert await anyio.to_thread.run_sync(held.wait, 15)
            for text in TEXTS[1:]:
                group.start_soon(translate, text)
            deadline = time.monotonic() + 15
            while True:
                batching = structured(await client.call_tool("engine_status", {}))["batching"]
                if batching["queue_depth"] == len(TEXTS) - 1:
                    break
                assert time.monotonic() < deadline, batching
                await anyio.sleep(0.01)
            release.set()
        status = structured(await client.call_tool("engine_status", {}))["batching"]
    assert {t: got[t]["translation"] for t in TEXTS} == {t: alone[t]["translation"] for t in TEXTS}
    assert calls == [(TEXTS[0],), tuple(calls[1])] and sorted(calls[1]) == sorted(TEXTS[1:])
    assert status["merged_batches"] >= 1 and status["queue_depth"] == 0
