"""Test helpers of the scaled-out components (issue 13) that are not the database: a throwaway Redis and
moto's S3 server on loopback, and ``dragoman hosted serve`` run as a child process.

A test module imports the fixtures it uses (``from scale_support import redis, s3_server``). Redis skips,
saying why, only when redis-server cannot be started here; moto is a dev dependency.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from xml.etree import ElementTree

import httpx
import pytest

from dragoman.service.storage import Storage
from dragoman.testing.redis_server import RedisServer, RedisUnavailable

if TYPE_CHECKING:
    from dragoman.testing.s3_server import S3Server


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_redis() -> RedisServer:
    """A running throwaway Redis (``.url``); the test skips when redis-server cannot be started here."""
    try:
        return RedisServer().__enter__()
    except RedisUnavailable as exc:
        pytest.skip(f"Redis tests skipped: {exc}")


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    server = start_redis()
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's S3 server on loopback for the session (buckets: :func:`s3_bucket`)."""
    from dragoman.testing.s3_server import S3Server

    server = S3Server().start()
    try:
        yield server
    finally:
        server.stop()


def s3_storage(server: S3Server, prefix: str = "files") -> Storage:
    """A Storage over a fresh bucket of ``server`` (objects under ``prefix``)."""
    bucket = server.create_bucket()
    return Storage.s3(
        f"s3://{bucket}/{prefix}",
        endpoint=server.endpoint,
        region="us-east-1",
        config={"access_key_id": "testing", "secret_access_key": "testing"},
    )


def s3_leftovers(storage: Storage) -> list[str]:
    """Every object in the bucket of ``storage`` and every multipart upload still pending there (``upload:``
    keys): what a failed write must not leave behind. Asked of moto over plain HTTP (it checks no
    signature)."""
    from obstore.store import S3Store

    assert isinstance(storage.store, S3Store)
    config = storage.store.config
    base = f"{config['endpoint']}/{config['bucket']}"
    objects = httpx.get(base, params={"list-type": "2"}, timeout=10)
    uploads = httpx.get(f"{base}?uploads", timeout=10)
    assert objects.status_code == 200 and uploads.status_code == 200, (objects.text, uploads.text)

    def keys(xml: bytes, element: str) -> list[str]:
        root = ElementTree.fromstring(xml)
        return [
            node.findtext("{*}Key") or "" for node in root.iter() if node.tag.rpartition("}")[2] == element
        ]

    return sorted(
        keys(objects.content, "Contents") + [f"upload:{k}" for k in keys(uploads.content, "Upload")]
    )


class ServeProcess:
    """``dragoman hosted serve`` as a child process on a free loopback port, with ``environ`` added."""

    def __init__(self, environ: Mapping[str, str], log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        env = {**os.environ, **environ}
        self._log_file = open(log, "wb")  # noqa: SIM115 - closed by stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dragoman.cli", "hosted", "serve", "--port", str(self.port)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"hosted serve exited {self.process.returncode}: {self.output()}")
            try:
                if httpx.get(f"{self.url}/api/v1/languages", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"hosted serve did not answer within {timeout} s: {self.output()}")

    def output(self) -> str:
        self._log_file.flush()
        return self.log.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._log_file.close()
