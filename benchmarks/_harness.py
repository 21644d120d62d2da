"""What every benchmark here shares: sides run in alternation, medians with their range, paired ratios.

A comparison runs its sides in turn, round after round (A B A B ...; with three sides A B C A B C ...), so
that a change of load on a shared machine weighs on every side alike. The values of one round form a pair
(or a tuple): a ratio is the median of the per-round ratios, printed with their min-max, never a ratio of
figures taken at different moments. A single figure is printed as its median with its min-max.

``alternate`` times plain callables (seconds per side and round); ``alternate_measured`` takes sides that
return their own figure (a rate, a latency); ``alternate_async`` times coroutine functions. Warm-up rounds
run in the same order and are dropped. The clock is a parameter, so that the order and the statistics can
be tested with a fake one.

``parser`` gives every script the same ``--rounds`` / ``--quick`` options (``--quick``: a smoke run, a few
short rounds, figures not worth quoting), and ``unique_sentences`` the English lines the Apertium
comparisons translate: all distinct, since the engine translates a repeated segment once and duplicates
would flatter it.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

Clock = Callable[[], float]


@dataclass(frozen=True)
class Spread:
    """The median of some figures and their extremes (``count`` 0 and NaN everywhere when there were none)."""

    median: float
    low: float
    high: float
    count: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        finite = [v for v in values if not math.isnan(v)]
        if not finite:
            return cls(math.nan, math.nan, math.nan, 0)
        return cls(statistics.median(finite), min(finite), max(finite), len(finite))

    def scaled(self, factor: float) -> Spread:
        """The same figures multiplied by ``factor`` (seconds to milliseconds; a negative factor swaps the
        extremes)."""
        low, high = sorted((self.low * factor, self.high * factor))
        return Spread(self.median * factor, low, high, self.count)

    def inverse(self, numerator: float = 1.0) -> Spread:
        """``numerator / x`` of every figure (seconds per run to runs per second)."""

        def inv(x: float) -> float:
            return numerator / x if x else math.inf

        low, high = sorted((inv(self.low), inv(self.high)))
        return Spread(inv(self.median), low, high, self.count)

    def text(self, spec: str = ".3g", unit: str = "") -> str:
        """``median unit (low-high)``, e.g. ``12.3 ms (11.9-14.0)`` (``low to high`` when ``low`` < 0)."""
        if not self.count:
            return "n/a"
        dash = " to " if self.low < 0 else "-"
        return f"{self.median:{spec}}{unit} ({self.low:{spec}}{dash}{self.high:{spec}})"


@dataclass(frozen=True)
class Rounds:
    """The figures of alternated rounds: ``values[r][i]`` is side ``names[i]``'s figure in round ``r``;
    ``order`` is the order in which the sides ran, warm-up rounds included."""

    names: tuple[str, ...]
    values: tuple[tuple[float, ...], ...]
    order: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.values)

    def of(self, name: str) -> list[float]:
        i = self.names.index(name)
        return [row[i] for row in self.values]

    def spread(self, name: str) -> Spread:
        return Spread.of(self.of(name))

    def paired(self, a: str, b: str, combine: Callable[[float, float], float]) -> Spread:
        """``combine(a, b)`` of each round's pair, as a median and range."""
        return Spread.of([combine(x, y) for x, y in zip(self.of(a), self.of(b), strict=True)])

    def ratio(self, a: str, b: str) -> Spread:
        """``a / b`` per round (rounds where ``b`` is 0 are left out)."""
        return self.paired(a, b, lambda x, y: x / y if y else math.nan)

    def difference(self, a: str, b: str) -> Spread:
        """``a - b`` per round."""
        return self.paired(a, b, lambda x, y: x - y)


def alternate_measured(sides: Mapping[str, Callable[[], float]], rounds: int, *, warmup: int = 0) -> Rounds:
    """Run the sides in turn, ``warmup`` rounds dropped then ``rounds`` kept; each side returns its own
    figure for the round."""
    if rounds < 1:
        raise ValueError("at least one round")
    names = tuple(sides)
    order: list[str] = []
    kept: list[tuple[float, ...]] = []
    for r in range(warmup + rounds):
        row = []
        for name in names:
            order.append(name)
            row.append(float(sides[name]()))
        if r >= warmup:
            kept.append(tuple(row))
    return Rounds(names, tuple(kept), tuple(order))


def alternate(
    sides: Mapping[str, Callable[[], object]],
    rounds: int,
    *,
    warmup: int = 0,
    clock: Clock = time.perf_counter,
) -> Rounds:
    """Run the sides in turn, round after round, and time each run (seconds by ``clock``)."""

    def timed(fn: Callable[[], object]) -> Callable[[], float]:
        def run() -> float:
            start = clock()
            fn()
            return clock() - start

        return run

    return alternate_measured({name: timed(fn) for name, fn in sides.items()}, rounds, warmup=warmup)


async def alternate_async(
    sides: Mapping[str, Callable[[], Awaitable[object]]],
    rounds: int,
    *,
    warmup: int = 0,
    clock: Clock = time.perf_counter,
) -> Rounds:
    """:func:`alternate` for coroutine functions (awaited one after the other, never concurrently)."""
    if rounds < 1:
        raise ValueError("at least one round")
    names = tuple(sides)
    order: list[str] = []
    kept: list[tuple[float, ...]] = []
    for r in range(warmup + rounds):
        row = []
        for name in names:
            order.append(name)
            start = clock()
            await sides[name]()
            row.append(clock() - start)
        if r >= warmup:
            kept.append(tuple(row))
    return Rounds(names, tuple(kept), tuple(order))


def ratio_text(spread: Spread, *, percent: bool = False) -> str:
    """A paired ratio: ``1.23x (rounds 1.10-1.40x, n=7)``; with ``percent``, ``93% (rounds 90%-97%, n=7)``."""
    if not spread.count:
        return "n/a"
    if percent:
        return f"{spread.median:.0%} (rounds {spread.low:.0%}-{spread.high:.0%}, n={spread.count})"
    return f"{spread.median:.2f}x (rounds {spread.low:.2f}-{spread.high:.2f}x, n={spread.count})"


def parser(
    doc: str | None, *, rounds: int, quick_rounds: int, rounds_help: str | None = None
) -> argparse.ArgumentParser:
    """An argument parser with the module's docstring as its description and the shared options:
    ``--rounds N`` (alternated rounds timed) and ``--quick`` (a smoke run); read them with
    :func:`rounds_of`. ``rounds`` 0 stands for "each part's own default" (say so in ``rounds_help``)."""
    made = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    made.add_argument(
        "--rounds",
        type=int,
        default=None,
        help=rounds_help
        or f"alternated rounds timed, each side once a round (default {rounds}; {quick_rounds} with --quick)",
    )
    made.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: few, short rounds (the figures are not worth quoting)",
    )
    made.set_defaults(_rounds=(rounds, quick_rounds))
    return made


def rounds_of(args: argparse.Namespace) -> int:
    """The rounds asked for, or the default (the quick one with ``--quick``)."""
    full, quick = args._rounds
    if args.rounds is not None:
        if args.rounds < 1:
            raise SystemExit("--rounds must be at least 1")
        return int(args.rounds)
    return int(quick if args.quick else full)


SUBJECTS = (
    "The old man",
    "My sister",
    "The children",
    "Our neighbours",
    "The teacher",
    "A young woman",
    "They",
    "The doctor",
)
VERBS = ("bought", "found", "painted", "wanted", "sold", "cleaned", "visited", "opened", "carried", "liked")
OBJECTS = (
    "a red car",
    "the small house",
    "three green apples",
    "the new school",
    "a letter",
    "the window",
    "an old bicycle",
    "the blue door",
)
TAILS = (
    "yesterday.",
    "in the morning.",
    "because it was cheap.",
    "before the rain started.",
    "with great care.",
    "last summer.",
)


def unique_sentences(n: int, *, seed: int = 0) -> list[str]:
    """``n`` distinct short English sentences (subject, verb, object, tail; in a shuffled order so that
    neighbours differ in every part). At most ``8 * 10 * 8 * 6`` = 3840."""
    sizes = (len(SUBJECTS), len(VERBS), len(OBJECTS), len(TAILS))
    total = math.prod(sizes)
    if not 0 <= n <= total:
        raise ValueError(f"between 0 and {total} distinct sentences, not {n}")
    lines = []
    for k in random.Random(seed).sample(range(total), n):
        k, s = divmod(k, sizes[0])
        k, v = divmod(k, sizes[1])
        t, o = divmod(k, sizes[2])
        lines.append(f"{SUBJECTS[s]} {VERBS[v]} {OBJECTS[o]} {TAILS[t]}")
    assert_unique(lines)
    return lines


def assert_unique(lines: Sequence[str]) -> None:
    """Fail when any line repeats (the engine translates a repeated segment once)."""
    repeated = len(lines) - len(set(lines))
    if repeated:
        raise AssertionError(f"{repeated} of {len(lines)} lines are repeats")
