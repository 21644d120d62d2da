"""A hosted dub from a ``url`` is fetched by its engine job, not inside the POST (issue 16): the 202 comes
while the server still holds the body back; a URL that fails ends the job failed with its typed code first in
``error`` (``error_code``), nothing charged, ``dub.failed`` sent; a body past the size limit is cut off there
(the download stops, nothing is kept); the guard refuses a private address at the POST when the operator does
not allow them, and a redirect to the metadata address inside the job; the credits are reserved on the probed
duration once fetched (an account that cannot pay them fails then, keeping nothing); canceling the dub while
the download runs ends it at once. The media servers run on loopback in the test."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from db_support import DbBackend
from hosted_dub_support import FakeDubber, MediaServer, wait_terminal
from hosted_subtitles_support import TINY_ID, events, make_media, tiny_recognizer, wait_events, worker_process
from hosted_support import Hosted, Receiver, StartHosted
from sqlalchemy import func, select
from support import needs_apertium

from dragoman.service import accounts, dispatch, dub_jobs
from dragoman.service.db import Database, media
from dragoman.service.db import jobs as jobs_table
from dragoman.speech.asr import Recognizer
from dragoman.translation.engine import Engine

pytestmark = needs_apertium


@pytest.fixture(scope="session")
def recognizer(hosted_engine: tuple[Engine, Path]) -> Recognizer:
    return tiny_recognizer(hosted_engine[1])


@pytest.fixture(scope="session")
def clip(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return make_media(tmp_path_factory.mktemp("dub-url-media") / "talk.mp4", 4.0).read_bytes()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.close()


@pytest.fixture
def service(start_hosted: StartHosted, recognizer: Recognizer) -> Hosted:
    return start_hosted(recognizer=recognizer, asr_model=TINY_ID, rate=100_000, dubber=FakeDubber())


def _balance(service: Hosted, key: str) -> int:
    account = accounts.authenticate(service.db, f"Bearer {key}").account_id
    return accounts.get_account(service.db, account).balance


def _uploads(service: Hosted) -> int:
    with service.db.read() as conn:
        return int(conn.execute(select(func.count()).select_from(media)).scalar() or 0)


def _pending_dub_jobs(service: Hosted) -> int:
    with service.db.read() as conn:
        return int(
            conn.execute(
                select(func.count())
                .select_from(jobs_table)
                .where(jobs_table.c.kind == "dub", jobs_table.c.status.in_(["queued", "active"]))
            ).scalar()
            or 0
        )


def _spooled(service: Hosted) -> list[Path]:
    folder = service.settings.hosted.data_dir / "tmp"
    return sorted(folder.glob("fetch-*")) if folder.is_dir() else []


def _wait(check: Any, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return bool(check())


def test_the_202_comes_before_the_download_ends(service: Hosted, clip: bytes, receiver: Receiver) -> None:
    server = MediaServer({"/talk.mp4": clip}, hold=("/talk.mp4",))
    try:
        key, _ = service.new_key(credits=1_000)
        with service.client(key) as c:
            body = {"url": server.url("/talk.mp4"), "targets": ["es", "fr"], "webhook": receiver.url}
            made = c.post("/api/v1/dub", json=body)
            assert made.status_code == 202, made.text
            accepted = made.json()
            assert accepted["videoId"] is None and accepted["totalCredits"] is None
            assert server.started.wait(30)  # the job is downloading; the server holds the rest back
            assert server.sent["/talk.mp4"] < len(clip)
            spanish, french = accepted["jobIds"]
            status = c.get(f"/api/v1/dub/{spanish}").json()
            assert status["stage"] == "fetching" and status["video_id"] is None, status
            assert status["duration_seconds"] is None and status["credits_reserved"] == 0
            assert _balance(service, key) == 1_000  # nothing reserved before the duration is known
            server.release()
            ended = wait_terminal(c, [spanish, french])
        assert {e["status"] for e in ended.values()} == {"done"}, ended
        assert {e["credits"] for e in ended.values()} == {10}  # ceil(150 x 4 s / 60) each, probed
        assert ended[spanish]["video_id"] == ended[french]["video_id"] is not None
        assert abs(ended[spanish]["duration_seconds"] - 4.0) < 0.2
        assert _balance(service, key) == 980 and server.hits == ["/talk.mp4"]  # fetched once for the batch
        assert wait_events(receiver, "batch.completed", 1)[0]["done_count"] == 2
    finally:
        server.close()


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/missing.mp4", "media_fetch_failed"),  # 404
        ("/page.mp4", "unsupported_media"),  # fetched, not media
        ("/meta", "invalid_media_url"),  # a redirect to the metadata address: refused, never connected
    ],
)
def test_a_failing_url_fails_the_job_with_its_code_and_charges_nothing(
    service: Hosted, receiver: Receiver, path: str, code: str
) -> None:
    server = MediaServer(
        {"/page.mp4": b"<html>not a video</html>" * 100},
        redirects={"/meta": "http://169.254.169.254/latest/meta-data/"},
    )
    try:
        key, _ = service.new_key(credits=1_000)
        before = _uploads(service)
        with service.client(key) as c:
            body = {"url": server.url(path), "targets": ["es", "fr"], "webhook": receiver.url}
            made = c.post("/api/v1/dub", json=body)
            assert made.status_code == 202, made.text
            ids = made.json()["jobIds"]
            ended = wait_terminal(c, ids)
        for job in ended.values():
            assert job["status"] == "failed" and job["error_code"] == code, job
            assert job["error"].startswith(f"{code}: ") and job["credits"] in (None, 0)
            assert "webhook" not in job["error"]
        assert _balance(service, key) == 1_000 and _uploads(service) == before
        failed = wait_events(receiver, "dub.failed", 2)
        assert {e["error_code"] for e in failed} == {code}
        assert {e["credits_refunded"] for e in failed} == {0}
        assert wait_events(receiver, "batch.completed", 1)[0]["failed_count"] == 2
        assert _wait(lambda: _pending_dub_jobs(service) == 0)  # the engine job ended too
        time.sleep(0.5)
        assert sorted(e["event"] for e in events(receiver)) == ["batch.completed", "dub.failed", "dub.failed"]
        assert not _spooled(service)
    finally:
        server.close()


def test_a_body_past_the_limit_is_cut_off_there(
    service: Hosted, monkeypatch: pytest.MonkeyPatch, clip: bytes
) -> None:
    limit = 256 * 1024
    monkeypatch.setattr(dub_jobs, "MAX_FILE_BYTES", limit)
    huge = clip + b"\0" * (64 * 1024 * 1024)  # 64 MB more than the limit, no Content-Length stated
    server = MediaServer({"/huge.mp4": huge}, length={"/huge.mp4": -1})
    try:
        key, _ = service.new_key(credits=1_000)
        before = _uploads(service)
        with service.client(key) as c:
            made = c.post("/api/v1/dub", json={"url": server.url("/huge.mp4"), "targetLang": "es"})
            assert made.status_code == 202, made.text
            (job_id,) = made.json()["jobIds"]
            ended = wait_terminal(c, [job_id])[job_id]
        assert ended["status"] == "failed" and ended["error_code"] == "file_too_large", ended["error"]
        assert _wait(lambda: "/huge.mp4" in server.sent)
        # the download stopped at the limit: the server could not write the rest (loopback buffers aside)
        assert server.sent["/huge.mp4"] < len(huge) // 4, server.sent
        assert _balance(service, key) == 1_000 and _uploads(service) == before and not _spooled(service)
    finally:
        server.close()


def test_a_private_address_is_refused_at_the_post_when_not_allowed(service: Hosted, clip: bytes) -> None:
    server = MediaServer({"/talk.mp4": clip})
    service.app.state.media_fetch_allow_private = False  # the operator's default
    try:
        key, _ = service.new_key(credits=1_000)
        with service.client(key) as c:
            for url in (
                server.url("/talk.mp4"),
                f"http://localhost:{server.port}/talk.mp4",  # a name resolving to loopback
                "http://10.1.2.3/talk.mp4",
                "http://169.254.169.254/latest/meta-data/",
            ):
                refused = c.post("/api/v1/dub", json={"url": url, "targetLang": "es"})
                assert refused.status_code == 400, (url, refused.text)
                assert refused.json()["code"] == "invalid_media_url" and "webhook" not in refused.text
        assert server.hits == [] and _pending_dub_jobs(service) == 0
        with service.db.read() as conn:
            assert not conn.execute(select(func.count()).select_from(jobs_table)).scalar()
    finally:
        server.close()


def test_credits_are_reserved_once_probed_and_a_short_account_fails_then(
    service: Hosted, clip: bytes, receiver: Receiver
) -> None:
    server = MediaServer({"/talk.mp4": clip})
    try:
        poor, _ = service.new_key(credits=15)  # a 4 s dub into two targets needs 20
        empty, _ = service.new_key(credits=0)
        before = _uploads(service)
        with service.client(empty) as c:
            refused = c.post("/api/v1/dub", json={"url": server.url("/talk.mp4"), "targetLang": "es"})
            assert refused.status_code == 402 and refused.json()["code"] == "insufficient_credits"
        assert server.hits == []  # not worth a download
        with service.client(poor) as c:
            body = {"url": server.url("/talk.mp4"), "targets": ["es", "fr"], "webhook": receiver.url}
            made = c.post("/api/v1/dub", json=body)
            assert made.status_code == 202, made.text
            ended = wait_terminal(c, made.json()["jobIds"])
        for job in ended.values():
            assert job["status"] == "failed" and job["error_code"] == "insufficient_credits", job
            assert "20" in job["error"]  # what the whole dub needs
        assert _balance(service, poor) == 15 and _uploads(service) == before  # all or nothing, nothing kept
        assert len(wait_events(receiver, "dub.failed", 2)) == 2
    finally:
        server.close()


def test_canceling_while_the_download_runs_ends_the_dub_at_once(service: Hosted, clip: bytes) -> None:
    server = MediaServer({"/talk.mp4": clip}, hold=("/talk.mp4",))
    try:
        key, _ = service.new_key(credits=1_000)
        before = _uploads(service)
        with service.client(key) as c:
            made = c.post("/api/v1/dub", json={"url": server.url("/talk.mp4"), "targetLang": "es"})
            assert made.status_code == 202, made.text
            (job_id,) = made.json()["jobIds"]
            assert server.started.wait(30)
            canceled = c.delete(f"/api/v1/jobs/{job_id}")
            assert canceled.status_code == 200 and canceled.json()["credits_refunded"] == 0
            assert wait_terminal(c, [job_id])[job_id]["status"] == "canceled"
            # the engine job stops while the server still holds the body back (it never releases it here)
            assert _wait(lambda: _pending_dub_jobs(service) == 0, timeout=20)
            assert not server.gate.is_set()
        server.release()
        assert _wait(lambda: not _spooled(service), timeout=20)  # the abandoned download deleted its file
        assert _balance(service, key) == 1_000 and _uploads(service) == before
    finally:
        server.close()


@pytest.mark.slow
def test_procrastinate_worker_fetches_the_url_in_the_job(
    start_hosted: StartHosted,
    recognizer: Recognizer,
    clip: bytes,
    receiver: Receiver,
    db_backend: DbBackend,
    hosted_engine: tuple[Engine, Path],
    tmp_path: Path,
) -> None:
    """DRAGOMAN_DISPATCH=procrastinate: the POST answers 202 with nothing fetched; the worker process's dub
    job fetches the URL (its own guard setting: private allowed here), reserves on the probed duration and
    dubs; a failing URL fails there with its code."""
    if not db_backend.is_postgres:
        pytest.skip("Procrastinate runs on PostgreSQL")
    url = db_backend.url(tmp_path / "pg")
    schema_db = Database(url)
    try:
        dispatch.apply_schema(schema_db)
    finally:
        schema_db.dispose()
    hosted = start_hosted(db_url=url, dispatch="procrastinate", recognizer=recognizer, asr_model=TINY_ID)
    server = MediaServer({"/talk.mp4": clip})
    try:
        with hosted.client() as c:
            body = {
                "url": server.url("/talk.mp4"),
                "targets": ["es"],
                "sourceLang": "en",
                "webhook": receiver.url,
            }
            made = c.post("/api/v1/dub", json=body)
            assert made.status_code == 202, made.text
            missing = c.post("/api/v1/dub", json={**body, "url": server.url("/gone.mp4")})
            assert missing.status_code == 202, missing.text
            assert server.hits == []  # nothing fetched by the web process
            _, root = hosted_engine
            with worker_process(
                "hosted_dub_worker.py",
                "dub,webhooks",
                db_url=url,
                hosted_dir=hosted.settings.hosted.data_dir,
                packs_dir=root / "packs",
                state_dir=tmp_path / "worker-state",
            ) as worker:
                (child,) = made.json()["jobIds"]
                (lost,) = missing.json()["jobIds"]
                ended = wait_terminal(c, [child, lost], timeout=240)
                wait_events(receiver, "batch.completed", 2)
            assert ended[child]["status"] == "done", (ended, worker.stderr_tail)
            assert ended[child]["credits"] == 10 and ended[child]["video_id"]
            assert ended[lost]["status"] == "failed" and ended[lost]["error_code"] == "media_fetch_failed"
            assert c.get(f"/api/v1/dub/{child}/audio").status_code == 200
        assert sorted(server.hits) == ["/gone.mp4", "/talk.mp4"]
        assert worker.returncode == 0, worker.stderr_tail
    finally:
        server.close()
