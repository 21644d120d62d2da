"""What the daemon's HTTP path costs, apart from any engine: the daemon's app over a stand-in engine vs a
bare Starlette route, side by side in one run.

    .venv/bin/python benchmarks/http_path.py                  # 8 clients, 7 rounds of 2 s a side, alternated
    .venv/bin/python benchmarks/http_path.py --clients 1 --sleep 0.5
    .venv/bin/python benchmarks/http_path.py --quick          # a smoke run

Both servers run in subprocesses of this script on uvicorn (httptools and uvloop when installed) and are
loaded by the same client as ``benchmarks/daemon.py``'s (N asyncio workers, one keep-alive connection
each, ``POST /translate`` with a short text). Their engine is the same stand-in: it sleeps ``--sleep``
milliseconds (the GIL released, as while Apertium's pipeline or a model works) and returns the text
reversed, so the CPU each server spends per request is its HTTP path's:

- **daemon**: the daemon's own app (``create_app``: the gate, the admission pool, the wire models, the
  access log on stderr in batches) in uvicorn with the daemon's connection bounds, as ``dragoman serve``
  runs it, with 2 engine places (``--workers``).
- **bare**: one Starlette route that reads the JSON body, calls the stand-in on a worker thread (anyio's,
  at most ``--workers`` at once) and answers JSON with ``json.dumps``: about the least an HTTP front door
  over a blocking engine can do in this stack.

Per side: requests per second (median and min-max of the rounds), the server's CPU per request (its own
process: user and system time from ``/proc``) and the client's. The difference of the CPU per request is
what the daemon's own code costs over the stack it stands on; the rates differ where the CPU runs short.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

import _harness as harness
from daemon import TEXTS, Result, cpu_seconds, over_http


def serve(kind: str, seconds: float, workers: int) -> None:
    """Run one side's server on a free loopback port, printing the port on stdout first."""
    from dragoman.server.daemon import app as daemon_app
    from dragoman.testing.fakes import SleepingEngine

    engine = SleepingEngine(seconds)
    sock = daemon_app.bind_socket("127.0.0.1", 0)
    print(sock.getsockname()[1], flush=True)
    if kind == "daemon":
        daemon_app._log_to_stderr()
        app = daemon_app.create_app(engine, None, max_workers=workers, queue_limit=64, request_timeout=60)
        daemon_app.uvicorn_server(app, 60).run(sockets=[sock])
        return
    import uvicorn
    from anyio import CapacityLimiter, to_thread
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from dragoman.translation.types import TranslateOptions

    limiter = CapacityLimiter(workers)

    async def translate(request: Request) -> Response:
        body = json.loads(await request.body())

        def call() -> dict[str, object]:
            options = TranslateOptions(body["target"], body.get("source"))
            return engine.translate(body["text"], options).to_dict()

        answer = await to_thread.run_sync(call, limiter=limiter)
        return Response(json.dumps(answer), media_type="application/json")

    app = Starlette(routes=[Route("/translate", translate, methods=["POST"])])
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", server_header=False)
    uvicorn.Server(config).run(sockets=[sock])


def start(kind: str, seconds: float, workers: int) -> tuple[subprocess.Popen[bytes], str]:
    cmd = [
        sys.executable,
        __file__,
        "--serve",
        kind,
        "--sleep",
        str(seconds * 1000),
        "--workers",
        str(workers),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.strip().isdigit():
        proc.kill()
        raise SystemExit(f"the {kind} server did not start (exit {proc.wait()})")
    url = f"http://127.0.0.1:{int(line)}"
    deadline = time.monotonic() + 30
    while True:  # until it answers
        try:
            result = asyncio.run(over_http(url, 1, 0.05, _body, {}))
            if result.done and not result.errors:
                return proc, url
        except OSError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"the {kind} server does not answer")
        time.sleep(0.1)


def _body(text: str) -> dict[str, object]:
    return {"text": text, "source": "en", "target": "es"}


def main(argv: list[str] | None = None) -> int:
    parser = harness.parser(__doc__, rounds=7, quick_rounds=2)
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (8)")
    parser.add_argument("--sleep", type=float, default=1.0, help="the stand-in's milliseconds a text (1)")
    parser.add_argument("--workers", type=int, default=2, help="engine threads at once, both sides (2)")
    parser.add_argument("--seconds", type=float, default=None, help="seconds a side's sample (2; 0.3 quick)")
    parser.add_argument("--serve", choices=["daemon", "bare"], help=argparse.SUPPRESS)  # a side's server
    args = parser.parse_args(argv)
    seconds = args.sleep / 1000
    if args.serve:
        serve(args.serve, seconds, args.workers)
        return 0
    rounds = harness.rounds_of(args)
    step = args.seconds or (0.3 if args.quick else 2.0)
    print(
        f"stand-in engine sleeping {args.sleep:g} ms a text, {args.workers} engine threads a side, "
        f"{args.clients} clients, {rounds} alternated rounds of {step:g} s, {os.cpu_count()} CPUs; "
        f"{len(TEXTS)} distinct texts"
    )
    servers = {kind: start(kind, seconds, args.workers) for kind in ("daemon", "bare")}
    results: dict[str, list[Result]] = {kind: [] for kind in servers}
    client_cpu: dict[str, list[float]] = {kind: [] for kind in servers}

    def side(kind: str) -> Callable[[], float]:
        proc, url = servers[kind]

        def run() -> float:
            server0, client0 = cpu_seconds(proc.pid), time.process_time()
            result = asyncio.run(over_http(url, args.clients, step, _body, {}))
            result.cpu = cpu_seconds(proc.pid) - server0
            client_cpu[kind].append(time.process_time() - client0)
            results[kind].append(result)
            return result.rate

        return run

    try:
        times = harness.alternate_measured({kind: side(kind) for kind in servers}, rounds, warmup=1)
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(30)
    head = f"{'side':>7} | {'req/s':>22} {'p50 ms':>7} {'p99 ms':>7} {'errors':>6} | "
    print(head + "server CPU ms/req client CPU ms/req")
    per_request: dict[str, float] = {}
    for kind in servers:
        merged = Result.merge(results[kind][1:])  # the warm-up round dropped, as in the rates
        per_request[kind] = merged.cpu_ms
        client = sum(client_cpu[kind][1:]) / max(1, merged.done) * 1000
        print(
            f"{kind:>7} | {times.spread(kind).text('.0f'):>22} {merged.p50:>7.2f} {merged.p99:>7.2f} "
            f"{merged.errors:>6} | {merged.cpu_ms:>17.3f} {client:>17.3f}"
        )
    print(
        f"the daemon's own code: {per_request['daemon'] - per_request['bare']:.3f} ms of CPU a request over "
        f"the bare route; rates daemon / bare {harness.ratio_text(times.ratio('daemon', 'bare'))}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
