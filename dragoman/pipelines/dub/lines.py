"""The lines a dub speaks (issue 16): one per sentence of the source track.

A line is a run of cues translated as one text (:func:`dragoman.pipelines.subtitles.sentence_groups`: it
ends at a sentence end or a pause), cut again at pauses of :data:`LINE_PAUSE`; its slot is
``[first cue start, last cue end]``, its text the translation laid over those cues, joined again. Lines
come from a recognised source track and its translation, or from the user's own SRT/VTT file
(:func:`read_subtitle_file`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dragoman.errors import DocumentFormatError, FileTooLarge, InvalidRequest, file_error
from dragoman.media.cues import Cue, join_texts
from dragoman.pipelines.subtitles import SubtitleTrack, sentence_groups

#: A pause (seconds) this long between two cues of one sentence ends a dub line there: the dub keeps the
#: pause (and, in match mode, the speaker may change), saying the share of the translation laid over the
#: cues before it. A transcript without punctuation (Whisper gives some) still makes one line per phrase.
LINE_PAUSE = 1.0
#: The largest subtitle file read (bytes) and the most cues taken from it.
MAX_SUBTITLE_BYTES = 10 * 1024 * 1024
MAX_SUBTITLE_CUES = 100_000

_STAMP = r"(?:(\d+):)?(\d{1,2}):(\d{2})[,.](\d{1,3})"
_TIMING = re.compile(rf"^\s*{_STAMP}\s*-->\s*{_STAMP}")
_TAG = re.compile(r"<[^>]*>|\{[^}]*\}")
#: What a dub does not speak: sound descriptions in brackets ([music], [LAUGHS]) and music notes.
_UNSPOKEN = re.compile(r"\[[^\]]*\]|[♪♫♬]")


def speakable(text: str) -> str:
    """``text`` as a voice says it: sound descriptions in square brackets and music notes removed; the
    empty string when no letter or digit is left (a line of ``♪`` or ``...``)."""
    spoken = " ".join(_UNSPOKEN.sub(" ", text).split())
    return spoken if any(c.isalnum() for c in spoken) else ""


@dataclass(frozen=True)
class Slot:
    """A line before it is voiced: its index, slot and texts."""

    index: int
    start: float
    end: float
    source_text: str
    text: str

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


def slots_from_tracks(source: SubtitleTrack, translated: SubtitleTrack) -> list[Slot]:
    """The lines of ``source`` and its translation (the same cues at the same times), one per sentence;
    lines with nothing to say (:func:`speakable`) are left out. Linear in the cues."""
    if len(source.cues) != len(translated.cues):
        raise InvalidRequest("the translated track does not pair with its source cue for cue")
    slots: list[Slot] = []
    for group in sentence_groups(source.cues):
        for run in _runs(source.cues, group):
            text = speakable(join_texts([translated.cues[i].text for i in run]))
            # the slot spans the cues with something to say (not a cue of music notes before the words)
            spoken = [i for i in run if speakable(translated.cues[i].text) or speakable(source.cues[i].text)]
            if not text or not spoken:
                continue
            first, last = source.cues[spoken[0]], source.cues[spoken[-1]]
            source_text = join_texts([source.cues[i].text for i in run]).strip()
            slots.append(Slot(len(slots), first.start, max(first.start, last.end), source_text, text))
    return slots


def _runs(cues: Sequence[Cue], group: list[int]) -> list[list[int]]:
    """``group`` cut where a pause of :data:`LINE_PAUSE` or more falls between two of its cues."""
    runs: list[list[int]] = [[group[0]]]
    for i in group[1:]:
        if cues[i].start - cues[runs[-1][-1]].end >= LINE_PAUSE:
            runs.append([i])
        else:
            runs[-1].append(i)
    return runs


def _seconds(groups: tuple[str | None, ...]) -> float:
    hours, minutes, seconds, millis = groups
    return (
        int(hours or 0) * 3600
        + int(minutes or 0) * 60
        + int(seconds or 0)
        + int((millis or "0").ljust(3, "0")) / 1000
    )


def parse_subtitles(text: str) -> list[Cue]:
    """The cues of an SRT or WebVTT document: every block with a timing line (``a --> b``), its text the
    lines after it up to a blank line, tags (``<i>``, ``{\\an8}``) removed. Cues in time order; those with no
    text or ending before they start are dropped. Linear in the text."""
    cues: list[Cue] = []
    lines = text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff").split("\n")
    i = 0
    while i < len(lines):
        match = _TIMING.match(lines[i])
        i += 1
        if match is None:
            continue
        start, end = _seconds(match.groups()[:4]), _seconds(match.groups()[4:])
        body: list[str] = []
        while i < len(lines) and lines[i].strip() and _TIMING.match(lines[i]) is None:
            cleaned = _TAG.sub("", lines[i]).strip()
            if cleaned:
                body.append(cleaned)
            i += 1
        if body and end > start:
            cues.append(Cue(start, end, tuple(body)))
            if len(cues) > MAX_SUBTITLE_CUES:
                raise InvalidRequest(f"the subtitle file has more than {MAX_SUBTITLE_CUES} cues")
    cues.sort(key=lambda c: (c.start, c.end))
    return cues


def read_subtitle_file(path: str | Path) -> list[Cue]:
    """The cues of the SRT/VTT file at ``path`` (UTF-8, or Latin-1 when it is not): typed errors for a
    file that cannot be read, is too large or holds no cue."""
    path = Path(path).expanduser()
    try:
        size = path.stat().st_size
        if size > MAX_SUBTITLE_BYTES:
            raise FileTooLarge(f"{path.name} is larger than {MAX_SUBTITLE_BYTES // (1024 * 1024)} MB")
        data = path.read_bytes()
    except OSError as exc:
        raise file_error(exc, f"cannot read the subtitle file {path}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    cues = parse_subtitles(text)
    if not cues and text.strip():
        raise DocumentFormatError(f"{path.name} holds no subtitle cue (SRT or WebVTT timing lines)")
    return cues
