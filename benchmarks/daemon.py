"""Load on the local daemon from a second process, next to the engine's in-process rate, in one run.

    .venv/bin/python benchmarks/daemon.py                      # Apertium eng->spa, 1/8/32 clients
    .venv/bin/python benchmarks/daemon.py --pack tiny --rounds 9 --seconds 2
    .venv/bin/python benchmarks/daemon.py --libretranslate http://127.0.0.1:5000   # the same load on LT
    .venv/bin/python benchmarks/daemon.py --quick              # a smoke run: 1 and 8 clients, short rounds
    .venv/bin/python benchmarks/daemon.py --pack base --peers  # and LibreTranslate on the same base pack
    .venv/bin/python benchmarks/daemon.py --pack base --batching-off --clients 1,8   # the batcher's gain

The daemon runs as ``dragoman serve --port 0`` in a subprocess (its port read from its PID/port file);
this process is the client: N asyncio workers, each with one keep-alive connection, send short single
texts (64 distinct sentences, in turn) for a fixed time. The in-process rate is ``Engine.translate`` on N
threads of this process, same texts, same time. Per row, the sides alternate round by round (in-process,
HTTP[, batch][, batching off][, LibreTranslate], in-process, HTTP, ...), each a sample of ``--seconds``, so
that other load on the machine weighs on all alike; rates are medians with their min-max, overhead = 1 -
http_rate / in_process_rate of each round's pair, shown as the median over the rounds with their range.
With a CTranslate2 pack, the engine's in-process *batch* rate is one more side: the 64 texts in one
``Engine.translate_batch`` call, texts per second (what the daemon's dynamic batcher aims at), and the
daemon's mean batch size in each row is read from ``/health`` (batches and segments the batcher formed).
``--batching-off`` adds a second daemon started with ``DRAGOMAN_BATCHING=0`` (every request its own backend
call: the daemon before the batcher) as one more side. CPU per request is measured too:
the engine's in this process, the daemon's (engine plus HTTP path; Apertium's processes excluded from
both) and the client's; the daemon's minus the in-process one is what the HTTP path costs, whatever the
machine's load. The header line says which HTTP parser and event loop uvicorn picks in this environment
(httptools and uvloop when installed, else h11 and asyncio). Packs: ``apertium`` (system eng->spa, real
translations), ``tiny`` (a tiny CTranslate2 pack en->de built in a temporary directory) or ``base`` (the
same at the size of a real Argos pack: 6+6 layers, 512 wide, int8, random weights); no user data is read or
written (temporary packs, glossary and state directories).

With ``--peers`` (a CTranslate2 pack) the same client load also goes to LibreTranslate 1.9.6 serving the
very same pack, started here from its own virtualenv (``build/peers-venv``, made on first use by
``benchmarks/_peers.py``; offline), twice: with its default settings and with threads matched to ours
(``--threads`` = our workers, CTranslate2's inter/intra threads = ours). With ``--libretranslate URL`` it
goes to a LibreTranslate server the user started on the same Argos pack (``POST /translate {"q", "source",
"target"}``). Each peer is one more side of every round; its rates and our HTTP rate's ratio to it (median
of the rounds' own ratios, with their range) are printed in a table of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
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

import _harness as harness
import _peers
import httpx

#: Distinct (a repeat within one batch would be translated once, flattering the batch rate) short sentences.
TEXTS = harness.unique_sentences(64)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Result:
    def __init__(self, done: int, seconds: float, latencies: list[float], errors: int) -> None:
        self.done, self.seconds, self.latencies, self.errors = done, seconds, latencies, errors
        self.cpu = float("nan")  # CPU seconds spent by the side measured

    @classmethod
    def merge(cls, parts: list[Result]) -> Result:
        merged = cls(
            sum(p.done for p in parts),
            sum(p.seconds for p in parts),
            [x for p in parts for x in p.latencies],
            sum(p.errors for p in parts),
        )
        merged.cpu = sum(p.cpu for p in parts)
        return merged

    @property
    def rate(self) -> float:
        return self.done / self.seconds if self.seconds else 0.0

    @property
    def p50(self) -> float:
        return percentile(self.latencies, 0.50) * 1000

    @property
    def p99(self) -> float:
        return percentile(self.latencies, 0.99) * 1000

    @property
    def cpu_ms(self) -> float:
        return self.cpu / self.done * 1000 if self.done else float("nan")


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


class Connection:
    """One keep-alive HTTP/1.1 connection with the least client-side work: on a small machine the client
    shares the CPUs with the daemon, and a heavy client (httpx costs ~1 ms of CPU per request) would be
    measured instead of the daemon. Answers are read whole (headers, Content-Length body) and parsed.
    ``headers`` go with every request; ``key`` (per request) adds a bearer Authorization header."""

    def __init__(self, host: str, port: int, headers: dict[str, str] | None = None) -> None:
        self.host, self.port = host, port
        self.extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, payload: dict[str, object], key: str | None = None) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        body = json.dumps(payload).encode()
        auth = f"Authorization: Bearer {key}\r\n" if key else ""
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{self.extra}{auth}\r\n"
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
        conn = Connection(host, port, headers)
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


def batching_counts(url: str) -> tuple[int, int]:
    """Batches and segments the daemon's dynamic batcher formed so far (from ``/health``)."""
    stats = httpx.get(f"{url}/health", timeout=10).json()["engine"].get("batching") or {}
    return int(stats.get("batches", 0)), int(stats.get("segments", 0))


def start_daemon(env: dict[str, str], workers: int) -> tuple[subprocess.Popen[bytes], str]:
    from dragoman.server.daemon.portfile import daemon_file
    from dragoman.settings import Settings

    path = daemon_file(Settings.from_env(env))
    path.unlink(missing_ok=True)  # a second daemon of the same state directory: wait for its own file
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


def main(argv: list[str] | None = None) -> int:
    parser = harness.parser(__doc__, rounds=7, quick_rounds=2)
    parser.add_argument("--pack", choices=["apertium", "tiny", "base"], default="apertium")
    parser.add_argument(
        "--clients", default=None, help="comma-separated client counts (1,8,32; 1,8 with --quick)"
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="seconds of one side's sample in a round (1; 0.3 with --quick)",
    )
    parser.add_argument(
        "--workers", type=int, default=min(4, os.cpu_count() or 1), help="daemon engine threads"
    )
    parser.add_argument("--libretranslate", metavar="URL", help="also load a running LibreTranslate server")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a DRAGOMAN_* setting for the daemons and the in-process engine alike "
        "(e.g. DRAGOMAN_INTER_THREADS=1); repeatable",
    )
    parser.add_argument(
        "--batching-off",
        action="store_true",
        help="also load a second daemon started with DRAGOMAN_BATCHING=0 (the engine's batcher off)",
    )
    parser.add_argument(
        "--peers",
        action="store_true",
        help="also load LibreTranslate on the same pack, started here from its own venv under build/ (made "
        "on first use), with its default settings and with threads matched to ours (not with apertium)",
    )
    args = parser.parse_args(argv)
    if args.peers and args.pack == "apertium":
        parser.error("--peers needs a CTranslate2 pack: --pack tiny or --pack base")
    rounds = harness.rounds_of(args)
    step = args.seconds or (0.3 if args.quick else 1.0)
    counts = [int(c) for c in (args.clients or ("1,8" if args.quick else "1,8,32")).split(",")]

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
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep or not name.startswith("DRAGOMAN_"):
            parser.error(f"--set takes DRAGOMAN_NAME=VALUE, got {item!r}")
        env[name] = value
    source, target = ("en", "es") if args.pack == "apertium" else ("en", "de")
    if args.pack != "apertium":
        pack = build_argos_pack(tmp / "packs" / "translate-en_de", "en", "de", size=args.pack)
    else:
        env["DRAGOMAN_APERTIUM"] = "1"
    settings = Settings.from_env(env)

    def body(text: str) -> dict[str, object]:
        return {"text": text, "source": source, "target": target}

    def lt_body(text: str) -> dict[str, object]:
        return {"q": text, "source": source, "target": target, "format": "text"}

    print(
        f"pack {args.pack} ({source}->{target}), {rounds} alternated rounds of {step:g} s per side and row, "
        f"daemon workers {args.workers}, {os.cpu_count()} CPUs, texts of "
        f"{min(map(len, TEXTS))}-{max(map(len, TEXTS))} characters; uvicorn with "
        f"{'httptools' if importlib.util.find_spec('httptools') else 'h11'} and "
        f"{'uvloop' if importlib.util.find_spec('uvloop') else 'asyncio'}"
        + (f"; set: {', '.join(args.set)}" if args.set else "")
    )
    peer_urls: dict[str, str] = {}
    if args.libretranslate:
        peer_urls["LibreTranslate"] = args.libretranslate
    stack = contextlib.ExitStack()
    if args.peers:
        peers = _peers.prepare(tmp / "peers", pack, source, target)
        threads = (settings.engine.inter_threads, settings.engine.intra_threads)
        peer_urls["LT default"] = stack.enter_context(
            _peers.libretranslate(peers.python, peers.env("default", threads), [source, target])
        )
        peer_urls["LT matched"] = stack.enter_context(
            _peers.libretranslate(
                peers.python, peers.env("matched", threads), [source, target], threads=args.workers
            )
        )
        print(
            f"LibreTranslate 1.9.6 from {peers.python.parent.parent}: default settings, and matched "
            f"(--threads {args.workers}, CTranslate2 inter_threads {threads[0]}, intra_threads {threads[1]})"
        )
    procs: list[subprocess.Popen[bytes]] = []
    try:
        off_url = ""
        if args.batching_off:
            off_proc, off_url = start_daemon({**env, "DRAGOMAN_BATCHING": "0"}, args.workers)
            procs.append(off_proc)
        proc, url = start_daemon(env, args.workers)
        procs.append(proc)
        with stack, Engine(settings) as engine:
            options = TranslateOptions(target, source=source)

            def call(text: str) -> object:
                return engine.translate(text, options)

            in_process(call, 2, 1.0)  # warm-up: load the pack, start pipelines
            asyncio.run(over_http(url, 2, 1.0, body, {}))
            if off_url:
                asyncio.run(over_http(off_url, 2, 1.0, body, {}))
            for peer_url in peer_urls.values():
                asyncio.run(over_http(peer_url, 2, 1.0, lt_body, {}))

            def batch_side() -> float:
                """The engine's batch rate: the 64 texts in one call, texts per second, for ``step``."""
                done, started = 0, time.perf_counter()
                while time.perf_counter() - started < step:
                    engine.translate_batch(TEXTS, options)
                    done += len(TEXTS)
                return done / (time.perf_counter() - started)

            def batch_of(clients: int) -> Callable[[], float]:
                """The engine's rate with ``clients`` texts in each call (the texts in turn), texts per
                second, for ``step``: what ``clients`` single-text callers give a batcher at most (a batch
                of them all per round trip), with no HTTP."""

                def run() -> float:
                    done, started = 0, time.perf_counter()
                    while time.perf_counter() - started < step:
                        start = done % len(TEXTS)
                        texts = (TEXTS * 2)[start : start + min(clients, len(TEXTS))]
                        engine.translate_batch(texts, options)
                        done += len(texts)
                    return done / (time.perf_counter() - started)

                return run

            def row(clients: int) -> tuple[int, Result, Result, dict[str, Result], float, harness.Rounds]:
                locals_: list[Result] = []
                remotes: list[Result] = []
                others: dict[str, list[Result]] = {name: [] for name in peer_urls}
                if off_url:
                    others["batching off"] = []
                client_cpu = 0.0
                formed = [0, 0]  # batches and segments of the daemon's batcher in this row

                def local_side() -> float:
                    cpu0 = time.process_time()
                    locals_.append(in_process(call, clients, step))
                    locals_[-1].cpu = time.process_time() - cpu0
                    return locals_[-1].rate

                def http_side() -> float:
                    nonlocal client_cpu
                    batches0, segments0 = batching_counts(url)
                    daemon0, cpu0 = cpu_seconds(proc.pid), time.process_time()
                    remotes.append(asyncio.run(over_http(url, clients, step, body, {})))
                    remotes[-1].cpu = cpu_seconds(proc.pid) - daemon0
                    client_cpu += time.process_time() - cpu0
                    batches1, segments1 = batching_counts(url)
                    formed[0] += batches1 - batches0
                    formed[1] += segments1 - segments0
                    return remotes[-1].rate

                def off_side() -> float:
                    others["batching off"].append(asyncio.run(over_http(off_url, clients, step, body, {})))
                    return others["batching off"][-1].rate

                def peer_side(name: str) -> Callable[[], float]:
                    def run() -> float:
                        others[name].append(
                            asyncio.run(over_http(peer_urls[name], clients, step, lt_body, {}))
                        )
                        return others[name][-1].rate

                    return run

                sides: dict[str, Callable[[], float]] = {"in-process": local_side, "http": http_side}
                if args.pack != "apertium":
                    sides["batch"] = batch_side
                    if clients < len(TEXTS):
                        sides["batch of N"] = batch_of(clients)
                if off_url:
                    sides["batching off"] = off_side
                sides.update((name, peer_side(name)) for name in peer_urls)
                times = harness.alternate_measured(sides, rounds)
                local, remote = Result.merge(locals_), Result.merge(remotes)
                client_ms = client_cpu / remote.done * 1000 if remote.done else float("nan")
                merged = {name: Result.merge(parts) for name, parts in others.items()}
                mean_batch[clients] = formed[1] / formed[0] if formed[0] else float("nan")
                return clients, local, remote, merged, client_ms, times

            mean_batch: dict[int, float] = {}
            rows = [row(clients) for clients in counts]
    finally:
        for running in procs:
            running.terminate()
            running.wait(30)

    print("rates: median (min-max) of the rounds; overhead: median (range) of the rounds' own pairs")
    print(
        f"{'clients':>7} | {'in-process req/s':>22} {'p50 ms':>7} {'p99 ms':>7} {'CPU ms/req':>10} | "
        f"{'HTTP req/s':>22} {'p50 ms':>7} {'p99 ms':>7} {'errors':>6} {'daemon CPU ms/req':>17} "
        f"{'client CPU ms/req':>17} | {'overhead (range)':>18} {'HTTP path CPU ms/req':>20}"
    )
    for clients, local, remote, _, client_ms, times in rows:
        overhead = times.paired("http", "in-process", lambda h, loc: 1 - h / loc if loc else float("nan"))
        line = (
            f"{clients:>7} | {times.spread('in-process').text('.1f'):>22} {local.p50:>7.1f} "
            f"{local.p99:>7.1f} {local.cpu_ms:>10.2f} | {times.spread('http').text('.1f'):>22} "
            f"{remote.p50:>7.1f} {remote.p99:>7.1f} {remote.errors:>6} {remote.cpu_ms:>17.2f} "
            f"{client_ms:>17.2f} | "
            f"{overhead.scaled(100).text('.0f', '%'):>18} {remote.cpu_ms - local.cpu_ms:>20.2f}"
        )
        print(line)
    if args.pack != "apertium" or args.batching_off:
        print(
            "the dynamic batcher, in the same rounds: the daemon's mean batch (segments per backend call, "
            "from /health), its rate against the engine's batch rate (64 texts in one call, texts/s), the "
            "engine's rate with N texts a call (N = clients: the most N single-text clients can give a "
            "batcher) and its share of the 64-text rate, and against the daemon with DRAGOMAN_BATCHING=0"
        )
        print(
            f"{'clients':>7} {'mean batch':>10} | {'batch texts/s':>22} {'HTTP / batch':>22} | "
            f"{'batch of N texts/s':>22} {'N / 64':>22} {'HTTP / batch of N':>22} | "
            f"{'batching off req/s':>22} {'p99 ms':>7} {'HTTP / off':>22}"
        )
        for clients, _, _, others, _, times in rows:
            batch_rate = times.spread("batch").text(".1f") if "batch" in times.names else "-"
            of_batch = harness.ratio_text(times.ratio("http", "batch")) if "batch" in times.names else "-"
            has_n = "batch of N" in times.names and "batch" in times.names
            n_rate = times.spread("batch of N").text(".1f") if has_n else "-"
            n_share = harness.ratio_text(times.ratio("batch of N", "batch")) if has_n else "-"
            of_n = harness.ratio_text(times.ratio("http", "batch of N")) if has_n else "-"
            off = others.get("batching off")
            off_rate = times.spread("batching off").text(".1f") if off is not None else "-"
            off_p99 = f"{off.p99:.1f}" if off is not None else "-"
            of_off = harness.ratio_text(times.ratio("http", "batching off")) if off is not None else "-"
            print(
                f"{clients:>7} {mean_batch.get(clients, float('nan')):>10.2f} | {batch_rate:>22} "
                f"{of_batch:>22} | {n_rate:>22} {n_share:>22} {of_n:>22} | {off_rate:>22} {off_p99:>7} "
                f"{of_off:>22}"
            )
    if peer_urls:
        print("the same load on the peers, in the same rounds (ours: dragoman's daemon over HTTP):")
        print(
            f"{'clients':>7} {'peer':>14} | {'req/s':>22} {'p50 ms':>7} {'p99 ms':>7} {'errors':>6} | "
            "ours / peer"
        )
        for clients, _, _, others, _, times in rows:
            for name, result in others.items():
                if name not in peer_urls:
                    continue
                print(
                    f"{clients:>7} {name:>14} | {times.spread(name).text('.1f'):>22} {result.p50:>7.1f} "
                    f"{result.p99:>7.1f} {result.errors:>6} | {harness.ratio_text(times.ratio('http', name))}"
                )
    eight = [r[5] for r in rows if r[0] == 8]
    if eight and "batch" in eight[0].names:  # issue 10's targets, side by side in this run
        checks = [("HTTP >= 80% of the engine's batch rate", "batch", 0.8)]
        if "batching off" in eight[0].names:
            checks.append(("HTTP >= 4x the daemon with batching off", "batching off", 4.0))
        checks += [
            (f"HTTP >= {n}x {name}", name, n) for name, n in (("LT default", 15.0), ("LT matched", 3.0))
        ]
        for text, side, bound in checks:
            if side in eight[0].names:
                got = eight[0].ratio("http", side)
                verdict = "met" if got.median >= bound else "NOT met"
                verdict += f", {harness.ratio_text(got)}{reach(eight[0], side, bound)}"
                print(f"target at 8 clients ({text}): {verdict}")
    if eight:
        overhead = eight[0].paired("http", "in-process", lambda h, loc: 1 - h / loc if loc else float("nan"))
        verdict = "met" if overhead.median < 0.2 else "NOT met"
        print(f"target (HTTP overhead < 20% at 8 clients, median of paired rounds): {verdict}")
    return 0


def reach(times: harness.Rounds, side: str, bound: float) -> str:
    """Whether a target of ``bound`` times ``side``'s rate is within the engine's own reach in these rounds.

    Eight single-text clients can give any batcher at most 8 texts a call, so the engine's in-process rate
    at 8 texts a call ("batch of N") is a ceiling for the daemon: a target asking for more than it cannot
    be met on this machine by any batcher or HTTP stack, only by a machine where 8 texts a call run faster.
    """
    if "batch of N" not in times.names:
        return ""
    asks = times.ratio(side, "batch of N").scaled(bound)
    where = "beyond" if asks.median > 1 else "within"
    return (
        f"; it asks for {harness.ratio_text(asks)} the engine's own rate at 8 texts a call: {where} its reach"
    )


if __name__ == "__main__":
    sys.exit(main())
