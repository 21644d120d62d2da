"""One input must never stall everyone (issue 9, item 1, the symptom; item 3, deadlines reach the work).

While the largest request the spec allows (one text of ``MAX_TEXT_CHARS`` characters, full of unterminated
placeholders, tags and entities) runs through a front door, that front door keeps answering: the daemon's
``/health`` and an MCP ``ping`` over stdio answer within a generous bound, and the daemon's 504 deadline
fires near its configured time, then the work behind it stops (the engine's backend is no longer called).

Bounds are several times what is expected (a few milliseconds for ``/health`` and ``ping``), as the machine
running the suite is noisy; what they catch is a stall of seconds (a scanner holding the GIL, work that
ignores its deadline).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp_support import hooked, stdio_session, structured
from support import chunks_of, isolated_settings

from dragoman.limits import MAX_TEXT_CHARS
from dragoman.server.daemon.app import create_app
from dragoman.settings import Settings
from dragoman.testing.daemon import BackgroundDaemon
from dragoman.testing.tinypack import build_argos_pack
from dragoman.translation.backends.ctranslate2_backend import CTranslate2Backend
from dragoman.translation.engine import Engine
from dragoman.translation.types import Pieces

#: How long ``/health`` or ``ping`` may take while the largest request runs (expected: milliseconds).
ANSWER_BOUND = 2.0
#: The daemon's request timeout in the deadline test, and how late its 504 may come.
DEADLINE = 1.5
DEADLINE_SLACK = 5.0
#: The least time a backend call takes in the deadline test (a base-size pack's call takes 0.1-1 s).
CALL_SECONDS = 0.08
#: Backend calls of the large MCP call during which pings are sent.
PINGED_CALLS = 8


def adversarial_text(size: int = MAX_TEXT_CHARS) -> str:
    """``size`` characters: first long runs, with no sentence boundary, of what made the scanners quadratic
    (unterminated comments and placeholders, a URL before a run of brackets, a run of inner whitespace),
    then distinct short sentences, each opening placeholders, a tag, an entity and a bracket it never
    closes, so that every segment is real work for the model."""
    runs = [
        "<!-- a " * 3000,
        "see http://example.com/a" + ")" * 20000,
        "a" + " \t" * 10000 + "b.",
        "{{name " * 3000,
        "{" * 20000,
    ]
    parts = [run + "\n\n" for run in runs]
    total = sum(len(part) for part in parts)
    n = 0
    while total < size:
        sentence = f"Item {n} keeps {{name{n} and {{{{count <b class='x{n} &amp%(user [link{n}. "
        parts.append(sentence)
        total += len(sentence)
        n += 1
    return "".join(parts)[:size]


# ----- the daemon ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    root = tmp_path_factory.mktemp("availability")
    build_argos_pack(root / "packs" / "translate-en_es", "en", "es")
    return isolated_settings(root)


@pytest.fixture(scope="module")
def engine(settings: Settings) -> Iterator[Engine]:
    with Engine(settings) as eng:
        yield eng


@pytest.fixture
def backend_calls(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The instants at which the CTranslate2 backend is called (the engine's units of model work). Each
    call takes at least :data:`CALL_SECONDS`, as a real pack's would: the tiny pack is so fast that, on a
    quick machine, most of the text was translated before the deadline and the test read that as work
    not stopped."""
    calls: list[float] = []
    original = CTranslate2Backend.translate_batch

    def counted(self: CTranslate2Backend, batch: Sequence[Pieces], source: str, target: str) -> Any:
        calls.append(time.monotonic())
        time.sleep(CALL_SECONDS)
        return original(self, batch, source, target)

    monkeypatch.setattr(CTranslate2Backend, "translate_batch", counted)
    return calls


def _in_flight(client: httpx.Client) -> int:
    answer = client.get("/health")
    assert answer.status_code == 200
    return int(answer.json()["engine"]["queue"]["in_flight"])


@pytest.mark.slow
def test_health_answers_while_the_largest_request_runs_and_its_deadline_stops_it(
    engine: Engine, settings: Settings, backend_calls: list[float]
) -> None:
    text = adversarial_text()
    app = create_app(engine, settings, max_workers=1, queue_limit=4, request_timeout=DEADLINE)
    answer: dict[str, Any] = {}
    with BackgroundDaemon(app) as running, httpx.Client(base_url=running.url, timeout=120) as client:
        warm = client.post("/translate", json={"text": "Hello.", "target": "es", "source": "en"})
        assert warm.status_code == 200  # the pack is loaded: the deadline below is spent on the text

        def post() -> None:
            with httpx.Client(base_url=running.url, timeout=120) as own:
                started = time.monotonic()
                got = own.post("/translate", json={"text": text, "target": "es", "source": "en"})
                answer.update(status=got.status_code, body=got.json(), seconds=time.monotonic() - started)
                answer["at"] = time.monotonic()

        worker = threading.Thread(target=post)
        before = len(backend_calls)
        worker.start()
        latencies: list[float] = []
        while worker.is_alive():
            asked = time.monotonic()
            assert client.get("/health").status_code == 200
            latencies.append(time.monotonic() - asked)
            time.sleep(0.02)
        worker.join()
        # the work behind the 504 stops: its thread is freed and the backend is called no more
        stop_by = time.monotonic() + 30
        while _in_flight(client) and time.monotonic() < stop_by:
            time.sleep(0.02)
        freed = time.monotonic()
        assert _in_flight(client) == 0
        calls = len(backend_calls) - before
        time.sleep(0.5)
        assert len(backend_calls) - before == calls
    assert answer["status"] == 504 and answer["body"]["code"] == "timeout", answer
    assert DEADLINE <= answer["seconds"] < DEADLINE + DEADLINE_SLACK, answer["seconds"]
    assert len(latencies) >= 5 and max(latencies) < ANSWER_BOUND, sorted(latencies)[-5:]
    assert freed - answer["at"] < ANSWER_BOUND
    assert calls < chunks_of(text) / 2, (calls, chunks_of(text))


# ----- MCP over stdio --------------------------------------------------------------------------------
@pytest.fixture
def mcp_env(tmp_path: Path, tiny_argos_pack: Path, packs_dir: Path) -> dict[str, str]:
    """The server's environment: the tiny en->es pack installed, Apertium off."""
    shutil.copytree(tiny_argos_pack, packs_dir / tiny_argos_pack.name)
    env = dict(os.environ)
    env.update(DRAGOMAN_APERTIUM="0", DRAGOMAN_PORT="9", PYTHONUNBUFFERED="1")
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


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_mcp_ping_answers_while_the_largest_translate_runs(
    mcp_env: dict[str, str], tmp_path: Path
) -> None:
    counter = tmp_path / "calls.txt"
    text = adversarial_text()
    args = hooked(COUNT_PATCH.format(path=str(counter)))
    async with stdio_session(mcp_env, tmp_path, tmp_path / "stderr.log", args=args) as client:
        structured(await client.call_tool("translate", {"text": "Hello.", "target": "es", "source": "en"}))
        latencies: list[float] = []
        async with anyio.create_task_group() as group:
            arguments = {"text": text, "target": "es", "source": "en"}
            group.start_soon(client.call_tool, "translate", arguments)
            # pings through the scanning of the whole text and several model calls, then the call is
            # cancelled (finishing it would only repeat the same units of work)
            with anyio.fail_after(300):
                while _count(counter) < PINGED_CALLS:
                    asked = time.monotonic()
                    await client.send_ping()
                    latencies.append(time.monotonic() - asked)
                    await anyio.sleep(0.02)
            group.cancel_scope.cancel()
    assert len(latencies) >= 5 and max(latencies) < ANSWER_BOUND, sorted(latencies)[-5:]
