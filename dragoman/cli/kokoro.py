"""``dragoman voices kokoro install|list|remove`` (issue 14, voices as models): Kokoro ONNX models in the
shared model store (:mod:`dragoman.models.kokoro`).

``install SOURCE [--voices FILE_OR_URL] [--vocab FILE_OR_URL] [--sha256 HEX] [--replace]``: SOURCE is a
directory or archive holding the three files, its URL, or the ``.onnx`` file or URL (with ``--voices`` and
``--vocab``; for a file they default to the voices ``.bin`` and ``config.json`` beside it). Once installed,
its voices take over the ten personas in their languages (studio renders; standard ones where nothing
faster of the persona's gender speaks the language), as any better installed voice does.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dragoman.settings import Settings


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="answer in JSON")
    parser.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log more (to stderr)"
    )


def _print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2))


def cmd_install(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.models import kokoro
    from dragoman.models.install import tqdm_progress

    options: dict[str, Any] = {
        "voices": args.voices,
        "vocab": args.vocab,
        "sha256": args.sha256,
        "replace": args.replace,
    }
    if args.json:
        manifest = kokoro.install(args.source, settings, **options)
        _print_json(
            {
                "installed": manifest.id,
                "version": manifest.version,
                "languages": list(manifest.languages),
                "voices": list(manifest.voices),
            }
        )
        return 0
    with tqdm_progress("install") as progress:
        manifest = kokoro.install(args.source, settings, progress=progress, **options)
    print(
        f"installed Kokoro model {manifest.id} ({len(manifest.voices)} voices; "
        f"languages {', '.join(manifest.languages)})"
    )
    return 0


def cmd_list(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.models import kokoro

    store = kokoro.KokoroStore(settings)
    installed = store.installed()
    broken = store.broken()
    if args.json:
        _print_json(
            {
                "models": [
                    {**asdict(store.kind.info(m, p)), "voice_names": list(m.voices)} for m, p in installed
                ],
                "broken": [{"path": str(p), "reason": r} for p, r in broken],
            }
        )
        return 0
    if not installed:
        print(f"no Kokoro models installed ({kokoro.KOKORO.hint()})")
    for manifest, path in installed:
        print(f"{manifest.id}  {manifest.version}  {', '.join(manifest.languages)}  {path}")
        print(f"  voices: {' '.join(manifest.voices)}")
        print(f"  licence: {manifest.license}")
    for path, reason in broken:
        print(f"broken: {path}: {reason}", file=sys.stderr)
    return 0


def cmd_remove(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.models import kokoro

    path = kokoro.remove(args.id, settings)
    if args.json:
        _print_json({"removed": args.id, "path": str(path)})
    else:
        print(f"removed Kokoro model {args.id} ({path})")
    return 0


def register(voices_sub: Any) -> None:
    """Adds ``kokoro install|list|remove`` under ``dragoman voices``."""
    top = voices_sub.add_parser("kokoro", help="Kokoro ONNX models (neural voices: en, es, fr, hi, it, pt)")
    sub = top.add_subparsers(dest="kokoro_command", required=True)
    p = sub.add_parser("install", help="install a Kokoro model (.onnx, voices .bin, config.json vocab)")
    _common(p)
    p.add_argument(
        "source", help="a directory or archive holding the three files, its URL, or the .onnx file or URL"
    )
    p.add_argument("--voices", help="the voices file (voices-v1.0.bin, a NumPy .npz), a path or URL")
    p.add_argument("--vocab", help='Kokoro-82M\'s config.json (its "vocab"), a path or URL')
    p.add_argument("--sha256", help="expected SHA-256 of the archive or .onnx file")
    p.add_argument("--replace", action="store_true", help="replace an installed model with the same id")
    p.set_defaults(func=cmd_install)
    p = sub.add_parser("list", help="installed Kokoro models and their voices")
    _common(p)
    p.set_defaults(func=cmd_list)
    p = sub.add_parser("remove", help="remove an installed Kokoro model")
    _common(p)
    p.add_argument("id", help="the model's id (kokoro-v1.0)")
    p.set_defaults(func=cmd_remove)
