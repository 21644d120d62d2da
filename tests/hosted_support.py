"""The hosted service's test helpers (the fixtures are in ``tests/hosted/conftest.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from dragoman.service import accounts
from dragoman.service.db import Database
from dragoman.settings import Settings
from dragoman.testing.daemon import BackgroundDaemon


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


StartHosted = Callable[..., Hosted]
