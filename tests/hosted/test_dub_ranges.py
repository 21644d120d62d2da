"""Range requests on the hosted dub downloads (issue 16): ``Range: bytes=a-b``, ``bytes=a-`` and ``bytes=-n``
answer 206 with Content-Range and the slice, past the end 416 with ``Content-Range: bytes */size``, several
ranges or a malformed one the whole file (200); every answer says ``Accept-Ranges: bytes``. Checked on the
shared helper over a local store and over S3 (moto on loopback), and through ``GET /api/v1/dub/:id/video``
and ``/audio`` of a real hosted service (the dub itself faked)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hosted_dub_support import FakeDubber, upload, wait_terminal
from hosted_subtitles_support import TINY_ID, make_media, tiny_recognizer
from hosted_support import StartHosted
from scale_support import s3_server, s3_storage
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient
from support import needs_apertium

from dragoman.server.hosted._ranges import UNSATISFIABLE, ByteRange, byte_range, file_response
from dragoman.service.storage import Storage
from dragoman.speech.asr import Recognizer
from dragoman.testing.s3_server import S3Server
from dragoman.translation.engine import Engine

__all__ = ["s3_server"]  # the session fixture, imported for pytest

SIZE = 3 * 1024 * 1024 + 12_345  # over several 1 MiB chunks, not a multiple of one
DATA = bytes((i * 7 + i // 251) % 256 for i in range(SIZE))
KEY = "dubs/job/talk.es.mp4"


# ----- the parser ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("bytes=0-99", ByteRange(0, 100, 1000)),
        ("bytes=500-", ByteRange(500, 1000, 1000)),
        ("bytes=0-", ByteRange(0, 1000, 1000)),
        ("bytes=-100", ByteRange(900, 1000, 1000)),
        ("bytes=-5000", ByteRange(0, 1000, 1000)),  # a suffix longer than the file: all of it
        ("bytes=900-5000", ByteRange(900, 1000, 1000)),  # past the end: cut there
        ("bytes=999-999", ByteRange(999, 1000, 1000)),
        ("BYTES = 10 - 19", ByteRange(10, 20, 1000)),
        ("bytes=1000-", UNSATISFIABLE),
        ("bytes=1000-1200", UNSATISFIABLE),
        ("bytes=-0", UNSATISFIABLE),
        ("bytes=0-1,5-9", None),  # several ranges: the whole file
        ("bytes=9-5", None),  # reversed: ignored
        ("bytes=-", None),
        ("bytes=a-b", None),
        ("bytes=0x10-20", None),
        ("items=0-5", None),
        ("bytes 0-5", None),
        ("bytes=" + "9" * 40 + "-", None),  # digits without end: ignored, not a huge number
        ("bytes=0-" + " " * 300, None),  # over the header bound
        (None, None),
    ],
)
def test_byte_range(header: str | None, expected: object) -> None:
    assert byte_range(header, 1000) == expected


def test_an_empty_file_satisfies_no_range() -> None:
    assert byte_range("bytes=0-", 0) is UNSATISFIABLE
    assert byte_range("bytes=-5", 0) is UNSATISFIABLE


# ----- the helper over both stores ----------------------------------------------------------------
@pytest.fixture(params=["local", "s3"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    if request.param == "local":
        made = Storage.local(tmp_path / "files")
    else:
        made = s3_storage(request.getfixturevalue("s3_server"))
    made.put_bytes(KEY, DATA)
    made.put_bytes("dubs/job/empty.srt", b"")
    return made


@pytest.fixture
def client(storage: Storage) -> Iterator[TestClient]:
    def download(request: Request) -> Response:
        key = f"dubs/job/{request.path_params['name']}"
        size = storage.size(key)
        return file_response(
            request, storage, key, size, media_type="video/mp4", headers={"Content-Disposition": "attachment"}
        )

    app = Starlette(routes=[Route("/f/{name}", download)])
    with TestClient(app) as made:
        yield made


def _get(client: TestClient, header: str | None, name: str = "talk.es.mp4") -> Any:
    return client.get(f"/f/{name}", headers={} if header is None else {"Range": header})


def test_whole_file_says_it_accepts_ranges(client: TestClient) -> None:
    answer = _get(client, None)
    assert answer.status_code == 200
    assert answer.headers["accept-ranges"] == "bytes"
    assert answer.headers["content-length"] == str(SIZE)
    assert answer.headers["content-disposition"] == "attachment"
    assert "content-range" not in answer.headers
    assert answer.content == DATA


def test_a_browser_like_seek(client: TestClient) -> None:
    first = _get(client, "bytes=0-")  # what a video element asks first
    assert first.status_code == 206
    assert first.headers["content-range"] == f"bytes 0-{SIZE - 1}/{SIZE}"
    assert first.content == DATA
    start = 2 * 1024 * 1024 + 333  # then a seek into the middle, across a chunk boundary
    seek = _get(client, f"bytes={start}-")
    assert seek.status_code == 206
    assert seek.headers["content-range"] == f"bytes {start}-{SIZE - 1}/{SIZE}"
    assert seek.headers["content-length"] == str(SIZE - start)
    assert seek.headers["accept-ranges"] == "bytes"
    assert seek.headers["content-type"] == "video/mp4"
    assert seek.content == DATA[start:]


@pytest.mark.parametrize(
    ("header", "start", "end"),
    [
        ("bytes=0-0", 0, 1),
        ("bytes=100-1048675", 100, 1048676),
        ("bytes=1048575-1048576", 1048575, 1048577),  # the two sides of a chunk boundary
        (f"bytes={SIZE - 10}-{SIZE + 10_000}", SIZE - 10, SIZE),  # cut at the end
        ("bytes=-4096", SIZE - 4096, SIZE),  # suffix
        (f"bytes=-{SIZE * 2}", 0, SIZE),
    ],
)
def test_slices_are_the_file_bytes(client: TestClient, header: str, start: int, end: int) -> None:
    answer = _get(client, header)
    assert answer.status_code == 206, answer.text
    assert answer.headers["content-range"] == f"bytes {start}-{end - 1}/{SIZE}"
    assert answer.headers["content-length"] == str(end - start)
    assert answer.content == DATA[start:end]


@pytest.mark.parametrize("header", [f"bytes={SIZE}-", f"bytes={SIZE + 5}-{SIZE + 9}", "bytes=-0"])
def test_unsatisfiable_ranges_are_416(client: TestClient, header: str) -> None:
    answer = _get(client, header)
    assert answer.status_code == 416
    assert answer.headers["content-range"] == f"bytes */{SIZE}"
    assert answer.json()["code"] == "range_not_satisfiable"


def test_any_range_of_an_empty_file_is_416(client: TestClient) -> None:
    answer = _get(client, "bytes=0-", "empty.srt")
    assert answer.status_code == 416 and answer.headers["content-range"] == "bytes */0"
    assert _get(client, None, "empty.srt").content == b""


@pytest.mark.parametrize(
    "header", ["bytes=0-1,5-9", "bytes=0-10, 20-30", "bytes=9-5", "bytes=abc", "items=0-5", "bytes=-"]
)
def test_several_or_invalid_ranges_get_the_whole_file(client: TestClient, header: str) -> None:
    answer = _get(client, header)
    assert answer.status_code == 200
    assert answer.headers["accept-ranges"] == "bytes"
    assert "content-range" not in answer.headers
    assert answer.content == DATA


def test_if_range_gets_the_whole_file(client: TestClient) -> None:
    answer = client.get("/f/talk.es.mp4", headers={"Range": "bytes=5-9", "If-Range": '"x"'})
    assert answer.status_code == 200 and answer.content == DATA


def test_a_range_is_read_ranged_from_the_store(storage: Storage, monkeypatch: pytest.MonkeyPatch) -> None:
    """The last KB of the file is read as a ranged get, not the whole object streamed and skipped."""
    read: list[int] = []
    real = Storage._streamed

    def counting(key: str, chunks: Iterator[object]) -> Iterator[bytes]:
        for chunk in real(key, chunks):
            read.append(len(chunk))
            yield chunk

    monkeypatch.setattr(Storage, "_streamed", staticmethod(counting))
    assert b"".join(storage.open_range(KEY, SIZE - 1024, SIZE)) == DATA[-1024:]
    assert sum(read) == 1024
    with pytest.raises(FileNotFoundError):
        storage.open_range("dubs/job/none.mp4", 0, 10)


# ----- through the hosted dub routes --------------------------------------------------------------
@pytest.fixture(scope="module")
def recognizer(hosted_engine: tuple[Engine, Path]) -> Recognizer:
    return tiny_recognizer(hosted_engine[1])


@needs_apertium
@pytest.mark.parametrize("store", ["local", "s3"])
def test_dub_video_and_audio_downloads_take_ranges(
    start_hosted: StartHosted,
    recognizer: Recognizer,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    store: str,
) -> None:
    options: dict[str, object] = {}
    if store == "s3":
        server: S3Server = request.getfixturevalue("s3_server")
        for name, value in server.environ.items():  # credentials come from the standard variables only
            monkeypatch.setitem(os.environ, name, value)
        options = {
            "store_url": f"s3://{server.create_bucket()}/svc",
            "s3_endpoint": server.endpoint,
            "s3_region": "us-east-1",
        }
    service = start_hosted(
        recognizer=recognizer, asr_model=TINY_ID, rate=100_000, dubber=FakeDubber(), **options
    )
    clip = make_media(tmp_path / "talk.mp4", 2.0)
    key, _ = service.new_key(credits=1_000)
    with service.client(key) as c:
        video_id = upload(c, clip)["video_id"]
        made = c.post("/api/v1/dub", json={"videoId": video_id, "targetLang": "es", "sourceLang": "en"})
        assert made.status_code == 202, made.text
        (job_id,) = made.json()["jobIds"]
        assert wait_terminal(c, [job_id])[job_id]["status"] == "done"
        for segment in ("video", "audio", "srt"):
            url = f"/api/v1/dub/{job_id}/{segment}"
            whole = c.get(url)
            assert whole.status_code == 200 and whole.headers["accept-ranges"] == "bytes"
            data = whole.content
            size = len(data)
            assert size > 0
            middle = c.get(url, headers={"Range": f"bytes={size // 3}-{size // 2}"})
            assert middle.status_code == 206, middle.text
            assert middle.headers["content-range"] == f"bytes {size // 3}-{size // 2}/{size}"
            assert middle.content == data[size // 3 : size // 2 + 1]
            assert middle.headers["content-disposition"] == whole.headers["content-disposition"]
            tail = c.get(url, headers={"Range": "bytes=-7"})
            assert tail.status_code == 206 and tail.content == data[-7:]
            rest = c.get(url, headers={"Range": f"bytes={size - 1}-"})
            assert rest.status_code == 206 and rest.content == data[-1:]
            past = c.get(url, headers={"Range": f"bytes={size}-"})
            assert past.status_code == 416 and past.headers["content-range"] == f"bytes */{size}"
            several = c.get(url, headers={"Range": "bytes=0-1,4-5"})
            assert several.status_code == 200 and several.content == data
