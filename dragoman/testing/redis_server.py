"""A throwaway Redis server on loopback: for tests, benchmarks and ``make up`` (issue 13).

Debian's ``redis-server`` package provides the binary. :class:`RedisServer` starts
``redis-server --port P --bind 127.0.0.1 --save '' --appendonly no`` on a free port in a temporary directory
(nothing is persisted: a restart starts empty, as a Redis that lost its memory does), waits until it answers
``PING`` and stops it. It can be stopped and started again on the same port mid-test (what a fault test of
"Redis down" needs: the URL a service was given stays valid).

    with redis_server() as url:            # redis://127.0.0.1:PORT
        limiter = RateLimiter(url)

``PING`` is spoken in RESP over a plain socket, so this module needs no Redis client.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["RedisServer", "RedisUnavailable", "ping", "redis_server", "unavailable_reason"]


class RedisUnavailable(RuntimeError):
    """``redis-server`` is not installed or did not start; the message says why."""


def unavailable_reason() -> str | None:
    """Why a server cannot be started here (None: it can)."""
    if shutil.which("redis-server") is None:
        return "redis-server is not installed (Debian: apt-get install redis-server)"
    return None


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def ping(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether a Redis server at ``host:port`` answers ``PING`` with ``+PONG``."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` process on ``host`` (loopback) and a free port, in a temporary directory."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, start_timeout: float = 20.0) -> None:
        reason = unavailable_reason()
        if reason is not None:
            raise RedisUnavailable(reason)
        self.host = host
        self.port = port or _free_port(host)
        self.start_timeout = start_timeout
        self.dir = Path(tempfile.mkdtemp(prefix="dragoman-redis-"))
        self._process: subprocess.Popen[bytes] | None = None
        self._log = self.dir / "redis.log"

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> RedisServer:
        """Starts the server (on the same port as before, after a :meth:`stop`) and waits for ``PING``."""
        if self.running:
            return self
        command = [
            "redis-server",
            "--port", str(self.port),
            "--bind", self.host,
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.dir),
            "--logfile", str(self._log),
            "--daemonize", "no",
            "--protected-mode", "yes",
        ]  # fmt: skip
        self._process = subprocess.Popen(
            command, cwd=self.dir, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if ping(self.host, self.port):
                return self
            if self._process.poll() is not None:
                break
            time.sleep(0.02)
        error = b""
        if self._process.poll() is not None and self._process.stderr is not None:
            error = self._process.stderr.read()
        self.stop()
        log = self._log.read_text(errors="replace")[-2000:] if self._log.exists() else ""
        raise RedisUnavailable(
            f"redis-server did not answer PING on {self.host}:{self.port} within {self.start_timeout:g} s: "
            f"{error.decode(errors='replace').strip()} {log.strip()}".strip()
        )

    def stop(self, *, kill: bool = False) -> None:
        """Stops the server: SIGTERM (``kill``: SIGKILL, as a crash), then waits for the process to end."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            if kill:
                process.kill()
            else:
                process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        if process.stderr is not None:
            process.stderr.close()

    def restart(self) -> None:
        self.stop()
        self.start()

    def cleanup(self) -> None:
        """Stops the server and removes its directory."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        try:
            return self.start()
        except BaseException:
            self.cleanup()
            raise

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


@contextmanager
def redis_server(*, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """A running throwaway Redis for the block: its URL (``redis://127.0.0.1:PORT``)."""
    with RedisServer(host=host, port=port) as server:
        yield server.url
