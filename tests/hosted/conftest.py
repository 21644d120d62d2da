"""Fixtures of the hosted service's tests: the real app under uvicorn on a free loopback port, over a
temporary SQLite file, with the job runner and webhook dispatcher running, a real engine (provenance
'server': Apertium eng<->spa and a tiny CTranslate2 pack en->de), and accounts and keys made through
:mod:`dragoman.service.accounts`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import isolated_settings

from dragoman.server.hosted.app import create_app
from dragoman.service import accounts, migrate
from dragoman.service.db import Database
from dragoman.settings import Settings
from dragoman.testing.daemon import BackgroundDaemon
from dragoman.testing.tinypack import build_argos_pack
from dragoman.translation.engine import Engine


@dataclass
class Hosted:
    """A running hosted service and what a test needs to talk to it."""

    url: str
    db: Database
    settings: Settings
    daemon: BackgroundDaemon
    app: Any
    account_id: str
    key: str
    key_id: str
    made: list[str] = field(default_factory=list)

    def client(self, key: str | None = None, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key or self.key}"} if key != "" else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60, **kwargs)

    def new_key(self, *, credits: int | None = None, plan: str = "pro", **options: Any) -> tuple[str, str]:
        """A key (and its id) of a fresh account with ``credits`` live credits (default plenty)."""
        account = accounts.create_account(
            self.db, plan=plan, credits=100_000 if credits is None else credits, test_credits=1_000
        )
        made = accounts.create_key(self.db, account.id, **options)
        return made.key, made.key_id

    def stop(self) -> None:
        self.daemon.stop()


@pytest.fixture(scope="session")
def hosted_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, Path]]:
    root = tmp_path_factory.mktemp("hosted-engine")
    build_argos_pack(root / "packs" / "translate-en_de", "en", "de")
    conf = isolated_settings(root, apertium=True)
    with Engine(conf, provenance="server") as engine:
        yield engine, root


StartHosted = Callable[..., Hosted]


@pytest.fixture
def start_hosted(hosted_engine: tuple[Engine, Path], tmp_path: Path) -> Iterator[StartHosted]:
    """Starts a hosted service (``data_dir`` a fresh folder unless given: pass the same to restart on the
    same database); every service started is stopped at the test's end."""
    engine, root = hosted_engine
    running: list[Hosted] = []

    def start(data_dir: Path | None = None, *, rate: int = 60, **values: Any) -> Hosted:
        data = data_dir or tmp_path / "hosted"
        settings = isolated_settings(root, apertium=True).replace(
            data_dir=data, webhooks_allow_private=True, **values
        )
        db = Database(settings.hosted.database_url)
        migrate.upgrade(db)
        app = create_app(settings, engine, db=db, rate_per_minute=rate, request_timeout=60)
        daemon = BackgroundDaemon(app).__enter__()
        account = accounts.create_account(db, name="test", plan="pro", credits=100_000, test_credits=5_000)
        made = accounts.create_key(db, account.id)
        service = Hosted(daemon.url, db, settings, daemon, app, account.id, made.key, made.key_id)
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
