"""Issue 9, item 4: the processes the code starts are bounded in number, closed when idle, and reaped.

An MCP server that had used all 30 Apertium directions held 145 processes and 1.1 GB. Apertium pipelines now
live in a :class:`PipelinePool`: at most ``max_pipelines`` run, the least recently used idle one is closed to
start another, idle ones are closed after ``idle_seconds``, a pipeline in use is never closed under its
caller, and every closed stage is waited for (no zombies). Fake pipelines (``sed -u``) stand in for Apertium
where it is missing; one test runs real pairs through the engine's pack cache.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from support import APERTIUM_MODES, needs_apertium

from dragoman.errors import EngineTimeout
from dragoman.settings import Settings
from dragoman.translation.backends._apertium_pipeline import PipelinePool
from dragoman.translation.backends.apertium import ApertiumBackend, ApertiumMode
from dragoman.translation.pack_cache import PackCache

needs_sed = pytest.mark.skipif(shutil.which("sed") is None, reason="GNU sed is needed for fake pipelines")
EN, ES = "eng_Latn", "spa_Latn"


def children() -> list[tuple[int, str]]:
    """This process's child processes: (pid, state letter), zombies included."""
    found: list[tuple[int, str]] = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            pids = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in pids:
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            found.append((int(pid), stat.rpartition(")")[2].split()[0]))
    return found


def fake_modes(tmp_path: Path, count: int, stages: int = 2) -> list[ApertiumMode]:
    """``count`` directions, each a chain of ``stages`` sed processes; direction i turns x into d<i>."""
    modes = []
    for i in range(count):
        path = tmp_path / f"fake{i}.mode"
        path.write_text(" | ".join([f"sed -u s/x/d{i}/"] + ["sed -u s/q/q/"] * (stages - 1)) + "\n")
        modes.append(ApertiumMode(f"fake{i}", EN, ES, None, path))
    return modes


def wait_for(condition: object, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.05)
    return False


@needs_sed
def test_many_directions_stay_under_the_cap_and_idle_ones_close(tmp_path: Path) -> None:
    before = {pid for pid, _ in children()}
    pool = PipelinePool(max_pipelines=3, idle_seconds=0.6, reap_every=0.1)
    backends = [ApertiumBackend(m, pool=pool, start=False) for m in fake_modes(tmp_path, 12)]
    try:
        for _ in range(2):
            for i, backend in enumerate(backends):
                assert backend.translate_batch([("x",)], EN, ES).texts == (f"d{i}",)
                mine = [(p, s) for p, s in children() if p not in before]
                assert len(pool) <= 3
                assert len(mine) <= 3 * 2, mine  # 3 pipelines of 2 stages, and no zombie left over
                assert all(state != "Z" for _, state in mine), mine
        # unused for idle_seconds: every pipeline closes, every process is reaped
        assert wait_for(lambda: not [p for p, _ in children() if p not in before]), children()
        assert len(pool) == 0
        # and a later call starts its pipeline again
        assert backends[5].translate_batch([("x",)], EN, ES).texts == ("d5",)
    finally:
        pool.close()
    assert not [p for p, _ in children() if p not in before]


@needs_sed
def test_concurrent_callers_over_many_directions(tmp_path: Path) -> None:
    before = {pid for pid, _ in children()}
    cap, stages = 3, 2
    pool = PipelinePool(max_pipelines=cap, idle_seconds=0)
    backends = [ApertiumBackend(m, pool=pool, start=False) for m in fake_modes(tmp_path, 10, stages)]
    errors: list[BaseException] = []
    most = [0]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            live = [p for p, s in children() if p not in before and s != "Z"]
            most[0] = max(most[0], len(live))
            time.sleep(0.005)

    def work(n: int) -> None:
        try:
            for round_ in range(15):
                i = (n * 7 + round_) % len(backends)
                texts = [f"x {n} {round_} {k}" for k in range(5)]
                out = backends[i].translate_batch([(t,) for t in texts], EN, ES).texts
                assert out == tuple(t.replace("x", f"d{i}") for t in texts)
        except BaseException as exc:
            errors.append(exc)

    watcher = threading.Thread(target=watch)
    watcher.start()
    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    stop.set()
    watcher.join()
    try:
        assert not errors, errors[:3]
        # a pipeline being closed may still be exiting when the next one starts: one pipeline's worth over
        assert most[0] <= (cap + 1) * stages, most[0]
        assert len(pool) <= cap
    finally:
        pool.close()
    assert not [p for p, _ in children() if p not in before]


@needs_sed
def test_a_pipeline_in_use_is_never_closed_for_room(tmp_path: Path) -> None:
    first, second = fake_modes(tmp_path, 2)
    pool = PipelinePool(max_pipelines=1, idle_seconds=0)
    a, b = ApertiumBackend(first, pool=pool), ApertiumBackend(second, pool=pool, start=False)
    a_pids = a.pids
    assert a_pids
    try:
        # the one place is free (a's pipeline is idle): b takes it, a's processes are closed and reaped
        assert b.translate_batch([("x",)], EN, ES).texts == ("d1",)
        assert a.pids == () and all(not Path(f"/proc/{p}").exists() for p in a_pids)
        # now hold b's pipeline in use: a cannot evict it, waits, and gives up with a typed timeout
        gate = threading.Event()
        release = threading.Event()

        def hold() -> None:
            with pool.use(b._owner, b._start, 5.0):  # noqa: SLF001 - holding it as a request would
                gate.set()
                release.wait(10)

        holder = threading.Thread(target=hold)
        holder.start()
        assert gate.wait(10)
        b_pids = b.pids
        a.timeout = 0.5
        with pytest.raises(EngineTimeout, match="busy"):
            a.translate_batch([("x",)], EN, ES)
        assert b.pids == b_pids and all(Path(f"/proc/{p}").exists() for p in b_pids)
        release.set()
        holder.join(10)
        a.timeout = 10.0
        assert a.translate_batch([("x",)], EN, ES).texts == ("d0",)  # b is idle now: closed for a
        assert b.pids == () and all(not Path(f"/proc/{p}").exists() for p in b_pids)
    finally:
        pool.close()


@needs_sed
def test_idle_eviction_with_an_injected_clock_spares_busy_pipelines(tmp_path: Path) -> None:
    now = [0.0]
    pool = PipelinePool(max_pipelines=4, idle_seconds=10, clock=lambda: now[0], reap_every=3600)
    one, two = (ApertiumBackend(m, pool=pool) for m in fake_modes(tmp_path, 2))
    try:
        now[0] = 5.0
        assert pool.evict_idle() == 0
        with pool.use(two._owner, two._start, 1.0):  # noqa: SLF001 - in use while the reaper runs
            now[0] = 20.0
            assert pool.evict_idle() == 1  # one closed, two in use and kept
            assert one.pids == () and two.pids != ()
        now[0] = 29.0
        assert pool.evict_idle() == 0  # two was used at 20
        now[0] = 30.0
        assert pool.evict_idle() == 1 and len(pool) == 0
    finally:
        pool.close()


def test_settings_bound_the_pool() -> None:
    settings = Settings.from_env(
        {"DRAGOMAN_APERTIUM_MAX_PIPELINES": "2", "DRAGOMAN_APERTIUM_IDLE_SECONDS": "7.5"}
    )
    assert settings.engine.apertium_max_pipelines == 2
    assert settings.engine.apertium_idle_seconds == 7.5
    defaults = Settings()
    assert 4 <= defaults.engine.apertium_max_pipelines <= 8 and defaults.engine.apertium_idle_seconds > 0


@needs_apertium
def test_real_directions_through_the_pack_cache_stay_under_the_cap(tmp_path: Path) -> None:
    before = {pid for pid, _ in children()}
    settings = Settings.build(
        packs_dir=tmp_path / "packs", apertium_modes_dirs=(APERTIUM_MODES,), apertium_max_pipelines=2
    )
    cache = PackCache(settings)
    ids = sorted(i for i in cache.entries() if i.startswith("apertium-"))[:5]
    if len(ids) < 3:
        pytest.skip("fewer than three Apertium pairs are installed")
    most = 0
    try:
        for pack_id in ids:
            with cache.use(pack_id) as backend:
                assert isinstance(backend, ApertiumBackend)
                mode = backend.mode
                out = backend.translate_batch([("The house is big.",)], mode.source, mode.target).texts
                assert out[0].strip()
            mine = [(p, s) for p, s in children() if p not in before]
            assert all(s != "Z" for _, s in mine), mine
            most = max(most, len(mine))
        stages = max(len(b.mode.path.read_text().split("|")) + 2 for b in _backends(cache, ids))
        assert most <= 2 * stages
        assert len(cache.loaded_ids()) == len(ids)  # the backends stay loaded; only their processes go
    finally:
        cache.close()
    assert not [p for p, _ in children() if p not in before]


def _backends(cache: PackCache, ids: list[str]) -> list[ApertiumBackend]:
    found = [cache.backends.peek(i) for i in ids]
    return [b for b in found if isinstance(b, ApertiumBackend)]
