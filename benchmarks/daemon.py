"""Load on the local daemon from a second process, next to the engine's in-process rate, in one run.

    .venv/bin/python benchmarks/daemon.py                      # Apertium eng->spa, 1/8/32 clients, 5 s each
    .venv/bin/python benchmarks/daemon.py --pack tiny --seconds 10
    .venv/bin/python benchmarks/daemon.py --libretranslate http://127.0.0.1:5000   # the same load on LT

The daemon runs as ``dragoman serve --port 0`` in a subprocess (its port read from its PID/port file);
this process is the client: N asyncio workers, each with one keep-alive connection, send short single
texts for a fixed time. The in-process rate is ``Engine.translate`` on N threads of this process, same
texts, same time. Overhead = 1 - http_rate / in_process_rate. Packs: ``apertium`` (system eng->spa, real
translations) or ``tiny`` (a tiny CTranslate2 pack en->de built in a temporary directory); no user data is
read or written (temporary packs, glossary and state directories).

With ``--libretranslate URL`` the same client load also goes to a LibreTranslate server the user started on
the same Argos pack (``POST /translate {"q", "source", "target"}``); its rate is printed beside ours.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

TEXTS = [
    "The house is red.",
    "Where is the train station?",
    "I would like a cup of coffee, please.",
    "The meeting starts at ten o'clock.",
    "My brother lives in a small town near the sea.",
    "Please send me the report by Friday.",
    "The weather is nice today.",
    "Thank you very much for your help.",
    "The children are playing in the garden.",
    "How much does this book cost?",
    "We are going to the cinema tonight.",
    "The dog sleeps under the table.",
]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Result:
    def __init__(self, done: int, seconds: float, latencies: list[float], errors: int) -> None:
        self.rate = done / seconds if seconds else 0.0
        self.p50 = percentile(latencies, 0.50) * 1000
        self.p99 = percentile(latencies, 0.99) * 1000
        self.errors = errors


def in_process(call: Callable[[str], object], clients: int, seconds: float) -> Result:
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def worker(offset: int) -> None:
        i = offset
        mine: list[float] = []
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            call(TEXTS[i % len(TEXTS)])
            mine.append(time.perf_counter() - t0)
            i += 1
        with lock:
            latencies.extend(mine)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(worker, range(clients)))
    return Result(len(latencies), time.perf_counter() - started, latencies, 0)


class _Connection:
    """One keep-alive HTTP/1.1 connection with the least client-side work: on a small machine the client
    shares the CPUs with the daemon, and a heavy client (httpx costs ~1 ms of CPU per request) would be
    measured instead of the daemon. Answers are read whole (headers, Content-Length body) and parsed."""

    def __init__(self, host: str, port: int, headers: dict[str, str]) -> None:
        self.host, self.port = host, port
        self.extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, payload: dict[str, object]) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        body = json.dumps(payload).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{self.extra}\r\n"
        ).encode()
        self.writer.write(head + body)
        raw = await self.reader.readuntil(b"\r\n\r\n")
        status = int(raw.split(b" ", 2)[1])
        length = 0
        for line in raw.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        data = await self.reader.readexactly(length)
        json.loads(data)
        return status, data

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            await self.writer.wait_closed()


async def over_http(
    url: str, clients: int, seconds: float, body: Callable[[str], dict[str, object]], headers: dict[str, str]
) -> Result:
    split = httpx.URL(url)
    host, port = split.host, split.port or 80
    latencies: list[float] = []
    errors = 0
    stop = time.perf_counter() + seconds

    async def worker(offset: int) -> None:
        nonlocal errors
        conn = _Connection(host, port, headers)
        i = offset
        try:
            while time.perf_counter() < stop:
                t0 = time.perf_counter()
                status, _ = await conn.post("/translate", body(TEXTS[i % len(TEXTS)]))
                if status != 200:
                    errors += 1
                latencies.append(time.perf_counter() - t0)
                i += 1
        finally:
            await conn.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(clients)))
    return Result(len(latencies), time.perf_counter() - started, latencies, errors)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc; its Apertium children excluded), or nan."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(f) for f in fields[11:13]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def start_daemon(env: dict[str, str], workers: int) -> tuple[subprocess.Popen[bytes], str]:
    from dragoman.server.daemon.portfile import daemon_file
    from dragoman.settings import Settings

    path = daemon_file(Settings.from_env(env))
    cmd = [sys.executable, "-m", "dragoman.cli", "serve", "--port", "0", "--workers", str(workers)]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the daemon did not start (exit {proc.poll()})")
        time.sleep(0.05)
    info = json.loads(path.read_text(encoding="utf-8"))
    url = f"http://127.0.0.1:{info['port']}"
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("the daemon does not answer /health")
        time.sleep(0.05)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pack", choices=["apertium", "tiny"], default="apertium")
    parser.add_argument("--clients", default="1,8,32", help="comma-separated client counts")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per measurement")
    parser.add_argument(
        "--workers", type=int, default=min(4, os.cpu_count() or 1), help="daemon engine threads"
    )
    parser.add_argument("--libretranslate", metavar="URL", help="also load a running LibreTranslate server")
    args = parser.parse_args()
    counts = [int(c) for c in args.clients.split(",")]

    from dragoman.settings import Settings
    from dragoman.testing.tinypack import build_argos_pack
    from dragoman.translation.engine import Engine
    from dragoman.translation.types import TranslateOptions

    tmp = Path(tempfile.mkdtemp(prefix="dragoman-bench-"))
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("DRAGOMAN_") and k != "SERVICE_SERVE_TOKEN"
    }
    env.update(
        DRAGOMAN_PACKS_DIR=str(tmp / "packs"),
        DRAGOMAN_GLOSSARY=str(tmp / "glossary.json"),
        DRAGOMAN_STATE_DIR=str(tmp / "state"),
    )
    source, target = ("en", "es") if args.pack == "apertium" else ("en", "de")
    if args.pack == "tiny":
        build_argos_pack(tmp / "packs" / "translate-en_de", "en", "de")
    else:
        env["DRAGOMAN_APERTIUM"] = "1"
    settings = Settings.from_env(env)

    def body(text: str) -> dict[str, object]:
        return {"text": text, "source": source, "target": target}

    print(
        f"pack {args.pack} ({source}->{target}), {args.seconds:g} s per row, daemon workers {args.workers}, "
        f"{os.cpu_count()} CPUs, texts of {min(map(len, TEXTS))}-{max(map(len, TEXTS))} characters"
    )
    proc, url = start_daemon(env, args.workers)
    rows: list[tuple[int, Result, Result, Result | None, float]] = []
    try:
        with Engine(settings) as engine:

            def call(text: str) -> object:
                return engine.translate(text, TranslateOptions(target, source=source))

            in_process(call, 2, 1.0)  # warm-up: load the pack, start pipelines
            asyncio.run(over_http(url, 2, 1.0, body, {}))
            for clients in counts:
                local = in_process(call, clients, args.seconds)
                cpu0 = cpu_seconds(proc.pid)
                remote = asyncio.run(over_http(url, clients, args.seconds, body, {}))
                done = remote.rate * args.seconds
                cpu_ms = (cpu_seconds(proc.pid) - cpu0) / done * 1000 if done else float("nan")
                lt = None
                if args.libretranslate:
                    lt = asyncio.run(
                        over_http(
                            args.libretranslate,
                            clients,
                            args.seconds,
                            lambda t: {"q": t, "source": source, "target": target, "format": "text"},
                            {},
                        )
                    )
                rows.append((clients, local, remote, lt, cpu_ms))
    finally:
        proc.terminate()
        proc.wait(30)

    print(
        f"{'clients':>7} | {'in-process req/s':>16} {'p50 ms':>7} {'p99 ms':>7} | {'HTTP req/s':>10} "
        f"{'p50 ms':>7} {'p99 ms':>7} {'errors':>6} {'daemon CPU ms/req':>17} | {'overhead':>8}"
        + (" | LibreTranslate req/s p50 p99" if args.libretranslate else "")
    )
    for clients, local, remote, lt, cpu_ms in rows:
        overhead = (1 - remote.rate / local.rate) * 100 if local.rate else float("nan")
        line = (
            f"{clients:>7} | {local.rate:>16.1f} {local.p50:>7.1f} {local.p99:>7.1f} | {remote.rate:>10.1f} "
            f"{remote.p50:>7.1f} {remote.p99:>7.1f} {remote.errors:>6} {cpu_ms:>17.2f} | {overhead:>7.1f}%"
        )
        if lt is not None:
            line += f" | {lt.rate:>10.1f} {lt.p50:>7.1f} {lt.p99:>7.1f} ({lt.errors} errors)"
        print(line)
    eight = [r for r in rows if r[0] == 8]
    if eight:
        _, local, remote, _, _ = eight[0]
        verdict = "met" if remote.rate >= 0.8 * local.rate else "NOT met"
        print(f"target (HTTP overhead < 20% at 8 clients): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
