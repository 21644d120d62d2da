"""Files of tts word edits that a crash left behind (issue 14): an edit writes its audio and words before
the row naming them commits. A failed write deletes them at once; an edit stopped between its write and its
commit (here an exception injected into the swap, as a process killed there would leave it) leaves them to
:func:`dragoman.service.tts_voices.sweep_orphans`, run by every retention purge: after the grace period no
file remains that no job names, while the job's render, current and superseded versions stay, and the files
of an edit still in progress are never swept, whatever the clock says."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hosted_support import Hosted

from dragoman.media.audio import read_wav
from dragoman.service import jobs, retention, tts_voices
from dragoman.service.db import now_ms
from dragoman.service.storage import Storage
from dragoman.service.tts_jobs import audio_key

TEXT = "Good morning everyone. The weather today is bright and sunny."
pytestmark = pytest.mark.scaled  # the files in moto's S3 too (issue 13)
LATER = tts_voices.ORPHAN_GRACE_MS + 60_000  # past the grace period


class Crash(Exception):
    """The process stopping between an edit's write and its commit."""


def _job(hosted: Hosted) -> tuple[str, str]:
    """A done tts job with its words aligned: (key id, job id)."""
    key, key_id = hosted.new_key()
    with hosted.client(key) as c:
        r = c.post("/api/v1/tts/synth", json={"voiceId": "aria", "targetLang": "en", "text": TEXT})
        assert r.status_code == 200, r.text
        job_id = r.headers["x-job-id"]
        assert c.get(f"/api/v1/tts/jobs/{job_id}/words").status_code == 200
    return key_id, job_id


def _files(storage: Storage, job_id: str) -> set[str]:
    return {o.key for o in storage.list(f"tts/{job_id}")}


def _named(hosted: Hosted, key_id: str, job_id: str) -> set[str]:
    return set(jobs.get(hosted.db, key_id, job_id).artifacts.values())


def _edit(hosted: Hosted, key_id: str, job_id: str, index: int = 1) -> dict[str, Any]:
    job = jobs.get(hosted.db, key_id, job_id)
    body = {"edits": [{"index": index, "gain_db": -6}]}
    return tts_voices.edit_job(job, hosted.app.state.storage, body, db=hosted.db)


def test_a_failed_write_leaves_nothing(hosted: Hosted, monkeypatch: pytest.MonkeyPatch) -> None:
    key_id, job_id = _job(hosted)
    storage: Storage = hosted.app.state.storage
    before = _files(storage, job_id)
    real = storage.put_bytes

    def failing(key: str, data: bytes) -> None:
        if key.endswith(".json") and "/edit-" in key:  # the audio is written, the words fail
            raise OSError("disk full")
        real(key, data)

    monkeypatch.setattr(storage, "put_bytes", failing)
    with pytest.raises(OSError, match="disk full"):
        _edit(hosted, key_id, job_id)
    assert _files(storage, job_id) == before  # the audio written first is gone at once


def test_an_edit_cut_between_write_and_commit_is_swept(
    hosted: Hosted, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_id, job_id = _job(hosted)
    storage: Storage = hosted.app.state.storage
    before = _files(storage, job_id)
    named_before = _named(hosted, key_id, job_id)

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise Crash

    with monkeypatch.context() as patch:
        patch.setattr(tts_voices, "_swap_artifacts", crash)
        with pytest.raises(Crash):
            _edit(hosted, key_id, job_id)
    strays = _files(storage, job_id) - before
    assert len(strays) == 2 and all("/edit-" in k for k in strays)  # what the crash leaves
    assert _named(hosted, key_id, job_id) == named_before  # nothing of the edit landed
    other = f"tts/{uuid.uuid4()}"  # a job that is gone: its edit file is an orphan; its render is not ours
    storage.put_bytes(f"{other}/edit-3-0123456789ab.wav", b"RIFF")
    storage.put_bytes(f"{other}/audio.wav", b"RIFF")
    now = now_ms()
    assert tts_voices.sweep_orphans(hosted.db, storage, now) == 0  # within the grace: may be in progress
    assert strays <= _files(storage, job_id)
    report = retention.purge(hosted.db, storage, hosted.settings, now + LATER)  # the hourly purge sweeps
    assert report.files_deleted >= 3
    assert _files(storage, job_id) == before  # no stray object remains, the render and words stay
    assert {o.key for o in storage.list(other)} == {f"{other}/audio.wav"}
    assert named_before <= {o.key for o in storage.list("tts")}
    # the job is whole: its audio downloads and the next edit lands
    edited = _edit(hosted, key_id, job_id)
    assert edited["edits_applied"] == 1
    current = jobs.get(hosted.db, key_id, job_id).artifacts
    assert read_wav(storage.get_bytes(current["audio"])).duration == pytest.approx(
        edited["duration_seconds"], abs=0.001
    )
    assert tts_voices.sweep_orphans(hosted.db, storage, now + LATER) == 0  # everything is named
    assert set(current.values()) <= _files(storage, job_id)


def test_a_crash_before_the_superseded_version_is_deleted_is_swept(
    hosted: Hosted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The edit's row commits, then the process stops before deleting the version two edits back."""
    key_id, job_id = _job(hosted)
    storage: Storage = hosted.app.state.storage
    _edit(hosted, key_id, job_id, 0)
    _edit(hosted, key_id, job_id, 1)

    def crash(key: str) -> bool:
        raise Crash

    with monkeypatch.context() as patch:
        patch.setattr(storage, "delete", crash)
        with pytest.raises(Crash):
            _edit(hosted, key_id, job_id, 2)
    named = _named(hosted, key_id, job_id)
    unnamed = _files(storage, job_id) - named
    assert len(unnamed) == 2 and all("/edit-1-" in k for k in unnamed), unnamed
    assert tts_voices.sweep_orphans(hosted.db, storage, now_ms() + LATER) == 2
    assert _files(storage, job_id) == named
    assert audio_key(job_id) in named  # the render is kept as original_audio


def test_a_live_edit_is_never_swept(hosted: Hosted, monkeypatch: pytest.MonkeyPatch) -> None:
    """An edit held between its write and its commit: a sweep however late leaves its files, which the
    edit then names."""
    key_id, job_id = _job(hosted)
    storage: Storage = hosted.app.state.storage
    before = _files(storage, job_id)
    real = tts_voices._swap_artifacts
    written, go_on = threading.Event(), threading.Event()

    def held(*args: Any, **kwargs: Any) -> Any:
        written.set()
        assert go_on.wait(timeout=60)
        return real(*args, **kwargs)

    monkeypatch.setattr(tts_voices, "_swap_artifacts", held)
    with ThreadPoolExecutor(1) as pool:
        edit = pool.submit(_edit, hosted, key_id, job_id)
        try:
            assert written.wait(timeout=60)
            in_progress = _files(storage, job_id) - before
            assert len(in_progress) == 2
            far = now_ms() + 30 * LATER
            assert tts_voices.sweep_orphans(hosted.db, storage, far) == 0
            assert tts_voices.sweep_orphans(hosted.db, storage, far, grace_ms=0) == 0
            assert in_progress <= _files(storage, job_id)
        finally:
            go_on.set()
        assert edit.result(timeout=60)["edits_applied"] == 1
    named = _named(hosted, key_id, job_id)
    assert in_progress <= named  # the edit landed on the files the sweep left
    assert tts_voices.sweep_orphans(hosted.db, storage, now_ms() + LATER) == 0
    assert named <= _files(storage, job_id)
