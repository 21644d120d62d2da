"""Growth-ratio checks shared by the scanner tests (issue 9, item 1): is some work linear in its input?

An adversarial input is built at n and ``growth`` * n characters; the work is timed on each side by side
(the minimum of several samples each, taken alternately, in CPU time of the measuring thread, so machine
load touches neither) and the ratio of the
two costs is compared with what linear work gives (``growth``) and what quadratic work gives (``growth``
squared). Only ratios are compared, never absolute times.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Mapping

#: Linear work gives GROWTH (4); quadratic gives GROWTH**2 (16). Half-way between, with room for noise.
GROWTH = 4
MAX_RATIO = 8.0
REPEATS = 5
#: Each timed sample runs the work this long at least at size n, so a sample is not lost in timer noise.
MIN_SAMPLE_S = 0.0005
#: Measurements taken again before a ratio over the bound fails (a shared machine has busy moments; a
#: quadratic scanner is over the bound every time), after a pause that doubles each time (from
#: RETRY_PAUSE_S) so that a burst of load elsewhere can pass. At load 12 on 2 cores one input's ratio was
#: over 8 four times in a row with 3 quick retries; linear work measures about 4 (2.5-6.5 under that load).
RETRIES = 5
RETRY_PAUSE_S = 0.1


def repeat(unit: str) -> Callable[[int], str]:
    """An input of n characters: ``unit`` repeated (and cut to n)."""
    return lambda n: (unit * (n // len(unit) + 1))[:n]


def _sample(work: Callable[[str], object], text: str, calls: int) -> float:
    # CPU time of this thread, not wall time: while other processes hold the cores, a sample waits without
    # counting, so a busy machine does not inflate one side's samples more than the other's.
    start = time.thread_time()
    for _ in range(calls):
        work(text)
    return time.thread_time() - start


def growth_ratio(
    work: Callable[[str], object],
    make: Callable[[int], str],
    n: int,
    growth: int = GROWTH,
    repeats: int = REPEATS,
) -> float:
    """Cost at ``growth`` * n over cost at n: the best of ``repeats`` samples of each, taken alternately."""
    small, large = make(n), make(n * growth)
    calls = 1
    while _sample(work, small, calls) < MIN_SAMPLE_S and calls < 1 << 16:
        calls *= 2
    best_small = best_large = float("inf")
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            best_small = min(best_small, _sample(work, small, calls))
            best_large = min(best_large, _sample(work, large, calls))
    finally:
        if enabled:
            gc.enable()
    return best_large / best_small


def assert_linear(
    work: Callable[[str], object],
    inputs: Mapping[str, Callable[[int], str]],
    n: int,
    growth: int = GROWTH,
    max_ratio: float = MAX_RATIO,
    repeats: int = REPEATS,
) -> None:
    """Fail naming every input whose cost grows faster than linearly (measured again, up to RETRIES times,
    before failing)."""
    slow: dict[str, float] = {}
    for name, make in inputs.items():
        ratio = growth_ratio(work, make, n, growth, repeats)
        for attempt in range(RETRIES):
            if ratio < max_ratio:
                break
            time.sleep(RETRY_PAUSE_S * 2**attempt)  # not a synchronisation: lets a burst of load pass
            ratio = min(ratio, growth_ratio(work, make, n, growth, repeats))  # the machine may have been busy
        if ratio >= max_ratio:
            slow[name] = round(ratio, 1)
    assert not slow, f"cost grows faster than linearly (x{growth} input gives these cost ratios): {slow}"
