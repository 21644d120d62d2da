"""Subtitles from media (issue 15): recognise the speech, cut it into cues people can read, translate the
cues sentence by sentence, and write ``NAME.<lang>.<ext>`` files beside the media.

The steps, each usable on its own (the CLI, the MCP tools and the hosted jobs compose them):

- :func:`recognise_file`: probe the file (typed errors for what is not media, has no audio, is empty or too
  long), decode its first audio stream to 16 kHz mono, and transcribe it (word timestamps).
- :func:`caption_track`: the transcript's words as cues (:func:`dragoman.media.cues.build_cues`, whose
  rules are documented there): the captions in the spoken language.
- :func:`translate_track`: consecutive cues merged into sentences (a cue ending with ``.``, ``!``, ``?``,
  ``…`` or a pause of :data:`SENTENCE_PAUSE` seconds ends one; at most :data:`MAX_SENTENCE_CUES` cues and
  :data:`MAX_SENTENCE_CHARS` characters), the sentences translated in one engine call (glossary, tier,
  provenance and warnings as everywhere), each translation laid back over its cues in proportion to their
  share of the source text (cut at word breaks, between characters in scripts written without spaces; see
  :func:`dragoman.documents.subtitles.distribute`) and wrapped again into lines. Timing is never changed:
  the translated track has the same cues at the same times, so ``bilingual_srt`` pairs each cue with its
  own translation. A sentence whose translation has too few words to give each of its cues one is
  translated cue by cue instead.
- :func:`write_outputs`: every file rendered first, then written to temporaries beside their destinations
  and renamed into place together, all or none (:func:`dragoman.documents.base.atomic_output`); an existing
  file is never replaced unless ``overwrite`` (and never touched when it is refused).

:func:`make_subtitles` runs the whole thing with one progress scale (0 to :data:`PROGRESS_TOTAL`) over the
stages, checking cancellation between them and inside each (decoding, recognition between segments,
translation between chunks).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from dragoman.documents.base import atomic_output
from dragoman.documents.subtitles import distribute
from dragoman.errors import DragomanError, InvalidRequest, LimitExceeded
from dragoman.languages.catalogue import get as get_language
from dragoman.languages.catalogue import resolve
from dragoman.limits import Provenance, Tier
from dragoman.media.cues import Cue, CueRules, Word, build_cues, ends_sentence, join_texts, wrap_lines
from dragoman.media.subtitle_files import SUBTITLE_FORMATS, render
from dragoman.progress import JobContext
from dragoman.translation.case import match_first_case
from dragoman.translation.types import GlossaryEntry, TranslateOptions, TranslationResult

if TYPE_CHECKING:
    from dragoman.media.probe import MediaInfo
    from dragoman.speech.asr import Recognizer, TranscribeOptions, Transcript

#: A cue followed by at least this much silence ends its sentence, whatever its punctuation (seconds).
SENTENCE_PAUSE = 1.5
#: The most cues, and characters, one sentence is translated as (a run-on transcript is cut there).
MAX_SENTENCE_CUES = 6
MAX_SENTENCE_CHARS = 500
#: The longest media the local front doors recognise (seconds): 16 kHz float32 audio of 3 hours is 690 MB.
MAX_MEDIA_SECONDS = 3 * 3600.0
#: How an existing file's refusal says to replace it (the CLI says ``give --overwrite``).
OVERWRITE_HINT = "pass overwrite=true"
#: The progress scale of :func:`make_subtitles` (every stage maps its own counts onto a part of it).
PROGRESS_TOTAL = 1000
#: Extensions of the files each format writes (bilingual SRT is named ``NAME.<src>-<tgt>.srt``).
EXTENSIONS: Mapping[str, str] = {"srt": "srt", "vtt": "vtt", "txt": "txt", "bilingual_srt": "srt"}


class SentenceTranslator(Protocol):
    """What :func:`translate_track` needs of the engine (:class:`dragoman.translation.engine.Engine`)."""

    def translate_many(
        self, texts: Sequence[str], options: TranslateOptions, *, context: JobContext | None = None
    ) -> list[TranslationResult]: ...


@dataclass(frozen=True)
class SubtitleTrack:
    """Cues in one language. ``language`` is a BCP-47 code (Whisper's for the spoken language); a translated
    track keeps its source track's timing cue for cue and names the language it came from."""

    language: str
    cues: tuple[Cue, ...]
    source_language: str
    translated: bool
    provenance: Provenance = "on-device"
    route: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class SubtitleResult:
    """What :func:`make_subtitles` did: the media, what was heard, the tracks and the files written."""

    media: MediaInfo
    transcript: Transcript
    tracks: tuple[SubtitleTrack, ...]
    paths: tuple[Path, ...]
    seconds: float
    warnings: tuple[str, ...] = ()
    provenance: Provenance = "on-device"
    skipped: tuple[str, ...] = field(default=())  # targets not produced (the spoken language itself)


# ----- progress ----------------------------------------------------------------------------------------
def stage_context(context: JobContext | None, start: int, end: int, label: str) -> JobContext:
    """A context whose progress maps one stage's own (done, total) onto ``start..end`` of
    :data:`PROGRESS_TOTAL`, never going back (a route's second hop restarts its count); cancellation and
    the deadline are the caller's. A report at the value already reached is passed on when it names another
    stage (the part of its message before the first ``:``; a dub's "mix" after its last line)."""
    outer = context or JobContext()
    best = [start - 1]  # the stage's first report is passed on, even at its start
    last = [""]  # the stage named by the last report passed on

    def progress(done: int, total: int, message: str) -> None:
        share = min(1.0, done / total) if total > 0 else 0.0
        value = start + round((end - start) * share)
        named = message.split(":", 1)[0].strip()
        if value > best[0] or (value == best[0] and named != last[0]):
            best[0] = value
            last[0] = named
            shown = message if not label or message in ("", label) else f"{label}: {message}"
            outer.progress(value, PROGRESS_TOTAL, shown or label)

    return JobContext(progress, outer.cancel, outer.deadline)


def _mark(context: JobContext | None, value: int, message: str) -> None:
    if context is not None:
        context.report(value, PROGRESS_TOTAL, message)


# ----- recognition -------------------------------------------------------------------------------------
def recognise_file(
    path: str | Path,
    recognizer: Recognizer,
    options: TranscribeOptions,
    context: JobContext | None = None,
    *,
    max_bytes: int | None = None,
    max_seconds: float | None = MAX_MEDIA_SECONDS,
) -> tuple[MediaInfo, Transcript]:
    """Probe, decode and transcribe ``path``: typed errors for a file that is not media, has no audio
    stream, is empty, is over ``max_bytes`` or lasts longer than ``max_seconds``. Progress: decoding on
    0-100 of :data:`PROGRESS_TOTAL`, recognition on 100-1000 (the caller may map it elsewhere)."""
    from dragoman.media.decode import decode_audio
    from dragoman.media.probe import probe

    context = context or JobContext()
    context.check()
    media = Path(path).expanduser().absolute()
    info = probe(media, max_bytes=max_bytes)
    _check_media(info, max_seconds)
    context.report(0, PROGRESS_TOTAL, "decoding")
    audio = decode_audio(
        media, rate=16000, max_seconds=max_seconds, context=stage_context(context, 0, 100, "")
    )
    context.report(100, PROGRESS_TOTAL, "recognising")
    transcript = recognizer.transcribe(audio, options, stage_context(context, 100, PROGRESS_TOTAL, ""))
    return info, transcript


def _check_media(info: MediaInfo, max_seconds: float | None) -> None:
    from dragoman.media.probe import require_audio

    require_audio(info)  # NoAudioStream; probe has refused what is not media, empty or too large
    if max_seconds is not None and info.duration > max_seconds:
        raise LimitExceeded(
            f"{info.path.name} lasts {info.duration / 60:.0f} minutes; at most {max_seconds / 60:.0f} "
            "minutes are recognised at a time: cut it into parts (for example with ffmpeg -ss/-t)"
        )


# ----- captions ----------------------------------------------------------------------------------------
def transcript_words(transcript: Transcript) -> list[Word]:
    """The transcript's words; a segment without word timings (word_timestamps off) becomes words spread
    evenly over its time, so it still makes cues."""
    words: list[Word] = []
    for segment in transcript.segments:
        if segment.words:
            words.extend(segment.words)
            continue
        parts = segment.text.split()
        if not parts:
            continue
        step = max(segment.end - segment.start, 0.0) / len(parts)
        for k, part in enumerate(parts):
            start = segment.start + k * step
            words.append(Word(text=part, start=start, end=start + step, probability=1.0))
    return words


def caption_track(transcript: Transcript, rules: CueRules | None = None) -> SubtitleTrack:
    """The transcript as cues in the spoken language (:func:`~dragoman.media.cues.build_cues`)."""
    cues = build_cues(transcript_words(transcript), rules or CueRules())
    return SubtitleTrack(
        language=transcript.language,
        cues=tuple(cues),
        source_language=transcript.language,
        translated=False,
        provenance="on-device",
        warnings=tuple(transcript.warnings),
    )


# ----- translation -------------------------------------------------------------------------------------
def sentence_groups(cues: Sequence[Cue]) -> list[list[int]]:
    """The indexes of ``cues`` in runs translated as one text: a run ends with a cue that ends a sentence,
    one followed by a pause of :data:`SENTENCE_PAUSE` seconds or more, or at the bounds. Linear."""
    groups: list[list[int]] = []
    size = 0
    for index, cue in enumerate(cues):
        text = cue.text
        if groups:
            last = cues[groups[-1][-1]]
            if (
                not ends_sentence(last.text)
                and cue.start - last.end < SENTENCE_PAUSE
                and len(groups[-1]) < MAX_SENTENCE_CUES
                and size + 1 + len(text) <= MAX_SENTENCE_CHARS
            ):
                groups[-1].append(index)
                size += 1 + len(text)
                continue
        groups.append([index])
        size = len(text)
    return groups


def _cue_with(cue: Cue, text: str, rules: CueRules) -> Cue:
    return Cue(start=cue.start, end=cue.end, lines=tuple(wrap_lines(text.strip(), rules)))


def target_code(target: str) -> str:
    """``target`` (BCP-47 or FLORES-200) as the BCP-47 code files and tracks are named with."""
    return get_language(resolve(target)).bcp47


def translate_track(
    track: SubtitleTrack,
    engine: SentenceTranslator,
    target: str,
    *,
    tier: Tier | None = None,
    glossary: Sequence[GlossaryEntry] = (),
    rules: CueRules | None = None,
    context: JobContext | None = None,
) -> SubtitleTrack:
    """``track`` translated into ``target`` sentence by sentence, each translation laid back over the cues
    its sentence spans (see the module docstring); the same cues at the same times."""
    rules = rules or CueRules()
    cues = list(track.cues)
    options = TranslateOptions(target, track.language, tier, tuple(glossary))
    language = target_code(target)
    if not cues:
        return SubtitleTrack(language, (), track.language, True, "on-device", (), track.warnings)
    groups = sentence_groups(cues)
    texts = [join_texts([cues[i].text for i in group]) for group in groups]
    flores = resolve(target)
    results = engine.translate_many(texts, options, context=context)
    placed: dict[int, str] = {}
    alone: list[int] = []  # cues of a sentence translated too short to share: translated one by one
    for group, text, result in zip(groups, texts, results, strict=True):
        # a sentence that starts in lower case (a cue going on from a pause) keeps it in the translation
        translation = match_first_case((text,), result.translation, flores)
        if len(group) == 1:
            placed[group[0]] = translation
            continue
        shares = distribute(translation, [max(1, len(cues[i].text)) for i in group])
        if shares is None:
            alone.extend(group)
        else:
            placed.update(zip(group, shares, strict=True))
    every = list(results)
    if alone:
        again = engine.translate_many([cues[i].text for i in alone], options, context=context)
        for i, result in zip(alone, again, strict=True):
            placed[i] = match_first_case((cues[i].text,), result.translation, flores)
        every.extend(again)
    # a cue whose translation came back empty keeps its source text (an empty cue would be dropped by the
    # writers, and the tracks would no longer pair cue for cue)
    empty = [i for i, cue in enumerate(cues) if not placed[i].strip() and cue.text.strip()]
    for i in empty:
        placed[i] = cues[i].text
    translated = tuple(_cue_with(cue, placed[i], rules) for i, cue in enumerate(cues))
    warnings = [*track.warnings, *(w for r in every for w in r.warnings)]
    if empty:
        warnings.append(f"empty_translation: {len(empty)} cue(s) came back empty and keep the source text")
    return SubtitleTrack(
        language=language,
        cues=translated,
        source_language=track.language,
        translated=True,
        provenance=every[0].provenance if every else "on-device",
        route=tuple(dict.fromkeys(step for r in every for step in r.route)),
        warnings=tuple(dict.fromkeys(warnings)),
    )


# ----- files -------------------------------------------------------------------------------------------
def check_formats(formats: Sequence[str]) -> tuple[str, ...]:
    """``formats`` without duplicates, each one of :data:`SUBTITLE_FORMATS` (else InvalidRequest)."""
    chosen = tuple(dict.fromkeys(f.strip().lower() for f in formats if f.strip()))
    unknown = [f for f in chosen if f not in SUBTITLE_FORMATS]
    if unknown or not chosen:
        raise InvalidRequest(
            f"unknown subtitle format {', '.join(map(repr, unknown)) or '(none given)'}; "
            f"the formats are: {', '.join(SUBTITLE_FORMATS)}"
        )
    return chosen


def output_name(media: Path, fmt: str, language: str, source_language: str | None = None) -> str:
    """``NAME.<lang>.<ext>``, or ``NAME.<src>-<tgt>.srt`` for bilingual SRT."""
    if fmt == "bilingual_srt":
        return f"{media.stem}.{source_language}-{language}.{EXTENSIONS[fmt]}"
    return f"{media.stem}.{language}.{EXTENSIONS[fmt]}"


def planned_outputs(
    media_path: str | Path,
    languages: Sequence[tuple[str, str | None]],
    formats: Sequence[str],
    *,
    out_dir: str | Path | None = None,
) -> list[tuple[Path, str, str, str | None]]:
    """The files a run writes: (path, format, language, source language) for each language — given as
    (language, None) for the spoken language's captions and (target, source) for a translation — and
    format (bilingual SRT only for translations)."""
    media = Path(media_path).expanduser().absolute()
    folder = Path(out_dir).expanduser().absolute() if out_dir is not None else media.parent
    planned: list[tuple[Path, str, str, str | None]] = []
    for language, source in languages:
        for fmt in formats:
            if fmt == "bilingual_srt" and source is None:
                continue
            planned.append((folder / output_name(media, fmt, language, source), fmt, language, source))
    return planned


def refuse_existing(
    paths: Sequence[Path], media: Path | None = None, *, overwrite: bool = False, hint: str = OVERWRITE_HINT
) -> None:
    """InvalidRequest naming the first of ``paths`` that exists (unless ``overwrite``; ``hint`` says how to
    ask for it) or is the media itself or a folder: called before any work so nothing runs for files that
    could not be written."""
    for path in paths:
        if media is not None and path.resolve() == media.resolve():
            raise InvalidRequest(f"the output {path} is the media file; the input is never overwritten")
        if path.is_dir():
            raise InvalidRequest(f"{path} is a folder; it cannot be replaced by a subtitle file")
        if not overwrite and (path.exists() or path.is_symlink()):
            raise InvalidRequest(
                f"{path} already exists; subtitles never overwrite a file: {hint} to replace it, "
                "or choose another output folder"
            )


def check_folder(out_dir: str | Path | None) -> None:
    """InvalidRequest when ``out_dir`` names something that is not a folder (checked before any work)."""
    if out_dir is None:
        return
    folder = Path(out_dir).expanduser().absolute()
    if (folder.exists() or folder.is_symlink()) and not folder.is_dir():
        raise InvalidRequest(f"{folder} is not a folder; give the folder to write the subtitle files into")


def render_track(track: SubtitleTrack, fmt: str, source: SubtitleTrack | None = None) -> str:
    """``track`` in ``fmt`` (bilingual SRT pairs it with ``source``, cue for cue)."""
    if fmt == "bilingual_srt":
        if source is None:
            raise InvalidRequest("bilingual_srt pairs a translation with its source track: give the source")
        return render(fmt, list(track.cues), source_cues=list(source.cues))
    return render(fmt, list(track.cues))


def write_outputs(
    media_path: str | Path,
    tracks: Sequence[SubtitleTrack],
    formats: Sequence[str],
    *,
    out_dir: str | Path | None = None,
    overwrite: bool = False,
    context: JobContext | None = None,
    hint: str = OVERWRITE_HINT,
) -> list[Path]:
    """Write each track in each format (``NAME.<lang>.<ext>``; bilingual SRT, for translated tracks only,
    ``NAME.<src>-<tgt>.srt``) into ``out_dir`` (default: beside the media). Every file is rendered first,
    then written to a temporary beside its destination and renamed into place with the others, all or
    none; without ``overwrite`` an existing file is refused before anything is written and never touched
    (a file that appears meanwhile is not replaced either)."""
    media = Path(media_path).expanduser().absolute()
    chosen = check_formats(formats)
    check_folder(out_dir)
    by_language = {t.language: t for t in tracks if not t.translated}
    contents: list[tuple[Path, str]] = []
    for track in tracks:
        source = by_language.get(track.source_language) if track.translated else None
        if track.translated and source is None and "bilingual_srt" in chosen:
            raise InvalidRequest(
                f"bilingual_srt needs the {track.source_language} track beside the translation"
            )
        languages = [(track.language, track.source_language if track.translated else None)]
        for path, fmt, _, _ in planned_outputs(media, languages, chosen, out_dir=out_dir):
            contents.append((path, render_track(track, fmt, source)))
    paths = [p for p, _ in contents]
    if len(set(paths)) != len(paths):
        raise InvalidRequest("two tracks would be written to the same file: give each language once")
    refuse_existing(paths, media, overwrite=overwrite, hint=hint)
    if context is not None:
        context.check()
    if paths:
        paths[0].parent.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:  # the first file's group places them all together, or none
        for path, text in contents:
            partial = stack.enter_context(atomic_output(path, overwrite=overwrite))
            partial.write_bytes(text.encode("utf-8"))
    return paths


# ----- the whole run -----------------------------------------------------------------------------------
def make_subtitles(
    media_path: str | Path,
    recognizer: Recognizer,
    engine: SentenceTranslator | None,
    *,
    targets: Sequence[str] = (),
    formats: Sequence[str] = ("srt",),
    options: TranscribeOptions | None = None,
    out_dir: str | Path | None = None,
    overwrite: bool = False,
    tier: Tier | None = None,
    glossary: Sequence[GlossaryEntry] = (),
    rules: CueRules | None = None,
    context: JobContext | None = None,
    max_bytes: int | None = None,
    max_seconds: float | None = MAX_MEDIA_SECONDS,
    engine_factory: Callable[[], SentenceTranslator] | None = None,
    hint: str = OVERWRITE_HINT,
) -> SubtitleResult:
    """Captions in the spoken language and a translation into each target, written as files (see
    :func:`write_outputs`). Existing files are refused before any work (those whose names are known then:
    the targets', and the source's when ``options.language`` is given), and again once the spoken language
    is known, before translating. A target that is the spoken language is skipped (its captions are the
    source track). ``engine`` may be None when ``engine_factory`` makes it on first need."""
    from dragoman.speech.asr import TranscribeOptions

    started = time.perf_counter()
    context = context or JobContext()
    options = options or TranscribeOptions()
    media = Path(media_path).expanduser().absolute()
    chosen = check_formats(formats)
    check_folder(out_dir)
    wanted = list(dict.fromkeys(target_code(t) for t in targets))
    if "bilingual_srt" in chosen and not wanted:
        raise InvalidRequest("bilingual_srt pairs captions with a translation: name a target language")
    # the spoken language's files are named with Whisper's code, the primary subtag of the one given
    given = None if options.language in ("", "auto") else options.language.split("-")[0].lower()
    early = [(t, given or "src") for t in wanted] + ([(given, None)] if given else [])
    refuse_existing(
        [
            p
            for p, fmt, _, _ in planned_outputs(media, early, chosen, out_dir=out_dir)
            if given or fmt != "bilingual_srt"
        ],
        media,
        overwrite=overwrite,
        hint=hint,
    )
    recognise_end = 700 if wanted else 950
    info, transcript = recognise_file(
        media,
        recognizer,
        options,
        stage_context(context, 0, recognise_end, ""),
        max_bytes=max_bytes,
        max_seconds=max_seconds,
    )
    source = caption_track(transcript, rules)
    spoken = source.language
    skipped = [t for t in wanted if _same_language(t, spoken)]
    wanted = [t for t in wanted if t not in skipped]
    planned = planned_outputs(
        media, [(spoken, None), *((t, spoken) for t in wanted)], chosen, out_dir=out_dir
    )
    refuse_existing([p for p, *_ in planned], media, overwrite=overwrite, hint=hint)
    tracks = [source]
    if wanted:
        translator = engine if engine is not None else engine_factory() if engine_factory else None
        if translator is None:
            raise InvalidRequest("translating subtitles needs the translation engine")
        span = (950 - recognise_end) / len(wanted)
        for k, target in enumerate(wanted):
            lo = recognise_end + round(k * span)
            stage = stage_context(
                context, lo, recognise_end + round((k + 1) * span), f"translating to {target}"
            )
            tracks.append(
                translate_track(
                    source, translator, target, tier=tier, glossary=glossary, rules=rules, context=stage
                )
            )
    _mark(context, 950, "writing")
    paths = write_outputs(
        media, tracks, chosen, out_dir=out_dir, overwrite=overwrite, context=context, hint=hint
    )
    _mark(context, PROGRESS_TOTAL, "done")
    warnings = [*transcript.warnings]
    warnings += [f"same_language: the speech is {spoken}; its captions are the {t} track" for t in skipped]
    for track in tracks[1:]:
        warnings.extend(track.warnings)
    return SubtitleResult(
        media=info,
        transcript=transcript,
        tracks=tuple(tracks),
        paths=tuple(paths),
        seconds=time.perf_counter() - started,
        warnings=tuple(dict.fromkeys(warnings)),
        provenance="on-device",
        skipped=tuple(skipped),
    )


def _same_language(target: str, spoken: str) -> bool:
    try:
        return resolve(target) == resolve(spoken)
    except DragomanError:
        return target == spoken


__all__ = [
    "EXTENSIONS",
    "MAX_MEDIA_SECONDS",
    "PROGRESS_TOTAL",
    "SentenceTranslator",
    "SubtitleResult",
    "SubtitleTrack",
    "caption_track",
    "check_folder",
    "check_formats",
    "make_subtitles",
    "output_name",
    "planned_outputs",
    "recognise_file",
    "refuse_existing",
    "render_track",
    "sentence_groups",
    "stage_context",
    "target_code",
    "transcript_words",
    "translate_track",
    "write_outputs",
]
