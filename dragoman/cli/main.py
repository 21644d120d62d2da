"""The ``dragoman`` command line. Results go to stdout, logs and progress to stderr; ``--json`` on each."""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import logging
import math
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from dragoman import __version__
from dragoman.errors import DragomanError, InvalidRequest, file_error, map_exception
from dragoman.progress import JobContext, ProgressCallback
from dragoman.settings import Settings

if TYPE_CHECKING:
    from dragoman.translation.types import GlossaryEntry

log = logging.getLogger("dragoman")


def _print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2))


def _text_arg(args: argparse.Namespace) -> str:
    if args.text is not None and args.text != "-":
        text, where = str(args.text), "the text argument"
    elif sys.stdin.isatty():
        raise InvalidRequest("give the text as an argument, or pipe it on standard input")
    else:
        text, where = sys.stdin.read(), "standard input"
    try:  # bytes that are not UTF-8 arrive as lone surrogates (surrogateescape), which no model can take
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidRequest(
            f"{where} is not UTF-8 text (an undecodable byte at character {exc.start}); convert it to UTF-8, "
            "for example with iconv -f latin1 -t utf-8"
        ) from None
    return text


def _engine(settings: Settings) -> Any:
    from dragoman.translation.engine import Engine

    return Engine(settings)


def _user_glossary(settings: Settings) -> tuple[GlossaryEntry, ...]:
    """The user's glossary file, which every command that translates applies (the engine owns none)."""
    from dragoman.server.local_store import GlossaryStore

    return GlossaryStore(settings.local.glossary_path).load()


def cmd_translate(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.translation.types import TranslateOptions

    text = _text_arg(args)
    options = TranslateOptions(args.to, args.source, args.tier, _user_glossary(settings))
    with _engine(settings) as engine:
        result = engine.translate(text, options)
    if args.json:
        _print_json(result.to_dict())
    else:
        sys.stdout.write(result.translation + ("" if result.translation.endswith("\n") else "\n"))
        for warning in result.warnings:
            log.warning("%s", warning)
    return 0


@contextlib.contextmanager
def _file_progress(args: argparse.Namespace) -> Iterator[ProgressCallback | None]:
    """A progress bar on stderr counting texts (none with --json or when stderr is not a terminal)."""
    if args.json or not sys.stderr.isatty():
        yield None
        return
    from tqdm import tqdm

    with tqdm(total=0, unit="text", file=sys.stderr, leave=False, desc="translating") as bar:

        def update(done: int, total: int, message: str) -> None:
            bar.total = total
            bar.update(done - bar.n)

        yield update


def cmd_translate_file(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.pipelines.translate_file import translate_file

    with _engine(settings) as engine, _file_progress(args) as progress:
        result = translate_file(
            engine,
            args.path,
            args.to,
            source=args.source,
            output=args.output,
            overwrite=args.overwrite,
            tier=args.tier,
            glossary=_user_glossary(settings),
            context=JobContext.of(progress),
        )
    if args.json:
        data = {
            k: v for k, v in asdict(result).items() if k not in ("boxes", "extracted_text", "translated_text")
        }
        _print_json(json.loads(json.dumps(data, default=str)))
    else:
        print(
            f"wrote {result.output_path} ({result.format}, {result.segments} texts, {result.source} -> "
            f"{result.target}, {result.seconds:.2f}s)"
        )
        for kind, path in result.extra_outputs.items():
            print(f"wrote {path} ({kind} export)")
        for warning in result.warnings:
            log.warning("%s", warning)
    return 0


def cmd_ocr(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.pipelines.ocr_translate import ocr_translate

    with _engine(settings) as engine, _file_progress(args) as progress:
        result = ocr_translate(
            engine,
            args.path,
            args.to,
            source=args.source,
            render=args.render or args.output is not None,
            output=args.output,
            overwrite=args.overwrite,
            tier=args.tier,
            glossary=_user_glossary(settings),
            context=JobContext.of(progress),
        )
    if args.json:
        _print_json(json.loads(json.dumps(asdict(result), default=str)))
    else:
        print(result.translated_text)
        if result.output_path is not None:
            log.warning("wrote %s", result.output_path)
        for warning in result.warnings:
            log.warning("%s", warning)
    return 0


def cmd_detect(args: argparse.Namespace, settings: Settings) -> int:
    with _engine(settings) as engine:
        found = engine.detect(_text_arg(args))
    if args.json:
        _print_json(asdict(found))
    elif found.flores is None:
        print(f"uncertain ({found.reason}; best guess {found.label}, confidence {found.confidence:.2f})")
    else:
        print(f"{found.flores}\t{found.bcp47}\t{found.name}\t{found.confidence:.2f}")
    return 0


def cmd_languages(args: argparse.Namespace, settings: Settings) -> int:
    with _engine(settings) as engine:
        rows = engine.languages(installed_only=not args.all)
    if args.json:
        _print_json([asdict(r) for r in rows])
    else:
        for row in rows:
            print(f"{row.flores}\t{row.bcp47}\t{row.name}{'  (rtl)' if row.rtl else ''}")
    return 0


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.server.daemon.portfile import daemon_status
    from dragoman.status import engine_status

    with _engine(settings) as engine:
        status = engine_status(engine, daemon=daemon_status(settings))
    if args.json:
        _print_json(status)
        return 0
    platform = status["platform"]
    print(
        f"dragoman {status['version']} on {platform['system']} {platform['machine']}, "
        f"python {platform['python']}"
    )
    print(
        f"ctranslate2 {platform['ctranslate2']}; "
        f"CPU compute types: {', '.join(platform['compute_types_cpu'])}"
    )
    print(f"packs directory: {status['packs_dir']}")
    for pack in status["packs"]:
        langs = ", ".join(pack["languages"][:6]) + (" ..." if len(pack["languages"]) > 6 else "")
        print(f"  {pack['id']:<28} {pack['kind']:<12} {langs:<40} {'loaded' if pack['loaded'] else ''}")
    for broken in status["broken_packs"]:
        print(f"  BROKEN {broken['path']}: {broken['error']}")
    ap = status["apertium"]
    print(
        f"apertium: {ap['binary'] or 'not installed (apt-get install apertium apertium-eng-spa)'}"
        f" {ap['version'] or ''}; pairs: {', '.join(ap['pairs']) or 'none'}"
    )
    te = status["tesseract"]
    print(
        f"tesseract: {te['binary'] or 'not installed'} {te['version'] or ''}; "
        f"languages: {', '.join(te['languages'])}"
    )
    print(f"detection model: {status['detection']['model']}")
    print(f"glossary file: {status['glossary']['path']}")
    daemon = status["daemon"]
    print(
        f"daemon: {'alive at ' + str(daemon['url']) if daemon['alive'] else 'not running'} "
        f"(port {daemon['port']})"
    )
    return 0


def cmd_packs(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.models.index import available
    from dragoman.models.install import tqdm_progress
    from dragoman.models.packs import PackStore, install

    store = PackStore(settings)
    if args.packs_command == "list":
        from dragoman.translation.engine import Engine

        with Engine(settings) as engine:
            infos = [asdict(i) for i in engine.packs()]
        broken = store.broken()  # listed with the reason; they never stop the others
        if args.json:
            _print_json(
                [{**info, "broken": False} for info in infos]
                + [{"id": path.name, "path": str(path), "broken": True, "error": why} for path, why in broken]
            )
        else:
            for info in infos:
                print(
                    f"{info['id']:<28} {info['kind']:<12} v{info['version']:<8} "
                    f"{info['license']:<24} {info['path']}"
                )
            for path, why in broken:
                print(f"BROKEN {path}: {why}")
        return 0
    if args.packs_command == "install":
        if args.json:
            manifest = install(args.source, settings, sha256=args.sha256, replace=args.replace)
        else:
            with tqdm_progress("install") as progress:
                manifest = install(
                    args.source, settings, sha256=args.sha256, progress=progress, replace=args.replace
                )
        if args.json:
            _print_json(
                {"installed": manifest.id, "kind": manifest.kind, "languages": list(manifest.languages)}
            )
        else:
            print(f"installed {manifest.id} ({manifest.kind}: {', '.join(manifest.languages)})")
        return 0
    if args.packs_command == "remove":
        store.remove(args.pack_id)
        print(json.dumps({"removed": args.pack_id}) if args.json else f"removed {args.pack_id}")
        return 0
    if args.packs_command == "verify":
        ids = [args.pack_id] if args.pack_id else [m.id for m, _ in store.installed()]
        reports = [store.verify(pack_id) for pack_id in ids]
        if args.json:
            _print_json([r.to_dict() for r in reports])
        else:
            for report in reports:
                print(f"{report.model_id}: ok")
        return 0
    if args.packs_command == "available":
        from dragoman.translation.backends.apertium_packages import apt_pairs

        pairs = [] if args.argos else apt_pairs()
        if not args.json:  # printed before the Argos index is fetched: offline, these still show
            for pair in pairs:
                state = {True: "installed", False: "not installed", None: "unknown"}[pair.installed]
                how = "" if pair.installed else f"\t{pair.command}"
                print(f"{pair.package:<20}\t{state}\t{', '.join(pair.languages)}{how}")
        entries = [] if args.apertium else available(settings)
        if args.json:
            _print_json(
                [{"source": "apertium", **asdict(p)} for p in pairs]
                + [{"source": "argos", **asdict(e)} for e in entries]
            )
        else:
            for entry in entries:
                print(f"{entry.pair}\tv{entry.version}\t{entry.code}")
        return 0
    raise InvalidRequest(f"unknown packs command {args.packs_command!r}")


def cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    from pathlib import Path

    from dragoman.server.mcp.server import serve

    overrides: dict[str, Any] = {}
    if args.packs_dir:
        overrides["packs_dir"] = Path(args.packs_dir).expanduser()
    if args.tier:
        overrides["default_tier"] = args.tier
    if args.glossary:
        overrides["glossary_path"] = Path(args.glossary).expanduser()
    serve(settings.replace(**overrides))
    return 0


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.server.daemon.app import serve

    return serve(
        settings,
        host=args.host,
        port=args.port,
        allowed_origins=args.allowed_origin or (),
        workers=args.workers,
        timeout=args.timeout,
        allow_non_loopback=args.allow_non_loopback,
    )


# ----- argument types: a value out of range is a usage error (exit 2) before anything runs ----------------
def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(
            f"a port is a number from 0 to 65535 (0 picks a free one), not {text!r}"
        )
    return port


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"give a whole number of at least 1, not {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"give a number of seconds above 0, such as 60, not {text!r}")
    return value


def _verbose(parser: argparse.ArgumentParser) -> None:
    """``-v`` after the subcommand too (``dragoman mcp -v``); SUPPRESS keeps ``dragoman -v mcp`` working, as a
    subcommand's default would otherwise overwrite the one given before it."""
    parser.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log more (to stderr)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dragoman", description="On-device translation.")
    parser.add_argument("--version", action="version", version=f"dragoman {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log more (to stderr)")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--json", action="store_true", help="answer in JSON")
        _verbose(p)
        return p

    p = add("translate", "translate text (argument or stdin)")
    p.add_argument("text", nargs="?", help="the text; '-' or nothing reads stdin")
    p.add_argument("--to", required=True, help="target language (BCP-47 or FLORES-200)")
    p.add_argument("--from", dest="source", help="source language (detected when omitted)")
    p.add_argument("--tier", choices=["best", "fast"], help="best (default) or fast")
    p.set_defaults(func=cmd_translate)

    p = add("translate-file", "translate a document, format preserved (NAME.<target>.EXT beside it)")
    p.add_argument("path")
    p.add_argument("--to", required=True, help="target language (BCP-47 or FLORES-200)")
    p.add_argument("--from", dest="source", help="source language (detected when omitted)")
    p.add_argument("-o", "--output", help="where to write (default NAME.<target>.EXT beside the input)")
    p.add_argument("--overwrite", action="store_true", help="replace the output file if it exists")
    p.add_argument("--tier", choices=["best", "fast"])
    p.set_defaults(func=cmd_translate_file)

    p = add("ocr", "read an image's text with OCR and translate it")
    p.add_argument("path")
    p.add_argument("--to", required=True, help="target language (BCP-47 or FLORES-200)")
    p.add_argument("--from", dest="source", help="source language (detected when omitted)")
    p.add_argument("--render", action="store_true", help="also write the image with the translation drawn in")
    p.add_argument("-o", "--output", help="where to write the rendered image (implies --render)")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--tier", choices=["best", "fast"])
    p.set_defaults(func=cmd_ocr)

    p = add("detect", "detect the language of a text")
    p.add_argument("text", nargs="?")
    p.set_defaults(func=cmd_detect)

    p = add("languages", "languages the installed packs reach")
    p.add_argument("--all", action="store_true", help="the whole FLORES-200 catalogue")
    p.set_defaults(func=cmd_languages)

    p = add("status", "engine status: platform, packs, binaries, daemon")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("mcp", help="serve the MCP tools on stdio (for agent hosts)")
    _verbose(p)
    p.add_argument("--packs-dir", help="pack directory (overrides DRAGOMAN_PACKS_DIR)")
    p.add_argument("--tier", choices=["best", "fast"], help="default tier (overrides DRAGOMAN_TIER)")
    p.add_argument("--glossary", help="user glossary file (overrides DRAGOMAN_GLOSSARY)")
    p.set_defaults(func=cmd_mcp)

    p = add("serve", "run the local daemon on loopback (POST /translate, GET /health, GET /languages)")
    p.add_argument("--port", type=_port, help="port (default DRAGOMAN_PORT or 8787; 0 picks a free one)")
    p.add_argument(
        "--host", default="127.0.0.1", help="127.0.0.1 (default) or ::1; others need --allow-non-loopback"
    )
    p.add_argument("--allow-non-loopback", action="store_true", help="allow a non-loopback --host (unsafe)")
    p.add_argument("--allowed-origin", action="append", help="a browser origin allowed by CORS (repeatable)")
    p.add_argument("--workers", type=_positive_int, help="engine threads (default min(4, CPUs))")
    p.add_argument("--timeout", type=_seconds, help="seconds per request before 504 (default 60; above 0)")
    p.set_defaults(func=cmd_serve)

    packs = add("packs", "manage model packs")
    psub = packs.add_subparsers(dest="packs_command", required=True)
    pp = psub.add_parser("list", help="installed packs")
    pp.add_argument("--json", action="store_true")
    _verbose(pp)
    pp = psub.add_parser(
        "install",
        help="install from a file, directory, URL, index name (en:es) or hf:OWNER/REPO[@REVISION] "
        "(a CTranslate2 model on the Hugging Face Hub)",
    )
    pp.add_argument("source")
    pp.add_argument("--sha256", help="expected SHA-256 of the archive")
    pp.add_argument("--replace", action="store_true", help="replace an installed pack with the same id")
    pp.add_argument("--json", action="store_true")
    _verbose(pp)
    pp = psub.add_parser("remove", help="remove an installed pack")
    pp.add_argument("pack_id")
    pp.add_argument("--json", action="store_true")
    _verbose(pp)
    pp = psub.add_parser("verify", help="check installed packs against their install record")
    pp.add_argument("pack_id", nargs="?")
    pp.add_argument("--json", action="store_true")
    _verbose(pp)
    pp = psub.add_parser(
        "available", help="Debian's Apertium pairs (installed, or the apt command) and the Argos index"
    )
    only = pp.add_mutually_exclusive_group()
    only.add_argument("--apertium", action="store_true", help="only the Apertium pairs (no network)")
    only.add_argument("--argos", action="store_true", help="only the Argos index")
    pp.add_argument("--json", action="store_true")
    _verbose(pp)
    packs.set_defaults(func=cmd_packs)

    from dragoman.cli.hosted import register as register_hosted

    register_hosted(sub)
    from dragoman.cli.speech import register as register_speech

    register_speech(sub)
    from dragoman.cli.asr import register as register_asr

    register_asr(sub)
    from dragoman.cli.subtitles import register as register_subtitles

    register_subtitles(sub)
    from dragoman.cli.dub import register as register_dub

    register_dub(sub)
    from dragoman.cli.eval import register as register_eval

    register_eval(sub)
    return parser


# ----- the last resort: whatever escapes a command is a typed error and exit 2, never a traceback --------
_FILE_HINTS = {
    errno.ENOSPC: "free some space",
    errno.EDQUOT: "free some space",
    errno.EFBIG: "raise the file size limit (ulimit -f)",
    errno.EACCES: "check the permissions of the file and its folder",
    errno.EPERM: "check the permissions of the file and its folder",
    errno.EROFS: "use a writable disk",
    errno.EISDIR: "name a file, not a folder",
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "check the path: a part of it is a file, not a folder",
    errno.ENAMETOOLONG: "choose a shorter name",
    errno.EEXIST: "a file is in the way where a folder belongs: check the path",
}
#: Errors that writing elsewhere avoids, for the commands that take -o/--output.
_ELSEWHERE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES, errno.EPERM, errno.EROFS})


def _typed(exc: Exception, command: str) -> DragomanError:
    """Our error for an exception no command typed: the file system's by errno, deep nesting, memory,
    text that is not UTF-8; anything else is a bug, reported as one."""
    context = f"dragoman {command}"
    if isinstance(exc, OSError):
        hint = _FILE_HINTS.get(exc.errno or 0, "check the path and the disk")
        if exc.errno in _ELSEWHERE and command in ("translate-file", "ocr", "subtitles", "dub"):
            hint += ", or write elsewhere (-o/--output)"
        return file_error(exc, context, hint=hint)
    if isinstance(exc, RecursionError):
        return InvalidRequest(
            f"{context}: the input nests lists, objects or elements too deeply to read; flatten it"
        )
    if isinstance(exc, UnicodeError):
        return InvalidRequest(f"{context}: the input is not UTF-8 text ({exc}); convert it to UTF-8")
    mapped = map_exception(exc, context) if isinstance(exc, MemoryError) else None
    return mapped or DragomanError(
        f"{context} failed unexpectedly ({type(exc).__name__}: {exc}); rerun with -v to see where, and "
        "report it"
    )


def _report(args: argparse.Namespace, exc: DragomanError) -> int:
    if getattr(args, "json", False):
        print(json.dumps(exc.to_dict(), ensure_ascii=False), file=sys.stderr)
    else:
        print(f"dragoman: {exc.message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        settings = Settings.from_env()
        from dragoman.documents import partials

        # temporaries a killed dragoman left are removed; SIGTERM/SIGINT remove the ones being written
        partials.startup(settings.local.state_dir, also=[settings.local.glossary_path.parent])
        with partials.handle_signals():
            return int(args.func(args, settings))
    except DragomanError as exc:
        return _report(args, exc)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `dragoman languages | head`: the reader left; that is not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:  # the last resort
        log.info("where it failed (shown with -v):", exc_info=True)
        return _report(args, _typed(exc, args.command))


if __name__ == "__main__":
    sys.exit(main())
