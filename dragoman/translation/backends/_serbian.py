"""Serbian's two alphabets, letter for letter: Apertium's Serbo-Croatian reads and writes Latin script,
FLORES-200 has Serbian in Cyrillic (``srp_Cyrl``).

Cyrillic to Latin is exact (one letter to one or two: ``љ`` -> ``lj``). Latin to Cyrillic reads the
digraphs ``lj``, ``nj`` and ``dž`` as one letter, which is right but for a few compounds across a
morpheme boundary (``nadživeti``); ``dj`` stays two letters (``đ`` is the letter). Both are single
left-to-right passes over the text (linear), leaving every character outside the alphabet untouched.
"""

from __future__ import annotations

import re

_CYRL = "абвгдђежзијклљмнњопрстћуфхцчџш"
_LATN = "a b v g d đ e ž z i j k l lj m n nj o p r s t ć u f h c č dž š".split()

_TO_LATN: dict[str, str] = {}
for _c, _l in zip(_CYRL, _LATN, strict=True):
    _TO_LATN[_c] = _l
    _TO_LATN[_c.upper()] = _l.upper() if len(_l) == 1 else _l[0].upper() + _l[1:]
_TO_LATN_TABLE = str.maketrans(_TO_LATN)
# A capital digraph inside a word in capitals is all capitals: ЉУБЉАНА -> LJUBLJANA, not LjUBLjANA.
_CAPITAL_DIGRAPH = re.compile(r"(Lj|Nj|Dž)(?=[A-ZČĆŽŠĐ])|(?<=[A-ZČĆŽŠĐ])(Lj|Nj|Dž)")

_TO_CYRL: dict[str, str] = {}
for _c, _l in zip(_CYRL, _LATN, strict=True):
    _TO_CYRL[_l] = _c
    _TO_CYRL[_l.capitalize()] = _c.upper()
    _TO_CYRL[_l.upper()] = _c.upper()
# Longest first, so that the digraphs win over their letters.
_LATN_LETTER = re.compile("|".join(sorted(map(re.escape, _TO_CYRL), key=len, reverse=True)))


def cyrl_to_latn(text: str) -> str:
    """Serbian Cyrillic -> Latin (``Ђорђе`` -> ``Đorđe``); other characters as they are."""
    return _CAPITAL_DIGRAPH.sub(lambda m: m.group(0).upper(), text.translate(_TO_LATN_TABLE))


def latn_to_cyrl(text: str) -> str:
    """Serbian Latin -> Cyrillic (``Ljubljana`` -> ``Љубљана``); other characters as they are."""
    return _LATN_LETTER.sub(lambda m: _TO_CYRL[m.group(0)], text)
