"""Word error rate (issue 15): how far a transcript is from what was said, for tests, the benchmark and
evaluation.

Both texts are normalised the same way (Unicode NFKC, case folded, split into runs of letters and digits:
punctuation, apostrophes and hyphens separate words), then compared word by word with the Levenshtein
distance (substitutions, deletions and insertions each cost one). WER = distance / reference words, so it
can exceed 1 when the hypothesis inserts many words; an empty reference gives 0 for an empty hypothesis and
1 otherwise.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

_WORD = re.compile(r"[^\W_]+")


def normalised_words(text: str) -> list[str]:
    """``text`` as the words WER compares: NFKC, case folded, letters and digits only."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def edit_distance(reference: Sequence[str], hypothesis: Sequence[str]) -> int:
    """Word-level Levenshtein distance (O(len·len) time, O(len) memory)."""
    previous = list(range(len(hypothesis) + 1))
    for i, ref in enumerate(reference, 1):
        current = [i]
        for j, hyp in enumerate(hypothesis, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ref != hyp)))
        previous = current
    return previous[-1]


def word_error_rate(reference: str, hypothesis: str) -> float:
    """The word error rate of ``hypothesis`` against ``reference`` (see the module docstring)."""
    ref, hyp = normalised_words(reference), normalised_words(hypothesis)
    if not ref:
        return 0.0 if not hyp else 1.0
    return edit_distance(ref, hyp) / len(ref)
