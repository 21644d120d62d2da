"""Hosted v1 voice rendering over real HTTP (issue 14, spec 4.2): inline WAV with real RIFF sizes, the
chunked stream starting before the render ends (measured), long texts as jobs with ``audio_url``, credits per
spec 8, the 400s, and the ``tts.done`` / ``tts.failed`` (refunded) webhooks."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hosted_support import Hosted, Receiver

from dragoman import webhooks as public_webhooks
from dragoman.errors import InvalidRequest
from dragoman.media.audio import read_wav
from dragoman.service import accounts, billing
from dragoman.speech.tts.synth import Synthesizer

pytestmark = pytest.mark.scaled  # also in the scaled mode: PostgreSQL+Procrastinate+Redis+S3

SENTENCE = "The quick brown fox jumps over the lazy dog. "


def wait_tts(client: httpx.Client, job_id: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    delay = 0.2
    while True:
        response = client.get(f"/api/v1/tts/jobs/{job_id}")
        if response.status_code == 429 and time.monotonic() < deadline:
            time.sleep(float(response.headers["Retry-After"]))
            continue
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        if body["status"] in ("done", "failed", "canceled") or time.monotonic() > deadline:
            return body
        time.sleep(delay)
        delay = min(1.0, delay * 1.5)


def riff_sizes(data: bytes) -> tuple[int, int, int]:
    """(RIFF size field, data size field, offset of the samples) of a canonical WAV."""
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE", data[:16]
    (riff,) = struct.unpack_from("<I", data, 4)
    at = 12
    while at + 8 <= len(data):
        tag, size = data[at : at + 4], struct.unpack_from("<I", data, at + 4)[0]
        if tag == b"data":
            return riff, size, at + 8
        at += 8 + size
    raise AssertionError("no data chunk")


def balance(hosted: Hosted, account_id: str) -> int:
    return accounts.get_account(hosted.db, account_id).balance


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


SECRETS: dict[str, str] = {}


def _account(hosted: Hosted, credits: int = 10_000, **options: Any) -> tuple[str, str]:
    """A fresh account's key and account id (the key's webhook secret kept in SECRETS)."""
    account = accounts.create_account(hosted.db, credits=credits)
    made = accounts.create_key(hosted.db, account.id, **options)
    SECRETS[made.key] = made.webhook_secret
    return made.key, account.id


# ----- voices ---------------------------------------------------------------------------------------------
def test_voices_need_no_key_and_list_ten_voices_31_languages_and_their_engines(hosted: Hosted) -> None:
    with hosted.client("") as c:
        r = c.get("/api/v1/tts/voices")
    assert r.status_code == 200, r.text
    body = r.json()
    assert [v["name"] for v in body["voices"]] == [
        "aria", "nova", "lyra", "iris", "maya", "marcus", "atlas", "felix", "orion", "kai",
    ]  # fmt: skip
    assert len(body["languages"]) == 31 and all(len(lang["code"]) == 2 for lang in body["languages"])
    assert set(body["emotions"]) == {"whisper", "shout", "sad", "urgent", "excited", "warm", "calm"}
    english = body["voices"][0]["languages"]["en"]["standard"]
    assert english["engine"] and english["engine_voice"]
    assert body["limits"]["min_credits"] == 50 and body["limits"]["inline_chars"] == 1500


# ----- inline ---------------------------------------------------------------------------------------------
def test_short_text_answers_a_wav_with_real_riff_sizes_and_charges_the_minimum(hosted: Hosted) -> None:
    key, account = _account(hosted)
    with hosted.client(key) as c:
        r = c.post(
            "/api/v1/tts/synth",
            json={"voiceId": "aria", "targetLang": "en", "text": "Hello there. How are you today?"},
        )
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "audio/wav"
        job = c.get(f"/api/v1/tts/jobs/{r.headers['x-job-id']}").json()
        audio = c.get(job["audio_url"])
    riff, data_size, start = riff_sizes(r.content)
    assert riff == len(r.content) - 8 and data_size == len(r.content) - start
    parsed = read_wav(r.content)
    assert 0.8 < parsed.duration < 10
    assert float(r.headers["x-duration-seconds"]) == pytest.approx(parsed.duration, abs=0.01)
    assert int(r.headers["x-credits"]) == 50 == job["credits"]
    assert job["status"] == "done" and job["sync"] is True and job["voice_id"] == "aria"
    assert job["target_lang"] == "en" and job["char_count"] == 31 and job["mode"] == "standard"
    assert audio.status_code == 200 and audio.content == r.content
    assert balance(hosted, account) == 10_000 - 50


# ----- streaming ------------------------------------------------------------------------------------------
def test_stream_sends_the_first_sentence_before_the_last_is_rendered(hosted: Hosted) -> None:
    synthesizer: Synthesizer = hosted.app.state.synthesizer
    rendered: list[float] = []
    original = synthesizer._render

    def timed(plan: Any, index: int) -> Any:
        piece = original(plan, index)
        rendered.append(time.monotonic())
        return piece

    synthesizer._render = timed  # type: ignore[method-assign]
    key, account = _account(hosted)
    text = " ".join(f"This is sentence number {n} of the streamed test." for n in range(1, 9))
    try:
        with hosted.client(key) as c:
            sent = time.monotonic()
            with c.stream(
                "POST",
                "/api/v1/tts/synth/stream",
                json={"voiceId": "marcus", "targetLang": "en", "text": text},
            ) as r:
                assert r.status_code == 200
                assert r.headers["content-type"] == "audio/wav"
                assert r.headers.get("transfer-encoding") == "chunked"
                first_at: float | None = None
                body = b""
                for chunk in r.iter_raw():
                    if first_at is None and len(body + chunk) > 44:
                        first_at = time.monotonic()
                    body += chunk
            job = c.get(f"/api/v1/tts/jobs/{r.headers['x-job-id']}").json()
    finally:
        del synthesizer._render
    assert len(rendered) == 8 and first_at is not None
    # the first audio bytes came before the last sentence was even rendered
    assert first_at < rendered[-1], (first_at - sent, rendered[-1] - sent)
    assert first_at < rendered[-2]
    riff, data_size, start = riff_sizes(body)
    assert riff == 0xFFFFFFFF and data_size == 0xFFFFFFFF
    assert (len(body) - start) % 2 == 0 and len(body) - start > 16000
    assert job["status"] == "done" and job["credits"] == 50
    assert balance(hosted, account) == 10_000 - 50


def test_stream_refuses_bad_options_before_any_audio_and_charges_nothing(hosted: Hosted) -> None:
    key, account = _account(hosted)
    with hosted.client(key) as c:
        r = c.post("/api/v1/tts/synth/stream", json={"voiceId": "zed", "targetLang": "en", "text": "Hi."})
    assert r.status_code == 400 and r.json()["code"] == "invalid_request"
    assert balance(hosted, account) == 10_000


# ----- jobs -----------------------------------------------------------------------------------------------
def test_long_text_becomes_a_job_with_an_audio_url_and_a_tts_done_webhook(
    hosted: Hosted, receiver: Receiver
) -> None:
    key, account = _account(hosted, webhook_url=receiver.url)
    text = (SENTENCE * 40).strip()  # 1,799 characters: past the inline limit
    with hosted.client(key) as c:
        r = c.post("/api/v1/tts/synth", json={"voiceId": "nova", "targetLang": "en", "text": text})
        assert r.status_code == 202, r.text
        accepted = r.json()
        assert accepted["status"] == "queued" and accepted["sync"] is False
        assert accepted["poll_url"].endswith(f"/api/v1/tts/jobs/{accepted['job_id']}")
        assert accepted["credits_reserved"] == billing.tts_quote(len(text)).credits == 50
        job = wait_tts(c, accepted["job_id"])
        assert job["status"] == "done", job
        audio = c.get(job["audio_url"])
        listed = c.get(f"/api/v1/jobs/{job['job_id']}").json()
    assert audio.status_code == 200 and audio.headers["content-type"] == "audio/wav"
    riff, data_size, start = riff_sizes(audio.content)
    assert riff == len(audio.content) - 8 and data_size == len(audio.content) - start
    parsed = read_wav(audio.content)
    assert parsed.duration == pytest.approx(job["duration_seconds"], abs=0.01)
    assert parsed.duration > 60  # 40 sentences of nine words
    assert job["progress_percent"] == 100 and job["credits"] == 50 and listed["status"] == "done"
    assert balance(hosted, account) == 10_000 - 50
    receiver.wait()
    headers, raw = receiver.received[0]
    payload = public_webhooks.verify(raw, headers, SECRETS[key])
    assert payload["event"] == "tts.done" and payload["job_id"] == job["job_id"]
    assert payload["voice_id"] == "nova" and payload["target_lang"] == "en"
    assert payload["char_count"] == len(text) and payload["audio_url"] == job["audio_url"]
    assert payload["duration_seconds"] == job["duration_seconds"]


class _Quick:
    """A stand-in render (a tenth of a second of silence a call) for the credit and failure tests, whose
    subject is the money, not the audio."""

    def __init__(self, synthesizer: Synthesizer, fail: bool = False) -> None:
        self.synthesizer = synthesizer
        self.fail = fail

    def __call__(self, text: str, options: Any, context: Any = None) -> Any:
        from dragoman.media.audio import Audio
        from dragoman.speech.tts.types import SynthesisResult

        if self.fail:
            raise InvalidRequest("the engine refused this text")
        return SynthesisResult(
            audio=Audio.silence(0.1, 16000),
            voice=options.voice,
            engine="stand-in",
            engine_voice="silence",
            language=options.language,
            words=None,
            options=options,
            seconds=0.0,
        )


@pytest.mark.parametrize(
    ("chars", "mode", "expected"),
    [(10_000, "standard", 50), (10_200, "standard", 51), (10_001, "studio", 151), (3_000, "studio", 50)],
)
def test_credits_follow_spec_8(hosted: Hosted, chars: int, mode: str, expected: int) -> None:
    synthesizer: Synthesizer = hosted.app.state.synthesizer
    synthesizer.synthesize = _Quick(synthesizer)  # type: ignore[method-assign]
    key, account = _account(hosted)
    text = ("a" * 9 + " ") * (chars // 10) + "b" * (chars % 10)
    assert len(text) == chars
    try:
        with hosted.client(key) as c:
            r = c.post(
                "/api/v1/tts/synth", json={"voiceId": "kai", "targetLang": "en", "text": text, "mode": mode}
            )
            assert r.status_code == 202, r.text
            assert r.json()["credits_reserved"] == expected
            job = wait_tts(c, r.json()["job_id"])
    finally:
        del synthesizer.synthesize
    assert job["status"] == "done" and job["credits"] == expected and job["mode"] == mode
    assert balance(hosted, account) == 10_000 - expected
    assert billing.tts_quote(chars, studio=mode == "studio").credits == expected
    assert billing.tts_quote(10_000, studio=True, clone=True).credits == 300
    assert billing.tts_quote(10_000, clone=True).credits == 150


def test_a_failed_render_is_refunded_and_sends_tts_failed(hosted: Hosted, receiver: Receiver) -> None:
    synthesizer: Synthesizer = hosted.app.state.synthesizer
    synthesizer.synthesize = _Quick(synthesizer, fail=True)  # type: ignore[method-assign]
    key, account = _account(hosted, webhook_url=receiver.url)
    try:
        with hosted.client(key) as c:
            r = c.post(
                "/api/v1/tts/synth", json={"voiceId": "kai", "targetLang": "en", "text": SENTENCE * 40}
            )
            assert r.status_code == 202, r.text
            job = wait_tts(c, r.json()["job_id"])
            audio = c.get(f"/api/v1/tts/jobs/{job['job_id']}/audio")
    finally:
        del synthesizer.synthesize
    assert job["status"] == "failed" and "refused" in job["error"] and job["audio_url"] is None
    assert audio.status_code == 404
    assert balance(hosted, account) == 10_000
    receiver.wait()
    headers, raw = receiver.received[0]
    payload = public_webhooks.verify(raw, headers, SECRETS[key])
    assert payload["event"] == "tts.failed" and payload["job_id"] == job["job_id"]
    assert "refused" in payload["error"]


# ----- refusals -------------------------------------------------------------------------------------------
BASE = {"voiceId": "aria", "targetLang": "en", "text": "Hello."}


@pytest.mark.parametrize(
    "change",
    [
        {"voiceId": "bob"},
        {"voiceId": None},
        {"targetLang": "xx"},
        {"targetLang": "zh"},
        {"targetLang": "en-GB"},
        {"speed": 0.49},
        {"speed": 1.81},
        {"speed": "fast"},
        {"mode": "loud"},
        {"emotionPreset": "angry"},
        {"emotion": {"speed_ratio": 2.5}},
        {"emotion": {"pitch_delta_st": -13}},
        {"emotion": {"energy_ratio": 0.1}},
        {"emotion": {"pause_scale": 3.5}},
        {"emotion": {"joy": 1}},
        {"emotion": [1, 2]},
        {"text": ""},
        {"text": "x" * 50_001},
        {"extra": 1},
    ],
)
def test_invalid_requests_are_400_and_charge_nothing(hosted: Hosted, change: dict[str, Any]) -> None:
    key, account = _account(hosted)
    body = {**BASE, **change}
    if change.get("voiceId", "") is None:
        del body["voiceId"]
    with hosted.client(key) as c:
        r = c.post("/api/v1/tts/synth", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["code"] == "invalid_request" and r.json()["error"]
    assert balance(hosted, account) == 10_000


def test_tts_jobs_need_a_key_and_are_the_keys_own(hosted: Hosted) -> None:
    with hosted.client("") as anonymous:
        assert anonymous.post("/api/v1/tts/synth", json=BASE).status_code == 401
        assert anonymous.post("/api/v1/tts/synth/stream", json=BASE).status_code == 401
    key, _ = _account(hosted)
    with hosted.client(key) as c:
        r = c.post("/api/v1/tts/synth", json=BASE)
        job_id = r.headers["x-job-id"]
    with hosted.client() as other:
        assert other.get(f"/api/v1/tts/jobs/{job_id}").status_code == 404
        assert other.get(f"/api/v1/tts/jobs/{job_id}/audio").status_code == 404


# ----- scaled out: a Procrastinate worker process runs tts jobs ------------------------------------------
@pytest.mark.slow
def test_a_worker_process_on_the_tts_queue_renders_and_sends_tts_done(
    start_hosted: Any, db_backend: Any, postgres_server: Any, tmp_path: Path, receiver: Receiver
) -> None:
    from db_support import DbBackend

    if db_backend.is_postgres:
        pytest.skip("runs once: it makes its own PostgreSQL database (Procrastinate needs one)")

    from dragoman.service import dispatch
    from dragoman.service.db import Database

    backend = DbBackend("postgresql", postgres_server)
    url = backend.url(tmp_path / "pg")
    db = Database(url)
    try:
        dispatch.apply_schema(db)
    finally:
        db.dispose()
    hosted = start_hosted(db_url=url, dispatch="procrastinate")
    key, account = _account(hosted, webhook_url=receiver.url)
    text = (SENTENCE * 34).strip()
    env = {
        **os.environ,
        "DRAGOMAN_DB_URL": url,
        "DRAGOMAN_DISPATCH": "procrastinate",
        "DRAGOMAN_HOSTED_DIR": str(hosted.settings.hosted.data_dir),
        "DRAGOMAN_WEBHOOKS_ALLOW_PRIVATE": "1",
        "DRAGOMAN_STATE_DIR": str(tmp_path / "worker-state"),
    }
    with hosted.client(key) as c:
        r = c.post("/api/v1/tts/synth", json={"voiceId": "iris", "targetLang": "es", "text": text})
        assert r.status_code == 202, r.text
        worker = subprocess.Popen(
            [sys.executable, "-m", "dragoman.cli", "hosted", "worker", "--queues", "tts,webhooks"],
            env=env,
            cwd=Path(__file__).resolve().parents[2],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            job = wait_tts(c, r.json()["job_id"])
            receiver.wait()
            audio = c.get(job["audio_url"])
        finally:
            worker.send_signal(signal.SIGTERM)
            _, err = worker.communicate(timeout=60)
    assert job["status"] == "done", (job, err.decode(errors="replace")[-3000:])
    assert read_wav(audio.content).duration == pytest.approx(job["duration_seconds"], abs=0.01)
    payload = public_webhooks.verify(receiver.received[0][1], receiver.received[0][0], SECRETS[key])
    assert payload["event"] == "tts.done" and payload["target_lang"] == "es"
    assert balance(hosted, account) == 10_000 - 50
    hosted.stop()
    hosted.db.dispose()
    backend.close()
