"""Fixtures of the hosted service's tests: the real app under uvicorn on a free loopback port, over a
temporary SQLite file, with the job runner and webhook dispatcher running, a real engine (provenance
'server': Apertium eng<->spa and a tiny CTranslate2 pack en->de), and accounts and keys made through
:mod:`dragoman.service.accounts`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hosted_support import Hosted, StartHosted, make_engine, start_service

from dragoman.translation.engine import Engine


@pytest.fixture(scope="session")
def hosted_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, Path]]:
    root = tmp_path_factory.mktemp("hosted-engine")
    with make_engine(root) as engine:
        yield engine, root


@pytest.fixture
def start_hosted(hosted_engine: tuple[Engine, Path], tmp_path: Path) -> Iterator[StartHosted]:
    """Starts a hosted service (``data_dir`` a fresh folder unless given: pass the same to restart on the
    same database); every service started is stopped at the test's end."""
    engine, root = hosted_engine
    running: list[Hosted] = []

    def start(data_dir: Path | None = None, **options: Any) -> Hosted:
        service = start_service(engine, root, data_dir or tmp_path / "hosted", **options)
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
