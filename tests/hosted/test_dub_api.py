"""Hosted dubbing (issue 16; spec 1, 2.9, 4.3, 6, 8) over real HTTP, on SQLite and PostgreSQL, and (the tests
marked ``scaled``) on PostgreSQL + Procrastinate + Redis + S3 (tests/hosted/conftest.py): a dub from an
upload through the real dub pipeline (the tiny Whisper, Apertium en->es, the speech engines), a batch sharing
one recognition run whose failing child is refunded while its sibling completes (webhooks exactly once), a
dub from a URL served on loopback and fetched by the job after the 202 (and the guard refusing it when
loopback is not allowed), 402, 404 for
another account's upload, idempotent creation, the quote, and cancellation."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pysrt
import pytest
from db_support import DbBackend
from hosted_dub_support import FakeDubber, MediaServer, upload, wait_terminal
from hosted_subtitles_support import TINY_ID, events, make_media, tiny_recognizer, wait_events, worker_process
from hosted_support import Hosted, Receiver, StartHosted
from sqlalchemy import func, select, text
from support import needs_apertium

from dragoman.service import accounts, dispatch, dub_jobs, engine_batches, webhooks
from dragoman.service.db import Database
from dragoman.service.db import jobs as jobs_table
from dragoman.speech.asr import Recognizer
from dragoman.speech.tts.synth import Synthesizer
from dragoman.translation.engine import Engine

pytestmark = needs_apertium


@pytest.fixture(scope="session")
def recognizer(hosted_engine: tuple[Engine, Path]) -> Recognizer:
    return tiny_recognizer(hosted_engine[1])


@pytest.fixture(scope="session")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_media(tmp_path_factory.mktemp("dub-media") / "talk.mp4", 4.0)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.close()


def _balance(service: Hosted, key: str) -> int:
    account = accounts.authenticate(service.db, f"Bearer {key}").account_id
    return accounts.get_account(service.db, account).balance


def _dub_jobs(service: Hosted) -> int:
    with service.db.read() as conn:
        return int(
            conn.execute(
                select(func.count()).select_from(jobs_table).where(jobs_table.c.kind == "dub")
            ).scalar()
            or 0
        )


def _body(video_id: str, **fields: Any) -> dict[str, Any]:
    if "targets" not in fields:
        fields["targetLang"] = "es"
    return {"videoId": video_id, "sourceLang": "en", **fields}


def _streams(path: Path) -> list[str]:
    found = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "stream=codec_type", "-of", "json", str(path)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return [s["codec_type"] for s in json.loads(found.stdout)["streams"]]


@pytest.mark.scaled
@pytest.mark.slow
def test_dub_from_an_upload_through_the_pipeline(
    start_hosted: StartHosted, recognizer: Recognizer, clip: Path, tmp_path: Path
) -> None:
    service = start_hosted(recognizer=recognizer, asr_model=TINY_ID, rate=100_000, synthesizer=Synthesizer())
    key, _ = service.new_key(credits=1_000)
    per_target = engine_batches.per_minute(4000, 150)
    assert per_target == 10  # ceil(150 x 4 s / 60)
    with service.client(key) as c:
        video = upload(c, clip, "My Talk.mp4")
        made = c.post(
            "/api/v1/dub", json={"videoId": video["video_id"], "targetLang": "es", "sourceLang": "en"}
        )
        assert made.status_code == 202, made.text
        accepted = made.json()
        assert accepted["batchId"] is None and len(accepted["jobIds"]) == 1  # one targetLang: no batch
        assert (
            accepted["perTarget"]
            == accepted["totalCredits"]
            == engine_batches.per_minute(round(video["duration_seconds"] * 1000), 150)
        )
        assert accepted["voiceId"] == "aria" and accepted["voiceMode"] == "preset"
        reserved = accepted["totalCredits"]
        assert _balance(service, key) == 1_000 - reserved
        job_id = accepted["jobIds"][0]
        first = c.get(f"/api/v1/dub/{job_id}").json()
        assert first["status"] in ("queued", "active", "done") and first["credits"] is None
        done = wait_terminal(c, [job_id], timeout=300)[job_id]
        assert done["status"] == "done" and done["stage"] == "done", done
        assert done["progress_percent"] == 100 and done["credits"] == reserved
        assert done["source_lang"] == "en" and done["target_lang"] == "es" and done["batch_id"] is None
        assert set(done["outputs"]) == {"video", "audio", "srt", "vtt", "txt", "bilingual-srt"}
        assert {"probe", "recognise", "translate", "synthesise", "mix", "mux"} <= set(done["stage_seconds"])
        assert isinstance(done["lines"], int) and isinstance(done["lines_beyond_natural"], list)
        got = c.get(f"/api/v1/dub/{job_id}/video")
        assert got.status_code == 200 and got.headers["content-disposition"].startswith("attachment;")
        out = tmp_path / ("dubbed" + Path(got.headers["content-disposition"].split('"')[1]).suffix)
        out.write_bytes(got.content)
        kinds = _streams(out)
        assert kinds.count("video") == 1 and "audio" in kinds
        audio = c.get(f"/api/v1/dub/{job_id}/audio")
        assert audio.status_code == 200 and audio.headers["content-type"] == "audio/mp4"
        assert audio.headers["content-disposition"] == 'attachment; filename="My_Talk.es.dub.m4a"'
        srt = c.get(f"/api/v1/dub/{job_id}/srt")
        source = c.get(f"/api/v1/dub/{job_id}/srt?lang=en")
        both = c.get(f"/api/v1/dub/{job_id}/bilingual-srt")
        assert {r.status_code for r in (srt, source, both)} == {200}
        assert srt.headers["content-disposition"].endswith('.es.srt"')
        assert len(pysrt.from_string(srt.text)) == len(pysrt.from_string(source.text))
        assert c.get(f"/api/v1/dub/{job_id}/vtt").text.startswith("WEBVTT")
        assert c.get(f"/api/v1/dub/{job_id}/txt").status_code == 200
        assert c.get(f"/api/v1/dub/{job_id}/vtt?lang=de").status_code == 404
        assert c.get(f"/api/v1/dub/{job_id}/audio?lang=en").status_code == 400
    assert _balance(service, key) == 1_000 - reserved  # the subtitle files cost nothing more


@pytest.mark.scaled
def test_batch_recognises_once_failing_child_refunded_events_once(
    start_hosted: StartHosted, recognizer: Recognizer, clip: Path, receiver: Receiver
) -> None:
    dubber = FakeDubber(fail=["de"])
    service = start_hosted(recognizer=recognizer, asr_model=TINY_ID, rate=100_000, dubber=dubber)
    key, _ = service.new_key(credits=1_000)
    with service.client(key) as c:
        video = upload(c, clip)
        body = {
            "videoId": video["video_id"],
            "targets": ["es", "de"],
            "sourceLang": "en",
            "webhook": receiver.url,
        }
        made = c.post("/api/v1/dub", json=body)
        assert made.status_code == 202, made.text
        accepted = made.json()
        assert accepted["batchId"] and accepted["targets"] == ["es", "de"] and accepted["perTarget"] == 10
        assert accepted["totalCredits"] == 20 and _balance(service, key) == 980
        quote = c.post(
            "/api/v1/quote", json={"product": "dub", "durationSeconds": 4.0, "targets": ["es", "de"]}
        )
        assert quote.status_code == 200 and quote.json()["credits"] == 20, quote.text
        assert quote.json()["breakdown"]["perMinute"]["total"] == 150
        spanish, german = accepted["jobIds"]
        wait_terminal(c, [spanish, german])
        # again: each status read once both had ended (the first pass may have read Spanish's, with its batch
        # counts, just before German failed)
        ended = wait_terminal(c, [spanish, german])
        assert ended[spanish]["status"] == "done" and ended[spanish]["credits"] == 10
        assert ended[german]["status"] == "failed" and "no voice for de" in ended[german]["error"]
        assert ended[german]["credits"] in (None, 0) and ended[german]["outputs"] == {}
        assert ended[spanish]["lines"] == 2 and ended[spanish]["lines_beyond_natural"] == [1]
        assert ended[spanish]["batch"] == {"done": 1, "failed": 1}
        assert ended[spanish]["stage_seconds"]["recognise"] > 0  # the shared run's time
        assert c.get(f"/api/v1/dub/{german}/srt").status_code == 404
        assert c.get(f"/api/v1/dub/{spanish}/video").content == clip.read_bytes()
    # one recognition shared by both children
    assert [t for t, _ in dubber.calls] == ["es", "de"]
    assert dubber.calls[0][1] is not None and dubber.calls[0][1] is dubber.calls[1][1]
    assert _balance(service, key) == 990  # the failed child refunded
    done = wait_events(receiver, "dub.done", 1)[0]
    failed = wait_events(receiver, "dub.failed", 1)[0]
    completed = wait_events(receiver, "batch.completed", 1)[0]
    assert done["job_id"] == spanish and done["target_lang"] == "es" and done["credits_charged"] == 10
    assert done["outputs"]["video"].endswith(f"/api/v1/dub/{spanish}/video")
    assert failed["job_id"] == german and failed["credits_refunded"] == 10 and failed["batch_id"]
    assert completed["batch_id"] == accepted["batchId"] and completed["target_count"] == 2
    assert completed["done_count"] == 1 and completed["failed_count"] == 1
    assert [child["target_lang"] for child in completed["children"]] == ["es", "de"]
    deadline = time.monotonic() + 60  # every event in the outbox delivered (or failed): a duplicate too
    while webhooks.pending_count(service.db) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert webhooks.pending_count(service.db) == 0
    assert sorted(e["event"] for e in events(receiver)) == ["batch.completed", "dub.done", "dub.failed"]


@pytest.mark.scaled
def test_dub_from_a_url_on_loopback_and_the_guard(
    start_hosted: StartHosted, recognizer: Recognizer, clip: Path
) -> None:
    service = start_hosted(recognizer=recognizer, asr_model=TINY_ID, rate=100_000, dubber=FakeDubber())
    server = MediaServer({"/media/talk.mp4": clip.read_bytes()}, {"/moved": "/media/talk.mp4"})
    try:
        key, _ = service.new_key(credits=1_000)
        with service.client(key) as c:
            made = c.post(
                "/api/v1/dub", json={"url": server.url("/moved"), "targetLang": "es", "sourceLang": "en"}
            )
            assert made.status_code == 202, made.text
            accepted = made.json()
            # the engine job fetches the media after the 202: nothing is known of it (or reserved) yet
            assert accepted["videoId"] is None and accepted["durationSeconds"] is None
            assert accepted["perTarget"] is None and accepted["totalCredits"] is None
            job_id = accepted["jobIds"][0]
            done = wait_terminal(c, [job_id])[job_id]
            assert done["status"] == "done" and done["video_id"], done
            assert (
                abs(done["duration_seconds"] - 4.0) < 0.2
                and done["credits"] == done["credits_reserved"] == 10
            )
            assert server.hits == ["/moved", "/media/talk.mp4"]  # the redirect followed (checked again)
            assert _balance(service, key) == 990
            # the fetched media is an upload of the account: reusable by subtitles and dubs
            again = c.post("/api/v1/dub", json={"videoId": done["video_id"], "targetLang": "es"})
            assert again.status_code == 202, again.text
            assert again.json()["totalCredits"] == 10
            wait_terminal(c, again.json()["jobIds"])
            missing = c.post("/api/v1/dub", json={"url": server.url("/nothing.mp4"), "targetLang": "es"})
            assert missing.status_code == 202, missing.text
            (lost,) = missing.json()["jobIds"]
            failed = wait_terminal(c, [lost])[lost]
            assert failed["status"] == "failed" and failed["error_code"] == "media_fetch_failed", failed
            assert failed["error"].startswith("media_fetch_failed: ") and "HTTP 404" in failed["error"]
            assert failed["credits"] in (None, 0) and failed["video_id"] is None
            assert _balance(service, key) == 980  # the failed URL dub cost nothing
            service.app.state.media_fetch_allow_private = False  # the operator's default
            refused = c.post("/api/v1/dub", json={"url": server.url("/media/talk.mp4"), "targetLang": "es"})
            assert refused.status_code == 400 and refused.json()["code"] == "invalid_media_url", refused.text
            ftp = c.post("/api/v1/dub", json={"url": "ftp://example.com/a.mp4", "targetLang": "es"})
            assert ftp.status_code == 400
        assert server.hits == ["/moved", "/media/talk.mp4", "/nothing.mp4"]  # refused before connecting
        assert _dub_jobs(service) == 6  # three dubs of an engine job and a child each; the refused wrote none
    finally:
        server.close()


@pytest.mark.scaled
def test_refusals_402_404_and_idempotency(
    start_hosted: StartHosted, recognizer: Recognizer, clip: Path
) -> None:
    service = start_hosted(recognizer=recognizer, asr_model=TINY_ID, rate=100_000, dubber=FakeDubber())
    key, _ = service.new_key(credits=1_000)
    other, _ = service.new_key(credits=1_000)
    poor, _ = service.new_key(credits=15)
    with service.client(key) as c:
        video = upload(c, clip)
    vid = video["video_id"]
    with service.client(other) as c:
        stranger = c.post("/api/v1/dub", json={"videoId": vid, "targetLang": "es"})
        assert stranger.status_code == 404 and stranger.json()["code"] == "media_not_found"
    with service.client(poor) as c:
        mine = upload(c, clip)
        short = c.post("/api/v1/dub", json={"videoId": mine["video_id"], "targets": ["es", "de"]})
        assert short.status_code == 402, short.text
        assert short.json()["required"] == 20 and _balance(service, poor) == 15
        assert _dub_jobs(service) == 0  # nothing written
        one = c.post("/api/v1/dub", json={"videoId": mine["video_id"], "targetLang": "es"})
        assert one.status_code == 202 and _balance(service, poor) == 5
    with service.client(key) as c:
        for body, code in (
            ({"videoId": vid}, 400),  # no target
            ({"videoId": vid, "targetLang": "es", "targets": ["de"]}, 400),
            ({"targetLang": "es"}, 400),  # no media
            ({"videoId": vid, "url": "http://example.com/a.mp4", "targetLang": "es"}, 400),
            ({"videoId": vid, "targetLang": "xx-nope"}, 400),
            ({"videoId": vid, "targetLang": "es", "voiceId": "nobody"}, 400),
            ({"videoId": vid, "targetLang": "es", "voiceMode": "karaoke"}, 400),
            ({"videoId": vid, "targetLang": "es", "voiceMode": "clone"}, 400),
            ({"videoId": vid, "targetLang": "es", "sourceLang": "es"}, 400),
            ({"videoId": vid, "targetLang": "es", "cloneId": "6f1c7a52-1b9e-4f41-9a55-0c3f5d0e9b11"}, 404),
            ({"videoId": vid, "targetLang": "es", "extra": 1}, 400),
        ):
            answer = c.post("/api/v1/dub", json=body)
            assert answer.status_code == code, (body, answer.text)
        headers = {"Idempotency-Key": "dub-once"}
        body = {"videoId": vid, "targetLang": "es"}
        first = c.post("/api/v1/dub", json=body, headers=headers)
        second = c.post("/api/v1/dub", json=body, headers=headers)
        assert first.status_code == second.status_code == 202
        assert second.headers.get("idempotent-replayed") == "true"
        assert first.json()["jobIds"] == second.json()["jobIds"]
        assert c.post("/api/v1/dub", json={**body, "targetLang": "de"}, headers=headers).status_code == 422
        job_id = first.json()["jobIds"][0]
        wait_terminal(c, [job_id])
    with service.client(other) as c:
        assert c.get(f"/api/v1/dub/{job_id}").status_code == 404  # another account's job
        assert c.get(f"/api/v1/dub/{job_id}/srt").status_code == 404


@pytest.mark.scaled
def test_cancel_a_child_refunds_it_while_its_sibling_completes(
    start_hosted: StartHosted, recognizer: Recognizer, clip: Path, receiver: Receiver
) -> None:
    gate = threading.Event()
    dubber = FakeDubber(gate=gate)
    service = start_hosted(recognizer=recognizer, asr_model=TINY_ID, rate=100_000, dubber=dubber)
    key, _ = service.new_key(credits=1_000)
    with service.client(key) as c:
        video = upload(c, clip)
        body: dict[str, Any] = {"videoId": video["video_id"], "targets": ["es", "fr"], "sourceLang": "en"}
        made = c.post("/api/v1/dub", json={**body, "webhook": receiver.url})
        assert made.status_code == 202, made.text
        spanish, french = made.json()["jobIds"]
        assert dubber.started.wait(60)  # the engine job dubs Spanish now
        status = c.get(f"/api/v1/dub/{french}").json()
        assert status["status"] == "active" and status["stage"] == "waiting", status
        assert c.get(f"/api/v1/dub/{spanish}").json()["stage"] == "dubbing"
        canceled = c.delete(f"/api/v1/jobs/{french}")
        assert canceled.status_code == 200 and canceled.json()["credits_refunded"] == 10
        gate.set()
        ended = wait_terminal(c, [spanish, french])
        assert ended[spanish]["status"] == "done" and ended[french]["status"] == "canceled"
        assert c.delete(f"/api/v1/jobs/{french}").status_code == 409
    assert [t for t, _ in dubber.calls] == ["es"]  # the canceled child was never dubbed
    assert _balance(service, key) == 990
    completed = wait_events(receiver, "batch.completed", 1)[0]
    assert completed["done_count"] == 1 and completed["canceled_count"] == 1


@pytest.mark.scaled
def test_canceling_the_running_dub_stops_it_and_deletes_nothing_kept(
    start_hosted: StartHosted, recognizer: Recognizer, clip: Path
) -> None:
    dubber = FakeDubber(gate=threading.Event())  # never opened: the dub waits until canceled
    service = start_hosted(recognizer=recognizer, asr_model=TINY_ID, rate=100_000, dubber=dubber)
    key, _ = service.new_key(credits=1_000)
    with service.client(key) as c:
        video = upload(c, clip)
        made = c.post(
            "/api/v1/dub", json={"videoId": video["video_id"], "targetLang": "es", "sourceLang": "en"}
        )
        job_id = made.json()["jobIds"][0]
        assert dubber.started.wait(60)
        assert c.delete(f"/api/v1/jobs/{job_id}").json()["credits_refunded"] == 10
        ended = wait_terminal(c, [job_id])[job_id]
        assert ended["status"] == "canceled" and ended["outputs"] == {}
        engine_id = str(made.json()["jobIds"][0])
    assert _balance(service, key) == 1_000
    # the engine job sees the cancellation at its next check and ends (no child left)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with service.db.read() as conn:
            pending = conn.execute(
                select(func.count())
                .select_from(jobs_table)
                .where(jobs_table.c.kind == "dub", jobs_table.c.status.in_(["queued", "active"]))
            ).scalar()
        if not pending:
            break
        time.sleep(0.2)
    assert not pending, engine_id
    assert not list(service.app.state.storage.list(dub_jobs.PREFIX))


@pytest.mark.slow
def test_procrastinate_runs_the_dub_on_its_queue(
    start_hosted: StartHosted,
    recognizer: Recognizer,
    clip: Path,
    receiver: Receiver,
    db_backend: DbBackend,
    hosted_engine: tuple[Engine, Path],
    tmp_path: Path,
) -> None:
    """DRAGOMAN_DISPATCH=procrastinate: the dub's engine job alone is deferred, on queue ``dub``, in the
    create's transaction; a worker process runs it through the pipeline and delivers the events."""
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
        video = upload(c, clip)
        made = c.post("/api/v1/dub", json=_body(video["video_id"], targets=["es"], webhook=receiver.url))
        assert made.status_code == 202, made.text
        accepted = made.json()
        with hosted.db.read() as conn:
            rows = conn.execute(text("SELECT queue_name, args FROM procrastinate_jobs")).mappings().all()
        assert [r["queue_name"] for r in rows] == ["dub"]
        assert rows[0]["args"]["job_id"] not in accepted["jobIds"]  # the engine job, not a child
        _, root = hosted_engine
        with worker_process(
            "hosted_dub_worker.py",
            "dub,webhooks",
            db_url=url,
            hosted_dir=hosted.settings.hosted.data_dir,
            packs_dir=root / "packs",
            state_dir=tmp_path / "worker-state",
        ) as worker:
            ended = wait_terminal(c, accepted["jobIds"], timeout=240)
            wait_events(receiver, "batch.completed", 1)
        (child,) = accepted["jobIds"]
        assert ended[child]["status"] == "done", (ended, worker.stderr_tail)
        assert c.get(f"/api/v1/dub/{child}/audio").status_code == 200
    assert worker.returncode == 0, worker.stderr_tail
    assert sorted(e["event"] for e in events(receiver)) == ["batch.completed", "dub.done"]
