"""``dragoman mcp``: the MCP stdio tool server over the shared engine (spec 4.5), on the SDK's MCPServer.

Thin by design: each tool validates its input through its signature, runs the engine off the event loop
(``anyio.to_thread``), and answers a pydantic model as ``structuredContent`` (with ``provenance``) plus a
short text block. Engine errors become tool errors (``isError``) carrying the engine's message. The engine
is created on first use, not at start, so ``initialize`` answers at once; packs load once per process.

Stdout belongs to the protocol (see :mod:`dragoman.server.mcp._stdio`): a stray ``print`` in any library
lands in the log, not the wire.
"""

from __future__ import annotations

import contextlib
import errno
import inspect
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
import anyio.to_thread
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import ListRoots, MCPServer, Resolve
from mcp_types import CallToolResult, EmptyResult, ListRootsResult, SetLevelRequestParams, ToolAnnotations
from pydantic import Field, ValidationError

from dragoman import __version__
from dragoman.errors import DocumentFormatError, DragomanError, InvalidRequest, LimitExceeded, file_error
from dragoman.limits import MAX_BATCH_TEXTS, MAX_GLOSSARY_ENTRIES, MAX_TERM_CHARS
from dragoman.server import paths
from dragoman.server.local_store import GlossaryStore
from dragoman.server.mcp import _sdk
from dragoman.server.mcp._dub import dub_video
from dragoman.server.mcp._files import translate_files
from dragoman.server.mcp._models import (
    BatchOutput,
    DetectOutput,
    FileOutput,
    FilePath,
    Glossary,
    GlossaryEntryInput,
    GlossaryOutput,
    GlossaryRow,
    LanguageRow,
    LanguagesOutput,
    OcrBox,
    OcrOutput,
    Scope,
    Source,
    StatusOutput,
    Target,
    Text,
    Tier,
    TranslateOutput,
)
from dragoman.server.mcp._packs import list_pairs, packs_install, packs_list
from dragoman.server.mcp._runtime import (
    CallLogHandler,
    Ctx,
    ServerState,
    answer,
    job_context,
    run_engine,
    state_of,
    tool_error,
)
from dragoman.server.mcp._speech import list_voices, speak
from dragoman.server.mcp._subtitles import subtitle_file, transcribe
from dragoman.settings import Settings
from dragoman.translation.types import GlossaryEntry, TranslateOptions, TranslationResult

if TYPE_CHECKING:
    from dragoman.pipelines.translate_file import DocumentResult
    from dragoman.translation.engine import Engine

log = logging.getLogger("dragoman.server.mcp")

SERVER_NAME = "dragoman"
INSTRUCTIONS = (
    "On-device translation: nothing leaves this machine. Languages are BCP-47 ('es', 'pt-BR') or FLORES-200 "
    "('spa_Latn') codes; answers use FLORES-200. Omit source to detect it. Use translate_batch for many "
    f"strings (at most {MAX_BATCH_TEXTS}), list_languages for what is installed, "
    "engine_status when something is "
    "missing: errors name the command that installs a pack."
)


def _with_warnings(text: str, warnings_: Sequence[str]) -> str:
    return text if not warnings_ else text + "\n\n[warnings] " + " | ".join(warnings_)


def _entries(glossary: Sequence[GlossaryEntryInput] | None) -> list[GlossaryEntry] | None:
    if glossary is None:
        return None
    return [GlossaryEntry(e.term, e.translation, e.case_sensitive) for e in glossary]


def _client_roots(ctx: Ctx) -> ListRoots | None:
    """Ask for the client's roots only when it declared the capability."""
    caps = ctx.client_capabilities
    return ListRoots() if caps is not None and caps.roots is not None else None


ClientRoots = Annotated[ListRootsResult | None, Resolve(_client_roots)]


def allowed_dirs(state: ServerState, roots: ListRootsResult | None) -> tuple[Path, ...]:
    """The client's ``file://`` roots plus DRAGOMAN_ALLOWED_DIRS, never the working directory."""
    client = paths.roots_from_uris(str(r.uri) for r in roots.roots) if roots is not None else None
    return paths.allowed_roots(client, state.settings.local.allowed_dirs)


# ----- tools ------------------------------------------------------------------------------------------
async def translate(
    text: Text, target: Target, ctx: Ctx, source: Source = None, tier: Tier = None, glossary: Glossary = None
) -> Annotated[CallToolResult, TranslateOutput]:
    """Translate one text on this device. Returns the translation with source and target as FLORES-200
    codes, the seconds it took and any warnings (e.g. source_uncertain when detection was unsure)."""
    store = state_of(ctx).glossary
    context = job_context(ctx.report_progress)
    result = await run_engine(
        ctx,
        lambda e: e.translate(
            text, TranslateOptions(target, source, tier, store.resolve(_entries(glossary))), context=context
        ),
    )
    out = TranslateOutput.from_result(result)
    return answer(out, _with_warnings(out.translation, out.warnings))


async def translate_batch(
    texts: Annotated[
        list[Text],
        Field(
            min_length=1,
            max_length=MAX_BATCH_TEXTS,
            description=f"1 to {MAX_BATCH_TEXTS} texts, translated in one pass.",
        ),
    ],
    target: Target,
    ctx: Ctx,
    source: Source = None,
    tier: Tier = None,
    glossary: Glossary = None,
) -> Annotated[CallToolResult, BatchOutput]:
    """Translate up to 64 texts in one call (one pack load, one batched pass); results come back in input
    order. Without source each text is detected on its own. Sends progress when given a progress token."""
    store = state_of(ctx).glossary
    started = time.perf_counter()
    await ctx.report_progress(0, None, f"translating {len(texts)} texts")
    context = job_context(ctx.report_progress)

    def work(engine: Engine) -> list[TranslationResult]:
        options = TranslateOptions(target, source, tier, store.resolve(_entries(glossary)))
        return engine.translate_batch(texts, options, context=context)

    results = await run_engine(ctx, work)
    outs = [TranslateOutput.from_result(r) for r in results]
    batch = BatchOutput(
        results=outs, count=len(outs), provenance=results[0].provenance, seconds=time.perf_counter() - started
    )
    lines = [_with_warnings(f"[{i}] {o.translation}", o.warnings) for i, o in enumerate(outs)]
    return answer(batch, "\n".join(lines))


async def detect_language(
    text: Annotated[Text, Field(min_length=1, description="The text to identify.")],
    ctx: Ctx,
) -> Annotated[CallToolResult, DetectOutput]:
    """Identify the language of a text. flores is null when the answer is uncertain (too short, low
    confidence, mixed); label still holds the model's best guess."""
    found, provenance = await run_engine(ctx, lambda e: (e.detect(text), e.provenance))
    out = DetectOutput(
        flores=found.flores,
        bcp47=found.bcp47,
        name=found.name,
        confidence=round(min(max(found.confidence, 0.0), 1.0), 4),
        label=found.label,
        reason=found.reason,
        provenance=provenance,
    )
    if out.flores is None:
        text_out = f"uncertain ({out.reason}); best guess {out.label}, confidence {out.confidence:.2f}"
    else:
        text_out = f"{out.flores} ({out.bcp47}, {out.name}), confidence {out.confidence:.2f}"
    return answer(out, text_out)


async def list_languages(
    ctx: Ctx,
    installed_only: Annotated[
        bool, Field(description="true: languages the installed packs reach; false: the whole catalogue.")
    ] = True,
) -> Annotated[CallToolResult, LanguagesOutput]:
    """Languages this device translates (or the whole FLORES-200 catalogue): flores, bcp47, name, rtl."""
    rows, provenance = await run_engine(
        ctx, lambda e: (e.languages(installed_only=installed_only), e.provenance)
    )
    out = LanguagesOutput(
        languages=[LanguageRow(flores=r.flores, bcp47=r.bcp47, name=r.name, rtl=r.rtl) for r in rows],
        count=len(rows),
        installed_only=installed_only,
        provenance=provenance,
    )
    shown = ", ".join(f"{r.bcp47} {r.name}" for r in rows)
    return answer(
        out, f"{len(rows)} languages: {shown}" if rows else "no languages installed; see engine_status"
    )


async def engine_status(ctx: Ctx, roots: ClientRoots) -> Annotated[CallToolResult, StatusOutput]:
    """Install state of the engine on this device: platform support, packs (whether loaded, licence), speech
    recognition models (asr.models, each with its licence), binary and model paths, Apertium and Tesseract,
    glossary file, daemon liveness, directories file tools may use."""
    from dragoman.server.daemon.portfile import daemon_status
    from dragoman.status import engine_status as status_of

    state = state_of(ctx)
    status = await run_engine(ctx, lambda engine: status_of(engine, daemon=daemon_status(state.settings)))
    dirs = [str(p) for p in allowed_dirs(state, roots)]
    out = StatusOutput.model_validate({**status, "allowed_dirs": dirs})
    packs = ", ".join(f"{p.id}{' (loaded)' if p.loaded else ''}" for p in out.packs) or "none"
    apertium = out.apertium.get("pairs") or []
    daemon = "alive" if out.daemon and out.daemon.get("alive") else "not running"
    asr = status.get("asr") or {}
    speech = ", ".join(f"{m['id']} ({m['license']})" for m in asr.get("models") or []) or "none"
    text = (
        f"dragoman {out.version} ({out.provenance}); packs: {packs}; apertium pairs: {len(apertium)}; "
        f"speech recognition models: {speech}; "
        f"daemon: {daemon}; packs dir: {out.packs_dir}; file tools may use: "
        f"{', '.join(dirs) or 'nothing (offer client roots or set DRAGOMAN_ALLOWED_DIRS)'}"
    )
    return answer(out, text)


def _glossary_output(
    engine: Engine, store: GlossaryStore, source: str | None, target: str | None, **counts: int
) -> GlossaryOutput:
    entries = store.entries(source=source, target=target)
    rows = [
        GlossaryRow(
            term=e.term,
            translation=e.translation,
            caseSensitive=e.case_sensitive,
            source=e.source,
            target=e.target,
        )
        for e in entries
    ]
    return GlossaryOutput(
        entries=rows,
        count=len(rows),
        source=source,
        target=target,
        path=str(store.path),
        provenance=engine.provenance,
        **counts,
    )


def _scope(code: str | None) -> str | None:
    from dragoman.languages.catalogue import resolve

    return resolve(code) if code is not None else None


async def glossary_add(
    entries: Annotated[
        list[GlossaryEntryInput],
        Field(
            min_length=1,
            max_length=MAX_GLOSSARY_ENTRIES,
            description=f"1 to {MAX_GLOSSARY_ENTRIES} terms to add or replace.",
        ),
    ],
    ctx: Ctx,
    source: Scope = None,
    target: Scope = None,
) -> Annotated[CallToolResult, GlossaryOutput]:
    """Add terms to the user glossary (kept verbatim as their translation in every later translate call of
    every front door), optionally scoped to a language pair. A term already in that scope is replaced."""
    new = _entries(entries) or []
    store = state_of(ctx).glossary

    def work(engine: Engine) -> GlossaryOutput:
        src, tgt = _scope(source), _scope(target)
        store.add(new, source=src, target=tgt)
        return _glossary_output(engine, store, src, tgt, added=len(new))

    out = await run_engine(ctx, work)
    return answer(out, f"added {out.added} term(s); {out.count} in this scope; file {out.path}")


async def glossary_list(
    ctx: Ctx, source: Scope = None, target: Scope = None
) -> Annotated[CallToolResult, GlossaryOutput]:
    """List the user glossary, or only the entries that apply to a language pair when source/target given."""
    store = state_of(ctx).glossary
    out = await run_engine(ctx, lambda e: _glossary_output(e, store, _scope(source), _scope(target)))
    shown = "; ".join(f"{r.term} -> {r.translation}" for r in out.entries)
    return answer(out, f"{out.count} term(s){': ' + shown if shown else ''}")


async def glossary_remove(
    terms: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=MAX_TERM_CHARS)]],
        Field(
            min_length=1,
            max_length=MAX_GLOSSARY_ENTRIES,
            description="Terms to remove from the user glossary.",
        ),
    ],
    ctx: Ctx,
    source: Scope = None,
    target: Scope = None,
) -> Annotated[CallToolResult, GlossaryOutput]:
    """Remove terms from the user glossary (in the given language-pair scope, or unscoped entries when
    none is given). Answers how many were removed; removing an absent term is not an error."""

    store = state_of(ctx).glossary

    def work(engine: Engine) -> GlossaryOutput:
        src, tgt = _scope(source), _scope(target)
        removed = store.remove(terms, source=src, target=tgt)
        return _glossary_output(engine, store, src, tgt, removed=removed)

    out = await run_engine(ctx, work)
    return answer(out, f"removed {out.removed} term(s); {out.count} left in this scope")


_FILE_HINTS = {
    errno.ENOSPC: "free some space, or choose another output_path",
    errno.EDQUOT: "free some space, or choose another output_path",
    errno.EFBIG: "choose another output_path",
    errno.EACCES: "check the permissions of the file and its folder, or choose another output_path",
    errno.EPERM: "check the permissions of the file and its folder, or choose another output_path",
    errno.EROFS: "choose an output_path on a writable disk",
    errno.EISDIR: "name a file, not a folder (translate_files translates a folder or a glob)",
}


@contextlib.contextmanager
def _typed_file_errors(path: str) -> Iterator[None]:
    """The file system's errors and too deep nesting met by a file tool, as our errors (the SDK would
    answer only "Error executing tool" for an exception of its own kind)."""
    try:
        yield
    except OSError as exc:
        hint = _FILE_HINTS.get(exc.errno or 0, "check the path")
        raise file_error(exc, f"translating {path}", hint=hint) from exc
    except RecursionError as exc:
        raise DocumentFormatError(
            f"{path} nests lists, objects or elements too deeply to read; flatten it"
        ) from exc


OutputPath = Annotated[
    str | None,
    Field(max_length=4096, description="Where to write; default NAME.<target>.EXT next to the input."),
]
Overwrite = Annotated[bool, Field(description="Replace output_path if it exists (never the input).")]


def _file_output(result: DocumentResult) -> FileOutput:
    return FileOutput(
        input_path=str(result.input_path),
        output_path=str(result.output_path),
        format=result.format,
        source=result.source,
        target=result.target,
        segments=result.segments,
        characters=result.characters,
        pages=result.pages,
        extra_outputs={kind: str(path) for kind, path in result.extra_outputs.items()},
        provenance=result.provenance,
        seconds=round(result.seconds, 6),
        warnings=list(result.warnings),
    )


async def translate_file(
    path: FilePath,
    target: Target,
    ctx: Ctx,
    roots: ClientRoots,
    source: Source = None,
    output_path: OutputPath = None,
    overwrite: Overwrite = False,
    tier: Tier = None,
) -> Annotated[CallToolResult, FileOutput]:
    """Translate a document by path, format preserved, and write it next to the input as
    NAME.<target>.EXT (or to output_path): DOCX, PPTX, XLSX, PDF (in place; a DOCX export too), PNG/JPEG/TIFF
    (OCR, translation drawn over the text), TXT, Markdown, HTML, SRT, WebVTT, gettext PO, XLIFF, JSON i18n;
    up to 200 MB. The type is decided by content. Never overwrites the input, nor an existing file unless
    overwrite is true."""
    allowed = allowed_dirs(state_of(ctx), roots)
    store = state_of(ctx).glossary
    context = job_context(ctx.report_progress)
    try:
        input_path = paths.check_allowed(path, allowed)
        output = paths.check_allowed(output_path, allowed) if output_path else None
        if input_path.is_dir():
            raise InvalidRequest(f"{path} is a folder; translate_files translates a folder or a glob")
    except DragomanError as exc:
        raise tool_error(exc) from exc
    from dragoman.pipelines import translate_file as files  # imported on first use: start-up stays fast

    def work(engine: Engine) -> FileOutput:
        with _typed_file_errors(path):
            result = files.translate_file(
                engine,
                input_path,
                target,
                source=source,
                output=output,
                overwrite=overwrite,
                tier=tier,
                glossary=store.load(),
                context=context,
            )
        return _file_output(result)

    out = await run_engine(ctx, work)
    text = (
        f"wrote {out.output_path} ({out.format}, {out.characters} characters, {out.source} -> {out.target})"
    )
    return answer(out, _with_warnings(text, out.warnings))


async def ocr_translate(
    path: FilePath,
    target: Target,
    ctx: Ctx,
    roots: ClientRoots,
    source: Source = None,
    tier: Tier = None,
    render: Annotated[
        bool, Field(description="Also write the image with the translation drawn over the original text.")
    ] = False,
    output_path: OutputPath = None,
    overwrite: Overwrite = False,
) -> Annotated[CallToolResult, OcrOutput]:
    """Extract the text of an image (PNG, JPEG, TIFF, multi-page TIFF) with OCR on this device, then
    translate it. Answers the extracted text, its translation and each text box with its translation; with
    render, also writes the translated image (NAME.<target>.EXT, or output_path)."""
    allowed = allowed_dirs(state_of(ctx), roots)
    store = state_of(ctx).glossary
    context = job_context(ctx.report_progress)
    try:
        input_path = paths.check_allowed(path, allowed)
        output = paths.check_allowed(output_path, allowed) if output_path else None
    except DragomanError as exc:
        raise tool_error(exc) from exc

    from dragoman.pipelines.ocr_translate import ocr_translate as run_ocr_translate

    def work(engine: Engine) -> OcrOutput:
        with _typed_file_errors(path):
            result = run_ocr_translate(
                engine,
                input_path,
                target,
                source=source,
                render=render or output is not None,
                output=output,
                overwrite=overwrite,
                tier=tier,
                glossary=store.load(),
                context=context,
            )
        return OcrOutput(
            text=result.extracted_text,
            translation=result.translated_text,
            source=result.source,
            target=result.target,
            pages=result.pages,
            boxes=[
                OcrBox(page=b.page, bbox=list(b.bbox), text=b.text, translation=b.translation)
                for b in result.boxes
            ],
            output_path=str(result.output_path) if result.output_path else None,
            provenance=result.provenance,
            seconds=round(result.seconds, 6),
            warnings=list(result.warnings),
        )

    out = await run_engine(ctx, work)
    return answer(out, _with_warnings(out.translation, out.warnings))


# ----- server ----------------------------------------------------------------------------------------
def _annotations(
    title: str, *, read_only: bool, idempotent: bool, destructive: bool = False, open_world: bool = False
) -> ToolAnnotations:
    return ToolAnnotations(
        title=title,
        read_only_hint=read_only,
        destructive_hint=None if read_only else destructive,
        idempotent_hint=idempotent,
        open_world_hint=open_world,
    )


TOOLS: tuple[tuple[Callable[..., Any], ToolAnnotations], ...] = (
    (translate, _annotations("Translate text", read_only=True, idempotent=True)),
    (translate_batch, _annotations("Translate many texts", read_only=True, idempotent=True)),
    (detect_language, _annotations("Detect language", read_only=True, idempotent=True)),
    (list_languages, _annotations("List languages", read_only=True, idempotent=True)),
    (engine_status, _annotations("Engine status", read_only=True, idempotent=True)),
    # a term already in the scope is replaced: destructive (its old translation is gone), and idempotent
    (glossary_add, _annotations("Add glossary terms", read_only=False, idempotent=True, destructive=True)),
    (glossary_list, _annotations("List glossary terms", read_only=True, idempotent=True)),
    (
        glossary_remove,
        _annotations("Remove glossary terms", read_only=False, idempotent=True, destructive=True),
    ),
    (translate_file, _annotations("Translate a file", read_only=False, idempotent=False, destructive=True)),
    (
        ocr_translate,
        _annotations("OCR and translate an image", read_only=False, idempotent=False, destructive=True),
    ),
    # speech (issue 14): speak writes a new WAV each call and never overwrites one: not destructive
    (speak, _annotations("Speak text into a WAV file", read_only=False, idempotent=False, destructive=False)),
    (list_voices, _annotations("List speech voices", read_only=True, idempotent=True)),
    # speech recognition (issue 15): transcribe writes only a new JSON file when asked (a repeat is refused);
    # subtitle_file may replace its own output files (overwrite): destructive, like translate_file
    (
        transcribe,
        _annotations("Transcribe a video or audio file", read_only=False, idempotent=True, destructive=False),
    ),
    (
        subtitle_file,
        _annotations("Subtitle a video or audio file", read_only=False, idempotent=False, destructive=True),
    ),
    # dubbing (issue 16): dub_video may replace its own output files (overwrite), like subtitle_file
    (dub_video, _annotations("Dub a video", read_only=False, idempotent=False, destructive=True)),
    # reach (issue 17): translate_files may replace its own outputs (overwrite), like translate_file;
    # packs_install reaches the network (open world) and may replace an installed pack (replace)
    (
        translate_files,
        _annotations(
            "Translate a folder or glob of files", read_only=False, idempotent=False, destructive=True
        ),
    ),
    (list_pairs, _annotations("List language pairs and routes", read_only=True, idempotent=True)),
    (packs_list, _annotations("List installed packs", read_only=True, idempotent=True)),
    (
        packs_install,
        _annotations(
            "Install a translation pack", read_only=False, idempotent=True, destructive=True, open_world=True
        ),
    ),
)


#: Lists and texts over their documented size are limit_exceeded (as at the daemon); other bounds are
#: invalid_request (a 65-character language code is no limit reached).
_LIMITED_LISTS = frozenset({"texts", "glossary", "entries", "terms"})
_LIMITED_TEXTS = frozenset({"text", "texts"})


def _over_limit(kind: str, loc: tuple[int | str, ...]) -> bool:
    if kind == "too_long":
        return len(loc) == 1 and loc[0] in _LIMITED_LISTS
    return kind == "string_too_long" and loc[0] in _LIMITED_TEXTS


#: The fields of one glossary entry, as a tool argument.
_ENTRY_FIELDS = "term, translation, caseSensitive"


class DragomanServer(_sdk.ToolServer[ServerState]):
    """The SDK's server, with argument errors worded like every other tool error: what is wrong, what the
    tool takes, and the ``[code]`` (``invalid_request``, or ``limit_exceeded`` for a list or text over its
    limit); unknown arguments are refused (a misspelt ``glosary`` must not fall back to the glossary file)."""

    #: Each tool's argument names, in signature order (set by :func:`build_server`).
    arguments: dict[str, tuple[str, ...]] = {}

    def argument_error(self, tool: str, error: ValidationError | None, tools: list[str]) -> str:
        if error is None:
            return str(tool_error(InvalidRequest(f"no tool {tool!r}; the tools are: {', '.join(tools)}")))
        takes = ", ".join(self.arguments.get(tool, ()))
        parts: list[str] = []
        over_limit = False
        for err in error.errors()[:3]:
            loc = ".".join(str(p) for p in err["loc"])
            if err["type"] == "extra_forbidden":
                fields = _ENTRY_FIELDS if len(err["loc"]) > 1 else takes
                parts.append(
                    f"unknown argument {loc!r}; {'an entry' if len(err['loc']) > 1 else tool} takes: {fields}"
                )
            elif err["type"] == "missing":
                parts.append(f"missing argument {loc!r} ({tool} takes: {takes})")
            else:
                over_limit = over_limit or _over_limit(err["type"], err["loc"])
                parts.append(f"{loc}: {err['msg']}")
        more = len(error.errors()) - len(parts)
        message = "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")
        return str(tool_error(LimitExceeded(message) if over_limit else InvalidRequest(message)))


def build_server(settings: Settings | None = None) -> MCPServer[ServerState]:
    """The MCP server with every tool registered; nothing is loaded until a tool needs the engine. File tools
    may use the client's roots and DRAGOMAN_ALLOWED_DIRS only (never the working directory)."""
    chosen = settings or Settings.from_env()

    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer[ServerState]) -> AsyncIterator[ServerState]:
        state = ServerState(chosen)
        handler = CallLogHandler(level=logging.DEBUG)
        logging.getLogger("dragoman").addHandler(handler)
        try:
            yield state
        finally:
            logging.getLogger("dragoman").removeHandler(handler)
            await anyio.to_thread.run_sync(state.close)

    level = logging.getLogger().getEffectiveLevel()
    sdk_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = (
        "DEBUG" if level <= logging.DEBUG else "INFO" if level <= logging.INFO else "WARNING"
    )
    tools = [
        _sdk.strict_tool(
            fn, title=hints.title, description=inspect.cleandoc(fn.__doc__ or ""), annotations=hints
        )
        for fn, hints in TOOLS
    ]
    server = DragomanServer(
        SERVER_NAME,
        title="dragoman: on-device translation",
        instructions=INSTRUCTIONS,
        version=__version__,
        lifespan=lifespan,
        log_level=sdk_level,
        tools=tools,
    )
    server.arguments = {t.name: tuple(t.parameters.get("properties", {})) for t in tools}

    async def set_level(ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
        state = ctx.lifespan_context
        if isinstance(state, ServerState):
            state.client_log_level = params.level
        return EmptyResult()

    # Declares the logging capability (handshake-era clients), so tool calls may forward dragoman's logs.
    _sdk.serve_set_level(server, set_level)
    return server


async def serve_stdio(server: MCPServer[ServerState]) -> None:
    """Serve ``server`` on the real stdin/stdout (see :mod:`dragoman.server.mcp._stdio`) until EOF."""
    from dragoman.server.mcp._stdio import stdio_streams

    async with stdio_streams() as streams:
        await _sdk.run_on(server, streams)


def serve(settings: Settings | None = None) -> None:
    """Serve MCP on stdin/stdout until the client closes the connection."""
    from dragoman.documents import partials

    settings = settings or Settings.from_env()
    # temporaries left by a dragoman killed mid-write (kill -9, a host's SIGKILL) are removed first
    partials.startup(settings.local.state_dir, also=[settings.local.glossary_path.parent])
    server = build_server(settings)
    log.info("dragoman MCP server %s on stdio (pid %d)", __version__, os.getpid())
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(serve_stdio, server)
