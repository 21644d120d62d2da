"""Dubbing a video (issue 16): the same video, speaking another language.

:func:`dub_file` composes what exists, stage by stage (each stage's seconds in ``DubResult.stage_seconds``,
progress reported on one scale of :data:`~dragoman.pipelines.subtitles.PROGRESS_TOTAL`):

1. **probe**: typed errors for what is not media, too large or too long; a file with no audio stream is
   dubbed only from the user's own subtitles (over silence).
2. **recognise**: decode the first audio stream to 16 kHz and transcribe it with word timings, cut into cues
   (:func:`~dragoman.pipelines.subtitles.caption_track`); or read the user's SRT/VTT
   (``DubOptions.subtitles``); or take ``source_track`` (a batch recognises once).
3. **translate**: sentence by sentence (:func:`~dragoman.pipelines.subtitles.translate_track`: glossary,
   tier); a line is a sentence, its slot from its first cue's start to its last cue's end
   (:mod:`~dragoman.pipelines.dub.lines`).
4. **voices**: who speaks each line (:mod:`~dragoman.pipelines.dub.voices`: preset, match, clone).
5. **synthesise** and **fit**: each line rendered and fitted to its slot (:mod:`~dragoman.pipelines.dub.fit`),
   brought to the level of the original audio in its slot, and stored on disk at 48 kHz. Cancellation is
   checked before every line.
6. **mix**: the original ducked under the lines, the lines added, loudness measured, chunk by chunk
   (:mod:`~dragoman.pipelines.dub.mix`).
7. **mux**: ffmpeg (run as a program) writes the dubbed audio (AAC, ``NAME.<lang>.dub.m4a``) and the video
   (``NAME.<lang>.<ext>``, the input's container when it carries text subtitles (MP4, M4V, MOV, MKV, WebM),
   else Matroska): the video stream copied bit for bit, the dubbed audio first and default (tagged with the
   target language), the original audio kept as a second track (``keep_original``), subtitles of both
   languages. Subtitle files are written beside it: ``NAME.<src>.srt``, ``NAME.<lang>.srt``, ``.vtt``,
   ``.txt`` and the bilingual ``NAME.<src>-<lang>.srt``.

Progress messages start with the name of the stage under way (``"recognise"``, ``"translate: ..."``,
``"synthesise: line 3 of 40"``, ``"mix"``, ``"mux"``; :data:`~dragoman.pipelines.dub.types.STAGES`), then
``"done"``; cancellation is checked at every report and before every line.

Every file is placed together or none (:func:`~dragoman.documents.base.atomic_output`); an existing file is
refused before any work unless ``overwrite``. Media with no speech gives the original back (its streams
copied, no subtitles muxed) with a ``no_speech`` warning.

:func:`dub_batch` dubs into several targets with one recognition.
"""

from __future__ import annotations

import contextlib
import math
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dragoman.documents.base import atomic_output
from dragoman.errors import DragomanError, InvalidRequest, LimitExceeded
from dragoman.languages.catalogue import get as get_language
from dragoman.languages.catalogue import resolve
from dragoman.media.audio import Audio
from dragoman.media.ffmpeg import SUBTITLE_CODECS, iso639_2, run_ffmpeg
from dragoman.media.subtitle_files import render
from dragoman.pipelines.dub.fit import fit_line, room_for
from dragoman.pipelines.dub.lines import Slot, read_subtitle_file, slots_from_tracks
from dragoman.pipelines.dub.mix import (
    CHUNK_SECONDS,
    MIX_RATE,
    LineStore,
    PlacedLine,
    gain_to,
    limit_file,
    mix_to_file,
)
from dragoman.pipelines.dub.types import DubLine, DubOptions, DubOutputs, DubResult
from dragoman.pipelines.dub.voices import VoiceChoice, Voicer
from dragoman.pipelines.subtitles import (
    MAX_MEDIA_SECONDS,
    OVERWRITE_HINT,
    PROGRESS_TOTAL,
    SentenceTranslator,
    SubtitleTrack,
    caption_track,
    check_folder,
    stage_context,
    target_code,
    translate_track,
)
from dragoman.progress import JobContext

if TYPE_CHECKING:
    from dragoman.media.probe import MediaInfo
    from dragoman.speech.asr import Recognizer, TranscribeOptions
    from dragoman.speech.tts.clones import LocalCloneStore
    from dragoman.speech.tts.synth import Synthesizer

#: ffmpeg muxer for each video container the dub writes.
MUXERS: Mapping[str, str] = {".mp4": "mp4", ".m4v": "mp4", ".mov": "mov", ".mkv": "matroska", ".webm": "webm"}
#: The dubbed audio's bit rate and ffmpeg's AAC encoder options (its fast coder: the default "twoloop"
#: takes 2.5 times as long for no audible gain at this rate), and the seconds any one ffmpeg run may take.
AUDIO_BITRATE = "192k"
AAC_OPTIONS: tuple[str, ...] = ("-aac_coder", "fast", "-b:a", AUDIO_BITRATE)
FFMPEG_TIMEOUT = 3600.0
#: A dub line's level is brought to the original's in its slot, within this many dB; with no original
#: audio, to :data:`DEFAULT_LINE_DBFS` RMS. Its peak is kept under :data:`LINE_PEAK`.
LINE_GAIN_RANGE_DB = (-12.0, 12.0)
DEFAULT_LINE_DBFS = -20.0
LINE_PEAK = 0.95
#: Where each stage ends on the progress scale.
_STAGE_ENDS: Mapping[str, int] = {
    "probe": 10,
    "recognise": 450,
    "translate": 550,
    "voices": 580,
    "synthesise": 850,
    "mix": 950,
    "mux": PROGRESS_TOTAL,
}
#: Where decoding ends and recognition starts on the progress scale.
_DECODED = 40


@dataclass(frozen=True)
class SourceTrack:
    """What recognition (or the user's subtitles) gave: the track and Whisper's confidence in its language."""

    track: SubtitleTrack
    language_probability: float = 1.0
    warnings: tuple[str, ...] = ()


class _Clock:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._at = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.seconds[stage] = self.seconds.get(stage, 0.0) + now - self._at
        self._at = now

    def restart(self) -> None:
        self._at = time.perf_counter()

    def add(self, stage: str, seconds: float) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds


def _quiet(context: JobContext) -> JobContext:
    """``context``'s cancellation and deadline without its progress (a stage reports its own)."""
    return JobContext(cancel=context.cancel, deadline=context.deadline)


def _stage(context: JobContext, stage: str, before: str) -> JobContext:
    return stage_context(context, _STAGE_ENDS[before], _STAGE_ENDS[stage], stage)


def _mark(context: JobContext, stage: str, message: str) -> None:
    context.report(_STAGE_ENDS[stage], PROGRESS_TOTAL, message)


# ----- names ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Plan:
    video: Path | None
    audio: Path
    subtitles: dict[str, Path]
    spared: tuple[Path, ...] = ()  # outputs left out: they would land on the user's source subtitles


def video_suffix(media: Path) -> str:
    """The dubbed video's suffix: the input's when it carries text subtitles, else ``.mkv``."""
    suffix = media.suffix.lower()
    return suffix if suffix in MUXERS and suffix in SUBTITLE_CODECS else ".mkv"


def planned_files(
    media: Path,
    language: str,
    source_language: str | None,
    *,
    has_video: bool,
    out_dir: str | Path | None = None,
    source_subtitles: bool = True,
    keep: Path | None = None,
) -> _Plan:
    """The files a dub writes (module docstring); ``source_language`` None while it is not known (the
    files named with it are then left out). A subtitle file that would land on ``keep`` (the user's own
    source subtitles, ``DubOptions.subtitles``: ``talk.en.srt`` as ``dragoman subtitles`` names it) is left
    out: the user's input is never written over (:func:`spared`)."""
    folder = Path(out_dir).expanduser().absolute() if out_dir is not None else media.parent
    stem = media.stem
    video = folder / f"{stem}.{language}{video_suffix(media)}" if has_video else None
    subtitles = {
        f"srt:{language}": folder / f"{stem}.{language}.srt",
        f"vtt:{language}": folder / f"{stem}.{language}.vtt",
        f"txt:{language}": folder / f"{stem}.{language}.txt",
    }
    if source_language is not None:
        if source_subtitles:
            subtitles[f"srt:{source_language}"] = folder / f"{stem}.{source_language}.srt"
        subtitles["bilingual_srt"] = folder / f"{stem}.{source_language}-{language}.srt"
    left_out: tuple[Path, ...] = ()
    if keep is not None:
        left_out = tuple(p for p in subtitles.values() if _same_file(p, keep))
        subtitles = {key: p for key, p in subtitles.items() if p not in left_out}
    return _Plan(video, folder / f"{stem}.{language}.dub.m4a", subtitles, left_out)


def _same_file(a: Path, b: Path) -> bool:
    return a.expanduser().absolute().resolve() == b.expanduser().absolute().resolve()


def spared(plan: _Plan) -> str | None:
    """The warning that the user's source subtitles are left as they are (not written over by the dub's
    source-language SRT, which would bear their name), or None."""
    if not plan.spared:
        return None
    names = ", ".join(p.name for p in plan.spared)
    return (
        f"source_subtitles: {names} is the source subtitles given; it is left as it is, not written over "
        "by the dub's source-language subtitles"
    )


def _paths(plan: _Plan) -> list[Path]:
    return [*([plan.video] if plan.video else []), plan.audio, *plan.subtitles.values()]


def refuse_existing(
    paths: Sequence[Path], media: Path, *, overwrite: bool = False, hint: str = OVERWRITE_HINT
) -> None:
    """InvalidRequest naming the first of ``paths`` that is the media itself, a folder, or (unless
    ``overwrite``; ``hint`` says how to ask for it) a file that exists: checked before any work."""
    for path in paths:
        if path.resolve() == media.resolve():
            raise InvalidRequest(f"the output {path} is the media file; the input is never overwritten")
        if path.is_dir():
            raise InvalidRequest(f"{path} is a folder; it cannot be replaced by a dub's file")
        if not overwrite and (path.exists() or path.is_symlink()):
            raise InvalidRequest(
                f"{path} already exists; a dub never overwrites a file: {hint} to replace it, "
                "or choose another output folder"
            )


# ----- the source track ------------------------------------------------------------------------------------
def _spoken(code: str) -> str:
    """A language as Whisper and the file names call it: its primary subtag (``en-US`` -> ``en``)."""
    return code.split("-")[0].lower()


def recognise_source(
    audio: Audio,
    recognizer: Recognizer,
    options: TranscribeOptions,
    context: JobContext | None = None,
) -> SourceTrack:
    """``audio`` (16 kHz) transcribed and cut into cues."""
    transcript = recognizer.transcribe(audio, options, context)
    return SourceTrack(caption_track(transcript), transcript.language_probability, tuple(transcript.warnings))


def subtitles_source(path: Path, source: str, engine: SentenceTranslator | None) -> SourceTrack:
    """The user's SRT/VTT as the source track; its language ``source``, or detected from its text."""
    from dragoman.media.cues import Cue

    cues: list[Cue] = read_subtitle_file(path)
    if source not in ("", "auto"):
        language = _spoken(source)
        probability = 1.0
    else:
        detect = getattr(engine, "detect", None)
        found = detect(" ".join(c.text for c in cues[:200])) if detect is not None and cues else None
        flores = getattr(found, "flores", None)
        if flores is None:
            raise InvalidRequest(
                f"the language of {path.name} could not be told from its text: name it (source language)"
            )
        language = _spoken(get_language(flores).bcp47)
        probability = float(getattr(found, "confidence", 1.0) or 1.0)
    track = SubtitleTrack(language, tuple(cues), language, False)
    return SourceTrack(track, probability)


def _same_language(a: str, b: str) -> bool:
    try:
        return resolve(a) == resolve(b)
    except DragomanError:
        return _spoken(a) == _spoken(b)


# ----- lines -----------------------------------------------------------------------------------------------
def _rms(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(samples.astype(np.float64) ** 2))) if len(samples) else 0.0


def level_matched(line: Audio, original: Audio | None, slot: Slot) -> Audio:
    """``line`` at the RMS level of ``original`` in ``slot`` (within :data:`LINE_GAIN_RANGE_DB`), or at
    :data:`DEFAULT_LINE_DBFS` without an original; peaks under :data:`LINE_PEAK`."""
    own = _rms(line.samples)
    if own <= 0:
        return line
    target = 10 ** (DEFAULT_LINE_DBFS / 20)
    if original is not None:
        lo = max(0, round(slot.start * original.rate))
        hi = min(len(original.samples), round(slot.end * original.rate))
        heard = _rms(original.samples[lo:hi])
        if heard > 0:
            target = heard
    gain_db = 20 * math.log10(target / own)
    gain_db = min(max(gain_db, LINE_GAIN_RANGE_DB[0]), LINE_GAIN_RANGE_DB[1])
    factor = 10 ** (gain_db / 20)
    peak = float(np.max(np.abs(line.samples))) * factor
    if peak > LINE_PEAK:
        factor *= LINE_PEAK / peak
    return Audio((line.samples * np.float32(factor)).astype(np.float32), line.rate)


def _voice_lines(
    slots: Sequence[Slot],
    voicer: Voicer,
    original: Audio | None,
    options: DubOptions,
    duration: float,
    store: LineStore,
    clock: _Clock,
    context: JobContext,
) -> tuple[list[DubLine], list[PlacedLine]]:
    choices = voicer.choose(slots, original, _quiet(context))
    clock.lap("voices")
    stage = _stage(context, "synthesise", "voices")
    quiet = _quiet(context)
    lines: list[DubLine] = []
    placed: list[PlacedLine] = []
    for k, (slot, choice) in enumerate(zip(slots, choices, strict=True)):
        stage.report(k, len(slots), f"line {k + 1} of {len(slots)}")
        next_start = slots[k + 1].start if k + 1 < len(slots) else None

        def speak(speed: float, text: str = slot.text, voice: VoiceChoice = choice) -> Audio:
            return voicer.render(text, voice, speed, quiet)

        fitted = fit_line(speak, slot.seconds, room_for(slot.start, slot.end, next_start, duration), options)
        begun = time.perf_counter()
        audio = level_matched(fitted.audio, original, slot)
        placed.append(store.add(slot.start, audio))
        end = slot.start + audio.duration
        lines.append(
            DubLine(
                index=slot.index,
                start=slot.start,
                end=slot.end,
                source_text=slot.source_text,
                text=slot.text,
                voice=choice.voice,
                gender=choice.gender,
                f0=choice.f0,
                speed=fitted.speed,
                stretch=fitted.stretch,
                placed_start=slot.start,
                placed_end=end,
                beyond_natural=fitted.beyond_natural,
                overlaps=next_start is not None and end > next_start,
            )
        )
        clock.add("synthesise", fitted.render_seconds)
        clock.add("fit", fitted.stretch_seconds + time.perf_counter() - begun)
    stage.report(len(slots), max(1, len(slots)), "lines voiced")
    clock.restart()  # the loop's time is in synthesise and fit already
    return lines, placed


def _line_warnings(lines: Sequence[DubLine], options: DubOptions) -> list[str]:
    warnings: list[str] = []
    beyond = [line.index for line in lines if line.beyond_natural]
    if beyond:
        warnings.append(
            f"compressed: {len(beyond)} line(s) had to be compressed beyond the natural speed range "
            f"(×{options.natural_speed[1]:g}): {_indexes(beyond)}"
        )
    overlapping = [line.index for line in lines if line.overlaps]
    if overlapping:
        warnings.append(
            f"overlap: {len(overlapping)} line(s) still run into the next line after compression "
            f"by ×{options.max_stretch:g}: {_indexes(overlapping)}"
        )
    return warnings


def _indexes(indexes: Sequence[int], shown: int = 20) -> str:
    text = ", ".join(str(i) for i in indexes[:shown])
    return text + (f" and {len(indexes) - shown} more" if len(indexes) > shown else "")


# ----- ffmpeg ----------------------------------------------------------------------------------------------
def _raw_input(raw: Path) -> list[str]:
    return ["-f", "f32le", "-ar", str(MIX_RATE), "-ac", "1", "-i", str(raw)]


def encode_audio(raw: Path, out: Path, language: str, context: JobContext) -> None:
    """The mix (raw float32, its gain and true-peak limit already applied) as AAC in an M4A at ``out``."""
    args = ["-y", *_raw_input(raw), "-c:a", "aac", *AAC_OPTIONS]
    args += ["-metadata:s:a:0", f"language={iso639_2(language)}", "-f", "ipod", str(out)]
    run_ffmpeg(args, timeout=FFMPEG_TIMEOUT, context=context)


def mux_video(
    media: Path,
    info: MediaInfo,
    raw: Path,
    encoded: Path,
    out: Path,
    *,
    language: str,
    source_language: str,
    subtitles: Sequence[tuple[str, Path]],
    keep_original: bool,
    context: JobContext,
) -> None:
    """``media``'s video streams copied, the dub as the first, default audio track (``encoded``, the AAC
    already made, copied; WebM holds no AAC: there ``raw`` is encoded to Opus), the original audio copied as
    the second (``keep_original``), ``subtitles`` ((language, SRT)) added."""
    suffix = video_suffix(media)
    muxer = MUXERS[suffix]
    opus = suffix == ".webm"
    args = ["-y", "-i", str(media), *(_raw_input(raw) if opus else ["-i", str(encoded)])]
    for _, path in subtitles:
        args += ["-i", str(path)]
    args += ["-map", "0:v", "-map", "1:a"]
    original = keep_original and info.has_audio
    if original:
        args += ["-map", "0:a:0"]
    for k in range(len(subtitles)):
        args += ["-map", f"{k + 2}:s:0"]
    args += ["-c:v", "copy"]
    if opus:
        args += ["-c:a:0", "libopus", "-b:a:0", AUDIO_BITRATE]
    else:
        args += ["-c:a:0", "copy"]
    args += ["-metadata:s:a:0", f"language={iso639_2(language)}", "-disposition:a:0", "default"]
    if original:
        args += ["-c:a:1", "copy", "-metadata:s:a:1", f"language={iso639_2(source_language)}"]
        args += ["-disposition:a:1", "0"]
    if subtitles:
        args += ["-c:s", SUBTITLE_CODECS[suffix]]
        for k, (lang, _) in enumerate(subtitles):
            args += [f"-metadata:s:s:{k}", f"language={iso639_2(lang)}"]
    # the new audio's encoder delay is left as a negative start (edit list, codec delay) rather than every
    # stream being shifted later by it: the copied video keeps its timestamps and the file its duration
    args += ["-avoid_negative_ts", "disabled", "-t", f"{info.duration:.3f}", "-f", muxer, str(out)]
    run_ffmpeg(args, timeout=FFMPEG_TIMEOUT, context=context)


def copy_original(media: Path, out: Path, context: JobContext) -> None:
    """``media``'s video and audio streams copied into ``out`` (media with no speech)."""
    muxer = MUXERS[video_suffix(media)]
    args = ["-y", "-i", str(media), "-map", "0:v", "-map", "0:a?", "-c", "copy", "-f", muxer, str(out)]
    run_ffmpeg(args, timeout=FFMPEG_TIMEOUT, context=context)


# ----- the dub ---------------------------------------------------------------------------------------------
def dub_file(
    media: str | Path,
    options: DubOptions,
    *,
    synthesizer: Synthesizer,
    recognizer: Recognizer | None = None,
    engine: SentenceTranslator | None = None,
    out_dir: str | Path | None = None,
    overwrite: bool = False,
    context: JobContext | None = None,
    clone_store: LocalCloneStore | None = None,
    source_track: SourceTrack | None = None,
    source_subtitles: bool = True,
    transcribe_options: TranscribeOptions | None = None,
    max_bytes: int | None = None,
    max_seconds: float | None = MAX_MEDIA_SECONDS,
    hint: str = OVERWRITE_HINT,
    engine_factory: Callable[[], SentenceTranslator] | None = None,
) -> DubResult:
    """Dub ``media`` into ``options.target`` (module docstring); answers what was done and written.

    ``source_track`` skips recognition (a batch recognises once: :func:`dub_batch`); ``source_subtitles``
    False leaves out ``NAME.<src>.srt`` (a batch writes it once). ``engine`` may be None when
    ``engine_factory`` makes it on first need (or no translation is needed)."""
    from dragoman.media.decode import decode_audio, iter_audio
    from dragoman.media.probe import probe, require_audio

    context = context or JobContext()
    clock = _Clock()
    path = Path(media).expanduser().absolute()
    check_folder(out_dir)
    language = target_code(options.target)
    voicer = Voicer(synthesizer, _spoken(language), options, clone_store=clone_store)
    context.check()
    info = probe(path, max_bytes=max_bytes)
    if options.subtitles is None and source_track is None:
        require_audio(info)
    if max_seconds is not None and info.duration > max_seconds:
        raise LimitExceeded(
            f"{path.name} lasts {info.duration / 60:.0f} minutes; at most {max_seconds / 60:.0f} minutes "
            "are dubbed at a time: cut it into parts (for example with ffmpeg -ss/-t)"
        )
    given = None if options.source in ("", "auto") else _spoken(options.source)
    known = source_track.track.language if source_track is not None else given
    plan = planned_files(
        path,
        language,
        known,
        has_video=info.has_video,
        out_dir=out_dir,
        source_subtitles=source_subtitles,
        keep=options.subtitles,
    )
    refuse_existing(_paths(plan), path, overwrite=overwrite, hint=hint)
    _mark(context, "probe", "recognise")
    clock.lap("probe")

    # ----- recognise (or read the user's subtitles) -----
    original: Audio | None = None
    if info.has_audio:
        original = decode_audio(
            path,
            rate=16000,
            max_seconds=max_seconds,
            context=stage_context(context, _STAGE_ENDS["probe"], _DECODED, "recognise"),
        )
    if source_track is None:
        if options.subtitles is not None:
            source_track = subtitles_source(options.subtitles, options.source, engine)
        else:
            from dragoman.speech.asr import TranscribeOptions

            if recognizer is None:
                raise InvalidRequest("dubbing without subtitles needs the speech recogniser")
            assert original is not None
            wanted = transcribe_options or TranscribeOptions(language=options.source or "auto")
            source_track = recognise_source(
                original,
                recognizer,
                wanted,
                stage_context(context, _DECODED, _STAGE_ENDS["recognise"], "recognise"),
            )
    source = source_track.track
    spoken = source.language
    plan = planned_files(
        path,
        language,
        spoken,
        has_video=info.has_video,
        out_dir=out_dir,
        source_subtitles=source_subtitles,
        keep=options.subtitles,
    )
    refuse_existing(_paths(plan), path, overwrite=overwrite, hint=hint)
    _mark(context, "recognise", "translate")
    clock.lap("recognise")

    # ----- translate -----
    warnings: list[str] = [*source_track.warnings]
    kept = spared(plan)
    if kept is not None:
        warnings.append(kept)
    if _same_language(options.target, spoken):
        translated = replace(source, language=language, translated=True)
        warnings.append(f"same_language: the speech is already {spoken}; it is re-voiced, not translated")
    elif not source.cues:
        translated = SubtitleTrack(language, (), spoken, True)
    else:
        translator = engine if engine is not None else engine_factory() if engine_factory else None
        if translator is None:
            raise InvalidRequest("dubbing needs the translation engine")
        translated = translate_track(
            source,
            translator,
            options.target,
            tier=options.tier,
            glossary=options.glossary,
            context=_stage(context, "translate", "recognise"),
        )
    warnings.extend(w for w in translated.warnings if w not in warnings)
    slots = slots_from_tracks(source, translated)
    _mark(context, "translate", "voices")
    clock.lap("translate")

    with tempfile.TemporaryDirectory(prefix="dragoman-dub-") as scratch:
        folder = Path(scratch)
        store = LineStore(folder / "lines.f32")
        try:
            lines, placed = _voice_lines(
                slots, voicer, original, options, info.duration, store, clock, context
            )
            original = None  # the 16 kHz audio is not needed any more: the mix streams the file
            warnings.extend(_line_warnings(lines, options))
            if not lines:
                warnings.append("no_speech: no speech was found; the output is the original, unchanged")
            # ----- mix -----
            _mark(context, "synthesise", "mix")
            raw = folder / "mix.f32"
            chunks = (
                iter_audio(path, MIX_RATE, CHUNK_SECONDS, context=_quiet(context)) if info.has_audio else None
            )
            measured = mix_to_file(
                chunks,
                round(info.duration * MIX_RATE),
                placed,
                store,
                raw,
                duck_db=options.duck_db,
                context=_quiet(context),
            )
        finally:
            store.close()
        gain_db = gain_to(measured, options.loudness_lufs, lines=len(lines))
        # the gain applied and the true peak held at -1 dBTP (mix.limit_file), streamed, before encoding
        limited = folder / "mix.limited.f32"
        limit_file(raw, limited, gain_db, context=_quiet(context))
        raw.unlink()
        raw = limited
        _mark(context, "mix", "mux")
        clock.lap("mix")

        # ----- mux and write, all or nothing -----
        texts = _subtitle_texts(source, translated, plan, spoken, language)
        srt_inputs: list[tuple[str, Path]] = []
        if lines:  # the subtitles muxed into the video: the target's first, then the source's
            pairs = [(language, translated)] + ([] if spoken == language else [(spoken, source)])
            for lang, track in pairs:
                srt = folder / f"{lang}.srt"
                srt.write_text(render("srt", list(track.cues)), encoding="utf-8")
                srt_inputs.append((lang, srt))
        quiet = _quiet(context)
        with contextlib.ExitStack() as stack:
            encoded = stack.enter_context(atomic_output(plan.audio, overwrite=overwrite))
            encode_audio(raw, encoded, language, quiet)
            if plan.video is not None:
                partial = stack.enter_context(atomic_output(plan.video, overwrite=overwrite))
                if lines:
                    mux_video(
                        path,
                        info,
                        raw,
                        encoded,
                        partial,
                        language=language,
                        source_language=spoken,
                        subtitles=srt_inputs,
                        keep_original=options.keep_original,
                        context=quiet,
                    )
                else:
                    copy_original(path, partial, quiet)
            for key, target in plan.subtitles.items():
                partial = stack.enter_context(atomic_output(target, overwrite=overwrite))
                partial.write_bytes(texts[key].encode("utf-8"))
            context.check()
    _mark(context, "mux", "done")
    clock.lap("mux")
    outputs = DubOutputs(video=plan.video, audio=plan.audio, subtitles=dict(plan.subtitles))
    return DubResult(
        source_language=spoken,
        language_probability=source_track.language_probability,
        target=language,
        duration=info.duration,
        lines=tuple(lines),
        outputs=outputs,
        stage_seconds=dict(clock.seconds),
        warnings=tuple(dict.fromkeys(warnings)),
        provenance=translated.provenance,
    )


def _subtitle_texts(
    source: SubtitleTrack, translated: SubtitleTrack, plan: _Plan, spoken: str, language: str
) -> dict[str, str]:
    texts: dict[str, str] = {}
    for key in plan.subtitles:
        fmt, _, lang = key.partition(":")
        if key == "bilingual_srt":
            texts[key] = render("bilingual_srt", list(translated.cues), source_cues=list(source.cues))
        else:
            track = translated if lang == language else source
            texts[key] = render(fmt, list(track.cues))
    return texts


def dub_batch(
    media: str | Path,
    targets: Sequence[str],
    options: DubOptions,
    *,
    synthesizer: Synthesizer,
    recognizer: Recognizer | None = None,
    engine: SentenceTranslator | None = None,
    out_dir: str | Path | None = None,
    overwrite: bool = False,
    context: JobContext | None = None,
    clone_store: LocalCloneStore | None = None,
    transcribe_options: TranscribeOptions | None = None,
    max_bytes: int | None = None,
    max_seconds: float | None = MAX_MEDIA_SECONDS,
    hint: str = OVERWRITE_HINT,
) -> list[DubResult]:
    """``media`` dubbed into each of ``targets`` (``options.target`` is replaced by each), recognised once;
    the source-language SRT is written with the first target's files."""
    from dragoman.media.decode import decode_audio
    from dragoman.media.probe import probe, require_audio

    wanted = list(dict.fromkeys(target_code(t) for t in targets))
    if not wanted:
        raise InvalidRequest("name at least one target language")
    context = context or JobContext()
    path = Path(media).expanduser().absolute()
    check_folder(out_dir)
    for target in wanted:  # a voice for every language, before any work
        Voicer(synthesizer, _spoken(target), replace(options, target=target), clone_store=clone_store)
    info = probe(path, max_bytes=max_bytes)
    given = None if options.source in ("", "auto") else _spoken(options.source)
    for k, target in enumerate(wanted):  # every file the batch writes that can be named yet
        plan = planned_files(
            path,
            target,
            given,
            has_video=info.has_video,
            out_dir=out_dir,
            source_subtitles=k == 0,
            keep=options.subtitles,
        )
        refuse_existing(_paths(plan), path, overwrite=overwrite, hint=hint)
    shared: SourceTrack
    if options.subtitles is not None:
        shared = subtitles_source(options.subtitles, options.source, engine)
    else:
        from dragoman.speech.asr import TranscribeOptions

        if recognizer is None:
            raise InvalidRequest("dubbing without subtitles needs the speech recogniser")
        require_audio(info)
        audio = decode_audio(path, rate=16000, max_seconds=max_seconds, context=_quiet(context))
        wanted_options = transcribe_options or TranscribeOptions(language=options.source or "auto")
        shared = recognise_source(
            audio, recognizer, wanted_options, stage_context(context, 0, 300, "recognise")
        )
        del audio
    for k, target in enumerate(wanted):  # and those named with the spoken language, now known
        plan = planned_files(
            path,
            target,
            shared.track.language,
            has_video=info.has_video,
            out_dir=out_dir,
            source_subtitles=k == 0,
            keep=options.subtitles,
        )
        refuse_existing(_paths(plan), path, overwrite=overwrite, hint=hint)
    results: list[DubResult] = []
    span = (PROGRESS_TOTAL - 300) / len(wanted)
    for k, target in enumerate(wanted):
        child = stage_context(
            context, 300 + round(k * span), 300 + round((k + 1) * span), f"dubbing into {target}"
        )
        results.append(
            dub_file(
                path,
                replace(options, target=target),
                synthesizer=synthesizer,
                recognizer=recognizer,
                engine=engine,
                out_dir=out_dir,
                overwrite=overwrite,
                context=child,
                clone_store=clone_store,
                source_track=shared,
                source_subtitles=k == 0,
                max_bytes=max_bytes,
                max_seconds=max_seconds,
                hint=hint,
            )
        )
    return results
