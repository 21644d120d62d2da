"""``make up`` / ``make down`` (issue 13): the scaled set-up on one machine — PostgreSQL, Redis, moto's S3,
two API processes and two workers — answers a job accepted by one API process and polled through the other,
and ``down`` leaves nothing running."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from support import needs_apertium

from dragoman.testing.cluster import Cluster, alive
from dragoman.testing.postgres import unavailable_reason as pg_missing
from dragoman.testing.redis_server import unavailable_reason as redis_missing

pytestmark = [needs_apertium, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def _cluster(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "dragoman.testing.cluster", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout


def test_up_translate_on_one_api_poll_on_the_other_then_down(tmp_path: Path) -> None:
    reason = pg_missing() or redis_missing()
    if reason:
        pytest.skip(f"make up needs PostgreSQL and Redis: {reason}")
    where = tmp_path / "cluster"
    shown = _cluster("up", "--dir", str(where))
    cluster = Cluster.load(where)
    try:
        roles = sorted(p.role for p in cluster.procs)
        assert roles == ["api", "api", "redis", "s3", "worker", "worker"], roles
        first, second = cluster.apis()
        assert first.url in shown and second.url in shown and cluster.key in shown
        headers = {"Authorization": f"Bearer {cluster.key}"}
        text = "The cat sleeps on the warm mat. " * 30  # past the sync bound: a job for a worker
        r = httpx.post(
            f"{first.url}/api/v1/translate",
            json={"text": text, "src": "en", "tgt": "es"},
            headers=headers,
            timeout=60,
        )
        assert r.status_code == 202 and r.json()["status"] == "queued", r.text
        job_id = r.json()["job_id"]
        deadline = time.monotonic() + 120
        while True:
            body = httpx.get(f"{second.url}/api/v1/jobs/{job_id}", headers=headers, timeout=30).json()
            if body["status"] in ("done", "failed", "canceled") or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert body["status"] == "done" and "gato" in body["result"].lower(), body
        usage = httpx.get(f"{second.url}/api/v1/usage", headers=headers, timeout=30)
        assert usage.status_code == 200, usage.text
        assert usage.json()["balance"] == 1_000_000 - body["credits"], usage.text  # charged once
    finally:
        pids = [p.pid for p in cluster.procs]
        pg_root = Path(cluster.pg["root"])
        stopped = _cluster("down", "--dir", str(where))
    assert "postgresql" in stopped
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in pids if alive(pid)]  # nothing left running
    assert not pg_root.exists() and not (where / "state.json").exists()
    assert "nothing to stop" in _cluster("down", "--dir", str(where))
