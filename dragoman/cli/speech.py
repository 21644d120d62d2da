"""``dragoman speak`` and ``dragoman voices list`` (issue 14): speech synthesis from the command line.

``dragoman speak TEXT --voice aria --lang en -o out.wav [--emotion warm] [--studio] [--speed 1.2]`` renders
TEXT (or standard input, with ``-`` or no TEXT) to a WAV file (``-o -`` writes it to standard output); the
emotion object refines a preset with ``--speed-ratio``, ``--pitch-st``, ``--energy`` and ``--pause-scale``.
``dragoman voices clone add FILE --name N`` makes a voice match (the nearest voice adapted to the clip's pitch
and formants; not an identity clone), ``clone list`` and ``clone remove ID`` manage them (kept under the
user's data directory), and ``dragoman speak --clone ID`` speaks with one. ``dragoman voices list`` shows the
ten voices, the 31 languages and the engine serving each; ``--json``
answers the whole catalogue (the same as ``GET /api/v1/tts/voices``).

:func:`register` adds both commands to the top-level parser; the speech modules are imported inside the
commands so ``dragoman --help`` stays quick.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dragoman.errors import InvalidRequest
from dragoman.limits import TTS_SPEED_MAX, TTS_SPEED_MIN

if TYPE_CHECKING:
    from dragoman.settings import Settings

_SubParsers = argparse._SubParsersAction  # the type of add_subparsers()' answer

VOICES = ("aria", "nova", "lyra", "iris", "maya", "marcus", "atlas", "felix", "orion", "kai")
EMOTIONS = ("whisper", "shout", "sad", "urgent", "excited", "warm", "calm")


def _print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2))


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"give a number, not {text!r}") from None


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="answer in JSON")
    parser.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log more (to stderr)"
    )


def _write(path: str, data: bytes, *, overwrite: bool) -> Path | None:
    """``data`` written to ``path`` whole (a temporary beside it, then renamed), or to stdout for ``-``."""
    if path == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return None
    target = Path(path).expanduser()
    if target.exists() and not overwrite:
        raise InvalidRequest(f"{target} exists; give --overwrite to replace it, or another -o")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def cmd_speak(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.cli.main import _text_arg
    from dragoman.media.audio import wav_bytes
    from dragoman.speech.tts.synth import Synthesizer
    from dragoman.speech.tts.types import Emotion, SynthesisOptions

    text = _text_arg(args)
    refinements = {
        "speed_ratio": args.speed_ratio,
        "pitch_delta_st": args.pitch_st,
        "energy_ratio": args.energy,
        "pause_scale": args.pause_scale,
    }
    given = {k: v for k, v in refinements.items() if v is not None}
    options = SynthesisOptions(
        voice=args.voice,
        language=args.lang,
        speed=args.speed,
        emotion_preset=args.emotion,
        emotion=Emotion(**given) if given else None,
        studio=args.studio,
    )
    synthesizer = Synthesizer(settings)
    if args.clone:
        from dataclasses import replace

        from dragoman.speech.tts.clones import LocalCloneStore, synthesize_with_clone

        clone = LocalCloneStore(_clone_dir(args)).get(args.clone)
        options = replace(options, clone_id=clone.id)
        result = synthesize_with_clone(synthesizer, text, options, clone)
    else:
        result = synthesizer.synthesize(text, options)
    written = _write(args.output, wav_bytes(result.audio), overwrite=args.overwrite)
    if args.json:
        data = result.to_dict()
        data["path"] = str(written) if written else None
        print(
            json.dumps(data, ensure_ascii=False, indent=2), file=sys.stderr if written is None else sys.stdout
        )
    elif written is not None:
        print(
            f"wrote {written} ({result.audio.duration:.2f}s, {result.audio.rate} Hz, {result.voice} in "
            f"{result.language} by {result.engine}:{result.engine_voice}, {result.sentences} sentences, "
            f"{result.seconds:.2f}s)"
        )
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def _served(entry: object) -> str:
    if not isinstance(entry, dict):
        return "-"
    mark = "*" if entry.get("shifted") else ""
    return f"{entry['engine']}:{entry['engine_voice']}{mark}"


def cmd_voices_install(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.models import voices
    from dragoman.models.install import tqdm_progress

    if args.json:
        manifest = voices.install(args.source, settings, sha256=args.sha256, replace=args.replace)
        _print_json({"installed": manifest.id, "language": manifest.locale, "license": manifest.license})
        return 0
    with tqdm_progress("install") as progress:
        manifest = voices.install(
            args.source, settings, sha256=args.sha256, progress=progress, replace=args.replace
        )
    print(f"installed voice {manifest.id} ({manifest.locale}, {manifest.quality or 'quality unknown'})")
    print(f"licence: {manifest.license}")
    return 0


def cmd_voices_list(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.speech.tts.synth import Synthesizer

    catalogue = Synthesizer(settings).catalogue()
    if args.json:
        _print_json(catalogue)
        return 0
    voices: list[dict[str, Any]] = catalogue["voices"]  # type: ignore[assignment]
    languages: list[dict[str, Any]] = catalogue["languages"]  # type: ignore[assignment]
    print("voices:")
    for voice in voices:
        print(f"  {voice['name']:<7} {voice['gender']:<7} {voice['description']}")
    first = {g: next(v for v in voices if v["gender"] == g) for g in ("female", "male")}
    print(
        "\nlanguages (engine:voice of a standard render, female / male; * = shifted from the other gender):"
    )
    for lang in languages:
        code = lang["code"]
        female = _served(first["female"]["languages"][code]["standard"])
        male = _served(first["male"]["languages"][code]["standard"])
        print(f"  {code}  {lang['name']:<17} {female:<28} {male}")
    models: list[dict[str, Any]] = catalogue["models"]  # type: ignore[assignment]
    if models:
        print("\nvoices installed as models (engine:voice, licence):")
    for model in models:
        print(f"  {model['engine']}:{model['engine_voice']}  {model['license']}")
    return 0


def _clone_dir(args: argparse.Namespace) -> Path | None:
    """Where clones are kept: the user's data directory (``--clone-dir``, hidden, for tests)."""
    given = getattr(args, "clone_dir", None)
    return Path(given).expanduser() if given else None


def _clone_line(clone: Any) -> str:
    return (
        f"{clone.id}  {clone.name}: {clone.gender}, F0 {clone.f0_median:.0f} Hz -> {clone.persona} "
        f"{clone.pitch_st:+.1f} st, formants x{clone.formant:g}, similarity {clone.similarity:.3f} "
        f"(unadapted {clone.similarity_unmatched:.3f}), {clone.reference_seconds:.1f} s of speech"
    )


def cmd_clone_add(args: argparse.Namespace, settings: Settings) -> int:
    """A voice match (not an identity clone): the nearest of the ten voices adapted to the clip."""
    from dragoman.errors import FileAccessError
    from dragoman.speech.tts.clones import MAX_CLIP_BYTES, LocalCloneStore
    from dragoman.speech.tts.synth import Synthesizer

    path = Path(args.file).expanduser()
    try:
        if path.stat().st_size > MAX_CLIP_BYTES:
            raise InvalidRequest(f"{path} is over {MAX_CLIP_BYTES:,} bytes; a reference is 3-20 s of speech")
        data = path.read_bytes()
    except OSError as exc:
        raise FileAccessError(f"cannot read {path}: {exc.strerror or exc}") from None
    store = LocalCloneStore(_clone_dir(args))
    clone = store.create(data, args.name, args.description, Synthesizer(settings))
    if args.json:
        _print_json(clone.to_dict())
    else:
        print(_clone_line(clone))
    return 0


def cmd_clone_list(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.speech.tts.clones import LocalCloneStore

    found = LocalCloneStore(_clone_dir(args)).list()
    if args.json:
        _print_json([c.to_dict() for c in found])
    elif not found:
        print("no voice clones (dragoman voices clone add FILE --name N)")
    for clone in [] if args.json else found:
        print(_clone_line(clone))
    return 0


def cmd_clone_remove(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.speech.tts.clones import LocalCloneStore

    LocalCloneStore(_clone_dir(args)).remove(args.id)
    if args.json:
        _print_json({"id": args.id, "removed": True})
    else:
        print(f"removed clone {args.id} and its clip")
    return 0


def register(subparsers: _SubParsers[argparse.ArgumentParser]) -> None:
    """Adds ``dragoman speak``, ``dragoman voices list`` and ``dragoman voices clone add|list|remove`` to the
    top-level subparsers."""
    p = subparsers.add_parser("speak", help="speak text into a WAV file (argument or stdin)")
    _common(p)
    p.add_argument("text", nargs="?", help="the text; '-' or nothing reads stdin")
    p.add_argument("--voice", default="aria", choices=VOICES, help="one of the ten voices (default aria)")
    p.add_argument("--lang", required=True, help="two-letter language code (dragoman voices list)")
    p.add_argument("-o", "--output", required=True, help="the WAV file to write ('-' for stdout)")
    p.add_argument("--overwrite", action="store_true", help="replace the output file if it exists")
    p.add_argument("--emotion", choices=EMOTIONS, help="an emotion preset")
    p.add_argument(
        "--studio", action="store_true", help="studio render: 48 kHz, -16 LUFS, pauses and breaths"
    )
    p.add_argument(
        "--speed",
        type=_number,
        default=1.0,
        help=f"speaking speed {TTS_SPEED_MIN}-{TTS_SPEED_MAX} (default 1.0)",
    )
    p.add_argument("--speed-ratio", type=_number, help="emotion: rate ratio 0.5-2.0 (refines --emotion)")
    p.add_argument("--pitch-st", type=_number, help="emotion: pitch change in semitones, -12..12")
    p.add_argument("--energy", type=_number, help="emotion: energy (amplitude) ratio 0.25-4.0")
    p.add_argument("--pause-scale", type=_number, help="emotion: pause scale 0-3")
    p.add_argument(
        "--clone", metavar="ID", help="a voice match (dragoman voices clone list); overrides --voice"
    )
    p.add_argument("--clone-dir", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_speak)

    voices = subparsers.add_parser("voices", help="the speech voices")
    voices.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log more (to stderr)"
    )
    vsub = voices.add_subparsers(dest="voices_command", required=True)
    pl = vsub.add_parser("list", help="the ten voices, the 31 languages and the engine serving each")
    _common(pl)
    pl.set_defaults(func=cmd_voices_list)

    vi = vsub.add_parser("install", help="install a Piper voice (.onnx with its .onnx.json)")
    _common(vi)
    vi.add_argument(
        "source",
        help="a voice directory, an archive, a .onnx file (config beside it), a URL, or "
        "hf:OWNER/REPO[/FOLDER][@REVISION] (the Hugging Face Hub)",
    )
    vi.add_argument("--sha256", help="expected SHA-256 of the archive or .onnx file")
    vi.add_argument("--replace", action="store_true", help="replace an installed voice with the same id")
    vi.set_defaults(func=cmd_voices_install)

    from dragoman.cli import kokoro

    kokoro.register(vsub)  # dragoman voices kokoro install|list|remove

    clone = vsub.add_parser(
        "clone", help="voice matches: the nearest voice adapted to a reference clip's pitch and formants"
    )
    csub = clone.add_subparsers(dest="clone_command", required=True)
    ca = csub.add_parser(
        "add", help="make a voice match from a 3-20 s reference clip (WAV, or what ffmpeg reads)"
    )
    _common(ca)
    ca.add_argument("file", help="the reference clip")
    ca.add_argument("--name", required=True, help="a name for the clone")
    ca.add_argument("--description", default="", help="a description")
    ca.add_argument("--clone-dir", help=argparse.SUPPRESS)
    ca.set_defaults(func=cmd_clone_add)
    cl = csub.add_parser("list", help="the voice matches stored on this machine")
    _common(cl)
    cl.add_argument("--clone-dir", help=argparse.SUPPRESS)
    cl.set_defaults(func=cmd_clone_list)
    cr = csub.add_parser("remove", help="remove a voice match and its stored clip")
    _common(cr)
    cr.add_argument("id", help="the clone's id")
    cr.add_argument("--clone-dir", help=argparse.SUPPRESS)
    cr.set_defaults(func=cmd_clone_remove)
