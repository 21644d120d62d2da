"""Hosted subtitles (issue 15; spec 2.9, 4.3, 6, 8) over real HTTP, on SQLite and PostgreSQL, and (the tests
marked ``scaled``) on PostgreSQL + Procrastinate + Redis + S3 (tests/hosted/conftest.py): uploads,
batches sharing one recognition run (the tiny Whisper), credits on the probed duration, status, downloads
parsed by pysrt and webvtt-py, a failing child refunded while its sibling completes, webhooks exactly once,
idempotent create, cancellation of a child, and the one-call route."""

from __future__ import annotations

import io
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pysrt
import pytest
import webvtt
from db_support import DbBackend
from hosted_subtitles_support import (
    TINY_ID,
    create,
    events,
    make_media,
    tiny_recognizer,
    upload,
    wait_events,
    wait_terminal,
    worker_process,
)
from hosted_support import Hosted, Receiver, StartHosted
from sqlalchemy import text
from support import needs_apertium

from dragoman.pipelines import subtitles as pipeline
from dragoman.service import accounts, dispatch, subtitle_jobs, webhooks
from dragoman.service.db import Database
from dragoman.speech.asr import Recognizer
from dragoman.translation.engine import Engine

pytestmark = needs_apertium


@pytest.fixture(scope="session")
def recognizer(hosted_engine: tuple[Engine, Path]) -> Recognizer:
    return tiny_recognizer(hosted_engine[1])


@pytest.fixture(scope="session")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_media(tmp_path_factory.mktemp("subtitle-media") / "talk.mp4", 4.0)


@pytest.fixture
def service(start_hosted: StartHosted, recognizer: Recognizer) -> Hosted:
    return start_hosted(recognizer=recognizer, asr_model=TINY_ID, rate=100_000)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.close()


def _balance(service: Hosted, key: str) -> int:
    account = accounts.authenticate(service.db, f"Bearer {key}").account_id
    return accounts.get_account(service.db, account).balance


@pytest.mark.scaled
def test_caption_only_upload_create_status_and_downloads(service: Hosted, clip: Path) -> None:
    key, _ = service.new_key(credits=1_000)
    with service.client(key) as c:
        up = upload(c, clip, "My Talk (final).mp4")
        assert up.status_code == 200, up.text
        video = up.json()
        assert abs(video["duration_seconds"] - 4.0) < 0.2 and video["size_bytes"] == clip.stat().st_size
        assert video["has_video"] is True and video["filename"] == "My Talk (final).mp4"
        made = create(c, video, originalFileName="My Talk (final).mp4")
        assert made.status_code == 202, made.text
        batch = made.json()
        assert batch["mode"] == "caption" and len(batch["jobIds"]) == 1
        caption = subtitle_jobs.per_minute(round(video["duration_seconds"] * 1000), 30)
        assert batch["perChild"] == batch["totalCredits"] == caption == 2  # ceil(30 x 4 s / 60)
        assert _balance(service, key) == 1_000 - caption  # reserved at once
        job_id = batch["jobIds"][0]
        first = c.get(f"/api/v1/subtitles/{job_id}/status").json()
        assert first["status"] in ("queued", "active", "done") and first["mode"] == "caption"
        assert first["stage"] in ("queued", "recognising", "captioning", "translating", "done")
        done = wait_terminal(c, [job_id])[job_id]
        assert done["status"] == "done" and done["stage"] == "done", done
        assert done["progress_percent"] == 100 and done["credits"] == caption
        assert done["source_lang"] and done["target_lang"] is None and done["batch_id"] == batch["batchId"]
        assert set(done["downloads"]) == {"srt", "vtt", "txt"}
        srt = c.get(f"/api/v1/subtitles/{job_id}/download/srt")
        assert srt.status_code == 200, srt.text
        lang = done["source_lang"]
        assert srt.headers["content-disposition"] == f'attachment; filename="My_Talk_(final).{lang}.srt"'
        items = pysrt.from_string(srt.text)
        assert len(items) >= 1 and all(i.text.strip() for i in items)
        vtt = c.get(f"/api/v1/subtitles/{job_id}/download/vtt")
        assert vtt.status_code == 200 and vtt.headers["content-type"].startswith("text/vtt")
        captions = webvtt.from_buffer(io.StringIO(vtt.text))
        assert [x.text for x in captions.captions] == [i.text for i in items]
        txt = c.get(f"/api/v1/subtitles/{job_id}/download/txt")
        assert txt.status_code == 200 and txt.text.strip()
        assert c.get(f"/api/v1/subtitles/{job_id}/download/bilingual_srt").status_code == 404
        assert c.get(f"/api/v1/subtitles/{job_id}/download/docx").status_code == 400
        assert c.get(f"/api/v1/subtitles/{job_id}/download/srt?lang=xx-nope").status_code == 400
    assert _balance(service, key) == 1_000 - caption  # charged the reservation, nothing more


@pytest.mark.scaled
def test_translate_batch_failing_child_refunded_sibling_done_events_once(
    service: Hosted, clip: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = pipeline.translate_track

    def failing_for_german(track: Any, engine: Any, target: str, **kw: Any) -> Any:
        if target == "de":
            from dragoman.errors import UnsupportedPair

            raise UnsupportedPair("no route to German here (test)")
        return real(track, engine, target, **kw)

    monkeypatch.setattr(pipeline, "translate_track", failing_for_german)
    key, _ = service.new_key(credits=1_000)
    with service.client(key) as c:
        video = upload(c, clip).json()
        made = create(c, video, sourceLang="en", targetLangs=["es", "de"], webhook=receiver.url)
        assert made.status_code == 202, made.text
        batch = made.json()
        assert batch["mode"] == "translate" and batch["sourceLang"] == "en"
        assert batch["targetLangs"] == ["es", "de"] and len(batch["jobIds"]) == 2
        assert batch["captionCredits"] == 2 and batch["perChild"] == 4  # ceil(60 x 4 s / 60)
        assert batch["totalCredits"] == 2 + 2 * 4
        assert _balance(service, key) == 1_000 - 10
        quote = c.post(  # the quote says exactly what the batch reserves (no key needed)
            "/api/v1/quote",
            json={
                "product": "caption",
                "durationSeconds": video["duration_seconds"],
                "targetLangs": ["es", "de"],
            },
        )
        assert quote.status_code == 200, quote.text
        assert quote.json()["credits"] == batch["totalCredits"]
        assert quote.json()["breakdown"]["perChild"] == batch["perChild"]
        bad = c.post("/api/v1/quote", json={"product": "caption", "durationSeconds": "long"})
        assert bad.status_code == 400
        spanish, german = batch["jobIds"]
        ended = wait_terminal(c, [spanish, german])
        assert ended[spanish]["status"] == "done" and ended[spanish]["target_lang"] == "es"
        assert ended[german]["status"] == "failed" and "German" in ended[german]["error"]
        assert ended[german]["credits"] in (None, 0)
        assert set(ended[spanish]["downloads"]) == {"srt", "vtt", "txt", "bilingual_srt"}
        target = c.get(f"/api/v1/subtitles/{spanish}/download/srt")
        source = c.get(f"/api/v1/subtitles/{spanish}/download/srt?lang=en")
        both = c.get(f"/api/v1/subtitles/{spanish}/download/bilingual_srt")
        assert {r.status_code for r in (target, source, both)} == {200}
        assert target.headers["content-disposition"].endswith('.es.srt"')
        assert source.headers["content-disposition"].endswith('.en.srt"')
        assert both.headers["content-disposition"].endswith('.en-es.srt"')
        es_items, en_items, bi_items = (pysrt.from_string(r.text) for r in (target, source, both))
        assert len(es_items) == len(en_items) == len(bi_items) >= 1
        assert [i.start for i in es_items] == [i.start for i in en_items]  # timing kept cue for cue
        for pair, en, es in zip(bi_items, en_items, es_items, strict=True):
            assert pair.text == f"{en.text}\n{es.text}"
        assert c.get(f"/api/v1/subtitles/{german}/download/srt").status_code == 404
    # the failed child refunded, the sibling and the recognition charged
    assert _balance(service, key) == 1_000 - 2 - 4
    done = wait_events(receiver, "subtitle.done", 1)
    failed = wait_events(receiver, "subtitle.failed", 1)
    completed = wait_events(receiver, "subtitle.batch.completed", 1)
    assert done[0]["job_id"] == spanish and done[0]["mode"] == "translate"
    assert done[0]["source_lang"] == "en" and done[0]["target_lang"] == "es"
    assert done[0]["credits_charged"] == 4 and abs(done[0]["duration_seconds"] - 4.0) < 0.2
    assert failed[0]["job_id"] == german and "German" in failed[0]["error_message"]
    assert failed[0]["batch_id"] == batch["batchId"] and failed[0]["credits_refunded"] == 4
    summary = completed[0]
    assert summary["batch_id"] == batch["batchId"] and summary["target_count"] == 2
    assert summary["done_count"] == 1 and summary["failed_count"] == 1
    assert [child["lang"] for child in summary["children"]] == ["es", "de"]
    deadline = time.monotonic() + 60  # every event in the outbox delivered (or failed): a duplicate too
    while webhooks.pending_count(service.db) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert webhooks.pending_count(service.db) == 0
    sent = [e["event"] for e in events(receiver)]
    assert sorted(sent) == ["subtitle.batch.completed", "subtitle.done", "subtitle.failed"], sent


@pytest.mark.scaled
def test_create_refusals(service: Hosted, clip: Path) -> None:
    key, _ = service.new_key(credits=1_000)
    other, _ = service.new_key(credits=1_000)
    poor, _ = service.new_key(credits=3)
    with service.client(key) as c:
        video = upload(c, clip).json()
        wrong = c.post(
            "/api/v1/subtitles/create",
            json={"videoId": video["video_id"], "durationSeconds": video["duration_seconds"] + 2.5},
        )
        assert wrong.status_code == 400 and wrong.json()["code"] == "duration_mismatch"
        assert abs(wrong.json()["probed_seconds"] - video["duration_seconds"]) < 0.01
        close = create(c, {**video, "duration_seconds": video["duration_seconds"] + 0.5})
        assert close.status_code == 202, close.text  # within max(1 s, 2%)
        unknown = create(c, {**video, "video_id": "3f0b8f8e-0000-4000-8000-000000000000"})
        assert unknown.status_code == 404 and unknown.json()["code"] == "media_not_found"
        assert create(c, {**video, "video_id": "../etc/passwd"}).status_code == 404
        bad_lang = create(c, video, targetLangs=["xx-notalanguage"])
        assert bad_lang.status_code == 400 and bad_lang.json()["code"] == "unknown_language"
        same = create(c, video, sourceLang="en", targetLangs=["en"])
        assert same.status_code == 400
        extra = c.post("/api/v1/subtitles/create", json={"videoId": video["video_id"], "bogus": 1})
        assert extra.status_code == 400
    with service.client(other) as c:  # another account's upload is not found, and nothing is reserved
        theirs = create(c, video)
        assert theirs.status_code == 404 and theirs.json()["code"] == "media_not_found"
    assert _balance(service, other) == 1_000
    with service.client(poor) as c:
        own = upload(c, clip).json()
        short = create(c, own, targetLangs=["es"])
        assert short.status_code == 402 and short.json()["code"] == "insufficient_credits"
        assert short.json()["required"] == 2 + 4
    assert _balance(service, poor) == 3  # nothing reserved, no job written


@pytest.mark.scaled
def test_upload_refusals_and_hostile_names(
    service: Hosted, clip: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dragoman.server.hosted import v1_subtitles

    with service.client() as c:
        text = c.post("/api/v1/subtitles/upload", content=b"just some text, not media\n" * 50)
        assert text.status_code == 415 and text.json()["code"] == "unsupported_media"
        silent = make_media(tmp_path / "silent.mp4", 2.0, audio=False)
        mute = c.post("/api/v1/subtitles/upload", content=silent.read_bytes())
        assert mute.status_code == 422 and mute.json()["code"] == "no_audio_stream"
        empty = c.post("/api/v1/subtitles/upload", content=b"")
        assert empty.status_code == 400
        hostile = upload(c, clip, "..%2F..%2Fetc%2Fpasswd%00%0d%0a.mp4")
        assert hostile.status_code == 200, hostile.text
        assert hostile.json()["filename"] == "passwd.mp4"
        video_id = hostile.json()["video_id"]
        storage = service.app.state.storage  # local files, or S3 in the scaled mode
        stored = [o.key for o in storage.list(f"uploads/{video_id}")]
        assert stored == [f"uploads/{video_id}/passwd.mp4"], stored
        if storage.root is not None:
            files = storage.root / "uploads" / video_id
            assert [p.name for p in files.iterdir()] == ["passwd.mp4"]
        long_name = upload(c, clip, "a" * 5000 + ".mp4")
        assert long_name.status_code == 200 and len(long_name.json()["filename"]) <= 255
        monkeypatch.setattr(v1_subtitles, "MAX_UPLOAD_BYTES", 10_000)

        def chunks() -> Iterator[bytes]:  # chunked: no Content-Length to refuse it early
            for _ in range(100):
                yield b"\0" * 1000

        too_big = c.post("/api/v1/subtitles/upload", content=chunks())
        assert too_big.status_code == 413 and too_big.json()["code"] == "file_too_large"
    leftovers = list((service.settings.hosted.data_dir / "tmp").glob("media-*"))
    assert leftovers == []  # spooled bodies are removed whatever happened


@pytest.mark.scaled
def test_create_is_idempotent(service: Hosted, clip: Path) -> None:
    key, _ = service.new_key(credits=1_000)
    with service.client(key) as c:
        video = upload(c, clip).json()
        body = {"videoId": video["video_id"], "durationSeconds": video["duration_seconds"]}
        headers = {"Idempotency-Key": "subtitle-create-1"}
        first = c.post("/api/v1/subtitles/create", json=body, headers=headers)
        again = c.post("/api/v1/subtitles/create", json=body, headers=headers)
        assert first.status_code == again.status_code == 202
        assert again.headers.get("idempotent-replayed") == "true"
        assert again.json() == first.json()
        assert _balance(service, key) == 1_000 - first.json()["totalCredits"]  # reserved once
        other = c.post("/api/v1/subtitles/create", json={**body, "targetLangs": ["es"]}, headers=headers)
        assert other.status_code == 422
        replay = c.post(
            "/api/v1/subtitles/upload",
            content=clip.read_bytes(),
            headers={"Idempotency-Key": "subtitle-upload-1", "x-filename": "a.mp4"},
        )
        replayed = c.post(
            "/api/v1/subtitles/upload",
            content=clip.read_bytes(),
            headers={"Idempotency-Key": "subtitle-upload-1", "x-filename": "a.mp4"},
        )
        assert replayed.json()["video_id"] == replay.json()["video_id"]
        assert replayed.headers.get("idempotent-replayed") == "true"
        wait_terminal(c, first.json()["jobIds"])


@pytest.mark.scaled
def test_cancel_a_child_refunds_it_while_its_sibling_completes(
    service: Hosted, clip: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = threading.Event()
    real = pipeline.recognise_file

    def held(*args: Any, **kwargs: Any) -> Any:
        gate.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "recognise_file", held)
    key, _ = service.new_key(credits=1_000)
    with service.client(key) as c:
        video = upload(c, clip).json()
        batch = create(c, video, sourceLang="en", targetLangs=["es", "de"], webhook=receiver.url).json()
        spanish, german = batch["jobIds"]
        deadline = time.monotonic() + 20
        running: dict[str, Any] = {}
        while time.monotonic() < deadline:  # the engine job holds both children while it recognises
            running = c.get(f"/api/v1/subtitles/{spanish}/status").json()
            if running["stage"] == "recognising":
                break
            time.sleep(0.1)
        assert running["status"] == "active" and running["stage"] == "recognising", running
        assert running["progress_percent"] < 100 and running["credits"] is None
        assert running["downloads"] == {} and running["batch"] == {"active": 2}
        assert c.get(f"/api/v1/jobs/{german}").json()["status"] == "active"
        canceled = c.delete(f"/api/v1/jobs/{german}")
        assert canceled.status_code == 200, canceled.text
        assert canceled.json()["credits_refunded"] == batch["perChild"]
        assert c.delete(f"/api/v1/jobs/{german}").status_code == 409
        gate.set()
        ended = wait_terminal(c, [spanish, german])
        assert ended[spanish]["status"] == "done" and ended[german]["status"] == "canceled"
        assert ended[german]["stage"] == "canceled"
        assert c.get(f"/api/v1/subtitles/{german}/download/srt").status_code == 404
    assert _balance(service, key) == 1_000 - batch["captionCredits"] - batch["perChild"]
    completed = wait_events(receiver, "subtitle.batch.completed", 1)
    assert completed[0]["done_count"] == 1 and completed[0]["canceled_count"] == 1


@pytest.mark.scaled
def test_one_call_upload_and_create(service: Hosted, clip: Path) -> None:
    key, _ = service.new_key(credits=1_000)
    with service.client(key) as c:
        answer = c.post(
            "/api/v1/subtitles?sourceLang=en&targetLangs=es&originalFileName=lecture.mov",
            content=clip.read_bytes(),
            headers={"x-filename": "talk.mp4"},
        )
        assert answer.status_code == 202, answer.text
        made = answer.json()
        assert made["video_id"] and made["size_bytes"] == clip.stat().st_size
        assert made["mode"] == "translate" and made["totalCredits"] == 2 + 4
        job_id = made["jobIds"][0]
        assert wait_terminal(c, [job_id])[job_id]["status"] == "done"
        srt = c.get(f"/api/v1/subtitles/{job_id}/download/srt")
        assert srt.headers["content-disposition"] == 'attachment; filename="lecture.es.srt"'
        # the upload is reusable
        again = create(c, {"video_id": made["video_id"], "duration_seconds": made["durationSeconds"]})
        assert again.status_code == 202
        wait_terminal(c, again.json()["jobIds"])
        bad = c.post("/api/v1/subtitles?targetLangs=xx-nope", content=clip.read_bytes())
        assert bad.status_code == 400
        mismatch = c.post("/api/v1/subtitles?durationSeconds=60", content=clip.read_bytes())
        assert mismatch.status_code == 400 and mismatch.json()["code"] == "duration_mismatch"
        unknown = c.post("/api/v1/subtitles?colour=blue", content=clip.read_bytes())
        assert unknown.status_code == 400
    assert _balance(service, key) == 1_000 - 6 - 2
    # a refused one-call batch leaves no upload behind (local files, or S3 in the scaled mode)
    storage = service.app.state.storage
    folders = {o.key.split("/")[1] for o in storage.list("uploads")}
    assert len(folders) == 1 and re.fullmatch(r"[0-9a-f-]{36}", next(iter(folders))), folders
    if storage.root is not None:
        uploads = storage.root / "uploads"
        assert len(list(uploads.iterdir())) == 1
        assert re.fullmatch(r"[0-9a-f-]{36}", next(uploads.iterdir()).name)


@pytest.mark.slow
def test_procrastinate_defers_one_engine_job_and_a_worker_runs_the_batch(
    start_hosted: StartHosted,
    hosted_engine: tuple[Engine, Path],
    recognizer: Recognizer,
    db_backend: DbBackend,
    clip: Path,
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    """DRAGOMAN_DISPATCH=procrastinate: the batch's engine job alone is deferred, on queue ``subtitle``, in
    the create's transaction; a worker process runs it and delivers the children's events."""
    if not db_backend.is_postgres:
        pytest.skip("Procrastinate runs on PostgreSQL")
    url = db_backend.url(tmp_path / "pg")
    schema_db = Database(url)
    try:
        dispatch.apply_schema(schema_db)
    finally:
        schema_db.dispose()
    hosted = start_hosted(db_url=url, dispatch="procrastinate", recognizer=recognizer, asr_model=TINY_ID)
    with hosted.client() as c:
        video = upload(c, clip).json()
        batch = create(c, video, sourceLang="en", targetLangs=["es"], webhook=receiver.url).json()
        with hosted.db.read() as conn:
            rows = conn.execute(text("SELECT queue_name, args FROM procrastinate_jobs")).mappings().all()
        assert [r["queue_name"] for r in rows] == ["subtitle"]
        assert rows[0]["args"]["job_id"] not in batch["jobIds"]  # the engine job, not a child
        _, root = hosted_engine
        with worker_process(
            "hosted_subtitles_worker.py",
            "subtitle,webhooks",
            db_url=url,
            hosted_dir=hosted.settings.hosted.data_dir,
            packs_dir=root / "packs",
            state_dir=tmp_path / "worker-state",
        ) as worker:
            ended = wait_terminal(c, batch["jobIds"], timeout=120)
            wait_events(receiver, "subtitle.batch.completed", 1)
    (child,) = batch["jobIds"]
    assert ended[child]["status"] == "done", (ended, worker.stderr_tail)
    assert worker.returncode == 0, worker.stderr_tail
    assert sorted(e["event"] for e in events(receiver)) == ["subtitle.batch.completed", "subtitle.done"]
