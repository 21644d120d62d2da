"""Engine speed, measured side by side in one run (ratios, not absolute times: the machine is shared).

1. dragoman's batch throughput vs a direct ``ctranslate2.Translator.translate_batch`` call on the same tiny
   pack with the same decoding options (target: dragoman within 10% of raw CTranslate2), and vs translating
   the same texts one call at a time (target: the batch at least 5x faster).
2. The first call (pack load included) vs the second (pack loaded once).
3. Detection calls per second.
4. Apertium through the engine: one short sentence on a warm pipeline (target: under 10 ms) and a batch of
   lines vs one plain ``apertium eng-spa`` process over the same lines (target: at least 90% of it).

Run: ``.venv/bin/python benchmarks/engine.py`` (about a minute).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import ctranslate2
import sentencepiece as spm

from dragoman.engine.backends.ctranslate2_backend import CTranslate2Backend
from dragoman.engine.engine import Engine
from dragoman.engine.tinypack import build_argos_pack
from dragoman.settings import Settings

WORDS = (
    "the house garden river city morning people small green quickly table window letter "
    "travel music evening friend water market answer"
).split()


def sentences(n: int) -> list[str]:
    out = []
    for i in range(n):
        words = [WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(12 + i % 9)]
        out.append(" ".join(words).capitalize() + f" number {i}.")
    return out


def best_of(fn: Callable[[], object], repeat: int = 7) -> float:
    """The median of ``repeat`` timed runs, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def paired(a: Callable[[], object], b: Callable[[], object], repeat: int = 9) -> tuple[float, float]:
    """Median times of ``a`` and ``b`` run alternately, so that both see the same machine load."""
    times_a, times_b = [], []
    for _ in range(repeat):
        for fn, times in ((a, times_a), (b, times_b)):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return statistics.median(times_a), statistics.median(times_b)


def bench_ctranslate2(root: Path) -> None:
    pack = build_argos_pack(root / "packs" / "translate-en_es", "en", "es")
    settings = Settings.from_env(
        {
            "DRAGOMAN_PACKS_DIR": str(root / "packs"),
            "DRAGOMAN_APERTIUM": "0",
            "DRAGOMAN_GLOSSARY": str(root / "glossary.json"),
        }
    )
    texts = sentences(64)
    with Engine(settings) as engine:
        t0 = time.perf_counter()
        engine.translate(texts[0], target="es", source="en")
        first = time.perf_counter() - t0
        second = best_of(lambda: engine.translate(texts[0], target="es", source="en"))
        print(
            f"first call (loads the pack): {first * 1000:.1f} ms; second call: {second * 1000:.2f} ms "
            f"({first / second:.0f}x)"
        )

        backend = engine.registry.backend("argos-en-es")
        assert isinstance(backend, CTranslate2Backend)
        opts = backend.options
        translator = ctranslate2.Translator(str(pack / "model"), device="cpu", inter_threads=1)
        sp = spm.SentencePieceProcessor(model_file=str(pack / "sentencepiece.model"))

        def raw() -> list[str]:
            tokens = [sp.encode(t, out_type=str) for t in texts]
            longest = max(len(t) for t in tokens)
            results = translator.translate_batch(
                tokens,
                max_batch_size=opts.max_batch_size,
                batch_type=opts.batch_type,
                beam_size=opts.beam_size,
                replace_unknowns=True,
                max_decoding_length=min(256, int(opts.length_factor * longest) + opts.length_slack),
            )
            return [sp.decode(r.hypotheses[0]) for r in results]

        def batch() -> None:
            engine.translate_batch(texts, target="es", source="en", glossary=[])

        def one_by_one() -> None:
            for text in texts:
                engine.translate(text, target="es", source="en", glossary=[])

        raw(), batch()  # warm both
        t_raw, t_batch = paired(raw, batch)
        t_single = best_of(one_by_one, repeat=3)
        print(
            f"batch of {len(texts)}: raw CTranslate2 {len(texts) / t_raw:.0f} texts/s, dragoman "
            f"{len(texts) / t_batch:.0f} texts/s -> dragoman at {t_raw / t_batch:.0%} of raw (target >= 90%)"
        )
        print(
            f"one call per text: {len(texts) / t_single:.0f} texts/s -> batch is {t_single / t_batch:.1f}x "
            "faster (target >= 5x)"
        )

        sample = sentences(200)
        engine.detect(sample[0])
        t_detect = best_of(lambda: [engine.detect(s) for s in sample], repeat=5)
        print(f"detection: {len(sample) / t_detect:,.0f} calls/s (short sentences)")


def bench_apertium(root: Path) -> None:
    if shutil.which("apertium") is None or not Path("/usr/share/apertium/modes/eng-spa.mode").is_file():
        print("apertium: not installed (apt-get install apertium apertium-eng-spa); skipped")
        return
    settings = Settings.from_env(
        {"DRAGOMAN_PACKS_DIR": str(root / "none"), "DRAGOMAN_GLOSSARY": str(root / "glossary.json")}
    )
    lines = sentences(1000)
    with Engine(settings) as engine:
        engine.translate("Warm up.", target="es", source="en")
        latency = best_of(
            lambda: engine.translate("The house is red.", target="es", source="en", glossary=[]), repeat=51
        )
        print(f"apertium warm pipeline, one short sentence: {latency * 1000:.2f} ms (target < 10 ms)")
        text = "\n".join(lines)
        t_engine = best_of(lambda: engine.translate(text, target="es", source="en", glossary=[]), repeat=3)
    source = root / "lines.txt"
    source.write_text(text + "\n", encoding="utf-8")

    def plain() -> None:
        with source.open("rb") as handle:
            subprocess.run(["apertium", "-u", "eng-spa"], stdin=handle, stdout=subprocess.DEVNULL, check=True)

    t_plain = best_of(plain, repeat=3)
    print(
        f"apertium {len(lines)} lines: plain `apertium eng-spa` {len(lines) / t_plain:.0f} lines/s, dragoman "
        f"{len(lines) / t_engine:.0f} lines/s -> {t_plain / t_engine:.0%} of plain (target >= 90%)"
    )


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bench_ctranslate2(root)
        bench_apertium(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
