"""Word-timed cues that people can read: words (with their times) in, subtitle cues out.

:func:`build_cues` groups recognised words into cues and :func:`wrap_lines` lays a cue's text out in lines.
The rules, each a field of :class:`CueRules`, and where they come from. References: the Netflix Timed Text
Style Guide (General Requirements, and the English (USA) guide) and the BBC Subtitle Guidelines
(bbc.co.uk/accessibility/forproducts/guides/subtitles; section numbers below):

- **At most 2 lines** (``max_lines``). Netflix: "2 lines maximum", and text is kept on one line unless it
  exceeds the character limit; BBC 3.3 "Avoid 3 lines or more".
- **At most 42 characters a line** (``max_line_chars``). Netflix's English guides: 42 characters per line;
  BBC 3.1 bounds the line at 68% of a 16:9 picture's width (about 37 characters), stricter. Width is counted
  in columns: East Asian wide and full-width characters (CJK, kana, Hangul) count two, so a line of Chinese
  holds 21 (Netflix's Chinese and Japanese guides allow fewer: pass a smaller ``max_line_chars`` there). A
  single word longer than a line keeps its own line (it is never cut).
- **1 to 7 seconds on screen** (``min_duration``, ``max_duration``). Netflix: minimum 5/6 of a second,
  maximum 7 seconds per subtitle event; BBC 4.1 sets target minimum timings. A cue shorter than
  ``min_duration`` is held on screen into the silence after it, as far as the next cue allows (Netflix lets
  the out-time run past the end of the audio for reading speed); a cue never runs past ``max_duration``,
  except a single word that is itself spoken for longer.
- **Reading speed at most 20 characters a second** (``max_cps``). Netflix English (USA): up to 20 characters
  per second for adult programmes (17 for children's, and for the English template); BBC 160-180 words a
  minute. Splitting cannot slow speech down: a cue faster than this is held on screen into the following
  silence (up to ``max_duration`` and the next cue's gap) until its reading speed is within the rule, where
  the silence allows.
- **A gap of at least 80 ms between cues** (``min_gap``). Netflix: a frame gap of "2 frames minimum" (83 ms
  at 24 fps); BBC 4.5 on gaps between subtitles. A cue's end is pulled back from the next cue's start when
  the words run on without a pause; cues never overlap.
- **Breaks where the speech breaks** (``pause_split``). A cue ends at the end of a sentence (``.``,
  ``!``, ``?``, ``…``, ``。！？``) and at a pause of ``pause_split`` seconds or more (BBC 3.2: a subtitle
  should hold a single sentence; BBC 5.1: match the subtitle to the pace of speaking). When a cue would run
  over two lines or seven seconds it is ended at the last phrase boundary in it (after a comma, semicolon,
  colon or dash, or before a conjunction such as "and", "but", "because", "que", "und", "et": BBC 3.4
  "Break at natural points") that leaves at least a third of a cue before it, else before the word that
  did not fit. A cue that could not then stay on screen for ``min_duration`` before the next word (a quick
  "Yes." with more speech right after it) goes on with what follows instead (BBC 3.8 on short sentences).
- **Lines broken at phrase boundaries and balanced** (:func:`wrap_lines`). Netflix: a line is broken
  "after punctuation marks", "before conjunctions", "before prepositions"; BBC 3.4 the same. Of the breaks
  that fit, the most even pair of lines is taken, a phrase boundary counting for a fifth of a line of
  evenness, and a longer bottom line preferred to a longer top one.
- **Never split a word.** Lines and cues break only between words; in scripts written without spaces (CJK,
  Thai, Lao, Khmer, Myanmar, Tibetan) a line may break between characters, as those scripts' own subtitling
  does.
- **Silence and music stay empty.** Cues are made only from words: where nothing was said there is no cue.

Times are float seconds. Words keep their order; every word (with its text stripped) is in exactly one cue.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

#: Characters that end a sentence (the last character of a word, after closing quotes and brackets).
SENTENCE_END = frozenset(".!?…。！？")
_CLOSERS = "\"'”’»)]」』"
#: Punctuation after which a phrase ends (a line or a cue may break after it).
_PHRASE_END = frozenset(",;:–—、，；：")
#: Punctuation that is written against the word before it (a word made only of it joins with no space).
_ATTACHED = frozenset(".,!?;:…)]}»”%、。，！？；：」』")
#: Words before which a phrase starts (conjunctions and a few relative pronouns) in the languages most
#: subtitled; lower case, without punctuation.
CONJUNCTIONS = frozenset(
    {
        # English
        "and", "but", "or", "nor", "so", "because", "although", "though", "while", "whereas", "which",
        "who", "whom", "whose", "that", "when", "where", "if", "unless", "until", "since", "then",
        # Spanish, Portuguese, Catalan
        "y", "e", "o", "u", "pero", "porque", "que", "aunque", "mientras", "cuando", "donde", "si",
        "mas", "ou", "porém", "quando", "onde", "embora",
        # French
        "et", "mais", "parce", "lorsque", "quand", "qui", "puisque", "donc", "car",
        # German, Dutch
        "und", "aber", "oder", "weil", "dass", "wenn", "als", "denn", "sondern", "obwohl", "en", "maar",
        "omdat", "dat",
        # Italian
        "ma", "perché", "che", "mentre", "oppure", "anche",
    }
)  # fmt: skip
#: Scripts written without spaces between words: a line may break between their characters.
_UNSPACED = re.compile(
    "[\u0e00-\u0eff\u0f00-\u0fff\u1000-\u109f\u1780-\u17ff\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]"
)
#: The shortest a cue is kept on screen when the next cue presses on it (its start moves later instead).
MIN_SPAN = 0.2


@dataclass(frozen=True)
class Word:
    """A word and when it was spoken (seconds); ``probability`` is the recogniser's confidence (0-1)."""

    text: str
    start: float
    end: float
    probability: float = 1.0


@dataclass(frozen=True)
class Cue:
    """One subtitle: on screen from ``start`` to ``end`` (seconds), its ``lines`` top to bottom."""

    start: float
    end: float
    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        """The lines joined: with a space, or with nothing between scripts written without spaces."""
        return join_texts(self.lines)

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class CueRules:
    """The rules cues are built to (see the module docstring for each rule's reference)."""

    max_line_chars: int = 42
    max_lines: int = 2
    min_duration: float = 1.0
    max_duration: float = 7.0
    max_cps: float = 20.0
    min_gap: float = 0.08
    pause_split: float = 0.6
    #: words that start a phrase (a line or cue may break before them)
    conjunctions: frozenset[str] = field(default=CONJUNCTIONS, repr=False)

    def __post_init__(self) -> None:
        if self.max_line_chars < 1 or self.max_lines < 1:
            raise ValueError("max_line_chars and max_lines must be at least 1")
        if not 0 < self.min_duration <= self.max_duration:
            raise ValueError("durations must satisfy 0 < min_duration <= max_duration")
        if self.max_cps <= 0 or self.min_gap < 0 or self.pause_split <= 0:
            raise ValueError("max_cps and pause_split must be positive, min_gap not negative")


# ----- text measures ------------------------------------------------------------------------------------
def width(text: str) -> int:
    """Columns ``text`` takes on screen: East Asian wide and full-width characters count two, combining
    marks and format characters none, the rest one."""
    if text.isascii():
        return len(text)
    total = 0
    for ch in text:
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            continue
        total += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return total


def unspaced(ch: str) -> bool:
    """Whether ``ch`` is of a script written without spaces between words."""
    return bool(_UNSPACED.match(ch))


def _glue(left: str, right: str) -> str:
    """What goes between two pieces of text: nothing between two unspaced characters or before attached
    punctuation, else a space."""
    if not left or not right:
        return ""
    if right[0] in _ATTACHED and len(right.rstrip("".join(_ATTACHED))) == 0:
        return ""
    if unspaced(left[-1]) and unspaced(right[0]):
        return ""
    return " "


def join_texts(pieces: Iterable[str]) -> str:
    """Pieces (words or lines) joined as they are written: see :func:`_glue`."""
    out = ""
    for piece in pieces:
        if piece:
            out += _glue(out, piece) + piece
    return out


def ends_sentence(text: str) -> bool:
    stripped = text.rstrip().rstrip(_CLOSERS)
    return bool(stripped) and stripped[-1] in SENTENCE_END


def _ends_phrase(text: str) -> bool:
    stripped = text.rstrip().rstrip(_CLOSERS)
    return bool(stripped) and (stripped[-1] in _PHRASE_END or stripped.endswith(("-", " -")))


def _starts_phrase(text: str, rules: CueRules) -> bool:
    bare = text.strip().strip("¿¡\"'“‘«(").rstrip(".,;:!?…").lower()
    return bare in rules.conjunctions


# ----- lines ---------------------------------------------------------------------------------------------
def _tokens(text: str) -> list[str]:
    """``text`` as pieces a line may break between: its words, and the characters of unspaced runs (with
    punctuation and combining marks kept on the character before them)."""
    out: list[str] = []
    for word in text.split():
        if word.isascii() or not any(unspaced(c) for c in word):
            out.append(word)
            continue
        start = 0
        for index in range(1, len(word) + 1):
            if index == len(word) or (
                (unspaced(word[index]) or unspaced(word[index - 1]))
                and unicodedata.category(word[index])[0] not in "MP"
            ):
                out.append(word[start:index])
                start = index
    return out


def _break_score(left: str, right: str, rules: CueRules) -> int:
    """How good a line break between tokens ``left`` and ``right`` is: 2 after a sentence end, 2 after
    phrase punctuation, 1 before a conjunction, 0 elsewhere."""
    if ends_sentence(left) or _ends_phrase(left):
        return 2
    if _starts_phrase(right, rules):
        return 1
    return 0


def wrap_lines(text: str, rules: CueRules | None = None) -> tuple[str, ...]:
    """``text`` laid out in lines of at most ``rules.max_line_chars`` columns: one line when it fits; else
    ``rules.max_lines`` lines when they can hold it, broken between words where the lines are most even,
    preferring phrase boundaries (a break after punctuation, or before a conjunction, may make lines up to
    a fifth of a line less even); else as many full lines as it takes (filled greedily). A word longer than
    a line has a line of its own. Empty text gives no lines."""
    rules = rules or CueRules()
    tokens = _tokens(text)
    if not tokens:
        return ()
    limit = rules.max_line_chars
    widths = [width(t) for t in tokens]
    glues = [0] + [len(_glue(tokens[i - 1], tokens[i])) for i in range(1, len(tokens))]
    whole_width = sum(widths) + sum(glues)
    if whole_width <= limit or len(tokens) == 1:
        return (join_texts(tokens),)
    if rules.max_lines >= 2:
        best: tuple[float, int] | None = None
        top_width = 0
        for k in range(1, len(tokens)):
            top_width += widths[k - 1] + (glues[k - 1] if k > 1 else 0)
            if top_width > limit and k > 1:
                break
            bottom_width = whole_width - top_width - glues[k]
            if bottom_width > limit and len(tokens) - k > 1:
                continue
            # evenness first; a phrase boundary is worth a fifth of a line; a slightly longer bottom line
            # (a pyramid) is preferred to a longer top line at equal evenness
            cost = abs(top_width - bottom_width) - limit / 5 * _break_score(tokens[k - 1], tokens[k], rules)
            cost += 0.5 if top_width > bottom_width else 0.0
            if best is None or cost < best[0]:
                best = (cost, k)
        if best is not None:
            k = best[1]
            return (join_texts(tokens[:k]), join_texts(tokens[k:]))
    return _greedy(tokens, limit)


def _greedy(tokens: Sequence[str], limit: int) -> tuple[str, ...]:
    lines: list[str] = []
    line = ""
    for token in tokens:
        candidate = line + _glue(line, token) + token
        if line and width(candidate) > limit:
            lines.append(line)
            line = token
        else:
            line = candidate
    if line:
        lines.append(line)
    return tuple(lines)


def fits(text: str, rules: CueRules) -> bool:
    """Whether ``text`` fits one cue: ``max_lines`` lines of ``max_line_chars`` columns."""
    if width(text) <= rules.max_line_chars:
        return True
    lines = wrap_lines(text, rules)
    return len(lines) <= rules.max_lines and all(width(line) <= rules.max_line_chars for line in lines)


# ----- cues ----------------------------------------------------------------------------------------------
def _clean(words: Iterable[Word]) -> list[Word]:
    """Words with their text stripped (empty ones dropped) and sane times: never negative, never before
    the word before, ``end >= start``."""
    out: list[Word] = []
    floor = 0.0
    for word in words:
        text = word.text.strip()
        if not text:
            continue
        start = word.start if math.isfinite(word.start) else floor
        start = max(start, floor)
        end = word.end if math.isfinite(word.end) else start
        end = max(end, start)
        out.append(Word(text, start, end, word.probability))
        floor = start
    return out


def _group(words: list[Word], rules: CueRules) -> list[list[Word]]:
    """Words in runs that each make one cue (see the module docstring)."""
    groups: list[list[Word]] = []
    current: list[Word] = []
    capacity = rules.max_line_chars * rules.max_lines
    for word in words:
        if current:
            last = current[-1]
            # a cue ends at a sentence end or a pause, when it can then stay up long enough
            room = word.start - current[0].start >= rules.min_duration + rules.min_gap
            if room and (ends_sentence(last.text) or word.start - last.end >= rules.pause_split):
                groups.append(current)
                current = [word]
                continue
            text = join_texts([*(w.text for w in current), word.text])
            too_long = not fits(text, rules)
            too_slow = word.end - current[0].start > rules.max_duration
            if too_long or too_slow:
                cut = _phrase_cut(current, word, rules, capacity)
                groups.append(current[:cut])
                current = [*current[cut:], word]
                # what moved over may itself be too long (rare: a long run without a phrase break)
                while len(current) > 1 and (
                    not fits(join_texts(w.text for w in current), rules)
                    or current[-1].end - current[0].start > rules.max_duration
                ):
                    groups.append(current[:-1])
                    current = current[-1:]
                continue
        current.append(word)
    if current:
        groups.append(current)
    return groups


def _phrase_cut(current: list[Word], word: Word, rules: CueRules, capacity: int) -> int:
    """Where to end the cue ``current`` when ``word`` does not fit: after the last phrase boundary that
    leaves at least a third of a cue (in characters or in time) before it, else before ``word``."""
    for k in range(len(current) - 1, 0, -1):
        if _ends_phrase(current[k - 1].text) or _starts_phrase(current[k].text, rules):
            before = join_texts(w.text for w in current[:k])
            long_enough = width(before) >= capacity / 3 or (
                current[k - 1].end - current[0].start >= rules.max_duration / 3
            )
            after_fits = fits(join_texts([*(w.text for w in current[k:]), word.text]), rules) and (
                word.end - current[k].start <= rules.max_duration
            )
            if long_enough and after_fits:
                return k
    return len(current)


def build_cues(words: Iterable[Word], rules: CueRules | None = None) -> list[Cue]:
    """Cues for ``words`` (in the order spoken) built to ``rules`` (see the module docstring)."""
    rules = rules or CueRules()
    groups = _group(_clean(words), rules)
    spans = [(g[0].start, g[-1].end) for g in groups]
    texts = [join_texts(w.text for w in g) for g in groups]
    cues: list[Cue] = []
    previous_end = -math.inf
    for index, (group_text, (first, last)) in enumerate(zip(texts, spans, strict=True)):
        start = max(first, previous_end + rules.min_gap, 0.0)
        # held long enough to be read: min_duration, and the reading speed, but never past max_duration
        wanted = max(rules.min_duration, width(group_text) / rules.max_cps)
        end = max(last, start + min(wanted, rules.max_duration))
        if index + 1 < len(spans):
            # the min gap before the next cue: pulled back (below the last word's end when the words run on)
            limit = spans[index + 1][0] - rules.min_gap
            if end > limit:
                end = max(limit, start + MIN_SPAN)
        if end <= start:
            end = start + MIN_SPAN
        cues.append(Cue(start, end, wrap_lines(group_text, rules)))
        previous_end = end
    return cues


def rule_violations(cue: Cue, next_cue: Cue | None = None, rules: CueRules | None = None) -> list[str]:
    """The rules ``cue`` breaks (empty when none), each as a short phrase: lines, line length, duration,
    reading speed, and the gap to (and overlap with) ``next_cue``. A single word longer than a line, or
    spoken for longer than the longest duration, is still reported: callers decide what the words allowed."""
    rules = rules or CueRules()
    found: list[str] = []
    if cue.end <= cue.start:
        found.append(f"ends at {cue.end:.3f} s, not after its start {cue.start:.3f} s")
    if len(cue.lines) > rules.max_lines:
        found.append(f"{len(cue.lines)} lines > {rules.max_lines}")
    found.extend(
        f"line of {width(line)} characters > {rules.max_line_chars}"
        for line in cue.lines
        if width(line) > rules.max_line_chars
    )
    duration = cue.end - cue.start
    if duration < rules.min_duration - 1e-6:
        found.append(f"on screen {duration:.3f} s < {rules.min_duration} s")
    if duration > rules.max_duration + 1e-6:
        found.append(f"on screen {duration:.3f} s > {rules.max_duration} s")
    if duration > 0 and width(cue.text) / duration > rules.max_cps + 1e-6:
        found.append(f"reading speed {width(cue.text) / duration:.1f} characters/s > {rules.max_cps}")
    if next_cue is not None:
        gap = next_cue.start - cue.end
        if gap < 0:
            found.append(f"overlaps the next cue by {-gap:.3f} s")
        elif gap < rules.min_gap - 1e-6:
            found.append(f"gap to the next cue {gap:.3f} s < {rules.min_gap} s")
    return found
