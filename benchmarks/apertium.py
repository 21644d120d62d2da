"""Apertium backend speed: warm-pipeline latency, and batch throughput vs one plain ``apertium`` process.

1. Latency: one short sentence through a warm :class:`ApertiumBackend` (median and min-max of 200 calls;
   target < 10 ms).
2. Throughput: N distinct sentences (1000; none repeats, since the engine translates a repeated segment
   once) in one ``translate_batch`` call vs ``apertium eng-spa in.txt out.txt`` over the same sentences,
   one a line (target: the backend at least 90% of plain apertium). The sides alternate round by round
   (dragoman, plain, plain's start, dragoman, ...); each ratio is the median of the rounds' own ratios with
   their range. Plain apertium is timed whole (its ~200 ms start included, as a caller would pay it) and
   also without its start (the same round's time of an empty input subtracted), the stricter comparison.

Run: ``.venv/bin/python benchmarks/apertium.py [--lines N] [--rounds R] [--quick]`` (a few seconds; needs
apertium and apertium-eng-spa).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import _harness as harness


def plain_apertium(lines: list[str], tmp: Path) -> None:
    src, out = tmp / f"in{len(lines)}.txt", tmp / "out.txt"
    if not src.exists():
        src.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    subprocess.run(["apertium", "eng-spa", str(src), str(out)], check=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = harness.parser(__doc__, rounds=5, quick_rounds=2)
    parser.add_argument("--lines", type=int, default=None, help="distinct sentences (1000; 200 with --quick)")
    parser.add_argument("n", nargs="?", type=int, help="the same as --lines (the old spelling)")
    args = parser.parse_args(argv)
    rounds = harness.rounds_of(args)
    n = args.lines or args.n or (200 if args.quick else 1000)

    from dragoman.translation.backends.apertium import ApertiumBackend, discover_modes

    modes = {m.name: m for m in discover_modes([Path("/usr/share/apertium/modes")])}
    if "eng-spa" not in modes or shutil.which("apertium") is None:
        sys.exit("needs Apertium eng-spa: sudo apt-get install apertium apertium-eng-spa")
    lines = harness.unique_sentences(n)
    backend = ApertiumBackend(modes["eng-spa"])
    try:
        backend.translate_batch([("Warm up.",)], "eng_Latn", "spa_Latn")
        latencies = []
        for _ in range(20 if args.quick else 200):
            start = time.perf_counter()
            backend.translate_batch([("The house is red.",)], "eng_Latn", "spa_Latn")
            latencies.append(time.perf_counter() - start)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            times = harness.alternate(
                {
                    "dragoman": lambda: backend.translate_batch(
                        [(line,) for line in lines], "eng_Latn", "spa_Latn"
                    ),
                    "plain": lambda: plain_apertium(lines, folder),
                    "start": lambda: plain_apertium([], folder),
                },
                rounds,
                warmup=1,
            )
    finally:
        backend.close()
    latency = harness.Spread.of(latencies).scaled(1000)
    ours, plain = times.spread("dragoman").inverse(n), times.spread("plain").inverse(n)
    print(
        f"{n} distinct lines, {rounds} alternated rounds (dragoman, plain, plain's start); median (min-max)"
    )
    print(f"latency, one short sentence, warm pipeline: {latency.text('.2f', ' ms')} (target < 10 ms)")
    print(f"dragoman translate_batch: {ours.text('.0f', ' sentences/s')}")
    print(f"plain `apertium eng-spa` file: {plain.text('.0f', ' sentences/s')}")
    print(f"plain apertium start (empty input): {times.spread('start').scaled(1000).text('.0f', ' ms')}")
    print(
        "dragoman/plain throughput: "
        f"{harness.ratio_text(times.ratio('plain', 'dragoman'), percent=True)} (target >= 90%)"
    )
    plain_only = [p - s for p, s in zip(times.of("plain"), times.of("start"), strict=True)]
    without_start = harness.Spread.of([p / d for p, d in zip(plain_only, times.of("dragoman"), strict=True)])
    print(f"the same without plain apertium's start: {harness.ratio_text(without_start, percent=True)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
