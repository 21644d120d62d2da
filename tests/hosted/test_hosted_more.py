"""More of the hosted front door over real HTTP: per-request webhooks delivered and signed, test keys spend
test credits, the monthly cap, a quote of a real file equals the job's reservation, Idempotency-Key on v2,
``dragoman hosted serve``, and the idempotency store itself (expiry, a reservation left by a dead process)."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from db_support import DbBackend
from hosted_support import Hosted, Receiver, StartHosted
from idempotency_support import migrated_db_fixture  # noqa: F401 (the ``db`` fixture)
from support import needs_apertium

from dragoman import webhooks as public_webhooks
from dragoman.errors import IdempotencyConflict, IdempotencyMismatch
from dragoman.service import accounts, idempotency, migrate
from dragoman.service.db import Database
from dragoman.service.ratelimit import RateLimiter

pytestmark = [needs_apertium, pytest.mark.scaled]  # scaled: also PostgreSQL+Procrastinate+Redis+S3
LONG = "The cat sleeps on the warm mat. " * 20


def wait_done(client: httpx.Client, job_id: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    delay = 0.1  # polls count toward the 60/min limit: a long job is polled less often (up to 1 s)
    while True:
        response = client.get(f"/api/v1/jobs/{job_id}")
        if response.status_code == 429 and time.monotonic() < deadline:
            time.sleep(float(response.headers["Retry-After"]))
            continue
        body: dict[str, Any] = response.json()
        if body["status"] in ("done", "failed", "canceled") or time.monotonic() > deadline:
            return body
        time.sleep(delay)
        delay = min(1.0, delay * 1.5)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def test_per_request_webhook_is_delivered_signed(hosted: Hosted, receiver: Receiver) -> None:
    account = accounts.create_account(hosted.db, credits=10_000)
    made = accounts.create_key(hosted.db, account.id, webhook_url="http://127.0.0.1:9/never")
    with hosted.client(made.key) as c:
        body = {"text": LONG, "src": "en", "tgt": "es", "webhook": receiver.url}
        job_id = c.post("/api/v1/translate", json=body).json()["job_id"]
        job = wait_done(c, job_id)
    assert job["status"] == "done"
    deadline = time.monotonic() + 30
    while not receiver.received and time.monotonic() < deadline:
        time.sleep(0.1)
    assert receiver.received, "no webhook delivered to the per-request URL"
    headers, raw = receiver.received[0]
    payload = public_webhooks.verify(raw, headers, made.webhook_secret)
    assert payload["event"] == "job.done" and payload["job_id"] == job_id
    assert payload["result"] == job["result"] and payload["credits"] == job["credits"]


def test_test_keys_spend_test_credits(hosted: Hosted) -> None:
    account = accounts.create_account(hosted.db, credits=500, test_credits=300)
    made = accounts.create_key(hosted.db, account.id, mode="test")
    assert made.key.startswith("svc_test_")
    with hosted.client(made.key) as c:
        r = c.post("/api/v1/translate", json={"text": "Hello world", "src": "en", "tgt": "es"})
        assert r.status_code == 200, r.text
        usage = c.get("/api/v1/usage").json()
    after = accounts.get_account(hosted.db, account.id)
    assert after.balance == 500 and after.test_balance == 300 - r.json()["credits"]
    assert usage["mode"] == "test" and usage["balance"] == after.test_balance and usage["live_balance"] == 500


def test_monthly_cap_is_402_with_its_reset(hosted: Hosted) -> None:
    key, _ = hosted.new_key(monthly_cap=3)
    with hosted.client(key) as c:
        assert (
            c.post("/api/v1/translate", json={"text": "Hello", "src": "en", "tgt": "es"}).status_code == 200
        )
        r = c.post("/api/v1/translate", json={"text": LONG, "src": "en", "tgt": "es"})
        assert r.status_code == 402, r.text
        body = r.json()
        assert body["code"] == "monthly_cap_reached" and body["cap"] == 3
        assert body["resets_at"].endswith("-01T00:00:00.000Z")
        assert c.get("/api/v1/jobs").json()["total"] == 1  # the refused job does not exist


def _docx_bytes() -> bytes:
    import docx

    document = docx.Document()
    document.add_paragraph("The cat sleeps on the warm mat. The dog runs in the green park.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def test_quote_of_a_file_is_what_its_job_reserves(hosted: Hosted, client: httpx.Client) -> None:
    data = _docx_bytes()
    files = {"file": ("a.docx", data, "application/octet-stream")}
    with hosted.client("") as anon:
        quote = anon.post("/api/v1/quote", files=files, data={"src": "en", "tgt": "es"})
        assert quote.status_code == 200, quote.text
        assert quote.json()["breakdown"]["chars"] == len(
            "The cat sleeps on the warm mat. The dog runs in the green park."
        )
        assert (
            anon.post(
                "/api/v1/quote",
                files={"file": ("a.txt", b"hi", "text/plain")},
                data={"src": "en", "tgt": "es"},
            ).status_code
            == 415
        )
    job = client.post("/api/v1/translate", files=files, data={"src": "en", "tgt": "es"}).json()
    assert job["credits_reserved"] == quote.json()["credits"]


def test_v2_idempotency_key_replays(client: httpx.Client) -> None:
    body = {"text": "Hello world", "target": "es", "source": "en"}
    first = client.post("/api/v2/translate", json=body, headers={"Idempotency-Key": "v2"})
    again = client.post("/api/v2/translate", json=body, headers={"Idempotency-Key": "v2"})
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"
    other = client.post("/api/v2/translate", json={**body, "text": "Bye"}, headers={"Idempotency-Key": "v2"})
    assert other.status_code == 422 and other.json()["code"] == "idempotency_key_reused"


@pytest.mark.slow
def test_hosted_serve_command(tmp_path: Path, hosted_engine: Any, db_backend: DbBackend) -> None:
    _engine, root = hosted_engine
    url = db_backend.url(tmp_path / "data", empty=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(
        os.environ,
        DRAGOMAN_HOSTED_DIR=str(tmp_path / "data"),
        DRAGOMAN_PACKS_DIR=str(root / "packs"),
        DRAGOMAN_STATE_DIR=str(tmp_path / "state"),
        DRAGOMAN_GLOSSARY=str(tmp_path / "g.json"),
    )
    if db_backend.is_postgres:
        env["DRAGOMAN_DB_URL"] = url
    command = [sys.executable, "-m", "dragoman.cli", "hosted", "serve", "--port", str(port)]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                r = httpx.post(
                    f"http://127.0.0.1:{port}/api/v1/quote", json={"chars": 150, "src": "en", "tgt": "es"}
                )
                break
            except httpx.TransportError:
                assert process.poll() is None and time.monotonic() < deadline, "the service did not start"
                time.sleep(0.2)
        assert r.status_code == 200 and r.json()["credits"] == 2
        assert httpx.get(f"http://127.0.0.1:{port}/api/v1/usage").status_code == 401
        if not db_backend.is_postgres:
            assert (tmp_path / "data" / "hosted.sqlite3").is_file()
        db = Database(url)
        try:
            assert migrate.current(db) == migrate.head()  # migrated at start
        finally:
            db.dispose()
    finally:
        process.terminate()
        _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "dragoman hosted service on http://127.0.0.1:" in err and "stopped" in err


# ----- the stores themselves ------------------------------------------------------------------------------
def test_idempotency_store_states_expiry_and_dead_reservations(db: Database) -> None:
    fp = idempotency.fingerprint("POST", "/api/v1/translate", b'{"a": 1}')
    assert fp != idempotency.fingerprint("POST", "/api/v1/translate", b'{"a": 2}')
    assert fp != idempotency.fingerprint("POST", "/api/v1/translat", b'e{"a": 1}')  # parts are delimited
    assert idempotency.begin(db, "k", "i", fp, now=1_000) is None
    with pytest.raises(IdempotencyConflict) as running:
        idempotency.begin(db, "k", "i", fp, now=2_000)
    assert running.value.to_dict()["retry_after"] >= 1
    with pytest.raises(IdempotencyMismatch):
        idempotency.begin(db, "k", "i", "other", now=2_000)
    assert idempotency.begin(db, "other-key", "i", fp, now=2_000) is None  # scoped to the API key
    stored = idempotency.StoredResponse(202, b'{"job_id": "j"}', {"content-type": "application/json"})
    idempotency.complete(db, "k", "i", stored)
    assert idempotency.begin(db, "k", "i", fp, now=3_000) == stored
    day = 24 * 3600 * 1000
    assert idempotency.begin(db, "k", "i", "new", now=1_000 + day) is None  # expired: a new request
    # a reservation left running by a process that died is taken over after STALE_RUNNING_SECONDS
    assert idempotency.begin(db, "k", "dead", fp, now=10_000) is None
    with pytest.raises(IdempotencyConflict):
        idempotency.begin(db, "k", "dead", fp, now=10_000 + 1000)
    later = 10_000 + idempotency.STALE_RUNNING_SECONDS * 1000
    assert idempotency.begin(db, "k", "dead", fp, now=later) is None
    idempotency.release(db, "k", "dead")
    assert idempotency.begin(db, "k", "dead", "anything", now=later) is None


def test_concurrent_reservations_have_one_winner(db: Database) -> None:
    fp = idempotency.fingerprint("POST", "/x", b"")
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def reserve() -> None:
        barrier.wait()
        try:
            outcomes.append("won" if idempotency.begin(db, "k", "race", fp) is None else "replay")
        except IdempotencyConflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=reserve) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["conflict"] * 7 + ["won"]


def test_rate_limiter_fixed_window_per_key() -> None:
    limiter = RateLimiter("memory://", per_minute=3)
    states = [limiter.hit("a") for _ in range(4)]
    assert [s.allowed for s in states] == [True, True, True, False]
    assert [s.remaining for s in states] == [2, 1, 0, 0]
    refused = states[-1].headers()
    assert refused["RateLimit-Limit"] == "3" and refused["RateLimit-Remaining"] == "0"
    assert refused["Retry-After"] == refused["RateLimit-Reset"] and 1 <= int(refused["Retry-After"]) <= 60
    assert "Retry-After" not in states[0].headers()
    assert limiter.hit("b").allowed  # per key
    assert limiter.peek("c").remaining == 3 and limiter.peek("a").remaining == 0
    assert json.dumps(refused)  # plain strings


def test_an_upload_past_the_bound_is_413_while_it_streams(
    hosted: Hosted, client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dragoman.server.hosted import _common as hosted_common

    monkeypatch.setattr(hosted_common, "MAX_MULTIPART_BYTES", 100_000)  # the service runs in this process

    def chunked() -> Iterator[bytes]:
        yield b'--b\r\nContent-Disposition: form-data; name="src"\r\n\r\nen\r\n'
        yield b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.pdf"\r\n\r\n%PDF-1.4\n'
        for _ in range(50):
            yield b"0" * 10_000
        yield b"\r\n--b--\r\n"

    r = client.post(
        "/api/v1/translate",
        content=chunked(),
        headers={"Content-Type": "multipart/form-data; boundary=b"},
    )
    assert r.status_code == 413 and r.json()["code"] == "file_too_large"
    assert client.get("/api/v1/jobs").json()["total"] == 0
    assert not list((hosted.settings.hosted.data_dir / "tmp").glob("upload-*"))  # nothing left behind


@pytest.mark.slow
def test_a_restart_while_a_job_runs_loses_nothing(start_hosted: StartHosted, tmp_path: Path) -> None:
    data = tmp_path / "restart-running"
    first = start_hosted(data, lease_seconds=2.0)
    text = " ".join(f"The cat number {i} sleeps on the warm mat." for i in range(3000))
    with first.client() as c:
        job_id = c.post("/api/v1/translate", json={"text": text, "src": "en", "tgt": "es"}).json()["job_id"]
        deadline = time.monotonic() + 30
        while (status := c.get(f"/api/v1/jobs/{job_id}").json()["status"]) == "queued":
            assert time.monotonic() < deadline
            time.sleep(0.02)
    first.stop()  # the runner stops between chunks and puts the job back in the queue
    assert status == "active", status
    second = start_hosted(data, lease_seconds=2.0)
    with httpx.Client(base_url=second.url, headers={"Authorization": f"Bearer {first.key}"}, timeout=60) as c:
        job = wait_done(c, job_id, timeout=120)
    assert job["status"] == "done", job
    assert job["result"].count("gato") >= 3000 and job["credits"] is not None


def test_an_upload_retried_with_another_boundary_is_the_same_request(
    hosted: Hosted, client: httpx.Client
) -> None:
    data = _docx_bytes()

    def form(boundary: str) -> bytes:
        return (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="src"\r\n\r\nen\r\n'
                f'--{boundary}\r\nContent-Disposition: form-data; name="tgt"\r\n\r\nes\r\n'
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.docx"\r\n\r\n'
            ).encode()
            + data
            + f"\r\n--{boundary}--\r\n".encode()
        )

    answers = [
        client.post(
            "/api/v1/translate",
            content=form(boundary),
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}", "Idempotency-Key": "up"},
        )
        for boundary in ("one", "another")
    ]
    assert [a.status_code for a in answers] == [202, 202], [a.text for a in answers]
    assert answers[1].json() == answers[0].json() and answers[1].headers["idempotent-replayed"] == "true"
    assert client.get("/api/v1/jobs").json()["total"] == 1


def test_v2_requests_are_counted_in_usage_and_survive_a_stop(
    start_hosted: StartHosted, tmp_path: Path
) -> None:
    data = tmp_path / "tally"
    first = start_hosted(data)
    with first.client() as c:
        for _ in range(3):
            assert c.post("/api/v2/translate", json={"text": "Hello", "target": "es"}).status_code == 200
        assert c.post("/api/v2/translate", json={"target": "es"}).status_code == 400  # counted too
        assert c.get("/api/v1/usage").json()["days"][-1]["requests"] == 5
        assert c.post("/api/v2/translate", json={"text": "Hello", "target": "es"}).status_code == 200
    first.stop()  # the count of the last request is written at shutdown
    second = start_hosted(data)
    with httpx.Client(base_url=second.url, headers={"Authorization": f"Bearer {first.key}"}) as c:
        assert c.get("/api/v1/usage").json()["days"][-1]["requests"] == 7


def test_absolute_urls_use_the_configured_base_url(start_hosted: StartHosted) -> None:
    hosted = start_hosted(base_url="https://api.example.com/")
    with hosted.client() as c:
        accepted = c.post("/api/v1/translate", json={"text": LONG, "src": "en", "tgt": "es"}).json()
        assert accepted["poll_url"] == f"https://api.example.com/api/v1/jobs/{accepted['job_id']}"
        assert c.get(f"/api/v1/jobs/{accepted['job_id']}").json()["poll_url"] == accepted["poll_url"]


@pytest.mark.slow
def test_a_document_batch_over_multipart_targets(hosted: Hosted, client: httpx.Client) -> None:
    files = {"file": ("a.docx", _docx_bytes(), "application/octet-stream")}
    r = client.post("/api/v1/translate", files=files, data={"src": "en", "targets": "es, de"})
    assert r.status_code == 202, r.text
    body = r.json()
    assert len(body["job_ids"]) == 2 and [j["target"] for j in body["jobs"]] == ["es", "de"]
    for job_id in body["job_ids"]:
        job = wait_done(client, job_id, timeout=120)
        assert job["status"] == "done" and job["batch_id"] == body["batch_id"], job
        assert job["export_docx"] and job["export_pdf"]
