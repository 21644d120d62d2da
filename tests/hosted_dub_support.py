"""Helpers of the hosted dub tests (issue 16): a fake dubber (the dub pipeline's signature, files written
as the pipeline names them, failing or blocking on demand), a loopback HTTP server of media, and waiting
for dub jobs over HTTP."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from dragoman.errors import BackendError
from dragoman.pipelines.dub import DubLine, DubOptions, DubOutputs, DubResult, SourceTrack, planned_files
from dragoman.progress import JobContext

TERMINAL = ("done", "failed", "canceled")


class FakeDubber:
    """Stands in for :func:`dragoman.pipelines.dub.dub_file`: writes the files the pipeline would (the
    video a copy of the input, the audio and subtitles small placeholders) and answers two lines, the second
    fitted beyond the natural range. ``fail``: targets that fail; ``gate``: while unset, a dub waits
    (checking its context, so a cancellation stops it); ``calls`` records (target, source track)."""

    def __init__(self, fail: Sequence[str] = (), gate: threading.Event | None = None) -> None:
        self.fail = set(fail)
        self.gate = gate
        self.calls: list[tuple[str, SourceTrack | None]] = []
        self.started = threading.Event()

    def __call__(
        self,
        media: str | Path,
        options: DubOptions,
        *,
        synthesizer: Any,
        recognizer: Any = None,
        engine: Any = None,
        out_dir: str | Path | None = None,
        overwrite: bool = False,
        context: JobContext | None = None,
        clone_store: Any = None,
        source_track: SourceTrack | None = None,
    ) -> DubResult:
        self.calls.append((options.target, source_track))
        self.started.set()
        context = context or JobContext()
        if self.gate is not None:
            while not self.gate.wait(0.05):
                context.check()
        if options.target in self.fail:
            raise BackendError(f"no voice for {options.target} here (test)")
        if options.voice_mode == "clone":
            assert clone_store is not None and options.clone_id is not None
            clone_store.get(options.clone_id)  # the key's clone is found through the store
        path = Path(media)
        spoken = source_track.track.language if source_track is not None else "en"
        plan = planned_files(path, options.target, spoken, has_video=True, out_dir=out_dir)
        assert plan.video is not None
        shutil.copyfile(path, plan.video)
        plan.audio.write_bytes(b"fake m4a " + options.target.encode())
        for key, file in plan.subtitles.items():
            file.write_text(f"1\n00:00:00,000 --> 00:00:01,000\n{key}\n", encoding="utf-8")
        lines = (
            DubLine(0, 0.0, 1.0, "hello", "hola", "aria", None, None, 1.0, 1.0, 0.0, 1.0, False),
            DubLine(1, 1.5, 2.0, "bye now", "adios ya", "aria", None, None, 1.2, 1.4, 1.5, 2.0, True),
        )
        return DubResult(
            source_language=spoken,
            language_probability=1.0,
            target=options.target,
            duration=4.0,
            lines=lines,
            outputs=DubOutputs(plan.video, plan.audio, dict(plan.subtitles)),
            stage_seconds={"probe": 0.01, "recognise": 0.0, "translate": 0.1, "synthesise": 0.2},
            warnings=("line 1 was compressed beyond the natural range",),
            provenance="server",
        )


class MediaServer:
    """A loopback HTTP server: ``files`` (path → bytes) answered 200, ``redirects`` (path → location)
    answered 302, anything else 404; ``length``: a Content-Length to state instead (negative: none);
    ``drip``: seconds to pause after each KB of the path's body; ``hold``: paths whose body waits after its
    first KB until :meth:`release` (the headers and the first KB are sent at once; ``started`` is set once a
    held body began). ``url(path)`` is its address, ``hits`` the paths asked, ``sent[path]`` the bytes the
    server wrote of the path's body."""

    def __init__(
        self,
        files: Mapping[str, bytes],
        redirects: Mapping[str, str] | None = None,
        *,
        host: str = "127.0.0.1",
        length: Mapping[str, int] | None = None,
        drip: Mapping[str, float] | None = None,
        hold: Collection[str] = (),
    ) -> None:
        served = dict(files)
        pauses = dict(drip or {})
        moved = dict(redirects or {})
        lengths = dict(length or {})
        held = frozenset(hold)
        self.hits: list[str] = []
        self.sent: dict[str, int] = {}
        self.gate = threading.Event()
        self.started = threading.Event()
        hits, sent, gate, started = self.hits, self.sent, self.gate, self.started

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                if self.path in moved:
                    self.send_response(302)
                    self.send_header("Location", moved[self.path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = served.get(self.path)
                if body is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "video/mp4")
                declared = lengths.get(self.path, len(body))
                if declared >= 0:  # a negative length: no Content-Length, the body ends at the close
                    self.send_header("Content-Length", str(declared))
                else:
                    self.send_header("Connection", "close")
                self.end_headers()
                sent[self.path] = 0
                pause = pauses.get(self.path)
                step = 1024 if pause is not None or self.path in held else 64 * 1024
                try:
                    for start in range(0, len(body), step):  # dripped or held: 1 KB at a time
                        if start and self.path in held:
                            started.set()
                            gate.wait(120)
                        chunk = body[start : start + step]
                        self.wfile.write(chunk)
                        sent[self.path] += len(chunk)
                        if pause is not None:
                            self.wfile.flush()
                            time.sleep(pause)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def release(self) -> None:
        """Lets the held bodies go on."""
        self.gate.set()

    def close(self) -> None:
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()


def upload(client: httpx.Client, path: Path, name: str | None = None) -> dict[str, Any]:
    sent = {"x-filename": name or path.name, "x-video-mime": "video/mp4"}
    answer = client.post("/api/v1/subtitles/upload", content=path.read_bytes(), headers=sent)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def wait_terminal(client: httpx.Client, job_ids: Sequence[str], timeout: float = 120) -> dict[str, Any]:
    """The status of each dub job once every one of them is done, failed or canceled."""
    deadline = time.monotonic() + timeout
    found: dict[str, Any] = {}
    while time.monotonic() < deadline:
        found = {job_id: client.get(f"/api/v1/dub/{job_id}").json() for job_id in job_ids}
        if all(answer.get("status") in TERMINAL for answer in found.values()):
            return found
        time.sleep(0.2)
    raise AssertionError(f"dub jobs not finished in {timeout} s: {found}")
