"""Hostile webhook receivers and payloads (issue 12, webhooks): nothing a receiver sends holds a delivery past
its bounds or wedges the outbox."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import select

from dragoman.service import accounts, webhooks
from dragoman.service.db import Database, metadata, webhook_events
from dragoman.settings import HostedSettings


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    database = Database(db_url)  # SQLite and PostgreSQL (the db_url fixture)
    metadata.create_all(database.engine)
    yield database
    database.dispose()


@pytest.fixture
def key_id(db: Database) -> str:
    account = accounts.create_account(db, name="t", plan="pro", credits=100)
    return accounts.create_key(db, account.id).key_id


def _enqueue(db: Database, key_id: str, url: str, payload: dict[str, object] | None = None) -> str:
    with db.write() as conn:
        event_id = webhooks.enqueue(
            conn, key_id=key_id, url=url, event="job.done", payload=payload or {"job_id": "j"}
        )
    assert event_id is not None
    return event_id


def _state(db: Database, event_id: str) -> str:
    with db.read() as conn:
        return str(
            conn.execute(select(webhook_events.c.state).where(webhook_events.c.id == event_id)).scalar_one()
        )


def _raw_server(answer: Callable[[socket.socket], None]) -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    conn.recv(65536)
                    answer(conn)
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


@pytest.fixture
def endless_body() -> Iterator[int]:
    def answer(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\n")
        chunk = b"x" * 65536
        for _ in range(2000):  # up to 128 MB, if anyone read it
            conn.sendall(chunk)

    yield from _raw_server(answer)


@pytest.fixture
def endless_headers() -> Iterator[int]:
    def answer(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        line = b"X-Junk: " + b"a" * 1000 + b"\r\n"
        for _ in range(100_000):
            conn.sendall(line)

    yield from _raw_server(answer)


@pytest.fixture
def garbage() -> Iterator[int]:
    def answer(conn: socket.socket) -> None:
        conn.sendall(b"\x00\xff NOT HTTP AT ALL\r\n\r\n")

    yield from _raw_server(answer)


def test_an_endless_body_is_never_read(db: Database, key_id: str, endless_body: int) -> None:
    event_id = _enqueue(db, key_id, f"http://127.0.0.1:{endless_body}/")
    dispatcher = webhooks.WebhookDispatcher(db, HostedSettings(webhooks_allow_private=True), timeout=5)
    try:
        started = time.monotonic()
        (result,) = dispatcher.deliver_due()
        took = time.monotonic() - started
    finally:
        dispatcher.close()
    assert result.outcome == "delivered" and result.status_code == 200
    assert took < 4.0  # the status line is enough
    assert _state(db, event_id) == "delivered"


def test_endless_headers_end_the_attempt_as_a_retry(db: Database, key_id: str, endless_headers: int) -> None:
    event_id = _enqueue(db, key_id, f"http://127.0.0.1:{endless_headers}/")
    dispatcher = webhooks.WebhookDispatcher(db, HostedSettings(webhooks_allow_private=True), timeout=5)
    try:
        started = time.monotonic()
        (result,) = dispatcher.deliver_due()
        took = time.monotonic() - started
    finally:
        dispatcher.close()
    assert result.outcome == "retry" and result.status_code is None
    assert took < 8.0
    assert _state(db, event_id) == "pending"


def test_a_non_http_answer_is_a_retry(db: Database, key_id: str, garbage: int) -> None:
    _enqueue(db, key_id, f"http://127.0.0.1:{garbage}/")
    dispatcher = webhooks.WebhookDispatcher(db, HostedSettings(webhooks_allow_private=True), timeout=5)
    try:
        (result,) = dispatcher.deliver_due()
    finally:
        dispatcher.close()
    assert result.outcome == "retry" and result.error


@pytest.mark.parametrize(
    "url", ["not a url", "ftp://example.com/x", "http://169.254.169.254/", "http:///x", "file:///etc/passwd"]
)
def test_an_undeliverable_stored_url_fails_at_once(db: Database, key_id: str, url: str) -> None:
    """A URL that slipped past the checks at creation is refused at delivery, never retried for an hour."""
    event_id = _enqueue(db, key_id, url)
    dispatcher = webhooks.WebhookDispatcher(db, HostedSettings(webhooks_allow_private=True))
    try:
        (result,) = dispatcher.deliver_due()
    finally:
        dispatcher.close()
    assert result.outcome == "failed" and "refused" in (result.error or "")
    assert _state(db, event_id) == "failed"


def test_hostile_payload_text_is_valid_utf8_json(db: Database, key_id: str) -> None:
    """Lone surrogates, NULs, RTL marks and huge numbers in a job's result still make a sendable body."""
    payload: dict[str, object] = {"result": "a\ud800b\x00\u202e\U0001f600", "credits": 10**30, "n": None}
    event_id = _enqueue(db, key_id, "https://hooks.example.com/x", payload)
    with db.read() as conn:
        text = conn.execute(
            select(webhook_events.c.payload).where(webhook_events.c.id == event_id)
        ).scalar_one()
    body = str(text).encode("utf-8")  # encodable
    parsed = json.loads(body)
    assert parsed["result"] == payload["result"] and parsed["credits"] == 10**30 and parsed["id"] == event_id


def test_a_key_that_vanished_fails_its_events(db: Database, key_id: str) -> None:
    event_id = _enqueue(db, key_id, "https://hooks.example.com/x")
    with db.write() as conn:
        conn.execute(webhook_events.update().values(key_id="gone"))
    dispatcher = webhooks.WebhookDispatcher(db, HostedSettings(webhooks_allow_private=True))
    try:
        (result,) = dispatcher.deliver_due()
    finally:
        dispatcher.close()
    assert result.outcome == "failed"
    assert _state(db, event_id) == "failed"
