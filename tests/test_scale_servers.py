"""The throwaway Redis and S3 servers of dragoman.testing (issue 13): loopback only, a free port, ready when
returned, stopped (and started again on the same port) on demand, nothing left behind."""

from __future__ import annotations

import socket

import pytest
from scale_support import s3_storage, start_redis

from dragoman.testing.redis_server import ping
from dragoman.testing.s3_server import S3Server


def _refused(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return True
    return False


def test_redis_server_starts_stops_and_restarts_on_its_port() -> None:
    server = start_redis()
    try:
        assert server.host == "127.0.0.1" and server.url == f"redis://127.0.0.1:{server.port}"
        assert ping(server.host, server.port) and server.running
        import redis as redis_client

        client = redis_client.Redis.from_url(server.url)
        client.set("k", "v")
        assert client.get("k") == b"v"
        assert client.config_get("save") == {"save": ""}
        assert client.config_get("appendonly") == {"appendonly": "no"}
        server.stop(kill=True)  # a crash
        assert not server.running and _refused(server.host, server.port)
        server.start()  # the same port, empty: nothing was persisted
        assert ping(server.host, server.port) and client.get("k") is None
        client.close()
    finally:
        directory = server.dir
        server.cleanup()
    assert not directory.exists() and _refused(server.host, server.port)


def test_redis_server_on_a_taken_port_says_so() -> None:
    from dragoman.testing.redis_server import RedisServer, RedisUnavailable

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        server = RedisServer(port=taken.getsockname()[1], start_timeout=5)
        with pytest.raises(RedisUnavailable, match="did not answer PING"):
            server.__enter__()
        assert not server.dir.exists()


def test_s3_server_on_loopback_stops_and_restarts_with_its_buckets() -> None:
    with S3Server() as s3:
        assert s3.endpoint == f"http://127.0.0.1:{s3.port}" and s3.port > 0
        assert s3.environ["AWS_ENDPOINT"] == s3.endpoint and s3.environ["AWS_ALLOW_HTTP"] == "true"
        storage = s3_storage(s3)  # a fresh bucket
        storage.put_bytes("a/b.txt", b"x")
        port = s3.port
        s3.stop()
        assert _refused("127.0.0.1", port)  # down means down, not a socket that never answers
        s3.start()
        assert s3.port == port and storage.get_bytes("a/b.txt") == b"x"
