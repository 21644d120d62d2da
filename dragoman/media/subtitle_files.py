"""Subtitle files from cues: SubRip (``srt``), WebVTT (``vtt``), plain text (``txt``) and bilingual SubRip.

- **SRT** (SubRip): numbered blocks ``1`` / ``00:00:01,000 --> 00:00:02,500`` / lines / a blank line,
  numbered from 1 in time order. Times are ``HH:MM:SS,mmm`` (hours grow past 99 if they must).
- **VTT** (W3C WebVTT): the ``WEBVTT`` header and a blank line, then blocks of ``00:00:01.000 -->
  00:00:02.500`` / lines. ``&``, ``<`` and ``>`` in the text are written as ``&amp;``, ``&lt;``, ``&gt;``
  (the format's rule: raw ``<`` starts a tag).
- **TXT**: the cues' text read as prose: cues joined with spaces, a line ending after each sentence, a blank
  line (a new paragraph) where the speech pauses for :data:`PARAGRAPH_PAUSE` seconds or more.
- **Bilingual SRT**: the source cues' timing; each cue holds its source lines, then the target lines.

No text line is ever blank (a blank line ends a block in both formats) and no text holds ``-->`` (it
would read as a timing line): such text is written with ``->`` instead. Cues with no text are left out (no
cues at all: an empty string, or the bare header for WebVTT). Every other string ends with ``\\n``; files
are UTF-8 without a byte-order mark.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Final

from dragoman.errors import InvalidRequest
from dragoman.media.cues import Cue, ends_sentence, join_texts

SUBTITLE_FORMATS: Final[tuple[str, ...]] = ("srt", "vtt", "txt", "bilingual_srt")
#: File name extension of each format.
EXTENSIONS: Final[dict[str, str]] = {"srt": "srt", "vtt": "vtt", "txt": "txt", "bilingual_srt": "srt"}
#: Seconds of silence between cues that start a new paragraph in ``txt``.
PARAGRAPH_PAUSE: Final = 2.0
#: A timestamp as SubRip or WebVTT writes it (hours optional in WebVTT; comma or dot before the
#: milliseconds). The document handlers read subtitle files with this pattern.
TIMESTAMP_PATTERN: Final = r"(?:\d+:)?\d{1,2}:\d{2}[,.]\d{1,3}"
#: An arrow of two or more dashes: ``-->`` in a text line would read as a timing line (``---->`` too).
_ARROW = re.compile(r"-{2,}>")


def _parts(seconds: float) -> tuple[int, int, int, int]:
    if not math.isfinite(seconds):
        raise InvalidRequest(f"a subtitle time must be a finite number of seconds, not {seconds}")
    total_ms = max(0, round(seconds * 1000))
    hours, rest = divmod(total_ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs, ms = divmod(rest, 1000)
    return hours, minutes, secs, ms


def srt_timestamp(seconds: float) -> str:
    """``HH:MM:SS,mmm`` (milliseconds rounded; negative times are 0)."""
    h, m, s, ms = _parts(seconds)
    return f"{h:02d}:{m:02d}:{s:02d},{ms:03d}"


def vtt_timestamp(seconds: float) -> str:
    """``HH:MM:SS.mmm`` (milliseconds rounded; negative times are 0)."""
    h, m, s, ms = _parts(seconds)
    return f"{h:02d}:{m:02d}:{s:02d}.{ms:03d}"


def _safe_lines(lines: Sequence[str]) -> list[str]:
    out: list[str] = []
    for line in lines:
        for part in line.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
            text = _ARROW.sub("->", part.strip())
            if text:
                out.append(text)
    return out


def _vtt_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _times(cue: Cue) -> tuple[float, float]:
    """A cue's times as written: the end at least a millisecond after the start."""
    start = max(0.0, cue.start)
    return start, max(cue.end, start + 0.001)


def write_srt(cues: Sequence[Cue]) -> str:
    """SubRip text of ``cues`` (see the module docstring)."""
    blocks: list[str] = []
    for cue in cues:
        lines = _safe_lines(cue.lines)
        if not lines:
            continue
        start, end = _times(cue)
        timing = f"{srt_timestamp(start)} --> {srt_timestamp(end)}"
        blocks.append("\n".join([str(len(blocks) + 1), timing, *lines]) + "\n")
    return "\n".join(blocks) if blocks else ""


def write_vtt(cues: Sequence[Cue]) -> str:
    """WebVTT text of ``cues`` (see the module docstring)."""
    blocks = ["WEBVTT\n"]
    for cue in cues:
        lines = [_vtt_escape(line) for line in _safe_lines(cue.lines)]
        if not lines:
            continue
        start, end = _times(cue)
        blocks.append("\n".join([f"{vtt_timestamp(start)} --> {vtt_timestamp(end)}", *lines]) + "\n")
    return "\n".join(blocks)


def write_txt(cues: Sequence[Cue]) -> str:
    """The cues' text as prose: a line a sentence, a paragraph break at long pauses."""
    paragraphs: list[list[str]] = []
    sentence: list[str] = []
    lines: list[str] = []
    previous_end: float | None = None
    for cue in cues:
        text = join_texts(_safe_lines(cue.lines))
        if not text:
            continue
        if previous_end is not None and cue.start - previous_end >= PARAGRAPH_PAUSE:
            if sentence:
                lines.append(join_texts(sentence))
                sentence = []
            if lines:
                paragraphs.append(lines)
                lines = []
        sentence.append(text)
        if ends_sentence(text):
            lines.append(join_texts(sentence))
            sentence = []
        previous_end = cue.end
    if sentence:
        lines.append(join_texts(sentence))
    if lines:
        paragraphs.append(lines)
    return "\n\n".join("\n".join(p) for p in paragraphs) + "\n" if paragraphs else ""


def write_bilingual_srt(source_cues: Sequence[Cue], target_cues: Sequence[Cue]) -> str:
    """SubRip with the source cues' timing, each cue's source lines then its target lines. The two lists
    must be of the same length (the target is the source translated cue by cue)."""
    if len(source_cues) != len(target_cues):
        raise InvalidRequest(
            f"a bilingual SRT pairs cues one to one: {len(source_cues)} source cues, "
            f"{len(target_cues)} target cues"
        )
    paired = [
        Cue(source.start, source.end, (*source.lines, *target.lines))
        for source, target in zip(source_cues, target_cues, strict=True)
    ]
    return write_srt(paired)


def render(fmt: str, cues: Sequence[Cue], source_cues: Sequence[Cue] | None = None) -> str:
    """``cues`` in format ``fmt`` (one of :data:`SUBTITLE_FORMATS`); ``bilingual_srt`` takes the source
    language's cues as ``source_cues`` and ``cues`` as their translation."""
    if fmt == "srt":
        return write_srt(cues)
    if fmt == "vtt":
        return write_vtt(cues)
    if fmt == "txt":
        return write_txt(cues)
    if fmt == "bilingual_srt":
        if source_cues is None:
            raise InvalidRequest("the bilingual_srt format needs the source cues beside the translated ones")
        return write_bilingual_srt(source_cues, cues)
    raise InvalidRequest(f"unknown subtitle format {fmt!r}: use one of {', '.join(SUBTITLE_FORMATS)}")
