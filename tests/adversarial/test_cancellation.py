"""Cancellation and deadlines reach the CPU work (issue 9, item 3).

The work stops within one small unit once its :class:`~dragoman.progress.JobContext` is cancelled or past its
deadline: the engine between segments, protection batches and backend calls (a text with no sentence
boundary is many small backend calls, not one that cannot stop), the file pipeline between passes, OCR
between pages; over MCP, a cancelled call (``notifications/cancelled``) and a closed stdin stop the worker
thread, and the server exits promptly. "Stopped" is measured on the work itself: the backend is called no
more (the fakes count calls), the next OCR page is never read.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import anyio
import pytest
from mcp_support import hooked, stdio_session, structured
from PIL import Image
from support import chunks_of, isolated_settings

from dragoman.documents import ocr
from dragoman.errors import Cancelled, EngineTimeout
from dragoman.limits import MAX_TEXT_CHARS
from dragoman.pipelines.ocr_translate import ocr_translate
from dragoman.pipelines.translate_file import translate_file
from dragoman.progress import JobContext
from dragoman.server._http import EnginePool
from dragoman.settings import Settings
from dragoman.testing.tinypack import build_argos_pack
from dragoman.translation.backends.ctranslate2_backend import CTranslate2Backend
from dragoman.translation.engine import CHECK_EVERY, CHUNK_CHARS, MAX_SEGMENT_CHARS, Engine
from dragoman.translation.protection import protect as real_protect
from dragoman.translation.types import Pieces, Protected, TranslateOptions

EN_ES = TranslateOptions("es", "en")
#: How long after cancellation or the deadline the work may still run (expected: one unit, well under 1 s).
STOP_BOUND = 3.0
#: How long the MCP server may take to exit once stdin closes mid-work (expected: well under 1 s).
EXIT_BOUND = 10.0


def sentences(size: int = MAX_TEXT_CHARS) -> str:
    """``size`` characters of distinct short sentences with unterminated placeholders, tags and brackets."""
    out: list[str] = []
    total = n = 0
    while total < size:
        sentence = f"Item {n} keeps {{name{n} and {{{{count <b class='x{n} &amp%(user [link{n}. "
        out.append(sentence)
        total += len(sentence)
        n += 1
    return "".join(out)[:size]


def one_sentence(size: int = MAX_TEXT_CHARS) -> str:
    """``size`` characters with no sentence boundary at all: one segment, unterminated placeholders in it."""
    words = (f"word{n} {{{{x and <b here " for n in range(size // 10))
    return "".join(words)[:size]


# ----- the engine ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    root = tmp_path_factory.mktemp("cancellation")
    build_argos_pack(root / "packs" / "translate-en_es", "en", "es")
    return isolated_settings(root)


@pytest.fixture(scope="module")
def engine(settings: Settings) -> Iterator[Engine]:
    with Engine(settings) as eng:
        eng.translate("Hello.", EN_ES)  # the pack is loaded once, outside any test's timing
        yield eng


class Calls:
    """The backend's calls (characters of each), with a hook run after the n-th call."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.at: list[float] = []
        self.hooks: dict[int, Callable[[], None]] = {}


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    spy = Calls()
    original = CTranslate2Backend.translate_batch

    def counted(self: CTranslate2Backend, batch: Sequence[Pieces], source: str, target: str) -> Any:
        spy.sizes.append(sum(len(p.source) if isinstance(p, Protected) else len(p) for s in batch for p in s))
        spy.at.append(time.monotonic())
        answer = original(self, batch, source, target)
        hook = spy.hooks.get(len(spy.sizes))
        if hook is not None:
            hook()
        return answer

    monkeypatch.setattr(CTranslate2Backend, "translate_batch", counted)
    return spy


@pytest.mark.parametrize("make", [sentences, one_sentence], ids=["sentences", "one-sentence"])
def test_cancelling_stops_the_engine_at_the_next_unit(
    engine: Engine, calls: Calls, make: Callable[[int], str]
) -> None:
    text = make(MAX_TEXT_CHARS // 2)
    context = JobContext.of()
    calls.hooks[3] = lambda: context.cancel.cancel("the client cancelled")
    with pytest.raises(Cancelled, match="the client cancelled"):
        engine.translate(text, EN_ES, context=context)
    assert len(calls.sizes) == 3  # no backend call once cancelled
    # every unit is small, even when the text is one "sentence" of half a megabyte
    assert max(calls.sizes) <= CHUNK_CHARS + MAX_SEGMENT_CHARS, calls.sizes


def test_a_long_sentence_is_many_small_units_and_translates_whole(engine: Engine, calls: Calls) -> None:
    text = one_sentence(3 * CHUNK_CHARS)
    result = engine.translate(text, EN_ES)
    assert len(calls.sizes) >= 3 and max(calls.sizes) <= CHUNK_CHARS + MAX_SEGMENT_CHARS, calls.sizes
    assert result.translation.strip() and "\n" not in result.translation


@pytest.mark.slow
def test_the_deadline_stops_the_engine_within_a_unit(engine: Engine, calls: Calls) -> None:
    text = sentences()
    context = JobContext.of(timeout=1.0)
    assert context.deadline is not None
    with pytest.raises(EngineTimeout):
        engine.translate(text, EN_ES, context=context)
    late = time.monotonic() - context.deadline
    assert late < STOP_BOUND, late
    assert len(calls.sizes) < chunks_of(text) / 2, (len(calls.sizes), chunks_of(text))


def test_cancelling_during_protection_stops_before_the_model(
    engine: Engine, calls: Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = sentences(MAX_TEXT_CHARS // 4)
    context = JobContext.of()
    protected: list[int] = []

    def protect(sentence: str, glossary: Any) -> Pieces:
        protected.append(1)
        if len(protected) == 1000:
            context.cancel.cancel()
        return real_protect(sentence, glossary)

    monkeypatch.setattr("dragoman.translation.engine.protect", protect)
    with pytest.raises(Cancelled):
        engine.translate(text, EN_ES, context=context)
    assert len(protected) <= 1000 + CHECK_EVERY and not calls.sizes


# ----- pipelines -------------------------------------------------------------------------------------
def test_cancelling_a_file_stops_the_pipeline_and_leaves_nothing(
    engine: Engine, calls: Calls, tmp_path: Path
) -> None:
    source = tmp_path / "big.txt"
    source.write_text("\n\n".join(sentences(20_000) for _ in range(20)), encoding="utf-8")
    context = JobContext.of()
    calls.hooks[2] = lambda: context.cancel.cancel()
    with pytest.raises(Cancelled):
        translate_file(engine, source, "es", source="en", context=context)
    assert len(calls.sizes) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.txt"]


def test_cancelling_ocr_stops_between_pages(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "scan.tif"
    pages = [Image.new("L", (64, 64), 255) for _ in range(8)]
    pages[0].save(source, save_all=True, append_images=pages[1:], compression="tiff_lzw")
    context = JobContext.of()
    read: list[int] = []

    def ocr_image(image: Image.Image, lang: str, **_: Any) -> list[ocr.OcrBlock]:
        read.append(1)
        if len(read) == 2:
            context.cancel.cancel()
        return []

    monkeypatch.setattr(ocr, "ocr_image", ocr_image)
    with pytest.raises(Cancelled):
        ocr_translate(engine, source, "es", source="en", render=False, context=context)
    assert len(read) == 2


# ----- the daemon's engine pool ----------------------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_abandoned_daemon_request_cancels_its_work() -> None:
    pool = EnginePool(workers=1, queue_limit=1, timeout=60)
    started, seen = threading.Event(), threading.Event()

    def work(context: JobContext) -> None:
        started.set()
        while not context.cancel.cancelled:  # a unit of work after another, checking between them
            time.sleep(0.01)
        seen.set()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(pool.run, work)
            await anyio.to_thread.run_sync(started.wait, 30)
            group.cancel_scope.cancel()  # the request's task is cancelled (client gone, daemon stopping)
        assert await anyio.to_thread.run_sync(seen.wait, STOP_BOUND)
        deadline = time.monotonic() + STOP_BOUND
        while pool.in_flight and time.monotonic() < deadline:
            await anyio.sleep(0.01)
        assert pool.in_flight == 0
    finally:
        pool.shutdown()


# ----- MCP over stdio --------------------------------------------------------------------------------
@pytest.fixture
def mcp_env(tmp_path: Path, tiny_argos_pack: Path, packs_dir: Path) -> dict[str, str]:
    """The server's environment: the tiny en->es pack installed, Apertium off, ``tmp_path`` allowed."""
    shutil.copytree(tiny_argos_pack, packs_dir / tiny_argos_pack.name)
    env = dict(os.environ)
    env.update(
        DRAGOMAN_APERTIUM="0", DRAGOMAN_PORT="9", PYTHONUNBUFFERED="1", DRAGOMAN_ALLOWED_DIRS=str(tmp_path)
    )
    return env


#: Counts the backend's calls of the server process in a file, one line each.
COUNT_PATCH = """
    from dragoman.translation.backends.ctranslate2_backend import CTranslate2Backend
    _original = CTranslate2Backend.translate_batch
    def _counted(self, batch, source, target):
        with open({path!r}, "a") as f:
            f.write("call\\n")
        return _original(self, batch, source, target)
    CTranslate2Backend.translate_batch = _counted
"""


def _count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


async def _settled(counter: Path) -> int:
    """The call count once it stops growing: unchanged over a window longer than one unit of work (a few
    tenths of a second here), reached within ``STOP_BOUND`` plus a window or two."""
    window = 1.5
    with anyio.fail_after(STOP_BOUND + 2 * window):
        while True:
            before = _count(counter)
            await anyio.sleep(window)
            if _count(counter) == before:
                return before


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("tool", ["translate", "translate_file"])
async def test_mcp_cancelled_call_stops_the_work(mcp_env: dict[str, str], tmp_path: Path, tool: str) -> None:
    counter = tmp_path / "calls.txt"
    text = sentences()
    if tool == "translate":
        arguments: dict[str, Any] = {"text": text, "target": "es", "source": "en"}
    else:
        document = tmp_path / "big.txt"
        document.write_text(text, encoding="utf-8")
        arguments = {"path": str(document), "target": "es", "source": "en"}
    args = hooked(COUNT_PATCH.format(path=str(counter)))
    async with stdio_session(mcp_env, tmp_path, tmp_path / "stderr.log", args=args) as client:
        async with anyio.create_task_group() as group:
            group.start_soon(client.call_tool, tool, arguments)
            with anyio.fail_after(120):
                while _count(counter) < 2:
                    await anyio.sleep(0.02)
            group.cancel_scope.cancel()  # the SDK sends notifications/cancelled
        made = await _settled(counter)
        # the server still answers, and its engine is free for the next call (one backend call)
        structured(await client.call_tool("translate", {"text": "Hello.", "target": "es", "source": "en"}))
        await anyio.sleep(1.0)
        later = _count(counter)
    assert made < chunks_of(text) / 2, (made, chunks_of(text))
    assert later == made + 1, (made, later)
    assert not (tmp_path / "big.es.txt").exists()


def _send(pipe: IO[bytes], message: dict[str, Any]) -> None:
    pipe.write(json.dumps(message).encode("utf-8") + b"\n")
    pipe.flush()


@pytest.mark.slow
def test_mcp_server_exits_promptly_when_stdin_closes_mid_work(
    mcp_env: dict[str, str], tmp_path: Path
) -> None:
    counter = tmp_path / "calls.txt"
    text = sentences()
    command = [sys.executable, *hooked(COUNT_PATCH.format(path=str(counter)))]
    with (tmp_path / "stderr.log").open("wb") as errlog:
        server = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, env=mcp_env, cwd=tmp_path
        )
    assert server.stdin is not None and server.stdout is not None
    try:
        _send(
            server.stdin,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"},
                },
            },
        )
        assert json.loads(server.stdout.readline())["id"] == 1
        _send(server.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        arguments = {"text": text, "target": "es", "source": "en"}
        call = {"name": "translate", "arguments": arguments}
        _send(server.stdin, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        deadline = time.monotonic() + 120
        while _count(counter) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _count(counter) >= 2
        closed = time.monotonic()
        server.stdin.close()
        code = server.wait(timeout=60)
        took = time.monotonic() - closed
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        server.stdout.close()
        if not server.stdin.closed:
            server.stdin.close()
    made = _count(counter)
    assert code == 0
    assert took < EXIT_BOUND, took
    assert made < chunks_of(text) / 2, (made, chunks_of(text))
