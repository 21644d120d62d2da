"""Adversarial inputs at the hosted front door (issue 12, section D), over real HTTP: a burst of concurrent
requests meets the per-minute limit exactly, racing cancels refund once, hostile bodies and headers are
typed 4xx (never 5xx), and concurrent idempotent POSTs run once whatever their number."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from hosted_support import Hosted, make_engine, start_service
from support import needs_apertium

from dragoman.service import accounts

pytestmark = needs_apertium
LONG = "The cat sleeps on the warm mat. " * 20


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosted]:
    root = tmp_path_factory.mktemp("front-door")
    with make_engine(root) as engine:
        running = start_service(engine, root, root / "data", rate=60)
        try:
            yield running
        finally:
            running.stop()
            running.db.dispose()


def _burst(service: Hosted, key: str, n: int, request: str, path: str) -> list[httpx.Response]:
    barrier = threading.Barrier(n)

    def one(_: int) -> httpx.Response:
        with service.client(key) as c:
            barrier.wait()
            return c.request(request, path)

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def test_a_concurrent_burst_meets_the_limit_exactly(service: Hosted) -> None:
    key, _ = service.new_key()
    answers = _burst(service, key, 70, "GET", "/api/v1/jobs")
    statuses = sorted(a.status_code for a in answers)
    assert statuses.count(200) == 60 and statuses.count(429) == 10, statuses
    remaining = sorted(int(a.headers["ratelimit-remaining"]) for a in answers if a.status_code == 200)
    assert remaining == list(range(60)), remaining  # every window count handed out once
    assert all(int(a.headers["retry-after"]) >= 1 for a in answers if a.status_code == 429)


def test_racing_cancels_refund_once(tmp_path: Path, service: Hosted) -> None:
    key, _ = service.new_key(credits=10_000)
    account = accounts.authenticate(service.db, f"Bearer {key}").account_id
    with service.client(key) as c:
        # a long job the runner cannot finish before the cancels arrive
        text = " ".join(f"The cat number {i} sleeps on the warm mat." for i in range(3000))
        job = c.post("/api/v1/translate", json={"text": text, "src": "en", "tgt": "es"})
        assert job.status_code == 202, job.text
    job_id = job.json()["job_id"]
    reserved = job.json()["credits_reserved"]
    answers = _burst(service, key, 8, "DELETE", f"/api/v1/jobs/{job_id}")
    statuses = sorted(a.status_code for a in answers)
    ok = [a.json() for a in answers if a.status_code == 200]
    if ok:  # the job was still pending: exactly one cancel won and refunded everything
        assert statuses == [200] + [409] * 7, statuses
        assert ok[0]["credits_refunded"] == reserved
        assert accounts.get_account(service.db, account).balance == 10_000
    else:  # it had finished first: every cancel is 409 and the job was charged once
        assert statuses == [409] * 8
        charged = httpx.get(
            f"{service.url}/api/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {key}"}
        ).json()["credits"]
        assert accounts.get_account(service.db, account).balance == 10_000 - charged


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"text": "a", "text": "b", "src": "en", "tgt": "es"}',
        b'{"text": NaN, "src": "en", "tgt": "es"}',
        b'{"text": "\\ud800", "src": "en", "tgt": "es"}',
        b"\xff\xfe{}",
        b'{"text": "a", "src": "en", "tgt": "es", "targets": []}',
        b'{"text": "a", "src": "en", "targets": ["es", "es"]}',
        b'{"text": "a", "src": "en", "targets": ' + b'["es",' * 1 + b'"de"' + b"]}",
        b'{"text": "", "src": "en", "tgt": "es"}',
        b'{"text": "a", "src": 5, "tgt": "es"}',
        b'{"chars": 5}',
    ],
)
def test_hostile_json_bodies_are_typed_4xx(service: Hosted, body: bytes) -> None:
    key, _ = service.new_key()
    with service.client(key) as c:
        r = c.post("/api/v1/translate", content=body, headers={"Content-Type": "application/json"})
    assert 400 <= r.status_code < 500 or r.status_code in (200, 202), (r.status_code, r.text[:300])
    if r.status_code >= 400:
        assert r.json()["code"] and r.json()["error"]


def test_a_body_over_the_bound_is_413_and_headers_are_checked_first(service: Hosted) -> None:
    key, _ = service.new_key()
    huge = b'{"text": "' + b"a" * (9 * 1024 * 1024) + b'", "src": "en", "tgt": "es"}'
    with service.client(key) as c:
        r = c.post("/api/v1/translate", content=huge, headers={"Content-Type": "application/json"})
        assert r.status_code == 413 and r.json()["code"] == "body_too_large"
    with service.client("x" * 10_000) as c:
        assert c.post("/api/v1/translate", content=huge).status_code == 401  # the key first, never the body
    for header in ("Bearer", "Basic abc", "Bearer svc_live_", "bearer " + key + " extra"):
        r = httpx.get(f"{service.url}/api/v1/usage", headers={"Authorization": header})
        assert r.status_code == 401 and r.json()["code"] == "unauthorized", header


def test_odd_job_ids_are_404(service: Hosted) -> None:
    key, _ = service.new_key()
    with service.client(key) as c:
        for job_id in ("x" * 5000, "%00", "..%2F..%2Fetc%2Fpasswd", "' OR 1=1 --"):
            r = c.get(f"/api/v1/jobs/{job_id}")
            assert r.status_code == 404 and r.json()["code"] == "not_found", (job_id, r.text[:200])
            assert c.get(f"/api/v1/jobs/{job_id}/export/pdf").status_code == 404


def test_many_concurrent_idempotent_posts_run_once(service: Hosted) -> None:
    key, _ = service.new_key(credits=1_000)
    barrier = threading.Barrier(12)

    def post(_: int) -> httpx.Response:
        with service.client(key) as c:
            barrier.wait()
            body = {"text": LONG, "src": "en", "tgt": "es"}
            return c.post("/api/v1/translate", json=body, headers={"Idempotency-Key": "many"})

    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(post, range(12)))
    assert all(a.status_code in (202, 409) for a in answers), [a.status_code for a in answers]
    ids = {a.json()["job_id"] for a in answers if a.status_code == 202}
    assert len(ids) == 1
    with service.client(key) as c:
        assert c.get("/api/v1/jobs").json()["total"] == 1
