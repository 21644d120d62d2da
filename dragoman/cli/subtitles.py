"""``dragoman transcribe`` and ``dragoman subtitles`` (issue 15): speech recognition and subtitles from media.

``dragoman transcribe MEDIA [--lang auto] [--model ID] [--json]`` prints what was said (one segment a
line; the language heard, how sure, and the timing on stderr); ``--json`` answers the language, its
confidence, the duration, the model and every segment with its word timings.

``dragoman subtitles MEDIA [--to es,fr] [--from auto] [--format srt,vtt,txt,bilingual_srt] [-o DIR]
[--overwrite]`` writes the captions in the spoken language and a translation into each target as
``NAME.<lang>.<ext>`` beside the media (or in DIR); ``bilingual_srt`` writes ``NAME.<src>-<tgt>.srt``, each
cue with its translation under it. An existing file is never replaced without ``--overwrite``: it is refused
before any work, and nothing is written unless every file can be.

Both show a progress bar on stderr (when it is a terminal and ``--json`` is not given). :func:`register`
adds them to the top-level parser; the speech and media modules are imported inside the commands so
``dragoman --help`` stays quick.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from dragoman.errors import InvalidRequest
from dragoman.progress import JobContext, ProgressCallback

if TYPE_CHECKING:
    from dragoman.settings import Settings
    from dragoman.speech.asr import Recognizer

_SubParsers = argparse._SubParsersAction  # the type of add_subparsers()' answer
FORMATS = ("srt", "vtt", "txt", "bilingual_srt")


def make_recognizer(settings: Settings) -> Recognizer:
    """The recogniser the commands use (one per process; tests replace this function)."""
    from dragoman.speech.asr import Recognizer

    return Recognizer(settings)


def _print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2))


def _codes(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


@contextlib.contextmanager
def _progress(args: argparse.Namespace) -> Iterator[ProgressCallback | None]:
    """A progress bar on stderr over the whole run (none with --json or when stderr is not a terminal)."""
    if args.json or not sys.stderr.isatty():
        yield None
        return
    from tqdm import tqdm

    from dragoman.pipelines.subtitles import PROGRESS_TOTAL

    with tqdm(
        total=PROGRESS_TOTAL,
        file=sys.stderr,
        leave=False,
        desc="starting",
        bar_format="{desc} {bar} {percentage:3.0f}%",
    ) as bar:

        def update(done: int, total: int, message: str) -> None:
            bar.set_description_str(message.split(":", 1)[0], refresh=False)
            bar.update(max(0, done - bar.n))

        yield update


def _options(args: argparse.Namespace) -> Any:
    from dragoman.speech.asr import TranscribeOptions

    return TranscribeOptions(language=args.lang or "auto", model=args.model)


def cmd_transcribe(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.pipelines.subtitles import recognise_file

    recognizer = make_recognizer(settings)
    with _progress(args) as progress:
        info, transcript = recognise_file(args.media, recognizer, _options(args), JobContext.of(progress))
    if args.json:
        _print_json({**transcript.to_dict(), "media": str(info.path)})
        return 0
    for segment in transcript.segments:
        if segment.text.strip():
            print(segment.text.strip())
    how = (
        "given"
        if transcript.language_given
        else f"detected, confidence {transcript.language_probability:.2f}"
    )
    print(
        f"language {transcript.language} ({how}); {transcript.duration:.1f} s of audio in "
        f"{transcript.seconds:.1f} s by {transcript.model} ({transcript.provenance})",
        file=sys.stderr,
    )
    for warning in transcript.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def cmd_subtitles(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.cli.main import _user_glossary
    from dragoman.pipelines.subtitles import make_subtitles

    targets = _codes(args.to or "")
    formats = _codes(args.format)
    if not formats:
        raise InvalidRequest(f"--format names at least one of: {', '.join(FORMATS)}")
    options = _options(args)
    recognizer = make_recognizer(settings)
    engines: list[Any] = []

    def engine() -> Any:
        from dragoman.translation.engine import Engine

        engines.append(Engine(settings))
        return engines[-1]

    try:
        with _progress(args) as progress:
            result = make_subtitles(
                args.media,
                recognizer,
                None,
                targets=targets,
                formats=formats,
                options=options,
                out_dir=args.output,
                overwrite=args.overwrite,
                tier=args.tier,
                glossary=_user_glossary(settings) if targets else (),
                context=JobContext.of(progress),
                engine_factory=engine,
                hint="give --overwrite",
            )
    finally:
        for made in engines:
            made.close()
    if args.json:
        _print_json(
            {
                "media": str(result.media.path),
                "duration": round(result.media.duration, 3),
                "language": result.transcript.language,
                "language_probability": round(result.transcript.language_probability, 4),
                "model": result.transcript.model,
                "tracks": [
                    {
                        "language": t.language,
                        "translated": t.translated,
                        "cues": len(t.cues),
                        "route": list(t.route),
                    }
                    for t in result.tracks
                ],
                "paths": [str(p) for p in result.paths],
                "skipped": list(result.skipped),
                "warnings": list(result.warnings),
                "provenance": result.provenance,
                "seconds": round(result.seconds, 3),
            }
        )
        return 0
    transcript = result.transcript
    how = (
        "given"
        if transcript.language_given
        else f"detected, confidence {transcript.language_probability:.2f}"
    )
    print(f"language {transcript.language} ({how}), {result.media.duration:.1f} s, {result.seconds:.1f} s")
    for path in result.paths:
        print(f"wrote {path}")
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="answer in JSON")
    parser.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log more (to stderr)"
    )
    parser.add_argument(
        "media", help="a video or audio file (MP4, MKV, WebM, MOV, MP3, WAV, M4A, OGG, FLAC...)"
    )
    parser.add_argument("--model", metavar="ID", help="a speech model of the store (default: whisper-base)")


def register(subparsers: _SubParsers[argparse.ArgumentParser]) -> None:
    """Adds ``dragoman transcribe`` and ``dragoman subtitles`` to the top-level subparsers."""
    p = subparsers.add_parser("transcribe", help="recognise the speech of a video or audio file")
    _common(p)
    p.add_argument("--lang", default="auto", help="the spoken language (default auto: detected)")
    p.set_defaults(func=cmd_transcribe)

    p = subparsers.add_parser(
        "subtitles", help="subtitle files for a video or audio file (NAME.<lang>.<ext> beside it)"
    )
    _common(p)
    p.add_argument("--to", help="target languages, comma-separated (es,fr); default: captions only")
    p.add_argument("--from", dest="lang", default="auto", help="the spoken language (default auto)")
    p.add_argument(
        "--format", default="srt", help=f"formats, comma-separated, of {', '.join(FORMATS)} (default srt)"
    )
    p.add_argument(
        "-o", "--output", metavar="DIR", help="the folder to write into (default: beside the media)"
    )
    p.add_argument("--overwrite", action="store_true", help="replace subtitle files that exist")
    p.add_argument("--tier", choices=["best", "fast"], help="translation tier: best (default) or fast")
    p.set_defaults(func=cmd_subtitles)
