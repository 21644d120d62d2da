"""Property-based fuzzing of the daemon over real HTTP, with its own ``/openapi.json`` as the map.

* schemathesis generates valid and invalid requests for every operation of the document the running
  daemon serves, and checks each answer against that document (status codes, content type, schemas);
* hypothesis throws arbitrary JSON values, arbitrary bytes and odd headers at ``POST /translate``.

Either way: no 5xx except 502/504 (engine failure, timeout), every error is a JSON ``{"error": ...}``,
and the daemon is still healthy at the end. Needs ``schemathesis`` (dev dependency).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import needs_apertium

from dragoman.server.daemon.app import create_app
from dragoman.settings import Settings
from dragoman.testing.daemon import BackgroundDaemon
from dragoman.testing.tinypack import build_argos_pack
from dragoman.translation.engine import Engine

schemathesis = pytest.importorskip("schemathesis")

ALLOWED_5XX = {502, 504}
pytestmark = needs_apertium


@pytest.fixture(scope="module")
def fuzz_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, Settings]]:
    root = tmp_path_factory.mktemp("fuzz")
    build_argos_pack(root / "packs" / "translate-en_de", "en", "de")
    conf = Settings.from_env(
        {
            "DRAGOMAN_PACKS_DIR": str(root / "packs"),
            "DRAGOMAN_GLOSSARY": str(root / "glossary.json"),
            "DRAGOMAN_STATE_DIR": str(root / "state"),
        }
    )
    with Engine(conf) as engine:
        yield engine, conf


@pytest.fixture(scope="module")
def fuzz_daemon(fuzz_engine: tuple[Engine, Settings]) -> Iterator[BackgroundDaemon]:
    engine, conf = fuzz_engine
    app = create_app(engine, conf, max_workers=2, queue_limit=64, request_timeout=30)
    with BackgroundDaemon(app) as running:
        yield running


@pytest.fixture(scope="module")
def fuzz_token_client(fuzz_engine: tuple[Engine, Settings]) -> Iterator[httpx.Client]:
    engine, conf = fuzz_engine
    app = create_app(engine, conf, token="tok", request_timeout=30)
    with BackgroundDaemon(app) as running, httpx.Client(base_url=running.url, timeout=60) as c:
        yield c


def assert_sane(status: int, content_type: str, body: bytes) -> None:
    assert status < 500 or status in ALLOWED_5XX, (status, body[:500])
    assert content_type.startswith("application/json"), (status, content_type, body[:200])
    data = json.loads(body)
    if status >= 400:
        assert isinstance(data, dict) and isinstance(data.get("error"), str) and data["error"], data
    if status == 200 and isinstance(data, dict) and "translation" in data:
        assert isinstance(data["translation"], str)


# schemathesis' own pytest plugin (``from_fixture``) does not run under pytest 9, so its strategies are
# driven here with plain hypothesis: one test per operation and generation mode.
TARGETS = ["es", "spa_Latn", "en", "de", "deu_Latn", None]  # None: keep the generated target
SOURCES = ["en", "eng_Latn", "es", "absent", None]


def _with_languages(case: Any, target: str | None, source: str | None) -> Any:
    if isinstance(case.body, dict):
        if target is not None:
            case.body["target"] = target
        if source == "absent":
            case.body.pop("source", None)
        elif source is not None:
            case.body["source"] = source
    return case


# Negative data exists only where there is an input: the body of /translate, the query of /languages.
CASES = [
    ("/translate", "POST", "positive"),
    ("/translate", "POST", "negative"),
    ("/languages", "GET", "positive"),
    ("/languages", "GET", "negative"),
    ("/health", "GET", "positive"),
    ("/openapi.json", "GET", "positive"),
]


@pytest.mark.parametrize(("path", "method", "mode"), CASES)
def test_schemathesis_every_operation(
    fuzz_daemon: BackgroundDaemon, path: str, method: str, mode: str
) -> None:
    from schemathesis import GenerationMode, checks

    schema = schemathesis.openapi.from_url(f"{fuzz_daemon.url}/openapi.json")
    operation = schema[path][method]
    strategy = operation.as_strategy(generation_mode=GenerationMode(mode))
    if path == "/translate" and mode == "positive":
        # Random strings are almost never language codes: steer most cases to installed pairs so that
        # the engine really runs on random texts, glossaries and tiers.
        strategy = st.builds(_with_languages, strategy, st.sampled_from(TARGETS), st.sampled_from(SOURCES))
    seen: list[int] = []

    @given(case=strategy)
    @settings(
        max_examples=60 if path == "/translate" else 25,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        response = case.call(base_url=fuzz_daemon.url, timeout=60)
        seen.append(response.status_code)
        content_type = response.headers.get("content-type") or [""]  # schemathesis: header -> list of values
        assert_sane(response.status_code, content_type[0], response.content)
        case.validate_response(
            response,
            checks=[
                checks.status_code_conformance,
                checks.content_type_conformance,
                checks.response_schema_conformance,
                checks.negative_data_rejection,
            ],
        )

    run()
    assert seen, "no case was generated"
    if mode == "positive":
        assert 200 in seen, seen  # the engine did run (not only 4xx)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=10), children, max_size=6)
    ),
    max_leaves=20,
)
request_like = st.fixed_dictionaries(
    {},
    optional={
        "text": st.text(max_size=80) | json_values,
        "texts": st.lists(st.text(max_size=40), max_size=70) | json_values,
        "target": st.sampled_from(["es", "spa_Latn", "en", "de", "xx", "", "ja", "zh-Hant"]) | json_values,
        "source": st.sampled_from(["en", "es", "eng_Latn", "auto", ""]) | st.none() | json_values,
        "tier": st.sampled_from(["best", "fast", "BEST", ""]) | json_values,
        "glossary": st.lists(
            st.fixed_dictionaries(
                {"term": st.text(max_size=10), "translation": st.text(max_size=10)},
                optional={"caseSensitive": st.booleans() | json_values},
            ),
            max_size=5,
        )
        | json_values,
    },
)


@pytest.fixture(scope="module")
def fuzz_client(fuzz_daemon: BackgroundDaemon) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fuzz_daemon.url, timeout=60) as c:
        yield c


@given(body=request_like | json_values)
@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
def test_hypothesis_json_bodies(fuzz_client: httpx.Client, body: Any) -> None:
    response = fuzz_client.post("/translate", json=body)
    assert_sane(response.status_code, response.headers["content-type"], response.content)
    if response.status_code == 200:
        data = response.json()
        if isinstance(body, dict) and isinstance(body.get("texts"), list):
            assert len(data["results"]) == len(body["texts"])


@given(
    raw=st.binary(max_size=200),
    content_type=st.sampled_from(["application/json", "text/plain", "application/x-www-form-urlencoded", ""]),
)
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
def test_hypothesis_raw_bytes(fuzz_client: httpx.Client, raw: bytes, content_type: str) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    response = fuzz_client.post("/translate", content=raw, headers=headers)
    assert_sane(response.status_code, response.headers["content-type"], response.content)


@given(
    path=st.sampled_from(["/health", "/languages", "/translate", "/openapi.json", "/", "/translate/", "/x"]),
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]),
    origin=st.none() | st.sampled_from(["http://evil.example", "null", "http://127.0.0.1"]),
    auth=st.none()
    | st.just("Bearer tok")
    | st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=20),
)
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
def test_hypothesis_methods_paths_headers(
    fuzz_token_client: httpx.Client, path: str, method: str, origin: str | None, auth: str | None
) -> None:
    fuzz_client = fuzz_token_client  # SERVICE_SERVE_TOKEN "tok"
    headers = {}
    if origin is not None:
        headers["Origin"] = origin
    if auth is not None:
        headers["Authorization"] = auth
    response = fuzz_client.request(method, path, headers=headers, content=b'{"text": "a", "target": "es"}')
    if method == "HEAD":
        assert response.status_code < 500
        return
    assert_sane(response.status_code, response.headers["content-type"], response.content)
    if origin is None and auth != "Bearer tok" and response.status_code != 404:
        assert response.status_code == 401 and response.json()["error"] == "unauthorized"


def test_still_healthy_after_fuzzing(fuzz_client: httpx.Client) -> None:
    body = fuzz_client.get("/health").json()
    assert body["ok"] is True and body["engine"]["queue"]["in_flight"] == 0
