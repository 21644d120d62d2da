"""The hosted service over real HTTP (issue 12): every endpoint, field and status code of spec 4.1 and 4.4
(hosted), the gate order of HOSTED.md, the rate limit, Idempotency-Key, the v2 quota, and a restart that
loses nothing. The service is the real app under uvicorn (``conftest.start_hosted``)."""

from __future__ import annotations

import io
import re
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from hosted_support import Hosted, StartHosted
from support import needs_apertium

from dragoman.service import accounts, jobs

pytestmark = [needs_apertium, pytest.mark.scaled]  # scaled: also PostgreSQL+Procrastinate+Redis+S3

ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
LONG = "The cat sleeps on the warm mat. " * 20  # 640 characters: a job


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


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    assert isinstance(body["error"], str) and body["error"], body
    assert body["code"] == code, body
    return body


def balance(hosted: Hosted, account_id: str | None = None) -> int:
    return accounts.get_account(hosted.db, account_id or hosted.account_id).balance


# ----- v2 -------------------------------------------------------------------------------------------------
def test_v2_translate_is_the_daemon_contract_with_provenance_server(client: httpx.Client) -> None:
    one = client.post("/api/v2/translate", json={"text": "Hello world", "target": "es", "source": "en"})
    assert one.status_code == 200, one.text
    body = one.json()
    assert set(body) == {
        "translation",
        "source",
        "target",
        "provenance",
        "seconds",
        "warnings",
        "route",
        "tier",
    }
    assert body["provenance"] == "server" and body["source"] == "eng_Latn" and body["target"] == "spa_Latn"
    assert body["translation"].strip() and isinstance(body["warnings"], list)
    batch = client.post("/api/v2/translate", json={"texts": ["Hello", "Good morning"], "target": "spa_Latn"})
    assert batch.status_code == 200
    results = batch.json()["results"]
    assert len(results) == 2 and all(r["provenance"] == "server" for r in results)
    assert_error(client.post("/api/v2/translate", json={"text": "x"}), 400, "invalid_request")
    assert_error(
        client.post("/api/v2/translate", json={"text": "x", "target": "xx-nope"}), 400, "unknown_language"
    )
    too_many = {"texts": ["a"] * 65, "target": "es"}
    assert_error(client.post("/api/v2/translate", json=too_many), 400, "limit_exceeded")


def test_v2_needs_a_valid_key(hosted: Hosted) -> None:
    with hosted.client("") as anon:
        r = anon.post("/api/v2/translate", json={"text": "Hello", "target": "es"})
        assert_error(r, 401, "unauthorized")
        assert r.headers["www-authenticate"] == "Bearer"
    with hosted.client("svc_live_000000000000_" + "x" * 43) as wrong:
        assert_error(
            wrong.post("/api/v2/translate", json={"text": "Hello", "target": "es"}), 401, "unauthorized"
        )


def test_v2_daily_quota_429_body(hosted: Hosted) -> None:
    key, _ = hosted.new_key(daily_quota=20)
    with hosted.client(key) as c:
        assert (
            c.post("/api/v2/translate", json={"text": "Hello there friend", "target": "es"}).status_code
            == 200
        )
        r = c.post("/api/v2/translate", json={"text": "Hello again", "target": "es"})
        body = assert_error(r, 429, "quota_exceeded")
        assert body["error"] == "daily character quota exceeded"
        assert body["remaining"] == 2 and body["limit"] == 20
        assert body["resets_at"].endswith("T00:00:00.000Z")
        # what is left can still be spent; a batch counts every text
        assert c.post("/api/v2/translate", json={"texts": ["a", "b"], "target": "es"}).status_code == 200
        assert c.post("/api/v2/translate", json={"text": "c", "target": "es"}).status_code == 429


def test_v2_languages_needs_no_key_and_matches_the_daemon_rows(hosted: Hosted) -> None:
    with hosted.client("") as anon:
        rows = anon.get("/api/v2/languages").json()
        assert {"flores": "spa_Latn", "bcp47": "es", "name": "Spanish", "rtl": False} in rows
        assert all(set(r) == {"flores", "bcp47", "name", "rtl"} for r in rows)
        assert len(anon.get("/api/v2/languages?all=1").json()) == 204
        assert_error(anon.get("/api/v2/languages?all=maybe"), 400, "invalid_request")


# ----- v1 languages and quote -----------------------------------------------------------------------------
def test_v1_languages(hosted: Hosted) -> None:
    with hosted.client("") as anon:
        r = anon.get("/api/v1/languages")
    assert r.status_code == 200 and "ratelimit-limit" not in r.headers
    rows = {row["flores"]: row for row in r.json()}
    assert len(rows) == 204
    spa = rows["spa_Latn"]
    assert spa["code"] == "es" and spa["native_name"] == "español" and spa["tier"] == 1
    assert spa["credit_multiplier"] == spa["tier"] and spa["script"] == "Latn" and spa["variants"] == []
    assert "zho_Hant" in rows["zho_Hans"]["variants"] and rows["zho_Hans"]["code"] == "zh-Hans"
    assert rows["arb_Arab"]["rtl"] is True
    assert {row["tier"] for row in rows.values()} == {1, 2, 3}


def test_quote(hosted: Hosted) -> None:
    with hosted.client("") as anon:
        r = anon.post("/api/v1/quote", json={"chars": 1234, "src": "en", "tgt": "es"})
        assert r.status_code == 200
        assert r.json() == {
            "credits": 13,
            "breakdown": {"chars": 1234, "src": "en", "tgt": "es", "langTier": 1},
        }
        estimated = anon.post(
            "/api/v1/quote", json={"fileBytes": 100_000, "mime": "application/pdf", "src": "en", "tgt": "es"}
        )
        assert estimated.status_code == 200 and estimated.json()["breakdown"]["chars"] > 0
        assert (
            anon.post("/api/v1/quote", json={"chars": 1, "src": "en", "target": "es"}).json()["credits"] == 1
        )
        assert_error(anon.post("/api/v1/quote", json={"src": "en", "tgt": "es"}), 400, "invalid_request")
        assert_error(anon.post("/api/v1/quote", json={"chars": 5, "src": "en"}), 400, "invalid_request")
        assert_error(
            anon.post("/api/v1/quote", json={"chars": 5, "src": "en", "tgt": "qq"}), 400, "unknown_language"
        )
        assert_error(
            anon.post("/api/v1/quote", json={"chars": "5", "src": "en", "tgt": "es"}), 400, "invalid_request"
        )
        bad_mime = {"fileBytes": 10, "mime": "text/plain", "src": "en", "tgt": "es"}
        assert anon.post("/api/v1/quote", json=bad_mime).status_code == 415
        big = {"fileBytes": 300 * 1024 * 1024, "mime": "application/pdf", "src": "en", "tgt": "es"}
        assert anon.post("/api/v1/quote", json=big).status_code == 413


# ----- v1 translate ---------------------------------------------------------------------------------------
def test_sync_translate_is_done_charged_and_listed(hosted: Hosted, client: httpx.Client) -> None:
    before = balance(hosted)
    quote = client.post("/api/v1/quote", json={"chars": 11, "src": "en", "tgt": "es"}).json()
    r = client.post("/api/v1/translate", json={"text": "Hello world", "src": "en", "tgt": "es"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"job_id", "status", "sync", "credits", "elapsed_seconds", "result"}
    assert body["status"] == "done" and body["sync"] is True and body["result"].strip()
    assert body["credits"] == quote["credits"] and balance(hosted) == before - quote["credits"]
    assert r.headers["ratelimit-limit"] == "60"
    job = client.get(f"/api/v1/jobs/{body['job_id']}").json()
    assert job["status"] == "done" and job["sync"] is True and job["result"] == body["result"]
    listed = client.get("/api/v1/jobs").json()
    assert listed["total"] == 1 and listed["jobs"][0]["job_id"] == body["job_id"]
    # the alias `target` for `tgt`
    alias = client.post("/api/v1/translate", json={"text": "Good morning", "src": "en", "target": "es"})
    assert alias.status_code == 200 and alias.json()["sync"] is True


def test_async_translate_202_poll_until_done(hosted: Hosted, client: httpx.Client) -> None:
    before = balance(hosted)
    quote = client.post("/api/v1/quote", json={"chars": len(LONG), "src": "en", "tgt": "es"}).json()
    r = client.post("/api/v1/translate", json={"text": LONG, "src": "en", "tgt": "es"})
    assert r.status_code == 202, r.text
    accepted = r.json()
    assert accepted["status"] == "queued" and accepted["sync"] is False
    assert accepted["poll_url"] == f"{hosted.url}/api/v1/jobs/{accepted['job_id']}"
    assert accepted["credits_reserved"] == quote["credits"]
    job = wait_done(client, accepted["job_id"])
    assert job["status"] == "done", job
    assert job["progress_percent"] == 100 and job["credits"] == quote["credits"]
    assert "gato" in job["result"].lower() and "error" not in job and "export_docx" not in job
    assert ISO_MS.match(job["created_at"]) and job["elapsed_seconds"] >= 0
    assert balance(hosted) == before - quote["credits"]
    polled = httpx.get(accepted["poll_url"], headers={"Authorization": f"Bearer {hosted.key}"})
    assert polled.json()["job_id"] == accepted["job_id"]


def test_targets_make_a_batch(hosted: Hosted, client: httpx.Client) -> None:
    r = client.post("/api/v1/translate", json={"text": "Hello world", "src": "en", "targets": ["es", "de"]})
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["batch_id"] and len(body["job_ids"]) == 2 and body["sync"] is False
    assert [j["target"] for j in body["jobs"]] == ["es", "de"]
    for job_id in body["job_ids"]:
        job = wait_done(client, job_id)
        assert job["status"] == "done" and job["batch_id"] == body["batch_id"]
    assert_error(
        client.post("/api/v1/translate", json={"text": "x", "src": "en", "tgt": "es", "targets": ["de"]}),
        400,
        "invalid_request",
    )


def test_translate_validation(client: httpx.Client) -> None:
    assert_error(client.post("/api/v1/translate", json={"text": "x", "src": "en"}), 400, "invalid_request")
    assert_error(client.post("/api/v1/translate", json={"src": "en", "tgt": "es"}), 400, "invalid_request")
    assert_error(
        client.post("/api/v1/translate", json={"text": "x", "src": "en", "tgt": "zz"}),
        400,
        "unknown_language",
    )
    assert_error(
        client.post("/api/v1/translate", content=b"{nope", headers={"content-type": "application/json"}),
        400,
        "invalid_request",
    )
    assert_error(
        client.post("/api/v1/translate", json={"text": "x", "src": "en", "tgt": "es", "extra": 1}),
        400,
        "invalid_request",
    )
    hook = {"text": "x", "src": "en", "tgt": "es", "webhook": "ftp://example.com/x"}
    assert_error(client.post("/api/v1/translate", json=hook), 400, "invalid_webhook_url")
    too_long = {"text": "a" * 1_000_001, "src": "en", "tgt": "es"}
    assert client.post("/api/v1/translate", json=too_long).status_code == 400


def _docx_bytes() -> bytes:
    import docx

    document = docx.Document()
    document.add_heading("The report", level=1)
    document.add_paragraph("The cat sleeps on the warm mat. The dog runs in the green park.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


@pytest.mark.slow
def test_document_job_and_exports(hosted: Hosted, client: httpx.Client) -> None:
    files = {
        "file": (
            "report.docx",
            _docx_bytes(),
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        )
    }
    r = client.post("/api/v1/translate", files=files, data={"src": "en", "tgt": "es"})
    assert r.status_code == 202, r.text
    job = wait_done(client, r.json()["job_id"], timeout=120)
    assert job["status"] == "done", job
    assert job["export_docx"] == f"{job['poll_url']}/export/docx"
    assert job["export_pdf"] == f"{job['poll_url']}/export/pdf"
    assert job["result"].strip()
    docx_answer = client.get(job["export_docx"])
    assert docx_answer.status_code == 200
    assert docx_answer.headers["content-type"].startswith("application/vnd.openxmlformats-officedocument")
    assert docx_answer.headers["content-disposition"].startswith("attachment;")
    assert docx_answer.content[:2] == b"PK" and docx_answer.headers["ratelimit-limit"] == "60"
    pdf_answer = client.get(job["export_pdf"])
    assert pdf_answer.status_code == 200 and pdf_answer.headers["content-type"] == "application/pdf"
    assert (
        pdf_answer.content.startswith(b"%PDF") and "attachment" in pdf_answer.headers["content-disposition"]
    )
    # a text job has no exports
    text_job = client.post("/api/v1/translate", json={"text": "Hello", "src": "en", "tgt": "es"}).json()
    assert_error(client.get(f"/api/v1/jobs/{text_job['job_id']}/export/pdf"), 404, "not_found")


def test_upload_refusals_415_413(hosted: Hosted, client: httpx.Client) -> None:
    r = client.post(
        "/api/v1/translate",
        files={"file": ("a.txt", b"just text", "text/plain")},
        data={"src": "en", "tgt": "es"},
    )
    assert_error(r, 415, "unsupported_document")
    no_file = client.post(
        "/api/v1/translate",
        files={"other": ("a.pdf", b"%PDF-1.4", "application/pdf")},
        data={"src": "en", "tgt": "es"},
    )
    assert_error(no_file, 400, "invalid_request")
    # 413 from the announced length, before any byte of the body is read
    host, port = hosted.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(
            (
                "POST /api/v1/translate HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {hosted.key}\r\n"
                "Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 300000000\r\n\r\n"
            ).encode()
        )
        head = sock.recv(65536).decode("latin-1")
    assert head.startswith("HTTP/1.1 413"), head[:200]
    assert "file_too_large" in head and "ratelimit-limit" in head.lower()


# ----- jobs -----------------------------------------------------------------------------------------------
def test_cancel_refunds_at_once_then_409_and_404_for_other_keys(start_hosted: StartHosted) -> None:
    hosted = start_hosted(workers=False)  # no runner: the job stays queued
    with hosted.client() as client:
        before = balance(hosted)
        accepted = client.post("/api/v1/translate", json={"text": LONG, "src": "en", "tgt": "es"}).json()
        assert balance(hosted) == before - accepted["credits_reserved"]
        other_key, _ = hosted.new_key()
        with hosted.client(other_key) as other:
            assert_error(other.get(f"/api/v1/jobs/{accepted['job_id']}"), 404, "not_found")
            assert_error(other.delete(f"/api/v1/jobs/{accepted['job_id']}"), 404, "not_found")
        r = client.delete(f"/api/v1/jobs/{accepted['job_id']}")
        assert r.status_code == 200
        assert r.json() == {
            "ok": True,
            "job_id": accepted["job_id"],
            "status": "canceled",
            "credits_refunded": accepted["credits_reserved"],
        }
        assert balance(hosted) == before
        assert client.get(f"/api/v1/jobs/{accepted['job_id']}").json()["status"] == "canceled"
        body = assert_error(client.delete(f"/api/v1/jobs/{accepted['job_id']}"), 409, "job_finished")
        assert body["status"] == "canceled"
        assert_error(client.get("/api/v1/jobs/not-a-job"), 404, "not_found")


def test_job_list_paging_and_bounds(start_hosted: StartHosted) -> None:
    hosted = start_hosted(workers=False, rate=1000)
    with hosted.client() as client:
        made = [
            client.post("/api/v1/translate", json={"text": f"{LONG} {i}", "src": "en", "tgt": "es"}).json()[
                "job_id"
            ]
            for i in range(55)
        ]
        page = client.get("/api/v1/jobs").json()
        assert page["total"] == 55 and len(page["jobs"]) == 50 and page["limit"] == 50 and page["offset"] == 0
        assert [j["job_id"] for j in page["jobs"]] == made[::-1][:50]
        item = page["jobs"][0]
        assert set(item) == {"job_id", "status", "title", "credits", "created_at"}
        assert item["status"] == "queued" and item["credits"] is None and ISO_MS.match(item["created_at"])
        rest = client.get("/api/v1/jobs", params={"limit": 10, "offset": 50}).json()
        assert [j["job_id"] for j in rest["jobs"]] == made[::-1][50:]
        assert len(client.get("/api/v1/jobs", params={"limit": 200}).json()["jobs"]) == 55
        assert_error(client.get("/api/v1/jobs", params={"limit": 201}), 400, "invalid_request")
        assert_error(client.get("/api/v1/jobs", params={"limit": 0}), 400, "invalid_request")
        assert_error(client.get("/api/v1/jobs", params={"offset": -1}), 400, "invalid_request")


# ----- usage ----------------------------------------------------------------------------------------------
def test_usage(hosted: Hosted, client: httpx.Client) -> None:
    client.post("/api/v1/translate", json={"text": "Hello world", "src": "en", "tgt": "es"})
    r = client.get("/api/v1/usage")
    assert r.status_code == 200
    body = r.json()
    assert body["key_id"] == hosted.key_id and len(body["days"]) == 30
    assert all(set(d) == {"day", "requests", "credits_spent"} for d in body["days"])
    assert body["days"][-1]["requests"] == 2 and body["days"][-1]["credits_spent"] == 1
    assert all(d["requests"] == 0 and d["credits_spent"] == 0 for d in body["days"][:-1])
    assert body["balance"] == balance(hosted) and body["mode"] == "live"
    assert body["month_spend"] == 1 and body["products"] == {"translate": 1}
    assert body["rate_limit"]["limit"] == 60 and body["rate_limit"]["remaining"] == 58
    assert body["daily_quota"]["limit"] == 200_000 and body["daily_quota"]["remaining"] == 200_000
    assert ISO_MS.match(body["month_resets_at"]) and ISO_MS.match(body["daily_quota"]["resets_at"])


def test_a_key_without_activity_gets_thirty_zero_days(hosted: Hosted) -> None:
    key, key_id = hosted.new_key()
    with hosted.client(key) as c:
        body = c.get("/api/v1/usage").json()
    assert body["key_id"] == key_id and len(body["days"]) == 30
    assert sum(d["credits_spent"] for d in body["days"]) == 0
    assert sum(d["requests"] for d in body["days"]) == 1  # this request itself


# ----- the gate -------------------------------------------------------------------------------------------
def test_gate_order_401_403_429_idempotency_validation_402(start_hosted: StartHosted) -> None:
    hosted = start_hosted(rate=3)
    bad_body = {"text": 5}
    with hosted.client("") as anon:  # 401 before anything else, even a bad body
        assert_error(anon.post("/api/v1/translate", json=bad_body), 401, "unauthorized")
    free_key, _ = hosted.new_key(plan="free")
    with hosted.client(free_key) as free:  # 403 before the rate and the body
        for _ in range(5):
            assert_error(free.post("/api/v1/translate", json=bad_body), 403, "plan_without_api")
    poor_key, _ = hosted.new_key(credits=0)
    with hosted.client(poor_key) as poor:
        good = {"text": "Hello", "src": "en", "tgt": "es"}
        first = poor.post("/api/v1/translate", json=good, headers={"Idempotency-Key": "k1"})
        assert_error(first, 402, "insufficient_credits")  # validation passed, then 402
        assert first.headers["ratelimit-remaining"] == "2"
        # validation before 402: a bad body with no credits is 400
        assert_error(poor.post("/api/v1/translate", json=bad_body), 400, "invalid_request")
        # a stored answer with this Idempotency-Key, then another body with it: 422 before validation
        accounts.credit_account(
            hosted.db, accounts.authenticate(hosted.db, f"Bearer {poor_key}").account_id, 100
        )
        assert poor.post("/api/v1/translate", json=good, headers={"Idempotency-Key": "k2"}).status_code == 200
    with hosted.client(poor_key) as poor:
        r = poor.post("/api/v1/translate", json=bad_body, headers={"Idempotency-Key": "k2"})
        assert_error(r, 429, "rate_limited")  # the 4th request this minute: 429 before idempotency
        assert int(r.headers["retry-after"]) >= 1


def test_idempotency_mismatch_comes_before_validation(client: httpx.Client) -> None:
    good = {"text": "Hello", "src": "en", "tgt": "es"}
    assert client.post("/api/v1/translate", json=good, headers={"Idempotency-Key": "same"}).status_code == 200
    r = client.post("/api/v1/translate", json={"text": 5}, headers={"Idempotency-Key": "same"})
    assert_error(r, 422, "idempotency_key_reused")


def test_61st_request_in_a_minute_is_429_with_retry_after(hosted: Hosted, client: httpx.Client) -> None:
    for i in range(60):
        r = client.get("/api/v1/jobs")
        assert r.status_code == 200, (i, r.text)
        assert r.headers["ratelimit-limit"] == "60" and r.headers["ratelimit-remaining"] == str(59 - i)
        assert 1 <= int(r.headers["ratelimit-reset"]) <= 60
    r = client.get("/api/v1/jobs/whatever")  # polls count too
    body = assert_error(r, 429, "rate_limited")
    assert 1 <= int(r.headers["retry-after"]) <= 60 and r.headers["ratelimit-remaining"] == "0"
    assert (
        body["retry_after"] == int(r.headers["retry-after"])
        and body["limit"] == 60
        and body["remaining"] == 0
    )
    assert ISO_MS.match(body["resets_at"])
    other_key, _ = hosted.new_key()
    with hosted.client(other_key) as other:  # the limit is per key
        assert other.get("/api/v1/jobs").status_code == 200


# ----- Idempotency-Key ------------------------------------------------------------------------------------
def test_idempotent_replay_and_errors_not_stored(hosted: Hosted, client: httpx.Client) -> None:
    r1 = client.post(
        "/api/v1/translate", json={"text": LONG, "src": "en", "tgt": "es"}, headers={"Idempotency-Key": "a"}
    )
    r2 = client.post(
        "/api/v1/translate", json={"text": LONG, "src": "en", "tgt": "es"}, headers={"Idempotency-Key": "a"}
    )
    assert r1.status_code == r2.status_code == 202
    assert r2.json() == r1.json() and r2.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in r1.headers
    assert client.get("/api/v1/jobs").json()["total"] == 1
    # an error before execution is not stored: the same request runs again once it can
    bad = {"text": "Hello", "src": "en", "tgt": "zz"}
    assert client.post("/api/v1/translate", json=bad, headers={"Idempotency-Key": "b"}).status_code == 400
    assert client.post("/api/v1/translate", json=bad, headers={"Idempotency-Key": "b"}).status_code == 400
    good = {"text": "Hello", "src": "en", "tgt": "es"}
    assert client.post("/api/v1/translate", json=good, headers={"Idempotency-Key": "b"}).status_code == 200
    # keys are scoped to the API key
    other_key, _ = hosted.new_key()
    with hosted.client(other_key) as other:
        r = other.post(
            "/api/v1/translate",
            json={"text": LONG, "src": "en", "tgt": "es"},
            headers={"Idempotency-Key": "a"},
        )
        assert r.status_code == 202 and "idempotent-replayed" not in r.headers
    assert_error(
        client.post("/api/v1/translate", json=good, headers={"Idempotency-Key": "k" * 256}),
        400,
        "invalid_request",
    )


@pytest.mark.parametrize("text", ["Hello world, how are you today?", LONG])
def test_two_concurrent_posts_with_one_idempotency_key_run_once(hosted: Hosted, text: str) -> None:
    before = balance(hosted)
    rounds = 3

    def post(pair: tuple[threading.Barrier, str]) -> httpx.Response:
        barrier, idem = pair
        with hosted.client() as c:
            barrier.wait()
            body = {"text": text, "src": "en", "tgt": "es"}
            return c.post("/api/v1/translate", json=body, headers={"Idempotency-Key": idem})

    for round_ in range(rounds):
        barrier = threading.Barrier(2)
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(post, [(barrier, f"race-{round_}")] * 2))
        ok = [a for a in answers if a.status_code in (200, 202)]
        assert ok, [a.text for a in answers]
        for a in answers:
            if a.status_code == 409:
                assert a.json()["code"] == "idempotency_in_progress" and int(a.headers["retry-after"]) >= 1
            else:
                assert a.status_code == ok[0].status_code and a.json()["job_id"] == ok[0].json()["job_id"]
    with hosted.client() as c:
        listed = c.get("/api/v1/jobs").json()
        assert listed["total"] == rounds  # one job a key, however the two requests met
        charged = sum(wait_done(c, j["job_id"])["credits"] for j in listed["jobs"])
    assert balance(hosted) == before - charged


# ----- restarts -------------------------------------------------------------------------------------------
def test_a_restart_loses_nothing(start_hosted: StartHosted, tmp_path: Any) -> None:
    data = tmp_path / "restart"
    first = start_hosted(data, workers=False, lease_seconds=1.0)
    with first.client() as c:
        mid_job = c.post("/api/v1/translate", json={"text": LONG, "src": "en", "tgt": "es"}).json()["job_id"]
        queued = c.post(
            "/api/v1/translate", json={"text": LONG + " Again.", "src": "en", "tgt": "es"}
        ).json()["job_id"]
    # a worker claims the first job and dies with it (its lease runs out); the second is still queued
    claimed = jobs.claim(first.db, "worker-that-died", lease_s=1.0)
    assert claimed is not None and claimed.id == mid_job
    assert jobs.status_of(first.db, mid_job) == "active"
    first.stop()
    second = start_hosted(data, lease_seconds=1.0)
    with httpx.Client(base_url=second.url, headers={"Authorization": f"Bearer {first.key}"}, timeout=60) as c:
        for job_id in (mid_job, queued):
            job = wait_done(c, job_id)
            assert job["status"] == "done" and "gato" in job["result"].lower(), job


# ----- the OpenAPI document -------------------------------------------------------------------------------
def test_openapi_covers_every_route(hosted: Hosted) -> None:
    with hosted.client("") as anon:
        document = anon.get("/openapi.json").json()
    assert document["openapi"] == "3.1.0"
    paths = document["paths"]
    expected = {
        ("/api/v2/translate", "post"),
        ("/api/v2/languages", "get"),
        ("/api/v1/languages", "get"),
        ("/api/v1/quote", "post"),
        ("/api/v1/translate", "post"),
        ("/api/v1/jobs", "get"),
        ("/api/v1/jobs/{job_id}", "get"),
        ("/api/v1/jobs/{job_id}", "delete"),
        ("/api/v1/jobs/{job_id}/export/docx", "get"),
        ("/api/v1/jobs/{job_id}/export/pdf", "get"),
        ("/api/v1/usage", "get"),
        ("/api/v1/tts/synth", "post"),  # voice rendering (issue 14)
        ("/api/v1/tts/synth/stream", "post"),
        ("/api/v1/tts/voices", "get"),
        ("/api/v1/tts/jobs/{job_id}", "get"),
        ("/api/v1/tts/jobs/{job_id}/audio", "get"),
        ("/api/v1/tts/voices/clones", "post"),  # voice matches, words and edits (issue 14)
        ("/api/v1/tts/voices/clones", "get"),
        ("/api/v1/tts/voices/clones/{clone_id}", "get"),
        ("/api/v1/tts/voices/clones/{clone_id}", "delete"),
        ("/api/v1/tts/jobs/{job_id}/words", "get"),
        ("/api/v1/tts/jobs/{job_id}/words", "post"),
        ("/api/v1/tts/jobs/{job_id}/edit", "post"),
        ("/api/v1/subtitles/upload", "post"),  # subtitles (issue 15)
        ("/api/v1/subtitles/create", "post"),
        ("/api/v1/subtitles", "post"),
        ("/api/v1/subtitles/{job_id}/status", "get"),
        ("/api/v1/subtitles/{job_id}/download/{fmt}", "get"),
        ("/api/v1/dub", "post"),  # dubbing (issue 16)
        ("/api/v1/dub/{job_id}", "get"),
        *(
            (f"/api/v1/dub/{{job_id}}/{artifact}", "get")
            for artifact in ("srt", "vtt", "txt", "bilingual-srt", "video", "audio")
        ),
        ("/openapi.json", "get"),
    }
    assert {(p, m) for p, ops in paths.items() for m in ops} == expected
    translate = paths["/api/v1/translate"]["post"]
    assert set(translate["responses"]) >= {
        "200",
        "202",
        "400",
        "401",
        "402",
        "403",
        "409",
        "413",
        "415",
        "422",
        "429",
    }
    assert "multipart/form-data" in translate["requestBody"]["content"]
    assert "Retry-After" in translate["responses"]["429"]["headers"]
    assert translate["security"] == [{"bearer": []}]
    assert paths["/api/v1/quote"]["post"]["security"] == [{}]
    error = document["components"]["schemas"]["ErrorBody"]
    assert {"error", "code", "retry_after", "remaining", "limit", "resets_at"} <= set(error["properties"])
