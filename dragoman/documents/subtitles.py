"""Subtitles: SubRip (``.srt``) and WebVTT (``.vtt``). Only the cue text changes.

Cue numbers and identifiers, timings, cue settings (``align:start line:90%``), the ``WEBVTT`` header and
its metadata, ``NOTE``, ``STYLE`` and ``REGION`` blocks, blank lines and line endings are written back as
they were. Each cue's text is translated as one sentence: its lines are joined with spaces, and the
translation is split again into as many lines as the cue had (never more; fewer when the translation has
fewer words), at the word breaks that make the lines most even, never inside a tag. Dialogue cues, whose
every line starts with a dash (``- Hi.`` / ``- Hello.``), are translated line by line, one speaker each.
Tags (``<i>``, ``<b>``, ``<font color="...">``, ``<v Speaker>``, ``<c.class>``, ``{\\an8}``) are kept by the
engine; WebVTT's karaoke timestamps (``<00:00:01.500>``) are masked so they come back unchanged, and so are
the SubStation escapes SRT files carry over from ``.ass`` (``\\N`` a forced line break, ``\\n`` a soft one,
``\\h`` a hard space): each run of them is sent as one placeholder with a space either side (so the words
around it stay words for the engine) and comes back exactly as it was, with the spaces the source had around
it and no others (``Words\\hjoined`` stays one word, ``one\\Ntwo`` one line break).

A sentence that runs over several cues (a cue of plain text, no tags or ``\\N``/``\\h``, or of lines each
wrapped whole in the same ``<i>``/``<b>``/``<u>`` tags, that does not end with ``.``, ``!``, ``?``, ``…``,
``:``, ``;`` or ``♪``, followed by another such cue wrapped alike that starts with a lower-case letter, or
with any letter after a comma or a dash) is translated whole, without the wrapping tags, at most
:data:`MAX_SENTENCE_CUES` cues and :data:`MAX_SENTENCE_CHARS` characters at a time, and laid back over its
cues: each keeps its timing and gets a share of the translated words in proportion to its share of the
source text, cut at word breaks (between characters in scripts written without spaces), never empty; its
lines get their tags back. A cue that ends a sentence ends its group. When the translation is too short to
give every cue a word, those cues are translated one by one instead.

Blocks are found as the WebVTT parsing rules find them: a line holding ``-->`` is a cue's timing line when it
is the block's first line, or its second after an identifier; anywhere else it ends the block and starts the
next cue (so a cue not preceded by a blank line is not read as text of the one before). In SubRip a second
timing line in a block does the same, taking the cue number on the line before it along.

SubRip files are often not UTF-8: a file that is not UTF-8 or UTF-16 with a BOM is read as Windows-1252
(the usual legacy encoding of ``.srt``) and written back in it.
"""

from __future__ import annotations

import re
import unicodedata
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from dragoman.documents import _inline
from dragoman.documents.base import DocumentReport, TextTranslator
from dragoman.documents.plaintext import text_encoding
from dragoman.errors import DocumentFormatError
from dragoman.media.subtitle_files import TIMESTAMP_PATTERN
from dragoman.progress import ProgressCallback

_TIMESTAMP = TIMESTAMP_PATTERN  # the one the subtitle writers document
_TIMING = re.compile(rf"\s*{_TIMESTAMP}\s*-->\s*{_TIMESTAMP}")
_VTT_HEADER = re.compile(r"\A\ufeff?WEBVTT(?:[ \t].*)?$")
_VTT_RAW_BLOCK = re.compile(r"(?:NOTE|STYLE|REGION)(?:[ \t]|$)")
_KARAOKE = re.compile(rf"<{_TIMESTAMP}>")
#: SubStation Alpha escapes found in SRT text: \N (forced line break), \n (soft break), \h (hard space);
#: a run of them with the spaces and tabs around it is one placeholder.
_ESCAPES = re.compile(r"(?<![ \t])[ \t]*(?:\\[Nnh])+[ \t]*")  # lookbehind: each run of spaces tried once
_MASKED = re.compile(rf"{_KARAOKE.pattern}|{_ESCAPES.pattern}")
_DIALOGUE = re.compile(r"(?:<[^>]*>|\{[^}]*\})*\s*[-\u2013\u2014]")
#: Steps of the optimal line split (lines x words x words); longer texts are split greedily instead.
_SPLIT_DP_LIMIT = 200_000
_LETTER = re.compile(r"[^\W\d_]")
#: Most cues, and most characters, one sentence running over cues is translated as (bounds the work).
MAX_SENTENCE_CUES = 4
MAX_SENTENCE_CHARS = 400
#: What ends a sentence at the end of a cue (after closing quotes and brackets).
_SENTENCE_END = frozenset(".!?…:;♪。！？")
_CLOSERS = "\"'”’»)]"
#: A line wrapped whole in style tags (``<i>...</i>``), with no other markup inside.
_WRAPPED = re.compile(r"((?:<[ibu]>)+)([^<>{}]*)((?:</[ibu]>)+)$")


@dataclass
class _Cue:
    """The text lines of one cue, where they sit in the file, and the texts sent for them."""

    first_line: int  # index of the first text line
    lines: list[str]  # without line endings
    line_end: str
    dialogue: bool
    texts: list[str]  # masked texts sent to the engine (one, or one per line for dialogue)
    stamps: list[dict[int, str]]  # per text: the karaoke timestamps behind its placeholders
    block: int = 0  # the index of its block in the file (cues join only when their blocks are neighbours)
    inner: str | None = None  # the text without its wrapping tags, when it may share a sentence (plain)
    wrapper: tuple[str, str] = ("", "")  # the tags around each of its lines

    @property
    def ends_sentence(self) -> bool:
        text = (self.inner or "").rstrip().rstrip(_CLOSERS)
        return not text or text[-1] in _SENTENCE_END


def _mask(text: str, numbers: list[int]) -> tuple[str, dict[int, str]]:
    """``text`` with each karaoke timestamp and each run of SubStation escapes as a numbered placeholder
    (escapes with a space either side, unless at an end), and what each placeholder stands for."""
    stamps: dict[int, str] = {}

    def single(m: re.Match[str]) -> str:
        numbers[0] += 1
        stamps[numbers[0]] = m.group()
        if m.group().startswith("<"):
            return f"<{numbers[0]}/>"
        before = " " if m.start() > 0 else ""
        after = " " if m.end() < len(text) else ""
        return f"{before}<{numbers[0]}/>{after}"

    return _MASKED.sub(single, text), stamps


def _unmask(translated: str, stamps: dict[int, str]) -> str:
    """The translation with each placeholder back as what it stood for; around an escape, the spaces the
    translation put there give way to the source's own. A placeholder the translation lost goes at the end."""
    if not stamps:
        return translated
    nodes, missing = _inline.parse(translated, dict.fromkeys(stamps, False))
    out: list[str] = []
    strip_next = False
    for node in nodes:
        if isinstance(node, str):
            out.append(node.lstrip(" \t") if strip_next else node)
            strip_next = False
            continue
        original = stamps[node.id]
        strip_next = not original.startswith("<")
        if strip_next and out:
            out[-1] = out[-1].rstrip(" \t")
        out.append(original)
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
        groups = _sentence_groups(cues)
        texts = [t for group in groups for t in _group_texts(group)]
        translations = iter(translate(texts) if texts else [])
        placed: dict[int, list[str]] = {}  # cue index -> its new lines
        alone: list[int] = []  # cues of a sentence whose translation was too short to share: one by one
        index = 0
        for group in groups:
            if len(group) == 1:
                cue = cues[index]
                translated = [_unmask(next(translations), stamps) for stamps in cue.stamps]
                placed[index] = translated if cue.dialogue else split_lines(translated[0], len(cue.lines))
            else:
                shares = distribute(next(translations), [len(cue.inner or "") for cue in group])
                if shares is None:
                    alone.extend(range(index, index + len(group)))
                else:
                    for offset, (cue, share) in enumerate(zip(group, shares, strict=True)):
                        opening, closing = cue.wrapper
                        placed[index + offset] = [
                            opening + line + closing for line in split_lines(share, len(cue.lines))
                        ]
            index += len(group)
        if alone:
            again = translate([cues[k].texts[0] for k in alone])
            for k, text_k in zip(alone, again, strict=True):
                placed[k] = split_lines(text_k, len(cues[k].lines))
        for k in sorted(placed, reverse=True):  # from the end: a replacement never moves what is before it
            cue, new_lines = cues[k], placed[k]
            lines[cue.first_line : cue.first_line + len(cue.lines)] = [
                line + cue.line_end for line in new_lines
            ] + [""] * (len(cue.lines) - len(new_lines))
        result = "".join(lines)
        output.write_bytes(result.encode(encoding, errors="replace"))
        sent = texts + [cues[k].texts[0] for k in alone]
        return DocumentReport(
            segments=len(sent),
            characters=sum(len(t) for t in sent),
            extracted_text="\n\n".join("\n".join(c.lines) for c in cues),
            translated_text=result,
        )

    def _blocks(self, lines: list[str]) -> list[tuple[int, int]]:
        """The (start, end) line ranges of the file's blocks: runs of non-blank lines, cut before a line
        that starts another cue (see the module docstring). Linear in the lines."""
        blocks: list[tuple[int, int]] = []
        i, n = 0, len(lines)
        while i < n:
            if not lines[i].strip():
                i += 1
                continue
            start, timing = i, -1
            while i < n and lines[i].strip():
                line = lines[i]
                if self.webvtt and "-->" in line:
                    if i == start or (i == start + 1 and timing < 0 and start > 0):
                        timing = i
                    else:
                        break
                elif not self.webvtt and _TIMING.match(line):
                    if timing < 0:
                        timing = i
                    else:
                        if i - 1 > timing + 1 and lines[i - 1].strip().isdigit():
                            i -= 1  # the next cue's number
                        break
                i += 1
            blocks.append((start, i))
        return blocks

    def _cues(self, lines: list[str]) -> list[_Cue]:
        """The cues whose text is translated, in file order (the line lists are not changed)."""
        cues: list[_Cue] = []
        counter = [_inline.first_free_id("".join(lines))]
        for number, (start, stop) in enumerate(self._blocks(lines)):
            block = [line.rstrip("\r\n") for line in lines[start:stop]]
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
            inner, wrapper = (None, ("", "")) if dialogue else _unwrapped(body)
            cues.append(
                _Cue(
                    first_line=start + timing + 1,
                    lines=body,
                    line_end=line_end,
                    dialogue=dialogue,
                    texts=[m[0] for m in masked],
                    stamps=[m[1] for m in masked],
                    block=number,
                    inner=inner,
                    wrapper=wrapper,
                )
            )
        return cues


def _sentence_groups(cues: list[_Cue]) -> list[list[_Cue]]:
    """The cues in runs translated as one text: a sentence running over neighbouring plain cues."""
    groups: list[list[_Cue]] = []
    size = 0
    for cue in cues:
        if groups:
            last = groups[-1][-1]
            if (
                last.inner is not None
                and cue.inner is not None
                and last.wrapper == cue.wrapper
                and not last.ends_sentence
                and _continues(last.inner or "", cue.inner)
                and cue.block == last.block + 1
                and len(groups[-1]) < MAX_SENTENCE_CUES
                and size + 1 + len(cue.inner) <= MAX_SENTENCE_CHARS
            ):
                groups[-1].append(cue)
                size += 1 + len(cue.inner)
                continue
        groups.append([cue])
        size = len(cue.texts[0])
    return groups


def _continues(text: str, after: str) -> bool:
    """Whether ``after`` goes on with the sentence ``text`` leaves open: it starts with a lower-case letter
    (or one of a script without case), or ``text`` ends with a comma or a dash (``Ron`` after ``When six
    struck,``). A capital after no punctuation is taken for a new line of its own (titles, credits)."""
    letter = _LETTER.search(after)
    if letter is None:
        return False
    c = letter.group()
    return c.islower() or not c.isupper() or text.rstrip().endswith((",", "-", "\u2013", "\u2014"))


def _group_texts(group: list[_Cue]) -> list[str]:
    if len(group) == 1:
        return group[0].texts
    return [" ".join((cue.inner or "").strip() for cue in group)]


def _unwrapped(body: list[str]) -> tuple[str | None, tuple[str, str]]:
    """A cue's text without the style tags wrapping each of its lines, and those tags; (None, ...) when it
    holds other markup (then it is not joined with its neighbours)."""
    lines = [line.strip() for line in body]
    text = " ".join(lines)
    if _ESCAPES.search(text):
        return None, ("", "")  # a forced break or hard space belongs where its author put it, in this cue
    if not any(c in text for c in "<{"):
        return text, ("", "")
    found = [_WRAPPED.match(line) for line in lines]
    wrappers = {(m.group(1), m.group(3)) for m in found if m is not None}
    if None in found or len(wrappers) != 1:
        return None, ("", "")
    opening, closing = next(iter(wrappers))
    if closing != "".join(f"</{tag[1:]}" for tag in reversed(re.findall(r"<[ibu]>", opening))):
        return None, ("", "")
    return " ".join(m.group(2).strip() for m in found if m is not None), (opening, closing)


#: Scripts written without spaces between words (Thai, Lao, Tibetan, Myanmar, Khmer, CJK, kana): a line
#: may break between their characters.
_UNSPACED = re.compile(
    "[\u0e00-\u0eff\u0f00-\u0fff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uf900-\ufaff]"
)


def _tokens(text: str, wanted: int) -> list[tuple[str, str]]:
    """``text`` as (glue, piece) pairs: its words with a space before each; when there are fewer words than
    ``wanted``, words in scripts written without spaces are cut further before each of their letters
    (punctuation and combining marks stay with what is before them)."""
    words = text.split()
    if len(words) >= wanted:
        return [(" ", w) for w in words]
    out: list[tuple[str, str]] = []
    for word in words:
        if not _UNSPACED.search(word):
            out.append((" ", word))
            continue
        start = 0
        for index in range(1, len(word) + 1):
            if index == len(word) or (
                _UNSPACED.match(word, index) and unicodedata.category(word[index])[0] not in "MP"
            ):
                out.append((" " if start == 0 else "", word[start:index]))
                start = index
    return out


def distribute(text: str, weights: list[int]) -> list[str] | None:
    """``text`` cut into ``len(weights)`` non-empty pieces at word breaks, each about its weight's share of
    the length; None when it has too few words (or characters) to give each piece one. Linear."""
    count = len(weights)
    tokens = _tokens(text, count)
    if len(tokens) < count:
        return None
    ends: list[int] = []  # the length of the text up to the end of each token
    length = 0
    for index, (glue, piece) in enumerate(tokens):
        length += (len(glue) if index else 0) + len(piece)
        ends.append(length)
    total_weight = max(1, sum(weights))
    cuts: list[int] = []  # tokens in the pieces before each cut
    j, so_far = 0, 0
    for k in range(count - 1):
        so_far += weights[k]
        goal = length * so_far / total_weight
        low = (cuts[-1] if cuts else 0) + 1
        high = len(tokens) - (count - 1 - k)
        j = max(j, low)
        while j < high and abs(ends[j] - goal) <= abs(ends[j - 1] - goal):
            j += 1
        cuts.append(j)
    bounds = [0, *cuts, len(tokens)]
    pieces: list[str] = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        pieces.append(tokens[a][1] + "".join(glue + piece for glue, piece in tokens[a + 1 : b]))
    return pieces


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
