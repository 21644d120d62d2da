"""The hosted service's file store (dragoman.service.storage over obstore): every test against the local
store and against S3 (moto's server on loopback, issue 13)."""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from scale_support import s3_leftovers, s3_server, s3_storage

from dragoman.errors import ConfigError, FileTooLarge, InvalidRequest, StorageUnavailable
from dragoman.service.storage import PART_SIZE, Storage, check_key, safe_name
from dragoman.settings import HostedSettings
from dragoman.testing.s3_server import S3Server

__all__ = ["s3_server"]  # the session fixture, imported for pytest

MB = 1024 * 1024


def _files(root: Path) -> list[str]:
    """Every file under ``root`` (staging parts included), relative."""
    return sorted(str(Path(d, f).relative_to(root)) for d, _, names in os.walk(root) for f in names)


def _chunks(total: int, size: int = MB, fill: bytes = b"z") -> Iterator[bytes]:
    sent = 0
    while sent < total:
        n = min(size, total - sent)
        sent += n
        yield fill * n


def _leftovers(storage: Storage) -> list[str]:
    """Every object (and, on S3, every pending multipart upload) in the store's place."""
    if storage.root is not None:
        return _files(storage.root)
    return s3_leftovers(storage)


@pytest.fixture(params=["local", "s3"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    if request.param == "local":
        return Storage.local(tmp_path / "files")
    return s3_storage(request.getfixturevalue("s3_server"))


def test_put_stream_returns_size_and_sha256_and_reads_back(storage: Storage) -> None:
    data = b"".join(_chunks(3 * MB + 17, 65_536, b"ab"))
    size, digest = storage.put_stream("uploads/u1/report.pdf", _chunks(3 * MB + 17, 65_536, b"ab"), 10 * MB)
    assert size == len(data) and digest == hashlib.sha256(data).hexdigest()
    assert b"".join(storage.open_stream("uploads/u1/report.pdf", chunk_size=MB)) == data
    assert storage.get_bytes("uploads/u1/report.pdf") == data
    assert storage.exists("uploads/u1/report.pdf") and storage.size("uploads/u1/report.pdf") == len(data)


@pytest.mark.parametrize("total", [50_000, PART_SIZE * 2 + 5])  # one part; a multipart write
def test_put_stream_over_the_bound_leaves_no_file(storage: Storage, total: int) -> None:
    with pytest.raises(FileTooLarge) as refused:
        storage.put_stream("uploads/u2/big.bin", _chunks(total, 40_000), total - 1)
    assert refused.value.status == 413
    assert _leftovers(storage) == [] and not storage.exists("uploads/u2/big.bin")
    if storage.root is not None:
        assert not (storage.root / "uploads").exists()  # the folders it made are gone too


def test_a_stream_that_breaks_leaves_no_file(storage: Storage) -> None:
    def broken() -> Iterator[bytes]:
        yield b"x" * PART_SIZE
        yield b"y" * PART_SIZE
        raise ConnectionResetError("the client went away")

    with pytest.raises(ConnectionResetError):
        storage.put_stream("uploads/u3/cut.bin", broken(), 100 * MB)
    assert _leftovers(storage) == []


def test_an_object_is_replaced_whole_or_not_at_all(storage: Storage) -> None:
    storage.put_bytes("exports/j1/out.docx", b"first")
    with pytest.raises(FileTooLarge):
        storage.put_stream("exports/j1/out.docx", _chunks(100), 10)
    assert storage.get_bytes("exports/j1/out.docx") == b"first"


def test_list_with_modification_times_and_delete(storage: Storage) -> None:
    storage.put_bytes("exports/j1/a.pdf", b"1")
    storage.put_bytes("exports/j1/b.docx", b"22")
    storage.put_bytes("exports/j10/c.pdf", b"333")
    storage.put_bytes("uploads/u/x.png", b"4444")
    listed = storage.list("exports/j1")
    assert [(o.key, o.size) for o in listed] == [("exports/j1/a.pdf", 1), ("exports/j1/b.docx", 2)]
    assert all(o.modified.tzinfo is not None and o.modified_ms > 0 for o in listed)
    assert {o.key for o in storage.list()} == {
        "exports/j1/a.pdf",
        "exports/j1/b.docx",
        "exports/j10/c.pdf",
        "uploads/u/x.png",
    }
    assert storage.delete_prefix("exports/j1") == 2
    assert storage.delete("exports/j1/a.pdf") is False
    if storage.root is not None:
        assert not (storage.root / "exports" / "j1").exists()
    assert [o.key for o in storage.list("exports")] == ["exports/j10/c.pdf"]


def test_missing_objects(storage: Storage) -> None:
    with pytest.raises(FileNotFoundError):
        storage.get_bytes("exports/none/x.pdf")
    with pytest.raises(FileNotFoundError):
        storage.open_stream("exports/none/x.pdf")
    assert not storage.exists("exports/none/x.pdf")


@pytest.mark.parametrize("key", ["", "/etc/passwd", "a/../b", "a//b", "./a", "a/\x00", "a/b\\c", "x" * 2000])
def test_unsafe_keys_are_refused(storage: Storage, key: str) -> None:
    with pytest.raises(InvalidRequest):
        check_key(key)
    with pytest.raises(InvalidRequest):
        storage.put_bytes(key, b"x")


def test_safe_name() -> None:
    assert safe_name("../../etc/passwd") == "passwd"
    assert safe_name("C:\\Users\\me\\report final.pdf") == "report_final.pdf"
    assert safe_name("...") == "file" and safe_name("") == "file"
    check_key("uploads/u/" + safe_name("тест документ.docx"))


def test_from_settings(tmp_path: Path) -> None:
    default = Storage.from_settings(HostedSettings(data_dir=tmp_path / "data"))
    assert default.root == tmp_path / "data" / "files" and default.root.is_dir()
    named = Storage.from_settings(
        HostedSettings(data_dir=tmp_path, store_url=f"file://{tmp_path / 'elsewhere'}")
    )
    named.put_bytes("uploads/a/b", b"x")
    assert (tmp_path / "elsewhere" / "uploads" / "a" / "b").read_bytes() == b"x"
    for url in ("gs://bucket/x", "file://relative/path", "s3:///x", "s3://bucket/a/../b", "s3://b?x=1"):
        with pytest.raises(ConfigError):
            Storage.from_settings(HostedSettings(data_dir=tmp_path, store_url=url))


def test_from_settings_s3(tmp_path: Path, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in s3_server.environ.items():  # credentials come from the standard variables only
        monkeypatch.setenv(name, value)
    bucket = s3_server.create_bucket()
    hosted = HostedSettings(
        data_dir=tmp_path,
        store_url=f"s3://{bucket}/tenant/files",
        s3_endpoint=s3_server.endpoint,
        s3_region="us-east-1",
    )
    store = Storage.from_settings(hosted)
    assert store.root is None
    store.put_bytes("uploads/a/b", b"x")
    assert s3_leftovers(store) == ["tenant/files/uploads/a/b"]  # under the URL's prefix
    assert [o.key for o in store.list()] == ["uploads/a/b"] and store.get_bytes("uploads/a/b") == b"x"


def test_an_unreachable_s3_is_503(monkeypatch: pytest.MonkeyPatch) -> None:
    import dragoman.service.storage as storage_module

    monkeypatch.setattr(storage_module, "S3_RETRY_SECONDS", 1)
    monkeypatch.setattr(storage_module, "S3_MAX_RETRIES", 0)
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store = Storage.s3(
        "s3://nobucket/x",
        endpoint=f"http://127.0.0.1:{port}",
        region="us-east-1",
        config={"access_key_id": "testing", "secret_access_key": "testing"},
    )
    for attempt in (
        lambda: store.put_bytes("a/b", b"x"),
        lambda: store.put_stream("a/b", iter([b"x"]), 10),
        lambda: store.get_bytes("a/b"),
        lambda: store.open_stream("a/b"),
        lambda: store.exists("a/b"),
        lambda: store.list("a"),
    ):
        with pytest.raises(StorageUnavailable) as failed:
            attempt()
        assert failed.value.status == 503 and failed.value.retry_after > 0
