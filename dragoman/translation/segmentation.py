"""Split text into sentences for translation, keeping every byte of layout, and cut long sentences to fit.

:func:`segment` returns a :class:`Segmented`: the text as alternating parts, each either a sentence to
translate or a separator kept as it is (line breaks, indentation, the whitespace between sentences, list
markers, lines without a letter or digit). ``segment(text).rebuild(segment(text).sentences) == text``
for every string.

:func:`split_to_limit` cuts one sentence that is too long for a model's input into pieces that fit,
preferring clause boundaries, and never loses a character.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dragoman.errors import InvalidRequest, LimitExceeded

# --- characters -----------------------------------------------------------------------------------------

_LINE_BREAK = re.compile(r"\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_EDGE_SPACE = r"[\s\u200b\ufeff]"
_LEADING = re.compile(
    rf"{_EDGE_SPACE}*"
    # list markers and Markdown heading/quote marks stay out of the text a model sees
    r"(?:(?:[-*+•‣◦▪▫●○■□–—]|#{1,6}|>|\d{1,3}(?:\.\d{1,3})*[.)]|\(\d{1,3}\)|[A-Za-z]\))"
    rf"{_EDGE_SPACE}+)?"
)
#: The characters of ``_EDGE_SPACE`` (``\s`` is ``str.isspace``, all of it below U+3100), for
#: ``str.strip``: a search for ``_EDGE_SPACE+\Z`` would be quadratic in a run of inner whitespace.
_EDGE_CHARS = "".join(c for c in map(chr, range(0x3100)) if c.isspace()) + "\u200b\ufeff"
_ALNUM = re.compile(r"[^\W_]")

#: Sentence-final punctuation: Latin, CJK, Devanagari danda, Arabic/Urdu, Armenian, Ethiopic, Myanmar, Khmer.
_TERMINALS = ".!?…‼⁇⁈⁉。！？｡।॥؟۔։።፧။។"
#: Terminals that end a sentence even with no space after them (scripts written without spaces).
_DIRECT = "。！？｡။។"
_CLOSERS = "\"'”’»›)]}」』）］｝】〕〉》〗〙〛"
_OPENERS = "\"'“‘«‹„‚([{¿¡「『（［｛【〔〈《〖〘〚"
_BOUNDARY = re.compile(
    rf"(?P<term>[{re.escape(_TERMINALS)}]+)"
    rf"(?P<close>[{re.escape(_CLOSERS)}]*(?:[ \u00a0\u202f\u2009][»›](?=\s|\Z))?)"
    r"(?P<space>\s*)"
)
_UNSPACED = (
    "\u0e00-\u0eff\u0f00-\u0fff\u1000-\u109f\u1780-\u17ff\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029"
    "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0003134f"
)
_UNSPACED_CHAR = re.compile(f"[{_UNSPACED}]")

# --- abbreviations --------------------------------------------------------------------------------------

#: A period after these never ends a sentence, whatever their case (compared lower-cased, without the
#: period). Abbreviations usually followed by a number ("No. 5", "Fig. 3", "pp. 12") need no entry: a
#: digit after a period never starts a sentence.
_NEVER = frozenset(
    """mr mrs ms mx dr prof st mt vs cf viz e.g i.e approx ca pp nr bzw vgl ggf evtl z.b u.a d.h s.o s.u
    mme mlle mmes sra srta dra blvd""".split()
)
#: The same, compared exactly: these are also ordinary words when not capitalised ("the sun.", "el mar.").
_NEVER_CASED = frozenset(
    """Gen Col Capt Cmdr Lt Sgt Rev Hon Gov Sen Rep Pres Supt Fr Hr Frl Dipl Ing Sta Ud Uds Ave
    Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec Mon Tue Tues Wed Thu Thur Thurs Fri Sat Sun""".split()
)
#: A period after these ends a sentence only when a common sentence opener follows ("etc. Then").
_MAYBE = frozenset("etc inc ltd co corp jr sr bros llc plc usw a.m p.m min max est".split())
_INITIALISM = re.compile(r"(?:[^\W\d_]{1,2}\.)+[^\W\d_]{1,2}")
_ENUMERATOR = re.compile(r"\(?(?:\d{1,3}(?:\.\d{1,3})*|[A-Za-z]|[ivx]{1,5}|[IVX]{1,5})")
_STARTERS = frozenset(
    """The A An He She It They We I You This That These Those There Then But And So Yet Or In On At As By
    For From To After Before When While If Although Though Because Since My His Her Its Our Their Your
    What Who Why How Where Which Yes No Not However Also Thus Meanwhile Now Here Today Finally
    Der Die Das Er Sie Es Wir Ich Le La Les Il Elle Ils Nous Je El Los Las Ella""".split()
)
_WORD = re.compile(r"[^\W\d_]+")


@dataclass(frozen=True)
class Segmented:
    """A text as alternating parts; ``is_text[i]`` says whether ``parts[i]`` is a sentence to translate.

    Separators (``is_text`` False) are kept byte for byte; two sentences may also be adjacent (CJK).
    """

    parts: tuple[str, ...]
    is_text: tuple[bool, ...]

    def __post_init__(self) -> None:
        if len(self.parts) != len(self.is_text):
            raise InvalidRequest(
                f"Segmented needs one is_text flag per part, got {len(self.parts)} parts and "
                f"{len(self.is_text)} flags; build it with segment() rather than by hand"
            )

    @property
    def sentences(self) -> tuple[str, ...]:
        """The sentences to translate, in order."""
        return tuple(p for p, t in zip(self.parts, self.is_text, strict=True) if t)

    def rebuild(self, translations: Sequence[str]) -> str:
        """The text with each sentence replaced by its translation, separators untouched."""
        count = sum(self.is_text)
        if len(translations) != count:
            raise InvalidRequest(
                f"rebuild needs one translation per sentence: {count} sentence(s), {len(translations)} "
                "translation(s) given; pass exactly one string for each item of .sentences, in order"
            )
        it = iter(translations)
        return "".join(next(it) if t else p for p, t in zip(self.parts, self.is_text, strict=True))


class _Builder:
    """Collects parts, merging neighbouring separators and demoting letterless text to separators."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.is_text: list[bool] = []
        self.separator: list[str] = []  # the separator being collected, not yet in parts

    def add(self, part: str, is_text: bool) -> None:
        if not part:
            return
        if is_text and not _ALNUM.search(part):
            is_text = False
        if is_text:  # edge spaces, BOMs and zero-width spaces belong to the separators around a sentence
            core = part.strip(_EDGE_CHARS)
            at = len(part) - len(part.lstrip(_EDGE_CHARS))
            self.add(part[:at], False)
            self._append(core, True)
            self.add(part[at + len(core) :], False)
            return
        self._append(part, is_text)

    def _append(self, part: str, is_text: bool) -> None:
        if not part:
            return
        if not is_text:  # joined once in _flush: adding to a string each time is quadratic in a long run
            self.separator.append(part)
            return
        self._flush()
        self.parts.append(part)
        self.is_text.append(is_text)

    def _flush(self) -> None:
        if self.separator:
            self.parts.append("".join(self.separator))
            self.is_text.append(False)
            self.separator.clear()

    def result(self) -> Segmented:
        self._flush()
        return Segmented(tuple(self.parts), tuple(self.is_text))


def segment(text: str) -> Segmented:
    """Split ``text`` into sentences and the separators between them (see the module docstring).

    Every line break is a hard boundary; within a line, sentences end at ``. ! ? …`` (and their CJK,
    Devanagari, Arabic and other counterparts) followed by whitespace and a plausible sentence start,
    or directly for CJK full stops. Abbreviations, initials, decimals, versions, URLs, e-mail addresses
    and file names do not end a sentence.
    """
    out = _Builder()
    pos = 0
    for m in _LINE_BREAK.finditer(text):
        _segment_line(text[pos : m.start()], out)
        out.add(m.group(), False)
        pos = m.end()
    _segment_line(text[pos:], out)
    return out.result()


def _segment_line(line: str, out: _Builder) -> None:
    lead = _LEADING.match(line)
    start = lead.end() if lead else 0
    end = max(start, len(line.rstrip(_EDGE_CHARS)))
    out.add(line[:start], False)
    core = line[start:end]
    begin = 0
    alnum = _ALNUM.search(core)
    for m in _BOUNDARY.finditer(core):
        if alnum is None:
            break  # nothing left in the line worth a sentence of its own
        if alnum.start() >= m.start():
            continue
        cut = _boundary(core, begin, m)
        if cut is None:
            continue
        out.add(core[begin:cut], True)
        out.add(core[cut : m.end()], False)
        begin = m.end()
        alnum = _ALNUM.search(core, begin)
    out.add(core[begin:], True)
    out.add(line[end:], False)


def _boundary(core: str, begin: int, m: re.Match[str]) -> int | None:
    """Where the sentence that starts at ``begin`` ends if ``m`` (terminal punctuation) closes it."""
    after = m.end()
    if after >= len(core):
        return None
    term, close, space = m["term"], m["close"], m["space"]
    if not space:
        if term[-1] in _DIRECT and not close:
            return after
        if term[-1] in "!?" and not close and _UNSPACED_CHAR.match(core, after) and m.start() > 0:
            if _UNSPACED_CHAR.match(core, m.start() - 1):
                return after
        return None
    if not _plausible_start(core, after, allow_digit=term[-1] != "."):
        return None
    if term == "." and not close and not _period_ends(core, begin, m.start(), after):
        return None
    return m.end("close")


def _plausible_start(core: str, i: int, *, allow_digit: bool) -> bool:
    while i < len(core) and core[i] in _OPENERS:
        i += 1
    if i >= len(core):
        return False
    c = core[i]
    return (c.isalpha() and not c.islower()) or (allow_digit and c.isdigit())


def _period_ends(core: str, begin: int, dot: int, after: int) -> bool:
    """Whether a single period at ``dot``, followed by whitespace and a capital, ends the sentence."""
    start = dot
    while start > begin and not core[start - 1].isspace():
        start -= 1
    token = core[start:dot].lstrip(_OPENERS)
    low = token.lower()
    if low in _NEVER or token in _NEVER_CASED:
        return False
    if len(token) == 1 and token.isupper():  # an initial: "J. R. R. Tolkien"
        return False
    if _ENUMERATOR.fullmatch(core, begin, dot):  # "1. Buy milk", "iv. Results"
        return False
    if low in _MAYBE or _INITIALISM.fullmatch(token):
        i = after
        while i < len(core) and core[i] in _OPENERS:
            i += 1
        word = _WORD.match(core, i)
        return word is not None and word.group() in _STARTERS
    return True


# --- cutting long sentences -----------------------------------------------------------------------------

_CUT_LEVELS = (
    re.compile(r";\s+|；\s*"),
    re.compile(r":\s+|：\s*"),
    re.compile(r",\s+|،\s+|[，、]\s*"),
    re.compile(r"[—–]\s*|\s-\s+"),
    re.compile(r"\s+"),
)


def split_to_limit(text: str, count_tokens: Callable[[str], int], limit: int) -> list[str]:
    """Cut ``text`` into pieces with ``count_tokens(piece) <= limit``; ``"".join(pieces) == text``.

    Boundaries are preferred in this order: ``;``, ``:``, ``,``, dashes, whitespace, characters (never
    inside a combining sequence). Whitespace at a cut stays with the piece before it. Pieces are packed
    greedily, so each is as long as fits. Empty text gives no pieces.
    """
    if limit < 1:
        raise InvalidRequest(f"split_to_limit needs a token limit of at least 1, got {limit}")
    if not text:
        return []
    if count_tokens(text) <= limit:
        return [text]

    def fits(piece: str) -> bool:
        return count_tokens(piece) <= limit

    return _split(text, 0, fits, limit)


def _split(text: str, level: int, fits: Callable[[str], bool], limit: int) -> list[str]:
    if level >= len(_CUT_LEVELS):
        return _split_chars(text, fits, limit)
    cuts = [m.end() for m in _CUT_LEVELS[level].finditer(text) if 0 < m.end() < len(text)]
    if not cuts:
        return _split(text, level + 1, fits, limit)
    bounds = [0, *sorted(set(cuts)), len(text)]
    return _pack(text, bounds, fits, lambda unit: _split(unit, level + 1, fits, limit))


def _pack(
    text: str, bounds: list[int], fits: Callable[[str], bool], too_long: Callable[[str], list[str]]
) -> list[str]:
    """Join consecutive units (``text[bounds[i]:bounds[i+1]]``) greedily into pieces that fit.

    The number of units per piece is found by galloping then bisecting, so ``fits`` is called about
    log(units) times per piece rather than once per unit.
    """
    pieces: list[str] = []
    n = len(bounds) - 1
    i = 0
    while i < n:
        unit = text[bounds[i] : bounds[i + 1]]
        if not fits(unit):
            pieces.extend(too_long(unit))
            i += 1
            continue
        good, probe = 1, 2
        while i + probe <= n and fits(text[bounds[i] : bounds[i + probe]]):
            good, probe = probe, probe * 2
        bad = min(probe, n - i + 1)
        while bad - good > 1:
            mid = (good + bad) // 2
            if fits(text[bounds[i] : bounds[i + mid]]):
                good = mid
            else:
                bad = mid
        pieces.append(text[bounds[i] : bounds[i + good]])
        i += good
    return pieces


def _clusters(text: str) -> list[int]:
    """Start offsets of user-perceived characters (base plus combining marks, joiners, selectors)."""
    starts: list[int] = []
    for i, c in enumerate(text):
        if i > 0 and (
            unicodedata.category(c) in ("Mn", "Mc", "Me")
            or c == "\u200d"
            or text[i - 1] == "\u200d"
            or "\ufe00" <= c <= "\ufe0f"
            or "\U0001f3fb" <= c <= "\U0001f3ff"
        ):
            continue
        starts.append(i)
    return starts


def _split_chars(text: str, fits: Callable[[str], bool], limit: int) -> list[str]:
    bounds = [*_clusters(text), len(text)]

    def single(unit: str) -> list[str]:
        if len(unit) > 1:  # a cluster that does not fit: fall back to code points
            return _pack(unit, list(range(len(unit) + 1)), fits, single)
        raise LimitExceeded(
            f"the character {unit!r} alone takes more than {limit} token(s); the limit is too small to "
            "split text under it, raise it (NLLB models take 512)"
        )

    return _pack(text, bounds, fits, single)
