"""The FLORES-200 language catalogue and the one function that turns what users type into a FLORES code.

:func:`resolve` accepts a FLORES code in any case and with ``_`` or ``-`` (``ENG_LATN``, ``eng-Latn``), an
ISO 639-1/2/3 code (``en``, ``eng``, ``ger``), a BCP-47 tag in any common form (``en_GB``, ``zh-Hant``,
``zh-TW``, ``iw``, ``no``) or, as a last resort, a language name (``French``, ``français``). BCP-47 work
is left to langcodes. Macrolanguages map to the FLORES member that stands for them (``ar`` -> ``arb``,
``fa`` -> ``pes``, ``zh`` -> ``zho``). The script is the tag's own when it has one, else the likely script
(``zh-TW`` -> ``zho_Hant``); a script FLORES-200 lacks for that language is an error, never silently
swapped (``sr-Latn``). Indexes are built on first use; resolutions are cached.
"""

from __future__ import annotations

import difflib
import functools
import logging
import unicodedata
from dataclasses import dataclass

from dragoman.errors import UnknownLanguage
from dragoman.languages._flores200 import ALIASES, FLORES200, NLLB_TOKENS
from dragoman.languages.types import Language

logger = logging.getLogger("dragoman.languages.catalogue")

#: Languages FLORES-200 lacks that Debian's Apertium pairs translate (arg-cat, spa-arg, br-fr, fra-frp), as
#: FLORES-style rows (ISO 639-3 and script). They resolve and are listed where a pack reaches them, but
#: :func:`all_languages` stays the 204 FLORES-200 rows; :func:`known_languages` adds them.
EXTRA_LANGUAGES: tuple[tuple[str, str, str, bool], ...] = (
    ("arg_Latn", "an", "Aragonese", False),
    ("bre_Latn", "br", "Breton", False),
    ("frp_Latn", "frp", "Arpitan", False),
)

RTL_SCRIPTS = frozenset({"Arab", "Hebr", "Thaa", "Syrc", "Nkoo"})
LIST_HINT = "`dragoman languages --all` lists every code"
MAX_CODE_LENGTH = 100

#: ISO 639-3 codes (langcodes' spelling) mapped to the FLORES-200 language that stands for them:
#: macrolanguages to their main member, siblings and newer codes to the code FLORES uses.
LANGUAGE_MAP: dict[str, str] = {
    "ara": "arb",
    "aym": "ayr",
    "aze": "azj",
    "cmn": "zho",
    "din": "dik",
    "ekk": "est",
    "zlm": "zsm",  # Apertium's Malay (ind-zlm): FLORES-200 writes Standard Malay as zsm
    "fas": "pes",
    "fil": "tgl",
    "ful": "fuv",
    "gug": "grn",
    "kau": "knc",
    "kng": "kon",
    "kur": "kmr",
    "lav": "lvs",
    "mlg": "plt",
    "mon": "khk",
    "msa": "zsm",
    "nep": "npi",
    "nor": "nob",
    "ori": "ory",
    "orm": "gaz",
    "pus": "pbt",
    "que": "quy",
    "sqi": "als",
    "swa": "swh",
    "tmh": "taq",
    "uzb": "uzn",
    "yid": "ydd",
}

#: (language subtag, script) -> FLORES language: a macrolanguage written in this script is another member.
SCRIPT_MAP: dict[tuple[str, str], str] = {("ku", "Arab"): "ckb", ("az", "Arab"): "azb"}
#: (language subtag, region) -> FLORES language.
REGION_MAP: dict[tuple[str, str], str] = {("fa", "AF"): "prs"}
#: Script subtags that name the same writing as the FLORES one.
SCRIPT_EQUIVALENTS: dict[str, str] = {
    "Kore": "Hang",
    "Aran": "Arab",
    "Hrkt": "Jpan",
    "Hira": "Jpan",
    "Kana": "Jpan",
}
#: Languages worth suggesting when a language exists in FLORES-200 but not in the script asked for.
RELATED: dict[str, tuple[str, ...]] = {"srp": ("bos_Latn", "hrv_Latn"), "yue": ("zho_Hans",)}
SCRIPT_NAMES: dict[str, str] = {
    "Arab": "Arabic",
    "Cyrl": "Cyrillic",
    "Deva": "Devanagari",
    "Hani": "Han (unspecified)",
    "Hans": "Simplified Chinese",
    "Hant": "Traditional Chinese",
    "Hebr": "Hebrew",
    "Latn": "Latin",
    "Tfng": "Tifinagh",
}


@dataclass(frozen=True)
class _Index:
    languages: tuple[Language, ...]
    extra: tuple[Language, ...]  # EXTRA_LANGUAGES
    by_flores: dict[str, Language]  # canonical code -> row
    by_key: dict[str, str]  # lower-case FLORES code with "-", alias or BCP-47 tag -> canonical code
    by_lang3: dict[str, tuple[str, ...]]  # ISO 639-3 -> FLORES codes, table order
    by_name: dict[str, str]  # folded English name -> canonical code


def _fold(text: str) -> str:
    """Lower case without accents: ``Māori`` -> ``maori``."""
    decomposed = unicodedata.normalize("NFKD", text.strip().lower())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


@functools.cache
def _index() -> _Index:
    languages = tuple(Language(flores=f, bcp47=b, name=n, rtl=r) for f, b, n, r in FLORES200)
    extra = tuple(Language(flores=f, bcp47=b, name=n, rtl=r) for f, b, n, r in EXTRA_LANGUAGES)
    by_key: dict[str, str] = {}
    lang3: dict[str, list[str]] = {}
    for lang in languages + extra:
        by_key[lang.flores.lower().replace("_", "-")] = lang.flores
        by_key[lang.bcp47.lower()] = lang.flores
        lang3.setdefault(lang.flores[:3], []).append(lang.flores)
    for alias, canonical in ALIASES:
        by_key[alias.lower().replace("_", "-")] = canonical
    return _Index(
        languages=languages,
        extra=extra,
        by_flores={lang.flores: lang for lang in languages + extra},
        by_key=by_key,
        by_lang3={k: tuple(v) for k, v in lang3.items()},
        by_name={_fold(lang.name): lang.flores for lang in languages + extra},
    )


def all_languages() -> tuple[Language, ...]:
    """The 204 FLORES-200 languages in table order."""
    return _index().languages


def known_languages() -> tuple[Language, ...]:
    """The FLORES-200 languages, then the few Apertium reaches beyond them (``EXTRA_LANGUAGES``)."""
    idx = _index()
    return idx.languages + idx.extra


def get(flores: str) -> Language:
    """The catalogue row of a canonical FLORES code (``eng_Latn``); :func:`resolve` anything else first."""
    lang = _index().by_flores.get(flores)
    if lang is not None:
        return lang
    try:
        resolved = resolve(flores)
    except UnknownLanguage as exc:
        raise UnknownLanguage(exc.message, given=flores, suggestions=exc.suggestions) from None
    raise UnknownLanguage(
        f"{flores!r} is not a canonical FLORES-200 code; use {resolved} ({get(resolved).name}). {LIST_HINT}.",
        given=flores,
        suggestions=(resolved,),
    )


def script_of(flores: str) -> str:
    """The ISO 15924 script of a canonical FLORES code: ``Latn`` for ``eng_Latn``."""
    return get(flores).flores.split("_", 1)[1]


def nllb_token(flores: str) -> str:
    """The NLLB-200 language token for a FLORES code (the same, except ``sat_Olck`` -> ``sat_Beng``)."""
    return dict(NLLB_TOKENS).get(flores, flores)


def resolve(code: str) -> str:
    """The canonical FLORES-200 code for a FLORES code, ISO 639 code, BCP-47 tag or language name.

    Raises :class:`UnknownLanguage` (HTTP 400) with close matches as ``suggestions``.
    """
    return _resolve(code.strip())


@functools.lru_cache(maxsize=2048)
def _resolve(code: str) -> str:
    if not code:
        raise UnknownLanguage(
            "A language code is required: a FLORES-200 code such as eng_Latn or a BCP-47 tag such as en; "
            f"{LIST_HINT}.",
            given=code,
        )
    if len(code) > MAX_CODE_LENGTH:
        raise UnknownLanguage(
            f"Language code is {len(code)} characters long; pass a FLORES-200 code such as eng_Latn. "
            f"{LIST_HINT}.",
            given=code[:MAX_CODE_LENGTH],
        )
    if not code.isprintable():
        # No code or name holds control characters; and a NUL makes langcodes' name trie read garbage.
        raise UnknownLanguage(
            f"Language code {code!r} holds control or invisible characters; pass a FLORES-200 code such as "
            f"eng_Latn or a BCP-47 tag such as en. {LIST_HINT}.",
            given=code,
        )
    idx = _index()
    found = idx.by_key.get(code.replace("_", "-").lower())
    if found is not None:
        return found
    parsed = _parse(code)
    if parsed is not None:
        return _choose(code, *parsed)
    found = idx.by_name.get(_fold(code)) or _find_by_name(code)
    if found is not None:
        return found
    raise _unknown(code)


def _parse(code: str) -> tuple[str, str | None, str | None] | None:
    """(ISO 639-3 of a FLORES language, explicit script, likely script) for a tag; None if it names none."""
    import langcodes

    try:
        raw = langcodes.Language.get(code.replace("_", "-"), normalize=False)
        tag = langcodes.Language.get(code.replace("_", "-"))
    except ValueError:  # LanguageTagError: not shaped like a tag at all
        return None
    by_lang3 = _index().by_lang3
    lang3 = _lang3_of(raw.language) if raw.language else None
    if lang3 is None and tag.language:
        lang3 = _lang3_of(tag.language)
    if lang3 is None or lang3 not in by_lang3:
        return None
    try:
        likely = tag.maximize().script
    except (LookupError, ValueError):
        likely = None
    script = SCRIPT_EQUIVALENTS.get(tag.script, tag.script) if tag.script else None
    language = tag.language or ""
    mapped = SCRIPT_MAP.get((language, script or likely or "")) or REGION_MAP.get(
        (language, tag.territory or "")
    )
    if mapped is not None and raw.language not in by_lang3:
        lang3 = mapped
    return lang3, script, likely


def _lang3_of(language: str) -> str | None:
    """The FLORES ISO 639-3 code for a language subtag, or None."""
    import langcodes

    by_lang3 = _index().by_lang3
    if language in by_lang3:
        return language
    if language in LANGUAGE_MAP:
        return LANGUAGE_MAP[language]
    try:
        alpha3 = langcodes.Language.get(language).to_alpha3()
    except (LookupError, ValueError):
        return None
    return LANGUAGE_MAP.get(alpha3, alpha3) if alpha3 else None


def _choose(code: str, lang3: str, script: str | None, likely: str | None) -> str:
    """The variant of ``lang3`` in the asked script, else in the likely one, else the first."""
    variants = _index().by_lang3[lang3]
    if script is not None:
        for flores in variants:
            if flores.endswith("_" + script):
                return flores
        raise _wrong_script(code, lang3, script)
    for flores in variants:
        if flores.endswith(f"_{likely}"):
            return flores
    return variants[0]


def _find_by_name(code: str) -> str | None:
    """A FLORES code for a language name langcodes knows (``French``, ``Deutsch``, ``Farsi``)."""
    import langcodes

    try:
        tag = langcodes.find(code)
    except (LookupError, ValueError):
        return None
    parsed = _parse(str(tag))
    if parsed is None:
        return None
    try:
        return _choose(code, *parsed)
    except UnknownLanguage:
        return None


def _describe(codes: tuple[str, ...]) -> str:
    by_flores = _index().by_flores
    return ", ".join(f"{c} ({by_flores[c].name})" for c in codes)


def _wrong_script(code: str, lang3: str, script: str) -> UnknownLanguage:
    variants = _index().by_lang3[lang3]
    related = RELATED.get(lang3, ())
    base = get(variants[0]).name.split(" (")[0]
    message = (
        f"FLORES-200 has {base} only as {' and '.join(variants)}, not in the "
        f"{SCRIPT_NAMES.get(script, script)} script that {code!r} asks for; the script is never changed "
        f"silently. Use {' or '.join(variants)}"
    )
    if related:
        message += f", or a closely related language: {_describe(related)}"
    logger.debug("no %s variant of %s for %r", script, lang3, code)
    return UnknownLanguage(f"{message}. {LIST_HINT}.", given=code, suggestions=variants + related)


def _unknown(code: str) -> UnknownLanguage:
    suggestions = suggest(code)
    if suggestions:
        hint = f"Did you mean {_describe(suggestions)}?"
    else:
        hint = "Use a FLORES-200 code such as eng_Latn or a BCP-47 tag such as en."
    return UnknownLanguage(
        f"Unknown language {code!r}: it names no FLORES-200 language. {hint} {LIST_HINT}.",
        given=code,
        suggestions=suggestions,
    )


def suggest(code: str, limit: int = 5) -> tuple[str, ...]:
    """Up to ``limit`` FLORES codes close to ``code``: by code prefix, by name, by spelling."""
    idx = _index()
    key = _fold(code).replace("_", "-")[:MAX_CODE_LENGTH]
    if not key:
        return ()
    names = [(_fold(lang.name), lang.flores) for lang in idx.languages + idx.extra]
    found: list[str] = []
    if len(key) >= 3:
        found += [flores for name, flores in names if name.startswith(key)]
        found += [
            lang.flores for lang in idx.languages + idx.extra if lang.flores.lower().startswith(key[:3])
        ]
    keys = {**idx.by_key, **idx.by_name}
    found += [keys[m] for m in difflib.get_close_matches(key, keys, n=limit, cutoff=0.75)]
    if len(key) >= 4:
        found += [flores for name, flores in names if key in name]
    return tuple(dict.fromkeys(found))[:limit]


def variants_for(code: str) -> tuple[str, ...]:
    """Every FLORES code of the language an ISO 639-1/3 code (or tag) names: ``zh`` -> zho_Hans, zho_Hant.

    Macrolanguages map as in :func:`resolve` (``ar`` -> arb_Arab, arb_Latn). Empty when FLORES-200 lacks it.
    """
    idx = _index()
    key = code.strip().replace("_", "-").lower()
    found = idx.by_key.get(key)
    if found is not None:
        return idx.by_lang3[found[:3]]
    if not key or len(key) > MAX_CODE_LENGTH:
        return ()
    parsed = _parse(code.strip())
    return idx.by_lang3[parsed[0]] if parsed is not None else ()
