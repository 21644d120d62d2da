"""Adversarial inputs for the Apertium reach (issue 17, R1): Serbian transliteration stays linear on long
and hostile text, and mode discovery stays bounded on huge, odd or lying ``.mode`` files."""

from __future__ import annotations

from pathlib import Path

from growth import assert_linear

from dragoman.translation.backends._serbian import cyrl_to_latn, latn_to_cyrl
from dragoman.translation.backends.apertium import MAX_MODE_FILE_CHARS, discover_modes, expand_mode


def test_transliteration_is_linear_on_digraph_runs() -> None:
    # Runs of digraph starts (l, n, d) followed by j/ž: every position is a candidate match.
    assert_linear(
        latn_to_cyrl,
        {
            "digraphs": lambda n: "ljnjdžLJNJDŽ" * n,
            "starts": lambda n: "ldnLDN" * n,
            "plain": lambda n: "a" * n,
        },
        20_000,
    )
    assert_linear(cyrl_to_latn, {"capitals": lambda n: "ЉЊЏ" * n, "mixed": lambda n: "ЉљАЊнЏџ" * n}, 20_000)


def test_transliteration_leaves_hostile_text_alone() -> None:
    text = "\x00\u202e\ufeff" + "𝕏" * 10 + "\\[]^$@" + " " * 5
    assert latn_to_cyrl(text) == text and cyrl_to_latn(text) == text


def test_discovery_reads_only_the_head_of_a_huge_mode_file(tmp_path: Path) -> None:
    huge = tmp_path / "eng-spa.mode"
    with huge.open("w") as f:
        f.write("lt-proc x" + " y" * (MAX_MODE_FILE_CHARS * 4) + " /absent/file.bin\n")
    (mode,) = discover_modes([tmp_path])  # the missing file lies past what discovery reads
    assert mode.pack_id == "apertium-eng-spa"


def test_odd_serbo_croatian_names_serve_nothing(tmp_path: Path) -> None:
    for stem in ("hbs-hbs_SR", "hbs_SR-eng", "hbs-hbs", "hbs-", "-hbs_HR", "hbs-xqz", "eng-hbs_SR_x"):
        assert expand_mode(stem, tmp_path / f"{stem}.mode") == [], stem


def test_a_mode_naming_paths_outside_pair_directories_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "eng-spa.mode").write_text("lt-proc '/usr/share/apertium/apertium-eng-spa/../../nope.bin'\n")
    (tmp_path / "spa-eng.mode").write_text("lt-proc /nonexistent-dragoman/apertium-spa-eng/x.bin\n")
    assert discover_modes([tmp_path]) == []
