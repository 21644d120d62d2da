"""The pieces under the MCP tools, in process: roots, and the JobContext adapter of a tool call."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

pytestmark = pytest.mark.anyio


def test_roots_from_uris_takes_local_file_uris_only(tmp_path: Path) -> None:
    from dragoman.server.paths import allowed_roots, roots_from_uris

    uris = [(tmp_path / "with space").as_uri(), "https://example.com/x", "file://otherhost/x"]
    assert roots_from_uris(uris) == [tmp_path / "with space"]
    assert allowed_roots(None, (tmp_path,)) == (tmp_path.resolve(),)
    assert allowed_roots([tmp_path], (tmp_path,)) == (tmp_path.resolve(),)
    assert allowed_roots(None, ()) == () and allowed_roots([], ()) == ()


async def test_job_context_forwards_in_order_and_stops_the_worker_on_cancel() -> None:
    from dragoman.errors import Cancelled
    from dragoman.server.mcp._runtime import job_context

    reports: list[float] = []
    steps: list[int] = []

    async def report(progress: float, total: float | None, message: str | None) -> None:
        reports.append(progress)

    context = job_context(report)
    assert not context.cancel.cancelled  # read off the call's worker thread: only an explicit cancel counts

    def worker() -> None:
        for step in (1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20):
            steps.append(step)
            context.report(step, 20, "step")
            time.sleep(0.02)

    stopped: list[Cancelled] = []
    with anyio.move_on_after(0.1):
        try:
            await anyio.to_thread.run_sync(worker)
        except Cancelled as exc:
            stopped.append(exc)
    assert stopped and 0 < len(steps) < 20  # the worker stopped at its next check after the cancellation
    assert context.cancel.reason == "the client cancelled the call"
    assert reports == sorted(set(reports)) and reports[0] == 1
