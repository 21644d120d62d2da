"""Apertium pipelines whose stage crashes or goes silent on one segment (issue 17): the crash is seen at
once, the silence within ``SILENT_SECONDS`` (not the 30 s timeout), the pipeline restarts, the other
segments of the batch are translated, and the bad one comes back as written with an
``untranslated_segments`` note. A fake stage (a Python script passing NUL-terminated blocks through,
crashing on ``CRASHME`` and swallowing blocks holding ``SILENTME``) tests this apart from Debian's data;
the real cases are Debian's ukr-rus (its tagger aborts on ``Литва``) and hbs-mkd (silent on ``Crna Gora``).
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from pathlib import Path

import pytest
from support import hold_first_call, wait_until

from dragoman.errors import BackendError
from dragoman.translation.backends._apertium_pipeline import SILENT_SECONDS
from dragoman.translation.backends.apertium import (
    UNTRANSLATED_SEGMENTS,
    ApertiumBackend,
    ApertiumMode,
    discover_modes,
)
from dragoman.translation.batcher import Batcher, BatchLimits
from dragoman.translation.types import BatchOutput

EN, ES = "eng_Latn", "spa_Latn"
MODES_DIR = Path("/usr/share/apertium/modes")

#: A stage like Apertium's: reads NUL-terminated blocks, writes each back (``cat`` -> ``dog``) and flushes.
STAGE = r"""
import os, sys
out = sys.stdout.buffer
pending = b""
while True:
    chunk = os.read(0, 65536)
    if not chunk:
        break
    pending += chunk
    while b"\0" in pending:
        block, pending = pending.split(b"\0", 1)
        if b"CRASHME" in block:
            os.abort()
        if b"SILENTME" in block:
            continue
        out.write(block.replace(b"cat", b"dog") + b"\0")
        out.flush()
"""


def fake_backend(tmp_path: Path, *, stages: int = 1, timeout: float = 30.0) -> ApertiumBackend:
    """A backend over ``stages`` stages: the fake stage (called with ``-z``, which it ignores), then
    ``sed -u`` stages passing blocks through, as the stages after a bad one in a real mode."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    script = tmp_path / "stage"
    script.write_text(f"#!{sys.executable}\n" + STAGE, encoding="utf-8")
    script.chmod(0o755)
    path = tmp_path / "eng-spa.mode"
    path.write_text(str(script) + " | sed -u s/x/x/" * (stages - 1) + "\n", encoding="utf-8")
    return ApertiumBackend(ApertiumMode("eng-spa", EN, ES, None, path), timeout=timeout)


needs_sed = pytest.mark.skipif(shutil.which("sed") is None, reason="GNU sed is needed for fake pipelines")


@needs_sed
@pytest.mark.parametrize("bad", ["CRASHME", "SILENTME"])
def test_bad_segment_is_left_as_written_and_the_others_translated(tmp_path: Path, bad: str) -> None:
    backend = fake_backend(tmp_path, stages=3)
    try:
        batch = [("a cat",), (f" the {bad} cat ",), ("one cat",), (f"{bad}",), ("last cat",)]
        started = time.monotonic()
        out = backend.translate_batch(batch, EN, ES)
        took = time.monotonic() - started
        assert out.texts == ("a dog", f" the {bad} cat ", "one dog", bad, "last dog")
        assert out.notes == {UNTRANSLATED_SEGMENTS: 2}
        # Far under the 30 s timeout: two silences of SILENT_SECONDS (each seen twice) and some restarts.
        assert took < 8 * SILENT_SECONDS + 10
        # The pipeline still works for the next call.
        assert backend.translate_batch([("cat",)], EN, ES).texts == ("dog",)
    finally:
        backend.close()


@needs_sed
def test_crash_is_seen_at_once(tmp_path: Path) -> None:
    backend = fake_backend(tmp_path, stages=2, timeout=30.0)
    try:
        started = time.monotonic()
        assert backend.translate_batch([("CRASHME",)], EN, ES).texts == ("CRASHME",)
        assert time.monotonic() - started < 10  # three pipeline starts, no wait for any timeout
    finally:
        backend.close()


@needs_sed
def test_other_callers_are_served_while_one_pipeline_breaks(tmp_path: Path) -> None:
    bad = fake_backend(tmp_path / "bad", stages=2)
    good = fake_backend(tmp_path / "good", stages=2)
    results: list[tuple[str, ...]] = []
    errors: list[BaseException] = []

    def call(backend: ApertiumBackend, text: str) -> None:
        try:
            results.append(backend.translate_batch([(text,)] * 3, EN, ES).texts)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(bad, "SILENTME cat"))]
    threads += [threading.Thread(target=call, args=(good, f"cat {i}")) for i in range(4)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors and not any(t.is_alive() for t in threads)
        assert ("SILENTME cat",) * 3 in results
        assert sorted(r for r in results if r[0].startswith("dog")) == [(f"dog {i}",) * 3 for i in range(4)]
    finally:
        bad.close()
        good.close()


@needs_sed
def test_callers_merged_into_one_call_keep_their_own_bad_segments(tmp_path: Path) -> None:
    # The engine's batcher merges concurrent callers of a pair into one stream: a segment that crashes
    # or silences the pipeline is left as written for its own caller, with the note on that caller only;
    # the others' segments in the same call are translated, and nothing is run a second time.
    backend = fake_backend(tmp_path, stages=2)
    held = hold_first_call(backend)
    batcher = Batcher(BatchLimits(window=0))
    asked = {"a": ["a cat", "CRASHME cat"], "b": ["one cat"], "c": ["SILENTME"], "d": ["last cat"]}
    answers: dict[str, BatchOutput] = {}

    def call(name: str) -> None:
        answers[name] = batcher.translate(backend, [(t,) for t in asked[name]], EN, ES)

    blocker = threading.Thread(target=call, args=("blocker",))
    asked["blocker"] = ["cat"]
    try:
        blocker.start()
        assert held.entered.wait(30)
        threads = [threading.Thread(target=call, args=(name,)) for name in "abcd"]
        for n, t in enumerate(threads, start=1):
            t.start()
            wait_until(lambda: batcher.stats()["waiting_callers"] >= n, timeout=30)  # noqa: B023 (called at once)
        held.gate.set()
        for t in [blocker, *threads]:
            t.join(60)
        assert held.sizes == [1, 5]  # the blocker's call, then one call for all four callers
        assert answers["a"] == BatchOutput(("a dog", "CRASHME cat"), {UNTRANSLATED_SEGMENTS: 1})
        assert answers["b"] == BatchOutput(("one dog",), {})
        assert answers["c"] == BatchOutput(("SILENTME",), {UNTRANSLATED_SEGMENTS: 1})
        assert answers["d"] == BatchOutput(("last dog",), {})
        assert batcher.stats()["reruns"] == 0
    finally:
        held.gate.set()
        backend.close()


@needs_sed
def test_a_pipeline_broken_for_every_segment_still_raises(tmp_path: Path) -> None:
    path = tmp_path / "eng-spa.mode"
    path.write_text("sed -u s/a/b/ | ls /nonexistent-dragoman\n", encoding="utf-8")
    backend = ApertiumBackend(ApertiumMode("eng-spa", EN, ES, None, path))
    try:
        with pytest.raises(BackendError, match="failed twice"):
            backend.translate_batch([("a",), ("b",)], EN, ES)
    finally:
        backend.close()


def _real(stem: str, source: str | None = None) -> ApertiumBackend:
    modes = [m for m in discover_modes([MODES_DIR]) if m.path.stem == stem]
    modes = [m for m in modes if source is None or m.source == source]
    if not modes or shutil.which("lt-proc") is None:
        pytest.skip(f"Apertium {stem} is not installed: sudo apt-get install apertium-{stem}")
    return ApertiumBackend(modes[0])


@pytest.mark.apertium
@pytest.mark.slow
@pytest.mark.parametrize(
    ("stem", "source", "good", "bad"),
    [
        ("ukr-rus", None, ["Україна", "Київ"], ["Литва"]),
        ("hbs-mkd", "hrv_Latn", ["Hrvatska", "Srbija"], ["Crna Gora", "Sjeverna Makedonija"]),
    ],
)
def test_real_pairs_that_break_on_some_names(
    stem: str, source: str | None, good: list[str], bad: list[str]
) -> None:
    backend = _real(stem, source)
    try:
        mode = backend.mode
        alone = [backend.translate_batch([(g,)], mode.source, mode.target).texts[0] for g in good]
        batch = [good[0], *bad, *good[1:]]
        started = time.monotonic()
        out = backend.translate_batch([(t,) for t in batch], mode.source, mode.target)
        assert time.monotonic() - started < 25  # the old pipeline waited its 30 s timeout per silence
        assert out.texts == (alone[0], *bad, *alone[1:])
        assert out.notes.get(UNTRANSLATED_SEGMENTS) == len(bad)
    finally:
        backend.close()


def test_the_note_becomes_a_result_warning() -> None:
    from dragoman.translation.engine import _note

    assert _note("apertium-ukr-rus", UNTRANSLATED_SEGMENTS, 2).startswith(
        "untranslated_segments: apertium-ukr-rus broke on 2 segment(s)"
    )
