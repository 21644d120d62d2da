"""The front door with ``DRAGOMAN_DISPATCH=procrastinate`` (issue 13): no in-process runner and no webhook
dispatcher in the API process; each accepted job gets its Procrastinate job in the request's transaction
(a refused one gets none); a ``dragoman hosted worker`` process runs them and delivers their webhooks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from db_support import DbBackend
from hosted_support import StartHosted
from sqlalchemy import text
from support import needs_apertium

from dragoman.service import accounts, dispatch
from dragoman.service.db import Database
from dragoman.testing.postgres import PostgresServer
from dragoman.translation.engine import Engine

pytestmark = [needs_apertium, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def pg_url(postgres_server: PostgresServer, tmp_path: Path) -> Iterator[str]:
    backend = DbBackend("postgresql", postgres_server)
    url = backend.url(tmp_path)
    db = Database(url)
    try:
        dispatch.apply_schema(db)
    finally:
        db.dispose()
    yield url
    backend.close()


def procrastinate_jobs(db: Database) -> list[dict[str, Any]]:
    with db.read() as conn:
        rows = conn.execute(text("SELECT queue_name, args, status FROM procrastinate_jobs ORDER BY id"))
        return [dict(r) for r in rows.mappings()]


def wait_done(client: httpx.Client, job_id: str, timeout: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body: dict[str, Any] = client.get(f"/api/v1/jobs/{job_id}").json()
        if body["status"] in ("done", "failed", "canceled") or time.monotonic() > deadline:
            return body
        time.sleep(0.2)


def test_the_front_door_defers_and_a_worker_process_runs_and_delivers(
    start_hosted: StartHosted, hosted_engine: tuple[Engine, Path], pg_url: str, tmp_path: Path
) -> None:
    received: list[bytes] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(self.rfile.read(int(self.headers.get("content-length", "0"))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hook = f"http://127.0.0.1:{server.server_port}/hook"

    hosted = start_hosted(db_url=pg_url, dispatch="procrastinate")
    state = hosted.app.state
    assert state.runner is None and state.dispatcher is None
    with hosted.client() as client:
        r = client.post(
            "/api/v1/translate",
            json={"text": "Hello world", "src": "en", "targets": ["es", "de"], "webhook": hook},
        )
        assert r.status_code == 202, r.text
        job_ids = r.json()["job_ids"]
        rows = procrastinate_jobs(hosted.db)
        assert sorted(row["args"]["job_id"] for row in rows) == sorted(job_ids)
        assert {row["queue_name"] for row in rows} == {"translate"}

        poor = accounts.create_account(hosted.db, plan="pro", credits=0)
        key = accounts.create_key(hosted.db, poor.id).key
        with hosted.client(key) as broke:
            refused = broke.post("/api/v1/translate", json={"text": "x" * 600, "src": "en", "tgt": "es"})
        assert refused.status_code == 402
        assert len(procrastinate_jobs(hosted.db)) == 2  # the refused job's transaction deferred nothing

        time.sleep(1.0)
        assert {client.get(f"/api/v1/jobs/{j}").json()["status"] for j in job_ids} == {"queued"}  # no runner

        _, root = hosted_engine
        env = {
            **os.environ,
            "DRAGOMAN_DB_URL": pg_url,
            "DRAGOMAN_DISPATCH": "procrastinate",
            "DRAGOMAN_HOSTED_DIR": str(hosted.settings.hosted.data_dir),
            "DRAGOMAN_WEBHOOKS_ALLOW_PRIVATE": "1",
            "DRAGOMAN_PACKS_DIR": str(root / "packs"),
            "DRAGOMAN_STATE_DIR": str(tmp_path / "worker-state"),
            "DRAGOMAN_APERTIUM": "1",
        }
        worker = subprocess.Popen(
            [sys.executable, "-m", "dragoman.cli", "hosted", "worker", "--queues", "translate,webhooks"],
            env=env,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            done = [wait_done(client, j) for j in job_ids]
            deadline = time.monotonic() + 30
            while len(received) < 3 and time.monotonic() < deadline:  # job.done twice, batch.completed
                time.sleep(0.1)
        finally:
            worker.send_signal(signal.SIGTERM)
            _, err = worker.communicate(timeout=60)
    server.shutdown()
    server.server_close()
    assert [j["status"] for j in done] == ["done", "done"], (done, err.decode(errors="replace")[-3000:])
    assert worker.returncode == 0, err.decode(errors="replace")[-3000:]
    events = sorted(
        b'"event":"batch.completed"' in body or b'"event": "batch.completed"' in body for body in received
    )
    assert len(received) == 3 and events == [False, False, True], received
