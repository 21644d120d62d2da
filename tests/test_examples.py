"""The examples run as a user runs them (subprocesses, from the repository root), as ``make demo`` does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import needs_apertium

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def _run(script: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRAGOMAN_")}
    return subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )


def test_hosted_client_needs_a_service() -> None:
    done = _run("hosted_client.py", timeout=60)
    assert done.returncode == 2
    assert "give --url and --key" in done.stderr


@pytest.mark.slow
@needs_apertium
def test_hosted_client_against_a_service_it_starts() -> None:
    done = _run("hosted_client.py", "--start", timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    lines = out.splitlines()
    assert lines[0].startswith("[start] account acct_")
    assert "[create] HTTP 202: job " in out
    assert any(line.startswith("[poll] job ") and ": done, 100%" in line for line in lines)
    assert "[result] " in out and "credits charged" in out
    assert "canceled, credits_refunded " in out
    refunded = next(line for line in lines if "credits_refunded" in line)
    assert int(refunded.rsplit(" ", 1)[1]) > 0
    assert "[export] docx: HTTP 200" in out and "[export] pdf: HTTP 200" in out
    assert "(NOT a" not in out
    assert "[webhook] job.done for job " in out and "signature verified" in out
    assert "[done] every step ok" in out
    assert lines[-1].startswith("[stop] service stopped")
