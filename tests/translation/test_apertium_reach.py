"""Every Debian Apertium pair (issue 17, R1): discovery of each mode's FLORES languages (Serbo-Croatian as
Croatian, Bosnian and Serbian in Cyrillic; Aragonese, Breton, Arpitan beyond FLORES-200), the pairs
``dragoman packs available`` lists and the Makefile installs, and a sentence translated through every
installed pair (a pair not installed is skipped, saying how to install it), directly and through pivots.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from apertium_sentences import SENTENCES

from dragoman.errors import BackendError
from dragoman.languages import catalogue
from dragoman.settings import Settings
from dragoman.translation.backends._serbian import cyrl_to_latn, latn_to_cyrl
from dragoman.translation.backends.apertium import (
    UNUSABLE_MODES,
    ApertiumBackend,
    ApertiumMode,
    apertium_status,
    discover_modes,
    expand_mode,
    mode_commands,
    reformat,
)
from dragoman.translation.backends.apertium_packages import (
    DEBIAN_PAIRS,
    DEFAULT_PAIRS,
    apt_pairs,
    package_languages,
)
from dragoman.translation.engine import Engine
from dragoman.translation.routing import find_routes
from dragoman.translation.types import Hop, Protected, TranslateOptions

MODES_DIR = Path("/usr/share/apertium/modes")
ROOT = Path(__file__).resolve().parents[2]
HAVE_LT_PROC = shutil.which("lt-proc") is not None
_PACKAGE_DIR = re.compile(r"/usr/share/apertium/(apertium-[a-z_]+-[a-z_]+)/")
_ARTEFACTS = re.compile(r"[\\^$@#*]|<[a-z]+>")


def _system_packs() -> list[ApertiumMode]:
    return [m for m in discover_modes([MODES_DIR]) if m.is_pack] if HAVE_LT_PROC else []


def _package_of(mode: ApertiumMode) -> str | None:
    m = _PACKAGE_DIR.search(mode.path.read_text(encoding="utf-8"))
    return m.group(1) if m else None


# ----- languages ----------------------------------------------------------------------------------------
def test_every_debian_pair_code_names_flores_languages() -> None:
    for pair in DEBIAN_PAIRS:
        codes = package_languages(pair)
        assert len(codes) >= 2, pair
        assert all(catalogue.get(code).flores == code for code in codes), pair
    assert package_languages("hbs-eng") == ("hrv_Latn", "bos_Latn", "srp_Cyrl", "eng_Latn")
    assert package_languages("swe-nor") == ("swe_Latn", "nob_Latn", "nno_Latn")


def test_languages_beyond_flores_resolve_but_the_flores_table_stays_204() -> None:
    for code, flores in {"arg": "arg_Latn", "an": "arg_Latn", "br": "bre_Latn", "frp": "frp_Latn"}.items():
        assert catalogue.resolve(code) == flores
    assert catalogue.resolve("Breton") == "bre_Latn"
    assert catalogue.resolve("zlm") == "zsm_Latn"
    assert catalogue.resolve("ast") == "ast_Latn" and catalogue.resolve("oc") == "oci_Latn"
    assert catalogue.resolve("nno") == "nno_Latn" and catalogue.resolve("nob") == "nob_Latn"
    assert catalogue.resolve("szl") == "szl_Latn" and catalogue.resolve("srd") == "srd_Latn"
    assert len(catalogue.all_languages()) == 204
    extra = [lang.flores for lang in catalogue.known_languages()[204:]]
    assert extra == ["arg_Latn", "bre_Latn", "frp_Latn"]
    assert "bre_Latn" in catalogue.suggest("bre")


# ----- discovery ----------------------------------------------------------------------------------------
def test_serbo_croatian_modes_serve_croatian_bosnian_and_serbian(tmp_path: Path) -> None:
    into = {m.pack_id: m for m in expand_mode("hbs-eng", tmp_path / "hbs-eng.mode")}
    assert set(into) == {"apertium-hrv-eng", "apertium-bos-eng", "apertium-srp-eng"}
    assert into["apertium-srp-eng"].source == "srp_Cyrl" and into["apertium-srp-eng"].script_in == "Cyrl"
    assert into["apertium-hrv-eng"].script_in is None and all(m.is_pack for m in into.values())
    (sr,) = expand_mode("slv-hbs_SR", tmp_path / "slv-hbs_SR.mode")
    assert (sr.pack_id, sr.source, sr.target, sr.script_out) == (
        "apertium-slv-srp",
        "slv_Latn",
        "srp_Cyrl",
        "Cyrl",
    )
    assert sr.variant == "SR" and sr.standard and sr.is_pack
    (hr,) = expand_mode("mkd-hbs_HR", tmp_path / "x.mode")
    assert (hr.pack_id, hr.target, hr.script_out) == ("apertium-mkd-hrv", "hrv_Latn", None)
    assert expand_mode("eng-hbs", tmp_path / "x.mode") == []  # no standard in particular: no pack
    assert expand_mode("eng-hbs_XX", tmp_path / "x.mode") == []
    (br,) = expand_mode("br-fr", tmp_path / "br-fr.mode")
    assert (br.source, br.target, br.pack_id) == ("bre_Latn", "fra_Latn", "apertium-br-fr")


def test_discovery_skips_modes_without_their_data_and_the_unusable_ones(tmp_path: Path) -> None:
    data = tmp_path / "data.bin"
    data.write_text("x")
    (tmp_path / "ca-eo.mode").write_text(f"lt-proc '{tmp_path / 'absent.bin'}' | lt-proc -g '{data}'\n")
    (tmp_path / "eo-ca.mode").write_text(f"lt-proc '{data}' | lt-proc $1 {data}\n")
    (tmp_path / "hbs-slv.mode").write_text(f"lt-proc {data}\n")
    (tmp_path / "rus-ukr.mode").write_text(f"lt-proc {data}\n")  # Debian's tagger data crashes
    (tmp_path / "eng-hbs_HR.mode").write_text(f"lt-proc {data}\n")
    found = {m.pack_id: m for m in discover_modes([tmp_path])}
    assert set(found) == {"apertium-eo-ca", "apertium-hrv-slv", "apertium-bos-slv", "apertium-srp-slv"}
    status = apertium_status(list(found.values()), [tmp_path], True)
    assert set(status["left_out"]) == {"rus-ukr", "eng-hbs_HR"}
    assert "SIGSEGV" in status["left_out"]["rus-ukr"]
    assert "hrv_Latn->slv_Latn" in status["pairs"] and "srp_Cyrl->slv_Latn" in status["pairs"]


def test_a_mode_naming_its_pair_directory_the_other_way_round_finds_its_data(tmp_path: Path) -> None:
    # Debian's apertium-eo-ca: ca-eo.mode names apertium-eo-ca/ca-eo.*.bin, installed in apertium-ca-eo/.
    data = tmp_path / "apertium-ca-eo" / "ca-eo.automorf.bin"
    data.parent.mkdir()
    data.write_text("x")
    modes = tmp_path / "modes"
    modes.mkdir()
    named = tmp_path / "apertium-eo-ca" / "ca-eo.automorf.bin"
    (modes / "ca-eo.mode").write_text(f"lt-proc '{named}' | lt-proc $1 '{named}'\n")
    (mode,) = discover_modes([modes])
    assert mode.pack_id == "apertium-ca-eo"
    binaries = [arg for argv in mode_commands(mode.path) for arg in argv if arg.endswith(".bin")]
    assert binaries == [str(data), str(data)]


# ----- Serbian in Cyrillic --------------------------------------------------------------------------------
def test_serbian_transliteration_both_ways() -> None:
    assert cyrl_to_latn("Љубљана, Ђорђе, џеп, ЊЕГОШ") == "Ljubljana, Đorđe, džep, NJEGOŠ"
    assert latn_to_cyrl("Ljubljana, Đorđe, džep, NJEGOŠ") == "Љубљана, Ђорђе, џеп, ЊЕГОШ"
    text = "Кућа је велика и вода је хладна; шума, жаба, ћирилица, чаша, џем, њива, љуљашка."
    assert latn_to_cyrl(cyrl_to_latn(text)) == text
    assert latn_to_cyrl("x-ray 42 https://q.w") == "x-раy 42 хттпс://q.w"  # letters outside the alphabet stay


def test_the_cyrillic_rewrite_never_touches_a_protected_span() -> None:
    raw = "Kuća je [https://kuca.example/ulica] velika."
    out = reformat(raw, rewrite=latn_to_cyrl)
    assert out.text == "Кућа је https://kuca.example/ulica велика."


@pytest.mark.skipif(shutil.which("sed") is None, reason="GNU sed is needed for a fake pipeline")
def test_a_serbian_mode_reads_and_writes_cyrillic_around_a_latin_pipeline(tmp_path: Path) -> None:
    path = tmp_path / "slv-hbs_SR.mode"
    path.write_text("sed -u 's/hisa/kuća/g'\n", encoding="utf-8")  # a "translator" that sees Latin only
    mode = ApertiumMode("slv-hbs_SR", "srp_Cyrl", "srp_Cyrl", "SR", path, script_in="Cyrl", script_out="Cyrl")
    backend = ApertiumBackend(mode)
    try:
        (out,) = backend.translate_batch(
            [
                (
                    "хиса и ",
                    Protected("<b>Latin</b>", "Latin"),
                    " џем",
                )
            ],
            "srp_Cyrl",
            "srp_Cyrl",
        ).texts
    finally:
        backend.close()
    assert out == "кућа и Latin џем"


# ----- what the Makefile and `packs available` offer --------------------------------------------------------
def _make_list(name: str) -> list[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    m = re.search(rf"^{name} := ((?:.*\\\n)*.*)$", text, re.M)
    assert m is not None, name
    return m.group(1).replace("\\\n", " ").split()


def test_the_makefile_installs_the_same_pairs_as_the_package_lists() -> None:
    default = _make_list("APERTIUM_DEFAULT")
    assert default == [f"apertium-{p}" for p in DEFAULT_PAIRS]
    assert len(default) >= 20 and default[:6] == [
        f"apertium-{p}" for p in ("eng-spa", "eng-cat", "spa-cat", "es-pt", "fr-es", "spa-ita")
    ]
    everything = _make_list("APERTIUM_ALL")
    assert everything[0] == "$(APERTIUM_DEFAULT)"
    assert sorted(default + everything[1:]) == sorted(f"apertium-{p}" for p in DEBIAN_PAIRS)
    assert len(DEBIAN_PAIRS) == len(set(DEBIAN_PAIRS)) == 46
    assert "apertium $(APERTIUM_DEFAULT)" in (ROOT / "Makefile").read_text(encoding="utf-8")


def test_packs_available_lists_every_pair_with_its_install_command() -> None:
    pairs = apt_pairs()
    assert [p.pair for p in pairs] == list(DEBIAN_PAIRS)
    by_package = {p.package: p for p in pairs}
    assert by_package["apertium-br-fr"].languages == ("bre_Latn", "fra_Latn")
    assert by_package["apertium-eng-spa"].command == "sudo apt-get install apertium apertium-eng-spa"
    if shutil.which("dpkg-query") is not None:
        assert all(p.installed is not None for p in pairs)
        installed = {p.package for p in pairs if p.installed}
        for mode in _system_packs():
            package = _package_of(mode)
            if package in by_package:  # a mode from a package dpkg has is reported installed
                assert package in installed, (mode.name, package)


@pytest.mark.skipif(shutil.which("apt-cache") is None, reason="no apt-cache here to ask Debian")
def test_debian_has_every_listed_package() -> None:
    from dragoman.probes import run_program

    done = run_program("apt-cache", "show", "--no-all-versions", *[f"apertium-{p}" for p in DEBIAN_PAIRS])
    if done is None or "Package:" not in done.stdout:
        pytest.skip("apt-cache has no package lists here (apt-get update first)")
    shown = set(re.findall(r"^Package: (\S+)$", done.stdout, re.M))
    assert shown == {f"apertium-{p}" for p in DEBIAN_PAIRS}


# ----- real translations through every installed pair ------------------------------------------------------
@pytest.fixture(scope="module")
def system_packs() -> dict[str, list[ApertiumMode]]:
    by_package: dict[str, list[ApertiumMode]] = {}
    for mode in _system_packs():
        by_package.setdefault(_package_of(mode) or "?", []).append(mode)
    return by_package


@pytest.mark.slow
@pytest.mark.apertium
@pytest.mark.parametrize("pair", DEBIAN_PAIRS)
def test_a_sentence_through_every_installed_pair(
    pair: str, system_packs: dict[str, list[ApertiumMode]]
) -> None:
    package = f"apertium-{pair}"
    modes = system_packs.get(package, [])
    if not modes:
        pytest.skip(
            f"{package} is not installed: sudo apt-get install apertium {package} (or make apertium-all)"
        )
    for mode in modes:
        text = SENTENCES[mode.source]
        backend = ApertiumBackend(mode)
        try:
            (out,) = backend.translate_batch_detailed([(text,)], mode.source, mode.target)
        finally:
            backend.close()
        words = len(text.split())
        assert out.text.strip() and out.text != text, (mode.pack_id, out)
        assert not _ARTEFACTS.search(out.text), (mode.pack_id, out.text)
        assert len(out.unknown_words) <= words // 3, (mode.pack_id, out)
        if catalogue.script_of(mode.target) == "Cyrl":
            assert re.search("[а-яђјљњћџ]", out.text.lower()), (mode.pack_id, out.text)


@pytest.mark.slow
@pytest.mark.apertium
@pytest.mark.parametrize("stem", sorted(UNUSABLE_MODES))
def test_the_modes_left_out_are_still_broken(stem: str) -> None:
    path = MODES_DIR / f"{stem}.mode"
    if not HAVE_LT_PROC or not path.is_file():
        pytest.skip(f"{stem}.mode is not installed")
    source = catalogue.resolve(stem.split("-")[0])
    mode = ApertiumMode(stem, source, "hrv_Latn", None, path)
    text = SENTENCES[source]
    backend = ApertiumBackend(mode, timeout=10.0)
    try:
        (out,) = backend.translate_batch_detailed([(text,)], source, "hrv_Latn")
    except BackendError:
        return  # the pipeline dies on everything
    finally:
        backend.close()
    if out.untranslated:
        return  # the pipeline dies on the sentence (rus-*: the tagger crashes), which is left as written
    # Every word marked or left as a lemma with tags: when Debian fixes a pair, this fails; take it out of
    # UNUSABLE_MODES then.
    broken = len(out.unknown_words) > len(text.split()) // 3 or bool(_ARTEFACTS.search(out.text))
    assert broken or "clitic" in out.text, (stem, out)


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    with Engine(Settings.from_env()) as eng:
        yield eng


@pytest.mark.slow
@pytest.mark.apertium
@pytest.mark.parametrize(
    ("source", "target", "needs", "expect"),
    [
        ("bre_Latn", "spa_Latn", ("br-fr", "fr-es"), ("casa", "agua")),
        ("srp_Cyrl", "spa_Latn", ("hbs-eng", "eng-spa"), ("casa", "agua")),
        ("arg_Latn", "eng_Latn", ("arg-cat", "eng-cat"), ("big", "water")),
        ("slv_Latn", "srp_Cyrl", ("hbs-slv",), ("кућа", "вода")),
    ],
)
def test_pivot_routes_through_the_new_pairs(
    engine: Engine, source: str, target: str, needs: tuple[str, ...], expect: tuple[str, ...]
) -> None:
    installed = {p.pair for p in apt_pairs() if p.installed}
    missing = [f"apertium-{p}" for p in needs if p not in installed]
    if missing:
        pytest.skip(f"not installed: {' '.join(missing)} (sudo apt-get install apertium {' '.join(missing)})")
    result = engine.translate(SENTENCES[source], TranslateOptions(target, source=source))
    assert all(word in result.translation.lower() for word in expect), result
    assert all(hop.startswith("apertium-") for hop in result.route), result.route
    assert len(result.route) == len(needs) or len(result.route) <= 3, result.route


def test_routes_find_pivots_through_serbian_and_breton() -> None:
    edges = [
        Hop("apertium-br-fr", "apertium", "bre_Latn", "fra_Latn", 1, 1),
        Hop("apertium-fr-es", "apertium", "fra_Latn", "spa_Latn", 1, 1),
        Hop("apertium-srp-eng", "apertium", "srp_Cyrl", "eng_Latn", 1, 1),
        Hop("apertium-eng-spa", "apertium", "eng_Latn", "spa_Latn", 1, 1),
    ]
    (route,) = find_routes(edges, "bre_Latn", "spa_Latn")
    assert [h.pack_id for h in route.hops] == ["apertium-br-fr", "apertium-fr-es"]
    (route,) = find_routes(edges, "srp_Cyrl", "spa_Latn")
    assert [h.pack_id for h in route.hops] == ["apertium-srp-eng", "apertium-eng-spa"]
