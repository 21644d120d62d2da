"""The hosted service scaled out on this machine (issue 13): job throughput with 1, 2 and 4 workers, API
requests per second with 1 and 2 API processes, and the same load on the embedded mode, in one run.

    .venv/bin/python benchmarks/scale.py                  # 3 alternated rounds, 48 jobs, 8 clients x 2 s
    .venv/bin/python benchmarks/scale.py --quick          # a smoke run: 1 round, 12 jobs, 4 clients x 1 s

The scaled set-up is ``make up``'s (:class:`dragoman.testing.cluster.Cluster`): PostgreSQL, Redis and
moto's S3 on loopback, two ``dragoman hosted serve`` processes (``DRAGOMAN_DISPATCH=procrastinate``) and as
many ``dragoman hosted worker --queues translate`` processes as a side asks for (started, warmed up with a
few jobs, then stopped, for each side of each round). The embedded mode is one ``dragoman hosted serve`` on
SQLite with its in-process runner (``DRAGOMAN_RUNNER_WORKERS``, default 2 threads). Every process runs in
a temporary directory (no user data read or written) and translates with Apertium eng->spa.

* **Jobs**: ``--jobs`` texts of about 2,000 characters each (40 distinct sentences) are submitted over v1
  (8 submitters, a 202 each) and the time runs from the first submission to the last job's ``finished_ms``
  (read from the database): jobs/s. Sides, alternated round by round: ``embedded``, ``1 worker``,
  ``2 workers``, ``4 workers``; the ratio to one worker is the median of each round's own pair.
* **API**: ``--clients`` asyncio clients (one keep-alive connection each) send short texts to
  ``POST /api/v1/translate`` (translated in the request: authentication, the 60/min limiter, the ledger,
  a done job row) for ``--seconds``: req/s, p50 and p99. Sides: ``embedded`` (one process, SQLite, memory
  limiter), ``1 API`` and ``2 APIs`` (PostgreSQL, the limiter on Redis; with two, half the clients on each).
  v1 keys come from a pool, each serving at most 50 requests, so the 60/min limit is never met.

The machine's core count is printed: every process here shares it, so the ratios say how far one machine's
cores carry more processes, not what more machines would give (see the README's "Scaling out").
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _harness as harness
import httpx
from daemon import Connection, Result
from hosted import KEY_USES, PLENTY, KeyPool, job_texts, load, start_hosted

#: Jobs a started worker runs before a side is timed (loads Apertium's pipelines in that process).
WARM_JOBS_PER_WORKER = 2


def wait_jobs(db: Any, ids: list[str], timeout: float = 600) -> tuple[int, int]:
    """Waits until every job of ``ids`` is over; (last finished_ms, jobs not done)."""
    from sqlalchemy import select

    from dragoman.service.db import jobs as jobs_table

    query = select(jobs_table.c.status, jobs_table.c.finished_ms).where(jobs_table.c.id.in_(ids))
    deadline = time.monotonic() + timeout
    while True:
        with db.read() as conn:
            states = conn.execute(query).all()
        if len(states) == len(ids) and all(s in ("done", "failed", "canceled") for s, _ in states):
            return max(int(f) for _, f in states), sum(1 for s, _ in states if s != "done")
        if time.monotonic() > deadline:
            raise SystemExit(f"the jobs did not finish within {timeout:g} s")
        time.sleep(0.02)


async def submit_all(url: str, texts: list[str], pool: KeyPool) -> list[str]:
    split = httpx.URL(url)
    pending = list(texts)
    ids: list[str] = []

    async def submitter() -> None:
        conn = Connection(split.host, split.port or 80)
        try:
            while pending:
                text = pending.pop()
                status, data = await conn.post(
                    "/api/v1/translate", {"text": text, "src": "en", "tgt": "es"}, pool.take()
                )
                if status != 202:
                    raise SystemExit(f"a job was refused: HTTP {status} {data[:300]!r}")
                ids.append(json.loads(data)["job_id"])
        finally:
            await conn.close()

    await asyncio.gather(*(submitter() for _ in range(8)))
    return ids


def main(argv: list[str] | None = None) -> int:
    parser = harness.parser(__doc__, rounds=3, quick_rounds=1)
    parser.add_argument(
        "--jobs", type=int, default=None, help="jobs of ~2,000 characters a side (48; 12 quick)"
    )
    parser.add_argument("--clients", type=int, default=None, help="API clients (8; 4 with --quick)")
    parser.add_argument("--seconds", type=float, default=None, help="seconds of one API side (2; 1 quick)")
    args = parser.parse_args(argv)
    rounds = harness.rounds_of(args)
    n_jobs = args.jobs or (12 if args.quick else 48)
    clients = args.clients or (4 if args.quick else 8)
    step = args.seconds or (1.0 if args.quick else 2.0)

    from dragoman.service import accounts, migrate
    from dragoman.service.db import Database
    from dragoman.testing.cluster import Cluster
    from dragoman.testing.postgres import unavailable_reason as pg_missing
    from dragoman.testing.redis_server import unavailable_reason as redis_missing

    missing = pg_missing() or redis_missing() or (None if shutil.which("apertium") else "Apertium is missing")
    if missing:
        raise SystemExit(f"benchmarks/scale.py needs PostgreSQL, Redis and Apertium (make setup): {missing}")
    for name in [k for k in os.environ if k.startswith("DRAGOMAN_")]:
        del os.environ[name]  # this run's own settings only
    tmp = Path(tempfile.mkdtemp(prefix="dragoman-bench-scale-"))
    isolated = {
        "DRAGOMAN_PACKS_DIR": str(tmp / "packs"),
        "DRAGOMAN_GLOSSARY": str(tmp / "glossary.json"),
        "DRAGOMAN_STATE_DIR": str(tmp / "state"),
        "DRAGOMAN_APERTIUM": "1",
    }
    embedded_env = {**os.environ, **isolated, "DRAGOMAN_HOSTED_DIR": str(tmp / "embedded")}
    cores = os.cpu_count()
    print(
        f"{cores} CPU cores (os.cpu_count(); every process below shares them), Apertium eng->spa, "
        f"{rounds} alternated round(s); jobs: {n_jobs} of ~2,000 characters a side; API: {clients} clients "
        f"x {step:g} s a side, v1 texts of at most 500 characters (translated in the request)"
    )

    cluster = Cluster(dir=tmp / "cluster", extra_env=isolated)
    embedded_proc = None
    dbs: list[Any] = []
    try:
        cluster.up(apis=2, workers=0, key=False)
        embedded_proc, embedded_url = start_hosted(embedded_env)
        scaled_db = Database(cluster.db_url)
        embedded_db = Database(f"sqlite:///{tmp / 'embedded' / 'hosted.sqlite3'}")
        dbs += [scaled_db, embedded_db]
        migrate.upgrade(embedded_db)
        pools = {}
        for name, db in (("scaled", scaled_db), ("embedded", embedded_db)):
            account = accounts.create_account(db, name="benchmark", plan="pro", credits=PLENTY)
            pools[name] = KeyPool(db, account.id)
            pools[name].make(4)
        api1, api2 = (p.url for p in cluster.apis())
        round_no = [0]

        def batch(url: str, db: Any, pool: KeyPool, n: int) -> float:
            round_no[0] += 1
            texts = job_texts(n, seed=round_no[0])
            pool.ensure(n + 8 * KEY_USES)
            started = time.time()
            ids = asyncio.run(submit_all(url, texts, pool))
            last_ms, failed = wait_jobs(db, ids)
            if failed:
                raise SystemExit(f"{failed} jobs not done")
            return n / (last_ms / 1000 - started)

        def with_workers(n_workers: int) -> Callable[[], float]:
            def run() -> float:
                procs = [cluster.start_worker(queues="translate") for _ in range(n_workers)]
                try:
                    deadline = time.monotonic() + 120
                    for proc in procs:
                        while "dragoman hosted worker" not in Path(proc.log).read_text(errors="replace"):
                            if time.monotonic() > deadline:
                                raise SystemExit(f"a worker did not start: {proc.log}")
                            time.sleep(0.1)
                    batch(api1, scaled_db, pools["scaled"], WARM_JOBS_PER_WORKER * n_workers)
                    return batch(api1, scaled_db, pools["scaled"], n_jobs)
                finally:
                    for proc in procs:
                        cluster.stop(proc)

            return run

        def embedded_jobs() -> float:
            return batch(embedded_url, embedded_db, pools["embedded"], n_jobs)

        batch(embedded_url, embedded_db, pools["embedded"], 4)  # warm the embedded runner's engine
        job_sides = {
            "embedded": embedded_jobs,
            "1 worker": with_workers(1),
            "2 workers": with_workers(2),
            "4 workers": with_workers(4),
        }
        job_times = harness.alternate_measured(job_sides, rounds)

        def api_side(name: str, urls: list[str], parts: dict[str, list[Result]]) -> Callable[[], float]:
            pool = pools["embedded" if name == "embedded" else "scaled"]

            def body(text: str) -> dict[str, object]:
                return {"text": text, "src": "en", "tgt": "es"}

            def run() -> float:
                pool.ensure(int(2 * 400 * step) + clients * KEY_USES)
                share = [clients // len(urls) + (i < clients % len(urls)) for i in range(len(urls))]

                async def all_urls() -> list[Result]:
                    return await asyncio.gather(
                        *(
                            load(u, "/api/v1/translate", c, step, body, lambda w: pool.take())
                            for u, c in zip(urls, share, strict=True)
                        )
                    )

                got = asyncio.run(all_urls())
                merged = Result(
                    sum(r.done for r in got),
                    max(r.seconds for r in got),
                    [x for r in got for x in r.latencies],
                    sum(r.errors for r in got),
                )
                parts[name].append(merged)
                return merged.rate

            return run

        api_parts: dict[str, list[Result]] = {"embedded": [], "1 API": [], "2 APIs": []}
        urls = {"embedded": [embedded_url], "1 API": [api1], "2 APIs": [api1, api2]}
        for name, where in urls.items():  # warm-up: pipelines, caches, pools (figures dropped)
            api_side(name, where, {name: []})()
        api_times = harness.alternate_measured(
            {name: api_side(name, where, api_parts) for name, where in urls.items()}, rounds
        )
    finally:
        if embedded_proc is not None:
            embedded_proc.terminate()
            embedded_proc.wait(30)
        for db in dbs:
            db.dispose()
        cluster.down()
        shutil.rmtree(tmp, ignore_errors=True)

    print("jobs/s: median (min-max) of the rounds; ratios: median (range) of each round's own pair")
    print(f"{'jobs':>10} | {'jobs/s':>22} | {'/ 1 worker':>30}")
    for name in job_sides:
        ratio = "-" if name == "1 worker" else harness.ratio_text(job_times.ratio(name, "1 worker"))
        print(f"{name:>10} | {job_times.spread(name).text('.2f'):>22} | {ratio:>30}")
    print(f"{'API':>10} | {'req/s':>22} {'p50 ms':>7} {'p99 ms':>7} {'errors':>6} | {'/ 1 API':>30}")
    for name, parts in api_parts.items():
        merged = Result.merge(parts)
        ratio = "-" if name == "1 API" else harness.ratio_text(api_times.ratio(name, "1 API"))
        print(
            f"{name:>10} | {api_times.spread(name).text('.1f'):>22} {merged.p50:>7.1f} {merged.p99:>7.1f} "
            f"{merged.errors:>6} | {ratio:>30}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
