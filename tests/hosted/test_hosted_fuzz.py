"""schemathesis against the hosted service's own ``/openapi.json``: valid and invalid requests for every
operation, with a valid API key, each answer checked against the document (status codes, content types,
schemas). No 5xx except 502/504 (engine failure, timeout); every error is ``{"error", "code"}``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from db_support import BACKENDS, backend_for
from hosted_support import Hosted, start_service
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import needs_apertium

from dragoman.translation.engine import Engine

schemathesis = pytest.importorskip("schemathesis")

ALLOWED_5XX = {502, 504}
pytestmark = needs_apertium


@pytest.fixture(scope="module", params=BACKENDS)
def fuzz_hosted(
    request: pytest.FixtureRequest,
    hosted_engine: tuple[Engine, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Hosted]:
    """One service for the module, on each backend in turn (the ``db_backend`` parameters, module-wide)."""
    engine, root = hosted_engine
    backend = backend_for(request)
    data = tmp_path_factory.mktemp("hosted-fuzz")
    url = backend.url(data) if backend.is_postgres else None  # None: SQLite in the data folder
    service = start_service(engine, root, data, rate=1_000_000, db_url=url)
    try:
        yield service
    finally:
        service.stop()
        service.db.dispose()
        backend.close()


def assert_sane(status: int, content_type: str, body: bytes) -> None:
    assert status < 500 or status in ALLOWED_5XX, (status, body[:500])
    if status >= 400 or content_type.startswith("application/json"):
        assert content_type.startswith("application/json"), (status, content_type, body[:200])
        data = json.loads(body)
        if status >= 400:
            assert isinstance(data, dict) and isinstance(data.get("error"), str) and data["error"], data
            assert isinstance(data.get("code"), str), data


LANGS = ["es", "en", "de", "spa_Latn", "eng_Latn", None]


def _steer(case: Any, src: str | None, tgt: str | None) -> Any:
    if isinstance(case.body, dict):
        for field, value in (("src", src), ("tgt", tgt), ("target", tgt)):
            if value is not None and field in case.body:
                case.body[field] = value
        if "targets" in case.body and tgt is not None:
            case.body["targets"] = [tgt]
    return case


CASES = [
    ("/api/v2/translate", "POST", "positive"),
    ("/api/v2/translate", "POST", "negative"),
    ("/api/v2/languages", "GET", "positive"),
    ("/api/v2/languages", "GET", "negative"),
    ("/api/v1/languages", "GET", "positive"),
    ("/api/v1/quote", "POST", "positive"),
    ("/api/v1/quote", "POST", "negative"),
    ("/api/v1/translate", "POST", "positive"),
    ("/api/v1/translate", "POST", "negative"),
    ("/api/v1/jobs", "GET", "positive"),
    ("/api/v1/jobs", "GET", "negative"),
    ("/api/v1/jobs/{job_id}", "GET", "positive"),
    ("/api/v1/jobs/{job_id}", "DELETE", "positive"),
    ("/api/v1/jobs/{job_id}/export/docx", "GET", "positive"),
    ("/api/v1/jobs/{job_id}/export/pdf", "GET", "positive"),
    ("/api/v1/usage", "GET", "positive"),
    ("/openapi.json", "GET", "positive"),
    # voice matches, word timings and word edits (issue 14)
    ("/api/v1/tts/voices/clones", "GET", "positive"),
    ("/api/v1/tts/voices/clones", "POST", "positive"),
    ("/api/v1/tts/voices/clones", "POST", "negative"),
    ("/api/v1/tts/voices/clones/{clone_id}", "GET", "positive"),
    ("/api/v1/tts/voices/clones/{clone_id}", "DELETE", "positive"),
    ("/api/v1/tts/jobs/{job_id}/words", "GET", "positive"),
    ("/api/v1/tts/jobs/{job_id}/words", "POST", "positive"),
    ("/api/v1/tts/jobs/{job_id}/edit", "POST", "positive"),
    ("/api/v1/tts/jobs/{job_id}/edit", "POST", "negative"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("path", "method", "mode"), CASES)
def test_schemathesis_every_operation(fuzz_hosted: Hosted, path: str, method: str, mode: str) -> None:
    from schemathesis import GenerationMode, checks

    schema = schemathesis.openapi.from_url(f"{fuzz_hosted.url}/openapi.json")
    operation = schema[path][method]
    strategy = operation.as_strategy(generation_mode=GenerationMode(mode))
    if mode == "positive" and path.endswith(("/translate", "/quote")):
        strategy = st.builds(_steer, strategy, st.sampled_from(LANGS), st.sampled_from(LANGS))
    seen: list[int] = []
    headers = {"Authorization": f"Bearer {fuzz_hosted.key}"}

    @given(case=strategy)
    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    def run(case: Any) -> None:
        response = case.call(base_url=fuzz_hosted.url, headers=headers, timeout=60)
        seen.append(response.status_code)
        content_type = response.headers.get("content-type") or [""]
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


def test_still_serving_after_fuzzing(fuzz_hosted: Hosted) -> None:
    with fuzz_hosted.client() as client:
        assert client.get("/api/v1/usage").status_code == 200
        r = client.post("/api/v1/translate", json={"text": "Hello", "src": "en", "tgt": "es"})
        assert r.status_code == 200, r.text
