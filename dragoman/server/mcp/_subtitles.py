"""The MCP speech recognition tools (issue 15): ``transcribe`` (what a video or audio file says, with word
timings) and ``subtitle_file`` (subtitle files in the spoken language and in target languages).

Both read only inside the allowed folders (the client's roots plus DRAGOMAN_ALLOWED_DIRS) and write only
there. Neither overwrites a file unless told: ``transcribe`` writes its JSON to ``output_path`` only when
given (which must not exist), ``subtitle_file`` writes ``NAME.<lang>.<ext>`` beside the media (or in
``output_dir``) and refuses before any work when one exists, unless ``overwrite``; its files are placed all
together or not at all. Progress goes out on one scale (decoding, recognition between segments, translation
between chunks, writing), and a cancelled call stops at the next of those points, leaving no file behind.
One recogniser per server process (:meth:`ServerState.recognizer`) loads each speech model once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread
from mcp.server.mcpserver import ListRoots, Resolve
from mcp_types import CallToolResult, ListRootsResult
from pydantic import BaseModel, Field

from dragoman.errors import Cancelled, DragomanError, InvalidRequest, file_error
from dragoman.limits import Provenance
from dragoman.server import paths
from dragoman.server.mcp._models import FilePath, Tier
from dragoman.server.mcp._runtime import Ctx, ServerState, answer, job_context, state_of, tool_error

if TYPE_CHECKING:
    from dragoman.speech.asr import Transcript

T = TypeVar("T")
_PROVENANCE = Field(description="Where the work ran: 'on-device' for this server (nothing left the machine).")
#: The most target languages one subtitle_file call translates into.
MAX_SUBTITLE_TARGETS = 20
SubtitleFormat = Literal["srt", "vtt", "txt", "bilingual_srt"]


def _client_roots(ctx: Ctx) -> ListRoots | None:
    caps = ctx.client_capabilities
    return ListRoots() if caps is not None and caps.roots is not None else None


ClientRoots = Annotated[ListRootsResult | None, Resolve(_client_roots)]

SpokenLanguage = Annotated[
    str,
    Field(
        min_length=2,
        max_length=16,
        description="The spoken language: 'auto' (detected, with a confidence) or a code such as 'en', 'es'.",
    ),
]
ModelId = Annotated[
    str | None,
    Field(max_length=128, description="An installed speech model (kind asr); default: Whisper base."),
]


class WordRow(BaseModel):
    word: str
    start: float = Field(description="seconds into the media")
    end: float
    probability: float


class SegmentRow(BaseModel):
    start: float = Field(description="seconds into the media")
    end: float
    text: str
    words: list[WordRow]


class TranscribeOutput(BaseModel):
    path: str = Field(description="the media file read")
    language: str = Field(description="the language heard (Whisper's code, e.g. 'en'), or the one given")
    confidence: float = Field(description="how sure the detection was, 0-1 (1 when the language was given)")
    language_given: bool
    duration_seconds: float = Field(description="the audio's length")
    model: str
    text: str
    segments: list[SegmentRow]
    output_path: str | None = Field(description="the JSON file written, when output_path was given")
    warnings: list[str]
    seconds: float
    provenance: Provenance = _PROVENANCE


class TrackRow(BaseModel):
    language: str = Field(description="BCP-47 code of the track")
    translated: bool
    cues: int
    route: list[str] = Field(description="the packs that translated it (empty for the spoken language)")


class SubtitleOutput(BaseModel):
    path: str = Field(description="the media file read")
    language: str = Field(description="the spoken language")
    confidence: float
    duration_seconds: float
    model: str
    tracks: list[TrackRow]
    written: list[str] = Field(description="the files written (NAME.<lang>.<ext>, NAME.<src>-<tgt>.srt)")
    skipped: list[str] = Field(description="targets not written because they are the spoken language")
    warnings: list[str]
    seconds: float
    provenance: Provenance = _PROVENANCE


async def _run(ctx: Ctx, work: Callable[[ServerState], T]) -> T:
    """``work`` on a worker thread; our errors (and the file system's) become tool errors."""
    state = state_of(ctx)
    try:
        return await anyio.to_thread.run_sync(lambda: work(state))
    except Cancelled:
        await anyio.lowlevel.checkpoint()  # the client cancelled the call: this raises the cancellation
        raise
    except DragomanError as exc:
        raise tool_error(exc) from exc
    except OSError as exc:
        raise tool_error(
            file_error(exc, "reading or writing the media's files", hint="check the path")
        ) from exc


def _allowed(ctx: Ctx, roots: ListRootsResult | None) -> tuple[Path, ...]:
    client = paths.roots_from_uris(str(r.uri) for r in roots.roots) if roots is not None else None
    return paths.allowed_roots(client, state_of(ctx).settings.local.allowed_dirs)


def _segments(transcript: Transcript) -> list[SegmentRow]:
    return [
        SegmentRow(
            start=round(s.start, 3),
            end=round(s.end, 3),
            text=s.text.strip(),
            words=[
                WordRow(
                    word=w.text.strip(),
                    start=round(w.start, 3),
                    end=round(w.end, 3),
                    probability=round(w.probability, 4),
                )
                for w in s.words
            ],
        )
        for s in transcript.segments
    ]


def _write_new(target: Path, data: bytes) -> None:
    """``data`` written to ``target``, which must not exist: a temporary beside it, linked into place (a file
    that appeared meanwhile is not replaced either)."""
    from dragoman.documents.base import atomic_output

    if not target.parent.is_dir():
        raise InvalidRequest(f"{target.parent} is not a folder; create it or choose another output_path")
    with atomic_output(target) as partial:
        partial.write_bytes(data)


async def transcribe(
    path: FilePath,
    ctx: Ctx,
    roots: ClientRoots,
    language: SpokenLanguage = "auto",
    model: ModelId = None,
    output_path: Annotated[
        str | None,
        Field(max_length=4096, description="Also write the transcript as JSON here (must not exist)."),
    ] = None,
) -> Annotated[CallToolResult, TranscribeOutput]:
    """Recognise the speech of a video or audio file (MP4, MKV, WebM, MOV, MP3, WAV, M4A, OGG, FLAC...)
    on this device: the language heard and how sure, the text, and the segments with word timings in
    seconds. Optionally writes the transcript as JSON to output_path (never over a file). Sends progress
    when given a progress token; a cancelled call stops between segments."""
    import json

    from dragoman.pipelines.subtitles import recognise_file
    from dragoman.speech.asr import TranscribeOptions

    allowed = _allowed(ctx, roots)
    try:
        media = paths.check_allowed(path, allowed)
        output = paths.check_allowed(output_path, allowed) if output_path else None
        if output is not None and (output.exists() or output.is_symlink()):
            raise InvalidRequest(
                f"{output} already exists; transcribe never overwrites: choose another output_path"
            )
        options = TranscribeOptions(language=language, model=model)
    except DragomanError as exc:
        raise tool_error(exc) from exc
    context = job_context(ctx.report_progress)

    def work(state: ServerState) -> TranscribeOutput:
        info, transcript = recognise_file(media, state.recognizer(), options, context)
        if output is not None:
            data = {**transcript.to_dict(), "media": str(info.path)}
            _write_new(output, json.dumps(data, ensure_ascii=False, indent=2).encode("utf-8"))
        return TranscribeOutput(
            path=str(info.path),
            language=transcript.language,
            confidence=round(transcript.language_probability, 4),
            language_given=transcript.language_given,
            duration_seconds=round(transcript.duration, 3),
            model=transcript.model,
            text=transcript.text,
            segments=_segments(transcript),
            output_path=str(output) if output is not None else None,
            warnings=list(transcript.warnings),
            seconds=round(transcript.seconds, 3),
            provenance="on-device",
        )

    out = await _run(ctx, work)
    how = "given" if out.language_given else f"confidence {out.confidence:.2f}"
    text = f"[{out.language}, {how}, {out.duration_seconds:.1f} s] {out.text}"
    if out.output_path:
        text += f"\n\nwrote {out.output_path}"
    if out.warnings:
        text += "\n\n[warnings] " + " | ".join(out.warnings)
    return answer(out, text)


async def subtitle_file(
    path: FilePath,
    ctx: Ctx,
    roots: ClientRoots,
    targets: Annotated[
        tuple[Annotated[str, Field(min_length=2, max_length=64)], ...],
        Field(
            max_length=MAX_SUBTITLE_TARGETS,
            description="Languages to translate into (BCP-47 or FLORES-200); [] for captions only.",
        ),
    ] = (),
    formats: Annotated[
        tuple[SubtitleFormat, ...],
        Field(
            min_length=1, max_length=4, description="Any of srt, vtt, txt, bilingual_srt (needs a target)."
        ),
    ] = ("srt",),
    source: SpokenLanguage = "auto",
    output_dir: Annotated[
        str | None,
        Field(max_length=4096, description="The folder to write into; default: beside the media."),
    ] = None,
    overwrite: Annotated[
        bool, Field(description="Replace subtitle files that exist (never the media).")
    ] = False,
    tier: Tier = None,
    model: ModelId = None,
) -> Annotated[CallToolResult, SubtitleOutput]:
    """Make subtitle files for a video or audio file on this device: captions in the spoken language and a
    translation into each target, laid over the same timing (cues of at most two lines of 42 characters,
    1-7 s, at most 20 characters a second). Writes NAME.<lang>.<ext> beside the media (or in output_dir);
    bilingual_srt writes NAME.<src>-<tgt>.srt, each cue over its translation. Never overwrites a file unless
    overwrite is true: refused before any work. Sends progress; a cancelled call writes nothing."""
    from dragoman.pipelines.subtitles import make_subtitles
    from dragoman.speech.asr import TranscribeOptions

    allowed = _allowed(ctx, roots)
    try:
        media = paths.check_allowed(path, allowed)
        folder = paths.check_allowed(output_dir, allowed) if output_dir else None
        options = TranscribeOptions(language=source, model=model)
    except DragomanError as exc:
        raise tool_error(exc) from exc
    context = job_context(ctx.report_progress)

    def work(state: ServerState) -> SubtitleOutput:
        glossary = state.glossary.load() if targets else ()  # a broken glossary file is a tool error
        result = make_subtitles(
            media,
            state.recognizer(),
            None,
            targets=targets,
            formats=formats,
            options=options,
            out_dir=folder,
            overwrite=overwrite,
            tier=tier,
            glossary=glossary,
            context=context,
            engine_factory=state.engine,
        )
        transcript = result.transcript
        return SubtitleOutput(
            path=str(result.media.path),
            language=transcript.language,
            confidence=round(transcript.language_probability, 4),
            duration_seconds=round(result.media.duration, 3),
            model=transcript.model,
            tracks=[
                TrackRow(language=t.language, translated=t.translated, cues=len(t.cues), route=list(t.route))
                for t in result.tracks
            ],
            written=[str(p) for p in result.paths],
            skipped=list(result.skipped),
            warnings=list(result.warnings),
            seconds=round(result.seconds, 3),
            provenance="on-device",
        )

    out = await _run(ctx, work)
    text = f"[{out.language}, {out.duration_seconds:.1f} s] wrote " + ", ".join(out.written)
    if out.warnings:
        text += "\n\n[warnings] " + " | ".join(out.warnings)
    return answer(out, text)


__all__ = ["subtitle_file", "transcribe"]
