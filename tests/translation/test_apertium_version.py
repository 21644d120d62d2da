"""Apertium's version, as status shows it: asked once, asked again when the dpkg database changes."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from dragoman.translation.backends import apertium


@pytest.fixture
def dpkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """A stand-in ``dpkg-query`` answering with the version in a file, and a stand-in dpkg database."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    version, database = tmp_path / "version", tmp_path / "status"
    version.write_text("3.8.3-1")
    database.write_text("")
    os.utime(database, ns=(10**18, 10**18))
    query = bin_dir / "dpkg-query"
    query.write_text(f'#!/bin/sh\ncat "{version}"\n')
    query.chmod(query.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(apertium, "DPKG_STATUS", database)
    apertium.refresh_version()
    yield version, database
    apertium.refresh_version()


def test_version_is_kept_until_the_dpkg_database_changes(dpkg: tuple[Path, Path]) -> None:
    version, database = dpkg
    assert apertium.apertium_version() == "3.8.3-1"
    version.write_text("3.9.0-1")
    assert apertium.apertium_version() == "3.8.3-1"  # kept: nothing says a package changed
    os.utime(database, ns=(2 * 10**18, 2 * 10**18))  # apt-get install apertium, from another shell
    assert apertium.apertium_version() == "3.9.0-1"


def test_refresh_version_asks_again(dpkg: tuple[Path, Path]) -> None:
    version, _ = dpkg
    assert apertium.apertium_version() == "3.8.3-1"
    version.write_text("4.0")
    apertium.refresh_version()
    assert apertium.apertium_version() == "4.0"
