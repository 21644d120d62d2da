"""The MCP dubbing tool (issue 16): ``dub_video`` makes a video speak other languages, on this device.

It reads only inside the allowed folders (the client's roots plus DRAGOMAN_ALLOWED_DIRS) and writes only
there: the dubbed video ``NAME.<lang>.<ext>``, the dubbed audio ``NAME.<lang>.dub.m4a`` and the subtitles of
both languages, beside the video or in ``output_dir``. An existing file is refused before any work unless
``overwrite``; a call's files are placed all together or not at all. Progress goes out on one growing
scale; a cancelled call stops at the next line and leaves no file. One recogniser, one synthesizer and one
engine per server process (:class:`ServerState`) load their models once.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp_types import CallToolResult
from pydantic import BaseModel, Field

from dragoman.errors import DragomanError, InvalidRequest
from dragoman.limits import Provenance
from dragoman.server import paths
from dragoman.server.mcp._models import FilePath, Tier
from dragoman.server.mcp._runtime import Ctx, ServerState, answer, job_context, tool_error
from dragoman.server.mcp._subtitles import ClientRoots, ModelId, SpokenLanguage, _allowed, _run

if TYPE_CHECKING:
    from dragoman.pipelines.dub import DubResult

#: The most target languages one dub_video call dubs into (each is a full synthesis and mix).
MAX_DUB_TARGETS = 10
_PROVENANCE = Field(description="Where the work ran: 'on-device' for this server (nothing left the machine).")
VoiceMode = Literal["preset", "match", "clone"]


class DubRow(BaseModel):
    target: str = Field(description="the language this dub speaks (BCP-47)")
    video: str | None = Field(description="the dubbed video (video stream copied untouched); null for audio")
    audio: str = Field(description="the dubbed audio track on its own (M4A)")
    subtitles: dict[str, str] = Field(description="subtitle files by kind, e.g. 'srt:es', 'bilingual_srt'")
    duration_seconds: float = Field(description="the output's length (equal to the input's)")
    lines: int = Field(description="how many lines were spoken")
    voices: list[str] = Field(description="the voices that spoke them")
    beyond_natural: list[int] = Field(
        description="indexes of lines compressed beyond the natural speed range to fit their slot"
    )
    overlaps: list[int] = Field(description="indexes of lines that still run into the next one")
    stage_seconds: dict[str, float] = Field(
        description="wall seconds per stage (probe, recognise, translate, voices, synthesise, fit, mix, mux)"
    )
    warnings: list[str]


class DubOutput(BaseModel):
    path: str = Field(description="the video read")
    source_language: str = Field(description="the spoken language (detected or given)")
    confidence: float = Field(description="how sure the detection was, 0-1 (1 when given)")
    duration_seconds: float = Field(description="the input's length")
    dubs: list[DubRow] = Field(description="one per target, in the order asked")
    written: list[str] = Field(description="every file written")
    warnings: list[str] = Field(description="e.g. lines that had to be compressed beyond the natural range")
    seconds: float
    provenance: Provenance = _PROVENANCE


def _path(value: Path | None) -> str | None:
    return str(value) if value is not None else None


def _row(result: DubResult) -> DubRow:
    outputs = result.outputs
    return DubRow(
        target=result.target,
        video=_path(outputs.video),
        audio=str(outputs.audio),
        subtitles={kind: str(p) for kind, p in outputs.subtitles.items()},
        duration_seconds=round(float(result.duration), 3),
        lines=len(result.lines),
        voices=sorted({line.voice for line in result.lines}),
        beyond_natural=[line.index for line in result.lines if line.beyond_natural],
        overlaps=[line.index for line in result.lines if line.overlaps],
        stage_seconds={stage: round(float(s), 3) for stage, s in result.stage_seconds.items()},
        warnings=list(result.warnings),
    )


def _output(media: Path, results: list[DubResult], seconds: float) -> DubOutput:
    rows = [_row(r) for r in results]
    written: list[str] = []
    for row in rows:
        for value in (row.video, row.audio, *row.subtitles.values()):
            if value and value not in written:
                written.append(value)
    first = results[0]
    warnings = [f"{row.target}: {w}" for row in rows for w in row.warnings]
    return DubOutput(
        path=str(media),
        source_language=first.source_language,
        confidence=round(float(first.language_probability), 4),
        duration_seconds=round(float(first.duration), 3),
        dubs=rows,
        written=written,
        warnings=warnings,
        seconds=round(seconds, 3),
        provenance="on-device",
    )


async def dub_video(
    path: FilePath,
    targets: Annotated[
        tuple[Annotated[str, Field(min_length=2, max_length=64)], ...],
        Field(
            min_length=1,
            max_length=MAX_DUB_TARGETS,
            description=f"1 to {MAX_DUB_TARGETS} languages to dub into (BCP-47: ['es'], ['es', 'fr']).",
        ),
    ],
    ctx: Ctx,
    roots: ClientRoots,
    source: SpokenLanguage = "auto",
    voice: Annotated[
        str | None,
        Field(
            min_length=2,
            max_length=32,
            description="voice_mode preset: the one voice of every line (aria (default), nova, lyra, iris, "
            "maya, marcus, atlas, felix, orion, kai).",
        ),
    ] = None,
    voice_mode: Annotated[
        VoiceMode,
        Field(
            description="preset: one voice for all lines; match: each line's voice chosen from the original "
            "speaker's gender and pitch (a dialogue keeps two voices); clone: the voice clone clone_id."
        ),
    ] = "preset",
    clone_id: Annotated[
        str | None, Field(max_length=64, description="voice_mode clone: the clone's id.")
    ] = None,
    subtitles: Annotated[
        str | None,
        Field(
            max_length=4096,
            description="Your own SRT/VTT of the spoken language, used instead of recognising the speech.",
        ),
    ] = None,
    output_dir: Annotated[
        str | None,
        Field(max_length=4096, description="The folder to write into; default: beside the video."),
    ] = None,
    overwrite: Annotated[
        bool, Field(description="Replace output files that exist (never the video).")
    ] = False,
    tier: Tier = None,
    model: ModelId = None,
) -> Annotated[CallToolResult, DubOutput]:
    """Dub a video (MP4, MKV, WebM, MOV...) into other languages on this device: recognise the speech (or
    take subtitles), translate it sentence by sentence, speak each line with the chosen voice fitted to its
    time slot, mix it over the original background with the original speech ducked, and mux it with the
    untouched video stream. Writes NAME.<lang>.<ext> (video), NAME.<lang>.dub.m4a (audio) and subtitles of
    both languages beside the video (or in output_dir); several targets recognise once. Answers the paths,
    durations, voices, per-stage seconds and warnings (lines compressed beyond the natural speed range).
    Never overwrites a file unless overwrite is true: refused before any work. Sends progress; a cancelled
    call stops at the next line and writes nothing."""
    import time

    from dragoman.pipelines.dub import DubOptions, dub_batch
    from dragoman.speech.asr import TranscribeOptions

    allowed = _allowed(ctx, roots)
    try:
        media = paths.check_allowed(path, allowed)
        folder = paths.check_allowed(output_dir, allowed) if output_dir else None
        own = paths.check_allowed(subtitles, allowed) if subtitles else None
        if clone_id and voice_mode != "clone":
            raise InvalidRequest(
                f"clone_id speaks with a clone; it needs voice_mode 'clone', not {voice_mode!r}"
            )
        if voice_mode == "clone" and not clone_id:
            raise InvalidRequest(
                "voice_mode 'clone' needs clone_id (a clone made with dragoman voices clone add)"
            )
        if voice and voice_mode != "preset":
            raise InvalidRequest(
                f"voice names the one voice of every line (voice_mode preset); {voice_mode} chooses itself"
            )
        base: dict[str, Any] = {"source": source, "voice_mode": voice_mode}
        if voice:
            base["voice"] = voice
        if clone_id:
            base["clone_id"] = clone_id
        if tier:
            base["tier"] = tier
        if own is not None:
            base["subtitles"] = own
        transcribe = TranscribeOptions(language=source, model=model)
    except DragomanError as exc:
        raise tool_error(exc) from exc
    context = job_context(ctx.report_progress)

    def work(state: ServerState) -> DubOutput:
        started = time.perf_counter()
        glossary = state.glossary.load()  # a broken glossary file is a tool error
        options = DubOptions(target=targets[0], glossary=glossary, **base)
        clone_store = None
        if voice_mode == "clone":
            from dragoman.speech.tts.clones import LocalCloneStore

            clone_store = LocalCloneStore()
        results = dub_batch(
            media,
            targets,
            options,
            synthesizer=state.synthesizer(),
            recognizer=state.recognizer(),
            engine=state.engine(),
            out_dir=folder,
            overwrite=overwrite,
            context=context,
            clone_store=clone_store,
            transcribe_options=transcribe,
        )
        return _output(media, list(results), time.perf_counter() - started)

    out = await _run(ctx, work)
    text = f"[{out.source_language} -> {', '.join(d.target for d in out.dubs)}, {out.duration_seconds:.1f} s]"
    text += " wrote " + ", ".join(out.written)
    if out.warnings:
        text += "\n\n[warnings] " + " | ".join(out.warnings)
    return answer(out, text)


__all__ = ["MAX_DUB_TARGETS", "dub_video"]
