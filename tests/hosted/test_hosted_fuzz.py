"""schemathesis against the hosted service's own ``/openapi.json``: valid and invalid requests for every
operation, with a valid API key, each answer checked against the document (status codes, content types,
schemas). No 5xx except 502/504 (engine failure, timeout); every error is ``{"error", "code"}``.

In every mode of the other hosted suites (issue 13): ``sqlite``, ``postgresql`` and ``scaled`` (PostgreSQL,
a Procrastinate worker thread, the limiter on Redis, files on moto's S3), one service per mode for the
module, started by the helpers ``db_backend`` and ``start_hosted`` use (tests/hosted_support.py)."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hosted_support import SCALED, Hosted, backend_for_mode, hosted_modes, start_on_backend
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import needs_apertium

from dragoman.service.dispatch import INPROCESS, PROCRASTINATE
from dragoman.service.ratelimit import RateLimiter
from dragoman.translation.engine import Engine

schemathesis = pytest.importorskip("schemathesis")

ALLOWED_5XX = {502, 504}
pytestmark = needs_apertium


@pytest.fixture(scope="module", params=hosted_modes(scaled=True))
def fuzz_hosted(
    request: pytest.FixtureRequest,
    hosted_engine: tuple[Engine, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Hosted]:
    """One service for the module in each mode in turn (``db_backend``'s modes, a test marked ``scaled``'s:
    the same backends and service set-up, module-wide; ``scaled`` with its worker thread)."""
    engine, root = hosted_engine
    with pytest.MonkeyPatch.context() as env:  # the scaled mode's AWS_* variables, for the module
        backend = backend_for_mode(request, request.param, env)
        try:
            service = start_on_backend(
                backend, engine, root, tmp_path_factory.mktemp("hosted-fuzz"), rate=1_000_000
            )
            try:
                yield service
            finally:
                service.stop()
                service.db.dispose()
        finally:
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


# The scaled mode's worker thread (psycopg_pool's reconnection jitter, back-off jitter) draws from the global
# ``random`` while Hypothesis draws a case in this thread; Hypothesis's check for strategies using ``random``
# cannot tell threads apart and sees that as the strategy's doing. No strategy here uses ``random``.
@pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module inside strategies:hypothesis.errors.HypothesisDeprecationWarning"
)
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


def _docx() -> bytes:
    import docx

    document = docx.Document()
    document.add_paragraph("The cat sleeps on the warm mat. The dog runs in the green park.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def test_the_service_runs_in_its_mode(fuzz_hosted: Hosted, request: pytest.FixtureRequest) -> None:
    """What was fuzzed is the mode the parameter names: in ``scaled``, jobs go through Procrastinate (no
    in-process runner: the worker thread ran the job), the limiter counts in Redis (a second limiter on the
    same URI sees this key's window) and files are on the session's moto S3 server."""
    mode = request.node.callspec.params["fuzz_hosted"]
    hosted, state = fuzz_hosted.settings.hosted, fuzz_hosted.app.state
    assert fuzz_hosted.db.engine.dialect.name == ("sqlite" if mode == "sqlite" else "postgresql")
    if mode != SCALED:
        assert hosted.dispatch == INPROCESS and state.runner is not None and fuzz_hosted.worker is None
        assert hosted.ratelimit_uri == "memory://" and state.storage.root is not None
        return
    from obstore.store import S3Store

    _, s3 = request.getfixturevalue("scaled_services")
    assert hosted.dispatch == PROCRASTINATE and state.dispatch.mode == PROCRASTINATE and state.runner is None
    assert fuzz_hosted.worker is not None and fuzz_hosted.worker.thread.is_alive()
    assert hosted.ratelimit_uri.startswith("redis://") and state.limiter.uri == hosted.ratelimit_uri
    assert hosted.store_url is not None and hosted.store_url.startswith("s3://")
    assert hosted.s3_endpoint == s3.endpoint
    assert isinstance(state.storage.store, S3Store) and state.storage.root is None
    with fuzz_hosted.client() as client:
        file = (
            "report.docx",
            _docx(),
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        )
        r = client.post("/api/v1/translate", files={"file": file}, data={"src": "en", "tgt": "es"})
        assert r.status_code == 202, r.text
        deadline = time.monotonic() + 120
        while (job := client.get(f"/api/v1/jobs/{r.json()['job_id']}").json())["status"] in (
            "queued",
            "active",
        ):
            assert time.monotonic() < deadline, job
            time.sleep(0.2)
        assert job["status"] == "done", job
        assert client.get(job["export_docx"]).content[:2] == b"PK"
        assert state.storage.list(""), "nothing on the S3 store"
        other = RateLimiter(hosted.ratelimit_uri, per_minute=1_000_000)
        for _ in range(3):  # a fixed one-minute window may have turned between the request and the peek
            assert client.get("/api/v1/usage").status_code == 200
            if other.peek(fuzz_hosted.key_id).remaining < 1_000_000:
                break
        else:
            raise AssertionError("the service's requests are not counted in Redis")
