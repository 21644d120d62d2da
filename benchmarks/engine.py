"""Engine speed, measured side by side in one run (ratios, not absolute times: the machine is shared).

1. For a tiny pack (d_model 64, 2+2 layers: tests' pack) and a base-size pack (d_model 512, 6+6 layers,
   8 heads, FFN 2048, 32k vocabulary, int8: the shape of an Argos / OPUS-MT pack), on the same 64 texts:
   dragoman's batch throughput vs a direct ``ctranslate2.Translator.translate_batch`` call with exactly
   the translator and decoding options dragoman's backend uses (target: dragoman within 10% of raw
   CTranslate2), and vs translating the same texts one call at a time (target: the batch at least 5x
   faster). Raw CTranslate2 one call per text is timed too: what is left between it and dragoman's one
   call per text is dragoman's per-call overhead. The four are timed interleaved, medians reported.
2. The first call (pack load included) vs the second (pack loaded once).
3. Detection calls per second.
4. Apertium through the engine: one short sentence on a warm pipeline (target: under 10 ms) and a batch of
   lines vs one plain ``apertium eng-spa`` process over the same lines (target: at least 90% of it).

Run: ``.venv/bin/python benchmarks/engine.py`` (about two minutes; the base-size pack takes most of it).
``--sizes tiny`` skips the base size; ``--repeat N`` sets how many interleaved rounds are timed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import ctranslate2
import sentencepiece as spm

from dragoman.settings import Settings
from dragoman.testing.tinypack import build_argos_pack, sample_sentences
from dragoman.translation.backends.ctranslate2_backend import CTranslate2Backend
from dragoman.translation.engine import Engine
from dragoman.translation.types import TranslateOptions

WORDS = (
    "the house garden river city morning people small green quickly table window letter "
    "travel music evening friend water market answer"
).split()
#: Timed rounds per size by default: the base size takes seconds per round.
ROUNDS = {"tiny": 21, "base": 3}


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


def rounds(fns: Sequence[Callable[[], object]], repeat: int = 9) -> list[list[float]]:
    """Times of ``fns`` run in turn, round after round (every other round in reverse order), so that all
    see the same machine load: ``result[round][i]`` is the time of ``fns[i]`` in that round."""
    out: list[list[float]] = []
    for r in range(repeat):
        spent = [0.0] * len(fns)
        order = range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))
        for i in order:
            start = time.perf_counter()
            fns[i]()
            spent[i] = time.perf_counter() - start
        out.append(spent)
    return out


def ratio(times: list[list[float]], a: int, b: int) -> float:
    """The median over rounds of time ``a`` / time ``b``: each round's pair saw the same load."""
    return statistics.median(t[a] / t[b] for t in times)


def spread(times: list[list[float]], a: int, b: int) -> str:
    """The middle half of the per-round ratios ``a`` / ``b`` (the noise of the machine), as percents."""
    if len(times) < 4:
        return "too few rounds for a spread"
    low, _, high = statistics.quantiles([t[a] / t[b] for t in times], n=4)
    return f"middle half of rounds {low:.0%}-{high:.0%}"


class RawCTranslate2:
    """The pack driven directly: the translator options of the engine's registry, the decoding options of
    its backend (``CTranslate2Backend._run`` for an Argos pack), SentencePiece in and out."""

    def __init__(self, pack: Path, backend: CTranslate2Backend, settings: Settings) -> None:
        self.translator = ctranslate2.Translator(
            str(pack / backend.manifest.model_dir),
            device="cpu",
            compute_type="default",
            inter_threads=settings.engine.inter_threads,
            intra_threads=settings.engine.intra_threads,
        )
        engine_translator: Any = backend._translator  # what the registry loaded, to check we match it
        for name in ("device", "compute_type", "num_translators"):
            mine, theirs = getattr(self.translator, name), getattr(engine_translator, name)
            if mine != theirs:
                raise SystemExit(f"raw translator differs from dragoman's: {name} {mine!r} != {theirs!r}")
        self.sp = spm.SentencePieceProcessor(model_file=str(pack / backend.manifest.sentencepiece))
        self.options = backend.options
        self.max_input_tokens = backend.manifest.max_input_tokens

    def translate(self, texts: Sequence[str]) -> list[str]:
        opts = self.options
        tokens = [self.sp.encode(t, out_type=str) for t in texts]
        longest = max(len(t) for t in tokens)
        results = self.translator.translate_batch(
            tokens,
            max_batch_size=opts.max_batch_size,
            batch_type=opts.batch_type,
            beam_size=opts.beam_size,
            max_decoding_length=min(
                self.max_input_tokens, int(opts.length_factor * longest) + opts.length_slack
            ),
            repetition_penalty=opts.repetition_penalty,
            no_repeat_ngram_size=opts.no_repeat_ngram_size,
            replace_unknowns=True,
        )
        return [self.sp.decode(r.hypotheses[0]) for r in results]


def bench_ctranslate2(root: Path, size: str, repeat: int, detection: bool) -> None:
    started = time.perf_counter()
    pack = build_argos_pack(root / size / "translate-en_es", "en", "es", size=size)
    built = time.perf_counter() - started
    megabytes = sum(p.stat().st_size for p in pack.rglob("*") if p.is_file()) / 1e6
    settings = Settings.from_env(
        {
            "DRAGOMAN_PACKS_DIR": str(root / size),
            "DRAGOMAN_APERTIUM": "0",
            "DRAGOMAN_GLOSSARY": str(root / "glossary.json"),
        }
    )
    texts = sample_sentences(64, seed=1)
    print(
        f"== {size} pack ({megabytes:.0f} MB, built in {built:.1f} s); translator: inter_threads "
        f"{settings.engine.inter_threads}, intra_threads {settings.engine.intra_threads}"
    )
    with Engine(settings) as engine:
        t0 = time.perf_counter()
        engine.translate(texts[0], TranslateOptions("es", source="en"))
        first = time.perf_counter() - t0
        second = best_of(lambda: engine.translate(texts[0], TranslateOptions("es", source="en")), repeat)
        print(
            f"first call (loads the pack): {first * 1000:.1f} ms; second call: {second * 1000:.2f} ms "
            f"({first / second:.0f}x)"
        )
        backend = engine.pack_cache.backend("argos-en-es")
        assert isinstance(backend, CTranslate2Backend)
        raw = RawCTranslate2(pack, backend, settings)
        opts = backend.options
        tokens_in = sum(len(raw.sp.encode(t)) for t in texts) / len(texts)
        outputs = raw.translate(texts)
        tokens_out = sum(len(raw.sp.encode(t)) for t in outputs) / len(texts)
        print(
            f"decoding: beam {opts.beam_size}, max_batch_size {opts.max_batch_size}, compute type "
            f"{raw.translator.compute_type}; {tokens_in:.0f} tokens in, {tokens_out:.0f} out per text"
        )

        def raw_batch() -> None:
            raw.translate(texts)

        def batch() -> None:
            engine.translate_batch(texts, TranslateOptions("es", source="en"))

        def raw_single() -> None:
            for text in texts:
                raw.translate([text])

        def single() -> None:
            for text in texts:
                engine.translate(text, TranslateOptions("es", source="en"))

        batch()  # warm up
        raw_single()
        times = rounds([raw_batch, batch, raw_single, single], repeat)
        t_raw, t_batch, t_raw_single, t_single = (statistics.median(c) for c in zip(*times, strict=True))
        n = len(texts)
        print(
            f"batch of {n}: raw CTranslate2 {n / t_raw:.1f} texts/s, dragoman {n / t_batch:.1f} texts/s "
            f"-> dragoman at {ratio(times, 0, 1):.0%} of raw ({spread(times, 0, 1)}; target >= 90%)"
        )
        overhead = statistics.median((t[3] - t[2]) / n for t in times)
        print(
            f"one call per text: raw CTranslate2 {n / t_raw_single:.1f} texts/s, dragoman "
            f"{n / t_single:.1f} texts/s -> dragoman's batch is {ratio(times, 3, 1):.1f}x faster (target "
            f">= 5x; raw CTranslate2's own batch gain: {ratio(times, 2, 0):.1f}x)"
        )
        print(
            f"dragoman per call over raw CTranslate2: {overhead * 1000:+.2f} ms "
            f"({ratio(times, 3, 2) - 1:+.1%} of a call; {repeat} rounds, medians of per-round ratios)"
        )
        if detection:
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
    print("== apertium")
    with Engine(settings) as engine:
        engine.translate("Warm up.", TranslateOptions("es", source="en"))
        latency = best_of(
            lambda: engine.translate("The house is red.", TranslateOptions("es", source="en")), repeat=51
        )
        print(f"apertium warm pipeline, one short sentence: {latency * 1000:.2f} ms (target < 10 ms)")
        text = "\n".join(lines)
        t_engine = best_of(lambda: engine.translate(text, TranslateOptions("es", source="en")), repeat=3)
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="tiny,base", help="comma-separated pack sizes (tiny, base)")
    parser.add_argument("--repeat", type=int, default=0, help="interleaved rounds (default: 21 tiny, 3 base)")
    parser.add_argument("--no-apertium", action="store_true", help="skip the Apertium figures")
    args = parser.parse_args(argv)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i, size in enumerate(sizes):
            bench_ctranslate2(root, size, args.repeat or ROUNDS.get(size, 3), detection=i == 0)
        if not args.no_apertium:
            bench_apertium(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
