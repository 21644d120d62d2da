"""The scaled-out hosted service on one machine, for trying it (``make up`` / ``make down``; issue 13).

``python -m dragoman.testing.cluster up`` starts, from the throwaway launchers beside this module:
PostgreSQL (:mod:`dragoman.testing.postgres`), Redis (``redis-server`` on a free loopback port, no
persistence), moto's S3 server (:mod:`dragoman.testing.s3_server`, in a process of its own) with a bucket,
runs ``dragoman hosted migrate`` (the service's schema and Procrastinate's), then starts two
``dragoman hosted serve`` API processes on two ports and two ``dragoman hosted worker`` processes, all
sharing them (``DRAGOMAN_DB_URL``, ``DRAGOMAN_DISPATCH=procrastinate``, ``DRAGOMAN_RATELIMIT_URI``,
``DRAGOMAN_STORE_URL``), creates an account and a key and prints the URLs, the key and the log files.
Everything it started is written to ``<dir>/state.json`` (default ``build/cluster``);
``python -m dragoman.testing.cluster down`` stops all of it and removes PostgreSQL's temporary cluster.
``<dir>/env.sh`` holds the variables, so ``. build/cluster/env.sh; dragoman hosted keys list`` works.

Everything listens on 127.0.0.1 only, PostgreSQL trusts loopback and runs without fsync, moto keeps its
objects in memory: a place to try the scaled mode, not a deployment. :class:`Cluster` is also what the
scale tests and ``benchmarks/scale.py`` use (more workers or API processes: :meth:`Cluster.start_worker`,
:meth:`Cluster.start_api`).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dragoman.testing.postgres import PostgresServer
from dragoman.testing.redis_server import ping

__all__ = ["Cluster", "Proc", "main"]

DEFAULT_DIR = Path("build/cluster")
BUCKET = "dragoman"
DATABASE = "dragoman"
#: moto's dummy credentials (it checks no signature).
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",  # noqa: S105 - moto's dummy credential
    "AWS_ALLOW_HTTP": "true",
}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop_pid(
    pid: int, *, timeout: float = 30.0, kill: bool = False, popen: subprocess.Popen[bytes] | None = None
) -> None:
    """SIGTERM (``kill``: SIGKILL) to ``pid``'s process group, then SIGKILL after ``timeout``; waits (through
    ``popen`` when this process started it)."""

    def running() -> bool:
        if popen is not None:
            return popen.poll() is None
        _reap(pid)
        return alive(pid)

    sig = signal.SIGKILL if kill else signal.SIGTERM
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not running():
            return
        time.sleep(0.05)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for _ in range(200):
        if not running():
            return
        time.sleep(0.05)


@dataclass
class Proc:
    """A process the cluster started: what it is, its pid (leader of its own process group), port, log."""

    role: str
    pid: int
    log: str
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Cluster:
    """The scaled set-up under ``dir``: start with :meth:`up`, stop with :meth:`down` (or :meth:`load` the
    state of a running one from its directory)."""

    dir: Path = DEFAULT_DIR
    extra_env: dict[str, str] = field(default_factory=dict)
    procs: list[Proc] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    pg: dict[str, Any] = field(default_factory=dict)
    account_id: str = ""
    key: str = ""
    key_id: str = ""
    #: The PostgreSQL server when :meth:`up` ran in this process (fault tests stop and start it).
    postgres: PostgresServer | None = field(default=None, repr=False)
    _popens: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict, repr=False)

    # ----- state ---------------------------------------------------------------------------------------
    @property
    def state_path(self) -> Path:
        return self.dir / "state.json"

    def save(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        state = {
            "procs": [vars(p) for p in self.procs],
            "env": self.env,
            "pg": self.pg,
            "account_id": self.account_id,
            "key": self.key,
            "key_id": self.key_id,
        }
        self.state_path.write_text(json.dumps(state, indent=2))
        exports = "".join(f"export {k}='{v}'\n" for k, v in sorted(self.env.items()))
        (self.dir / "env.sh").write_text(exports)

    @classmethod
    def load(cls, directory: Path) -> Cluster:
        state = json.loads((directory / "state.json").read_text())
        return cls(
            dir=directory,
            procs=[Proc(**p) for p in state["procs"]],
            env=state["env"],
            pg=state["pg"],
            account_id=state["account_id"],
            key=state["key"],
            key_id=state["key_id"],
        )

    def apis(self) -> list[Proc]:
        return [p for p in self.procs if p.role == "api"]

    def workers(self) -> list[Proc]:
        return [p for p in self.procs if p.role == "worker"]

    @property
    def db_url(self) -> str:
        return self.env["DRAGOMAN_DB_URL"]

    # ----- processes -----------------------------------------------------------------------------------
    def _spawn(
        self, role: str, command: Sequence[str], *, port: int = 0, env: Mapping[str, str] = {}
    ) -> Proc:
        logs = self.dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        n = sum(p.role == role for p in self.procs) + 1
        log = logs / f"{role}-{n}.log"
        with open(log, "ab") as out:
            process = subprocess.Popen(
                list(command),
                env={**os.environ, **self.env, **env},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: `down` stops it and its children
            )
        proc = Proc(role, process.pid, str(log), port)
        self._popens[process.pid] = process
        self.procs.append(proc)
        self.save()
        return proc

    def _wait(self, proc: Proc, ready: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self._running(proc):
                break
            if ready():
                return
            time.sleep(0.1)
        tail = Path(proc.log).read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{what} did not start (log {proc.log}):\n{tail}")

    def _running(self, proc: Proc) -> bool:
        popen = self._popens.get(proc.pid)
        if popen is not None:
            return popen.poll() is None
        _reap(proc.pid)
        return alive(proc.pid)

    def _cli(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "dragoman.cli", "hosted", *args],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"dragoman hosted {' '.join(args)} failed: {result.stderr[-3000:]}")
        return result.stdout

    def start_api(self, *, timeout: float = 180.0) -> Proc:
        """One more ``dragoman hosted serve`` on a free port; waits until it answers."""
        port = _free_port()
        command = [sys.executable, "-m", "dragoman.cli", "hosted", "serve", "--port", str(port)]
        proc = self._spawn("api", command, port=port)

        def ready() -> bool:
            try:
                with urllib.request.urlopen(f"{proc.url}/api/v1/languages", timeout=2) as answer:  # noqa: S310
                    return bool(answer.status == 200)
            except (OSError, urllib.error.URLError):
                return False

        self._wait(proc, ready, timeout, f"dragoman hosted serve on port {port}")
        return proc

    def start_worker(self, *, queues: str | None = None, args: Sequence[str] = ()) -> Proc:
        """One more ``dragoman hosted worker`` (all queues unless ``queues``)."""
        command = [sys.executable, "-m", "dragoman.cli", "hosted", "worker", *args]
        if queues:
            command += ["--queues", queues]
        return self._spawn("worker", command)

    def stop(self, proc: Proc, *, kill: bool = False, timeout: float = 30.0) -> None:
        """Stops one process (SIGTERM, or SIGKILL with ``kill``) and forgets it."""
        stop_pid(proc.pid, kill=kill, timeout=timeout, popen=self._popens.pop(proc.pid, None))
        self.procs = [p for p in self.procs if p.pid != proc.pid]
        self.save()

    # ----- the whole -----------------------------------------------------------------------------------
    def up(self, *, apis: int = 2, workers: int = 2, key: bool = True) -> Cluster:
        """Starts everything (stopping what is left if a step fails)."""
        if self.state_path.exists():
            raise RuntimeError(f"{self.state_path} exists: a cluster is up (make down first)")
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            self._up(apis, workers, key)
        except BaseException:
            self.down()
            raise
        return self

    def _up(self, apis: int, workers: int, key: bool) -> None:
        server = PostgresServer()
        self.postgres = server
        self.pg = {
            "root": str(server.root),
            "data": str(server.data),
            "bin_dir": str(server.bin_dir),
            "port": server.port,
            "as_postgres": server._as_postgres,
        }
        self.save()
        server.start()
        db_url = server.create_database(DATABASE)
        self.env = {"DRAGOMAN_DB_URL": db_url}
        self.save()

        redis_port = _free_port()
        redis = self._spawn(
            "redis",
            ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
             "no", "--dir", str(self.dir), "--protected-mode", "yes"],
            port=redis_port,
        )  # fmt: skip
        self._wait(redis, lambda: ping("127.0.0.1", redis_port), 30, "redis-server")

        s3_port = _free_port()
        s3 = self._spawn(
            "s3",
            [sys.executable, "-m", "dragoman.testing.cluster", "s3", "--port", str(s3_port)],
            port=s3_port,
        )

        def bucket_ready() -> bool:
            try:
                with urllib.request.urlopen(f"{s3.url}/{BUCKET}?list-type=2", timeout=2) as answer:  # noqa: S310
                    return bool(answer.status == 200)
            except (OSError, urllib.error.URLError):
                return False

        self._wait(s3, bucket_ready, 60, "moto's S3 server")

        self.env = {
            "DRAGOMAN_DB_URL": db_url,
            "DRAGOMAN_DISPATCH": "procrastinate",
            "DRAGOMAN_RATELIMIT_URI": f"redis://127.0.0.1:{redis_port}",
            "DRAGOMAN_STORE_URL": f"s3://{BUCKET}/files",
            "DRAGOMAN_S3_ENDPOINT": s3.url,
            "DRAGOMAN_S3_REGION": "us-east-1",
            "DRAGOMAN_HOSTED_DIR": str((self.dir / "data").resolve()),
            "DRAGOMAN_WEBHOOKS_ALLOW_PRIVATE": "1",  # receivers on this machine, for trying it
            **S3_ENV,
            **self.extra_env,
        }
        self.save()
        self._cli("migrate")
        for _ in range(apis):
            self.start_api()
        for _ in range(workers):
            self.start_worker()
        if key:
            account = json.loads(self._cli("accounts", "create", "--name", "make up", "--credits", "1000000",
                                           "--json"))  # fmt: skip
            made = json.loads(self._cli("keys", "create", "--account", account["account_id"], "--json"))
            self.account_id, self.key, self.key_id = account["account_id"], made["key"], made["key_id"]
        self.save()

    def down(self) -> list[str]:
        """Stops every process (API processes and workers first), PostgreSQL, and removes its cluster; returns
        what it stopped."""
        stopped: list[str] = []
        order = {"api": 0, "worker": 1, "s3": 2, "redis": 3}
        for proc in sorted(self.procs, key=lambda p: order.get(p.role, 9)):
            popen = self._popens.pop(proc.pid, None)
            stop_pid(proc.pid, timeout=40 if proc.role == "worker" else 20, popen=popen)
            stopped.append(f"{proc.role} (pid {proc.pid})")
        self.procs = []
        if self.postgres is not None:  # started by this process
            self.postgres.cleanup()
            stopped.append(f"postgresql (port {self.pg['port']})")
        elif self.pg:
            command = [
                str(Path(self.pg["bin_dir"]) / "pg_ctl"),
                "-D",
                self.pg["data"],
                "-m",
                "fast",
                "-w",
                "stop",
            ]
            if self.pg.get("as_postgres"):
                command = ["runuser", "-u", "postgres", "--", *command]
            if Path(self.pg["data"], "postmaster.pid").exists():
                subprocess.run(command, capture_output=True, timeout=120, check=False)
                stopped.append(f"postgresql (port {self.pg['port']})")
            shutil.rmtree(self.pg["root"], ignore_errors=True)
        self.postgres = None
        self.pg = {}
        self.state_path.unlink(missing_ok=True)
        return stopped

    def describe(self) -> str:
        lines = [f"The scaled hosted service is up (loopback only; state and logs in {self.dir}):"]
        for n, api in enumerate(self.apis(), 1):
            lines.append(f"  API {n}:        {api.url}   (docs: {api.url}/docs)")
        lines.append(f"  workers:      {len(self.workers())} (dragoman hosted worker, all queues)")
        lines.append(f"  PostgreSQL:   {self.env.get('DRAGOMAN_DB_URL', '')}")
        lines.append(f"  Redis:        {self.env.get('DRAGOMAN_RATELIMIT_URI', '')}")
        lines.append(
            f"  S3 (moto):    {self.env.get('DRAGOMAN_S3_ENDPOINT', '')}  bucket {BUCKET} "
            f"({self.env.get('DRAGOMAN_STORE_URL', '')})"
        )
        if self.key:
            lines.append(f"  account:      {self.account_id} (1,000,000 credits)")
            lines.append(f"  API key:      {self.key}")
            first = self.apis()[0].url if self.apis() else "http://127.0.0.1:PORT"
            lines.append(
                f"  try:          curl -s {first}/api/v1/translate -H 'Authorization: Bearer {self.key}' "
                '-H \'Content-Type: application/json\' -d \'{"text":"Hello world","src":"en","tgt":"es"}\''
            )
        lines.append(f"  admin CLI:    . {self.dir}/env.sh; dragoman hosted keys list")
        lines.append("  stop:         make down")
        return "\n".join(lines)


def _serve_s3(port: int) -> int:
    """moto's S3 server on 127.0.0.1:``port`` with the bucket, until SIGTERM/SIGINT."""
    from dragoman.testing.s3_server import S3Server

    stopping = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    server = S3Server(port=port).start()
    try:
        server.create_bucket(BUCKET)
        while not stopping:
            time.sleep(0.2)
    finally:
        server.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dragoman.testing.cluster",
        description="Start or stop the scaled hosted service on this machine (make up / make down).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("up", help="start PostgreSQL, Redis, S3, API processes and workers")
    p.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="state and logs (default build/cluster)")
    p.add_argument("--apis", type=int, default=2, help="API processes (default 2)")
    p.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    p = sub.add_parser("down", help="stop everything `up` started")
    p.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="state and logs (default build/cluster)")
    p = sub.add_parser("s3", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    if args.command == "s3":
        return _serve_s3(args.port)
    if args.command == "up":
        cluster = Cluster(dir=args.dir).up(apis=args.apis, workers=args.workers)
        if cluster.postgres is not None:  # it outlives this command: `down` stops it
            atexit.unregister(cluster.postgres.cleanup)
        print(cluster.describe())
        return 0
    if not (args.dir / "state.json").exists():
        print(f"nothing to stop: no {args.dir / 'state.json'}")
        return 0
    for line in Cluster.load(args.dir).down():
        print(f"stopped {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
