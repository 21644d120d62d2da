"""The local daemon over real HTTP: a uvicorn server on a free loopback port, driven with httpx.

Translations are real: Apertium eng<->spa (system pairs) and a tiny CTranslate2 pack (en->de, gibberish but
produced by the real backend). Only the saturation and graceful-shutdown tests use a stub engine, because
they need an engine that blocks until the test lets it go.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import jsonschema  # type: ignore[import-untyped]
import pytest
from referencing import Registry
from referencing.jsonschema import DRAFT202012
from support import needs_apertium

from dragoman import __version__
from dragoman.cli import main as cli_main
from dragoman.errors import BackendError
from dragoman.server._http import host_name
from dragoman.server.daemon.app import _checked, create_app, is_loopback
from dragoman.server.daemon.portfile import daemon_file
from dragoman.settings import Settings
from dragoman.testing.daemon import BackgroundDaemon
from dragoman.testing.fakes import BlockingEngine
from dragoman.testing.tinypack import build_argos_pack
from dragoman.translation.engine import Engine
from dragoman.translation.types import TranslateOptions, TranslationResult

MB2 = 2 * 1024 * 1024
pytestmark = [pytest.mark.apertium, needs_apertium]


# ----- fixtures -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    root = tmp_path_factory.mktemp("daemon")
    packs = root / "packs"
    build_argos_pack(packs / "translate-en_de", "en", "de")
    broken = build_argos_pack(packs / "translate-en_fr", "en", "fr")
    (broken / "model" / "model.bin").write_bytes(b"not a model")  # loads, then fails: a real engine failure
    glossary = root / "config" / "glossary.json"
    return Settings.from_env(
        {
            "DRAGOMAN_PACKS_DIR": str(packs),
            "DRAGOMAN_GLOSSARY": str(glossary),
            "DRAGOMAN_STATE_DIR": str(root / "state"),
        }
    )


@pytest.fixture(scope="module")
def engine(settings: Settings) -> Iterator[Engine]:
    with Engine(settings) as eng:
        yield eng


@pytest.fixture(scope="module")
def daemon(engine: Engine, settings: Settings) -> Iterator[BackgroundDaemon]:
    app = create_app(engine, settings, max_workers=2, queue_limit=64, request_timeout=60)
    with BackgroundDaemon(app) as running:
        yield running


@pytest.fixture(scope="module")
def client(daemon: BackgroundDaemon) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=daemon.url, timeout=60) as c:
        yield c


def write_glossary_file(settings: Settings, entries: Sequence[dict[str, Any]]) -> None:
    """Write the user's glossary file as a user (or another process) would: whole, then renamed in."""
    path = settings.local.glossary_path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"version": 1, "entries": list(entries)}), encoding="utf-8")
    os.replace(tmp, path)


def raw_http(
    port: int, head: bytes, body_chunks: Sequence[bytes] = (), timeout: float = 20
) -> tuple[int, bytes]:
    """Send a hand-made request; return the status and the body of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head)
        for chunk in body_chunks:
            try:
                sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
        data = b""
        try:
            while b"\r\n\r\n" not in data or len(data) < _expected(data):
                more = sock.recv(65536)
                if not more:
                    break
                data += more
        except ConnectionResetError:
            pass
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[1]


def _expected(data: bytes) -> int:
    head, _, _ = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(head) + 4 + int(line.split(b":")[1])
    return len(data) + 1


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert isinstance(body["error"], str) and body["error"]
    if code is not None:
        assert body["code"] == code, body
    return dict(body)


# ----- GET /health, /languages, /openapi.json -------------------------------------------------------
def test_health_documents_the_engine(client: httpx.Client) -> None:
    client.post("/translate", json={"text": "The house is red.", "target": "es", "source": "en"})
    body = client.get("/health").json()
    assert body["ok"] is True
    eng = body["engine"]
    assert eng["version"] == __version__
    assert eng["provenance"] == "on-device"
    assert eng["uptime_seconds"] >= 0
    assert "argos-en-de" in eng["packs_installed"]
    assert any("eng" in p and "spa" in p for p in eng["packs_installed"])
    assert any("eng" in p and "spa" in p for p in eng["packs_loaded"])  # loaded by the call above
    assert set(eng["packs_loaded"]) <= set(eng["packs_installed"])
    assert eng["backends"] == {"ctranslate2": True, "apertium": True}
    assert eng["queue"] == {"workers": 2, "limit": 64, "in_flight": 0, "timeout_seconds": 60}
    client.post("/translate", json={"text": "The house is red.", "target": "de", "source": "en"})
    batching = client.get("/health").json()["engine"]["batching"]  # argos-en-de went through the batcher
    assert batching["enabled"] is True and batching["batches"] >= 1 and batching["mean_batch_size"] >= 1
    assert batching["queue_depth"] == 0 and batching["max_segments"] == 64
    assert eng["auth"] is False


def test_languages_rows(client: httpx.Client) -> None:
    rows = client.get("/languages").json()
    by_code = {r["flores"]: r for r in rows}
    assert {"eng_Latn", "spa_Latn", "deu_Latn"} <= set(by_code)
    assert by_code["spa_Latn"] == {"flores": "spa_Latn", "bcp47": "es", "name": "Spanish", "rtl": False}
    everything = client.get("/languages", params={"all": "1"}).json()
    assert len(everything) > len(rows) and any(r["rtl"] for r in everything)
    assert_error(client.get("/languages", params={"all": "maybe"}), 400, "invalid_request")


def test_openapi_describes_every_route_and_validates_real_answers(client: httpx.Client) -> None:
    doc = client.get("/openapi.json").json()
    assert set(doc["paths"]) == {"/translate", "/health", "/languages", "/openapi.json"}
    registry: Registry[Any] = Registry().with_resource("urn:doc", DRAFT202012.create_resource(doc))

    def check(instance: Any, path: str, method: str, status: str) -> None:
        pointer = "/".join(
            p.replace("~", "~0").replace("/", "~1")
            for p in ("paths", path, method, "responses", status, "content", "application/json", "schema")
        )
        validator = jsonschema.Draft202012Validator({"$ref": f"urn:doc#/{pointer}"}, registry=registry)
        validator.validate(instance)

    check(client.get("/health").json(), "/health", "get", "200")
    check(client.get("/languages").json(), "/languages", "get", "200")
    one = client.post("/translate", json={"text": "Good morning.", "target": "es", "source": "en"})
    check(one.json(), "/translate", "post", "200")
    many = client.post("/translate", json={"texts": ["Good morning."], "target": "es", "source": "en"})
    check(many.json(), "/translate", "post", "200")
    check(client.post("/translate", json={"target": "es"}).json(), "/translate", "post", "400")
    with pytest.raises(jsonschema.ValidationError):
        check({"translation": 5}, "/translate", "post", "200")


# ----- POST /translate: results -------------------------------------------------------------------
def test_translate_one_text(client: httpx.Client) -> None:
    body = client.post("/translate", json={"text": "The house is red.", "target": "es"}).json()
    assert "casa" in body["translation"].lower()
    assert body["source"] == "eng_Latn" and body["target"] == "spa_Latn"
    assert body["provenance"] == "on-device"
    assert isinstance(body["seconds"], float) and body["seconds"] >= 0
    assert isinstance(body["warnings"], list)
    assert body["tier"] == "best" and body["route"]
    flores = client.post(
        "/translate", json={"text": "La casa es roja.", "target": "eng_Latn", "source": "spa_Latn"}
    )
    assert "house" in flores.json()["translation"].lower()
    assert flores.json()["source"] == "spa_Latn"


def test_translate_ctranslate2_pack_and_fast_tier(client: httpx.Client) -> None:
    body = client.post(
        "/translate", json={"text": "Hello world.", "target": "de", "source": "en", "tier": "fast"}
    )
    assert body.status_code == 200, body.text
    result = body.json()
    assert result["target"] == "deu_Latn" and result["tier"] == "fast"
    assert result["route"] == ["argos-en-de:eng_Latn->deu_Latn"]
    assert result["translation"].strip()


def test_batch_answers_in_input_order(client: httpx.Client) -> None:
    pairs = [("The dog.", "perro"), ("The house.", "casa"), ("The cat.", "gato"), ("The water.", "agua")]
    for order in (pairs, list(reversed(pairs))):
        response = client.post(
            "/translate", json={"texts": [t for t, _ in order], "target": "es", "source": "en"}
        )
        results = response.json()["results"]
        assert len(results) == len(order)
        for (_, word), result in zip(order, results, strict=True):
            assert word in result["translation"].lower(), (word, result)
            assert result["provenance"] == "on-device"


def test_empty_batch_is_an_empty_answer(client: httpx.Client) -> None:
    assert client.post("/translate", json={"texts": [], "target": "es"}).json() == {"results": []}
    assert_error(client.post("/translate", json={"texts": [], "target": "xx-nope"}), 400, "unknown_language")


def test_request_glossary_applies(client: httpx.Client) -> None:
    glossary = [{"term": "house", "translation": "HAUS-7"}]
    body = client.post(
        "/translate", json={"text": "The house is red.", "target": "es", "source": "en", "glossary": glossary}
    ).json()
    assert "HAUS-7" in body["translation"]
    strict = [{"term": "HOUSE", "translation": "HAUS-7", "caseSensitive": True}]
    body = client.post(
        "/translate", json={"text": "The house is red.", "target": "es", "source": "en", "glossary": strict}
    ).json()
    assert "HAUS-7" not in body["translation"]


def test_glossary_file_applies_when_the_request_has_none(client: httpx.Client, settings: Settings) -> None:
    write_glossary_file(settings, [{"term": "house", "translation": "CASA-FILE-9"}])
    try:
        request = {"text": "The house is red.", "target": "es", "source": "en"}
        assert "CASA-FILE-9" in client.post("/translate", json=request).json()["translation"]
        none = client.post("/translate", json={**request, "glossary": []}).json()["translation"]
        assert "CASA-FILE-9" not in none and "casa" in none.lower()
        own = client.post(
            "/translate", json={**request, "glossary": [{"term": "red", "translation": "ROT-1"}]}
        )
        assert "CASA-FILE-9" not in own.json()["translation"] and "ROT-1" in own.json()["translation"]
    finally:
        write_glossary_file(settings, [])


def test_concurrent_requests_each_get_their_own_answer(daemon: BackgroundDaemon) -> None:
    words = ["dog", "house", "cat", "water", "book", "city", "tree", "car"] * 3

    def one(word: str) -> str:
        with httpx.Client(base_url=daemon.url, timeout=60) as c:
            response = c.post("/translate", json={"text": f"The {word}.", "target": "es", "source": "en"})
            assert response.status_code == 200, response.text
            return str(response.json()["translation"]).lower()

    with ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(one, words))
    expected = {
        "dog": "perro",
        "house": "casa",
        "cat": "gato",
        "water": "agua",
        "book": "libro",
        "city": "ciudad",
        "tree": "árbol",
        "car": "coche",
    }
    for word, answer in zip(words, answers, strict=True):
        assert expected[word] in answer, (word, answer)


# ----- POST /translate: errors ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "code", "needle"),
    [
        ({"text": "Hi"}, "invalid_request", "target"),
        ({"target": "es"}, "invalid_request", "text or texts"),
        ({"text": "Hi", "texts": ["Hi"], "target": "es"}, "invalid_request", "not both"),
        ({"text": None, "texts": None, "target": "es"}, "invalid_request", "text or texts"),
        ({"text": 5, "target": "es"}, "invalid_request", "text"),
        ({"texts": "Hi", "target": "es"}, "invalid_request", "texts"),
        ({"texts": ["a", 1], "target": "es"}, "invalid_request", "texts.1"),
        ({"text": "Hi", "target": 5}, "invalid_request", "target"),
        ({"text": "Hi", "target": "es", "source": ["en"]}, "invalid_request", "source"),
        ({"text": "Hi", "target": "es", "tier": "medium"}, "invalid_request", "tier"),
        ({"text": "Hi", "target": "es", "tier": 1}, "invalid_request", "tier"),
        ({"text": "Hi", "target": "es", "glossary": "house"}, "invalid_request", "glossary"),
        ({"text": "Hi", "target": "es", "glossary": [{"term": "a"}]}, "invalid_request", "translation"),
        (
            {
                "text": "Hi",
                "target": "es",
                "glossary": [{"term": "a", "translation": "b", "caseSensitive": "yes"}],
            },
            "invalid_request",
            "caseSensitive",
        ),
        ({"text": "Hi", "target": "es", "glosary": []}, "invalid_request", "unknown field 'glosary'"),
        ({"texts": ["x"] * 65, "target": "es"}, "limit_exceeded", "64"),
        (
            {
                "text": "Hi",
                "target": "es",
                "glossary": [{"term": f"t{i}", "translation": "x"} for i in range(201)],
            },
            "limit_exceeded",
            "200",
        ),
        ({"text": "Hi", "target": "xx-nope"}, "unknown_language", "xx-nope"),
        ({"text": "Hi", "target": "es", "source": "qqq"}, "unknown_language", "qqq"),
        ({"text": "Hello.", "target": "ja", "source": "en"}, "unsupported_pair", "jpn_Jpan"),
        ({"text": "\ud800", "target": "es"}, "invalid_request", "surrogate"),
    ],
)
def test_bad_requests_are_400_with_a_reason(client: httpx.Client, body: Any, code: str, needle: str) -> None:
    data = json.dumps(body).encode()
    error = assert_error(client.post("/translate", content=data), 400, code)
    assert needle in error["error"], error


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "empty"),
        (b"{", "not valid JSON"),
        (b"\xff\xfe\xfa", "not valid JSON"),
        (b"[]", "JSON object"),
        (b'"text"', "JSON object"),
        (b"5", "JSON object"),
        (b"null", "JSON object"),
    ],
)
def test_malformed_bodies_are_400(client: httpx.Client, content: bytes, needle: str) -> None:
    error = assert_error(client.post("/translate", content=content), 400, "invalid_request")
    assert needle in error["error"]


def test_unknown_routes_and_methods_answer_json(client: httpx.Client) -> None:
    assert_error(client.get("/nope"), 404, "not_found")
    wrong = assert_error(client.get("/translate"), 405, "method_not_allowed")
    assert wrong  # and the Allow header says what is allowed
    assert "POST" in client.get("/translate").headers["allow"]


def test_engine_failure_is_502_never_an_empty_translation(client: httpx.Client) -> None:
    error = assert_error(
        client.post("/translate", json={"text": "Hello.", "target": "fr", "source": "en"}), 502
    )
    assert "argos-en-fr" in error["error"] or "fr" in error["error"]


def test_empty_translation_guard() -> None:
    asked = TranslateOptions("spa_Latn", "eng_Latn")
    ok = TranslationResult("x", "eng_Latn", "spa_Latn", "on-device", 0.1, options=asked)
    empty = TranslationResult("  ", "eng_Latn", "spa_Latn", "on-device", 0.1, options=asked)
    _checked(["a", " "], [ok, empty])  # a blank text may come back blank
    with pytest.raises(BackendError):
        _checked(["a", "b"], [ok, empty])
    with pytest.raises(BackendError):
        _checked(["a", "b"], [ok])


def test_timeout_is_504_and_the_work_is_dropped(engine: Engine, settings: Settings) -> None:
    app = create_app(engine, settings, max_workers=1, queue_limit=4, request_timeout=0.02)
    texts = [f"The {i} houses of the city are red, and the dogs sleep in the garden." * 5 for i in range(64)]
    with BackgroundDaemon(app) as running, httpx.Client(base_url=running.url, timeout=60) as c:
        error = assert_error(c.post("/translate", json={"texts": texts, "target": "es", "source": "en"}), 504)
        assert error["code"] == "timeout" and "--timeout" in error["error"]
        deadline = time.monotonic() + 60
        while c.get("/health").json()["engine"]["queue"]["in_flight"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert c.get("/health").json()["engine"]["queue"]["in_flight"] == 0


# ----- body limit -----------------------------------------------------------------------------------
def test_content_length_over_2mb_is_413_before_the_body_is_read(daemon: BackgroundDaemon) -> None:
    head = (
        f"POST /translate HTTP/1.1\r\nHost: 127.0.0.1:{daemon.port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {MB2 + 1}\r\nConnection: close\r\n\r\n"
    ).encode()
    # No body is sent at all: a server waiting for it would never answer (raw_http's socket times out).
    status, body = raw_http(daemon.port, head)
    assert status == 413 and json.loads(body)["code"] == "body_too_large"


def test_chunked_body_over_2mb_is_413(daemon: BackgroundDaemon) -> None:
    head = (
        f"POST /translate HTTP/1.1\r\nHost: 127.0.0.1:{daemon.port}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    ).encode()
    piece = b"a" * 65536
    chunks = [b"%x\r\n%s\r\n" % (len(piece), piece)] * (MB2 // len(piece) + 1) + [b"0\r\n\r\n"]
    status, body = raw_http(daemon.port, head, chunks)
    assert status == 413 and json.loads(body)["code"] == "body_too_large"


def test_body_just_under_the_limit_is_accepted(client: httpx.Client) -> None:
    data = json.dumps({"text": "The dog.", "target": "es", "source": "en"}).encode()
    data += b" " * (MB2 - len(data))
    assert len(data) == MB2
    assert "perro" in client.post("/translate", content=data).json()["translation"]

    def gen() -> Iterator[bytes]:  # chunked (no Content-Length), also under the limit
        yield data[: MB2 // 2]
        yield data[MB2 // 2 :]

    assert "perro" in client.post("/translate", content=gen()).json()["translation"]


# ----- token, Host, CORS ----------------------------------------------------------------------------
def test_token_guards_every_route(engine: Engine, settings: Settings) -> None:
    app = create_app(engine, settings, token="s3cret-t0ken", allowed_origins=["http://ok.test"])
    with BackgroundDaemon(app) as running, httpx.Client(base_url=running.url, timeout=60) as c:
        good = {"Authorization": "Bearer s3cret-t0ken"}
        for bad in (
            {},
            {"Authorization": "Bearer wrong"},
            {"Authorization": "Basic s3cret-t0ken"},
            {"Authorization": "Bearer s3cret-t0ke"},
            {"Authorization": "Bearer"},
        ):
            for method, path in (
                ("GET", "/health"),
                ("GET", "/languages"),
                ("POST", "/translate"),
                ("GET", "/openapi.json"),
            ):
                response = c.request(method, path, headers=bad, json={"text": "Hi", "target": "es"})
                assert response.status_code == 401, (bad, path)
                assert response.json() == {"error": "unauthorized", "code": "unauthorized"}
        assert c.get("/health", headers=good).json()["engine"]["auth"] is True
        assert c.get("/languages", headers=good).status_code == 200
        answer = c.post("/translate", headers=good, json={"text": "The dog.", "target": "es", "source": "en"})
        assert "perro" in answer.json()["translation"]
        # A browser preflight carries no token: it is answered for allowed origins without one.
        pre = c.options(
            "/translate", headers={"Origin": "http://ok.test", "Access-Control-Request-Method": "POST"}
        )
        assert pre.status_code == 204 and pre.headers["access-control-allow-origin"] == "http://ok.test"
        # An allowed origin can read the 401, so that an extension can tell the user to set the token.
        denied = c.get("/health", headers={"Origin": "http://ok.test"})
        assert denied.status_code == 401 and denied.headers["access-control-allow-origin"] == "http://ok.test"


def test_token_off_needs_no_header(client: httpx.Client) -> None:
    assert client.get("/health").json()["engine"]["auth"] is False
    assert client.get("/health", headers={"Authorization": "Bearer anything"}).status_code == 200


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:80", "127.0.0.1.evil.example", "0.0.0.0", "10.0.0.1"]
)
def test_foreign_host_header_is_refused(client: httpx.Client, host: str) -> None:
    for method, path in (("GET", "/health"), ("POST", "/translate"), ("GET", "/languages")):
        error = assert_error(client.request(method, path, headers={"Host": host}), 403, "host_not_allowed")
        assert "loopback" in error["error"]


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST:1234", "127.0.0.1", "[::1]:8787", "localhost."])
def test_loopback_host_headers_are_accepted(client: httpx.Client, host: str) -> None:
    assert client.get("/health", headers={"Host": host}).status_code == 200


def test_cors_is_closed_by_default(client: httpx.Client) -> None:
    plain = client.post("/translate", json={"text": "The dog.", "target": "es", "source": "en"})
    assert "access-control-allow-origin" not in plain.headers
    for origin in ("https://evil.example", "null", "http://localhost:3000"):
        simple = client.post(
            "/translate",
            headers={"Origin": origin, "Content-Type": "text/plain"},
            content=b'{"text": "The dog.", "target": "es"}',
        )
        assert_error(simple, 403, "origin_not_allowed")
        assert "access-control-allow-origin" not in simple.headers
        pre = client.options(
            "/translate", headers={"Origin": origin, "Access-Control-Request-Method": "POST"}
        )
        assert pre.status_code == 403 and "access-control-allow-origin" not in pre.headers


def test_cors_allowed_origin(engine: Engine, settings: Settings) -> None:
    app = create_app(
        engine, settings, allowed_origins=["chrome-extension://abcdef", "http://localhost:3000/"]
    )
    with BackgroundDaemon(app) as running, httpx.Client(base_url=running.url, timeout=60) as c:
        for origin in ("chrome-extension://abcdef", "http://localhost:3000"):
            pre = c.options(
                "/translate",
                headers={
                    "Origin": origin,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "content-type, authorization",
                    "Access-Control-Request-Private-Network": "true",
                },
            )
            assert pre.status_code == 204
            assert pre.headers["access-control-allow-origin"] == origin
            assert "POST" in pre.headers["access-control-allow-methods"]
            assert "authorization" in pre.headers["access-control-allow-headers"].lower()
            assert pre.headers["access-control-allow-private-network"] == "true"
            got = c.post(
                "/translate",
                headers={"Origin": origin},
                json={"text": "The dog.", "target": "es", "source": "en"},
            )
            assert got.status_code == 200 and got.headers["access-control-allow-origin"] == origin
            assert "origin" in got.headers["vary"].lower()
        assert_error(c.get("/health", headers={"Origin": "http://localhost:3001"}), 403, "origin_not_allowed")


# ----- saturation and shutdown (stub engine: it blocks until the test releases it) ------------------


def _in_flight(c: httpx.Client) -> int:
    return int(c.get("/health").json()["engine"]["queue"]["in_flight"])


def test_saturated_daemon_answers_503_with_retry_after() -> None:
    stub = BlockingEngine()
    app = create_app(stub, None, max_workers=1, queue_limit=1, request_timeout=30)
    with (
        BackgroundDaemon(app) as running,
        httpx.Client(base_url=running.url, timeout=30) as c,
        ThreadPoolExecutor(max_workers=2) as pool,
    ):
        first = pool.submit(c.post, "/translate", json={"text": "one", "target": "es"})
        assert stub.entered.acquire(timeout=10)  # the only engine thread is busy
        second = pool.submit(c.post, "/translate", json={"text": "two", "target": "es"})
        deadline = time.monotonic() + 10
        while _in_flight(c) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _in_flight(c) == 2  # one running, one waiting: the queue is full
        refused = c.post("/translate", json={"text": "three", "target": "es"})
        assert_error(refused, 503, "saturated")
        assert int(refused.headers["retry-after"]) >= 1
        assert c.get("/health").status_code == 200  # health is never queued behind the engine
        stub.release.set()
        assert first.result().json()["translation"] == "ONE"
        assert second.result().json()["translation"] == "TWO"
        assert c.post("/translate", json={"text": "four", "target": "es"}).status_code == 200


def test_in_flight_requests_finish_on_shutdown() -> None:
    stub = BlockingEngine()
    running = BackgroundDaemon(create_app(stub, None, max_workers=1, request_timeout=30)).__enter__()
    with httpx.Client(base_url=running.url, timeout=30) as c, ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(c.post, "/translate", json={"text": "late", "target": "es"})
        assert stub.entered.acquire(timeout=10)
        stopper = threading.Thread(target=running.stop)
        stopper.start()
        time.sleep(0.3)
        assert stopper.is_alive()  # waiting for the request in flight
        stub.release.set()
        assert pending.result().json()["translation"] == "LATE"
        stopper.join(10)
        assert not stopper.is_alive()


# ----- access log -----------------------------------------------------------------------------------
def test_access_log_has_no_bodies(client: httpx.Client, caplog: pytest.LogCaptureFixture) -> None:
    secret = "My secret diary entry about the house."
    with caplog.at_level(logging.INFO, logger="dragoman.server.access"):
        client.post("/translate", json={"text": secret, "target": "es", "source": "en"})
        client.get("/nope?q=private")
        deadline = time.monotonic() + 5  # the line is written just after the answer is sent
        while time.monotonic() < deadline:
            lines = [r.getMessage() for r in caplog.records if r.name == "dragoman.server.access"]
            if any(line.startswith("GET /nope ") for line in lines):
                break
            time.sleep(0.01)
    assert any(line.startswith("POST /translate 200 ") and line.endswith("ms") for line in lines), lines
    assert any(line.startswith("GET /nope 404 ") for line in lines), lines
    assert all("secret" not in line and "private" not in line for line in lines)


# ----- the process: dragoman serve ------------------------------------------------------------------
def _serve_env(settings: Settings, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("DRAGOMAN_") and k != "SERVICE_SERVE_TOKEN"
    }
    env.update(
        DRAGOMAN_PACKS_DIR=str(settings.engine.packs_dir),
        DRAGOMAN_GLOSSARY=str(settings.local.glossary_path),
        DRAGOMAN_STATE_DIR=str(tmp_path / "state"),
        **extra,
    )
    return env


def _start(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dragoman.cli", "serve", *args],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _wait_for_file(path: Path, proc: subprocess.Popen[str]) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if path.exists():
            return dict(json.loads(path.read_text()))
        if proc.poll() is not None:
            raise AssertionError(
                f"serve exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}"
            )
        time.sleep(0.05)
    raise AssertionError("no daemon file")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_process_pid_file_port_taken_and_graceful_stop(
    settings: Settings, tmp_path: Path, sig: signal.Signals
) -> None:
    env = _serve_env(settings, tmp_path, SERVICE_SERVE_TOKEN="tok")
    proc = _start(env, "--port", "0")
    try:
        info_path = daemon_file(Settings.from_env(env))
        info = _wait_for_file(info_path, proc)
        assert info["pid"] == proc.pid and info["host"] == "127.0.0.1" and info["started"] > 0
        url = f"http://127.0.0.1:{info['port']}"
        assert httpx.get(f"{url}/health").status_code == 401
        headers = {"Authorization": "Bearer tok"}
        answer = httpx.post(
            f"{url}/translate", headers=headers, json={"text": "The dog.", "target": "es"}, timeout=60
        )
        assert "perro" in answer.json()["translation"]
        taken = subprocess.run(
            [sys.executable, "-m", "dragoman.cli", "serve", "--port", str(info["port"])],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert taken.returncode == 2 and "already in use" in taken.stderr
        assert json.loads(info_path.read_text())["pid"] == proc.pid  # the loser did not touch the file
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert not info_path.exists()
        assert "POST /translate 200" in err and "GET /health 401" in err and "dog" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_refuses_public_hosts(capsys: pytest.CaptureFixture[str]) -> None:
    for host in ("0.0.0.0", "::", "192.168.1.10", "example.com"):
        assert cli_main(["serve", "--host", host, "--port", "0"]) == 2
        assert "--allow-non-loopback" in capsys.readouterr().err


def test_loopback_names() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "::1", "localhost", "127.3.4.5", "[::1]"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "evil.example", ""))
    assert host_name("[::1]:8787") == "::1" and host_name("LocalHost.:80") == "localhost"
    assert host_name("127.0.0.1") == "127.0.0.1" and host_name("evil.example:80") == "evil.example"


def test_ipv6_loopback(engine: Engine, settings: Settings) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        running = BackgroundDaemon(create_app(engine, settings), host="::1")
    except Exception as exc:  # ::1 not configured in this container
        pytest.skip(f"cannot bind ::1: {exc}")
    with running, httpx.Client(base_url=running.url, timeout=30) as c:
        assert c.get("/health").json()["ok"] is True
