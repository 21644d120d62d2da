"""The ``fast`` tier's guards: cheap checks that a translation is plausibly a translation.

A guard that trips on a segment sends that segment again through the ``best`` route, and the result's
``warnings`` say which guard tripped. The checks, each on one segment:

* ``empty``: the output is empty while the source is not;
* ``untranslated``: the output equals a source that needed translating (it has letters, and is not only
  placeholders, numbers or a proper-noun-like single token);
* ``length_ratio``: output/source length outside ``LENGTH_RATIO_BOUNDS`` (wider where either side is
  written in a script without spaces) for sources of at least ``MIN_CHARS_FOR_RATIO`` characters;
* ``placeholders_lost``: a protected span (placeholder or glossary translation) is missing;
* ``numbers_lost``: a number of the source is missing from the output;
* ``wrong_language``: the output is confidently detected as a language other than the target;
* ``repetition``: a run of one to four words repeated ``REPEAT_LIMIT`` times or more in a row, which the
  source does not have (a decoder loop).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable

from dragoman.languages.types import Detection
from dragoman.translation.backends.base import spans_kept
from dragoman.translation.protection import find_numbers
from dragoman.translation.types import Pieces, Protected

LENGTH_RATIO_BOUNDS = (0.25, 4.0)
WIDE_LENGTH_RATIO_BOUNDS = (0.1, 8.0)
MIN_CHARS_FOR_RATIO = 20
MIN_LETTERS_FOR_LANGUAGE_CHECK = 20
WRONG_LANGUAGE_CONFIDENCE = 0.9
REPEAT_LIMIT = 4
GUARDS = (
    "empty",
    "untranslated",
    "length_ratio",
    "placeholders_lost",
    "numbers_lost",
    "wrong_language",
    "repetition",
)

_WORD = re.compile(r"\w+", re.UNICODE)


def _letters(text: str) -> int:
    return sum(1 for ch in text if ch.isalpha())


def _spaceless_script(text: str) -> bool:
    """True when a good share of the letters are Han, Kana, Hangul, Thai, Lao, Khmer or Myanmar."""
    spaceless = 0
    letters = 0
    for ch in text:
        if not ch.isalpha():
            continue
        letters += 1
        name = unicodedata.name(ch, "")
        if name.startswith(("CJK", "HIRAGANA", "KATAKANA", "HANGUL", "THAI", "LAO", "KHMER", "MYANMAR")):
            spaceless += 1
    return letters > 0 and spaceless / letters > 0.3


def _needs_translation(pieces: Pieces) -> bool:
    plain = "".join(p for p in pieces if not isinstance(p, Protected))
    words = _WORD.findall(plain)
    return _letters(plain) >= 3 and len([w for w in words if not w.isdigit()]) >= 2


def _has_runaway(text: str, source: str) -> bool:
    words = [w.lower() for w in _WORD.findall(text)]
    source_words = [w.lower() for w in _WORD.findall(source)]
    for size in range(1, 5):
        for start in range(len(words) - size * REPEAT_LIMIT + 1):
            gram = words[start : start + size]
            if all(words[start + k * size : start + (k + 1) * size] == gram for k in range(1, REPEAT_LIMIT)):
                if not _contains_run(source_words, gram):
                    return True
    return False


def _contains_run(words: list[str], gram: list[str]) -> bool:
    size = len(gram)
    run = gram * 2
    return any(words[i : i + 2 * size] == run for i in range(len(words) - 2 * size + 1))


def _numbers_lost(source: str, output: str) -> bool:
    wanted = Counter(find_numbers(source))
    have = Counter(find_numbers(output))
    return any(have[n] < count for n, count in wanted.items())


def check(
    pieces: Pieces,
    output: str,
    *,
    target: str,
    detect: Callable[[str], Detection] | None = None,
) -> list[str]:
    """The names of the guards ``output`` trips, as a translation of ``pieces`` into ``target``."""
    source = "".join(p.source if isinstance(p, Protected) else p for p in pieces)
    if not source.strip():
        return []
    tripped: list[str] = []
    if not output.strip():
        return ["empty"]
    if output.strip() == source.strip() and _needs_translation(pieces):
        tripped.append("untranslated")
    if len(source.strip()) >= MIN_CHARS_FOR_RATIO:
        low, high = (
            WIDE_LENGTH_RATIO_BOUNDS
            if _spaceless_script(source) or _spaceless_script(output)
            else LENGTH_RATIO_BOUNDS
        )
        ratio = len(output.strip()) / len(source.strip())
        if not low <= ratio <= high:
            tripped.append("length_ratio")
    if not spans_kept(pieces, output):
        tripped.append("placeholders_lost")
    if _numbers_lost(source, output):
        tripped.append("numbers_lost")
    if _has_runaway(output, source):
        tripped.append("repetition")
    if (
        detect is not None
        and "untranslated" not in tripped
        and _letters(output) >= MIN_LETTERS_FOR_LANGUAGE_CHECK
    ):
        found = detect(output)
        if (
            found.flores is not None
            and found.confidence >= WRONG_LANGUAGE_CONFIDENCE
            and found.flores.split("_")[0] != target.split("_")[0]
        ):
            tripped.append("wrong_language")
    return tripped
