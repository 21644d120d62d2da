"""The FLORES-200 catalogue and code resolution: table invariants, round trips, user forms, errors."""

from __future__ import annotations

import re
import subprocess
import sys

import langcodes
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dragoman.errors import InvalidRequest, UnknownLanguage
from dragoman.languages import catalogue as languages
from dragoman.languages._flores200 import FLORES200
from dragoman.languages.types import Language

CODES = [row[0] for row in FLORES200]
FLORES_SHAPE = re.compile(r"^[a-z]{3}_[A-Z][a-z]{3}$")


# ----- the table ---------------------------------------------------------------------------------------


def test_table_has_204_unique_well_formed_codes() -> None:
    assert len(CODES) == 204
    assert len(set(CODES)) == 204
    assert all(FLORES_SHAPE.match(c) for c in CODES), [c for c in CODES if not FLORES_SHAPE.match(c)]
    # The two FLORES-200 languages NLLB-200 lacks, and Santali under its corrected script.
    assert {"arb_Latn", "min_Arab", "sat_Olck"} <= set(CODES)
    assert "sat_Beng" not in CODES


def test_all_languages_follow_the_table() -> None:
    langs = languages.all_languages()
    assert all(isinstance(lang, Language) for lang in langs)
    assert [lang.flores for lang in langs] == CODES
    assert languages.all_languages() is langs  # built once


def test_names_are_present_and_unique() -> None:
    names = [lang.name for lang in languages.all_languages()]
    assert all(n.strip() == n and n for n in names)
    assert len(set(names)) == len(names)


def test_bcp47_tags_are_unique_and_valid() -> None:
    tags = [lang.bcp47 for lang in languages.all_languages()]
    assert len(set(tags)) == len(tags)
    assert all(langcodes.tag_is_valid(t) for t in tags), [t for t in tags if not langcodes.tag_is_valid(t)]


def test_languages_with_two_scripts_carry_a_script_subtag() -> None:
    by_lang3: dict[str, list[Language]] = {}
    for lang in languages.all_languages():
        by_lang3.setdefault(lang.flores[:3], []).append(lang)
    multi = {k: v for k, v in by_lang3.items() if len(v) > 1}
    assert set(multi) == {"ace", "arb", "bjn", "kas", "knc", "min", "taq", "zho"}
    for rows in multi.values():
        scripted = [lang for lang in rows if langcodes.Language.get(lang.bcp47).script]
        assert len(scripted) >= len(rows) - 1  # at most one (arb_Arab as "ar") goes without
        for lang in scripted:
            assert langcodes.Language.get(lang.bcp47).script == languages.script_of(lang.flores)


@pytest.mark.parametrize("code", ["arb_Arab", "heb_Hebr", "urd_Arab", "pes_Arab", "ydd_Hebr", "ace_Arab"])
def test_rtl_languages(code: str) -> None:
    assert languages.get(code).rtl is True


@pytest.mark.parametrize("code", ["eng_Latn", "arb_Latn", "ace_Latn", "zho_Hans", "hin_Deva", "kas_Deva"])
def test_ltr_languages(code: str) -> None:
    assert languages.get(code).rtl is False


def test_rtl_flag_follows_the_script_everywhere() -> None:
    wrong = [
        lang.flores
        for lang in languages.all_languages()
        if lang.rtl != (languages.script_of(lang.flores) in languages.RTL_SCRIPTS)
    ]
    assert wrong == []


# ----- round trips -------------------------------------------------------------------------------------


@pytest.mark.parametrize("row", FLORES200, ids=CODES)
def test_bcp47_resolves_back_to_its_row(row: tuple[str, str, str, bool]) -> None:
    flores, bcp47, name, _ = row
    assert languages.resolve(bcp47) == flores
    assert languages.resolve(bcp47.upper()) == flores
    assert languages.resolve(bcp47.replace("-", "_")) == flores
    assert languages.resolve(name) == flores


@pytest.mark.parametrize("code", CODES)
def test_flores_code_resolves_to_itself(code: str) -> None:
    assert languages.resolve(code) == code
    assert languages.resolve(code.upper()) == code
    assert languages.resolve(code.replace("_", "-").lower()) == code
    assert languages.get(code).flores == code


@pytest.mark.parametrize("code", CODES)
def test_variants_for_contains_the_code(code: str) -> None:
    assert code in languages.variants_for(code[:3])


# ----- what users type ---------------------------------------------------------------------------------

FORMS = [
    ("ENG_LATN", "eng_Latn"),
    ("eng-Latn", "eng_Latn"),
    (" eng_Latn ", "eng_Latn"),
    ("eng", "eng_Latn"),
    ("spa", "spa_Latn"),
    ("arb", "arb_Arab"),
    ("en", "eng_Latn"),
    ("EN", "eng_Latn"),
    ("en-US", "eng_Latn"),
    ("en_GB", "eng_Latn"),
    ("pt-BR", "por_Latn"),
    ("zh", "zho_Hans"),
    ("zh-CN", "zho_Hans"),
    ("zh-TW", "zho_Hant"),
    ("zh-Hant", "zho_Hant"),
    ("zh-HK", "zho_Hant"),
    ("zh-Hans-CN", "zho_Hans"),
    ("zh_hant_tw", "zho_Hant"),
    ("sr", "srp_Cyrl"),
    ("sr-Cyrl", "srp_Cyrl"),
    ("nb", "nob_Latn"),
    ("no", "nob_Latn"),
    ("nn", "nno_Latn"),
    ("iw", "heb_Hebr"),
    ("he", "heb_Hebr"),
    ("in", "ind_Latn"),
    ("tl", "tgl_Latn"),
    ("fil", "tgl_Latn"),
    ("fa", "pes_Arab"),
    ("fa-AF", "prs_Arab"),
    ("prs", "prs_Arab"),
    ("ar", "arb_Arab"),
    ("ar-EG", "arb_Arab"),
    ("ar-Latn", "arb_Latn"),
    ("ms", "zsm_Latn"),
    ("sw", "swh_Latn"),
    ("uz", "uzn_Latn"),
    ("mn", "khk_Cyrl"),
    ("ne", "npi_Deva"),
    ("sq", "als_Latn"),
    ("ku", "kmr_Latn"),
    ("ku-Arab", "ckb_Arab"),
    ("yi", "ydd_Hebr"),
    ("om", "gaz_Latn"),
    ("mg", "plt_Latn"),
    ("ps", "pbt_Arab"),
    ("qu", "quy_Latn"),
    ("ay", "ayr_Latn"),
    ("az", "azj_Latn"),
    ("lv", "lvs_Latn"),
    ("et", "est_Latn"),
    ("ks", "kas_Arab"),
    ("ks-Deva", "kas_Deva"),
    ("kr", "knc_Latn"),
    ("gn", "grn_Latn"),
    ("kg", "kon_Latn"),
    ("or", "ory_Orya"),
    ("ace", "ace_Latn"),
    ("ajp", "ajp_Arab"),
    ("ger", "deu_Latn"),
    ("ko-Kore", "kor_Hang"),
    ("sat_Beng", "sat_Olck"),
    ("sat", "sat_Olck"),
    ("yue-HK", "yue_Hant"),
    ("French", "fra_Latn"),
    ("français", "fra_Latn"),
    ("Farsi", "pes_Arab"),
]


@pytest.mark.parametrize(("given_code", "expected"), FORMS)
def test_common_forms(given_code: str, expected: str) -> None:
    assert languages.resolve(given_code) == expected


def test_resolution_is_cached() -> None:
    languages.resolve("pt-PT")
    hits = languages._resolve.cache_info().hits
    assert languages.resolve("pt-PT") == "por_Latn"
    assert languages._resolve.cache_info().hits == hits + 1


def test_import_does_no_work() -> None:
    code = (
        "import sys, dragoman.languages.catalogue as m; "
        "print('langcodes' in sys.modules, m._index.cache_info().currsize)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "0"]


# ----- errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", ["sr-Latn", "srp_Latn", "sh", "sr_latn_RS"])
def test_serbian_in_latin_script_is_refused(code: str) -> None:
    with pytest.raises(UnknownLanguage) as info:
        languages.resolve(code)
    err = info.value
    assert "srp_Cyrl" in err.message and "Serbian" in err.message
    assert err.suggestions[:3] == ("srp_Cyrl", "bos_Latn", "hrv_Latn")
    assert err.given == code


@pytest.mark.parametrize(
    ("code", "variants"),
    [
        ("zh-Hani", ("zho_Hans", "zho_Hant")),
        ("en-Cyrl", ("eng_Latn",)),
        ("ace-Cyrl", ("ace_Arab", "ace_Latn")),
    ],
)
def test_missing_script_lists_the_variants(code: str, variants: tuple[str, ...]) -> None:
    with pytest.raises(UnknownLanguage) as info:
        languages.resolve(code)
    assert info.value.suggestions[: len(variants)] == variants
    assert all(v in info.value.message for v in variants)


@pytest.mark.parametrize(
    ("code", "expected"), [("engl", "eng_Latn"), ("englsh", "eng_Latn"), ("spanich", "spa_Latn")]
)
def test_unknown_codes_suggest_close_matches(code: str, expected: str) -> None:
    with pytest.raises(UnknownLanguage) as info:
        languages.resolve(code)
    err = info.value
    assert expected in err.suggestions
    assert expected in err.message
    assert "dragoman languages --all" in err.message
    assert err.given == code


@pytest.mark.parametrize(
    "code", ["xx", "x-klingon", "tlh", "und", "", "   ", "en--US", "a" * 500, "qqq-Zzzz"]
)
def test_unknown_codes_raise(code: str) -> None:
    with pytest.raises(UnknownLanguage) as info:
        languages.resolve(code)
    err = info.value
    assert isinstance(err, InvalidRequest)
    assert err.status == 400
    assert err.code == "unknown_language"
    assert "dragoman languages --all" in err.message
    assert len(err.suggestions) <= 5


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=24),
        st.from_regex(r"\A[A-Za-z]{1,8}([-_][A-Za-z0-9]{1,8}){0,3}\Z"),
    )
)
def test_resolve_returns_a_code_or_raises_unknown_language(code: str) -> None:
    # FLORES-200 codes, and the few languages Apertium reaches beyond them (issue 17: arg, bre, frp)
    known = {lang.flores for lang in languages.known_languages()}
    try:
        result = languages.resolve(code)
    except UnknownLanguage as err:
        assert all(s in known for s in err.suggestions)
    else:
        assert result in known


def test_get_wants_the_canonical_code() -> None:
    assert languages.get("eng_Latn").bcp47 == "en"
    for code in ("en", "eng_latn"):
        with pytest.raises(UnknownLanguage) as info:
            languages.get(code)
        assert info.value.suggestions == ("eng_Latn",)
    with pytest.raises(UnknownLanguage):
        languages.get("xx_Yyyy")


# ----- helpers -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("zh", ("zho_Hans", "zho_Hant")),
        ("ar", ("arb_Arab", "arb_Latn")),
        ("ks", ("kas_Arab", "kas_Deva")),
        ("kas", ("kas_Arab", "kas_Deva")),
        ("sr", ("srp_Cyrl",)),
        ("en", ("eng_Latn",)),
        ("fa", ("pes_Arab",)),
        ("min", ("min_Arab", "min_Latn")),
        ("xx", ()),
        ("tlh", ()),
        ("", ()),
    ],
)
def test_variants_for(code: str, expected: tuple[str, ...]) -> None:
    assert languages.variants_for(code) == expected


def test_script_of_and_nllb_token() -> None:
    assert languages.script_of("zho_Hant") == "Hant"
    assert languages.script_of("sat_Olck") == "Olck"
    with pytest.raises(UnknownLanguage):
        languages.script_of("zh")
    assert languages.nllb_token("sat_Olck") == "sat_Beng"
    assert languages.nllb_token("eng_Latn") == "eng_Latn"


def test_suggest_respects_the_limit() -> None:
    assert len(languages.suggest("arabic", limit=3)) == 3
    assert languages.suggest("arabic")[0] == "arb_Arab"
    assert languages.suggest("") == ()


@pytest.mark.parametrize("code", ["en\x00", "\x00", "e\x01n", "\udcff", "es\u200b"])
def test_control_and_invisible_characters_are_unknown(code: str) -> None:
    with pytest.raises(UnknownLanguage, match="control or invisible"):
        languages.resolve(code)
