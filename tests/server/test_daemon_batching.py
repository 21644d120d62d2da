"""The daemon feeds the engine's dynamic batcher: concurrent requests meet there and share backend calls.

The daemon's pool lets ``workers`` requests do engine work at once, but a request waiting in the batcher (or
running a batch there) gives its place up, so that every admitted request can reach the batcher and be
merged. Translations are real (the tiny CTranslate2 pack, en->es); the backend's calls are recorded, and the
first one can be held so that the requests behind it queue deterministically.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import support

from dragoman.errors import BackendError
from dragoman.languages.types import Language
from dragoman.limits import Provenance
from dragoman.progress import JobContext
from dragoman.server._http import EnginePool
from dragoman.server.daemon.app import create_app
from dragoman.settings import Settings
from dragoman.testing.daemon import BackgroundDaemon
from dragoman.translation.backends.base import joined
from dragoman.translation.backends.ctranslate2_backend import CTranslate2Backend
from dragoman.translation.batcher import Batcher, BatchLimits
from dragoman.translation.engine import Engine
from dragoman.translation.types import BatchOutput, Pieces, TranslateOptions, TranslationResult

TEXTS = [f"The house number {n} is red." for n in range(8)]


def wait_until(condition: Callable[[], bool]) -> None:
    support.wait_until(condition, timeout=15.0)  # a daemon's threads: a little more room than in-process


class Recorder:
    """Every call of the CTranslate2 backend (its segments' texts); while ``hold`` is set, the first call
    made waits for ``release``. A segment with 'Explode' fails its call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.hold = False
        self.held = threading.Event()
        self.release = threading.Event()
        self.lock = threading.Lock()

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        original = CTranslate2Backend.translate_batch
        recorder = self

        def recorded(self: CTranslate2Backend, batch: Sequence[Pieces], source: str, target: str) -> Any:
            texts = tuple(joined(p) for p in batch)
            with recorder.lock:
                recorder.calls.append(texts)
                first = recorder.hold and not recorder.held.is_set()
                if first:
                    recorder.held.set()
            if first:
                assert recorder.release.wait(30)
            if any("Explode" in t for t in texts):
                raise BackendError("the backend cannot translate 'Explode'")
            return original(self, batch, source, target)

        monkeypatch.setattr(CTranslate2Backend, "translate_batch", recorded)


@pytest.fixture
def engine(packs_dir: Path, tiny_argos_pack: Path) -> Iterator[Engine]:
    shutil.copytree(tiny_argos_pack, packs_dir / "translate-en_es")
    # One CTranslate2 call at a time: the requests behind a held call all queue for the next one.
    settings = Settings.from_env(
        {"DRAGOMAN_PACKS_DIR": str(packs_dir), "DRAGOMAN_APERTIUM": "0", "DRAGOMAN_INTER_THREADS": "1"}
    )
    with Engine(settings) as eng:
        yield eng


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = Recorder()
    recorder.install(monkeypatch)
    return recorder


def alone(engine: Engine, texts: Sequence[str]) -> dict[str, str]:
    """Each text translated on its own (the answers a merged call must give back)."""
    options = TranslateOptions("es", "en")
    return {t: engine.translate(t, options).translation for t in texts}


class Pending:
    """Requests sent at once, each from its own thread and connection; :meth:`wait` gives their answers."""

    def __init__(self, url: str, bodies: Sequence[dict[str, Any]]) -> None:
        def post(payload: dict[str, Any]) -> httpx.Response:
            with httpx.Client(base_url=url, timeout=60) as own:
                return own.post("/translate", json=payload)

        pool = ThreadPoolExecutor(max_workers=len(bodies))
        self.futures = [pool.submit(post, payload) for payload in bodies]
        pool.shutdown(wait=False)

    def wait(self) -> list[httpx.Response]:
        return [f.result(60) for f in self.futures]


def batching(client: httpx.Client) -> dict[str, Any]:
    answer = client.get("/health")
    assert answer.status_code == 200
    body: dict[str, Any] = answer.json()["engine"]
    return {**body["batching"], "in_flight": body["queue"]["in_flight"]}


def body(text: str | None = None, texts: Sequence[str] | None = None) -> dict[str, Any]:
    if texts is not None:
        return {"texts": list(texts), "source": "en", "target": "es"}
    return {"text": text, "source": "en", "target": "es"}


# ----- requests meet in the batcher ------------------------------------------------------------------
def test_eight_concurrent_single_text_requests_share_backend_calls(
    engine: Engine, recorder: Recorder
) -> None:
    expected = alone(engine, TEXTS)
    app = create_app(engine, None, max_workers=2, queue_limit=64, request_timeout=60)
    recorder.calls.clear()
    recorder.hold = True
    with BackgroundDaemon(app) as running, httpx.Client(base_url=running.url, timeout=60) as c:
        before = batching(c)["batches"]
        answers = Pending(running.url, [body(t) for t in TEXTS])
        assert recorder.held.wait(15)
        # with 2 engine places, all 7 other requests still reach the batcher's queue (they wait there)
        wait_until(lambda: batching(c)["queue_depth"] == len(TEXTS) - 1)
        assert batching(c)["in_flight"] == len(TEXTS)
        recorder.release.set()
        got = [a.json() for a in answers.wait()]
        assert [g["translation"] for g in got] == [expected[t] for t in TEXTS]
        assert len(recorder.calls) == 2  # the held call, and one call for the 7 others
        assert sorted(recorder.calls[1]) == sorted(set(TEXTS) - set(recorder.calls[0]))
        stats = batching(c)
        assert stats["batches"] - before == 2 and stats["merged_batches"] >= 1
        assert stats["queue_depth"] == 0 and stats["in_flight"] == 0


def test_a_failing_request_in_a_merged_call_gets_its_error_and_the_others_their_translations(
    engine: Engine, recorder: Recorder
) -> None:
    texts = [*TEXTS[:4], "Explode the house.", *TEXTS[4:6]]
    expected = alone(engine, [t for t in texts if "Explode" not in t])
    app = create_app(engine, None, max_workers=2, queue_limit=64, request_timeout=60)
    recorder.calls.clear()
    recorder.hold = True
    with BackgroundDaemon(app) as running, httpx.Client(base_url=running.url, timeout=60) as c:
        blocker = Pending(running.url, [body("The blocker is here.")])
        assert recorder.held.wait(15)
        answers = Pending(running.url, [body(t) for t in texts])
        wait_until(lambda: batching(c)["queue_depth"] == len(texts))
        recorder.release.set()
        assert blocker.wait()[0].status_code == 200
        for text, answer in zip(texts, answers.wait(), strict=True):
            if "Explode" in text:
                assert answer.status_code == 502 and answer.json()["code"] == "backend_error"
                assert "Explode" in answer.json()["error"]
            else:
                assert answer.status_code == 200 and answer.json()["translation"] == expected[text]
        assert len(recorder.calls[1]) == len(texts)  # they were merged into one call, which failed
        assert batching(c)["reruns"] >= len(texts)  # so each request's part ran again on its own


def test_single_text_requests_share_the_next_call_with_a_big_request(
    engine: Engine, recorder: Recorder
) -> None:
    big = [f"Sentence number {n} of the long document." for n in range(60)]  # spec: at most 64 texts
    singles = TEXTS[:6]
    app = create_app(engine, None, max_workers=2, queue_limit=64, request_timeout=60)
    recorder.calls.clear()
    recorder.hold = True
    with BackgroundDaemon(app) as running, httpx.Client(base_url=running.url, timeout=60) as c:
        blocker = Pending(running.url, [body("The blocker is here.")])
        assert recorder.held.wait(15)
        large = Pending(running.url, [body(texts=big)])
        wait_until(lambda: batching(c)["queue_depth"] >= 1)  # the big request queues first
        small = Pending(running.url, [body(t) for t in singles])
        wait_until(lambda: batching(c)["waiting_callers"] == 1 + len(singles))
        recorder.release.set()
        assert blocker.wait()[0].status_code == 200
        assert all(a.status_code == 200 for a in small.wait())
        assert large.wait()[0].status_code == 200
    nxt = recorder.calls[1]
    # round-robin: the singles are in the next call, beside the big request's first 58 texts (64 in all)
    assert set(singles) <= set(nxt) and len(nxt) == 64


def test_queued_requests_past_their_deadline_answer_504_and_leave_the_queue(
    engine: Engine, recorder: Recorder
) -> None:
    app = create_app(engine, None, max_workers=2, queue_limit=64, request_timeout=1.0)
    recorder.calls.clear()
    recorder.hold = True
    with BackgroundDaemon(app) as running, httpx.Client(base_url=running.url, timeout=60) as c:
        blocker = Pending(running.url, [body("The blocker is here.")])
        assert recorder.held.wait(15)
        late = Pending(running.url, [body(t) for t in TEXTS[:4]])
        for answer in late.wait():
            assert answer.status_code == 504 and answer.json()["code"] == "timeout"
        # while the held call still runs, the abandoned requests have left the queue and the pool
        wait_until(lambda: batching(c)["queue_depth"] == 0 and batching(c)["in_flight"] == 1)
        assert batching(c)["waiting_callers"] == 0
        recorder.release.set()
        assert blocker.wait()[0].status_code == 504
        wait_until(lambda: batching(c)["in_flight"] == 0)
        assert len(recorder.calls) == 1  # nothing of theirs was translated after they were abandoned
        recorder.hold = False
        assert c.post("/translate", json=body("The house is red.")).status_code == 200


def test_requests_waiting_in_the_batcher_count_against_the_admission_bound(
    engine: Engine, recorder: Recorder
) -> None:
    app = create_app(engine, None, max_workers=1, queue_limit=2, request_timeout=60)
    recorder.hold = True
    with BackgroundDaemon(app) as running, httpx.Client(base_url=running.url, timeout=60) as c:
        blocker = Pending(running.url, [body("The blocker is here.")])
        assert recorder.held.wait(15)
        queued = Pending(running.url, [body(t) for t in TEXTS[:2]])
        wait_until(lambda: batching(c)["queue_depth"] == 2)
        refused = c.post("/translate", json=body("One too many."))
        assert refused.status_code == 503 and refused.json()["code"] == "saturated"
        assert int(refused.headers["retry-after"]) >= 1
        recorder.release.set()
        assert blocker.wait()[0].status_code == 200
        assert [a.status_code for a in queued.wait()] == [200, 200]


def test_the_batch_budget_and_window_are_settings_shown_in_health(
    packs_dir: Path, tiny_argos_pack: Path, recorder: Recorder
) -> None:
    shutil.copytree(tiny_argos_pack, packs_dir / "translate-en_es")
    settings = Settings.from_env(
        {
            "DRAGOMAN_PACKS_DIR": str(packs_dir),
            "DRAGOMAN_APERTIUM": "0",
            "DRAGOMAN_INTER_THREADS": "1",
            "DRAGOMAN_BATCH_MAX_SEGMENTS": "3",
            "DRAGOMAN_BATCH_MAX_CHARS": "5000",
            "DRAGOMAN_BATCH_MAX_QUEUED": "7",
            "DRAGOMAN_BATCH_WINDOW_MS": "7.5",
        }
    )
    with Engine(settings) as engine:
        app = create_app(engine, None, max_workers=2, queue_limit=64, request_timeout=60)
        recorder.hold = True
        with BackgroundDaemon(app) as running, httpx.Client(base_url=running.url, timeout=60) as c:
            shown = batching(c)
            assert (shown["max_segments"], shown["max_chars"], shown["max_queued"]) == (3, 5000, 7)
            assert shown["window_ms"] == 7.5
            blocker = Pending(running.url, [body("The blocker is here.")])
            assert recorder.held.wait(15)
            queued = Pending(running.url, [body(t) for t in TEXTS[:7]])
            wait_until(lambda: batching(c)["queue_depth"] == 7)
            refused = c.post("/translate", json=body("One too many."))  # 7 segments wait: the queue is full
            assert refused.status_code == 503 and refused.json()["code"] == "saturated"
            recorder.release.set()
            assert blocker.wait()[0].status_code == 200
            assert [a.status_code for a in queued.wait()] == [200] * 7
        # the 7 queued texts went in calls of at most 3 segments
        assert sorted(len(call) for call in recorder.calls[1:]) == [1, 3, 3]
        assert engine.status()["batching"]["max_segments"] == 3  # what engine_status shows


# ----- the pool's places -----------------------------------------------------------------------------
class FakeBackend:
    """A coalescing backend whose first call waits for ``gate``."""

    coalesces = True
    parallel_calls = 1

    def __init__(self) -> None:
        self.pack_id = "fake"
        self.calls: list[tuple[str, ...]] = []
        self.gate = threading.Event()
        self.entered = threading.Event()

    def translate_batch(self, batch: Sequence[Pieces], source: str, target: str) -> BatchOutput:
        self.calls.append(tuple(joined(p) for p in batch))
        self.entered.set()
        if len(self.calls) == 1:
            assert self.gate.wait(30)
        return BatchOutput(tuple(f"<{joined(p)}>" for p in batch))

    def close(self) -> None:
        return None


def test_a_request_waiting_in_the_batcher_gives_its_engine_place_to_another() -> None:
    batcher = Batcher(BatchLimits(window=0))
    backend = FakeBackend()
    pool = EnginePool(workers=1, queue_limit=8, timeout=30)

    def work(text: str) -> Callable[[JobContext], str]:
        def run(context: JobContext) -> str:
            return batcher.translate(backend, [(text,)], "en", "es", context).texts[0]

        return run

    async def main() -> list[str]:
        first = asyncio.ensure_future(pool.run(work("first")))
        await asyncio.to_thread(backend.entered.wait, 30)
        rest = [asyncio.ensure_future(pool.run(work(f"t{n}"))) for n in range(5)]
        while batcher.stats()["queue_depth"] < 5:  # one place, yet all five reach the queue
            await asyncio.sleep(0.005)
        backend.gate.set()
        return list(await asyncio.gather(first, *rest))

    try:
        assert asyncio.run(main()) == ["<first>", *(f"<t{n}>" for n in range(5))]
    finally:
        pool.shutdown()
    # The five merged into one call; the order they reached the queue in is the threads' (not the test's).
    assert len(backend.calls) == 2 and backend.calls[0] == ("first",)
    assert sorted(backend.calls[1]) == [f"t{n}" for n in range(5)]


class CountingEngine:
    """An engine without a batcher: counts how many requests are inside it at once. Each call is held until
    two requests have been inside at once (what two workers allow: overlap is certain, whatever the
    scheduler), then for ``HOLD`` seconds more, time for any request beyond the bound to come in too."""

    provenance: Provenance = "on-device"
    HOLD = 0.2

    def __init__(self) -> None:
        self.started = time.time()
        self.now = 0
        self.most = 0
        self.lock = threading.Lock()
        self.met = threading.Condition(self.lock)

    def pack_ids(self) -> list[str]:
        return []

    def loaded_packs(self) -> list[str]:
        return []

    def translate(
        self, text: str, options: TranslateOptions, *, context: JobContext | None = None
    ) -> TranslationResult:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.met.notify_all()
            assert self.met.wait_for(lambda: self.most >= 2, timeout=20)  # a second request came in
        time.sleep(self.HOLD)
        with self.lock:
            self.now -= 1
        return TranslationResult(text.upper(), "eng_Latn", "spa_Latn", "on-device", 0.0, options=options)

    def translate_batch(
        self, texts: Sequence[str], options: TranslateOptions, *, context: JobContext | None = None
    ) -> list[TranslationResult]:
        return [self.translate(t, options) for t in texts]

    def languages(self, *, installed_only: bool = True) -> list[Language]:
        return []


def test_work_outside_the_batcher_is_still_bounded_by_the_workers() -> None:
    """Eight requests at once, two workers: exactly two inside the engine at once (each call is held until
    two overlap, then a while: with the bound broken, the six others would come in meanwhile)."""
    stub = CountingEngine()
    app = create_app(stub, None, max_workers=2, queue_limit=16, request_timeout=30)
    with BackgroundDaemon(app) as running:
        answers = Pending(running.url, [{"text": f"t{n}", "target": "es"} for n in range(8)])
        assert [a.status_code for a in answers.wait()] == [200] * 8
    assert stub.most == 2
