"""Hosted voice matches ("clones"), word timings and word edits over real HTTP (issue 14; spec 4.2 and 8)."""

from __future__ import annotations

import functools
import shutil
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from hosted_support import Hosted
from speech_support import synthesizer
from sqlalchemy import update

from dragoman.errors import EditConflict
from dragoman.media.audio import Audio, read_wav, wav_bytes
from dragoman.service import accounts, jobs, tts_voices
from dragoman.service import db as tables
from dragoman.service.tts_jobs import audio_key
from dragoman.speech.tts.clones import Clone
from dragoman.speech.tts.types import SynthesisOptions

REFERENCE = (
    "Hello there, this is a reference recording for voice matching. It has several sentences, so that it "
    "lasts long enough. We speak clearly and not too fast, in a quiet room."
)
TEXT = "Good morning everyone. The weather today is bright and sunny. We will meet at noon by the river."


@functools.cache
def reference(voice: str) -> bytes:
    return wav_bytes(synthesizer().synthesize(REFERENCE, SynthesisOptions(voice, "en")).audio)


def _post_clone(
    hosted: Hosted, key: str, data: bytes, name: str | None = "mine", filename: str = "me.wav"
) -> httpx.Response:
    fields = {"name": name, "description": "test"} if name is not None else {}
    with hosted.client(key) as c:
        return c.post("/api/v1/tts/voices/clones", files={"file": (filename, data)}, data=fields)


@pytest.mark.scaled
def test_a_clone_is_made_listed_and_deleted_with_its_clip(hosted: Hosted) -> None:
    key, key_id = hosted.new_key()
    r = _post_clone(hosted, key, reference("lyra"))
    assert r.status_code == 201, r.text
    clone = r.json()
    assert uuid.UUID(clone["clone_id"])
    assert clone["gender"] == "female" and clone["f0_median"] > 165
    assert clone["persona"] in {"aria", "nova", "lyra", "iris", "maya"}
    assert 3 <= clone["reference_seconds"] <= 20 and 0 < clone["similarity"] <= 1
    assert clone["method"].startswith("voice matching")
    storage = hosted.app.state.storage
    clip = tts_voices.clip_key(key_id, clone["clone_id"])
    assert storage.exists(clip)
    with hosted.client(key) as c:
        listed = c.get("/api/v1/tts/voices/clones").json()
        assert [x["clone_id"] for x in listed["clones"]] == [clone["clone_id"]] and listed["limit"] == 25
        assert c.get(f"/api/v1/tts/voices/clones/{clone['clone_id']}").json()["name"] == "mine"
    other, _ = hosted.new_key()
    with hosted.client(other) as c:  # another key sees nothing of it
        assert c.get(f"/api/v1/tts/voices/clones/{clone['clone_id']}").status_code == 404
        assert c.delete(f"/api/v1/tts/voices/clones/{clone['clone_id']}").status_code == 404
        assert c.get("/api/v1/tts/voices/clones").json()["clones"] == []
    with hosted.client(key) as c:
        gone = c.delete(f"/api/v1/tts/voices/clones/{clone['clone_id']}")
        assert gone.status_code == 200 and gone.json()["deleted"] is True
        assert c.get(f"/api/v1/tts/voices/clones/{clone['clone_id']}").status_code == 404
    assert not storage.exists(clip)


def test_a_male_reference_matches_a_male_voice(hosted: Hosted) -> None:
    key, _ = hosted.new_key()
    r = _post_clone(hosted, key, reference("atlas"))
    assert r.status_code == 201, r.text
    assert r.json()["gender"] == "male" and r.json()["persona"] in {
        "marcus",
        "atlas",
        "felix",
        "orion",
        "kai",
    }


def test_bad_references_are_refused(hosted: Hosted) -> None:
    key, key_id = hosted.new_key()
    not_audio = _post_clone(hosted, key, b"%PDF-1.4 this is no audio" * 40, filename="x.pdf")
    assert not_audio.status_code == 415 and not_audio.json()["code"] == "unsupported_audio"
    audio = read_wav(reference("aria"))
    short = Audio(audio.samples[: 2 * audio.rate], audio.rate)
    too_short = _post_clone(hosted, key, wav_bytes(short))
    assert too_short.status_code == 400 and "s of speech after silence trimming" in too_short.text
    silent = _post_clone(hosted, key, wav_bytes(Audio.silence(6.0, 16000)))
    assert silent.status_code == 400 and "silent" in silent.text
    noise = np.random.default_rng(3).normal(0, 0.1, 16000 * 6).astype(np.float32)
    noisy = _post_clone(hosted, key, wav_bytes(Audio(noise, 16000)))
    assert noisy.status_code == 400 and "too noisy" in noisy.text
    assert _post_clone(hosted, key, reference("aria"), name=None).status_code == 400
    assert tts_voices.count_clones(hosted.db, key_id) == 0


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs the ffmpeg program")
def test_a_compressed_reference_is_decoded_in_process_and_matched(hosted: Hosted, tmp_path: Path) -> None:
    """An m4a (AAC) reference made by ffmpeg here is decoded (PyAV) and matched like its WAV; the same file
    cut short (no index) is a 415, and an Opus stream of a too-short clip keeps the 400 of the duration."""
    src = tmp_path / "me.wav"
    src.write_bytes(reference("atlas"))

    def encoded(name: str, *args: str, seconds: float | None = None) -> bytes:
        cut = ["-t", str(seconds)] if seconds is not None else []
        command = ["ffmpeg", "-nostdin", "-loglevel", "error", "-i", str(src), *cut, *args]
        subprocess.run([*command, str(tmp_path / name)], check=True, capture_output=True, timeout=120)
        return (tmp_path / name).read_bytes()

    m4a = encoded("me.m4a", "-c:a", "aac", "-b:a", "64k")
    key, key_id = hosted.new_key()
    r = _post_clone(hosted, key, m4a, filename="me.m4a")
    assert r.status_code == 201, r.text
    assert r.json()["gender"] == "male" and 3 <= r.json()["reference_seconds"] <= 20
    cut = _post_clone(hosted, key, m4a[:400], filename="me.m4a")
    assert cut.status_code == 415 and cut.json()["code"] == "unsupported_audio", cut.text
    short = _post_clone(hosted, key, encoded("short.webm", "-c:a", "libopus", seconds=2.0), filename="s.webm")
    assert short.status_code == 400 and "s of speech after silence trimming" in short.text
    assert tts_voices.count_clones(hosted.db, key_id) == 1


def test_the_26th_clone_is_a_409(hosted: Hosted) -> None:
    key, key_id = hosted.new_key()
    storage = hosted.app.state.storage
    for i in range(25):
        fake = Clone(
            id=str(uuid.uuid4()), name=f"c{i}", description="", gender="female", f0_median=200.0,
            persona="aria", pitch_st=0.0, formant=1.0, similarity=0.9, similarity_unmatched=0.9,
            reference_seconds=5.0, created_at=float(i),
        )  # fmt: skip
        tts_voices.add_clone(hosted.db, storage, key_id, fake, b"RIFF")
    r = _post_clone(hosted, key, reference("aria"))
    assert r.status_code == 409 and r.json()["code"] == "clone_limit_reached"
    assert tts_voices.count_clones(hosted.db, key_id) == 25


@pytest.mark.scaled
def test_words_then_an_edit_that_changes_only_its_span_for_free(hosted: Hosted) -> None:
    key, key_id = hosted.new_key()
    account = accounts.get_key(hosted.db, key_id).account_id
    with hosted.client(key) as c:
        r = c.post("/api/v1/tts/synth", json={"voiceId": "aria", "targetLang": "en", "text": TEXT})
        assert r.status_code == 200, r.text
        job_id = r.headers["x-job-id"]
        original = read_wav(r.content)
        words = c.get(f"/api/v1/tts/jobs/{job_id}/words")
        assert words.status_code == 200, words.text
        timings = words.json()["words"]
        assert [w["word"] for w in timings] == TEXT.split()
        ends = 0.0
        for w in timings:
            assert ends <= w["start"] <= w["end"] <= original.duration
            ends = w["end"]
        assert c.post(f"/api/v1/tts/jobs/{job_id}/words").json()["words"] == timings  # kept
        balance_before = accounts.get_account(hosted.db, account).balance
        edit = c.post(
            f"/api/v1/tts/jobs/{job_id}/edit",
            json={"edits": [{"index": 5, "word": "today", "gain_db": -10, "pause_ms": 300}]},
        )
        assert edit.status_code == 200, edit.text
        body = edit.json()
        assert body["credits"] == 0 and body["edits_applied"] == 1
        assert body["duration_seconds"] == pytest.approx(original.duration + 0.3, abs=0.002)
        edited = read_wav(c.get(body["audio_url"]).content)
        assert c.get(f"/api/v1/tts/jobs/{job_id}/words").json()["words"] == body["words"]
        bad = c.post(f"/api/v1/tts/jobs/{job_id}/edit", json={"edits": [{"index": 999}]})
        assert bad.status_code == 400
        assert c.post(f"/api/v1/tts/jobs/{job_id}/edit", json={"edits": []}).status_code == 400
    assert accounts.get_account(hosted.db, account).balance == balance_before  # edits cost nothing
    artifacts = jobs.get(hosted.db, key_id, job_id).artifacts  # the retention deletes them with the job's
    assert {"audio", "words", "original_audio"} <= set(artifacts)
    rate = original.rate
    a, b = round(timings[5]["start"] * rate), round(timings[5]["end"] * rate)
    tail = len(original.samples) - b
    assert np.array_equal(edited.samples[:a], original.samples[:a])
    assert np.array_equal(edited.samples[-tail:], original.samples[-tail:])
    assert not np.array_equal(edited.samples[a:b], original.samples[a:b])


def test_edits_are_free_and_close_after_12_hours(hosted: Hosted) -> None:
    key, key_id = hosted.new_key()
    account = accounts.get_key(hosted.db, key_id).account_id
    with hosted.client(key) as c:
        r = c.post("/api/v1/tts/synth", json={"voiceId": "marcus", "targetLang": "en", "text": TEXT})
        assert r.status_code == 200, r.text
        job_id = r.headers["x-job-id"]
        after_render = accounts.get_account(hosted.db, account).balance
        ok = c.post(f"/api/v1/tts/jobs/{job_id}/edit", json={"edits": [{"index": 0, "speed": 1.5}]})
        assert ok.status_code == 200 and ok.json()["credits"] == 0
        assert accounts.get_account(hosted.db, account).balance == after_render
        with hosted.db.write() as conn:
            conn.execute(
                update(tables.jobs)
                .where(tables.jobs.c.id == job_id)
                .values(finished_ms=tables.jobs.c.finished_ms - 12 * 3600 * 1000 - 1000)
            )
        late = c.post(f"/api/v1/tts/jobs/{job_id}/edit", json={"edits": [{"index": 0, "speed": 1.5}]})
        assert late.status_code == 410 and late.json()["code"] == "edit_window_closed"
        assert c.get("/api/v1/tts/jobs/00000000-0000-0000-0000-000000000000/words").status_code == 404


@pytest.mark.scaled
def test_synth_with_a_clone_id_speaks_the_matched_voice(hosted: Hosted) -> None:
    from speech_support import f0_median

    key, _ = hosted.new_key()
    made = _post_clone(hosted, key, reference("lyra"))
    assert made.status_code == 201, made.text
    clone = made.json()
    body = {"voiceId": "marcus", "targetLang": "en", "text": TEXT, "cloneId": clone["clone_id"]}
    with hosted.client(key) as c:
        r = c.post("/api/v1/tts/synth", json=body)
        assert r.status_code == 200, r.text
        audio = read_wav(r.content)
        assert f0_median(audio) > 165  # the female match, not marcus
        job = c.get(f"/api/v1/tts/jobs/{r.headers['x-job-id']}").json()
        assert job["status"] == "done"
        streamed = c.post("/api/v1/tts/synth/stream", json=body)
        assert streamed.status_code == 200 and len(streamed.content) > 44
    other, _ = hosted.new_key()
    with hosted.client(other) as c:  # another key's clone is not found
        assert c.post("/api/v1/tts/synth", json=body).status_code == 404
        assert c.post("/api/v1/tts/synth", json={**body, "cloneId": "not-a-uuid"}).status_code == 404


def _synth_with_words(hosted: Hosted, key: str) -> tuple[str, Audio, list[dict[str, float]]]:
    with hosted.client(key) as c:
        r = c.post("/api/v1/tts/synth", json={"voiceId": "aria", "targetLang": "en", "text": TEXT})
        assert r.status_code == 200, r.text
        job_id = r.headers["x-job-id"]
        words = c.get(f"/api/v1/tts/jobs/{job_id}/words")
        assert words.status_code == 200, words.text
    return job_id, read_wav(r.content), words.json()["words"]


def _edit_version(hosted: Hosted, job_id: str) -> int:
    from sqlalchemy import select

    with hosted.db.read() as conn:
        version = conn.execute(select(tables.jobs.c.edit_version).where(tables.jobs.c.id == job_id)).scalar()
    assert isinstance(version, int)
    return version


def _assert_only_these_words_changed(
    original: Audio, edited: Audio, timings: list[dict[str, float]], indices: list[int]
) -> None:
    """Gain edits keep the length: every edited word's span differs, every sample outside them is equal."""
    assert len(edited.samples) == len(original.samples)
    rate = original.rate
    touched = np.zeros(len(original.samples), dtype=bool)
    for i in indices:
        a, b = round(timings[i]["start"] * rate), round(timings[i]["end"] * rate)
        assert not np.array_equal(edited.samples[a:b], original.samples[a:b]), f"edit of word {i} was lost"
        touched[a:b] = True
    assert np.array_equal(edited.samples[~touched], original.samples[~touched])


def test_simultaneous_edits_of_one_job_are_all_applied_one_after_the_other(
    hosted: Hosted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four requests edit four words of one job at once: each is answered 200 and the final audio carries
    all four edits (before, the edits read the same audio and the last write won: edits were lost)."""
    from dragoman.speech.tts import words as tts_words

    key, _ = hosted.new_key()
    job_id, original, timings = _synth_with_words(hosted, key)
    real = tts_words.apply_edits

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.3)  # every request is inside the edit at the same time unless they are ordered
        return real(*args, **kwargs)

    monkeypatch.setattr(tts_words, "apply_edits", slow)
    indices = [0, 3, 6, 9]
    barrier = threading.Barrier(len(indices))

    def post(index: int) -> httpx.Response:
        with hosted.client(key) as c:
            barrier.wait()
            return c.post(
                f"/api/v1/tts/jobs/{job_id}/edit", json={"edits": [{"index": index, "gain_db": -12}]}
            )

    with ThreadPoolExecutor(len(indices)) as pool:
        answers = list(pool.map(post, indices))
    assert [a.status_code for a in answers] == [200] * len(indices), [a.text for a in answers]
    with hosted.client(key) as c:
        edited = read_wav(c.get(f"/api/v1/tts/jobs/{job_id}/audio").content)
    _assert_only_these_words_changed(original, edited, timings, indices)
    assert _edit_version(hosted, job_id) == len(indices)
    # the current and the superseded version are kept, the older ones deleted
    kept = {o.key for o in hosted.app.state.storage.list(f"tts/{job_id}/") if "/edit-" in o.key}
    assert len(kept) == 4, kept


def test_an_edit_that_another_process_beat_is_applied_again_on_its_result(
    hosted: Hosted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two API processes (no shared lock: the in-process one is off) read version 0 together; the row's
    compare-and-set lets one swap, and the other applies its edit again on the winner's audio."""
    from contextlib import nullcontext

    from dragoman.speech.tts import words as tts_words

    key, key_id = hosted.new_key()
    job_id, original, timings = _synth_with_words(hosted, key)
    monkeypatch.setattr(tts_voices, "_job_edit_lock", lambda _job_id: nullcontext())
    real = tts_words.apply_edits
    barrier = threading.Barrier(2)
    calls: list[int] = []

    def together(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) <= 2:
            barrier.wait(timeout=30)  # both have read the same version before either swaps
        return real(*args, **kwargs)

    monkeypatch.setattr(tts_words, "apply_edits", together)
    job = jobs.get(hosted.db, key_id, job_id)
    storage = hosted.app.state.storage

    def edit(index: int) -> dict[str, Any]:
        return tts_voices.edit_job(job, storage, {"edits": [{"index": index, "gain_db": -12}]}, db=hosted.db)

    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(edit, [1, 7]))
    assert [d["edits_applied"] for d in done] == [1, 1] and len(calls) == 3  # the loser applied twice
    current = jobs.get(hosted.db, key_id, job_id).artifacts
    _assert_only_these_words_changed(original, read_wav(storage.get_bytes(current["audio"])), timings, [1, 7])
    assert _edit_version(hosted, job_id) == 2
    assert current["original_audio"] == audio_key(job_id)  # the render is kept as it was
    assert np.array_equal(read_wav(storage.get_bytes(audio_key(job_id))).samples, original.samples)


def test_an_edit_beaten_every_time_is_a_409_and_leaves_nothing(
    hosted: Hosted, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextlib import nullcontext

    from dragoman.speech.tts import words as tts_words

    key, key_id = hosted.new_key()
    job_id, original, timings = _synth_with_words(hosted, key)
    monkeypatch.setattr(tts_voices, "_job_edit_lock", lambda _job_id: nullcontext())
    monkeypatch.setattr(tts_voices, "EDIT_ATTEMPTS", 1)
    real = tts_words.apply_edits
    barrier = threading.Barrier(2)

    def together(*args: Any, **kwargs: Any) -> Any:
        barrier.wait(timeout=30)
        return real(*args, **kwargs)

    monkeypatch.setattr(tts_words, "apply_edits", together)
    job = jobs.get(hosted.db, key_id, job_id)
    storage = hosted.app.state.storage
    outcomes: list[object] = []

    def edit(index: int) -> None:
        try:
            outcomes.append(
                tts_voices.edit_job(job, storage, {"edits": [{"index": index, "gain_db": -12}]}, db=hosted.db)
            )
        except EditConflict as exc:
            outcomes.append(exc)

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(edit, [2, 8]))
    conflicts = [o for o in outcomes if isinstance(o, EditConflict)]
    assert len(conflicts) == 1 and conflicts[0].status == 409 and conflicts[0].code == "edit_conflict"
    assert _edit_version(hosted, job_id) == 1
    edits = {o.key for o in storage.list(f"tts/{job_id}/") if "/edit-" in o.key}
    assert len(edits) == 2  # the winner's audio and words; the loser's files were deleted
    won = next(o for o in outcomes if isinstance(o, dict))
    assert won["edits_applied"] == 1
