"""Webhook delivery (issue 12, webhooks): the outbox, signing each attempt, retries, SSRF, the delivery log.

A real receiver on loopback verifies every delivery with the ``standardwebhooks`` library and with the spec's
``X-Service-Signature`` (through :func:`dragoman.webhooks.verify`).
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from db_support import DbBackend
from sqlalchemy import select
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError as StandardError

from dragoman import webhooks as signing
from dragoman.errors import WebhookVerificationError
from dragoman.service import accounts, webhooks
from dragoman.service.db import Database, metadata, now_ms, webhook_attempts, webhook_events
from dragoman.settings import HostedSettings

# ----- a receiver on loopback -------------------------------------------------------------------------------


@dataclass
class Delivery:
    path: str
    body: bytes
    headers: dict[str, str]
    standard_ok: bool
    ours_ok: bool


@dataclass
class Receiver:
    """Answers each path with the statuses in ``script[path]`` in turn (the last one repeats; 200 if none)."""

    secret: str = ""
    port: int = 0
    script: dict[str, list[int]] = field(default_factory=dict)
    extra_headers: dict[str, dict[str, str]] = field(default_factory=dict)
    deliveries: list[Delivery] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def at(self, path: str) -> list[Delivery]:
        with self.lock:
            return [d for d in self.deliveries if d.path == path]


def _handler(receiver: Receiver) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            headers = dict(self.headers.items())
            try:
                Webhook(receiver.secret).verify(body, headers)
                standard_ok = True
            except StandardError:
                standard_ok = False
            try:
                signing.verify(body, headers, receiver.secret)
                ours_ok = True
            except WebhookVerificationError:
                ours_ok = False
            with receiver.lock:
                receiver.deliveries.append(Delivery(self.path, body, headers, standard_ok, ours_ok))
                statuses = receiver.script.get(self.path, [200])
                status = statuses.pop(0) if len(statuses) > 1 else statuses[0]
            self.send_response(status)
            for name, value in receiver.extra_headers.get(self.path, {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    return Handler


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()
    thread.join()


class DeadReceiver:
    """Accepts connections and never answers, until closed."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        self.server.settimeout(0.1)
        while not self.closed.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.closed.set()
        self.thread.join()
        for conn in self.accepted:
            conn.close()
        self.server.close()


# ----- the service side -------------------------------------------------------------------------------------
@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    database = Database(db_url)
    metadata.create_all(database.engine)
    yield database
    database.dispose()


def _key(db: Database, receiver: Receiver) -> str:
    account = accounts.create_account(db, name="t", plan="pro", credits=100)
    created = accounts.create_key(db, account.id)
    receiver.secret = created.webhook_secret
    return created.key_id


@pytest.fixture
def key_id(db: Database, receiver: Receiver) -> str:
    return _key(db, receiver)


@pytest.fixture
def dispatcher(db: Database) -> Iterator[webhooks.WebhookDispatcher]:
    d = webhooks.WebhookDispatcher(db, HostedSettings(webhooks_allow_private=True))
    yield d
    d.close()


def _enqueue(db: Database, key_id: str, url: str, **payload: object) -> str:
    with db.write() as conn:
        event_id = webhooks.enqueue(
            conn,
            key_id=key_id,
            url=url,
            event="job.done",
            payload={"job_id": "j1", "status": "done", **payload},
            job_id="j1",
        )
    assert event_id is not None
    return event_id


def _event(db: Database, event_id: str) -> dict[str, object]:
    with db.read() as conn:
        return dict(
            conn.execute(select(webhook_events).where(webhook_events.c.id == event_id)).mappings().one()
        )


def _attempts(db: Database, event_id: str) -> list[dict[str, object]]:
    with db.read() as conn:
        query = select(webhook_attempts).where(webhook_attempts.c.event_id == event_id)
        return [dict(r) for r in conn.execute(query.order_by(webhook_attempts.c.attempt)).mappings()]


# ----- enqueue ----------------------------------------------------------------------------------------------
def test_enqueue_is_part_of_the_callers_transaction(db: Database, key_id: str) -> None:
    with pytest.raises(RuntimeError), db.write() as conn:
        webhooks.enqueue(conn, key_id=key_id, url="https://x.example/", event="job.done", payload={})
        raise RuntimeError("the job's state change failed")
    assert webhooks.pending_count(db) == 0
    with db.write() as conn:
        assert webhooks.enqueue(conn, key_id=key_id, url=None, event="job.done", payload={}) is None
    assert webhooks.pending_count(db) == 0


def test_payload_gets_id_event_and_created_and_is_stored_as_sent(
    db: Database, key_id: str, receiver: Receiver, dispatcher: webhooks.WebhookDispatcher
) -> None:
    before = int(time.time())
    event_id = _enqueue(db, key_id, receiver.url("/hook"), result="hola", credits=3)
    row = _event(db, event_id)
    payload = json.loads(str(row["payload"]))
    assert payload["id"] == event_id and event_id.startswith("evt_")
    assert payload["event"] == "job.done"
    assert before <= payload["created"] <= time.time() + 1
    assert payload["job_id"] == "j1" and payload["result"] == "hola" and payload["credits"] == 3
    assert row["state"] == "pending" and row["attempts"] == 0

    results = dispatcher.deliver_due()
    assert [r.outcome for r in results] == ["delivered"]
    (got,) = receiver.at("/hook")
    assert got.body == str(row["payload"]).encode()  # byte for byte what was stored
    assert got.standard_ok and got.ours_ok
    assert got.headers["Content-Type"] == "application/json"
    assert got.headers["webhook-id"] == event_id
    assert _event(db, event_id)["state"] == "delivered"
    assert dispatcher.deliver_due() == []  # delivered once


# ----- retries ----------------------------------------------------------------------------------------------
def test_retries_on_500_then_success_resigning_each_attempt(
    db: Database, key_id: str, receiver: Receiver, dispatcher: webhooks.WebhookDispatcher
) -> None:
    receiver.script["/flaky"] = [500, 502, 200]
    event_id = _enqueue(db, key_id, receiver.url("/flaky"))
    now = now_ms()
    first = dispatcher.deliver_due(now)
    assert [(r.outcome, r.status_code) for r in first] == [("retry", 500)]
    wait = (first[0].next_attempt_ms or 0) - now
    assert 5_000 <= wait <= 10_000  # 10 s with equal jitter
    assert dispatcher.deliver_due(now + 1_000) == []  # not due yet
    second = dispatcher.deliver_due(now + 10_001)
    assert [(r.outcome, r.status_code, r.attempt) for r in second] == [("retry", 502, 2)]
    wait2 = (second[0].next_attempt_ms or 0) - (now + 10_001)
    assert 20_000 <= wait2 <= 40_000  # exponential: 40 s with jitter
    third = dispatcher.deliver_due(now + 60_000)
    assert [(r.outcome, r.status_code) for r in third] == [("delivered", 200)]

    got = receiver.at("/flaky")
    assert len(got) == 3
    assert all(d.standard_ok and d.ours_ok for d in got)
    assert len({d.body for d in got}) == 1 and {d.headers["webhook-id"] for d in got} == {event_id}
    rows = _attempts(db, event_id)
    assert [(r["attempt"], r["status_code"]) for r in rows] == [(1, 500), (2, 502), (3, 200)]
    assert _event(db, event_id)["state"] == "delivered"


@pytest.mark.parametrize("status", [400, 401, 404, 410, 422, 302])
def test_no_retry_on_other_4xx_or_redirect(
    db: Database, key_id: str, receiver: Receiver, dispatcher: webhooks.WebhookDispatcher, status: int
) -> None:
    receiver.script["/no"] = [status]
    receiver.extra_headers["/no"] = {"Location": receiver.url("/elsewhere")}
    event_id = _enqueue(db, key_id, receiver.url("/no"))
    now = now_ms()
    assert [r.outcome for r in dispatcher.deliver_due(now)] == ["failed"]
    assert dispatcher.deliver_due(now + 10**9) == []
    assert len(receiver.at("/no")) == 1 and receiver.at("/elsewhere") == []  # redirects are not followed
    assert _event(db, event_id)["state"] == "failed"
    assert [r["status_code"] for r in _attempts(db, event_id)] == [status]


@pytest.mark.parametrize("status", [408, 429, 500, 503, 504])
def test_retry_on_408_429_and_5xx(
    db: Database, key_id: str, receiver: Receiver, dispatcher: webhooks.WebhookDispatcher, status: int
) -> None:
    receiver.script["/busy"] = [status, 200]
    event_id = _enqueue(db, key_id, receiver.url("/busy"))
    now = now_ms()
    assert [r.outcome for r in dispatcher.deliver_due(now)] == ["retry"]
    assert [r.outcome for r in dispatcher.deliver_due(now + 3_600_000)] == ["delivered"]
    assert [r["status_code"] for r in _attempts(db, event_id)] == [status, 200]


def test_retry_after_of_a_429_is_honoured(
    db: Database, key_id: str, receiver: Receiver, dispatcher: webhooks.WebhookDispatcher
) -> None:
    receiver.script["/slow-down"] = [429, 200]
    receiver.extra_headers["/slow-down"] = {"Retry-After": "120"}
    _enqueue(db, key_id, receiver.url("/slow-down"))
    now = now_ms()
    (result,) = dispatcher.deliver_due(now)
    assert result.outcome == "retry" and (result.next_attempt_ms or 0) - now >= 120_000


def test_one_attempt_and_five_retries_then_failed(
    db: Database, key_id: str, receiver: Receiver, dispatcher: webhooks.WebhookDispatcher
) -> None:
    receiver.script["/down"] = [503]
    event_id = _enqueue(db, key_id, receiver.url("/down"))
    now = now_ms()
    outcomes = []
    for n in range(8):
        outcomes += [r.outcome for r in dispatcher.deliver_due(now + n * 10_000_000)]
    assert outcomes == ["retry"] * 5 + ["failed"]
    assert [r["attempt"] for r in _attempts(db, event_id)] == [1, 2, 3, 4, 5, 6]
    assert _event(db, event_id)["state"] == "failed"
    assert len(receiver.at("/down")) == 6


def test_network_error_is_retried(db: Database, key_id: str, dispatcher: webhooks.WebhookDispatcher) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there: connection refused
    event_id = _enqueue(db, key_id, f"http://127.0.0.1:{port}/x")
    (result,) = dispatcher.deliver_due()
    assert result.outcome == "retry" and result.status_code is None and result.error
    (row,) = _attempts(db, event_id)
    assert row["status_code"] is None and "Connect" in str(row["error"])


# ----- SSRF -------------------------------------------------------------------------------------------------
def test_loopback_refused_without_allow_private_and_not_retried(
    db: Database, key_id: str, receiver: Receiver
) -> None:
    event_id = _enqueue(db, key_id, receiver.url("/inside"))
    strict = webhooks.WebhookDispatcher(db, HostedSettings(webhooks_allow_private=False))
    try:
        (result,) = strict.deliver_due()
    finally:
        strict.close()
    assert result.outcome == "failed" and "loopback" in (result.error or "")
    assert receiver.at("/inside") == []
    assert _event(db, event_id)["state"] == "failed"


def test_a_name_resolving_to_loopback_is_refused(db: Database, key_id: str, receiver: Receiver) -> None:
    event_id = _enqueue(db, key_id, f"http://hooks.example:{receiver.port}/rebound")
    strict = webhooks.WebhookDispatcher(
        db, HostedSettings(webhooks_allow_private=False), resolver=lambda _h, _p: ["127.0.0.1"]
    )
    try:
        (result,) = strict.deliver_due()
    finally:
        strict.close()
    assert result.outcome == "failed" and receiver.at("/rebound") == []
    assert "refused" in str(_attempts(db, event_id)[0]["error"])


# ----- replay -----------------------------------------------------------------------------------------------
def test_captured_body_replayed_with_fresh_timestamp_is_rejected(
    db: Database, key_id: str, receiver: Receiver, dispatcher: webhooks.WebhookDispatcher
) -> None:
    _enqueue(db, key_id, receiver.url("/capture"))
    dispatcher.deliver_due()
    (captured,) = receiver.at("/capture")
    assert captured.standard_ok
    fresh = str(int(time.time()) + 7)
    replayed = {**captured.headers, "webhook-timestamp": fresh, "X-Service-Timestamp": fresh}
    with pytest.raises(StandardError):
        Webhook(receiver.secret).verify(captured.body, replayed)
    with pytest.raises(WebhookVerificationError):
        signing.verify(captured.body, replayed, receiver.secret)


# ----- bounded, in the background ---------------------------------------------------------------------------
def test_a_dead_receiver_does_not_delay_other_events(db: Database, key_id: str, receiver: Receiver) -> None:
    dead = DeadReceiver()
    dispatcher = webhooks.WebhookDispatcher(
        db, HostedSettings(webhooks_allow_private=True), concurrency=4, per_host=2, poll_interval=0.1
    )
    dispatcher.start()
    try:
        for _ in range(8):  # more than every worker: the per-host bound keeps some free
            _enqueue(db, key_id, f"http://localhost:{dead.port}/never")
        holding = time.monotonic() + 30  # the dead receiver holds what it may hold (polled: a busy machine
        while len(dead.accepted) < 2 and time.monotonic() < holding:  # may take a while to get there)
            time.sleep(0.05)
        assert len(dead.accepted) == 2, len(dead.accepted)
        time.sleep(0.5)  # room for more attempts to the dead host, were the per-host bound broken
        started = time.monotonic()
        enqueue_started = time.monotonic()
        good = _enqueue(db, key_id, receiver.url("/alive"))
        enqueue_took = time.monotonic() - enqueue_started
        while not receiver.at("/alive") and time.monotonic() - started < 8:
            time.sleep(0.05)
        took = time.monotonic() - started
        assert receiver.at("/alive"), "the live receiver got nothing while the dead one held workers"
        assert took < 5.0  # well under the dead receiver's 10 s timeout
        assert enqueue_took < 2.0  # job work (the enqueue) does not wait for deliveries
        assert len(dead.accepted) <= 2  # at most per_host attempts at once to one host
        deadline = time.monotonic() + 5
        while _event(db, good)["state"] != "delivered" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _event(db, good)["state"] == "delivered"
    finally:
        dead.close()  # the held attempts end (connection closed) and are scheduled for a retry
        dispatcher.stop(timeout=10)
        dispatcher.close()


def test_slow_drip_receiver_is_cut_at_the_total_timeout(db: Database, key_id: str) -> None:
    """A receiver that answers a byte at a time cannot hold a delivery past the timeout."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    stop = threading.Event()

    def drip() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            for byte in b"HTTP/1.1 200 OK\r\nX-Padding: " + b"a" * 1000:
                if stop.is_set():
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return
                time.sleep(0.2)

    thread = threading.Thread(target=drip, daemon=True)
    thread.start()
    event_id = _enqueue(db, key_id, f"http://127.0.0.1:{port}/drip")
    dispatcher = webhooks.WebhookDispatcher(db, HostedSettings(webhooks_allow_private=True), timeout=1.0)
    try:
        started = time.monotonic()
        (result,) = dispatcher.deliver_due()
        took = time.monotonic() - started
    finally:
        stop.set()
        dispatcher.close()
        thread.join()
        server.close()
    assert result.outcome == "retry" and "timed out" in (result.error or "")
    assert took < 4.0  # 1 s of total timeout, not 1000 bytes x 0.2 s
    assert _attempts(db, event_id)[0]["status_code"] is None


def test_two_dispatchers_never_send_one_attempt_twice(db: Database, key_id: str, receiver: Receiver) -> None:
    ids = {_enqueue(db, key_id, receiver.url("/once"), n=n) for n in range(12)}
    settings = HostedSettings(webhooks_allow_private=True)
    first, second = webhooks.WebhookDispatcher(db, settings), webhooks.WebhookDispatcher(db, settings)
    try:
        results: list[list[webhooks.DeliveryResult]] = [[], []]
        threads = [
            threading.Thread(target=lambda i=i, d=d: results[i].extend(d.deliver_due()))
            for i, d in enumerate((first, second))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        first.close()
        second.close()
    ids_sent = [d.headers["webhook-id"] for d in receiver.at("/once")]
    assert sorted(ids_sent) == sorted(ids)
    assert len(results[0]) + len(results[1]) == 12


def test_background_dispatcher_delivers_what_is_enqueued_later(
    db: Database, key_id: str, receiver: Receiver
) -> None:
    dispatcher = webhooks.WebhookDispatcher(
        db, HostedSettings(webhooks_allow_private=True), poll_interval=0.1
    )
    with dispatcher:
        event_id = _enqueue(db, key_id, receiver.url("/later"))
        dispatcher.wake()
        deadline = time.monotonic() + 10
        while _event(db, event_id)["state"] != "delivered" and time.monotonic() < deadline:
            time.sleep(0.05)
    dispatcher.close()
    assert _event(db, event_id)["state"] == "delivered"
    assert [d.standard_ok and d.ours_ok for d in receiver.at("/later")] == [True]


def test_a_claimed_event_whose_dispatcher_vanished_is_retried_after_the_lease(
    db: Database, key_id: str, receiver: Receiver, dispatcher: webhooks.WebhookDispatcher
) -> None:
    event_id = _enqueue(db, key_id, receiver.url("/lease"))
    now = now_ms()
    assert len(dispatcher._claim(now, 10, bounded=False)) == 1  # claimed, then the process "dies"
    assert dispatcher.deliver_due(now + 1_000) == []
    (result,) = dispatcher.deliver_due(now + dispatcher.lease_ms + 1)
    assert result.outcome == "delivered" and result.attempt == 1
    assert _event(db, event_id)["state"] == "delivered"


# ----- the delivery log -------------------------------------------------------------------------------------
def test_delivery_log_one_row_per_attempt_newest_first(
    db: Database, key_id: str, receiver: Receiver, dispatcher: webhooks.WebhookDispatcher
) -> None:
    receiver.script["/log"] = [500, 200]
    event_id = _enqueue(db, key_id, receiver.url("/log"))
    now = now_ms()
    dispatcher.deliver_due(now)
    dispatcher.deliver_due(now + 3_600_000)
    log = webhooks.delivery_log(db, key_id)
    assert [(e.attempt, e.status_code) for e in log] == [(2, 200), (1, 500)]
    assert all(e.event_id == event_id and e.event == "job.done" and e.state == "delivered" for e in log)
    assert log[0].url == receiver.url("/log") and log[0].job_id == "j1"
    assert set(log[0].to_dict()) >= {"event_id", "attempt", "at_ms", "status_code", "error", "duration_ms"}
    other = accounts.create_key(db, accounts.create_account(db, name="o").id).key_id
    assert webhooks.delivery_log(db, other) == []


def test_backoff_grows_exponentially_with_jitter() -> None:
    import random

    rng = random.Random(7)
    for retry in range(1, 6):
        full = webhooks.BACKOFF_BASE_S * webhooks.BACKOFF_FACTOR ** (retry - 1)
        draws = [webhooks.backoff_seconds(retry, rng) for _ in range(200)]
        assert all(full / 2 <= d <= full for d in draws)
        assert len({round(d, 6) for d in draws}) > 100  # jittered, not one value


def test_cli_webhooks_log(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    receiver: Receiver,
    db_backend: DbBackend,
) -> None:
    """``dragoman hosted webhooks log KEY_ID [--json]`` reads the delivery log of the configured database
    (``dragoman hosted migrate`` makes it: a SQLite file in the data folder, or DRAGOMAN_DB_URL's)."""
    from dragoman.cli.main import main

    monkeypatch.setenv("DRAGOMAN_HOSTED_DIR", str(tmp_path / "hosted"))
    url = db_backend.url(tmp_path / "hosted", empty=True)
    if db_backend.is_postgres:
        monkeypatch.setenv("DRAGOMAN_DB_URL", url)
    assert main(["hosted", "migrate"]) == 0
    db = Database(url)
    try:
        key_id = _key(db, receiver)
        assert main(["hosted", "webhooks", "log", key_id]) == 0
        assert "no webhook deliveries" in capsys.readouterr().out
        receiver.script["/cli"] = [503, 204]
        event_id = _enqueue(db, key_id, receiver.url("/cli"))
        dispatcher = webhooks.WebhookDispatcher(db, HostedSettings(webhooks_allow_private=True))
        try:
            now = now_ms()
            dispatcher.deliver_due(now)
            dispatcher.deliver_due(now + 3_600_000)
        finally:
            dispatcher.close()
    finally:
        db.dispose()
    capsys.readouterr()
    assert main(["hosted", "webhooks", "log", key_id, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["attempt"], r["status_code"], r["event_id"]) for r in rows] == [
        (2, 204, event_id),
        (1, 503, event_id),
    ]
    assert main(["hosted", "webhooks", "log", key_id]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and "attempt 2  204" in lines[0] and "attempt 1  503" in lines[1]
    assert main(["hosted", "webhooks", "log", "000000000000"]) != 0  # an unknown key is an error
    assert "no key" in capsys.readouterr().err
