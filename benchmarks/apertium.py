"""Apertium backend speed: warm-pipeline latency, and batch throughput vs one plain ``apertium`` process.

1. Latency: one short sentence through a warm :class:`ApertiumBackend` (median of 200 calls; target < 10 ms).
2. Throughput: 1000 sentences in one ``translate_batch`` call vs ``apertium eng-spa in.txt out.txt`` over the
   same sentences, one a line (target: the backend at least 90% of plain apertium). Plain apertium is
   timed whole (its ~200 ms start included, as a caller would pay it) and also without its start (the time
   of an empty input subtracted), the stricter comparison.

Run: ``.venv/bin/python benchmarks/apertium.py [N]`` (a few seconds; needs apertium and apertium-eng-spa).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dragoman.translation.backends.apertium import ApertiumBackend, discover_modes

SUBJECTS = (
    "The old man",
    "My sister",
    "The children",
    "Our neighbours",
    "The teacher",
    "A young woman",
    "They",
)
VERBS = ("bought", "found", "painted", "wanted", "sold", "cleaned", "visited", "opened")
OBJECTS = ("a red car", "the small house", "three green apples", "the new school", "a letter", "the window")
ROUNDS = 5
TAILS = (
    "yesterday.",
    "in the morning.",
    "because it was cheap.",
    "before the rain started.",
    "with great care.",
)


def sentences(n: int) -> list[str]:
    return [
        f"{SUBJECTS[i % 7]} {VERBS[(i // 7) % 8]} {OBJECTS[(i // 3) % 6]} {TAILS[(i // 5) % 5]}"
        for i in range(n)
    ]


def plain_apertium(lines: list[str], tmp: Path) -> float:
    src, out = tmp / "in.txt", tmp / "out.txt"
    src.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    start = time.perf_counter()
    subprocess.run(["apertium", "eng-spa", str(src), str(out)], check=True)
    return time.perf_counter() - start


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    modes = {m.name: m for m in discover_modes([Path("/usr/share/apertium/modes")])}
    if "eng-spa" not in modes or shutil.which("apertium") is None:
        sys.exit("needs Apertium eng-spa: sudo apt-get install apertium apertium-eng-spa")
    backend = ApertiumBackend(modes["eng-spa"])
    try:
        backend.translate_batch([("Warm up.",)], "eng_Latn", "spa_Latn")
        latencies = []
        for _ in range(200):
            start = time.perf_counter()
            backend.translate_batch([("The house is red.",)], "eng_Latn", "spa_Latn")
            latencies.append(time.perf_counter() - start)
        latency = statistics.median(latencies)
        lines = sentences(n)
        ours, plains, starts = [], [], []
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(ROUNDS):  # interleaved, best of each: the machine may be shared
                start = time.perf_counter()
                backend.translate_batch([(line,) for line in lines], "eng_Latn", "spa_Latn")
                ours.append(time.perf_counter() - start)
                plains.append(plain_apertium(lines, Path(tmp)))
                starts.append(plain_apertium([], Path(tmp)))
    finally:
        backend.close()
    best, plain, startup = min(ours), min(plains), min(starts)
    print(f"latency, one short sentence, warm pipeline: {latency * 1000:.2f} ms (target < 10 ms)")
    print(f"dragoman translate_batch, {n} sentences: {best:.3f} s = {n / best:.0f} sentences/s")
    print(f"plain `apertium eng-spa` file, {n} lines: {plain:.3f} s = {n / plain:.0f} sentences/s")
    print(f"plain apertium start (empty input): {startup:.3f} s")
    print(f"ratio dragoman/plain throughput: {plain / best:.2f} (target >= 0.90)")
    print(f"ratio without plain apertium's start: {(plain - startup) / best:.2f}")


if __name__ == "__main__":
    main()
