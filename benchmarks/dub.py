"""Dubbing (issue 16): wall time per minute of video for each stage, the peak memory of a 10-minute dub, and
the share of lines that fit their slot without compression beyond the natural range, in one run.

    python benchmarks/dub.py                  # a 10-minute video dubbed en -> es, voice aria, 1 round
    python benchmarks/dub.py --quick          # a smoke run: a 1-minute video
    python benchmarks/dub.py --modes preset,match --rounds 3

The test video is made first, as the pipeline's tests make it
(:func:`dragoman.testing.dub.make_dialogue_media`): distinct English sentences
(:func:`_harness.unique_sentences`) said in turn by a woman (SVOX Pico) and a man (flite), 1 s apart, over a
music-like chord at -30 dBFS, with H.264 test video (160x120, 25 fps) and AAC audio in an MP4, for
``--minutes`` minutes. **Recognition is not measured by default**: the lines' own timings are given as the
source subtitles (``DubOptions.subtitles``, an SRT written from where each line was placed), so the figures
are those of dubbing itself (translate, voices, synthesise, fit, mix, mux), not of Whisper; ``--recognise``
recognises the speech with the embedded Whisper base instead (its cost per minute is measured by
``benchmarks/subtitles.py``).
Translation is whatever this machine's engine chooses for the pair (Apertium eng-spa where installed).

Each dub runs in a child process of its own (a fresh interpreter: model loads are part of its stages), so
that its peak resident memory (``ru_maxrss``) is the dub's alone. With several ``--modes`` (voice modes:
preset, match) the sides alternate round by round.

1. **Wall seconds per minute of video, per stage** (median and min-max over the rounds), and in total.
2. **Peak RSS** of the child process (the whole dub of the ``--minutes`` video; ``VmHWM``, not ``ru_maxrss``:
   :func:`peak_rss_kib`). The mix streams in
   10-second chunks with the lines on disk; compare with ``--quick``'s 1-minute figure to see what else grows
   with the length.
3. **Lines that fit**: the share of lines placed in their slot without compression beyond the natural range
   (``beyond_natural`` false: synthesis speed within 0.9-1.2 and no time-stretch past it), and the count that
   needed more.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness as harness

HERE = Path(__file__).resolve().parent


def make_video(folder: Path, minutes: float) -> tuple[Path, Path, int]:
    """An MP4 of about ``minutes`` of an English dialogue over a music-like background, and its source SRT;
    answers (video, srt, lines)."""
    from dragoman.testing.dub import clips_srt, make_dialogue_media

    # one of these sentences takes ~2.5 s to say; with the 1 s gap, ~17 a minute
    count = max(4, round(minutes * 60 / 3.5))
    lines = [
        ("female" if i % 2 == 0 else "male", line[0].upper() + line[1:] + ".")
        for i, line in enumerate(harness.unique_sentences(count, seed=16))
    ]
    video = folder / "talk.mp4"
    clips = make_dialogue_media(video, lines, gap=1.0, background_db=-30.0)
    srt = folder / "source.srt"
    srt.write_text(clips_srt(clips), encoding="utf-8")
    return video, srt, len(clips)


def peak_rss_kib() -> int:
    """This process's peak resident size (KiB): ``VmHWM`` of /proc/self/status where there is one.
    ``ru_maxrss`` is not it here: Linux carries it across ``execve``, and Python starts this child with
    ``vfork`` (the parent's memory): it reported the parent's peak, that of making the test video, which grows
    with the video's length (465 MiB for 10.6 minutes)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def child(args: list[str]) -> None:
    """The dub itself, in its own process: prints one JSON line with its figures."""
    video, srt, target, mode, out_dir = args[:5]
    from dragoman.pipelines.dub import DubOptions, dub_file
    from dragoman.settings import Settings
    from dragoman.speech.asr import Recognizer
    from dragoman.speech.tts.synth import Synthesizer
    from dragoman.translation.engine import Engine

    settings = Settings.from_env()
    options = DubOptions(
        target=target,
        source="en",
        voice_mode=mode,  # type: ignore[arg-type]
        subtitles=Path(srt) if srt != "-" else None,
    )
    engine = Engine(settings)
    started = time.perf_counter()
    try:
        result = dub_file(
            Path(video),
            options,
            recognizer=Recognizer(settings),
            engine=engine,
            synthesizer=Synthesizer(settings),
            out_dir=Path(out_dir),
            overwrite=True,
        )
    finally:
        engine.close()
    wall = time.perf_counter() - started
    peak_kib = peak_rss_kib()
    lines = list(result.lines)
    print(
        json.dumps(
            {
                "duration": result.duration,
                "wall": wall,
                "stages": dict(result.stage_seconds),
                "lines": len(lines),
                "beyond": sum(1 for line in lines if line.beyond_natural),
                "voices": sorted({line.voice for line in lines}),
                "peak_mib": peak_kib / 1024,
                "warnings": len(result.warnings),
            }
        )
    )


def run_child(video: Path, srt: Path | None, target: str, mode: str, out_dir: Path) -> dict[str, Any]:
    argv = [str(video), str(srt) if srt else "-", target, mode, str(out_dir)]
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", *argv],
        capture_output=True,
        text=True,
        timeout=3 * 3600,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
        },
    )
    if done.returncode != 0:
        raise SystemExit(f"the dub failed ({mode}):\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    parser = harness.parser(__doc__, rounds=1, quick_rounds=1)
    parser.add_argument("--minutes", type=float, help="length of the test video (default 10; 1 with --quick)")
    parser.add_argument("--target", default="es", help="the language to dub into (default es)")
    parser.add_argument(
        "--modes", default="preset", help="voice modes to alternate: preset, match (default preset)"
    )
    parser.add_argument(
        "--recognise",
        action="store_true",
        help="recognise the speech with Whisper base instead of giving the source subtitles",
    )
    args = parser.parse_args()
    rounds = harness.rounds_of(args)
    minutes = args.minutes or (1.0 if args.quick else 10.0)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in ("preset", "match") for m in modes):
        raise SystemExit("--modes takes preset and/or match")

    with tempfile.TemporaryDirectory(prefix="dragoman-dub-bench-") as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        video, srt, sentences = make_video(folder, minutes)
        print(
            f"test video: {sentences} English lines, a woman (Pico) and a man (flite) in turn over a chord "
            f"at -30 dBFS, made in {time.perf_counter() - started:.0f} s"
        )
        how = (
            "Whisper base (--recognise)"
            if args.recognise
            else "none: the source subtitles given (--subtitles)"
        )
        print(f"dub en -> {args.target}; recognition: {how}; voice modes: {', '.join(modes)}")
        reports: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}

        def side(mode: str) -> Any:
            def run() -> float:
                out = folder / f"out-{mode}-{len(reports[mode])}"
                out.mkdir()
                report = run_child(video, None if args.recognise else srt, args.target, mode, out)
                reports[mode].append(report)
                return float(report["wall"])

            return run

        harness.alternate_measured({mode: side(mode) for mode in modes}, rounds)

    for mode in modes:
        runs = reports[mode]
        video_minutes = runs[0]["duration"] / 60
        print(
            f"\n[{mode}] {video_minutes:.1f} min of video, {rounds} round(s), "
            f"voices {', '.join(runs[0]['voices'])}"
        )
        print("1. wall seconds per minute of video, per stage")
        stages = list(dict.fromkeys(stage for run in runs for stage in run["stages"]))
        for stage in stages:
            values = [run["stages"].get(stage, 0.0) / (run["duration"] / 60) for run in runs]
            print(f"  {stage:<12} {harness.Spread.of(values).text('.2f', ' s/min')}")
        totals = [run["wall"] / (run["duration"] / 60) for run in runs]
        print(
            f"  {'total':<12} {harness.Spread.of(totals).text('.2f', ' s/min')} "
            "(child wall time, loads included)"
        )
        peaks = harness.Spread.of([run["peak_mib"] for run in runs])
        print(f"2. peak RSS of the dub of a {video_minutes:.1f}-minute video: {peaks.text('.0f', ' MiB')}")
        fit = harness.Spread.of([(run["lines"] - run["beyond"]) / max(1, run["lines"]) for run in runs])
        print(
            f"3. lines fitted within the natural range: {fit.median:.1%} of {runs[0]['lines']} "
            f"({runs[0]['beyond']} compressed beyond it)"
        )


if __name__ == "__main__":
    main()
