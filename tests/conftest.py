"""Shared fixtures: tiny real packs (built once per session) and an environment that touches no user data.

The session-scoped packs are shared by every test: treat them as read-only (copy one with
``shutil.copytree`` before changing it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from db_support import BACKENDS, DbBackend, backend_for, start_postgres
from hypothesis import settings as hypothesis_settings

from dragoman.testing.postgres import PostgresServer, unavailable_reason
from dragoman.testing.tinypack import build_argos_archive, build_argos_pack, build_multilingual_pack

# In CI (CI=true) property tests run a fixed sequence of examples, so a landing never hangs on a new random
# draw; on developers' machines they explore new examples on every run. Neither times an example (Hypothesis'
# default deadline of 200 ms is an absolute time bound that a busy shared machine crosses at random).
hypothesis_settings.register_profile("dev", deadline=None)
hypothesis_settings.register_profile(
    "ci", hypothesis_settings.get_profile("dev"), derandomize=True, print_blob=True
)
hypothesis_settings.load_profile("ci" if os.environ.get("CI") else "dev")

TINY_MULTILINGUAL_LANGUAGES = ("eng_Latn", "spa_Latn", "fra_Latn", "deu_Latn")


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    """Clear every ``DRAGOMAN_*`` variable and point the data paths at this test's tmp_path."""
    for name in list(os.environ):
        if name.startswith("DRAGOMAN_"):
            monkeypatch.delenv(name)
    paths = {
        "DRAGOMAN_PACKS_DIR": tmp_path / "dragoman-data" / "packs",
        "DRAGOMAN_GLOSSARY": tmp_path / "dragoman-config" / "glossary.json",
        "DRAGOMAN_STATE_DIR": tmp_path / "dragoman-state",
    }
    for name, path in paths.items():
        monkeypatch.setenv(name, str(path))
    yield paths


@pytest.fixture
def packs_dir(_isolated_env: dict[str, Path]) -> Path:
    """An empty packs directory that ``DRAGOMAN_PACKS_DIR`` (so ``Settings.from_env()``) points at."""
    path = _isolated_env["DRAGOMAN_PACKS_DIR"]
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def tiny_argos_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Argos en->es pack directory (random weights: deterministic gibberish)."""
    return build_argos_pack(tmp_path_factory.mktemp("packs") / "translate-en_es", "en", "es")


@pytest.fixture(scope="session")
def tiny_argos_pack_es_en(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Argos es->en pack directory, with other weights than the en->es one."""
    return build_argos_pack(tmp_path_factory.mktemp("packs") / "translate-es_en", "es", "en", seed=1)


@pytest.fixture(scope="session")
def tiny_multilingual_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny NLLB-style multilingual pack over eng_Latn, spa_Latn, fra_Latn and deu_Latn."""
    return build_multilingual_pack(
        tmp_path_factory.mktemp("packs") / "tiny-nllb", TINY_MULTILINGUAL_LANGUAGES, seed=2
    )


@pytest.fixture(scope="session")
def argos_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ``.argosmodel`` zip (en->es) as Argos ships them: one top-level directory holding the pack."""
    return build_argos_archive(tmp_path_factory.mktemp("archives") / "translate-en_es-1_0.argosmodel")


# ----- the hosted service's database on both backends (issue 13; tests/db_support.py) -------------------
@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL server for the whole session, with a migrated template database; skips
    only when PostgreSQL's server is not installed here (``make setup`` installs Debian's ``postgresql``)."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"PostgreSQL cannot run here: {reason}")
    server = start_postgres()
    yield server
    server.cleanup()


@pytest.fixture(params=BACKENDS)
def db_backend(request: pytest.FixtureRequest) -> Iterator[DbBackend]:
    """The service database's backend: each test using it (or ``db_url``) runs on SQLite and on PostgreSQL."""
    backend = backend_for(request)
    yield backend
    backend.close()


@pytest.fixture
def db_url(db_backend: DbBackend, tmp_path: Path) -> str:
    """The URL of this test's service database (SQLite: a file under tmp_path, not migrated yet;
    PostgreSQL: a fresh, migrated database)."""
    return db_backend.url(tmp_path)
