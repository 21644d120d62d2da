"""The daemon's contract: the wire models of server/_wire.py, the OpenAPI document generated from them and
the route table, every answer checked against that document, and the shared HTTP pieces of server/_http.py
(exception handlers, the engine pool's deadline, the batched log).

Translations are real (a tiny CTranslate2 pack en->de; Apertium off); stub engines stand in only where a
test needs an engine that blocks, runs past its deadline or fails with a bug.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import jsonschema  # type: ignore[import-untyped]
import pytest
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode
from referencing import Registry
from referencing.jsonschema import DRAFT202012
from support import isolated_settings

from dragoman.errors import EngineTimeout
from dragoman.languages.types import Language
from dragoman.limits import Provenance
from dragoman.progress import JobContext
from dragoman.server import _http
from dragoman.server._http import ApiRoute, BatchedLogHandler, EnginePool
from dragoman.server._wire import (
    BatchResponse,
    ErrorBody,
    GlossaryItem,
    LanguageRow,
    TranslateRequest,
    TranslationResultModel,
)
from dragoman.server.daemon._models import HealthResponse
from dragoman.server.daemon.app import ROUTES, create_app, openapi_json
from dragoman.settings import Settings
from dragoman.testing.daemon import BackgroundDaemon
from dragoman.testing.tinypack import build_argos_pack
from dragoman.translation.engine import Engine
from dragoman.translation.types import TranslateOptions, TranslationResult

SPEC_2_6 = ("translation", "source", "target", "provenance", "seconds", "warnings")
MB2 = 2 * 1024 * 1024


# ----- checking every answer against the document ---------------------------------------------------
class OpenApiCheck:
    """An httpx response hook: each answer must be one its route documents, with a body of its schema."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.registry: Registry[Any] = Registry().with_resource(
            "urn:doc", DRAFT202012.create_resource(document)
        )
        self.seen: set[tuple[str, str, int]] = set()

    def validate(self, pointer: str, instance: Any) -> None:
        validator = jsonschema.Draft202012Validator({"$ref": f"urn:doc#{pointer}"}, registry=self.registry)
        validator.validate(instance)

    def __call__(self, response: httpx.Response) -> None:
        response.read()
        method, path, status = response.request.method, response.request.url.path, response.status_code
        self.seen.add((method, path, status))
        if method == "OPTIONS" and status == 204:  # a CORS preflight answered by the gate: no body
            return
        assert response.headers["content-type"] == "application/json", (method, path, status)
        operation = self.document["paths"].get(path, {}).get(method.lower())
        if operation is None:  # no such route or method: the router's 404/405, or the gate's refusal first
            assert status in (401, 403, 404, 405, 413), (method, path, status)
            self.validate("/components/schemas/ErrorBody", response.json())
            return
        assert str(status) in operation["responses"], f"{method} {path} answered {status}, undocumented"
        escaped = path.replace("~", "~0").replace("/", "~1")
        pointer = f"/paths/{escaped}/{method.lower()}/responses/{status}/content/application~1json/schema"
        self.validate(pointer, response.json())


@pytest.fixture(scope="module")
def check() -> OpenApiCheck:
    return OpenApiCheck(json.loads(openapi_json()))


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    root = tmp_path_factory.mktemp("wire")
    build_argos_pack(root / "packs" / "translate-en_de", "en", "de")
    broken = build_argos_pack(root / "packs" / "translate-en_fr", "en", "fr")
    (broken / "model" / "model.bin").write_bytes(b"not a model")  # loads, then fails: a real engine failure
    return isolated_settings(root)


@pytest.fixture(scope="module")
def engine(settings: Settings) -> Iterator[Engine]:
    with Engine(settings) as eng:
        yield eng


def _client(daemon: BackgroundDaemon, check: OpenApiCheck) -> httpx.Client:
    return httpx.Client(base_url=daemon.url, timeout=60, event_hooks={"response": [check]})


class StubEngine:
    """An engine whose translate runs ``work(text, context)``: blocks, runs past its deadline, or fails."""

    provenance: Provenance = "on-device"

    def __init__(self, work: Any) -> None:
        self.started = time.time()
        self.work = work

    def pack_ids(self) -> list[str]:
        return []

    def loaded_packs(self) -> list[str]:
        return []

    def translate(
        self, text: str, options: TranslateOptions, *, context: JobContext | None = None
    ) -> TranslationResult:
        self.work(text, context)
        return TranslationResult(text.upper(), "eng_Latn", "deu_Latn", "on-device", 0.0, options=options)

    def translate_batch(
        self, texts: Sequence[str], options: TranslateOptions, *, context: JobContext | None = None
    ) -> list[TranslationResult]:
        return [self.translate(t, options, context=context) for t in texts]

    def languages(self, *, installed_only: bool = True) -> list[Language]:
        return []


# ----- the wire models --------------------------------------------------------------------------------
def test_result_wire_model_is_spec_2_6_plus_route_and_tier() -> None:
    assert tuple(TranslationResultModel.model_fields) == (*SPEC_2_6, "route", "tier")
    schema = TranslationResultModel.model_json_schema(mode="serialization")
    assert set(schema["required"]) == {*SPEC_2_6, "route", "tier"}
    asked = TranslateOptions("deu_Latn", "eng_Latn")
    result = TranslationResult(
        "Hallo",
        "eng_Latn",
        "deu_Latn",
        "on-device",
        0.123456789,
        ("w: x",),
        ("p:a->b",),
        "fast",
        options=asked,
    )
    wire = TranslationResultModel.from_result(result)
    assert wire.model_dump(mode="json") == result.to_dict()  # the engine's dict and the wire agree
    assert json.loads(BatchResponse.from_results([result]).model_dump_json()) == {
        "results": [result.to_dict()]
    }


def test_glossary_item_is_spec_2_7() -> None:
    item = GlossaryItem.model_validate({"term": "house", "translation": "Haus", "caseSensitive": True})
    assert item.to_entry().case_sensitive is True
    assert item.model_dump(by_alias=True) == {"term": "house", "translation": "Haus", "caseSensitive": True}
    with pytest.raises(ValueError, match="extra_forbidden"):  # the wire spells it caseSensitive
        GlossaryItem.model_validate({"term": "a", "translation": "b", "case_sensitive": True})


def test_mcp_models_are_the_wire_models() -> None:
    from dragoman.server.mcp._models import GlossaryEntryInput, TranslateOutput
    from dragoman.server.mcp._models import LanguageRow as McpLanguageRow

    assert issubclass(TranslateOutput, TranslationResultModel) and McpLanguageRow is LanguageRow
    assert issubclass(GlossaryEntryInput, GlossaryItem)
    assert tuple(TranslateOutput.model_fields) == tuple(TranslationResultModel.model_fields)
    lax = GlossaryEntryInput.model_validate({"term": "a", "translation": "b", "case_sensitive": "true"})
    assert lax.to_entry().case_sensitive is True  # tool arguments stay lax, by name or alias


# ----- the document ---------------------------------------------------------------------------------
def test_openapi_is_generated_from_the_route_table_and_the_models() -> None:
    doc = json.loads(openapi_json())
    ref = "#/components/schemas/{model}"
    schemas = doc["components"]["schemas"]

    def generated(model: type[BaseModel], mode: JsonSchemaMode) -> None:
        schema = model.model_json_schema(mode=mode, ref_template=ref)
        for name, nested in schema.pop("$defs", {}).items():
            assert schemas[name] == nested, name
        assert schemas[model.__name__] == schema, model.__name__

    generated(TranslateRequest, "validation")
    for model in (TranslationResultModel, BatchResponse, LanguageRow, ErrorBody, HealthResponse):
        generated(model, "serialization")
    routes = [r for r in ROUTES if isinstance(r, ApiRoute)]
    assert {(r.path, r.method.lower()) for r in routes} == {
        (path, method) for path, ops in doc["paths"].items() for method in ops
    }
    translate = doc["paths"]["/translate"]["post"]
    assert translate["summary"] == "Translate one text or a batch" and translate["operationId"] == "translate"
    assert {"400", "401", "403", "404", "405", "413", "502", "503", "504"} <= set(translate["responses"])
    assert "`limit_exceeded`" in translate["responses"]["400"]["description"]
    assert doc["paths"]["/languages"]["get"]["parameters"][0]["schema"]["enum"] == ["0", "1", "true", "false"]
    assert doc["paths"]["/health"]["get"]["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/HealthResponse"
    }


# ----- every answer, checked -----------------------------------------------------------------------
def test_every_answer_validates_against_its_route(
    engine: Engine, settings: Settings, check: OpenApiCheck
) -> None:
    app = create_app(engine, settings, request_timeout=60)
    with BackgroundDaemon(app) as running, _client(running, check) as c:
        assert c.get("/openapi.json").json() == check.document  # served as generated
        assert c.get("/health").status_code == 200
        assert c.get("/languages").status_code == 200 and c.get("/languages?all=true").status_code == 200
        assert c.get("/languages?all=2").status_code == 400
        one = c.post("/translate", json={"text": "Hello world.", "target": "de", "source": "en"})
        assert one.status_code == 200 and tuple(one.json()) == (*SPEC_2_6, "route", "tier")
        many = c.post("/translate", json={"texts": ["Hello.", "World."], "target": "de", "source": "en"})
        assert many.status_code == 200 and len(many.json()["results"]) == 2
        assert c.post("/translate", json={"texts": [], "target": "de"}).json() == {"results": []}
        for bad in (
            {"text": "Hi"},
            {"texts": ["x"] * 65, "target": "de"},
            {"text": "Hi", "target": "xx-nope"},
            {"text": "Hi", "target": "ja", "source": "en"},
        ):
            assert c.post("/translate", json=bad).status_code == 400
        assert c.post("/translate", content=b"{").status_code == 400
        failed = c.post("/translate", json={"text": "Hello.", "target": "fr", "source": "en"})
        assert failed.status_code == 502
        assert c.get("/translate", headers={"Host": "evil.example"}).status_code == 403
        assert c.get("/health", headers={"Origin": "https://evil.example"}).status_code == 403
        nope = c.get("/nope")
        assert nope.status_code == 404
        assert nope.json()["error"] == (
            "no route /nope; routes: POST /translate, GET /health, GET /languages, GET /openapi.json"
        )
        assert c.put("/health").status_code == 405
        head = (  # announced over the limit, and never sent: the gate answers from the header alone
            f"POST /translate HTTP/1.1\r\nHost: 127.0.0.1:{running.port}\r\n"
            f"Content-Length: {MB2 + 1}\r\nConnection: close\r\n\r\n"
        ).encode()
        with socket.create_connection(("127.0.0.1", running.port), timeout=20) as sock:
            sock.sendall(head)
            raw = b""
            while chunk := sock.recv(65536):
                raw += chunk
        assert raw.startswith(b"HTTP/1.1 413 ")
        pointer = "/paths/~1translate/post/responses/413/content/application~1json/schema"
        check.validate(pointer, json.loads(raw.split(b"\r\n\r\n", 1)[1]))
        check.seen.add(("POST", "/translate", 413))

    token = create_app(engine, settings, token="tok")
    with BackgroundDaemon(token) as running, _client(running, check) as c:
        assert c.post("/translate", json={"text": "Hi", "target": "de"}).status_code == 401
        assert c.get("/languages").status_code == 401
    assert {s for _, _, s in check.seen} >= {200, 400, 401, 403, 404, 405, 413, 502}


def test_saturated_and_timed_out_answers_validate(check: OpenApiCheck) -> None:
    release = threading.Event()
    entered = threading.Event()

    def block(text: str, context: JobContext | None) -> None:
        entered.set()
        assert release.wait(30)

    app = create_app(StubEngine(block), None, max_workers=1, queue_limit=0, request_timeout=30)
    with BackgroundDaemon(app) as running, _client(running, check) as c:
        waiting = threading.Thread(
            target=c.post, args=("/translate",), kwargs={"json": {"text": "a", "target": "de"}}
        )
        waiting.start()
        assert entered.wait(10)
        refused = c.post("/translate", json={"text": "b", "target": "de"})
        assert refused.status_code == 503 and int(refused.headers["retry-after"]) >= 1
        release.set()
        waiting.join(30)

    def past_deadline(text: str, context: JobContext | None) -> None:
        assert context is not None and context.deadline is not None
        while True:  # the engine meets the pool's deadline at its next check
            context.check()
            time.sleep(0.005)

    app = create_app(StubEngine(past_deadline), None, max_workers=1, request_timeout=0.05)
    with BackgroundDaemon(app) as running, _client(running, check) as c:
        late = c.post("/translate", json={"text": "a", "target": "de"})
        assert late.status_code == 504 and late.json()["code"] == "timeout"
        assert "--timeout" in late.json()["error"]  # the pool's answer, whoever noticed the deadline first
    assert {s for _, _, s in check.seen} >= {503, 504}


def test_an_unexpected_exception_is_a_json_502_with_cors_and_logged(
    check: OpenApiCheck, caplog: pytest.LogCaptureFixture
) -> None:
    def bug(text: str, context: JobContext | None) -> None:
        raise RuntimeError("boom")

    app = create_app(StubEngine(bug), None, allowed_origins=["http://ok.test"])
    with (
        caplog.at_level(logging.INFO, logger="dragoman.server.access"),
        BackgroundDaemon(app) as running,
        _client(running, check) as c,
    ):
        answer = c.post(
            "/translate", headers={"Origin": "http://ok.test"}, json={"text": "a", "target": "de"}
        )
        assert answer.status_code == 502 and answer.json()["code"] == "backend_error"
        assert "RuntimeError: boom" in answer.json()["error"] and "daemon log" in answer.json()["error"]
        assert answer.headers["access-control-allow-origin"] == "http://ok.test"
        assert c.get("/health").status_code == 200  # the daemon goes on
        deadline = time.monotonic() + 5  # the access line is written just after the answer
        while time.monotonic() < deadline:
            lines = [r.getMessage() for r in caplog.records if r.name == "dragoman.server.access"]
            if any(line.startswith("POST /translate 502 ") for line in lines):
                break
            time.sleep(0.01)
        assert any(line.startswith("POST /translate 502 ") for line in lines), lines


# ----- shared pieces ----------------------------------------------------------------------------------
def test_pool_answers_its_own_timeout_when_the_engine_meets_the_deadline_first() -> None:
    pool = EnginePool(1, 0, 0.01)

    def work(context: JobContext) -> str:
        assert context.deadline is not None
        while time.monotonic() < context.deadline:
            time.sleep(0.001)
        context.check()
        return "never"

    try:
        with pytest.raises(EngineTimeout, match="--timeout"):
            asyncio.run(pool.run(work))
    finally:
        pool.shutdown()


def test_pool_keeps_other_timeouts_of_the_engine() -> None:
    pool = EnginePool(1, 0, 30)

    def stuck(context: JobContext) -> str:
        raise EngineTimeout("the Apertium pipeline sent nothing back")

    try:
        with pytest.raises(EngineTimeout, match="Apertium"):
            asyncio.run(pool.run(stuck))
    finally:
        pool.shutdown()


def test_batched_log_handler_writes_in_batches() -> None:
    stream = io.StringIO()
    handler = BatchedLogHandler(stream, interval=3600, capacity=3)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger = logging.getLogger("dragoman.test.batched")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        logger.info("one")
        logger.info("two")
        assert stream.getvalue() == ""  # kept until a batch is written
        logger.info("three")  # capacity reached
        assert stream.getvalue() == "INFO one\nINFO two\nINFO three\n"
        logger.info("four")
        logger.warning("five")  # a warning is written at once, after what waited
        assert stream.getvalue().endswith("INFO four\nWARNING five\n")
        logger.info("six")
        handler.flush()
        assert stream.getvalue().endswith("WARNING five\nINFO six\n")
        logger.info("seven")
    finally:
        logger.removeHandler(handler)
        handler.close()
    assert stream.getvalue().endswith("INFO six\nINFO seven\n")  # close writes what is left


def test_batched_log_handler_flushes_on_its_own() -> None:
    stream = io.StringIO()
    handler = BatchedLogHandler(stream, interval=0.01)
    try:
        handler.handle(logging.makeLogRecord({"msg": "idle daemon", "levelno": logging.INFO}))
        deadline = time.monotonic() + 10
        while "idle daemon" not in stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stream.getvalue() == "idle daemon\n"  # the last line of a quiet daemon is not held back
    finally:
        handler.close()


class _CountingContext(JobContext):
    """A request context whose checks are counted (each is a wake-up of the thread waiting with it)."""

    checks = 0

    def check(self) -> None:
        self.checks += 1
        super().check()


def test_a_place_given_back_wakes_one_waiter_in_arrival_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """A place freed in the admission gate used to wake every waiting thread (each checked and slept
    again: CPU that grew with the queue, 1.2 ms of HTTP-path CPU a request at 8 clients against 0.6-0.8
    without it). Now it wakes the first in line alone; the others sleep on (their periodic context check
    set to 60 s here, so only a wake-up can move them), and they go in arrival order."""
    monkeypatch.setattr(_http, "PLACE_CHECK_SECONDS", 60.0)
    places = _http._Places(1)
    places.enter(_CountingContext())  # the one place, taken
    contexts = [_CountingContext() for _ in range(5)]
    went: list[int] = []

    def wait(number: int) -> None:
        places.enter(contexts[number])
        went.append(number)

    threads = []
    for number in range(5):
        threads.append(threading.Thread(target=wait, args=(number,), daemon=True))
        threads[-1].start()
        deadline = time.monotonic() + 10
        while len(places._line) < number + 1 and time.monotonic() < deadline:  # in line, in this order
            time.sleep(0.005)
    assert [c.checks for c in contexts] == [1] * 5
    for turn in range(5):
        places.give()
        deadline = time.monotonic() + 10
        while len(went) < turn + 1 and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.05)  # time for any other thread a wake-up reached to check
        assert went == list(range(turn + 1))
        assert [c.checks for c in contexts] == [2] * (turn + 1) + [1] * (4 - turn)  # only the one that went
    for thread in threads:
        thread.join(10)


def test_the_admission_gate_loses_no_place_under_load() -> None:
    """32 threads taking and giving back 4 places, half of them also leaving and taking back as a batched
    request does: all finish, and the 4 places are free again."""
    places = _http._Places(4)
    errors: list[BaseException] = []

    def worker(number: int) -> None:
        try:
            for _ in range(200):
                places.enter(_CountingContext())
                if number % 2:
                    places.give()  # leaves while it waits in the batcher
                    places.back()  # and takes a place back, before new requests
                places.give()
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == [] and not any(thread.is_alive() for thread in threads)
    assert places._free == 4 and not places._line and places._back == 0
