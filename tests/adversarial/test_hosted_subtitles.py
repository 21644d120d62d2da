"""Adversarial use of the hosted subtitle routes (issue 15), over real HTTP with the tiny Whisper: hostile
media and headers are typed 4xx (never 5xx) and leave nothing behind; concurrent idempotent creates reserve
once; cancels racing the engine's completion of a child settle each child exactly once and the batch event
fires once; an engine job canceled under its children fails and refunds them; another key's jobs and uploads
stay invisible."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from hosted_subtitles_support import (
    TINY_ID,
    create,
    events,
    make_media,
    tiny_recognizer,
    upload,
    wait_events,
    wait_terminal,
)
from hosted_support import Hosted, Receiver, make_engine, start_service
from sqlalchemy import select
from support import needs_apertium

from dragoman.pipelines import subtitles as pipeline
from dragoman.service import accounts
from dragoman.service.db import ledger

pytestmark = needs_apertium


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosted]:
    root = tmp_path_factory.mktemp("hosted-subtitles")
    with make_engine(root) as engine:
        running = start_service(
            engine, root, root / "data", rate=100_000, recognizer=tiny_recognizer(root), asr_model=TINY_ID
        )
        try:
            yield running
        finally:
            running.stop()
            running.db.dispose()


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_media(tmp_path_factory.mktemp("media") / "clip.mp4", 3.0)


def _balance(service: Hosted, key: str) -> int:
    account = accounts.authenticate(service.db, f"Bearer {key}").account_id
    return accounts.get_account(service.db, account).balance


def _uploads(service: Hosted) -> set[str]:
    folder = service.settings.hosted.data_dir / "files" / "uploads"
    return {p.name for p in folder.iterdir()} if folder.exists() else set()


def test_hostile_media_is_typed_and_leaves_nothing(service: Hosted, clip: Path, tmp_path: Path) -> None:
    from PIL import Image

    png = tmp_path / "fake.mp4"
    Image.new("RGB", (32, 32), "red").save(png, format="PNG")
    whole = clip.read_bytes()
    bodies = {
        "truncated": whole[: len(whole) // 3],
        "png named mp4": png.read_bytes(),
        "random": bytes(range(256)) * 64,
        "zeros": b"\0" * 10_000,
        "ftyp only": b"\0\0\0\x18ftypmp42\0\0\0\0mp42isom",
        "json": json.dumps({"videoId": "x"}).encode(),
    }
    before = _uploads(service)
    with service.client() as c:
        for name, body in bodies.items():
            answer = c.post("/api/v1/subtitles/upload", content=body, headers={"x-filename": f"{name}.mp4"})
            assert 400 <= answer.status_code < 500, (name, answer.status_code, answer.text)
            assert answer.json()["code"] in ("unsupported_media", "no_audio_stream", "empty_media"), name
            one = c.post("/api/v1/subtitles?targetLangs=es", content=body)
            assert 400 <= one.status_code < 500, (name, one.text)
    assert _uploads(service) == before
    assert not list((service.settings.hosted.data_dir / "tmp").glob("media-*"))


@pytest.mark.parametrize(
    "header",
    [
        "%ff%fe%00.mp4",
        "%",
        "..",
        "/",
        "\\\\server\\share\\x.mp4",
        "CON",
        "a/" * 500 + "b.mp4",
        "%20",
        "%2e%2e",
    ],
)
def test_hostile_file_names_are_recorded_safely(service: Hosted, clip: Path, header: str) -> None:
    with service.client() as c:
        answer = upload(c, clip, header)
        assert answer.status_code == 200, answer.text
        video = answer.json()
        assert "/" not in video["filename"] and "\\" not in video["filename"].replace("\\\\", "")
        assert len(video["filename"]) <= 255
        stored = service.settings.hosted.data_dir / "files" / "uploads" / video["video_id"]
        (only,) = list(stored.iterdir())
        assert only.resolve().parent == stored.resolve() and not only.name.startswith(".")


def test_concurrent_idempotent_creates_reserve_once(service: Hosted, clip: Path) -> None:
    key, _ = service.new_key(credits=1_000)
    with service.client(key) as c:
        video = upload(c, clip).json()
    body = {"videoId": video["video_id"], "durationSeconds": video["duration_seconds"], "targetLangs": ["es"]}
    barrier = threading.Barrier(8)

    def one(_: int) -> httpx.Response:
        with service.client(key) as c:
            barrier.wait()
            return c.post("/api/v1/subtitles/create", json=body, headers={"Idempotency-Key": "same"})

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(one, range(8)))
    made = [a for a in answers if a.status_code == 202]
    assert made and all(a.status_code in (202, 409) for a in answers), [a.status_code for a in answers]
    assert len({a.json()["batchId"] for a in made}) == 1
    total = made[0].json()["totalCredits"]
    assert _balance(service, key) == 1_000 - total
    with service.client(key) as c:
        wait_terminal(c, made[0].json()["jobIds"])
        jobs = c.get("/api/v1/jobs").json()
    assert jobs["total"] == 2  # one engine job and one child: one batch


def test_cancels_racing_completion_settle_each_child_once(service: Hosted, clip: Path) -> None:
    receiver = Receiver()
    try:
        key, _ = service.new_key(credits=10_000)
        targets = ["es", "de", "fr", "it"]
        with service.client(key) as c:
            video = upload(c, clip).json()
            batches = [
                create(c, video, sourceLang="en", targetLangs=targets, webhook=receiver.url).json()
                for _ in range(3)
            ]
        reserved = sum(b["totalCredits"] for b in batches)
        assert _balance(service, key) == 10_000 - reserved
        children = [job for b in batches for job in b["jobIds"]]

        def cancel(job_id: str) -> int:
            time.sleep((hash(job_id) % 20) / 10)  # spread over the engine's run
            with service.client(key) as c:
                return c.delete(f"/api/v1/jobs/{job_id}").status_code

        with ThreadPoolExecutor(6) as pool:
            codes = list(pool.map(cancel, children[::2]))
        assert set(codes) <= {200, 409}
        with service.client(key) as c:
            ended = wait_terminal(c, children, timeout=180)
        # every child settled once: charged (done), or its whole reservation back (failed, canceled)
        account = accounts.authenticate(service.db, f"Bearer {key}").account_id
        with service.db.read() as conn:
            rows = conn.execute(
                select(ledger.c.job_id, ledger.c.entry).where(ledger.c.account_id == account)
            ).all()
        settled: dict[str, list[str]] = {}
        for job_id, entry in rows:
            if entry in ("charge", "refund"):
                settled.setdefault(str(job_id), []).append(str(entry))
        for job_id in children:
            expected = ["charge"] if ended[job_id]["status"] == "done" else ["refund"]
            assert settled.get(job_id) == expected, (job_id, ended[job_id]["status"], settled.get(job_id))
        spent = sum(int(a["credits"] or 0) for a in ended.values())
        recognition = sum(  # a batch pays its recognition when at least one of its children is done
            b["captionCredits"] for b in batches if any(ended[j]["status"] == "done" for j in b["jobIds"])
        )
        wait_until = time.monotonic() + 30
        while _balance(service, key) != 10_000 - spent - recognition and time.monotonic() < wait_until:
            time.sleep(0.2)  # the engine jobs settle after their last child
        assert _balance(service, key) == 10_000 - spent - recognition
        wait_events(receiver, "subtitle.batch.completed", len(batches))
        time.sleep(1.0)  # anything sent twice would have arrived by now
        sent = events(receiver)
        completed = [e["batch_id"] for e in sent if e["event"] == "subtitle.batch.completed"]
        assert sorted(completed) == sorted(b["batchId"] for b in batches)
        done_events = [e["job_id"] for e in sent if e["event"] == "subtitle.done"]
        assert sorted(done_events) == sorted(j for j in children if ended[j]["status"] == "done")
        canceled = {j for j in children if ended[j]["status"] == "canceled"}
        assert not [e for e in sent if e.get("job_id") in canceled]
    finally:
        receiver.close()


def test_an_engine_job_canceled_under_its_children_fails_and_refunds_them(
    service: Hosted, clip: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = threading.Event()
    real = pipeline.recognise_file

    def held(*args: Any, **kwargs: Any) -> Any:
        gate.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "recognise_file", held)
    key, _ = service.new_key(credits=1_000)
    try:
        with service.client(key) as c:
            video = upload(c, clip).json()
            batch = create(c, video, sourceLang="en", targetLangs=["es"]).json()
            listed = c.get("/api/v1/jobs").json()["jobs"]
            (engine,) = [j["job_id"] for j in listed if j["job_id"] not in batch["jobIds"]]
            assert c.delete(f"/api/v1/jobs/{engine}").status_code == 200
            child = batch["jobIds"][0]
            assert c.get(f"/api/v1/jobs/{child}").json()["status"] == "failed"  # at once, not at a poll
            gate.set()
            ended = wait_terminal(c, [child])[child]
            assert ended["status"] == "failed" and "recognition" in ended["error"]
    finally:
        gate.set()
    assert _balance(service, key) == 1_000  # the recognition and the child both refunded


def test_other_keys_see_nothing(service: Hosted, clip: Path) -> None:
    key, _ = service.new_key(credits=1_000)
    stranger, _ = service.new_key(credits=1_000)
    with service.client(key) as c:
        video = upload(c, clip).json()
        job = create(c, video).json()["jobIds"][0]
        wait_terminal(c, [job])
    with service.client(stranger) as c:
        for path in (
            f"/api/v1/subtitles/{job}/status",
            f"/api/v1/subtitles/{job}/download/srt",
            f"/api/v1/jobs/{job}",
        ):
            answer = c.get(path)
            assert answer.status_code == 404, (path, answer.text)
        assert c.delete(f"/api/v1/jobs/{job}").status_code == 404
        assert create(c, video).status_code == 404
    with service.client(key) as c:
        for fmt in ("..%2F..%2Fsecrets", "srt%00", "SRT", "srt.exe"):
            answer = c.get(f"/api/v1/subtitles/{job}/download/{fmt}")
            assert answer.status_code in (400, 404), (fmt, answer.status_code)
        for lang in ("../../x", "e" * 100, "%00", "zz"):
            answer = c.get(f"/api/v1/subtitles/{job}/download/srt", params={"lang": lang})
            assert answer.status_code in (400, 404), (lang, answer.status_code)


def test_a_recognition_that_fails_for_good_fails_and_refunds_every_child(
    service: Hosted, clip: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dragoman.errors import MediaFormatError

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise MediaFormatError("the stored media cannot be decoded (test)")

    monkeypatch.setattr(pipeline, "recognise_file", broken)
    receiver = Receiver()
    key, _ = service.new_key(credits=1_000)
    try:
        with service.client(key) as c:
            video = upload(c, clip).json()
            batch = create(c, video, sourceLang="en", targetLangs=["es", "de"], webhook=receiver.url).json()
            ended = wait_terminal(c, batch["jobIds"])
            assert {a["status"] for a in ended.values()} == {"failed"}
            assert all("cannot be decoded" in a["error"] for a in ended.values())
            engine = [j for j in c.get("/api/v1/jobs").json()["jobs"] if j["job_id"] not in batch["jobIds"]]
            assert [j["status"] for j in engine] == ["failed"]
        wait_events(receiver, "subtitle.batch.completed", 1)
        time.sleep(1.0)
        sent = sorted(e["event"] for e in events(receiver))
        assert sent == ["subtitle.batch.completed", "subtitle.failed", "subtitle.failed"], sent
    finally:
        receiver.close()
    assert _balance(service, key) == 1_000  # the recognition and both children refunded


def test_expired_uploads_are_refused_then_purged(service: Hosted, clip: Path) -> None:
    from sqlalchemy import update

    from dragoman.service import retention
    from dragoman.service.db import media, now_ms

    key, _ = service.new_key(credits=1_000)
    with service.client(key) as c:
        video = upload(c, clip).json()
        with service.db.write() as conn:
            conn.execute(update(media).where(media.c.id == video["video_id"]).values(expires_ms=now_ms() - 1))
        expired = create(c, video)
        assert expired.status_code == 404 and "expired" in expired.json()["error"]
    retention.purge(service.db, service.app.state.storage, service.settings, now_ms())
    with service.db.read() as conn:
        assert conn.execute(select(media.c.id).where(media.c.id == video["video_id"])).first() is None
    assert _balance(service, key) == 1_000


@pytest.mark.parametrize(
    ("suffix", "codecs"),
    [
        (".mkv", ["-c:v", "mpeg4", "-c:a", "aac"]),
        (".webm", ["-c:v", "libvpx", "-c:a", "libopus"]),
        (".mov", ["-c:v", "mpeg4", "-c:a", "aac"]),
        (".mp3", ["-c:a", "libmp3lame"]),
        (".wav", ["-c:a", "pcm_s16le"]),
        (".ogg", ["-c:a", "libvorbis"]),
        (".flac", ["-c:a", "flac"]),
        (".m4a", ["-c:a", "aac"]),
    ],
)
def test_every_container_uploads_with_its_probed_duration(
    service: Hosted, tmp_path: Path, suffix: str, codecs: list[str]
) -> None:
    import subprocess

    path = tmp_path / f"clip{suffix}"
    video = "-c:v" in codecs
    args = ["ffmpeg", "-y", "-v", "error", "-f", "lavfi", "-i", "sine=frequency=300:duration=2.5"]
    if video:
        args += ["-f", "lavfi", "-i", "testsrc=size=64x48:rate=5:duration=2.5"]
    subprocess.run([*args, *codecs, "-shortest", str(path)], check=True, capture_output=True, timeout=60)
    with service.client() as c:
        answer = upload(c, path)
        assert answer.status_code == 200, (suffix, answer.text)
        body = answer.json()
        assert abs(body["duration_seconds"] - 2.5) < 0.15 and body["has_video"] is video
        assert body["size_bytes"] == path.stat().st_size


def test_a_target_that_is_the_spoken_language_is_refused_and_refunded(
    service: Hosted, clip: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    real = pipeline.caption_track

    def heard_spanish(*args: Any, **kwargs: Any) -> Any:
        return dataclasses.replace(real(*args, **kwargs), language="es")

    monkeypatch.setattr(pipeline, "caption_track", heard_spanish)
    key, _ = service.new_key(credits=1_000)
    with service.client(key) as c:
        video = upload(c, clip).json()
        batch = create(c, video, targetLangs=["es"]).json()  # sourceLang auto
        (child,) = batch["jobIds"]
        ended = wait_terminal(c, [child])[child]
        assert ended["status"] == "failed" and "spoken in es" in ended["error"], ended
        assert ended["source_lang"] == "es"
    deadline = time.monotonic() + 10
    while _balance(service, key) != 1_000 and time.monotonic() < deadline:
        time.sleep(0.1)  # the engine job settles (released: no child done) after its child
    assert _balance(service, key) == 1_000


def test_retention_deletes_subtitle_files_and_uploads(service: Hosted, clip: Path) -> None:
    from dragoman.service import retention
    from dragoman.service.db import now_ms

    key, _ = service.new_key(credits=1_000)
    files = service.settings.hosted.data_dir / "files"
    with service.client(key) as c:
        video = upload(c, clip).json()
        batch = create(c, video, sourceLang="en", targetLangs=["es"]).json()
        (child,) = batch["jobIds"]
        wait_terminal(c, [child])
        assert c.get(f"/api/v1/subtitles/{child}/download/srt").status_code == 200
        stored = [p for p in (files / "subtitles").rglob("*") if p.is_file()]
        assert len(stored) >= 7  # the source track (3) and the target's (3) plus the bilingual SRT
        later = now_ms() + 31 * 86_400_000  # past the 30 days of results and the 7 days of uploads
        retention.purge(service.db, service.app.state.storage, service.settings, later)
        assert c.get(f"/api/v1/subtitles/{child}/download/srt").status_code == 404
        assert not [p for p in stored if p.exists()]
        assert not (files / "uploads" / video["video_id"]).exists()
        assert create(c, video).status_code == 404  # the upload's row went too
