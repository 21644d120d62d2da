"""Engine speed, measured side by side in one run (ratios, not absolute times: the machine is shared).

1. For a tiny pack (d_model 64, 2+2 layers: tests' pack) and a base-size pack (d_model 512, 6+6 layers,
   8 heads, FFN 2048, 32k vocabulary, int8: the shape of an Argos / OPUS-MT pack), on the same 64 texts:
   dragoman's batch throughput vs a direct ``ctranslate2.Translator.translate_batch`` call with exactly
   the translator and decoding options dragoman's backend uses (target: dragoman within 10% of raw
   CTranslate2), and vs translating the same texts one call at a time (target: the batch at least 5x
   faster). Raw CTranslate2 one call per text is timed too: what is left between it and dragoman's one
   call per text is dragoman's per-call overhead. The four alternate round by round.
2. The first call (pack load included) vs the second (pack loaded once).
3. Detection calls per second.
4. Apertium through the engine: one short sentence on a warm pipeline (target: under 10 ms) and 1000
   distinct lines (a repeat would be translated once, flattering the engine) vs one plain
   ``apertium eng-spa`` process over the same lines (target: at least 90% of it).
5. With ``--argos``: argostranslate's ``translate()`` on the same pack and texts, with its default
   settings and with CTranslate2's threads matched to dragoman's, in the same rounds: the 64 texts as one
   text (argos batches a text's sentences) against dragoman's batch, and one call per text against
   dragoman's one call per text. Argos runs offline in its own virtualenv (``build/peers-venv``, made on
   first use by ``benchmarks/_peers.py``, a few minutes).

Every comparison alternates its sides round by round (A B C D A B C D ...) and prints medians with their
min-max; a ratio is the median of the rounds' own ratios, with their range.

Run: ``.venv/bin/python benchmarks/engine.py`` (about two minutes; the base-size pack takes most of it).
``--sizes tiny`` skips the base size; ``--rounds N`` sets how many alternated rounds are timed; ``--quick``
is a smoke run (tiny pack, few rounds, 200 Apertium lines); ``--argos`` adds argostranslate.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import _harness as harness
import _peers
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


def spread_of(fn: Callable[[], object], repeat: int) -> harness.Spread:
    """Seconds of ``repeat`` runs of ``fn`` (a figure on its own, nothing to alternate with)."""
    return harness.alternate({"only": fn}, repeat).spread("only")


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


def bench_ctranslate2(root: Path, size: str, repeat: int, detection: bool, argos: bool = False) -> None:
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
        second = spread_of(lambda: engine.translate(texts[0], TranslateOptions("es", source="en")), repeat)
        print(
            f"first call (loads the pack): {first * 1000:.1f} ms; second call: "
            f"{second.scaled(1000).text('.2f', ' ms')} ({first / second.median:.0f}x)"
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

        sides: dict[str, Callable[[], object]] = {
            "raw batch": raw_batch,
            "batch": batch,
            "raw single": raw_single,
            "single": single,
        }
        workers: dict[str, _peers.ArgosWorker] = {}
        if argos:
            peers = _peers.prepare(root / f"{size}-peers", pack, "en", "es")
            threads = (settings.engine.inter_threads, settings.engine.intra_threads)
            for kind in ("default", "matched"):
                worker = workers[kind] = _peers.ArgosWorker(
                    peers.python, peers.env(kind, threads), "en", "es"
                )
                sides[f"argos {kind} joined"] = functools.partial(worker.translate, texts, joined=True)
                sides[f"argos {kind} single"] = functools.partial(worker.translate, texts)
        try:
            times = harness.alternate(sides, repeat, warmup=1)
        finally:
            for worker in workers.values():
                worker.close()
        n = len(texts)

        def rate(name: str) -> str:
            return times.spread(name).inverse(n).text(".1f", " texts/s")

        print(f"{repeat} alternated rounds (raw batch, batch, raw single, single); median (min-max)")
        print(
            f"batch of {n}: raw CTranslate2 {rate('raw batch')}, dragoman {rate('batch')} -> dragoman at "
            f"{harness.ratio_text(times.ratio('raw batch', 'batch'), percent=True)} of raw (target >= 90%)"
        )
        print(
            f"one call per text: raw CTranslate2 {rate('raw single')}, dragoman {rate('single')} -> "
            f"dragoman's batch {harness.ratio_text(times.ratio('single', 'batch'))} faster (target >= 5x; "
            f"raw CTranslate2's own batch gain {harness.ratio_text(times.ratio('raw single', 'raw batch'))})"
        )
        overhead = times.difference("single", "raw single").scaled(1000 / n)
        share = times.ratio("single", "raw single")
        print(
            f"dragoman per call over raw CTranslate2: {overhead.text('+.2f', ' ms')}; "
            f"{share.median - 1:+.1%} of a call (rounds {share.low - 1:+.1%} to {share.high - 1:+.1%})"
        )
        if argos:
            print(
                "argostranslate translate(), same pack (its own decoding: beam 4, batches of 32 sentences; "
                f"matched: inter_threads {threads[0]}, intra_threads {threads[1]}):"
            )
            for kind in ("default", "matched"):
                joined, single_ = f"argos {kind} joined", f"argos {kind} single"
                print(
                    f"  {kind} settings: the 64 texts as one text {rate(joined)} -> dragoman's batch "
                    f"{harness.ratio_text(times.ratio(joined, 'batch'))} faster; one call per text "
                    f"{rate(single_)} -> dragoman's one call per text "
                    f"{harness.ratio_text(times.ratio(single_, 'single'))} faster"
                )
        if detection:
            sample = sentences(200)
            engine.detect(sample[0])
            t_detect = spread_of(lambda: [engine.detect(s) for s in sample], repeat=5)
            print(f"detection: {t_detect.inverse(len(sample)).text(',.0f', ' calls/s')} (short sentences)")


def bench_apertium(root: Path, rounds: int, count: int) -> None:
    if shutil.which("apertium") is None or not Path("/usr/share/apertium/modes/eng-spa.mode").is_file():
        print("apertium: not installed (apt-get install apertium apertium-eng-spa); skipped")
        return
    settings = Settings.from_env(
        {"DRAGOMAN_PACKS_DIR": str(root / "none"), "DRAGOMAN_GLOSSARY": str(root / "glossary.json")}
    )
    lines = harness.unique_sentences(count)  # distinct: the engine translates a repeated segment once
    text = "\n".join(lines)
    source = root / "lines.txt"
    source.write_text(text + "\n", encoding="utf-8")

    def plain() -> None:
        with source.open("rb") as handle:
            subprocess.run(["apertium", "-u", "eng-spa"], stdin=handle, stdout=subprocess.DEVNULL, check=True)

    print(f"== apertium ({len(lines)} distinct lines, {rounds} alternated rounds: dragoman, plain)")
    with Engine(settings) as engine:
        engine.translate("Warm up.", TranslateOptions("es", source="en"))
        latency = spread_of(
            lambda: engine.translate("The house is red.", TranslateOptions("es", source="en")), repeat=51
        )
        latency_text = latency.scaled(1000).text(".2f", " ms")
        print(f"apertium warm pipeline, one short sentence: {latency_text} (target < 10 ms)")
        times = harness.alternate(
            {"dragoman": lambda: engine.translate(text, TranslateOptions("es", source="en")), "plain": plain},
            rounds,
            warmup=1,
        )
    n = len(lines)
    plain_rate = times.spread("plain").inverse(n).text(".0f", " lines/s")
    print(
        f"apertium {n} lines: plain `apertium eng-spa` {plain_rate}, "
        f"dragoman {times.spread('dragoman').inverse(n).text('.0f', ' lines/s')} -> "
        f"{harness.ratio_text(times.ratio('plain', 'dragoman'), percent=True)} of plain (target >= 90%)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = harness.parser(
        __doc__,
        rounds=0,
        quick_rounds=3,
        rounds_help="alternated rounds timed (default: 21 tiny, 3 base, 5 Apertium; 3 with --quick)",
    )
    parser.add_argument(
        "--sizes", default=None, help="comma-separated pack sizes (tiny, base; tiny with --quick)"
    )
    parser.add_argument("--repeat", type=int, dest="rounds", help=argparse.SUPPRESS)  # the old spelling
    parser.add_argument("--no-apertium", action="store_true", help="skip the Apertium figures")
    parser.add_argument(
        "--argos",
        action="store_true",
        help="also time argostranslate on the same packs (its venv is built under build/ on first use)",
    )
    args = parser.parse_args(argv)
    chosen = harness.rounds_of(args)  # 0: each part's default
    sizes = [
        s.strip() for s in (args.sizes or ("tiny" if args.quick else "tiny,base")).split(",") if s.strip()
    ]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i, size in enumerate(sizes):
            bench_ctranslate2(root, size, chosen or ROUNDS.get(size, 3), detection=i == 0, argos=args.argos)
        if not args.no_apertium:
            bench_apertium(root, chosen or 5, 200 if args.quick else 1000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
