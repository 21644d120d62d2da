"""The pack cache follows the packs directory: a pack replaced or removed by another process is unloaded
(its backend closed) and the next call uses what is on disk now; the memory budget and idle time unload
backends; Apertium pairs installed later are found.

Idle unloading runs on an injected clock; nothing here measures time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dragoman.errors import BackendError, PackNotInstalled, UnsupportedPair
from dragoman.models.packs import PackStore, install
from dragoman.models.store import dir_size
from dragoman.settings import Settings
from dragoman.testing.tinypack import build_argos_pack
from dragoman.translation.backends.base import Backend
from dragoman.translation.engine import Engine
from dragoman.translation.pack_cache import PackCache
from dragoman.translation.types import TranslateOptions

EN_ES = TranslateOptions(target="es", source="en")
TEXT = "Hello world, how are you?"
PIECES = ((TEXT,),)


@pytest.fixture(autouse=True)
def _no_apertium(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAGOMAN_APERTIUM", "0")  # only the tiny packs route


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two versions of one en->es pack with different weights, and an es->en pack."""
    base = tmp_path_factory.mktemp("sources")
    return {
        "v1": build_argos_pack(base / "v1", "en", "es", version="1.0", seed=0),
        "v2": build_argos_pack(base / "v2", "en", "es", version="2.0", seed=7),
        "es_en": build_argos_pack(base / "es_en", "es", "en", seed=1),
    }


@pytest.fixture
def engine(packs_dir: Path, versions: dict[str, Path]) -> Iterator[Engine]:
    install(versions["v1"], Settings.from_env())
    with Engine(Settings.from_env()) as eng:
        yield eng


def closed(backend: Backend) -> bool:
    try:
        backend.translate_batch(PIECES, "eng_Latn", "spa_Latn")
    except BackendError as exc:
        return "was closed" in exc.message
    return False


def test_a_pack_replaced_from_another_process_is_reloaded(engine: Engine, versions: dict[str, Path]) -> None:
    before = engine.translate(TEXT, EN_ES).translation
    old = engine.pack_cache.backend("argos-en-es")
    # `dragoman packs install v2 --replace` in another shell: the engine is told nothing.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dragoman.cli",
            "packs",
            "install",
            str(versions["v2"]),
            "--replace",
            "--json",
        ],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    after = engine.translate(TEXT, EN_ES)
    assert after.translation != before  # the new weights answer
    assert after.route == ("argos-en-es:eng_Latn->spa_Latn",)
    new = engine.pack_cache.backend("argos-en-es")
    assert new is not old and closed(old) and not closed(new)
    assert engine.pack_cache.loaded_ids() == {"argos-en-es"}
    assert [i.version for i in engine.pack_cache.infos()] == ["2.0"]


def test_a_removed_pack_answers_typed_errors(engine: Engine) -> None:
    engine.translate(TEXT, EN_ES)
    old = engine.pack_cache.backend("argos-en-es")
    PackStore(Settings.from_env()).remove("argos-en-es")
    with pytest.raises(UnsupportedPair, match="no installed pack translates eng_Latn->spa_Latn"):
        engine.translate(TEXT, EN_ES)
    with pytest.raises(PackNotInstalled, match="'argos-en-es' is not installed"):
        engine.pack_cache.backend("argos-en-es")
    assert closed(old) and engine.pack_cache.loaded_ids() == set()


def test_a_backend_in_use_is_closed_when_its_call_ends(engine: Engine, versions: dict[str, Path]) -> None:
    before = engine.translate(TEXT, EN_ES).translation
    with engine.pack_cache.use("argos-en-es") as busy:
        install(versions["v2"], Settings.from_env(), replace=True)
        assert engine.translate(TEXT, EN_ES).translation != before  # new calls get the new pack at once
        assert not closed(busy)  # the call under way keeps its backend
        assert busy.translate_batch(PIECES, "eng_Latn", "spa_Latn").texts[0] == before
    assert closed(busy)


def test_forget_unloads_now_and_the_next_call_loads_again(engine: Engine) -> None:
    engine.translate(TEXT, EN_ES)
    old = engine.pack_cache.backend("argos-en-es")
    engine.pack_cache.forget("argos-en-es")
    assert closed(old) and engine.pack_cache.loaded_ids() == set()
    engine.translate(TEXT, EN_ES)
    assert engine.pack_cache.loaded_ids() == {"argos-en-es"}


def test_the_memory_budget_unloads_the_least_recently_used_pack(
    packs_dir: Path, versions: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings.from_env()
    install(versions["v1"], settings)
    install(versions["es_en"], settings)
    sizes = [dir_size(packs_dir / name) for name in ("argos-en-es", "argos-es-en")]
    monkeypatch.setenv("DRAGOMAN_MODEL_MEMORY_BUDGET", str(max(sizes) + 1))  # room for one pack
    with Engine(Settings.from_env()) as eng:
        eng.translate(TEXT, EN_ES)
        en_es = eng.pack_cache.backend("argos-en-es")
        eng.translate("Hola mundo.", TranslateOptions(target="en", source="es"))
        assert eng.pack_cache.loaded_ids() == {"argos-es-en"} and closed(en_es)
        assert [e.size_bytes for e in eng.pack_cache.loaded()] == [sizes[1]]


def test_idle_packs_unload_on_an_injected_clock(
    packs_dir: Path, versions: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    install(versions["v1"], Settings.from_env())
    monkeypatch.setenv("DRAGOMAN_MODEL_IDLE_SECONDS", "600")
    now = [0.0]
    cache = PackCache(Settings.from_env(), clock=lambda: now[0], reap_every=0)
    try:
        backend = cache.backend("argos-en-es")
        now[0] += 599
        assert cache.evict_idle() == [] and not closed(backend)
        now[0] += 1
        assert cache.evict_idle() == ["argos-en-es"] and closed(backend)
        assert cache.loaded_ids() == set()
        assert cache.backend("argos-en-es") is not backend
    finally:
        cache.close()


def test_apertium_pairs_installed_later_are_found(
    packs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modes = tmp_path / "modes"
    modes.mkdir()
    monkeypatch.setenv("DRAGOMAN_APERTIUM", "1")
    monkeypatch.setenv("DRAGOMAN_APERTIUM_MODES", str(modes))
    cache = PackCache(Settings.from_env())
    try:
        assert cache.entries() == {} and cache.apertium_modes() == []
        (modes / "eng-spa.mode").write_text("lt-proc eng-spa.automorf.bin\n")  # as apt-get would
        assert set(cache.entries()) == {"apertium-eng-spa"}
        assert [m.name for m in cache.apertium_modes()] == ["eng-spa"]
        assert cache.routes("eng_Latn", "spa_Latn")[0].hops[0].pack_id == "apertium-eng-spa"
    finally:
        cache.close()


def test_a_gpu_that_cannot_run_packs_falls_back_to_the_cpu_under_auto(
    tmp_path: Path, tiny_argos_pack: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CTranslate2 sees a GPU but cannot run on it (its CUDA libraries are missing): with the device
    'auto' the pack loads again on the CPU and translates; named 'cuda', the failure is reported."""
    import shutil

    from dragoman.translation.backends import ctranslate2_backend as ct2

    shutil.copytree(tiny_argos_pack, tmp_path / "packs" / "translate-en_es")
    real_load = ct2.CTranslate2Backend.load.__func__  # type: ignore[attr-defined]
    devices: list[str] = []

    def load(cls: type[ct2.CTranslate2Backend], /, *args: object, **kwargs: object) -> ct2.CTranslate2Backend:
        devices.append(str(kwargs["device"]))
        kwargs["device"] = "cpu"  # no GPU here: load on the CPU, fail the smoke test as a GPU would
        backend: ct2.CTranslate2Backend = real_load(cls, *args, **kwargs)
        if devices[-1] == "cuda":

            def broken() -> None:
                raise BackendError("Library libcublas.so.12 is not found or cannot be loaded")

            backend.smoke_test = broken  # type: ignore[method-assign]
        return backend

    monkeypatch.setattr(ct2.CTranslate2Backend, "load", classmethod(load))
    import dragoman.translation.pack_cache as pc

    monkeypatch.setattr(pc, "compute_device", lambda wanted: "cuda")
    auto = Settings.from_env({"DRAGOMAN_PACKS_DIR": str(tmp_path / "packs"), "DRAGOMAN_APERTIUM": "0"})
    cache = pc.PackCache(auto)
    backend = cache.backend("argos-en-es")
    assert devices == ["cuda", "cpu"] and backend.translate_batch([("Hello.",)], "eng_Latn", "spa_Latn").texts
    named = auto.replace(device="cuda")
    devices.clear()
    with pytest.raises(BackendError, match="libcublas"):
        pc.PackCache(named).backend("argos-en-es")
    assert devices == ["cuda"]
