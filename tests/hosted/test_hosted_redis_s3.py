"""The hosted service on Redis and S3 (issue 13): the 60/min limit holds across two ``dragoman hosted serve``
processes sharing one Redis; Redis killed and restarted during load (fail closed with 503
``rate_limiter_unavailable`` + Retry-After, never an unmetered answer, recovery on its own); a document job
with its exports stored in S3 (moto on loopback)."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from hosted_support import StartHosted
from scale_support import ServeProcess, redis, s3_leftovers, s3_server
from support import isolated_settings, needs_apertium

from dragoman.service import accounts, migrate
from dragoman.service.db import Database
from dragoman.service.storage import Storage
from dragoman.testing.redis_server import RedisServer, ping
from dragoman.testing.s3_server import S3Server

__all__ = ["redis", "s3_server"]  # fixtures, imported for pytest

#: Seconds a wait for the load to meet Redis in a given state may take ("answers within", many times what
#: it takes on an idle machine).
BOUND_S = 60.0


def _error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    body: dict[str, Any] = response.json()
    assert body["code"] == code and body["error"], body
    return body


@pytest.mark.slow
def test_the_limit_holds_across_two_api_processes_on_one_redis(redis: RedisServer, tmp_path: Path) -> None:
    environ = {
        "DRAGOMAN_HOSTED_DIR": str(tmp_path / "data"),
        "DRAGOMAN_RATELIMIT_URI": redis.url,
        "DRAGOMAN_PACKS_DIR": str(tmp_path / "packs"),
        "DRAGOMAN_STATE_DIR": str(tmp_path / "state"),
        "DRAGOMAN_GLOSSARY": str(tmp_path / "glossary.json"),
        "DRAGOMAN_APERTIUM": "0",
    }
    settings = isolated_settings(tmp_path).replace(data_dir=tmp_path / "data")
    db = Database(settings.hosted.database_url)
    migrate.upgrade(db)  # once, before two processes start on the database
    account = accounts.create_account(db, plan="pro", credits=1_000)
    key = accounts.create_key(db, account.id).key
    db.dispose()
    processes = [ServeProcess(environ, tmp_path / f"serve-{i}.log") for i in range(2)]
    try:
        for process in processes:
            process.wait_ready()
        clients = [
            httpx.Client(base_url=p.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
            for p in processes
        ]
        remaining = []
        for i in range(60):  # 60 requests split between the two processes
            r = clients[i % 2].get("/api/v1/jobs")
            assert r.status_code == 200, (i, r.text)
            remaining.append(int(r.headers["ratelimit-remaining"]))
        assert remaining == list(range(59, -1, -1))  # one window, counted by both
        for client in clients:  # the 61st (and 62nd) refused, whichever process answers
            r = client.get("/api/v1/jobs")
            body = _error(r, 429, "rate_limited")
            assert int(r.headers["retry-after"]) >= 1 and body["remaining"] == 0
        for client in clients:
            client.close()
    finally:
        for process in processes:
            process.stop()


@pytest.mark.slow
def test_redis_killed_and_restarted_during_load(redis: RedisServer, start_hosted: StartHosted) -> None:
    hosted = start_hosted(workers=False, rate=100_000, ratelimit_uri=redis.url)
    answers: list[tuple[float, float, int, str, str | None]] = []  # started, ended, status, code, Retry-After
    stop = threading.Event()

    def load() -> None:
        with hosted.client() as client:
            while not stop.is_set():
                started = time.monotonic()
                r = client.get("/api/v1/jobs")
                code = r.json().get("code", "") if r.status_code != 200 else ""
                answers.append((started, time.monotonic(), r.status_code, code, r.headers.get("retry-after")))

    def answered(started_after: float, ended_before: float = float("inf"), n: int = 10) -> None:
        """Wait (generously bounded) until ``n`` answers started and ended inside the window."""
        deadline = time.monotonic() + BOUND_S
        while sum(1 for a in list(answers) if a[0] > started_after and a[1] < ended_before) < n:
            assert time.monotonic() < deadline and all(t.is_alive() for t in threads), answers[-5:]
            time.sleep(0.02)

    threads = [threading.Thread(target=load) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        answered(float("-inf"))  # the load meets a live Redis
        killing = time.monotonic()  # answers that ended before this met a live Redis
        redis.stop(kill=True)  # SIGKILL, then waits for the process to end
        killed = time.monotonic()
        assert not ping(redis.host, redis.port), "Redis still answers after it was killed"
        answered(killed)  # the load meets a dead Redis
        restarting = time.monotonic()
        redis.start()  # on the same port; returns once it answers PING
        assert ping(redis.host, redis.port)
        answered(restarting + 2.0)  # past the 1 s breaker, with room: the load meets Redis again
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    statuses = {(status, code) for _, _, status, code, _ in answers}
    assert statuses <= {(200, ""), (503, "rate_limiter_unavailable")}, statuses
    before = [a for a in answers if a[1] < killing]
    down = [a for a in answers if a[0] > killed and a[1] < restarting]
    after = [a for a in answers if a[0] > restarting + 2.0]
    assert before and all(a[2] == 200 for a in before)
    assert down and all(a[2] == 503 and a[4] == "1" for a in down), down[:3]  # never served unmetered
    assert after and all(a[2] == 200 for a in after), [a[2] for a in after][:10]
    # a dead Redis costs milliseconds: the refusals come fast (generous bound for a busy machine)
    slowest = sorted(a[1] - a[0] for a in down)[len(down) // 2]
    assert slowest < 1.0, slowest


def _docx_bytes() -> bytes:
    import docx

    document = docx.Document()
    document.add_heading("The report", level=1)
    document.add_paragraph("The cat sleeps on the warm mat. The dog runs in the green park.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


@needs_apertium
@pytest.mark.slow
def test_document_job_with_exports_on_s3(
    s3_server: S3Server, start_hosted: StartHosted, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in s3_server.environ.items():  # credentials come from the standard AWS_* variables
        monkeypatch.setenv(name, value)
    bucket = s3_server.create_bucket()
    hosted = start_hosted(
        store_url=f"s3://{bucket}/svc", s3_endpoint=s3_server.endpoint, s3_region="us-east-1"
    )
    storage: Storage = hosted.app.state.storage
    assert storage.root is None  # an S3 store, not local files
    docx_type = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    with hosted.client() as client:
        r = client.post(
            "/api/v1/translate",
            files={"file": ("report.docx", _docx_bytes(), docx_type)},
            data={"src": "en", "tgt": "es"},
        )
        assert r.status_code == 202, r.text
        job_id = r.json()["job_id"]
        deadline = time.monotonic() + 120
        while True:
            job: dict[str, Any] = client.get(f"/api/v1/jobs/{job_id}").json()
            if job["status"] in ("done", "failed", "canceled") or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert job["status"] == "done", job
        docx_answer = client.get(job["export_docx"])
        assert docx_answer.status_code == 200 and docx_answer.content[:2] == b"PK"
        assert docx_answer.headers["content-length"] == str(len(docx_answer.content))
        pdf_answer = client.get(job["export_pdf"])
        assert pdf_answer.status_code == 200 and pdf_answer.content.startswith(b"%PDF")
    stored = s3_leftovers(storage)
    assert not [k for k in stored if k.startswith("upload:")]  # no multipart upload left pending
    exports = [k for k in stored if k.startswith(f"svc/exports/{job_id}/")]
    assert len(exports) >= 2, stored  # the DOCX and PDF exports live in the bucket, under the prefix
    assert all(k.startswith("svc/") for k in stored), stored


@needs_apertium
@pytest.mark.slow
def test_s3_down_is_503_and_nothing_is_charged(
    start_hosted: StartHosted, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dragoman.service.storage as storage_module

    monkeypatch.setattr(storage_module, "S3_RETRY_SECONDS", 1)  # fail within a second, not obstore's 3 min
    monkeypatch.setattr(storage_module, "S3_MAX_RETRIES", 1)
    with S3Server() as s3:  # its own server: this test stops it
        for name, value in s3.environ.items():
            monkeypatch.setenv(name, value)
        bucket = s3.create_bucket()
        hosted = start_hosted(store_url=f"s3://{bucket}/svc", s3_endpoint=s3.endpoint, s3_region="us-east-1")
        docx_type = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
        files = {"file": ("report.docx", _docx_bytes(), docx_type)}
        with hosted.client() as client:
            r = client.post("/api/v1/translate", files=files, data={"src": "en", "tgt": "es"})
            assert r.status_code == 202, r.text
            job_id = r.json()["job_id"]
            deadline = time.monotonic() + 120
            while (job := client.get(f"/api/v1/jobs/{job_id}").json())["status"] not in ("done", "failed"):
                assert time.monotonic() < deadline, job
                time.sleep(0.2)
            assert job["status"] == "done", job
            balance = accounts.get_account(hosted.db, hosted.account_id).balance
            s3.stop()
            r = client.post("/api/v1/translate", files=files, data={"src": "en", "tgt": "es"})
            body = _error(r, 503, "storage_unavailable")
            assert r.headers["retry-after"] == str(body["retry_after"])
            _error(client.get(job["export_docx"]), 503, "storage_unavailable")
            assert accounts.get_account(hosted.db, hosted.account_id).balance == balance  # nothing charged
            s3.start()  # back on the same port, with its buckets
            answer = client.get(job["export_docx"])
            assert answer.status_code == 200 and answer.content[:2] == b"PK"
            r = client.post("/api/v1/translate", files=files, data={"src": "en", "tgt": "es"})
            assert r.status_code == 202, r.text
