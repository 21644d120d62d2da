"""The MCP tool ``translate_files`` (issue 17): ``translate_file`` over a folder or a glob, with a report per
file.

What it reads is found before any work, within bounds: at most :data:`MAX_MCP_FILES` files (more is
``limit_exceeded``, naming how to narrow the pattern) found by looking at most at
:data:`MAX_MCP_SCAN_ENTRIES` folder entries. The walk never follows a linked folder, skips hidden names
(unless the pattern asks for them) and dragoman's own temporaries, and every file found is resolved and
checked against the allowed directories like any file tool's path: a link leading out of them is reported
``path_not_allowed`` and never read. Each file is written as ``NAME.<target>.EXT`` beside it (or under
``output_dir``, keeping its sub-folder), atomically; a file that is the translation of another file of the
same run is skipped, and so is a file whose translation exists (unless ``overwrite``). One file's failure
(an unsupported format, a corrupt file) is reported in its row and the others go on. Progress goes out on
one scale (files, and texts within each); a cancelled call stops at the next chunk: the files finished
stay, the one in progress leaves nothing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from mcp_types import CallToolResult
from pydantic import BaseModel, Field

from dragoman.errors import (
    Cancelled,
    DocumentFormatError,
    DragomanError,
    EngineTimeout,
    InvalidRequest,
    LimitExceeded,
    file_error,
)
from dragoman.limits import MAX_MCP_FILES, MAX_MCP_SCAN_ENTRIES, Provenance
from dragoman.limits import Tier as TierName
from dragoman.progress import JobContext
from dragoman.server import paths
from dragoman.server.mcp._models import Source, Target, Tier
from dragoman.server.mcp._runtime import Ctx, answer, job_context, run_engine, state_of, tool_error
from dragoman.server.mcp._subtitles import ClientRoots, _allowed

if TYPE_CHECKING:
    from dragoman.translation.engine import Engine
    from dragoman.translation.types import GlossaryEntry

_PROVENANCE = Field(description="Where the work ran: 'on-device' for this server (nothing left the machine).")
_MAGIC = frozenset("*?[")
#: Pattern segments a glob may have (each ``**`` may match any number of folders).
MAX_PATTERN_SEGMENTS = 32
#: Progress units per file (its texts' progress is spread over them).
_UNITS = 1000
FileStatus = Literal["translated", "failed", "skipped"]


class FileError(BaseModel):
    code: str = Field(description="the error code, as a tool error's [code]")
    message: str


class FileRow(BaseModel):
    input_path: str = Field(description="the file as found (inside the folder or glob)")
    output_path: str | None = Field(description="the translation written (or that would have been)")
    status: FileStatus
    format: str | None = None
    source: str | None = Field(default=None, description="FLORES-200 code of the file's language")
    segments: int = 0
    characters: int = 0
    seconds: float = 0.0
    warnings: list[str] = Field(default_factory=list)
    reason: str | None = Field(default=None, description="why a file was skipped")
    error: FileError | None = Field(default=None, description="why a file failed")


class FilesOutput(BaseModel):
    files: list[FileRow] = Field(description="one row per file found, in path order")
    translated: int
    failed: int
    skipped: int
    target: str = Field(description="FLORES-200 code")
    provenance: Provenance = _PROVENANCE
    seconds: float


# ----- finding the files --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Found:
    """One file the folder or glob matched: where it was found, and its path relative to the base."""

    path: Path
    relative: Path


def _is_magic(part: str) -> bool:
    return any(c in _MAGIC for c in part)


class _Pattern:
    """Path segments matched like a shell glob: ``*``, ``?``, ``[...]`` within a segment, ``**`` for any
    number of folders; names starting with a dot only where a segment starts with one."""

    def __init__(self, segments: tuple[str, ...]) -> None:
        self.segments = segments
        self.dots = any(s.startswith(".") for s in segments)
        self.deep = "**" in segments
        self.fixed = segments.index("**") if self.deep else len(segments)

    def matches(self, parts: tuple[str, ...]) -> bool:
        """Whether ``parts`` match, segment by segment: the set of positions each segment may end at, so
        the cost is linear in the parts times the segments (no recursion, however deep the folders)."""
        at = {0}
        for segment in self.segments:
            if not at:
                return False
            if segment == "**":
                at = set(range(min(at), len(parts) + 1))
            else:
                at = {i + 1 for i in at if i < len(parts) and fnmatchcase(parts[i], segment)}
        return len(parts) in at

    def may_descend(self, parts: tuple[str, ...]) -> bool:
        """Whether a folder at ``parts`` may hold a match (its fixed leading segments match so far)."""
        if not self.deep and len(parts) >= len(self.segments):
            return False  # a match is exactly as deep as the pattern
        head = min(len(parts), self.fixed)
        return all(fnmatchcase(parts[k], self.segments[k]) for k in range(head))

    def shown(self, name: str) -> bool:
        return self.dots or not name.startswith(".")


def _split(text: str) -> tuple[str, tuple[str, ...]]:
    """A glob's folder part without wildcards, and the segments after it."""
    parts = Path(text).expanduser().parts
    first = next((k for k, p in enumerate(parts) if _is_magic(p)), len(parts))
    base = str(Path(*parts[:first])) if first else ""
    segments = tuple(parts[first:])
    if ".." in segments:
        raise InvalidRequest(f"{text}: '..' after a wildcard is not supported; name the folder before it")
    if len(segments) > MAX_PATTERN_SEGMENTS:
        raise InvalidRequest(f"{text}: at most {MAX_PATTERN_SEGMENTS} segments after the folder")
    return base, segments


def _too_many(what: str, limit: int, hint: str) -> LimitExceeded:
    return LimitExceeded(f"{what} over {limit:,}; {hint}")


def _walk(base: Path, pattern: _Pattern, shown_as: str) -> list[Found]:
    """The files under ``base`` matching ``pattern`` (linked folders are not entered), bounded."""
    from dragoman.documents.partials import is_partial

    found: list[Found] = []
    scanned = 0
    stack: list[tuple[Path, tuple[str, ...]]] = [(base, ())]
    while stack:
        folder, prefix = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:  # a folder we may not read holds nothing we may translate
            continue
        for entry in entries:
            scanned += 1
            if scanned > MAX_MCP_SCAN_ENTRIES:
                raise _too_many(
                    f"{shown_as} looks at", MAX_MCP_SCAN_ENTRIES, "folder entries: name a narrower folder"
                )
            name = entry.name
            if not pattern.shown(name) or is_partial(name):
                continue
            parts = (*prefix, name)
            try:
                is_folder = entry.is_dir(follow_symlinks=False)
                # a link to a file is a file (checked where it leads later); one to a folder is never
                # entered; a dangling link is reported like a file, so the report shows it
                is_file = not is_folder and not entry.is_dir(follow_symlinks=True)
            except OSError:
                continue
            if is_folder and pattern.may_descend(parts):
                stack.append((Path(entry.path), parts))
            if is_file and pattern.matches(parts):
                found.append(Found(Path(entry.path), Path(*parts)))
                if len(found) > MAX_MCP_FILES:
                    raise _too_many(
                        f"{shown_as} matches",
                        MAX_MCP_FILES,
                        f"files: translate_files takes at most {MAX_MCP_FILES} a call; narrow the "
                        "pattern (a sub-folder, an extension) or make several calls",
                    )
    return sorted(found, key=lambda f: f.relative.parts)


def find_files(text: str, allowed: tuple[Path, ...], *, recursive: bool = False) -> tuple[Path, list[Found]]:
    """The base folder and the files ``text`` names: a folder (its files; with ``recursive`` those of its
    sub-folders too), a glob, or one file. The base must be inside the allowed directories."""
    base_text, segments = _split(text)
    if not segments:
        chosen = paths.check_allowed(text, allowed)
        if chosen.is_file():
            return chosen.parent, [Found(chosen, Path(chosen.name))]
        if not chosen.is_dir():
            raise InvalidRequest(f"{text} is neither a folder nor a file; check the path")
        base, segments = chosen, (("**", "*") if recursive else ("*",))
    else:
        base = paths.check_allowed(base_text or ".", allowed)
        if not base.is_dir():
            raise InvalidRequest(f"{base_text or base} is not a folder; check the pattern {text}")
    return base, _walk(base, _Pattern(segments), text)


# ----- translating them ---------------------------------------------------------------------------------
def _file_context(context: JobContext, index: int, count: int) -> JobContext:
    """The context of file ``index`` of ``count``: its progress spread over the file's share of one scale."""

    def progress(done: int, total: int, message: str) -> None:
        share = min(done / total, 1.0) if total > 0 else 0.0
        context.progress(index * _UNITS + int(share * (_UNITS - 1)), count * _UNITS, message)

    return JobContext(progress, context.cancel, context.deadline)


@contextlib.contextmanager
def _per_file(row: dict[str, object]) -> Iterator[None]:
    """One file's errors into its row (cancellation and the deadline stop the whole run)."""
    try:
        yield
    except (Cancelled, EngineTimeout):
        raise
    except DragomanError as exc:
        row.update(status="failed", error=FileError(code=exc.code, message=exc.message))
    except OSError as exc:
        hint = "free some space" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "check the file"
        typed = file_error(exc, f"translating {row['input_path']}", hint=hint)
        row.update(status="failed", error=FileError(code=typed.code, message=typed.message))
    except RecursionError:
        deep = DocumentFormatError(f"{row['input_path']} nests too deeply to read; flatten it")
        row.update(status="failed", error=FileError(code=deep.code, message=deep.message))


def translate_found(
    engine: Engine,
    found: list[Found],
    allowed: tuple[Path, ...],
    target: str,
    *,
    source: str | None,
    output_dir: Path | None,
    overwrite: bool,
    tier: TierName | None,
    glossary: Sequence[GlossaryEntry],
    context: JobContext,
) -> list[FileRow]:
    """Translate each found file (see the module docstring); one row each, in order."""
    from dragoman.documents.handlers import default_output
    from dragoman.languages.catalogue import resolve
    from dragoman.pipelines import translate_file as files

    resolve(target)  # an unknown target is one error for the call, not one per file
    outputs = {f.path: (output_dir / f.relative if output_dir else f.path).parent for f in found}
    planned = {f.path: outputs[f.path] / default_output(f.path, target).name for f in found}
    produced = {out: f for f, out in ((f, planned[f.path]) for f in found)}
    rows: list[FileRow] = []
    seen: dict[Path, Path] = {}
    context.check()
    for index, item in enumerate(found):
        out = planned[item.path]
        row: dict[str, object] = {"input_path": str(item.path), "output_path": str(out), "status": "skipped"}
        with _per_file(row):
            origin = produced.get(item.path)
            resolved = paths.check_allowed(item.path, allowed)  # a link out of the allowed folders: refused
            output = paths.check_allowed(out, allowed)
            if origin is not None and origin.path != item.path:
                row["reason"] = f"it is the translation of {origin.path} in this run"
            elif resolved in seen:
                row["reason"] = f"it is the same file as {seen[resolved]}"
            elif (output.exists() or out.is_symlink()) and not overwrite:
                row["reason"] = f"{out} exists; pass overwrite=true to replace it"
            else:
                seen[resolved] = item.path
                result = files.translate_file(
                    engine,
                    resolved,
                    target,
                    source=source,
                    output=output,
                    overwrite=overwrite,
                    tier=tier,
                    glossary=glossary,
                    context=_file_context(context, index, len(found)),
                )
                row.update(
                    status="translated",
                    output_path=str(result.output_path),
                    format=result.format,
                    source=result.source,
                    segments=result.segments,
                    characters=result.characters,
                    seconds=round(result.seconds, 6),
                    warnings=list(result.warnings),
                )
        rows.append(FileRow.model_validate(row))
        context.progress((index + 1) * _UNITS, len(found) * _UNITS, f"{index + 1} of {len(found)} files")
    return rows


async def translate_files(
    path: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4096,
            description="A folder, or a glob ('docs/*.docx', 'site/**/*.md'), inside the allowed directories "
            "(the client's roots plus DRAGOMAN_ALLOWED_DIRS); relative paths start at the first of them.",
        ),
    ],
    target: Target,
    ctx: Ctx,
    roots: ClientRoots,
    source: Source = None,
    recursive: Annotated[
        bool, Field(description="For a folder: also the files of its sub-folders (a glob says it itself).")
    ] = False,
    output_dir: Annotated[
        str | None,
        Field(
            max_length=4096,
            description="Write the translations here, keeping sub-folders; default: beside each file.",
        ),
    ] = None,
    overwrite: Annotated[
        bool, Field(description="Replace translations that exist (never an input).")
    ] = False,
    tier: Tier = None,
) -> Annotated[CallToolResult, FilesOutput]:
    """Translate every file of a folder or a glob, like translate_file (format by content, written as
    NAME.<target>.EXT beside each file or under output_dir), with one report row per file: translated,
    failed (with the error's code and message; the others go on) or skipped (the translation of another
    file of the run, or its translation exists: pass overwrite). At most 100 files a call (more:
    limit_exceeded before any work). Links leading out of the allowed directories are refused. Sends
    progress; a cancelled call keeps the files finished and leaves no partial one."""
    state = state_of(ctx)
    allowed = _allowed(ctx, roots)
    store = state.glossary
    started = time.perf_counter()
    try:
        _, found = find_files(path, allowed, recursive=recursive)
        out_dir = paths.check_allowed(output_dir, allowed) if output_dir else None
        if out_dir is not None and out_dir.exists() and not out_dir.is_dir():
            raise InvalidRequest(f"{output_dir} is not a folder; name a folder for output_dir")
    except DragomanError as exc:
        raise tool_error(exc) from exc
    context = job_context(ctx.report_progress)

    def work(engine: Engine) -> FilesOutput:
        from dragoman.languages.catalogue import resolve

        rows = translate_found(
            engine,
            found,
            allowed,
            target,
            source=source,
            output_dir=out_dir,
            overwrite=overwrite,
            tier=tier,
            glossary=store.load(),
            context=context,
        )
        return FilesOutput(
            files=rows,
            translated=sum(r.status == "translated" for r in rows),
            failed=sum(r.status == "failed" for r in rows),
            skipped=sum(r.status == "skipped" for r in rows),
            target=resolve(target),
            provenance=engine.provenance,
            seconds=round(time.perf_counter() - started, 6),
        )

    out = await run_engine(ctx, work)
    lines = [f"{out.translated} translated, {out.failed} failed, {out.skipped} skipped"]
    for row in out.files:
        if row.status == "translated":
            lines.append(f"{row.input_path} -> {row.output_path}")
        elif row.status == "failed" and row.error is not None:
            lines.append(f"{row.input_path}: failed: {row.error.message} [{row.error.code}]")
        else:
            lines.append(f"{row.input_path}: skipped: {row.reason}")
    return answer(out, "\n".join(lines))


__all__ = ["find_files", "translate_files"]
