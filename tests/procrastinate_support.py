"""A Procrastinate worker with a slow stand-in handler, for the fault tests of
tests/service/test_procrastinate.py (run as a script: ``python tests/procrastinate_support.py QUEUES``,
configured by the ``DRAGOMAN_*`` variables).

The handler of ``translate`` jobs works in ``params["chunks"]`` chunks of ``params["chunk_s"]`` seconds,
checks for cancellation between chunks (``JobContext.check``), reports progress, and appends one line per
chunk to the file ``params["marks"]`` (``<pid> <chunk>``), so a test sees which process ran which chunks
and when work stops. Its first ``params["fail_attempts"]`` attempts raise (an engine error: retried).
"""

from __future__ import annotations

import os
import sys
import time

from dragoman.progress import JobContext
from dragoman.service.jobs import JobOutcome, JobRecord
from dragoman.service.storage import Storage


def slow_handler(job: JobRecord, context: JobContext, storage: Storage) -> JobOutcome:
    chunks = int(job.params.get("chunks", 10))
    pause = float(job.params.get("chunk_s", 0.2))
    marks = job.params.get("marks")
    if job.attempts <= int(job.params.get("fail_attempts", 0)):
        raise RuntimeError("a flaky engine")  # retried by the runner after its back-off
    for n in range(chunks):
        context.check()
        time.sleep(pause)
        if marks:
            with open(str(marks), "a", encoding="utf-8") as out:
                out.write(f"{os.getpid()} {n}\n")
        context.report(n + 1, chunks, "chunk")
    context.check()
    return JobOutcome(result=f"slow:{job.params.get('text', '')}")


def main(argv: list[str]) -> int:
    from dragoman.service import dispatch, worker
    from dragoman.settings import Settings

    queues = dispatch.parse_queues(argv[0] if argv else "translate,maintenance")
    return worker.run_worker(
        Settings.from_env(),
        queues,
        handlers={"translate": slow_handler},
        maintenance_s=1,
        purge_s=3600,
        stalled_s=3,
        heartbeat_s=1,
        graceful_s=5,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
