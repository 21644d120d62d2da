"""No forced capital at the start of a translation whose source starts in lower case (issue 11, item 3).

Models capitalise the first word of whatever they are given, as if every segment were a sentence. A
gettext msgid that begins with a placeholder (``%(num)d year``), an ICU continuation, a subtitle cue that
continues a sentence, a UI fragment: each came back with a capital. :func:`match_first_case` lowers the
first letter of a translation when the source's first letter is lower case, and only then:

- the source's first letter is its first cased letter outside placeholder spans (``%(num)d year``
  starts with ``y``); a glossary term counts as written (``cat`` is lower case, ``Cat`` is not); a source
  that starts with code (``setFillColor sets the colour``) starts a sentence, and is left alone;
- the translation's first letter is its first cased letter after leading punctuation, digits, spaces and
  placeholder outputs; a glossary output there decides its own case, and nothing is changed;
- it is left alone when it starts an all-caps word (``NASA``, ``OK``), a word with another capital inside
  (``McDonald``, ``iPhone``), English ``I``, or when the target capitalises nouns (German,
  Luxembourgish) and the word is not the source's own first word (``%(num)d Jahre`` keeps its noun).
"""

from __future__ import annotations

from collections.abc import Sequence

from dragoman.translation.identifiers import identifier_spans
from dragoman.translation.types import Pieces, Protected

#: Languages (ISO 639-3) that capitalise every noun: a capital at the start may be the noun's own.
NOUN_CAPITALS = frozenset({"deu", "ltz", "gsw", "bar", "nds"})
#: Languages (ISO 639-3) where dotted and dotless i are letters of their own: I lowers to ı, İ to i.
DOTLESS_I = frozenset({"tur", "aze", "crh", "tat", "kaz", "gag"})


def _first_source_letter(pieces: Pieces) -> tuple[str, str] | None:
    """The source's first cased letter outside placeholder spans, and the word it starts."""
    for piece in pieces:
        if isinstance(piece, Protected):
            if piece.kind == "placeholder":
                if _is_code(piece.source):
                    return None  # "setFillColor sets ...": the sentence starts with a name, as written
                continue
            text = piece.source
        else:
            text = piece
        for i, c in enumerate(text):
            if c.isalpha():
                if not (c.islower() or c.isupper() or c.istitle()):
                    return None  # a script without case: nothing to match
                return c, _word(text, i)
    return None


def _is_code(text: str) -> bool:
    return (0, len(text)) in identifier_spans(text)


def _word(text: str, start: int) -> str:
    end = start
    while end < len(text) and text[end].isalpha():
        end += 1
    return text[start:end]


def _lower(c: str, language: str) -> str:
    if language in DOTLESS_I and c in "Iİ":
        return "ı" if c == "I" else "i"
    if c == "İ":
        return "i"
    lowered = c.lower()
    return lowered if len(lowered) == 1 else c


def _start_of_translation(translation: str, outputs: Sequence[Protected]) -> int | None:
    """The offset of the translation's first cased letter, or None when it is not one to change (a
    glossary output or an uncased script comes first)."""
    placeholders = sorted({p.output for p in outputs if p.kind == "placeholder" and p.output}, key=len)
    glossary = [p.output for p in outputs if p.kind == "glossary" and p.output]
    i = 0
    n = len(translation)
    while i < n:
        if any(translation.startswith(g, i) for g in glossary):
            return None
        skip = next((len(o) for o in reversed(placeholders) if translation.startswith(o, i)), 0)
        if skip:
            i += skip
            continue
        c = translation[i]
        if c.isalpha():
            return i if (c.isupper() or c.istitle()) else None
        i += 1
    return None


def match_first_case(pieces: Pieces, translation: str, target: str) -> str:
    """``translation`` with its first letter lowered when the source (``pieces``) starts in lower case
    (see the module's docstring for when it is left as it is). ``target`` is a FLORES-200 code."""
    first = _first_source_letter(pieces)
    if first is None or not first[0].islower() or not translation:
        return translation
    at = _start_of_translation(translation, [p for p in pieces if isinstance(p, Protected)])
    if at is None:
        return translation
    word = _word(translation, at)
    rest = word[1:]
    if len(word) > 1 and word.isupper():
        return translation  # an acronym or an all-caps word
    if any(c.isupper() for c in rest):
        return translation  # McDonald, JavaScript: the capital belongs to the name
    language = target.split("_", 1)[0]
    if language == "eng" and word == "I":
        return translation
    if language in NOUN_CAPITALS and word.casefold() != first[1].casefold():
        return translation
    return translation[:at] + _lower(translation[at], language) + translation[at + 1 :]
