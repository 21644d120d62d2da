"""Every typed failure of a hosted dub says its code (issue 16, item 3): ``error_code`` on the status and the
code first in ``error``, not only the failures of a URL's fetch: a child's own failure (``backend_error``) and
a failure of the shared run that is not retried (the upload's file gone since the POST: ``media_not_found``).
Before, both wrote the bare message and ``error_code`` was null."""

from __future__ import annotations

from pathlib import Path

import pytest
from hosted_dub_support import FakeDubber, upload, wait_terminal
from hosted_subtitles_support import TINY_ID, make_media, tiny_recognizer
from hosted_support import StartHosted
from support import needs_apertium

from dragoman.service import media_store
from dragoman.speech.asr import Recognizer
from dragoman.translation.engine import Engine

pytestmark = needs_apertium


@pytest.fixture(scope="module")
def recognizer(hosted_engine: tuple[Engine, Path]) -> Recognizer:
    return tiny_recognizer(hosted_engine[1])


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_media(tmp_path_factory.mktemp("dub-codes") / "talk.mp4", 2.0)


def test_a_childs_own_failure_is_coded(start_hosted: StartHosted, recognizer: Recognizer, clip: Path) -> None:
    service = start_hosted(recognizer=recognizer, asr_model=TINY_ID, rate=100_000, dubber=FakeDubber(["de"]))
    key, _ = service.new_key(credits=1_000)
    with service.client(key) as c:
        video = upload(c, clip)
        made = c.post("/api/v1/dub", json={"videoId": video["video_id"], "targets": ["es", "de"]})
        assert made.status_code == 202, made.text
        spanish, german = made.json()["jobIds"]
        ended = wait_terminal(c, [spanish, german])
    assert ended[spanish]["status"] == "done" and ended[spanish]["error_code"] is None
    failed = ended[german]
    assert failed["status"] == "failed" and failed["error_code"] == "backend_error", failed
    assert failed["error"].startswith("backend_error: ") and "no voice for de" in failed["error"]


def test_a_shared_run_failure_is_coded(start_hosted: StartHosted, recognizer: Recognizer, clip: Path) -> None:
    service = start_hosted(recognizer=recognizer, asr_model=TINY_ID, rate=100_000, dubber=FakeDubber())
    key, _ = service.new_key(credits=1_000)
    with service.client(key) as c:
        video_id = upload(c, clip)["video_id"]
        record = media_store.get_any(service.db, video_id)
        assert record is not None
        assert service.app.state.storage.delete(record.storage_key)  # the file gone, the row still there
        made = c.post("/api/v1/dub", json={"videoId": video_id, "targets": ["es", "fr"]})
        assert made.status_code == 202, made.text
        job_ids = made.json()["jobIds"]
        ended = wait_terminal(c, job_ids)
    for job_id in job_ids:
        failed = ended[job_id]
        assert failed["status"] == "failed" and failed["error_code"] == "media_not_found", failed
        assert failed["error"].startswith("media_not_found: upload ")
        assert failed["credits"] in (None, 0)
