"""Helpers of the hosted subtitle tests (issue 15): the tiny Whisper installed in the hosted engine's model
store, media made with ffmpeg's test sources, and waiting for subtitle jobs over HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from hosted_support import Receiver
from support import isolated_settings

from dragoman.speech.asr import Recognizer
from dragoman.testing.whisper import TINY_DECODE, build_tiny_whisper

TINY_ID = "tiny-whisper"
#: The tiny model's overrides, with the VAD off: a test tone is not speech, and random weights should still
#: give words to caption.
DECODE: dict[str, Any] = {**TINY_DECODE, "vad_filter": False}
TERMINAL = ("done", "failed", "canceled")


def tiny_recognizer(root: Path) -> Recognizer:
    """A recogniser over the tiny Whisper, installed as :data:`TINY_ID` in the store of the engine whose
    packs are under ``root`` (what :func:`hosted_support.start_service` gives the app)."""
    from dragoman.models import asr

    settings = isolated_settings(root, apertium=True)
    if TINY_ID not in {info.id for info in asr.list_installed(settings)}:
        asr.install(build_tiny_whisper(root / "tiny-build" / TINY_ID), settings, model_id=TINY_ID)
    return Recognizer(settings, decode_overrides=DECODE)


def make_media(
    path: Path, seconds: float = 4.0, *, audio: bool = True, video: bool = True, tone: int = 330
) -> Path:
    """An MP4 (or whatever ``path``'s suffix names) from ffmpeg's test sources: a tone and/or a test card."""
    args = ["ffmpeg", "-y", "-v", "error"]
    if audio:
        args += ["-f", "lavfi", "-i", f"sine=frequency={tone}:sample_rate=16000:duration={seconds}"]
    if video:
        args += ["-f", "lavfi", "-i", f"testsrc=size=64x48:rate=5:duration={seconds}"]
    if video:
        args += ["-c:v", "mpeg4"]
    if audio:
        args += ["-c:a", "aac" if path.suffix in (".mp4", ".m4a", ".mov") else "libvorbis"]
    subprocess.run([*args, "-shortest", str(path)], check=True, capture_output=True, timeout=60)
    return path


def upload(client: httpx.Client, path: Path, name: str | None = None, **headers: str) -> httpx.Response:
    sent = {"x-filename": name or path.name, "x-video-mime": "video/mp4", **headers}
    return client.post("/api/v1/subtitles/upload", content=path.read_bytes(), headers=sent)


def create(client: httpx.Client, video: dict[str, Any], **fields: Any) -> httpx.Response:
    body = {"videoId": video["video_id"], "durationSeconds": video["duration_seconds"], **fields}
    return client.post("/api/v1/subtitles/create", json=body)


def wait_terminal(client: httpx.Client, job_ids: Sequence[str], timeout: float = 90) -> dict[str, Any]:
    """The status of each job once every one of them is done, failed or canceled."""
    deadline = time.monotonic() + timeout
    found: dict[str, Any] = {}
    while time.monotonic() < deadline:
        found = {job_id: client.get(f"/api/v1/subtitles/{job_id}/status").json() for job_id in job_ids}
        if all(answer.get("status") in TERMINAL for answer in found.values()):
            return found
        time.sleep(0.2)
    raise AssertionError(f"subtitle jobs not finished in {timeout} s: {found}")


def events(receiver: Receiver) -> list[dict[str, Any]]:
    return [json.loads(body) for _, body in receiver.received]


def wait_events(receiver: Receiver, name: str, count: int, timeout: float = 30) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        matching = [e for e in events(receiver) if e.get("event") == name]
        if len(matching) >= count:
            return matching
        time.sleep(0.1)
    raise AssertionError(f"{count} {name} event(s) not delivered: {events(receiver)}")


@dataclass
class WorkerRun:
    """A worker process started by :func:`worker_process`: its exit code and the end of its stderr, once
    stopped."""

    returncode: int | None = None
    stderr_tail: str = ""


@contextmanager
def worker_process(
    script: str, queues: str, *, db_url: str, hosted_dir: Path, packs_dir: Path, state_dir: Path
) -> Iterator[WorkerRun]:
    """Run ``tests/<script>`` (a Procrastinate worker of the hosted service on ``queues``) against the
    database at ``db_url`` while the block runs, then stop it with SIGTERM and record how it ended."""
    env = {
        **os.environ,
        "DRAGOMAN_DB_URL": db_url,
        "DRAGOMAN_DISPATCH": "procrastinate",
        "DRAGOMAN_HOSTED_DIR": str(hosted_dir),
        "DRAGOMAN_WEBHOOKS_ALLOW_PRIVATE": "1",
        "DRAGOMAN_PACKS_DIR": str(packs_dir),
        "DRAGOMAN_STATE_DIR": str(state_dir),
        "DRAGOMAN_APERTIUM": "1",
    }
    worker = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve().parent / script), queues],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    run = WorkerRun()
    try:
        yield run
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
        run.returncode = worker.returncode
        run.stderr_tail = err.decode(errors="replace")[-3000:]
