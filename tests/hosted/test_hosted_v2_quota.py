"""Hosted v2's daily character quota around the engine (issue 12, section D): characters taken before the
work are given back when the engine fails with a 5xx (the quota is for work done), kept on success and on a
4xx; the order of the checks of a request without an Idempotency-Key (401 before the body's 413/400, then
429) is kept by the one-hop admission. Real HTTP against the app under uvicorn, over a stub engine."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import isolated_settings

from dragoman.errors import BackendError, EngineTimeout, UnsupportedPair
from dragoman.languages.types import Language
from dragoman.limits import MAX_LOCAL_BODY_BYTES
from dragoman.progress import JobContext
from dragoman.server.hosted.app import create_app
from dragoman.service import accounts, migrate, usage
from dragoman.service.db import Database
from dragoman.testing.daemon import BackgroundDaemon
from dragoman.translation.types import Provenance, TranslateOptions, TranslationResult


class ScriptedEngine:
    """Translates by upper-casing, except texts starting with a trigger word: ``fail502`` raises a 502,
    ``slow504`` a 504, ``oops`` an unexpected error (a 502), ``pair400`` a 400."""

    provenance: Provenance = "server"

    def pack_ids(self) -> list[str]:
        return []

    def loaded_packs(self) -> list[str]:
        return []

    def translate(
        self, text: str, options: TranslateOptions, *, context: JobContext | None = None
    ) -> TranslationResult:
        if text.startswith("fail502"):
            raise BackendError("the backend broke")
        if text.startswith("slow504"):
            raise EngineTimeout("took too long")
        if text.startswith("oops"):
            raise RuntimeError("a bug")
        if text.startswith("pair400"):
            raise UnsupportedPair("no such pair")
        return TranslationResult(text.upper(), "eng_Latn", "spa_Latn", "server", 0.0, options=options)

    def translate_batch(
        self, texts: Sequence[str], options: TranslateOptions, *, context: JobContext | None = None
    ) -> list[TranslationResult]:
        return [self.translate(t, options, context=context) for t in texts]

    def languages(self, *, installed_only: bool = True) -> list[Language]:
        return []

    def close(self) -> None:
        pass


class Service:
    def __init__(self, url: str, db: Database) -> None:
        self.url = url
        self.db = db

    def key(self, quota: int) -> tuple[str, accounts.KeyInfo]:
        account = accounts.create_account(self.db, plan="pro", credits=1000)
        made = accounts.create_key(self.db, account.id, daily_quota=quota)
        return made.key, accounts.authenticate(self.db, f"Bearer {made.key}")

    def client(self, key: str | None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


@pytest.fixture
def service(tmp_path: Path, db_url: str) -> Iterator[Service]:
    settings = isolated_settings(tmp_path, apertium=False).replace(
        data_dir=tmp_path / "hosted", db_url=db_url
    )
    db = Database.from_settings(settings.hosted)
    migrate.upgrade(db)
    app: Any = create_app(settings, ScriptedEngine(), db=db, start_workers=False)  # type: ignore[arg-type]
    with BackgroundDaemon(app) as daemon:
        yield Service(daemon.url, db)
    db.dispose()


def _post(client: httpx.Client, body: dict[str, Any], **headers: str) -> httpx.Response:
    return client.post("/api/v2/translate", json={"target": "es", "source": "en", **body}, headers=headers)


@pytest.mark.parametrize("text", ["fail502 now", "slow504 now", "oops, a bug"])
def test_a_5xx_engine_failure_gives_the_characters_back(service: Service, text: str) -> None:
    key, info = service.key(quota=100)
    with service.client(key) as c:
        r = _post(c, {"text": text})
        assert r.status_code >= 500, r.text
        assert usage.v2_remaining(service.db, info) == 100
        # a batch failing gives back every text's characters; with an Idempotency-Key too
        r = _post(c, {"texts": ["fine", text]}, **{"Idempotency-Key": "k1"})
        assert r.status_code >= 500, r.text
        assert usage.v2_remaining(service.db, info) == 100
        ok = _post(c, {"text": "x" * 60})
        assert ok.status_code == 200 and ok.json()["translation"] == "X" * 60
        assert usage.v2_remaining(service.db, info) == 40


def test_a_4xx_from_the_engine_and_a_success_keep_the_characters(service: Service) -> None:
    key, info = service.key(quota=100)
    with service.client(key) as c:
        assert _post(c, {"text": "pair400 x"}).status_code == 400
        assert usage.v2_remaining(service.db, info) == 91
        assert _post(c, {"texts": ["ab", "cde"]}).status_code == 200
        assert usage.v2_remaining(service.db, info) == 86


def test_failures_never_give_back_more_than_was_taken(service: Service) -> None:
    key, info = service.key(quota=30)
    with service.client(key) as c:
        for _ in range(5):
            assert _post(c, {"text": "fail502 " + "y" * 10}).status_code == 502
        assert _post(c, {"text": "z" * 30}).status_code == 200
        assert usage.v2_remaining(service.db, info) == 0
        r = _post(c, {"text": "fail502"})
        assert r.status_code == 429 and r.json()["remaining"] == 0  # 429 before the engine: nothing to give
        assert usage.v2_remaining(service.db, info) == 0


def test_the_order_of_checks_is_kept(service: Service) -> None:
    key, info = service.key(quota=10)
    too_big = b'{"text": "' + b"a" * MAX_LOCAL_BODY_BYTES + b'", "target": "es"}'
    headers = {"content-type": "application/json"}
    with service.client(None) as anon:
        r = anon.post("/api/v2/translate", content=too_big, headers=headers)
        assert r.status_code == 401 and r.json()["code"] == "unauthorized"
        assert anon.post("/api/v2/translate", content=b"{", headers=headers).status_code == 401
    with service.client("svc_live_000000000000_" + "x" * 43) as wrong:
        assert wrong.post("/api/v2/translate", content=too_big, headers=headers).status_code == 401
    with service.client(key) as c:
        for extra in ({}, {"Idempotency-Key": "big"}):
            r = c.post("/api/v2/translate", content=too_big, headers={**headers, **extra})
            assert r.status_code == 413, r.text
            r = c.post("/api/v2/translate", content=b"{", headers={**headers, **extra})
            assert r.status_code == 400, r.text
            r = _post(c, {"text": "x" * 11}, **extra)  # over the quota: 429, even if the body is valid
            assert r.status_code == 429 and r.json()["code"] == "quota_exceeded", r.text
        assert usage.v2_remaining(service.db, info) == 10
