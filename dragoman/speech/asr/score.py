"""Word error rate (issue 15): how far a transcript is from what was said, for tests, the benchmark and
evaluation.

Both texts are normalised the same way (Unicode NFKC, case folded, split into runs of letters and digits:
punctuation, apostrophes and hyphens separate words; given the language, a number from 0 to 20 written in
digits is read as its word, as Whisper's own English normaliser does the other way round, so ``9`` heard for
``neun`` is no error), then compared word by word with the Levenshtein
distance (substitutions, deletions and insertions each cost one). WER = distance / reference words, so it
can exceed 1 when the hypothesis inserts many words; an empty reference gives 0 for an empty hypothesis and
1 otherwise.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

_WORD = re.compile(r"[^\W_]+")
#: The words of 0-20 in the languages whose speech is scored here (those of the SVOX Pico voices; French
#: 17-19 are two words once hyphens split them). Where a language has several forms of one (``ein``,
#: ``eins``), the counting form.
NUMBER_WORDS: dict[str, list[str]] = {
    "en": (
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty"
    ).split(" "),
    "de": (
        "null eins zwei drei vier fünf sechs sieben acht neun zehn elf zwölf dreizehn vierzehn fünfzehn "
        "sechzehn siebzehn achtzehn neunzehn zwanzig"
    ).split(" "),
    "es": (
        "cero uno dos tres cuatro cinco seis siete ocho nueve diez once doce trece catorce quince "
        "dieciséis diecisiete dieciocho diecinueve veinte"
    ).split(" "),
    "fr": (
        "zéro un deux trois quatre cinq six sept huit neuf dix onze douze treize quatorze quinze seize "
        "dix-sept dix-huit dix-neuf vingt"
    ).split(" "),
    "it": (
        "zero uno due tre quattro cinque sei sette otto nove dieci undici dodici tredici quattordici "
        "quindici sedici diciassette diciotto diciannove venti"
    ).split(" "),
}


def normalised_words(text: str, language: str | None = None) -> list[str]:
    """``text`` as the words WER compares: NFKC, case folded, letters and digits only; with a language of
    :data:`NUMBER_WORDS`, the numbers 0-20 in digits as their words."""
    words = _WORD.findall(unicodedata.normalize("NFKC", text).casefold())
    numbers = NUMBER_WORDS.get(language or "")
    if numbers is None:
        return words
    out: list[str] = []
    for word in words:
        if word.isascii() and word.isdigit() and word == str(int(word)) and int(word) < len(numbers):
            out.extend(_WORD.findall(numbers[int(word)]))
        else:
            out.append(word)
    return out


def edit_distance(reference: Sequence[str], hypothesis: Sequence[str]) -> int:
    """Word-level Levenshtein distance (O(len·len) time, O(len) memory)."""
    previous = list(range(len(hypothesis) + 1))
    for i, ref in enumerate(reference, 1):
        current = [i]
        for j, hyp in enumerate(hypothesis, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ref != hyp)))
        previous = current
    return previous[-1]


def word_error_rate(reference: str, hypothesis: str, language: str | None = None) -> float:
    """The word error rate of ``hypothesis`` against ``reference``, both in ``language`` when it is given
    (see the module docstring)."""
    ref, hyp = normalised_words(reference, language), normalised_words(hypothesis, language)
    if not ref:
        return 0.0 if not hyp else 1.0
    return edit_distance(ref, hyp) / len(ref)
