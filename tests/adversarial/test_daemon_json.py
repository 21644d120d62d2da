"""Hostile request bodies at the daemon: every malformed body is a 400 with the documented error JSON.

Deep nesting used to escape :func:`json.loads` as a ``RecursionError`` (answered 502, "the engine failed
unexpectedly"); a key given twice silently kept its last value; ``NaN`` passed as a number; a number of
thousands of digits answered with advice for Python programmers. Issue 9, item 8. Inputs are generated here.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import httpx
import pytest
from growth import assert_linear
from support import isolated_settings

from dragoman.errors import InvalidRequest
from dragoman.server._json import loads
from dragoman.server.daemon.app import create_app
from dragoman.testing.daemon import BackgroundDaemon
from dragoman.testing.tinypack import build_argos_pack
from dragoman.translation.engine import Engine

OK = b'{"text": "Hello.", "target": "de", "source": "en"}'


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    root = tmp_path_factory.mktemp("daemon-json")
    build_argos_pack(root / "packs" / "translate-en_de", "en", "de")
    settings = isolated_settings(root)
    with Engine(settings) as engine:
        app = create_app(engine, settings, max_workers=2, queue_limit=16, request_timeout=30)
        with BackgroundDaemon(app) as running, httpx.Client(base_url=running.url, timeout=60) as c:
            yield c


def _deep(opening: bytes, closing: bytes, depth: int) -> bytes:
    return opening * depth + b"1" + closing * depth


BAD_BODIES: dict[str, tuple[bytes, str]] = {
    "deep arrays in a field": (b'{"text": ' + _deep(b"[", b"]", 100_000) + b', "target": "de"}', "nested"),
    "deep objects in a field": (
        b'{"text": "a", "target": "de", "glossary": ' + _deep(b'{"a": ', b"}", 50_000) + b"}",
        "nested",
    ),
    "deep arrays, top level": (_deep(b"[", b"]", 200_000), "nested"),
    "deep and unterminated": (b"[" * 500_000, "nested"),
    "deep, just past the recursion limit": (_deep(b"[", b"]", 5_000), "nested"),
    "a key twice": (b'{"text": "a", "text": "b", "target": "de"}', "'text' is given twice"),
    "target twice": (b'{"text": "a", "target": "xx", "target": "de"}', "'target' is given twice"),
    "a key twice in an entry": (
        b'{"text": "a", "target": "de", "glossary": [{"term": "a", "term": "b", "translation": "c"}]}',
        "'term' is given twice",
    ),
    "NaN": (b'{"text": "a", "target": "de", "tier": NaN}', "NaN is not JSON"),
    "Infinity": (b'{"text": "a", "target": "de", "tier": -Infinity}', "Infinity is not JSON"),
    "a 5,000-digit number": (b'{"text": "a", "target": "de", "tier": ' + b"9" * 5000 + b"}", "digits"),
    "a 1,000,000-digit number": (b"9" * 1_000_000, "digits"),
    "invalid UTF-8": (b'{"text": "\xff\xfe\xc3", "target": "de"}', "not UTF-8"),
    "Latin-1": ('{"text": "café", "target": "de"}'.encode("latin-1"), "not UTF-8"),
    "truncated": (OK[:-3], "not valid JSON"),
    "trailing garbage": (OK + b" {}", "not valid JSON"),
    "a lone surrogate escape": (b'{"text": "a \\ud800 b", "target": "de"}', "surrogate"),
    "a huge float as tier": (b'{"text": "a", "target": "de", "tier": 1e999}', "tier"),
    "text as a number": (b'{"text": 1e400, "target": "de"}', "text"),
}


@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_malformed_bodies_are_400_with_the_error_json(client: httpx.Client, name: str) -> None:
    body, needle = BAD_BODIES[name]
    response = client.post("/translate", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400, (name, response.status_code, response.text[:300])
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()
    assert set(error) == {"error", "code"} and error["code"] == "invalid_request", error
    assert needle in error["error"], error
    assert "set_int_max_str_digits" not in error["error"]  # advice for Python programmers, not clients
    assert "unexpectedly" not in error["error"]


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data", "application/xml"],
)
def test_the_body_is_json_whatever_the_content_type_says(
    client: httpx.Client, content_type: str | None
) -> None:
    """Documented: `curl -d` sends a form type; the body is read as JSON anyway, and refused as JSON."""
    headers = {"Content-Type": content_type} if content_type else {}
    assert client.post("/translate", content=OK, headers=headers).status_code == 200
    refused = client.post("/translate", content=b"text=Hello&target=de", headers=headers)
    assert refused.status_code == 400 and refused.json()["code"] == "invalid_request"


def test_the_daemon_is_healthy_after_every_hostile_body(client: httpx.Client) -> None:
    for body, _ in BAD_BODIES.values():
        client.post("/translate", content=body)
    assert client.get("/health").json()["ok"] is True
    assert client.post("/translate", content=OK).status_code == 200


# ----- the parser itself ----------------------------------------------------------------------------
def test_strict_loads_keeps_valid_json_as_it_is() -> None:
    data = {"text": "a", "texts": ["b", "c"], "glossary": [{"term": "x", "translation": "y"}], "n": [1, 2.5]}
    assert loads(json.dumps(data).encode(), example="{}") == data
    assert loads(b'{"a": {"a": 1}}', example="{}") == {"a": {"a": 1}}  # the same key in two objects is fine
    assert loads('\ufeff{"a": 1}'.encode(), example="{}") == {"a": 1}  # a UTF-8 BOM, as json.loads allows
    assert loads('{"a": 1}'.encode("utf-16"), example="{}") == {"a": 1}  # RFC 8259's other encodings too


def test_strict_loads_refuses_with_our_error_only() -> None:
    for body, _ in BAD_BODIES.values():  # the schema refuses the few that parse (1e999 as a tier)
        with contextlib.suppress(InvalidRequest):  # anything else (RecursionError, ValueError) fails here
            loads(body, example="{}")


@pytest.mark.parametrize(
    ("name", "unit"),
    [("objects", '{"a": 1, "b": 2},'), ("duplicate-free keys", '"k": 1,'), ("deep arrays", "[")],
)
def test_strict_loads_is_linear(name: str, unit: str) -> None:
    """x4 the body costs at most about x4 (the shared growth check: CPU time, measured again before
    failing; quadratic parsing gives about x16)."""

    def body(n: int) -> str:
        if name == "objects":
            return "[" + unit * n + "{}]"
        if name == "duplicate-free keys":
            return "{" + ",".join(f'"k{i}": 1' for i in range(n)) + "}"
        return unit * n  # unterminated: refused at the recursion limit, whatever follows

    def run(text: str) -> None:
        try:
            loads(text.encode("ascii"), example="{}")
        except InvalidRequest:
            pass

    assert_linear(run, {name: body}, 20_000)


def test_a_deep_body_is_refused_before_the_engine() -> None:
    """The wire parser answers the typed error itself (no engine involved)."""
    from dragoman.server._wire import parse_translate

    with pytest.raises(InvalidRequest, match="nested too deeply"):
        parse_translate(b'{"text": ' + b"[" * 10_000 + b"]" * 10_000 + b', "target": "de"}')
