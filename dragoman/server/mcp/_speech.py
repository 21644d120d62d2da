"""The MCP speech tools (issue 14): ``speak`` (text to a WAV file inside the allowed folders) and
``list_voices`` (the ten voices, the 31 languages and the engine serving each).

``speak`` never overwrites: without ``output_path`` it picks a fresh name in the first allowed folder
(``speech-<voice>-<language>-<n>.wav``); a given ``output_path`` that exists is refused. The file is written
whole beside its target, then linked into place (so a file that appeared meanwhile is not replaced either).
Progress is sent after every sentence, and a cancelled call stops before its next sentence.

``clone_id`` speaks with a voice clone made by ``dragoman voices clone add`` (a voice match kept in the user's
data directory, :class:`~dragoman.speech.tts.clones.LocalCloneStore`), as ``cloneId`` does on the hosted API:
the clone's matched voice overrides ``voice``; an unknown id is the tool error ``[clone_not_found]``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread
from mcp.server.mcpserver import ListRoots, Resolve
from mcp_types import CallToolResult, ListRootsResult
from pydantic import BaseModel, ConfigDict, Field

from dragoman.errors import Cancelled, DragomanError, InvalidRequest
from dragoman.limits import MAX_TTS_CHARS, TTS_SPEED_MAX, TTS_SPEED_MIN, Provenance
from dragoman.server import paths
from dragoman.server.mcp._runtime import Ctx, answer, job_context, state_of, tool_error
from dragoman.speech.tts.types import (
    ENERGY_RATIO_RANGE,
    PAUSE_SCALE_RANGE,
    PITCH_DELTA_ST_RANGE,
    SPEED_RATIO_RANGE,
    EmotionPreset,
    VoiceName,
)

if TYPE_CHECKING:
    from dragoman.speech.tts.synth import Synthesizer
    from dragoman.speech.tts.types import SynthesisResult

T = TypeVar("T")
_PROVENANCE = Field(description="Where the work ran: 'on-device' for this server (nothing left the machine).")


def _client_roots(ctx: Ctx) -> ListRoots | None:
    caps = ctx.client_capabilities
    return ListRoots() if caps is not None and caps.roots is not None else None


ClientRoots = Annotated[ListRootsResult | None, Resolve(_client_roots)]


class EmotionInput(BaseModel):
    """The emotion object (refines emotion_preset): each field relative to the voice's neutral delivery."""

    model_config = ConfigDict(extra="forbid")

    speed_ratio: float = Field(
        1.0, ge=SPEED_RATIO_RANGE[0], le=SPEED_RATIO_RANGE[1], description="speaking rate ratio, 0.5-2"
    )
    pitch_delta_st: float = Field(
        0.0, ge=PITCH_DELTA_ST_RANGE[0], le=PITCH_DELTA_ST_RANGE[1], description="pitch change, semitones"
    )
    energy_ratio: float = Field(
        1.0, ge=ENERGY_RATIO_RANGE[0], le=ENERGY_RATIO_RANGE[1], description="loudness (amplitude) ratio"
    )
    pause_scale: float = Field(
        1.0, ge=PAUSE_SCALE_RANGE[0], le=PAUSE_SCALE_RANGE[1], description="pauses between sentences"
    )


class WordRow(BaseModel):
    word: str
    start: float = Field(description="seconds into the audio")
    end: float


class SpeakOutput(BaseModel):
    path: str = Field(description="the WAV written (16-bit PCM mono)")
    duration_seconds: float
    sample_rate: int
    voice: str = Field(description="the voice that spoke (a clone's matched voice when clone_id was given)")
    clone_id: str | None = Field(None, description="the voice clone spoken with, when one was given")
    engine: str = Field(description="the engine that spoke: piper, pico, festival, flite or espeak")
    engine_voice: str
    language: str
    sentences: int
    words: list[WordRow] = Field(description="word timings where the engine gives them; empty otherwise")
    notes: list[str]
    seconds: float
    provenance: Provenance = _PROVENANCE


class VoiceRow(BaseModel):
    name: str
    gender: str
    description: str
    languages: dict[str, Any] = Field(
        description="per language: the engine voice of a standard and studio render"
    )


class SpeechLanguageRow(BaseModel):
    code: str
    name: str
    engines: list[str] = Field(description="the engines installed for the language")


class VoiceModelRow(BaseModel):
    engine: str = Field(description="piper or kokoro")
    engine_voice: str
    language: str
    locale: str
    license: str = Field(
        description="the licence the model states (from its hub card for hf: installs; 'NON-COMMERCIAL' "
        "marks a non-commercial one), or 'unknown (...)' when it states none"
    )


class VoicesOutput(BaseModel):
    voices: list[VoiceRow]
    languages: list[SpeechLanguageRow]
    models: list[VoiceModelRow] = Field(
        default_factory=list, description="the engine voices installed as models, each with its licence"
    )
    emotions: dict[str, Any]
    provenance: Provenance = _PROVENANCE


async def _run_speech(ctx: Ctx, work: Callable[[Synthesizer], T]) -> T:
    """``work`` with the synthesizer on a worker thread; our errors become tool errors."""
    state = state_of(ctx)
    try:
        return await anyio.to_thread.run_sync(lambda: work(state.synthesizer()))
    except Cancelled:
        await anyio.lowlevel.checkpoint()  # the client cancelled the call: this raises the cancellation
        raise
    except DragomanError as exc:
        raise tool_error(exc) from exc


def _fresh_path(folder: Path, voice: str, language: str) -> Path:
    for n in range(1, 100_000):
        candidate = folder / f"speech-{voice}-{language}-{n}.wav"
        if not candidate.exists():
            return candidate
    raise InvalidRequest(f"{folder} holds too many speech files; give output_path")


def _write_new(target: Path, data: bytes) -> None:
    """``data`` written to ``target``, which must not exist (never replaced, even if it appears meanwhile)."""
    if target.exists() or target.is_symlink():
        raise InvalidRequest(f"{target} already exists; speak never overwrites: choose another output_path")
    if not target.parent.is_dir():
        raise InvalidRequest(f"{target.parent} is not a folder; create it or choose another output_path")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        try:
            os.link(tmp, target)  # fails when target exists: no overwrite, even in a race
        except FileExistsError:
            raise InvalidRequest(
                f"{target} already exists; speak never overwrites: choose another output_path"
            ) from None
    finally:
        Path(tmp).unlink(missing_ok=True)


def _speak_output(result: SynthesisResult, path: Path) -> SpeakOutput:
    return SpeakOutput(
        path=str(path),
        duration_seconds=round(result.audio.duration, 3),
        sample_rate=result.audio.rate,
        voice=result.voice,
        clone_id=result.options.clone_id,
        engine=result.engine,
        engine_voice=result.engine_voice,
        language=result.language,
        sentences=result.sentences,
        words=[
            WordRow(word=w.word, start=round(w.start, 3), end=round(w.end, 3)) for w in result.words or ()
        ],
        notes=list(result.notes),
        seconds=round(result.seconds, 6),
        provenance="on-device",
    )


async def speak(
    text: Annotated[
        str, Field(min_length=1, max_length=MAX_TTS_CHARS, description="What to say (50,000 characters).")
    ],
    language: Annotated[
        str, Field(min_length=2, max_length=16, description="Two-letter code: see list_voices.")
    ],
    ctx: Ctx,
    roots: ClientRoots,
    voice: Annotated[VoiceName, Field(description="One of the ten voices (list_voices).")] = "aria",
    emotion_preset: Annotated[EmotionPreset | None, Field(description="An emotion preset.")] = None,
    emotion: Annotated[EmotionInput | None, Field(description="Refines the preset (or neutral).")] = None,
    speed: Annotated[
        float, Field(ge=TTS_SPEED_MIN, le=TTS_SPEED_MAX, description="Speaking speed, 0.5 to 1.8.")
    ] = 1.0,
    studio: Annotated[
        bool, Field(description="Studio render: 48 kHz, -16 LUFS, sentence pauses and breaths (slower).")
    ] = False,
    output_path: Annotated[
        str | None,
        Field(max_length=4096, description="The WAV to write (must not exist); default: a fresh name."),
    ] = None,
    clone_id: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=64,
            description="A voice clone's id (dragoman voices clone list): its matched voice overrides voice.",
        ),
    ] = None,
) -> Annotated[CallToolResult, SpeakOutput]:
    """Speak a text on this device into a WAV file (16-bit mono) inside the allowed folders, with one of
    the ten voices in one of the 31 languages, an emotion preset and/or object, a speed and a studio mode.
    With clone_id, speaks in a voice clone's matched voice (a clone made by `dragoman voices clone add`).
    Answers the path, duration, voice, engine and word timings. Never overwrites a file. Sends progress per
    sentence when given a progress token; a cancelled call stops before its next sentence."""
    from dragoman.media.audio import wav_bytes
    from dragoman.speech.tts.clones import Clone, LocalCloneStore, synthesize_with_clone
    from dragoman.speech.tts.types import Emotion, SynthesisOptions

    state = state_of(ctx)
    client = paths.roots_from_uris(str(r.uri) for r in roots.roots) if roots is not None else None
    allowed = paths.allowed_roots(client, state.settings.local.allowed_dirs)
    try:
        options = SynthesisOptions(
            voice=voice,
            language=language,
            speed=speed,
            emotion_preset=emotion_preset,
            emotion=Emotion(**emotion.model_dump()) if emotion is not None else None,
            studio=studio,
        )
        chosen = paths.check_allowed(output_path, allowed) if output_path else None
        folder = paths.check_allowed(".", allowed)  # the first allowed folder (raises when none is)
        if chosen is not None and (chosen.exists() or chosen.is_symlink()):
            raise InvalidRequest(
                f"{chosen} already exists; speak never overwrites: choose another output_path"
            )
        clone: Clone | None = LocalCloneStore().get(clone_id) if clone_id is not None else None
    except DragomanError as exc:
        raise tool_error(exc) from exc
    context = job_context(ctx.report_progress)

    def work(synthesizer: Synthesizer) -> SpeakOutput:
        if clone is not None:  # the clone's matched voice adapted to its reference (overrides voice)
            result = synthesize_with_clone(synthesizer, text, options, clone, context)
        else:
            result = synthesizer.synthesize(text, options, context)
        target = chosen or _fresh_path(folder, result.voice, result.language)
        try:
            _write_new(target, wav_bytes(result.audio))
        except OSError as exc:
            raise InvalidRequest(f"could not write {target}: {exc.strerror or exc}") from exc
        return _speak_output(result, target)

    out = await _run_speech(ctx, work)
    text_out = (
        f"wrote {out.path} ({out.duration_seconds:.2f}s, {out.voice} in {out.language} by "
        f"{out.engine}:{out.engine_voice}{f', clone {out.clone_id}' if out.clone_id else ''})"
    )
    if out.notes:
        text_out += "\n\n[notes] " + " | ".join(out.notes)
    return answer(out, text_out)


async def list_voices(ctx: Ctx) -> Annotated[CallToolResult, VoicesOutput]:
    """The ten voices (gender, description), the 31 languages with the engines installed for each, which
    engine voice serves each voice in each language (standard and studio), the voices installed as models
    (Piper, Kokoro) with their licences, and the seven emotion presets."""
    catalogue = await _run_speech(ctx, lambda s: s.catalogue())
    out = VoicesOutput.model_validate({**catalogue, "provenance": "on-device"})
    served = [lang.code for lang in out.languages if lang.engines]
    text = (
        f"{len(out.voices)} voices ({', '.join(v.name for v in out.voices)}); {len(served)} of "
        f"{len(out.languages)} languages installed: {', '.join(served)}; emotions: {', '.join(out.emotions)}"
    )
    if out.models:
        shown = ", ".join(f"{m.engine_voice} ({m.license})" for m in out.models[:10])
        more = f" and {len(out.models) - 10} more" if len(out.models) > 10 else ""
        text += f"; voice models: {shown}{more}"
    return answer(out, text)


__all__ = ["list_voices", "speak"]
