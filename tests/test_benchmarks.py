"""The benchmarks' shared harness (alternation order, statistics; a fake clock) and every script's ``--help``.

The scripts live in ``benchmarks/`` (not a package): the harness is loaded from its file, the scripts run
as subprocesses, as ``make bench`` runs them.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from support import needs_apertium

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = (
    "apertium.py",
    "daemon.py",
    "dub.py",
    "engine.py",
    "formats.py",
    "hosted.py",
    "http_path.py",
    "mcp.py",
    "quality.py",
    "routing.py",
    "scale.py",
    "subtitles.py",
    "tts.py",
)


def test_every_script_in_benchmarks_is_covered() -> None:
    """A new script is checked like the others: ``--help``, the shared harness, and a quick run of its own
    below (helper modules start with ``_`` and are not scripts)."""
    scripts = sorted(p.name for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))
    assert tuple(scripts) == SCRIPTS
    tests = {name for name in globals() if name.startswith("test_") and "_quick_run" in name}
    for script in scripts:
        stem = script.removesuffix(".py")
        assert any(name.startswith(f"test_{stem}_quick_run") for name in tests), f"no quick run of {script}"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_bench{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


harness = _load("_harness")
peers = _load("_peers")


class FakeClock:
    """A clock that moves only when a side "works" for a given time."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def side(self, name: str, durations: list[float], log: list[str]) -> Callable[[], None]:
        it: Iterator[float] = iter(durations)

        def run() -> None:
            log.append(name)
            self.now += next(it)

        return run


def _run_script(script: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRAGOMAN_")}
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=BENCHMARKS.parent,
    )


# --- every script answers --help without running ------------------------------------------------------


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_exits_at_once_without_running(script: str) -> None:
    started = time.monotonic()
    done = _run_script(script, "--help", timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: "), done.stdout[:200]
    assert "--rounds" in done.stdout and "--quick" in done.stdout
    # Nothing but the help: no measurement printed, nothing on stderr (a run would log or print figures).
    assert done.stderr == ""
    assert "alternated rounds of" not in done.stdout and "pages/s" not in done.stdout.split("options:")[-1]
    assert time.monotonic() - started < 30  # a generous bound: a run takes far longer


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_use_the_shared_harness(script: str) -> None:
    source = (BENCHMARKS / script).read_text(encoding="utf-8")
    assert "import _harness as harness" in source
    assert "harness.parser(" in source and "harness.rounds_of(" in source
    assert "harness.alternate" in source


def test_a_bad_rounds_option_is_refused() -> None:
    done = _run_script("apertium.py", "--rounds", "0", timeout=60)
    assert done.returncode != 0
    assert "--rounds must be at least 1" in done.stderr


def test_peers_need_a_ctranslate2_pack() -> None:
    done = _run_script("daemon.py", "--peers", timeout=60)  # the default pack is Apertium
    assert done.returncode == 2
    assert "--peers needs a CTranslate2 pack" in done.stderr


# --- alternation -----------------------------------------------------------------------------------------


def test_two_sides_alternate_round_by_round_and_warm_up_is_dropped() -> None:
    clock, log = FakeClock(), list[str]()
    sides = {
        "A": clock.side("A", [9.0, 1.0, 2.0, 3.0], log),
        "B": clock.side("B", [9.0, 2.0, 2.0, 4.0], log),
    }
    rounds = harness.alternate(sides, 3, warmup=1, clock=clock)
    assert log == ["A", "B"] * 4
    assert rounds.order == ("A", "B") * 4
    assert rounds.names == ("A", "B")
    assert len(rounds) == 3
    assert rounds.of("A") == [1.0, 2.0, 3.0]  # the warm-up's 9 s are dropped
    assert rounds.of("B") == [2.0, 2.0, 4.0]


def test_three_sides_keep_their_order_every_round() -> None:
    clock, log = FakeClock(), list[str]()
    sides = {name: clock.side(name, [1.0] * 5, log) for name in ("x", "y", "z")}
    rounds = harness.alternate(sides, 5, clock=clock)
    assert log == ["x", "y", "z"] * 5
    assert rounds.values == ((1.0, 1.0, 1.0),) * 5


def test_measured_sides_give_their_own_figures() -> None:
    log: list[str] = []
    figures = {"fast": iter([10.0, 12.0, 11.0]), "slow": iter([5.0, 4.0, 6.0])}

    def side(name: str) -> Callable[[], float]:
        def run() -> float:
            log.append(name)
            return next(figures[name])

        return run

    rounds = harness.alternate_measured({"fast": side("fast"), "slow": side("slow")}, 3)
    assert log == ["fast", "slow"] * 3
    assert rounds.spread("fast") == harness.Spread(11.0, 10.0, 12.0, 3)
    ratio = rounds.ratio("fast", "slow")
    assert (ratio.median, ratio.low, ratio.high) == (2.0, 11.0 / 6.0, 3.0)


def test_async_sides_alternate_one_at_a_time() -> None:
    clock, log, running = FakeClock(), list[str](), list[str]()

    def side(name: str, seconds: float) -> Callable[[], object]:
        async def run() -> None:
            running.append(name)
            assert len(running) == 1, "two sides ran at once"
            log.append(name)
            await asyncio.sleep(0)
            clock.now += seconds
            running.remove(name)

        return run

    rounds = asyncio.run(harness.alternate_async({"A": side("A", 1.0), "B": side("B", 3.0)}, 2, clock=clock))
    assert log == ["A", "B"] * 2
    assert rounds.of("A") == [1.0, 1.0] and rounds.of("B") == [3.0, 3.0]


def test_at_least_one_round() -> None:
    with pytest.raises(ValueError, match="at least one round"):
        harness.alternate({"A": lambda: None}, 0)
    with pytest.raises(ValueError, match="at least one round"):
        asyncio.run(harness.alternate_async({}, 0))


# --- statistics ------------------------------------------------------------------------------------------


def test_spread_is_median_min_max() -> None:
    assert harness.Spread.of([3.0, 1.0, 2.0]) == harness.Spread(2.0, 1.0, 3.0, 3)
    assert harness.Spread.of([4.0, 1.0, 2.0, 3.0]) == harness.Spread(2.5, 1.0, 4.0, 4)
    assert harness.Spread.of([1.0, math.nan, 3.0]) == harness.Spread(2.0, 1.0, 3.0, 2)
    empty = harness.Spread.of([])
    assert empty.count == 0 and math.isnan(empty.median)
    assert empty.text() == "n/a"


def test_spread_transformations() -> None:
    seconds = harness.Spread(0.5, 0.25, 1.0, 3)
    assert seconds.scaled(1000) == harness.Spread(500.0, 250.0, 1000.0, 3)
    assert seconds.scaled(-1) == harness.Spread(-0.5, -1.0, -0.25, 3)
    # Seconds per run of 100 items to items per second: the slowest run is the lowest rate.
    assert seconds.inverse(100) == harness.Spread(200.0, 100.0, 400.0, 3)
    assert seconds.scaled(1000).text(".0f", " ms") == "500 ms (250-1000)"
    assert harness.Spread(-1.0, -2.0, 1.0, 3).text(".1f") == "-1.0 (-2.0 to 1.0)"


def test_ratio_is_paired_round_by_round() -> None:
    # B is twice as slow as A in every round while the load moves between rounds: each round's pair says 2,
    # so the ratio has no spread at all, though each side's own figures range over a factor of 4.
    clock, log = FakeClock(), list[str]()
    sides = {"A": clock.side("A", [1.0, 4.0, 1.5], log), "B": clock.side("B", [2.0, 8.0, 3.0], log)}
    rounds = harness.alternate(sides, 3, clock=clock)
    assert rounds.ratio("B", "A") == harness.Spread(2.0, 2.0, 2.0, 3)
    assert rounds.difference("B", "A") == harness.Spread(1.5, 1.0, 4.0, 3)
    assert rounds.spread("B") == harness.Spread(3.0, 2.0, 8.0, 3)
    assert harness.ratio_text(rounds.ratio("B", "A")) == "2.00x (rounds 2.00-2.00x, n=3)"
    assert harness.ratio_text(rounds.ratio("A", "B"), percent=True) == "50% (rounds 50%-50%, n=3)"


def test_ratio_leaves_out_rounds_with_a_zero_denominator() -> None:
    rounds = harness.Rounds(("a", "b"), ((1.0, 0.0), (3.0, 1.0), (4.0, 2.0)), ("a", "b") * 3)
    assert rounds.ratio("a", "b") == harness.Spread(2.5, 2.0, 3.0, 2)
    assert harness.ratio_text(harness.Rounds(("a", "b"), ((1.0, 0.0),), ("a", "b")).ratio("a", "b")) == "n/a"


# --- options ---------------------------------------------------------------------------------------------


def test_rounds_options() -> None:
    parser = harness.parser("doc", rounds=7, quick_rounds=2)
    assert harness.rounds_of(parser.parse_args([])) == 7
    assert harness.rounds_of(parser.parse_args(["--quick"])) == 2
    assert harness.rounds_of(parser.parse_args(["--quick", "--rounds", "4"])) == 4
    with pytest.raises(SystemExit):
        harness.rounds_of(parser.parse_args(["--rounds", "0"]))


# --- the Apertium lines ----------------------------------------------------------------------------------


def test_sentences_are_distinct_and_reproducible() -> None:
    lines = harness.unique_sentences(1000)
    assert len(lines) == len(set(lines)) == 1000
    assert harness.unique_sentences(1000) == lines
    every = harness.unique_sentences(3840)
    assert len(set(every)) == 3840
    with pytest.raises(ValueError):
        harness.unique_sentences(3841)


@pytest.mark.parametrize(
    ("script", "where"),
    [
        ("apertium.py", "lines = harness.unique_sentences(n)"),
        ("engine.py", "lines = harness.unique_sentences(count)"),  # its Apertium part
        ("daemon.py", "TEXTS = harness.unique_sentences(64)"),
    ],
)
def test_the_apertium_line_sets_come_from_the_distinct_sentences(script: str, where: str) -> None:
    """The lines timed against plain Apertium (and the daemon's texts) are the harness's distinct sentences:
    a repeat would be translated once by the engine, flattering it (21% of the old set were repeats)."""
    assert where in (BENCHMARKS / script).read_text(encoding="utf-8")


def test_the_engine_benchmarks_neural_texts_are_distinct() -> None:
    from dragoman.testing.tinypack import sample_sentences

    texts = sample_sentences(64, seed=1)  # benchmarks/engine.py's batch of 64
    assert "texts = sample_sentences(64, seed=1)" in (BENCHMARKS / "engine.py").read_text(encoding="utf-8")
    assert len(set(texts)) == 64


def test_repeated_lines_are_caught() -> None:
    harness.assert_unique(["a", "b"])
    with pytest.raises(AssertionError, match="1 of 3 lines are repeats"):
        harness.assert_unique(["a", "b", "a"])


# --- the peers' environment --------------------------------------------------------------------------------


def test_peer_environment_is_offline_and_isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARGOS_INTER_THREADS", "7")  # the caller's own Argos settings do not leak in
    setup = peers.Peers(tmp_path / "python", tmp_path / "packages", tmp_path / "home")
    default = setup.env("default", (2, 1))
    assert default["ARGOS_CHUNK_TYPE"] == "SPACY"
    assert default["ARGOS_PACKAGES_DIR"] == str(tmp_path / "packages")
    assert default["HOME"] == str(tmp_path / "home")
    assert default["XDG_CACHE_HOME"].startswith(str(tmp_path / "home"))
    assert "ARGOS_INTER_THREADS" not in default and "ARGOS_INTRA_THREADS" not in default
    assert not any(name.startswith("DRAGOMAN_") for name in default)
    matched = setup.env("matched", (2, 1))
    assert (matched["ARGOS_INTER_THREADS"], matched["ARGOS_INTRA_THREADS"]) == ("2", "1")
    with pytest.raises(ValueError):
        setup.env("fast", (2, 1))


# --- quick smoke runs (slow: they really translate) ------------------------------------------------------


@pytest.mark.slow
def test_engine_quick_run() -> None:
    done = _run_script("engine.py", "--quick", "--rounds", "1", "--no-apertium", timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "dragoman at" in done.stdout and "(rounds " in done.stdout


def test_routing_quick_run() -> None:
    done = _run_script("routing.py", "--quick", timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "x faster (rounds " in done.stdout and "pruned" in done.stdout


@pytest.mark.slow
@needs_apertium
def test_apertium_quick_run() -> None:
    done = _run_script("apertium.py", "--quick", "--lines", "50", timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "50 distinct lines" in done.stdout and "dragoman/plain throughput" in done.stdout


@pytest.mark.slow
@needs_apertium
@pytest.mark.skipif(
    not Path("/usr/share/apertium/modes/pol-szl.mode").is_file()
    or not Path("/usr/share/locale/pl/LC_MESSAGES/iso_3166-1.mo").is_file(),
    reason="apt-get install apertium-pol-szl iso-codes",
)
def test_quality_quick_run_has_a_row_for_a_language_iso_codes_lacks() -> None:
    done = _run_script("quality.py", "--quick", "--rounds", "1", "--pairs", "en-es,pl-szl", timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert any(line.startswith("| en-es | apertium-eng-spa | ") for line in lines)
    assert (
        "| pl-szl | apertium-pol-szl | pl > - | - | - | - | - | no reference: iso-codes has no szl locale |"
        in lines
    )


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("ffmpeg") is None or shutil.which("flite") is None, reason="apt-get install ffmpeg flite"
)
def test_dub_quick_run() -> None:
    done = _run_script("dub.py", "--quick", "--minutes", "0.25", "--modes", "preset,match", timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "recognition: none: the source subtitles given" in out
    for mode in ("preset", "match"):
        assert re.search(rf"^\[{mode}\] [\d.]+ min of video", out, re.M), out
    for stage in ("translate", "synthesise", "mix", "mux", "total"):
        assert re.search(rf"^  {stage}\s+[\d.]+ s/min \(", out, re.M), out
    assert re.search(r"^2\. peak RSS of the dub of a [\d.]+-minute video: \d+ MiB", out, re.M), out
    assert re.search(r"^3\. lines fitted within the natural range: [\d.]+% of \d+", out, re.M), out


@pytest.mark.slow
def test_tts_quick_run() -> None:
    done = _run_script("tts.py", "--quick", "--rounds", "1", timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert re.search(r"^  pico:\S+\s+[\d.]+x \(", out, re.M), out
    assert re.search(r"^  en studio \(\w+\)\s+[\d.]+x", out, re.M), out
    assert re.search(r"^  stream: first audio byte\s+\d+ ms", out, re.M), out
    assert "4. intelligibility" in out and re.search(r"^  en \(\w+\): aria ", out, re.M), out


@pytest.mark.slow
def test_daemon_quick_run() -> None:
    done = _run_script(
        "daemon.py",
        "--quick",
        "--pack",
        "tiny",
        "--clients",
        "1",
        "--rounds",
        "1",
        "--workers",
        "1",
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "target (HTTP overhead" not in done.stdout  # no row of 8 clients asked for
    assert " | " in done.stdout.splitlines()[-1]


@pytest.mark.slow
def test_daemon_targets_say_whether_the_engine_itself_could_meet_them() -> None:
    """At 8 clients each of issue 10's rate targets is set against the engine's own rate at 8 texts a call:
    eight single-text clients can give no batcher more, so a target above it is out of reach on the
    machine, and the line says so with the figure it asks for."""
    args = (
        "--quick",
        "--pack",
        "tiny",
        "--clients",
        "8",
        "--rounds",
        "1",
        "--workers",
        "1",
        "--batching-off",
    )
    done = _run_script("daemon.py", *args, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    row = next(line for line in out.splitlines() if re.match(r"^\s+8\s+[\d.]+ \|", line))
    share = float(row.split("|")[2].split()[2].rstrip("x"))  # batch of N / 64-text batch, one round
    line = next(line for line in out.splitlines() if "80% of the engine's batch rate" in line)
    asks = re.search(r"it asks for ([\d.]+)x .* at 8 texts a call: (beyond|within) its reach$", line)
    assert asks, line
    # both figures are printed to 2 decimals: the share's rounding moves 0.8 / share by up to 0.005 / share
    assert float(asks[1]) == pytest.approx(0.8 / share, rel=0.005 / share + 0.01), (line, row)
    assert asks[2] == ("beyond" if float(asks[1]) > 1 else "within")
    assert re.search(r"4x the daemon with batching off\): .*: (beyond|within) its reach$", out, re.M), out


def test_http_path_quick_run() -> None:
    done = _run_script("http_path.py", "--quick", "--clients", "2", "--seconds", "0.2", timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {line.split("|")[0].strip(): line for line in done.stdout.splitlines() if " | " in line}
    for side in ("daemon", "bare"):
        fields = rows[side].split("|")[1].split()
        assert float(fields[0]) > 0 and fields[-1] == "0", rows[side]  # a rate, and no errors
    assert "the daemon's own code:" in done.stdout.splitlines()[-1]


@pytest.mark.slow
def test_hosted_quick_run() -> None:
    done = _run_script(
        "hosted.py",
        "--quick",
        "--pack",
        "tiny",
        "--clients",
        "1",
        "--rounds",
        "1",
        "--seconds",
        "0.3",
        "--jobs",
        "4",
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    for side in ("daemon", "v2", "v1"):
        assert re.search(rf"^\s+1\s+{side} \|", out, re.M), out
    assert re.search(
        r"^async jobs: 4 jobs of ~[\d,]+ characters a round, submit to last done: [\d.]+ jobs/s", out, re.M
    )
    assert "jobs not done" not in out
    assert "target (hosted v2" not in out  # no row of 8 clients asked for
    assert "the 60/min limit never met" in out


@pytest.mark.slow
@needs_apertium
def test_scale_quick_run() -> None:
    from dragoman.testing.postgres import unavailable_reason as pg_missing
    from dragoman.testing.redis_server import unavailable_reason as redis_missing

    reason = pg_missing() or redis_missing()
    if reason:
        pytest.skip(f"benchmarks/scale.py needs PostgreSQL and Redis: {reason}")
    done = _run_script(
        "scale.py", "--quick", "--jobs", "4", "--clients", "2", "--seconds", "0.5", timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert re.search(r"^\d+ CPU cores", out, re.M), out
    for side in ("embedded", "1 worker", "2 workers", "4 workers"):
        assert re.search(rf"^\s*{side} \| +[\d.]+ \(", out, re.M), out
    assert re.search(r"^\s*2 workers \|.*\| +[\d.]+x \(rounds", out, re.M), out
    for side in ("embedded", "1 API", "2 APIs"):
        assert re.search(rf"^\s*{side} \| +[\d.]+ \([^)]*\) +[\d.]+ +[\d.]+ +0 \|", out, re.M), out


@pytest.mark.slow
def test_mcp_quick_run() -> None:
    done = _run_script("mcp.py", "--quick", "--rounds", "3", "--warmup", "1", timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "3 alternated rounds (in-process, in memory, over stdio)" in out
    for side in ("in-process", "mcp memory", "mcp stdio"):
        assert re.search(rf"^{side}\s+median\s+[\d.]+ ms .* min\s+[\d.]+ ms\s+max\s+[\d.]+ ms", out, re.M), (
            out
        )
    assert re.search(r"^protocol overhead, median of the rounds' own differences: -?[\d.]+ ms \(", out, re.M)
    assert re.search(r"stdio / in-process time: [\d.]+x \(rounds [\d.]+-[\d.]+x, n=3\)", out), out


@pytest.mark.slow
@needs_apertium
def test_formats_quick_run() -> None:
    done = _run_script("formats.py", "--quick", "--rounds", "2", "--pages", "2", timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    for name in ("DOCX", "PDF"):
        assert re.search(
            rf"^{name}: 2 pages, \d+ texts in \d+ call\(s\).*2 alternated rounds, median \(min-max\)",
            out,
            re.M,
        ), out
    assert (
        len(re.findall(r"^  end to end \(translate_file\): [\d.]+ pages/s \([\d.]+-[\d.]+\)", out, re.M)) == 2
    )
    assert len(re.findall(r"^  format layer overhead: -?\d+% \(rounds .*, n=2\)", out, re.M)) == 2, out


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="apt-get install ffmpeg")
def test_subtitles_quick_run() -> None:
    """The whole set recognised by both sides (Whisper base: about two minutes on two busy cores)."""
    done = _run_script("subtitles.py", "--quick", "--rounds", "1", timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "1. transcription of the whole set (1 alternated rounds, medians with min-max)" in out
    for side in ("dragoman", "faster-whisper"):
        assert re.search(rf"^  {side}\s+CPU [\d.]+ s \([\d.]+-[\d.]+\); wall [\d.]+ s \(", out, re.M), out
    assert re.search(r"^  CPU dragoman / faster-whisper: [\d.]+x \(rounds [\d.]+-[\d.]+x, n=1\)", out, re.M)
    assert "2. word error rate per language" in out and "4. cues that obey every rule" in out


@pytest.mark.slow
@pytest.mark.skipif(not (BENCHMARKS.parent / "build" / "peers-venv").is_dir(), reason="no peers venv built")
def test_engine_quick_run_with_argos() -> None:
    done = _run_script("engine.py", "--quick", "--rounds", "1", "--no-apertium", "--argos", timeout=280)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "matched settings" in done.stdout and "default settings" in done.stdout
