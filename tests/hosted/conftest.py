"""Fixtures of the hosted service's tests: the real app under uvicorn on a free loopback port, over a
temporary SQLite file and over a fresh PostgreSQL database (issue 13: ``start_hosted`` takes the
parametrised ``db_backend`` fixture, so each test using it runs on both), with the job runner and webhook
dispatcher running, a real engine (provenance 'server': Apertium eng<->spa and a tiny CTranslate2 pack
en->de), and accounts and keys made through :mod:`dragoman.service.accounts`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from db_support import DbBackend
from hosted_support import Hosted, StartHosted, make_engine, start_service

from dragoman.translation.engine import Engine


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
        data = data_dir or tmp_path / "hosted"
        if db_backend.is_postgres and options.get("db_url") is None:
            options["db_url"] = db_backend.url(data)
        service = start_service(engine, root, data, **options)
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
