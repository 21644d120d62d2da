"""Issue 9, items 4 and 8: the daemon's connections are bounded, and HTTP-level refusals are JSON.

Raw sockets do what a hostile client would: hold hundreds of idle sockets, trickle headers (slowloris),
open connections over the cap while every slot serves a request, send malformed or oversized heads. The
daemon keeps answering ``/health``, cuts the slow ones off with 408, answers over the cap with 503, and every
refusal is the documented ``{"error", "code"}`` JSON (spec 7.2), never uvicorn's plain text.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from dragoman.server.daemon._protocol import ConnectionLimits, GuardedProtocol
from dragoman.server.daemon.app import bind_socket, create_app, openapi_json, uvicorn_server
from dragoman.settings import Settings
from dragoman.testing.fakes import BlockingEngine


class Daemon:
    """The daemon over a stub engine in a thread, with the given connection limits."""

    def __init__(self, limits: ConnectionLimits, workers: int = 2) -> None:
        self.engine = BlockingEngine()
        app = create_app(self.engine, None, max_workers=workers, queue_limit=64, request_timeout=30)
        self.sock = bind_socket("127.0.0.1", 0)
        self.port: int = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn_server(app, 30, limits)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def open_connections(self) -> int:
        return sum(1 for c in self.server.server_state.connections if not c.transport.is_closing())


@contextlib.contextmanager
def running(limits: ConnectionLimits, workers: int = 2) -> Iterator[Daemon]:
    daemon = Daemon(limits, workers)
    daemon.thread.start()
    deadline = time.monotonic() + 10
    while not daemon.server.started:
        assert daemon.thread.is_alive() and time.monotonic() < deadline, "the daemon did not start"
        time.sleep(0.01)
    try:
        yield daemon
    finally:
        daemon.engine.release.set()
        daemon.server.should_exit = True
        daemon.thread.join(30)


def connect(port: int, timeout: float = 10) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Read until the peer closes (or the body is complete): status, headers, body."""
    data = b""
    with contextlib.suppress(ConnectionResetError):
        while not _complete(data):
            more = sock.recv(65536)
            if not more:
                break
            data += more
    return parse_answer(data)


def _complete(data: bytes) -> bool:
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    lengths = [
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    ]
    return bool(lengths) and len(body) >= lengths[0]


def parse_answer(data: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].startswith("HTTP/1.1 "), data[:200]
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def assert_json_error(answer: tuple[int, dict[str, str], bytes], status: int, code: str) -> dict[str, Any]:
    got, headers, body = answer
    assert got == status, (got, body)
    assert headers["content-type"].startswith("application/json"), headers
    data = json.loads(body)
    assert isinstance(data, dict) and set(data) == {"error", "code"}, data
    assert data["code"] == code and isinstance(data["error"], str) and data["error"], data
    return data


def closed_by_peer(sock: socket.socket, within: float) -> bool:
    """Whether the peer closes ``sock`` within ``within`` seconds (reading and dropping what it sends)."""
    sock.settimeout(within)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


# ----- idle sockets and the connection cap ------------------------------------------------------------
def test_300_idle_sockets_leave_health_answering() -> None:
    limits = ConnectionLimits()  # the defaults: 300 idle sockets are over the cap
    with running(limits) as daemon:
        idle: list[socket.socket] = []
        try:
            idle.extend(connect(daemon.port) for _ in range(300))
            time.sleep(0.5)
            started = time.monotonic()
            with httpx.Client(timeout=10) as client:
                answer = client.get(daemon.url + "/health")
            assert answer.status_code == 200 and answer.json()["ok"] is True
            assert time.monotonic() - started < 5  # answered at once, not after some timeout
            # the daemon holds no more than its cap: the idle sockets longest open were closed for room
            assert daemon.open_connections() <= limits.max_connections
            assert sum(closed_by_peer(s, 0.01) for s in idle[:100]) >= 100  # the oldest went first
        finally:
            for s in idle:
                s.close()


def test_idle_sockets_and_slow_heads_over_a_small_cap() -> None:
    with running(ConnectionLimits(max_connections=10, header_timeout=30)) as daemon:
        held = [connect(daemon.port) for _ in range(15)]
        for s in held[:8]:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # heads never finished
        try:
            for _ in range(3):
                with httpx.Client(timeout=10) as client:
                    assert client.get(daemon.url + "/health").status_code == 200
            assert daemon.open_connections() <= 10
        finally:
            for s in held:
                s.close()


def test_a_socket_that_sends_nothing_is_closed_after_the_header_timeout() -> None:
    with running(ConnectionLimits(header_timeout=0.5)) as daemon, connect(daemon.port) as sock:
        assert closed_by_peer(sock, 10)


def test_idle_keep_alive_connection_is_closed() -> None:
    with running(ConnectionLimits(keep_alive=0.5, header_timeout=30)) as daemon, connect(daemon.port) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        status, headers, _ = read_answer(sock)
        assert status == 200 and headers.get("connection") != "close"
        assert closed_by_peer(sock, 10)


def test_over_the_cap_with_every_connection_busy_is_a_quick_503_json() -> None:
    with running(ConnectionLimits(max_connections=3, header_timeout=30), workers=3) as daemon:
        busy = [connect(daemon.port) for _ in range(3)]
        body = b'{"text": "hello", "target": "es"}'
        request = b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        for s in busy:
            s.sendall(request + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        for _ in busy:
            assert daemon.engine.entered.acquire(timeout=10)  # all three are in the engine
        started = time.monotonic()
        with connect(daemon.port) as extra:
            extra.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            answer = read_answer(extra)
        assert time.monotonic() - started < 5
        assert_json_error(answer, 503, "saturated")
        assert answer[1]["retry-after"] == "1"
        daemon.engine.release.set()
        for s in busy:  # the requests in progress were never disturbed
            status, _, out = read_answer(s)
            assert status == 200 and json.loads(out)["translation"] == "HELLO"
            s.close()


# ----- slow heads (slowloris) ---------------------------------------------------------------------------
def test_slowloris_header_trickle_is_cut_off_with_408_json() -> None:
    with running(ConnectionLimits(header_timeout=1.0)) as daemon, connect(daemon.port) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        started = time.monotonic()
        sock.settimeout(0.05)
        data = b""
        while time.monotonic() - started < 15:
            try:
                sock.sendall(b"X-a: b\r\n")  # a header every 50 ms: the head is never finished
            except OSError:
                break
            try:
                more = sock.recv(65536)
            except TimeoutError:
                continue
            except ConnectionResetError:
                break
            if not more:
                break
            data += more
        elapsed = time.monotonic() - started
        assert elapsed < 10, elapsed  # cut at about 1 s, not when the client gives up
        assert data, "the daemon closed the connection without an answer"
        assert_json_error(parse_answer(data), 408, "request_timeout")


def test_slow_body_is_cut_off() -> None:
    with running(ConnectionLimits(header_timeout=1.0)) as daemon, connect(daemon.port) as sock:
        sock.sendall(
            b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100000\r\n\r\n{"
        )
        started = time.monotonic()
        for _ in range(200):
            try:
                sock.sendall(b" ")
            except OSError:
                break
            time.sleep(0.05)
        assert closed_by_peer(sock, 10)
        assert time.monotonic() - started < 10
        assert daemon.engine.entered.acquire(timeout=0) is False  # the engine never saw it


# ----- malformed and oversized heads: JSON, not uvicorn's plain text ----------------------------------
MALFORMED = [
    b"GARBAGE\r\n\r\n",
    b"GET / HTTP/1.1\r\nBad Header\r\n\r\n",
    b"GET /he\x00lth HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    b"GET /health HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n",
    b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n",
    b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx",
    b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX: a\x01b\r\n\r\n",
    b"GET /h\xc3\xa9alth HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(40),  # a TLS hello on the plain port
]


def test_malformed_requests_are_json_400() -> None:
    with running(ConnectionLimits(header_timeout=5)) as daemon:
        for request in MALFORMED:
            with connect(daemon.port) as sock:
                sock.sendall(request)
                answer = read_answer(sock)
            data = assert_json_error(answer, 400, "invalid_request")
            assert "HTTP" in data["error"], data
        with httpx.Client(timeout=10) as client:
            assert client.get(daemon.url + "/health").status_code == 200


@pytest.mark.parametrize(
    "head",
    [
        b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n",
        b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + b"".join(b"X-%d: %s\r\n" % (i, b"b" * 40) for i in range(3000))
        + b"\r\n",
        b"GET /" + b"c" * 100_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    ],
    ids=["one-big-header", "many-headers", "long-url"],
)
def test_oversized_heads_are_json_431(head: bytes) -> None:
    with running(ConnectionLimits()) as daemon, connect(daemon.port) as sock:
        with contextlib.suppress(OSError):
            sock.sendall(head)
        assert_json_error(read_answer(sock), 431, "headers_too_large")


def test_an_endless_header_is_cut_off_without_reading_it_all() -> None:
    with running(ConnectionLimits()) as daemon, connect(daemon.port) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Endless: ")
        sent = 0
        with contextlib.suppress(OSError):
            while sent < 64 * 1024 * 1024:  # the daemon stops reading long before this
                sock.sendall(b"z" * 65536)
                sent += 65536
        assert sent < 64 * 1024 * 1024
        assert_json_error(read_answer(sock), 431, "headers_too_large")


def test_a_normal_keep_alive_conversation_is_unaffected() -> None:
    with (
        running(ConnectionLimits(max_connections=2, header_timeout=2)) as daemon,
        httpx.Client(timeout=10) as c,
    ):
        for _ in range(20):
            assert c.get(daemon.url + "/health").status_code == 200
        time.sleep(0.5)
        assert c.get(daemon.url + "/languages").json() == []


# ----- wiring --------------------------------------------------------------------------------------------
def test_the_settings_reach_the_protocol_and_the_openapi_document_lists_the_refusals() -> None:
    settings = Settings.from_env(
        {
            "DRAGOMAN_SERVE_MAX_CONNECTIONS": "7",
            "DRAGOMAN_SERVE_HEADER_TIMEOUT": "3.5",
            "DRAGOMAN_SERVE_KEEP_ALIVE": "2",
        }
    )
    limits = ConnectionLimits.from_settings(settings.daemon)
    assert (limits.max_connections, limits.header_timeout, limits.keep_alive) == (7, 3.5, 2.0)
    server = uvicorn_server(create_app(BlockingEngine(), None), 30, limits)
    protocol = server.config.http
    assert isinstance(protocol, type) and issubclass(protocol, GuardedProtocol) and protocol.limits == limits
    assert server.config.ws == "none"
    document = json.loads(openapi_json())
    statuses = document["paths"]["/health"]["get"]["responses"]
    assert {"400", "408", "431", "503"} <= set(statuses)
    assert "request_timeout" in json.dumps(statuses) and "headers_too_large" in json.dumps(statuses)
