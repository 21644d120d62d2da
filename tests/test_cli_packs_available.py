"""`dragoman packs available` lists Debian's Apertium pairs (issue 17, R1): each package, whether it is
installed, its FLORES languages and, for one not installed, the exact apt command; offline with --apertium."""

from __future__ import annotations

import json

import pytest

from dragoman.cli.main import main
from dragoman.models import index
from dragoman.translation.backends import apertium_packages
from dragoman.translation.backends.apertium_packages import DEBIAN_PAIRS


def test_apertium_pairs_with_their_install_commands(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(apertium_packages, "installed_packages", lambda packages: {"apertium-eng-spa"})

    def no_network(settings: object) -> list[index.IndexEntry]:
        raise AssertionError("--apertium must not read the Argos index")

    monkeypatch.setattr(index, "available", no_network)
    assert main(["packs", "available", "--apertium"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(DEBIAN_PAIRS) == 46
    rows = {line.split("\t")[0].strip(): line.split("\t") for line in lines}
    assert rows["apertium-eng-spa"][1:] == ["installed", "eng_Latn, spa_Latn"]
    assert rows["apertium-hbs-eng"][1:] == [
        "not installed",
        "hrv_Latn, bos_Latn, srp_Cyrl, eng_Latn",
        "sudo apt-get install apertium apertium-hbs-eng",
    ]
    assert rows["apertium-br-fr"][2] == "bre_Latn, fra_Latn"


def test_json_marks_each_entry_with_its_source(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(apertium_packages, "installed_packages", lambda packages: None)  # no dpkg here
    entry = index.IndexEntry(
        code="translate-en_de", from_code="en", to_code="de", version="1.0", type="translate", links=()
    )
    monkeypatch.setattr(index, "available", lambda settings: [entry])
    assert main(["packs", "available", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["source"] for d in data] == ["apertium"] * 46 + ["argos"]
    assert data[0]["installed"] is None and data[0]["command"].startswith("sudo apt-get install apertium ")
    assert data[-1]["code"] == "translate-en_de"
    assert main(["packs", "available", "--argos", "--json"]) == 0
    assert [d["source"] for d in json.loads(capsys.readouterr().out)] == ["argos"]
