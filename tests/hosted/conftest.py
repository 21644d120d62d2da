"""Fixtures of the hosted service's tests: the real app under uvicorn on a free loopback port, over a
temporary SQLite file and over a fresh PostgreSQL database (issue 13: ``start_hosted`` takes the
parametrised ``db_backend`` fixture, so each test using it runs on both), with the job runner and webhook
dispatcher running, a real engine (provenance 'server': Apertium eng<->spa and a tiny CTranslate2 pack
en->de), and accounts and keys made through :mod:`dragoman.service.accounts`.

A test marked ``scaled`` (test_hosted_api.py, test_hosted_more.py, test_hosted_tts.py,
test_tts_edit_orphans.py, and most of test_subtitles_api.py, test_dub_api.py, test_hosted_tts_voices.py and
test_download_ranges.py) also runs in the scaled mode (issue 13), from the same
``db_backend`` parameter: PostgreSQL, ``DRAGOMAN_DISPATCH=procrastinate`` with a Procrastinate worker in a
thread of the test process (every queue: translate, tts, subtitle, dub, webhooks, maintenance, run with the
app's own handlers), the rate limiter on the session's Redis, files in a fresh bucket of the session's moto
S3 server. That mode is marked slow; it skips, saying why, only when Redis or PostgreSQL
cannot run here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from db_support import DbBackend
from hosted_support import (
    Hosted,
    StartHosted,
    backend_for_mode,
    hosted_modes,
    make_engine,
    start_on_backend,
)

from dragoman.translation.engine import Engine


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "scaled: a hosted test that also runs in the scaled mode (PostgreSQL, Procrastinate worker, Redis "
        "limiter, S3 store: tests/hosted/conftest.py); slow",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test here using ``db_backend`` runs on ``sqlite`` and ``postgresql``; one marked ``scaled`` on
    ``scaled`` too."""
    if "db_backend" in metafunc.fixturenames:
        scaled = metafunc.definition.get_closest_marker("scaled") is not None
        metafunc.parametrize("db_backend", hosted_modes(scaled=scaled), indirect=True)


@pytest.fixture(scope="session")
def scaled_services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    """The session's Redis (its URL) and moto S3 server, for the scaled mode; skips, saying why, when Redis
    cannot run here."""
    from scale_support import start_redis

    from dragoman.testing.s3_server import S3Server

    redis = start_redis()
    s3 = S3Server().start()
    try:
        yield redis.url, s3
    finally:
        s3.stop()
        redis.cleanup()


@pytest.fixture
def db_backend(request: pytest.FixtureRequest) -> Iterator[DbBackend]:
    """tests/conftest.py's ``db_backend`` (sqlite, postgresql) with the ``scaled`` mode added for the tests
    marked ``scaled``; parametrised by :func:`pytest_generate_tests` (the fuzz suite's module-scoped
    fixture is built on the same :func:`hosted_support.backend_for_mode` and ``start_on_backend``)."""
    backend = backend_for_mode(request, request.param, request.getfixturevalue("monkeypatch"))
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def hosted_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, Path]]:
    root = tmp_path_factory.mktemp("hosted-engine")
    with make_engine(root) as engine:
        yield engine, root


@pytest.fixture
def start_hosted(
    hosted_engine: tuple[Engine, Path], tmp_path: Path, db_backend: DbBackend
) -> Iterator[StartHosted]:
    """Starts a hosted service (``data_dir`` a fresh folder unless given: pass the same to restart on the
    same database; on PostgreSQL each folder has its own database) on the backend of ``db_backend`` (unless
    ``db_url`` is given); every service started is stopped at the test's end."""
    engine, root = hosted_engine
    running: list[Hosted] = []

    def start(data_dir: Path | None = None, **options: Any) -> Hosted:
        service = start_on_backend(db_backend, engine, root, data_dir or tmp_path / "hosted", **options)
        running.append(service)
        return service

    yield start
    for service in running:
        service.stop()
        service.db.dispose()


@pytest.fixture
def hosted(start_hosted: StartHosted) -> Hosted:
    return start_hosted()


@pytest.fixture
def client(hosted: Hosted) -> Iterator[httpx.Client]:
    with hosted.client() as c:
        yield c
