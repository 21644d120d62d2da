"""Subtitles: SubRip (``.srt``) and WebVTT (``.vtt``). Only the cue text changes.

Cue numbers and identifiers, timings, cue settings (``align:start line:90%``), the ``WEBVTT`` header and
its metadata, ``NOTE``, ``STYLE`` and ``REGION`` blocks, blank lines and line endings are written back as
they were. Each cue's text is translated as one sentence: its lines are joined with spaces, and the
translation is split again into as many lines as the cue had (never more; fewer when the translation has
fewer words), at the word breaks that make the lines most even, never inside a tag. Dialogue cues, whose
every line starts with a dash (``- Hi.`` / ``- Hello.``), are translated line by line, one speaker each.
Tags (``<i>``, ``<b>``, ``<font color="...">``, ``<v Speaker>``, ``<c.class>``, ``{\\an8}``) are kept by the
engine; WebVTT's karaoke timestamps (``<00:00:01.500>``) are masked so they come back unchanged. A cue is
never merged with the next one, so a sentence that runs over two cues is translated in two parts.

SubRip files are often not UTF-8: a file that is not UTF-8 or UTF-16 with a BOM is read as Windows-1252
(the usual legacy encoding of ``.srt``) and written back in it.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from dragoman.documents import _inline
from dragoman.documents.base import DocumentReport, TextTranslator
from dragoman.documents.plaintext import text_encoding
from dragoman.errors import DocumentFormatError
from dragoman.progress import ProgressCallback

_TIMESTAMP = r"(?:\d+:)?\d{1,2}:\d{2}[,.]\d{1,3}"
_TIMING = re.compile(rf"\s*{_TIMESTAMP}\s*-->\s*{_TIMESTAMP}")
_VTT_HEADER = re.compile(r"\A\ufeff?WEBVTT(?:[ \t].*)?$")
_VTT_RAW_BLOCK = re.compile(r"(?:NOTE|STYLE|REGION)(?:[ \t]|$)")
_KARAOKE = re.compile(rf"<{_TIMESTAMP}>")
_DIALOGUE = re.compile(r"(?:<[^>]*>|\{[^}]*\})*\s*[-\u2013\u2014]")
#: Steps of the optimal line split (lines x words x words); longer texts are split greedily instead.
_SPLIT_DP_LIMIT = 200_000
_LETTER = re.compile(r"[^\W\d_]")


@dataclass
class _Cue:
    """The text lines of one cue, where they sit in the file, and the texts sent for them."""

    first_line: int  # index of the first text line
    lines: list[str]  # without line endings
    line_end: str
    dialogue: bool
    texts: list[str]  # masked texts sent to the engine (one, or one per line for dialogue)
    stamps: list[dict[int, str]]  # per text: the karaoke timestamps behind its placeholders


def _mask(text: str, numbers: list[int]) -> tuple[str, dict[int, str]]:
    stamps: dict[int, str] = {}

    def single(m: re.Match[str]) -> str:
        numbers[0] += 1
        stamps[numbers[0]] = m.group()
        return f"<{numbers[0]}/>"

    return _KARAOKE.sub(single, text), stamps


def _unmask(translated: str, stamps: dict[int, str]) -> str:
    if not stamps:
        return translated
    nodes, missing = _inline.parse(translated, dict.fromkeys(stamps, False))
    out = [n if isinstance(n, str) else stamps[n.id] for n in nodes]
    return "".join(out) + "".join(stamps[n] for n in missing)


class _Closers:
    """Where the ``<...>`` or ``{...}`` tag opening at ``i`` ends: each ``str.find`` remembered, so a text
    of many unclosed ``<`` is searched once, not once per opener (positions must not decrease)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.found = {">": -1, "}": -1}

    def end(self, i: int, closer: str) -> int | None:
        found = self.found[closer]
        if found <= i and found != len(self.text):
            at = self.text.find(closer, i + 1)
            found = self.found[closer] = len(self.text) if at == -1 else at
        return None if found == len(self.text) else found + 1


def _words(text: str) -> list[tuple[str, int]]:
    """The words of ``text`` (runs of non-space characters and whole ``<...>``/``{...}`` tags, which may
    hold spaces) with the length of each the viewer sees (tags not counted). Linear in the text."""
    closers = _Closers(text)
    words: list[tuple[str, int]] = []
    i, end = 0, len(text)
    while i < end:
        if text[i].isspace():
            i += 1
            continue
        start, visible = i, 0
        while i < end:
            c = text[i]
            close = closers.end(i, ">" if c == "<" else "}") if c in "<{" else None
            if close is not None:
                i = close
            elif not c.isspace():
                i += 1
                visible += 1
            else:
                break
        words.append((text[start:i], visible))
    return words


def _greedy_lines(lengths: list[int], count: int) -> list[int]:
    """Where lines start when ``lengths`` are filled into at most ``count`` lines as short as a greedy
    fill allows (binary search on the width: O(n log width))."""

    def fill(width: int) -> list[int]:
        starts, line = [0], lengths[0]
        for index in range(1, len(lengths)):
            if line + 1 + lengths[index] > width:
                starts.append(index)
                line = lengths[index]
            else:
                line += 1 + lengths[index]
        return starts

    low, high = max(lengths), sum(lengths) + len(lengths)
    while low < high:
        middle = (low + high) // 2
        if len(fill(middle)) <= count:
            high = middle
        else:
            low = middle + 1
    return fill(low)


def split_lines(text: str, count: int) -> list[str]:
    """``text`` in at most ``count`` lines at word breaks (not inside tags), the longest line (in visible
    characters, tags not counted) as short as it can be; never an empty line."""
    found = _words(text)
    words = [w for w, _ in found]
    count = max(1, min(count, len(words)))
    if count == 1:
        return [" ".join(words)] if words else [text.strip()]
    lengths = [v for _, v in found]  # what the viewer sees
    n = len(words)
    if count * n * n > _SPLIT_DP_LIMIT:
        starts = [*_greedy_lines(lengths, count), n]
        return [" ".join(words[a:b]) for a, b in zip(starts, starts[1:], strict=False)]
    prefix = [0]
    for length in lengths:
        prefix.append(prefix[-1] + length)

    def span(i: int, j: int) -> int:  # the length of words[i:j] on one line
        return prefix[j] - prefix[i] + (j - i - 1)

    # best[k][i]: the smallest longest line for words[i:] in k lines; cut[k][i]: where the first line ends
    infinity = float("inf")
    best = [[infinity] * (n + 1) for _ in range(count + 1)]
    cut = [[0] * (n + 1) for _ in range(count + 1)]
    for i in range(n):
        best[1][i] = span(i, n)
    for k in range(2, count + 1):
        for i in range(n - k + 1):
            for j in range(i + 1, n - k + 2):
                if span(i, j) >= best[k][i]:
                    break  # longer first lines only get longer
                value = max(span(i, j), best[k - 1][j])
                if value < best[k][i]:
                    best[k][i], cut[k][i] = value, j
    lines: list[str] = []
    i = 0
    for k in range(count, 1, -1):
        j = cut[k][i]
        lines.append(" ".join(words[i:j]))
        i = j
    lines.append(" ".join(words[i:]))
    return lines


def _decode(data: bytes, name: str) -> tuple[str, str]:
    encoding = text_encoding(data[:8192])
    if encoding is not None:
        try:
            return data.decode(encoding), encoding
        except UnicodeDecodeError:
            pass
    if b"\x00" in data:
        raise DocumentFormatError(f"{name} is not a subtitle text file (it holds NUL bytes)")
    return data.decode("cp1252", errors="replace"), "cp1252"


class _SubtitleHandler(ABC):
    """What SRT and WebVTT share; each says how its content looks (``_looks_right``)."""

    name = "subtitles"
    suffixes: tuple[str, ...] = ()
    webvtt = False

    @abstractmethod
    def _looks_right(self, head: str) -> bool:
        """True when the first characters look like this subtitle format."""

    def sniff(self, head: bytes, path: Path) -> bool:
        if path.suffix.lower() not in self.suffixes or (b"\x00" in head and text_encoding(head) is None):
            return False
        encoding = text_encoding(head) or "cp1252"
        return self._looks_right(head.decode(encoding, errors="replace"))

    def translate(
        self, source: Path, output: Path, translate: TextTranslator, progress: ProgressCallback | None
    ) -> DocumentReport:
        text, encoding = _decode(source.read_bytes(), source.name)
        if self.webvtt and not _VTT_HEADER.match(text.split("\n", 1)[0].rstrip("\r")):
            raise DocumentFormatError(f"{source.name} does not start with the WEBVTT header")
        lines = text.splitlines(keepends=True)
        cues = self._cues(lines)
        texts = [t for cue in cues for t in cue.texts]
        translations = iter(translate(texts) if texts else [])
        for cue in cues:
            translated = [_unmask(next(translations), stamps) for stamps in cue.stamps]
            if cue.dialogue:
                new_lines = translated
            else:
                new_lines = split_lines(translated[0], len(cue.lines))
            lines[cue.first_line : cue.first_line + len(cue.lines)] = [
                line + cue.line_end for line in new_lines
            ] + [""] * (len(cue.lines) - len(new_lines))
        result = "".join(lines)
        output.write_bytes(result.encode(encoding, errors="replace"))
        return DocumentReport(
            segments=len(texts),
            characters=sum(len(t) for t in texts),
            extracted_text="\n\n".join("\n".join(c.lines) for c in cues),
            translated_text=result,
        )

    def _cues(self, lines: list[str]) -> list[_Cue]:
        """The cues whose text is translated, in file order (the line lists are not changed)."""
        cues: list[_Cue] = []
        counter = [_inline.first_free_id("".join(lines))]
        i = 0
        while i < len(lines):
            if not lines[i].strip():
                i += 1
                continue
            start = i
            while i < len(lines) and lines[i].strip():
                i += 1
            block = [line.rstrip("\r\n") for line in lines[start:i]]
            first = block[0].lstrip("\ufeff")
            if self.webvtt and (start == 0 or _VTT_RAW_BLOCK.match(first)):
                continue
            timing = next((k for k, line in enumerate(block) if _TIMING.match(line)), None)
            if timing is None:
                if self.webvtt or first.strip().isdigit():
                    continue
                timing = -1  # SubRip text after a blank line inside a cue: text all the same
            body = block[timing + 1 :]
            if not body or not _LETTER.search("".join(body)):
                continue
            line_end = lines[start + timing + 1][len(body[0]) :] or "\n"
            dialogue = len(body) > 1 and all(_DIALOGUE.match(line) for line in body)
            sources = body if dialogue else [" ".join(line.strip() for line in body)]
            masked = [_mask(s, counter) for s in sources]
            cues.append(
                _Cue(
                    first_line=start + timing + 1,
                    lines=body,
                    line_end=line_end,
                    dialogue=dialogue,
                    texts=[m[0] for m in masked],
                    stamps=[m[1] for m in masked],
                )
            )
        return cues


class SrtHandler(_SubtitleHandler):
    name = "srt"
    suffixes: tuple[str, ...] = (".srt",)

    def _looks_right(self, head: str) -> bool:
        return any(_TIMING.match(line) for line in head.splitlines()[:50])


class WebVttHandler(_SubtitleHandler):
    name = "vtt"
    suffixes: tuple[str, ...] = (".vtt",)
    webvtt = True

    def _looks_right(self, head: str) -> bool:
        return bool(_VTT_HEADER.match(head.split("\n", 1)[0].rstrip("\r")))
