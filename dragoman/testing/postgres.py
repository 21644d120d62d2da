"""A throwaway PostgreSQL server on loopback: for tests, benchmarks and ``make up`` (issue 13).

Debian's ``postgresql`` package provides the binaries (``/usr/lib/postgresql/<version>/bin``); ``initdb``
makes a cluster in a temporary directory and ``pg_ctl`` starts it on a free port of 127.0.0.1, with its unix
socket in the same directory. PostgreSQL refuses to run as root, so when this process is root the cluster
belongs to the ``postgres`` user and every server command runs through ``runuser -u postgres --``.
Authentication is ``trust`` (loopback only, a throwaway cluster). ``fast=True`` (the default) turns
durability off (``fsync``, ``synchronous_commit``, ``full_page_writes``): right for tests, wrong for anything
that must survive a crash.

    with postgres_server() as url:          # postgresql+psycopg://postgres@127.0.0.1:PORT/postgres
        db = Database(url)

:class:`PostgresServer` also makes and drops databases (``CREATE DATABASE … TEMPLATE …`` copies a migrated
template in milliseconds: a fresh database per test) and can be stopped and started again on the same data
and port (a restart during load, for fault tests).
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["PostgresServer", "PostgresUnavailable", "find_bin_dir", "postgres_server", "unavailable_reason"]

#: Where Debian puts each major version's server binaries.
DEBIAN_ROOT = Path("/usr/lib/postgresql")
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class PostgresUnavailable(RuntimeError):
    """PostgreSQL's server binaries are not installed (or cannot be run here); the message says why."""


def find_bin_dir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding ``initdb`` and ``pg_ctl``, else ``pg_ctl`` on
    PATH's folder; None when PostgreSQL's server is not installed."""
    if DEBIAN_ROOT.is_dir():
        versions = sorted(
            (p for p in DEBIAN_ROOT.iterdir() if p.name.isdigit()), key=lambda p: int(p.name), reverse=True
        )
        for version in versions:
            bin_dir = version / "bin"
            if (bin_dir / "initdb").exists() and (bin_dir / "pg_ctl").exists():
                return bin_dir
    found = shutil.which("pg_ctl")
    if found and (Path(found).parent / "initdb").exists():
        return Path(found).parent
    return None


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def unavailable_reason() -> str | None:
    """Why a server cannot be started here (None: it can)."""
    if find_bin_dir() is None:
        return (
            "PostgreSQL's server is not installed (no initdb/pg_ctl under /usr/lib/postgresql/*/bin or on"
            " PATH; Debian: apt-get install postgresql)"
        )
    if _is_root():
        if shutil.which("runuser") is None:
            return "running as root, and runuser (util-linux) is missing to run PostgreSQL as another user"
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root, and there is no 'postgres' user to run PostgreSQL as"
    return None


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """A PostgreSQL cluster in a temporary directory, served on ``host``:``port`` until :meth:`stop`.

    ``with PostgresServer() as pg: pg.url`` (the ``postgres`` database); :meth:`url_for` names another;
    :meth:`create_database` / :meth:`drop_database` make and remove databases.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        fast: bool = True,
        max_connections: int = 300,
        bin_dir: Path | None = None,
        start_timeout: float = 60.0,
    ) -> None:
        reason = unavailable_reason() if bin_dir is None else None
        found = bin_dir or find_bin_dir()
        if reason or found is None:
            raise PostgresUnavailable(reason or "PostgreSQL's server is not installed")
        self.bin_dir: Path = found
        self.host = host
        self.port = port or _free_port(host)
        self.fast = fast
        self.max_connections = max_connections
        self.start_timeout = start_timeout
        self.user = "postgres"
        self._as_postgres = _is_root()
        self.root = Path(tempfile.mkdtemp(prefix="dragoman-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.running = False
        self._initialised = False

    # ----- server commands ---------------------------------------------------------------------------
    def _command(self, tool: str, *args: str) -> list[str]:
        command = [str(self.bin_dir / tool), *args]
        return ["runuser", "-u", "postgres", "--", *command] if self._as_postgres else command

    def _run(self, tool: str, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            self._command(tool, *args),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
            check=False,
        )
        if result.returncode != 0:
            log = self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""
            raise PostgresUnavailable(
                f"{tool} {' '.join(args[:2])}… failed ({result.returncode}): "
                f"{(result.stderr or result.stdout).strip()[-2000:]}\n{log}"
            )
        return result

    def _initdb(self) -> None:
        if self._as_postgres:
            shutil.chown(self.root, user="postgres", group="postgres")
        self.root.chmod(0o700)
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            self.user,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        self._initialised = True

    def _options(self) -> str:
        settings = {
            "listen_addresses": self.host,
            "port": str(self.port),
            "unix_socket_directories": str(self.root),
            "max_connections": str(self.max_connections),
            "logging_collector": "off",
        }
        if self.fast:
            settings |= {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
        return " ".join(f"-c {name}={value}" for name, value in settings.items())

    def start(self) -> PostgresServer:
        """Starts the server (making the cluster on the first call) and waits until it accepts connections."""
        if self.running:
            return self
        if not self._initialised:
            self._initdb()
        timeout = str(int(self.start_timeout))
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", self._options(), "-w", "-t", timeout,
            "start", timeout=self.start_timeout + 10,
        )  # fmt: skip
        self.running = True
        atexit.register(self.cleanup)  # a process that exits without cleaning up leaves no server behind
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            result = subprocess.run(
                [str(self.bin_dir / "pg_isready"), "-h", self.host, "-p", str(self.port), "-U", self.user],
                capture_output=True,
                check=False,
            )
            if result.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise PostgresUnavailable(f"PostgreSQL did not accept connections on {self.host}:{self.port}")
            time.sleep(0.05)

    def stop(self, mode: str = "fast") -> None:
        """Stops the server (``mode``: smart, fast or immediate, as ``pg_ctl stop -m``); the data stays."""
        if not self.running:
            return
        self.running = False
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", timeout=120)

    def restart(self, mode: str = "fast") -> None:
        """Stops and starts the server again on the same data and port (clients' connections drop)."""
        self.stop(mode)
        self.start()

    def cleanup(self) -> None:
        """Stops the server (immediately) and removes its directory."""
        atexit.unregister(self.cleanup)
        try:
            self.stop("immediate")
        except (PostgresUnavailable, subprocess.TimeoutExpired):
            pass
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        try:
            return self.start()
        except BaseException:
            self.cleanup()
            raise

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    # ----- databases -------------------------------------------------------------------------------------
    def url_for(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL (psycopg 3) of ``database`` on this server."""
        return f"postgresql+psycopg://{self.user}@{self.host}:{self.port}/{database}"

    @property
    def url(self) -> str:
        return self.url_for("postgres")

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(
            host=self.host, port=self.port, user=self.user, dbname="postgres", autocommit=True
        ) as connection:
            connection.execute(sql.encode())

    def create_database(self, name: str, *, template: str | None = None) -> str:
        """Makes database ``name`` (a copy of ``template`` when given: nobody may be connected to it);
        returns its URL."""
        _check_name(name)
        sql = f'CREATE DATABASE "{name}"'
        if template is not None:
            _check_name(template)
            sql += f' TEMPLATE "{template}"'
        self._admin(sql)
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        """Drops database ``name`` if it exists, closing its connections first."""
        _check_name(name)
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise ValueError(f"not a plain database name: {name!r}")


@contextmanager
def postgres_server(*, host: str = "127.0.0.1", port: int = 0, fast: bool = True) -> Iterator[str]:
    """A running throwaway server for the block; yields the SQLAlchemy URL of its ``postgres`` database."""
    with PostgresServer(host=host, port=port, fast=fast) as server:
        yield server.url
