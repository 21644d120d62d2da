"""Whole-system status: composed from each package's ``status()``, in the shape front doors answer with."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import pytest

from dragoman import __version__
from dragoman.documents import ocr
from dragoman.settings import Settings
from dragoman.status import engine_status
from dragoman.translation.engine import Engine

KEYS = [
    "version",
    "provenance",
    "platform",
    "packs_dir",
    "packs",
    "broken_packs",
    "detection",
    "glossary",
    "apertium",
    "tesseract",
    "asr",
    "daemon",
    "batching",
    "uptime_seconds",
]


@pytest.fixture
def engine(packs_dir: Path, tiny_argos_pack: Path) -> Iterator[Engine]:
    """The tiny en->es pack, a directory that is no pack, and no Apertium."""
    shutil.copytree(tiny_argos_pack, packs_dir / "translate-en_es")
    (packs_dir / "junk").mkdir()
    settings = Settings.from_env({"DRAGOMAN_PACKS_DIR": str(packs_dir), "DRAGOMAN_APERTIUM": "0"})
    with Engine(settings) as eng:
        yield eng


def test_status_is_composed_from_each_packages_status(engine: Engine, packs_dir: Path) -> None:
    daemon = {"alive": False, "port": 8787, "pid": None, "url": None}
    status = engine_status(engine, daemon=daemon)
    assert list(status) == KEYS
    json.dumps(status)  # what `dragoman status --json` prints
    assert status["version"] == __version__ and status["provenance"] == "on-device"
    assert {"system", "machine", "python", "cpu_count", "ctranslate2", "compute_types_cpu"} <= set(
        status["platform"]
    )
    assert status["packs_dir"] == str(packs_dir)
    assert status["packs"] == [asdict(p) for p in engine.packs()]
    assert [p["id"] for p in status["packs"]] == engine.pack_ids() == ["argos-en-es"]
    assert [Path(b["path"]).name for b in status["broken_packs"]] == ["junk"]
    assert status["detection"]["model"].endswith(".ftz") and status["detection"]["loaded"] is False
    assert status["glossary"] == {"path": str(engine.settings.local.glossary_path)}
    assert status["apertium"]["enabled"] is False and status["apertium"]["pairs"] == []
    assert status["tesseract"] == ocr.status()
    assert status["asr"]["installed"] == [] and status["asr"]["default"] == "whisper-base"  # nothing loaded
    assert status["asr"]["root"] == str(packs_dir.parent / "asr")
    assert status["daemon"] == daemon and status["daemon"] is not daemon
    assert status["batching"] == engine.batching_status()
    assert status["batching"]["batches"] == 0 and status["batching"]["queue_depth"] == 0
    assert status["uptime_seconds"] >= 0


def test_the_daemon_is_only_reported_when_the_front_door_looked(engine: Engine) -> None:
    assert engine_status(engine)["daemon"] is None


def test_loaded_packs_show_in_the_status(engine: Engine) -> None:
    assert engine.loaded_packs() == [] and [p["loaded"] for p in engine_status(engine)["packs"]] == [False]
    engine.pack_cache.backend("argos-en-es")  # what a first translation does
    assert engine.loaded_packs() == ["argos-en-es"]
    assert [p["loaded"] for p in engine_status(engine)["packs"]] == [True]


def test_engine_status_is_the_translation_part(engine: Engine) -> None:
    part = engine.status()
    assert set(part) == {
        "provenance",
        "ctranslate2",
        "packs_dir",
        "packs",
        "broken_packs",
        "detection",
        "apertium",
        "batching",
        "uptime_seconds",
    }
    assert part["detection"] == engine.detector.status()
