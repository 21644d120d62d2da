"""What the string-file formats need to know about languages and messages: gettext plural forms and
language codes, and ICU MessageFormat's ``{n, plural, ...}`` / ``{x, select, ...}`` blocks, whose branches
are messages of their own (translated one by one, the skeleton kept)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

_SLAVIC_EAST = (
    "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);"
)
#: gettext ``Plural-Forms`` by language subtag (the forms msginit and Launchpad use).
PLURAL_FORMS: dict[str, str] = {
    **dict.fromkeys("ja zh ko vi th id ms lo km my".split(), "nplurals=1; plural=0;"),
    **dict.fromkeys(
        "en de nl sv da nb nn no fi et it es ca gl eu el hu bg hi bn ur sw af sq az kk ky tr mn ne pa ta te "
        "ml kn mr gu si ps so eo fy lb ast ka he pt uz tk ha yo zu xh am".split(),
        "nplurals=2; plural=(n != 1);",
    ),
    **dict.fromkeys("fr oc fil tl ti ln mg hy fa".split(), "nplurals=2; plural=(n > 1);"),
    **dict.fromkeys("ru uk be sr hr bs".split(), _SLAVIC_EAST),
    "pl": "nplurals=3; plural=(n==1 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);",
    "cs": "nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;",
    "sk": "nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;",
    "lt": "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && (n%100<10 || n%100>=20) ? 1 : 2);",
    "lv": "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n != 0 ? 1 : 2);",
    "ro": "nplurals=3; plural=(n==1 ? 0 : (n==0 || (n%100 > 0 && n%100 < 20)) ? 1 : 2);",
    "sl": "nplurals=4; plural=(n%100==1 ? 0 : n%100==2 ? 1 : n%100==3 || n%100==4 ? 2 : 3);",
    "ga": "nplurals=5; plural=(n==1 ? 0 : n==2 ? 1 : n<7 ? 2 : n<11 ? 3 : 4);",
    "cy": "nplurals=4; plural=(n==1) ? 0 : (n==2) ? 1 : (n != 8 && n != 11) ? 2 : 3;",
    "mk": "nplurals=2; plural=(n==1 || n%10==1 ? 0 : 1);",
    "is": "nplurals=2; plural=(n%10!=1 || n%100==11);",
    "ar": "nplurals=6; plural=(n==0 ? 0 : n==1 ? 1 : n==2 ? 2 : n%100>=3 && n%100<=10 ? 3 "
    ": n%100>=11 ? 4 : 5);",
}
DEFAULT_PLURAL_FORMS = "nplurals=2; plural=(n != 1);"
_NPLURALS = re.compile(r"nplurals\s*=\s*(\d+)")
_SCRIPT_MODIFIERS = {"Latn": "latin", "Cyrl": "cyrillic", "Arab": "arabic", "Deva": "devanagari"}


def nplurals(plural_forms: str) -> int | None:
    m = _NPLURALS.search(plural_forms)
    return int(m.group(1)) if m else None


def gettext_language(bcp47: str) -> str:
    """gettext's spelling of a BCP-47 tag: ``pt-BR`` -> ``pt_BR``, ``zh-Hant`` -> ``zh_TW``,
    ``sr-Latn`` -> ``sr@latin``."""
    special = {"zh-Hans": "zh_CN", "zh-Hant": "zh_TW"}
    if bcp47 in special:
        return special[bcp47]
    parts = bcp47.split("-")
    language, modifier, region = parts[0], "", ""
    for part in parts[1:]:
        if len(part) == 4 and part.isalpha():
            modifier = "@" + _SCRIPT_MODIFIERS.get(part, part.lower())
        elif len(part) in (2, 3):
            region = "_" + part.upper()
    return language + region + modifier


# --- ICU MessageFormat ----------------------------------------------------------------------------------

_ICU_HEAD = re.compile(r"\{\s*[\w.]+\s*,\s*(?:plural|selectordinal|select)\s*,", re.S)
_ICU_SELECTOR = re.compile(r"\s*(?:offset:\s*\d+\s*)?(?:=\s*-?\d+|[\w-]+)\s*(?=\{)", re.S)


@dataclass
class Icu:
    """A plural/select block: literal pieces ("{n, plural, one {", "} other {", "}") around messages."""

    parts: list[str | Message]


#: A message: text and ICU blocks in order.
Message = list[str | Icu]


#: Deepest nesting of plural/select blocks read as blocks; deeper ones stay literal text of their branch.
MAX_ICU_NESTING = 16


def _brace_pairs(text: str) -> dict[int, int]:
    """Each ``{`` of ``text`` that is closed, and its ``}`` (depth counted from the opener), in one pass:
    finding them again for each opener made a text of many braces quadratic (issue 9, item 1)."""
    pairs: dict[int, int] = {}
    open_at: list[int] = []
    for m in _BRACES.finditer(text):
        if m.group() == "{":
            open_at.append(m.start())
        elif open_at:
            pairs[open_at.pop()] = m.start()
    return pairs


_BRACES = re.compile(r"[{}]")


def _icu_block(text: str, i: int, pairs: dict[int, int], depth: int) -> tuple[Icu, int] | None:
    end = pairs.get(i)
    if end is None or depth >= MAX_ICU_NESTING:
        return None
    head = _ICU_HEAD.match(text, i, end)
    if head is None:
        return None
    parts: list[str | Message] = []
    literal = text[i : head.end()]
    pos = head.end()
    while pos < end:
        selector = _ICU_SELECTOR.match(text, pos, end)
        if selector is None:
            break
        close = pairs.get(selector.end())
        if close is None or close > end:
            return None
        parts.append(literal + text[pos : selector.end() + 1])
        parts.append(_parse(text, selector.end() + 1, close, pairs, depth + 1))
        literal, pos = "}", close + 1
    if text[pos:end].strip() or not parts:
        return None
    parts.append(literal + text[pos : end + 1])
    return Icu(parts), end + 1


def parse_message(text: str) -> Message:
    """``text`` as plain text and ICU plural/select blocks (other braces stay in the text).

    Linear in the text: braces are paired once, and blocks nest at most :data:`MAX_ICU_NESTING` deep.
    """
    return _parse(text, 0, len(text), _brace_pairs(text), 0)


def _parse(text: str, lo: int, hi: int, pairs: dict[int, int], depth: int) -> Message:
    message: Message = []
    pos = start = lo
    while (i := text.find("{", pos, hi)) != -1:
        found = _icu_block(text, i, pairs, depth)
        if found is None:
            pos = i + 1
            continue
        block, after = found
        if i > start:
            message.append(text[start:i])
        message.append(block)
        pos = start = after
    if start < hi:
        message.append(text[start:hi])
    return message


def has_icu(message: Message) -> bool:
    return any(isinstance(p, Icu) for p in message)


def message_texts(message: Message, ids: Iterator[int]) -> Iterator[tuple[str, dict[int, Icu]]]:
    """The texts to translate for a message, outermost first: its text with each block as ``<n/>``, then
    each branch of each block (recursively)."""
    blocks: dict[int, Icu] = {}
    outer: list[str] = []
    for part in message:
        if isinstance(part, str):
            outer.append(part)
        else:
            number = next(ids)
            blocks[number] = part
            outer.append(f"<{number}/>")
    yield "".join(outer), blocks
    for block in blocks.values():
        for branch in block.parts:
            if not isinstance(branch, str):
                yield from message_texts(branch, ids)


def render_message(message: Message, ids: Iterator[int], translations: Iterator[str]) -> str:
    """The translated message: takes translations in the order :func:`message_texts` gave the texts
    (``ids`` must count from the same number); a block the outer translation lost is appended."""
    blocks: dict[int, Icu] = {}
    for part in message:
        if not isinstance(part, str):
            blocks[next(ids)] = part
    outer = next(translations)
    rendered = {
        number: "".join(
            p if isinstance(p, str) else render_message(p, ids, translations) for p in block.parts
        )
        for number, block in blocks.items()
    }
    if not blocks:
        return outer
    pieces: list[str] = []
    pos = 0
    for m in _PLACEHOLDER.finditer(outer):
        number = int(m.group(1))
        if number in rendered:
            pieces.append(outer[pos : m.start()])
            pieces.append(rendered.pop(number))
            pos = m.end()
    pieces.append(outer[pos:])
    return "".join(pieces) + "".join(rendered.values())


_PLACEHOLDER = re.compile(r"<(\d+)/>")
