"""Range requests on every hosted download of a stored file (issue 14, consistency of the hosted API): the
tts audio (``/api/v1/tts/jobs/{id}/audio``), the subtitle files (``/api/v1/subtitles/{id}/download/{fmt}``)
and the document exports (``/api/v1/jobs/{id}/export/{docx,pdf}``) answer ``Range`` as the dub files do
(:mod:`dragoman.server.hosted._ranges`, tests/hosted/test_dub_ranges.py): 206 with Content-Range for one
range (middle, suffix, open), 416 ``range_not_satisfiable`` past the end, the whole file for several ranges,
``Accept-Ranges: bytes`` on every answer, ``HEAD`` with the same headers and no body, and each route's own
headers (Content-Disposition, Content-Type) on the 206 as on the 200. Each slice is checked byte for byte
against the whole body. The POST answers of /tts/synth and /tts/synth/stream are made for the request (the
stream as it is rendered): no ranges there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from hosted_subtitles_support import TINY_ID, create, make_media, tiny_recognizer, upload, wait_terminal
from hosted_support import Hosted, StartHosted
from support import needs_apertium

from dragoman.server.hosted._ranges import MAX_RANGE_HEADER_CHARS
from dragoman.service import accounts, jobs
from dragoman.speech.asr import Recognizer
from dragoman.translation.engine import Engine

#: The route's headers a 206 carries as the 200 does.
KEPT = ("content-type", "content-disposition", "accept-ranges")


def check_ranges(c: httpx.Client, url: str) -> bytes:
    """Every kind of Range on ``url``, each slice compared with the whole body; the body."""
    whole = c.get(url)
    assert whole.status_code == 200, whole.text
    data = whole.content
    size = len(data)
    assert size >= 8, data
    assert whole.headers["accept-ranges"] == "bytes"
    assert whole.headers["content-length"] == str(size)
    assert "content-range" not in whole.headers
    assert whole.headers["content-disposition"].startswith("attachment; filename=")

    def ranged(header: str, status: int) -> httpx.Response:
        answer = c.get(url, headers={"Range": header})
        assert answer.status_code == status, (header, answer.status_code, answer.text[:200])
        if status != 416:
            for name in KEPT:
                assert answer.headers[name] == whole.headers[name], (header, name)
        return answer

    a, b = size // 3, size // 2
    middle = ranged(f"bytes={a}-{b}", 206)
    assert middle.headers["content-range"] == f"bytes {a}-{b}/{size}"
    assert middle.headers["content-length"] == str(b + 1 - a)
    assert middle.content == data[a : b + 1]
    past_end = ranged(f"bytes={a}-{size * 3}", 206)  # an end past the file is cut there
    assert past_end.headers["content-range"] == f"bytes {a}-{size - 1}/{size}"
    assert past_end.content == data[a:]
    suffix = ranged("bytes=-7", 206)
    assert suffix.headers["content-range"] == f"bytes {size - 7}-{size - 1}/{size}"
    assert suffix.content == data[-7:]
    assert ranged(f"bytes=-{size + 100}", 206).content == data  # a suffix longer than the file: all of it
    opened = ranged(f"bytes={b}-", 206)
    assert opened.headers["content-range"] == f"bytes {b}-{size - 1}/{size}"
    assert opened.headers["content-length"] == str(size - b)
    assert opened.content == data[b:]
    first = ranged("bytes=0-", 206)  # what a media element asks first
    assert first.headers["content-range"] == f"bytes 0-{size - 1}/{size}" and first.content == data
    last = ranged(f"bytes={size - 1}-", 206)
    assert last.content == data[-1:]
    for header in (f"bytes={size}-", f"bytes={size + 5}-{size + 9}", "bytes=-0"):
        refused = ranged(header, 416)
        assert refused.headers["content-range"] == f"bytes */{size}"
        assert refused.headers["accept-ranges"] == "bytes"
        assert refused.json()["code"] == "range_not_satisfiable"
    for header in ("bytes=0-1,4-5", "bytes=0-1, 4-5", f"bytes={b}-{a}", "bytes=x-", "items=0-5"):
        several = ranged(header, 200)  # several ranges (no multipart answers) or an invalid one: all of it
        assert "content-range" not in several.headers and several.content == data
    too_long = ranged("bytes=" + "0" * MAX_RANGE_HEADER_CHARS + "-1", 200)
    assert too_long.content == data
    with_if_range = c.get(url, headers={"Range": "bytes=0-1", "If-Range": '"x"'})
    assert with_if_range.status_code == 200 and with_if_range.content == data
    head = c.head(url)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(size)
    for name in KEPT:
        assert head.headers[name] == whole.headers[name]
    head_part = c.head(url, headers={"Range": "bytes=-7"})
    assert head_part.status_code == 206 and head_part.content == b""
    assert head_part.headers["content-range"] == f"bytes {size - 7}-{size - 1}/{size}"
    assert head_part.headers["content-length"] == "7"
    return data


# ----- tts audio --------------------------------------------------------------------------------------------
@pytest.mark.scaled
def test_tts_audio_takes_ranges(start_hosted: StartHosted) -> None:
    service = start_hosted(rate=100_000)
    key, _ = service.new_key()
    with service.client(key) as c:
        made = c.post(
            "/api/v1/tts/synth",
            json={"voiceId": "aria", "targetLang": "en", "text": "Hello there. The file is served in parts."},
        )
        assert made.status_code == 200, made.text
        job_id = made.headers["x-job-id"]
        url = f"/api/v1/tts/jobs/{job_id}/audio"
        data = check_ranges(c, url)
        assert data == made.content  # the stored render, as the synth answered it
        head = c.head(url)
        assert head.headers["content-type"] == "audio/wav"
        assert head.headers["content-disposition"] == f'attachment; filename="{job_id}.wav"'
        edit = c.post(f"/api/v1/tts/jobs/{job_id}/edit", json={"edits": [{"index": 1, "gain_db": -6}]})
        assert edit.status_code == 200, edit.text
        edited = check_ranges(c, url)  # after a word edit, the edited version, in parts too
        assert edited != data and len(edited) == len(data)


# ----- document exports -------------------------------------------------------------------------------------
DOCX = bytes((i * 13 + 5) % 256 for i in range(70_001))
PDF = b"%PDF-1.7\n" + bytes((i * 31) % 256 for i in range(40_000))


@pytest.mark.scaled
def test_document_exports_take_ranges(start_hosted: StartHosted) -> None:
    """A done document job's exports, stored as the translation handler stores them (the job row made
    directly: the translation of a document is not what is tested here)."""
    service = start_hosted(rate=100_000)
    key, _ = service.new_key()
    info = accounts.authenticate(service.db, f"Bearer {key}")
    job = jobs.submit(
        service.db,
        info,
        kind="translate",
        params={"filename": "report.docx", "tgt": "es", "upload": "uploads/x/report.docx"},
        credits=1,
        sync=True,
    )
    storage = service.app.state.storage
    artifacts = {"docx": f"exports/{job.id}/report.es.docx", "pdf": f"exports/{job.id}/report.es.pdf"}
    storage.put_bytes(artifacts["docx"], DOCX)
    storage.put_bytes(artifacts["pdf"], PDF)
    jobs.finish_sync(service.db, job.id, jobs.JobOutcome(result="hecho", artifacts=artifacts))
    with service.client(key) as c:
        assert check_ranges(c, f"/api/v1/jobs/{job.id}/export/docx") == DOCX
        assert check_ranges(c, f"/api/v1/jobs/{job.id}/export/pdf") == PDF
        pdf = c.get(f"/api/v1/jobs/{job.id}/export/pdf", headers={"Range": "bytes=0-3"})
        assert pdf.headers["content-type"] == "application/pdf" and pdf.content == b"%PDF"
        assert pdf.headers["content-disposition"] == 'attachment; filename="report.es.pdf"'
        storage.delete(artifacts["pdf"])  # gone from the store: 404, not a 500
        gone = c.get(f"/api/v1/jobs/{job.id}/export/pdf", headers={"Range": "bytes=0-3"})
        assert gone.status_code == 404 and gone.json()["code"] == "not_found"


# ----- subtitle files ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def recognizer(hosted_engine: tuple[Engine, Path]) -> Recognizer:
    return tiny_recognizer(hosted_engine[1])


@needs_apertium
def test_subtitle_downloads_take_ranges(
    start_hosted: StartHosted, recognizer: Recognizer, tmp_path: Path
) -> None:
    service = start_hosted(recognizer=recognizer, asr_model=TINY_ID, rate=100_000)
    clip = make_media(tmp_path / "talk.mp4", 3.0)
    key, _ = service.new_key(credits=1_000)
    with service.client(key) as c:
        up = upload(c, clip, "Talk.mp4")
        assert up.status_code == 200, up.text
        made = create(c, up.json(), originalFileName="Talk.mp4", sourceLang="en", targetLangs=["es"])
        assert made.status_code == 202, made.text
        job_ids = made.json()["jobIds"]
        finished = wait_terminal(c, job_ids)
        assert all(j["status"] == "done" for j in finished.values()), finished
        for job_id in job_ids:
            for fmt in finished[job_id]["downloads"]:
                url = f"/api/v1/subtitles/{job_id}/download/{fmt}"
                data = check_ranges(c, url)
                if fmt == "srt":
                    assert data.decode("utf-8").strip()
                    assert check_ranges(c, f"{url}?lang=en")  # the source language's file too


# ----- the OpenAPI document --------------------------------------------------------------------------------
def test_the_openapi_document_states_ranges_on_every_stored_download(hosted: Hosted) -> None:
    with hosted.client("") as c:
        paths: dict[str, Any] = c.get("/openapi.json").json()["paths"]
    ranged = [
        "/api/v1/tts/jobs/{job_id}/audio",
        "/api/v1/jobs/{job_id}/export/docx",
        "/api/v1/jobs/{job_id}/export/pdf",
        "/api/v1/subtitles/{job_id}/download/{fmt}",
        "/api/v1/dub/{job_id}/video",
    ]
    for path in ranged:
        operation = paths[path]["get"]
        assert any(p["name"] == "Range" and p["in"] == "header" for p in operation["parameters"]), path
        responses = operation["responses"]
        assert set(responses["206"]["content"]) == set(responses["200"]["content"]), path
        assert (
            "Content-Range" in responses["206"]["headers"] and "Accept-Ranges" in responses["200"]["headers"]
        )
        assert "416" in responses, path
    for path in ("/api/v1/tts/synth", "/api/v1/tts/synth/stream"):  # made for the request: no ranges
        operation = paths[path]["post"]
        assert "206" not in operation["responses"]
        assert all(p["name"] != "Range" for p in operation.get("parameters", []))
