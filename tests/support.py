"""What the system offers the tests: each test that needs a system package skips only when it is missing,
and says which Debian package installs it (``make test`` installs them where apt-get can)."""

from __future__ import annotations

import math
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dragoman.settings import Settings
from dragoman.translation.engine import CHUNK_CHARS, CHUNK_SEGMENTS
from dragoman.translation.segmentation import segment

APERTIUM_MODES = Path("/usr/share/apertium/modes")
HAVE_APERTIUM = shutil.which("lt-proc") is not None and (APERTIUM_MODES / "eng-spa.mode").is_file()
HAVE_TESSERACT = shutil.which("tesseract") is not None

needs_apertium = pytest.mark.skipif(
    not HAVE_APERTIUM, reason="Apertium eng-spa is not installed: apt-get install apertium apertium-eng-spa"
)
needs_tesseract = pytest.mark.skipif(
    not HAVE_TESSERACT, reason="Tesseract is not installed: apt-get install tesseract-ocr"
)


def isolated_settings(root: Path, *, apertium: bool = False) -> Settings:
    """Settings whose packs, glossary and state live under ``root`` (packs in ``root/packs``); Apertium left
    out of routing unless asked, so only the packs a test builds there translate."""
    return Settings.from_env(
        {
            "DRAGOMAN_PACKS_DIR": str(root / "packs"),
            "DRAGOMAN_GLOSSARY": str(root / "config" / "glossary.json"),
            "DRAGOMAN_STATE_DIR": str(root / "state"),
            "DRAGOMAN_APERTIUM": "1" if apertium else "0",
        }
    )


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll ``condition`` until it holds; fail the test after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.002)


def chunks_of(text: str) -> int:
    """At least how many backend calls the whole of ``text`` takes (its distinct segments, by count and
    by characters per engine chunk; the batcher may split a chunk further)."""
    distinct = set(segment(text).sentences)
    by_count = len(distinct) / CHUNK_SEGMENTS
    return math.ceil(max(by_count, sum(len(s) for s in distinct) / CHUNK_CHARS))


@dataclass
class FirstCallHeld:
    """A backend whose first ``translate_batch`` call waits for ``gate`` (see :func:`hold_first_call`):
    callers that come meanwhile queue in the engine's batcher. ``sizes``: each call's segment count."""

    gate: threading.Event = field(default_factory=threading.Event)
    entered: threading.Event = field(default_factory=threading.Event)
    sizes: list[int] = field(default_factory=list)


def hold_first_call(backend: Any, seconds: float = 30.0) -> FirstCallHeld:
    """Wrap ``backend.translate_batch`` so that its first call holds the backend until the gate opens."""
    held = FirstCallHeld()
    inner = backend.translate_batch

    def held_first(batch: Sequence[Any], source: str, target: str) -> Any:
        held.sizes.append(len(batch))
        if len(held.sizes) == 1:
            held.entered.set()
            assert held.gate.wait(seconds)
        return inner(batch, source, target)

    backend.translate_batch = held_first
    return held
