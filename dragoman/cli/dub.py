"""``dragoman dub`` (issue 16): a video in one language in, the same video speaking another out.

``dragoman dub VIDEO --to es[,fr] [--voice aria | --voice-mode match | --clone ID] [--from auto]
[--subtitles FILE] [-o OUT_DIR] [--overwrite] [--json]`` recognises the speech (or takes the user's own
source-language SRT/VTT with ``--subtitles``), translates it sentence by sentence, speaks each line with the
chosen voice, fits it to its time slot, mixes it over the original background (the original speech ducked
under the dub) and muxes it with the untouched video stream. It writes, beside the video (or in OUT_DIR),
``NAME.<lang>.<ext>`` (the dubbed video), ``NAME.<lang>.dub.m4a`` (the dubbed audio) and the subtitles of both
languages; several targets make a batch that recognises once. Nothing is written over an existing file
without ``--overwrite``, and a run that fails or is interrupted leaves none of its files.

Voices: ``--voice NAME`` speaks every line with one of the ten voices (mode ``preset``, default ``aria``);
``--voice-mode match`` picks each line's voice from the original speaker's pitch (a dialogue of two speakers
keeps two voices); ``--clone ID`` speaks with a voice clone of ``dragoman voices clone add``.

A progress bar per stage goes to stderr (when it is a terminal and ``--json`` is not given). :func:`register`
adds the command to the top-level parser; the pipeline is imported inside the command so ``dragoman --help``
stays quick.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dragoman.errors import InvalidRequest
from dragoman.progress import JobContext, ProgressCallback

if TYPE_CHECKING:
    from dragoman.settings import Settings
    from dragoman.speech.asr import Recognizer
    from dragoman.speech.tts.synth import Synthesizer

_SubParsers = argparse._SubParsersAction  # the type of add_subparsers()' answer
VOICE_MODES = ("preset", "match", "clone")


def make_recognizer(settings: Settings) -> Recognizer:
    """The recogniser the command uses (it loads its model only when recognition runs; tests replace this)."""
    from dragoman.speech.asr import Recognizer

    return Recognizer(settings)


def make_synthesizer(settings: Settings) -> Synthesizer:
    """The speech synthesizer the command uses (tests replace this function)."""
    from dragoman.speech.tts.synth import Synthesizer

    return Synthesizer(settings)


def _codes(text: str) -> list[str]:
    return list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))


#: Progress words that name a stage otherwise than the pipeline's stage names (``STAGES``) do.
_STAGE_WORDS = {
    "probed": "probe",
    "recognising": "recognise",
    "recognised": "recognise",
    "translating": "translate",
    "translated": "translate",
    "mixing": "mix",
    "writing": "mux",
}
_TARGET_LABEL = "dubbing into "


def _stage(message: str) -> str:
    """The stage a progress message names, after the batch's target ("dubbing into es: synthesise: line 3
    of 9" is "es synthesise"); "done" (the end of the last stage) is the empty string."""
    parts = [part.strip() for part in message.split(":")]
    target = ""
    if parts[0].startswith(_TARGET_LABEL):
        target = parts.pop(0)[len(_TARGET_LABEL) :]
    words = parts[0].split() if parts else []
    word = words[0] if words else "working"
    if word == "done":
        return ""
    return f"{target} {_STAGE_WORDS.get(word, word)}".strip()


class StageBars:
    """A progress callback drawing one tqdm bar per stage on stderr: a new stage closes the previous bar
    (which stays on screen with the stage's elapsed time) and opens its own at the point the run has reached
    (the bars measure the whole run: a batch's targets share one scale)."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._stage: str | None = None

    def __call__(self, done: int, total: int, message: str) -> None:
        from tqdm import tqdm

        stage = _stage(message) or self._stage or "done"
        if stage != self._stage or self._bar is None:
            self.close()
            self._stage = stage
            self._bar = tqdm(
                total=max(total, 1),
                initial=max(0, min(done, total)),
                file=sys.stderr,
                desc=f"{stage:<14}",
                leave=True,
                bar_format="{desc} {bar} {percentage:3.0f}% {elapsed}",
            )
            return
        bar = self._bar
        if total > 0 and bar.total != total:
            bar.total = total
        bar.update(max(0, min(done, bar.total) - bar.n))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


@contextlib.contextmanager
def _progress(args: argparse.Namespace) -> Iterator[ProgressCallback | None]:
    """Bars per stage on stderr (none with --json or when stderr is not a terminal)."""
    if args.json or not sys.stderr.isatty():
        yield None
        return
    bars = StageBars()
    try:
        yield bars
    finally:
        bars.close()


def _voice_options(args: argparse.Namespace) -> dict[str, Any]:
    """The voice fields of the options from --voice, --voice-mode and --clone (contradictions refused)."""
    if args.voice and args.clone:
        raise InvalidRequest("--voice and --clone both name the voice of every line; give one of them")
    mode = args.voice_mode or ("clone" if args.clone else "preset")
    if args.clone and mode != "clone":
        raise InvalidRequest(f"--clone speaks with a clone; it does not go with --voice-mode {mode}")
    if mode == "clone" and not args.clone:
        raise InvalidRequest("--voice-mode clone needs --clone ID (see dragoman voices clone list)")
    if args.voice and mode != "preset":
        raise InvalidRequest(
            f"--voice names the one voice of every line; --voice-mode {mode} chooses the voices itself"
        )
    fields: dict[str, Any] = {"voice_mode": mode}
    if args.voice:
        fields["voice"] = args.voice
    if args.clone:
        fields["clone_id"] = args.clone
    return fields


def _clone_store(args: argparse.Namespace, mode: str) -> Any:
    if mode != "clone":
        return None
    from dragoman.speech.tts.clones import LocalCloneStore

    given = getattr(args, "clone_dir", None)
    return LocalCloneStore(Path(given).expanduser() if given else None)


def _run(args: argparse.Namespace, settings: Settings, targets: Sequence[str]) -> list[Any]:
    from dragoman.cli.main import _user_glossary
    from dragoman.pipelines.dub import DubOptions, dub_batch
    from dragoman.speech.asr import TranscribeOptions
    from dragoman.translation.engine import Engine

    voice = _voice_options(args)
    fields: dict[str, Any] = {"source": args.lang or "auto", **voice}
    if args.tier:
        fields["tier"] = args.tier
    if args.subtitles:
        fields["subtitles"] = Path(args.subtitles).expanduser()
    options = DubOptions(target=targets[0], glossary=_user_glossary(settings), **fields)
    engine = Engine(settings)
    try:
        with _progress(args) as progress:
            return list(
                dub_batch(
                    Path(args.video).expanduser(),
                    targets,
                    options,
                    synthesizer=make_synthesizer(settings),
                    recognizer=make_recognizer(settings),
                    engine=engine,
                    out_dir=Path(args.output).expanduser() if args.output else None,
                    overwrite=args.overwrite,
                    context=JobContext.of(progress),
                    clone_store=_clone_store(args, voice["voice_mode"]),
                    transcribe_options=TranscribeOptions(language=fields["source"], model=args.model),
                    hint="give --overwrite",
                )
            )
    finally:
        engine.close()


def _path(value: Path | None) -> str | None:
    return str(value) if value is not None else None


def result_dict(result: Any) -> dict[str, Any]:
    """One target's dub as JSON: where its files are, how long, which voices, per-stage seconds, warnings."""
    lines = list(result.lines)
    outputs = result.outputs
    return {
        "target": result.target,
        "source_language": result.source_language,
        "language_probability": round(float(result.language_probability), 4),
        "duration": round(float(result.duration), 3),
        "video": _path(outputs.video),
        "audio": _path(outputs.audio),
        "subtitles": {kind: str(p) for kind, p in outputs.subtitles.items()},
        "lines": len(lines),
        "voices": sorted({line.voice for line in lines}),
        "beyond_natural": [line.index for line in lines if line.beyond_natural],
        "overlaps": [line.index for line in lines if line.overlaps],
        "stage_seconds": {stage: round(float(s), 3) for stage, s in result.stage_seconds.items()},
        "warnings": list(result.warnings),
        "provenance": result.provenance,
    }


def cmd_dub(args: argparse.Namespace, settings: Settings) -> int:
    targets = _codes(args.to or "")
    if not targets:
        raise InvalidRequest("--to names at least one target language (es, or es,fr for several)")
    results = _run(args, settings, targets)
    if args.json:
        data = [result_dict(r) for r in results]
        print(json.dumps({"video": str(args.video), "dubs": data}, ensure_ascii=False, indent=2))
        return 0
    for result in results:
        row = result_dict(result)
        fitted = row["lines"] - len(row["beyond_natural"])
        print(
            f"{row['target']}: {row['lines']} lines from {row['source_language']} "
            f"({row['duration']:.1f} s), {fitted} fitted within the natural range; "
            f"voices {', '.join(row['voices']) or '-'}"
        )
        for value in (row["video"], row["audio"], *row["subtitles"].values()):
            if value:
                print(f"wrote {value}")
        stages = ", ".join(f"{k} {v:.1f} s" for k, v in row["stage_seconds"].items())
        print(f"{row['target']} stages: {stages}", file=sys.stderr)
        for warning in row["warnings"]:
            print(f"warning: {warning}", file=sys.stderr)
    return 0


def register(subparsers: _SubParsers[argparse.ArgumentParser]) -> None:
    """Adds ``dragoman dub`` to the top-level subparsers."""
    p = subparsers.add_parser(
        "dub", help="dub a video into other languages (NAME.<lang>.<ext> beside it, with subtitles)"
    )
    p.add_argument("--json", action="store_true", help="answer in JSON")
    p.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log more (to stderr)"
    )
    p.add_argument("video", help="a video (MP4, MKV, WebM, MOV...) or an audio file")
    p.add_argument("--to", required=True, help="target languages, comma-separated (es, or es,fr)")
    p.add_argument("--from", dest="lang", default="auto", help="the spoken language (default auto)")
    p.add_argument("--voice", help="one voice for every line: aria (default), nova, marcus, atlas...")
    p.add_argument(
        "--voice-mode",
        choices=VOICE_MODES,
        help="preset (one voice), match (each line's voice from the original speaker), clone (--clone)",
    )
    p.add_argument("--clone", metavar="ID", help="speak with a voice clone (dragoman voices clone list)")
    p.add_argument(
        "--subtitles",
        metavar="FILE",
        help="your own SRT/VTT of the spoken language, used instead of recognising the speech",
    )
    p.add_argument(
        "-o", "--output", metavar="DIR", help="the folder to write into (default: beside the video)"
    )
    p.add_argument("--overwrite", action="store_true", help="replace output files that exist")
    p.add_argument("--tier", choices=["best", "fast"], help="translation tier: best (default) or fast")
    p.add_argument("--model", metavar="ID", help="a speech model of the store (default: whisper-base)")
    p.add_argument("--clone-dir", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_dub)
