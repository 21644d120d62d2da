"""Text before it is spoken: the length limit, markup, sentences (issue 14).

- **Limit**: at most :data:`~dragoman.limits.MAX_TTS_CHARS` (50,000) characters, counted before anything is
  removed; longer is :class:`~dragoman.errors.LimitExceeded` (400).
- **Markup**: SSML-like tags (``<speak>``, ``<break time="1s"/>``, ``<emphasis>…</emphasis>``, comments,
  ``<![CDATA[``) are not interpreted and never spoken: a tag is removed and leaves a word boundary, the text
  inside an element is kept, and the five XML entities (``&amp;`` …) and numeric references are decoded to
  the characters they name. Engines get plain text (espeak-ng runs without ``-m``, so a ``<`` that is left,
  as in ``3 < 4``, is read as the engine reads that character).
- **Sentences**: the text is cut after ``. ! ? …`` and their CJK, Arabic, Devanagari and Greek forms, and at
  blank lines; not after a known abbreviation (``Dr.``, ``e.g.``, ``z.B.`` …), a single initial (``J.``), a
  number's decimal point, or, in the languages that write ordinals with a dot (German ``am 3. Mai``, Czech,
  Finnish, Polish … :data:`_ORDINAL_DOT`), a number of one or two digits (a day or an ordinal; a year of
  four digits still ends a sentence). A sentence longer than :data:`MAX_SENTENCE_CHARS` is cut again at
  the last comma, semicolon or space before the bound, so one engine call stays short and streaming answers
  early.
- **Numbers, dates, currencies**: read by the engines' own text normalisation, which every engine served here
  has: espeak-ng (numbers, ordinals, currency symbols and dates in each of its languages), SVOX Pico (its six
  languages), flite and festival (English), and Piper voices (their phonemes come from ``espeak-ng --ipa``, so
  espeak-ng's normalisation). ``num2words`` (LGPL-2.1) is not used. Before that, :func:`normalise` only makes
  forms the engines misread unambiguous: an ISO date ``2024-03-05`` becomes ``2024 03 05`` ordered as the
  language writes dates (day month year in most; year month day in hu, lt, zh, ko, ja, sv), and a thousands
  separator between digit groups (``12,500``/``12.500``/``12 500``, by the language's convention) is removed
  so the engine reads one number. A currency sign by an amount (``€30``, ``30 €``, ``£5``, ``$2``) becomes
  the currency's word after it, in the number the amount asks for (:data:`_CURRENCY_WORDS`), in the
  languages whose engines here drop the sign: English (flite reads no ``€``, ``£`` or ``¥``; every English
  engine reads ``$``) and festival's
  Czech, Finnish, Catalan and Russian (their lexicons' encodings have no ``€``). Others keep the sign,
  which their engines read (espeak-ng, Pico).
"""

from __future__ import annotations

import html
import re
from typing import Final

from dragoman.errors import InvalidRequest, LimitExceeded
from dragoman.limits import MAX_TTS_CHARS

#: Longest piece handed to an engine in one call, in characters.
MAX_SENTENCE_CHARS: Final = 400

# Every part of this pattern stops at the next '<', so it runs in linear time whatever the text; comments and
# processing instructions (which may hold '<') are removed first by :func:`_remove_spans`, also linear.
_TAG = re.compile(
    r"<!\[CDATA\[|\]\]>"  # CDATA brackets (the text inside is kept)
    r"|<!(?:DOCTYPE|ENTITY)[^<>]*>"
    r"|</?[A-Za-z_][\w.:-]*(?:\s+[^<>]*?)?/?>",  # start, end and empty tags with attributes
    re.IGNORECASE,
)
_SPACES = re.compile(r"[ \t\u00a0\u2000-\u200b\u3000]+")

_ABBREVIATIONS: Final = frozenset(
    """mr mrs ms dr prof st jr sr vs etc e.g i.e cf fig no nr vol p pp approx ca dept est inc ltd co corp
    jan feb mar apr jun jul aug sep sept oct nov dec mon tue wed thu fri sat sun
    z.b d.h u.a usw bzw ggf evtl hr fr str sra sr srta dra ud uds av pág núm mme mlle cie art ing sig dott
    sig.ra avv p.ex n.º nº tel ok""".split()
)
_SENTENCE_END = re.compile(
    r"([.!?…؟।॥\u037e]+[\"'”’»)\]]*)(?:\s+|$)"  # an ender then a space or the end
    r"|([。！？]+[」』”）)]*)\s*"  # CJK enders need no space after them
    r"|\n\s*\n+"  # a blank line
)

#: Languages that write a date year month day (others: day month year).
_YMD: Final = frozenset({"hu", "lt", "zh", "ko", "ja", "sv", "lv"})
#: Languages whose thousands separator is '.', (',' elsewhere, and a space or no-break space in many).
_DOT_THOUSANDS: Final = frozenset(
    {"de", "es", "it", "nl", "pt", "da", "nb", "tr", "el", "id", "ro", "hr", "sl", "sr", "vi", "ca", "is"}
)
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
#: Languages that write an ordinal number with a dot after it (``3.`` is ``third``).
_ORDINAL_DOT: Final = frozenset(
    {"de", "da", "nb", "fi", "cs", "sk", "sl", "hr", "sr", "pl", "hu", "lv", "et", "is", "tr"}
)
_DAY_OR_ORDINAL = re.compile(r"(?:^|[\s(])\d{1,2}$")
#: Currency words by language and sign: (one, two to four, many). The form for a decimal amount is the
#: "two to four" one in Czech and Russian (genitive singular), "many" elsewhere.
_CURRENCY_WORDS: Final[dict[str, dict[str, tuple[str, str, str]]]] = {
    "en": {
        "€": ("euro", "euros", "euros"),
        "£": ("pound", "pounds", "pounds"),
        "¥": ("yen", "yen", "yen"),
    },
    "cs": {
        "€": ("euro", "eura", "eur"),
        "$": ("dolar", "dolary", "dolarů"),
        "£": ("libra", "libry", "liber"),
    },
    "fi": {"€": ("euro", "euroa", "euroa"), "$": ("dollari", "dollaria", "dollaria")},
    "ca": {
        "€": ("euro", "euros", "euros"),
        "$": ("dòlar", "dòlars", "dòlars"),
        "£": ("lliura", "lliures", "lliures"),
    },
    "ru": {
        "€": ("евро", "евро", "евро"),
        "$": ("доллар", "доллара", "долларов"),
        "£": ("фунт", "фунта", "фунтов"),
    },
}
_AMOUNT = r"\d+(?:[.,]\d+)?"
_SIGN_FIRST = re.compile(rf"([€£$¥])\s?({_AMOUNT})")
_SIGN_AFTER = re.compile(rf"({_AMOUNT})\s?([€£$¥])")


def _currency_word(amount: str, forms: tuple[str, str, str], language: str) -> str:
    """The currency's word for ``amount``: Slavic counting (1, 2-4, 5+ by the last digits) in Czech and
    Russian, one or many elsewhere."""
    one, few, many = forms
    if not amount.isdigit():  # a decimal amount
        return few if language in ("cs", "ru") else many
    n = int(amount[-6:])
    if language == "ru":
        if 11 <= n % 100 <= 14:
            return many
        return one if n % 10 == 1 else few if 2 <= n % 10 <= 4 else many
    if language == "cs":
        return one if n == 1 else few if 2 <= n <= 4 else many
    return one if n == 1 else many


def check_length(text: str) -> None:
    """The 50,000-character bound (before markup is removed: what the caller sent is what counts)."""
    if not isinstance(text, str):
        raise InvalidRequest("text must be a string")
    if len(text) > MAX_TTS_CHARS:
        raise LimitExceeded(
            f"the text has {len(text):,} characters; one render takes at most {MAX_TTS_CHARS:,}: split it"
        )


def _remove_spans(text: str, opener: str, closer: str) -> str:
    """``text`` without each ``opener … closer`` span (a space instead); an opener never closed is removed
    alone. One pass of ``str.find``: linear."""
    out: list[str] = []
    i = 0
    while True:
        j = text.find(opener, i)
        if j < 0:
            out.append(text[i:])
            break
        k = text.find(closer, j + len(opener))
        if k < 0:  # no span closes after here: only the openers go
            out.append(text[i:].replace(opener, " "))
            break
        out.append(text[i:j])
        out.append(" ")
        i = k + len(closer)
    return "".join(out)


def _untag(text: str) -> str:
    text = _remove_spans(text, "<!--", "-->")
    text = _remove_spans(text, "<?", "?>")
    return _TAG.sub(" ", text)


def strip_markup(text: str) -> str:
    """Tags removed (each leaves a space), entities decoded; what a listener should hear of ``text``."""
    # Entities after the tags: '&lt;speak&gt;' is text that shows a tag; decoded, the tag it spells out is
    # removed too, so nothing that looks like markup is ever spoken as one (escaped twice or thrice as well).
    text = _untag(text)
    for _ in range(3):
        decoded = html.unescape(text)
        if decoded == text:
            break
        text = _untag(decoded)
    return text


def normalise(text: str, language: str) -> str:
    """The forms engines misread made plain (module docstring); numbers themselves are left to the engine."""

    def date(match: re.Match[str]) -> str:
        year, month, day = match.groups()
        if not (1 <= int(month) <= 12 and 1 <= int(day) <= 31):
            return match.group(0)
        return f"{year} {month} {day}" if language in _YMD else f"{day} {month} {year}"

    text = _ISO_DATE.sub(date, text)
    sep = r"\." if language in _DOT_THOUSANDS else ","
    grouped = re.compile(rf"\b(\d{{1,3}})((?:{sep}\d{{3}})+)(?![\d])")
    text = grouped.sub(lambda m: m.group(1) + re.sub(r"\D", "", m.group(2)), text)
    text = re.sub(r"\b(\d{1,3})((?:[ \u00a0\u202f]\d{3})+)\b", lambda m: re.sub(r"\D", "", m.group(0)), text)
    words = _CURRENCY_WORDS.get(language)
    if words is not None:

        def spoken(amount: str, sign: str, whole: str) -> str:
            forms = words.get(sign)
            return whole if forms is None else f"{amount} {_currency_word(amount, forms, language)}"

        text = _SIGN_FIRST.sub(lambda m: spoken(m.group(2), m.group(1), m.group(0)), text)
        text = _SIGN_AFTER.sub(lambda m: spoken(m.group(1), m.group(2), m.group(0)), text)
    return text


def _is_abbreviation(before: str) -> bool:
    word = before.rsplit(None, 1)[-1] if before.strip() else ""
    word = word.rstrip(".").lstrip("([\"'«“").lower()
    if not word:
        return False
    if len(word) == 1 and word.isalpha():  # an initial: 'J. Smith'
        return True
    return word in _ABBREVIATIONS


def _cut_long(sentence: str) -> list[str]:
    pieces: list[str] = []
    rest = sentence
    while len(rest) > MAX_SENTENCE_CHARS:
        window = rest[:MAX_SENTENCE_CHARS]
        cut = max(window.rfind(","), window.rfind(";"), window.rfind("、"), window.rfind("，"))
        if cut < MAX_SENTENCE_CHARS // 3:
            cut = window.rfind(" ")
        if cut < MAX_SENTENCE_CHARS // 3:
            cut = MAX_SENTENCE_CHARS - 1
        pieces.append(rest[: cut + 1].strip())
        rest = rest[cut + 1 :]
    if rest.strip():
        pieces.append(rest.strip())
    return [p for p in pieces if p]


def split_sentences(text: str, language: str | None = None) -> list[str]:
    """``text`` (markup already removed) cut into sentences, each at most :data:`MAX_SENTENCE_CHARS` long;
    ``language`` decides whether ``3.`` may be an ordinal (module docstring)."""
    ordinals = language in _ORDINAL_DOT
    sentences: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        ender = match.group(1) or match.group(2)
        end = match.start() + len(ender) if ender else match.start()
        # only the word before the stop decides (a bounded look-back: linear however many are skipped)
        if match.group(1) == "." and _is_abbreviation(text[max(start, end - 40) : end - 1]):
            continue
        if (
            ordinals
            and match.group(1) == "."
            and match.end() < len(text)
            and "\n" not in match.group(0)
            and _DAY_OR_ORDINAL.search(text[max(start, end - 4) : end - 1])
        ):
            continue
        candidate = text[start:end]
        if candidate.strip():
            sentences.append(candidate)
        start = match.end()
    if text[start:].strip():
        sentences.append(text[start:])
    out: list[str] = []
    for sentence in sentences:
        flat = _SPACES.sub(" ", sentence.replace("\n", " ")).strip()
        if any(ch.isalnum() for ch in flat):  # a run of punctuation alone says nothing
            out.extend(_cut_long(flat))
    return out


def prepare(text: str, language: str) -> list[str]:
    """The sentences to speak: limit checked, markup removed, forms normalised, text cut; at least one."""
    check_length(text)
    sentences = split_sentences(normalise(strip_markup(text), language), language)
    if not sentences:
        raise InvalidRequest("the text has nothing to say (no letters or digits outside markup)")
    return sentences
