"""The MCP tools ``transcribe`` and ``subtitle_file`` (issue 15), in process: inside the allowed roots only,
never over a file, progress on one growing scale, a cancelled call leaves no file. The tiny Whisper (random
weights) recognises; the tiny en->es pack translates."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_support import error_text, in_process, structured
from subtitles_support import TINY_ID, build_tiny, install_tiny, make_media, needs_ffmpeg, tiny_recognizer

from dragoman.errors import Cancelled
from dragoman.pipelines import subtitles as pipeline
from dragoman.progress import JobContext
from dragoman.server.mcp._runtime import ServerState
from dragoman.settings import Settings
from dragoman.speech.asr import Recognizer

pytestmark = [pytest.mark.anyio, needs_ffmpeg]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny(tmp_path_factory.mktemp("whisper"))


@pytest.fixture(scope="module")
def talk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_media(tmp_path_factory.mktemp("media") / "talk.mp4")


@pytest.fixture
def asr_env(
    server_env: dict[str, str], tiny_model: Path, talk: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """The server's environment with the tiny Whisper installed; the server's recogniser makes it speak."""
    install_tiny(tiny_model, Settings.from_env(server_env))
    made: list[Recognizer] = []

    def recognizer(self: ServerState) -> Recognizer:
        if not made:
            made.append(tiny_recognizer(self.settings))
        return made[0]

    monkeypatch.setattr(ServerState, "recognizer", recognizer)
    shutil.copy(talk, workdir / "talk.mp4")
    return server_env


async def test_transcribe_answers_language_confidence_segments_and_words(
    asr_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    (workdir / "taken.json").write_text("mine", encoding="utf-8")
    async with in_process(asr_env, roots=[workdir]) as client:
        out = structured(
            await client.call_tool(
                "transcribe",
                {"path": "talk.mp4", "model": TINY_ID, "output_path": "talk.json"},
                progress_callback=on_progress,
            )
        )
        given = structured(
            await client.call_tool("transcribe", {"path": "talk.mp4", "model": TINY_ID, "language": "fr"})
        )
        again = error_text(
            await client.call_tool(
                "transcribe", {"path": "talk.mp4", "model": TINY_ID, "output_path": "taken.json"}
            )
        )
        outside = error_text(
            await client.call_tool("transcribe", {"path": str(tmp_path / "talk.mp4"), "model": TINY_ID})
        )
        missing = error_text(await client.call_tool("transcribe", {"path": "talk.mp4", "model": "absent"}))
    assert out["path"] == str((workdir / "talk.mp4").resolve()) and out["model"] == TINY_ID
    assert 0 < out["confidence"] <= 1 and out["language_given"] is False
    assert out["duration_seconds"] == pytest.approx(6.0, abs=0.1)
    words = [w for s in out["segments"] for w in s["words"]]
    assert words and all(0 <= w["start"] <= w["end"] <= 6.1 for w in words)
    assert out["text"].split()[0] == words[0]["word"]
    written = json.loads((workdir / "talk.json").read_text(encoding="utf-8"))
    assert out["output_path"] == str((workdir / "talk.json").resolve())
    assert written["language"] == out["language"] and len(written["segments"]) == len(out["segments"])
    assert given["language"] == "fr" and given["confidence"] == 1.0 and given["output_path"] is None
    assert "already exists" in again and (workdir / "taken.json").read_text(encoding="utf-8") == "mine"
    assert "[path_not_allowed]" in outside
    assert "[asr_model_not_installed]" in missing
    assert seen and seen == sorted(seen) and len(set(seen)) == len(seen)
    assert not list(workdir.glob(".*part*"))


async def test_subtitle_file_writes_every_track_never_overwrites_and_reports_progress(
    asr_env: dict[str, str], workdir: Path
) -> None:
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    arguments: dict[str, Any] = {
        "path": "talk.mp4",
        "model": TINY_ID,
        "source": "en",
        "targets": ["es"],
        "formats": ["srt", "vtt", "bilingual_srt"],
    }
    async with in_process(asr_env, roots=[workdir]) as client:
        out = structured(await client.call_tool("subtitle_file", arguments, progress_callback=on_progress))
        before = {p.name: p.read_bytes() for p in workdir.iterdir()}
        again = error_text(await client.call_tool("subtitle_file", arguments))
        after = {p.name: p.read_bytes() for p in workdir.iterdir()}
        forced = structured(await client.call_tool("subtitle_file", {**arguments, "overwrite": True}))
        elsewhere = structured(
            await client.call_tool(
                "subtitle_file", {"path": "talk.mp4", "model": TINY_ID, "source": "en", "output_dir": "subs"}
            )
        )
        bad_format = error_text(await client.call_tool("subtitle_file", {**arguments, "formats": ["ass"]}))
        lonely = error_text(
            await client.call_tool(
                "subtitle_file", {**arguments, "targets": [], "formats": ["bilingual_srt"]}
            )
        )
    names = ["talk.en.srt", "talk.en.vtt", "talk.es.srt", "talk.es.vtt", "talk.en-es.srt"]
    assert [Path(p).name for p in out["written"]] == names
    assert all(Path(p).parent == workdir.resolve() for p in out["written"])
    assert [t["language"] for t in out["tracks"]] == ["en", "es"] and out["tracks"][1]["translated"]
    assert out["tracks"][0]["cues"] == out["tracks"][1]["cues"] > 0 and out["tracks"][1]["route"]
    assert "already exists" in again and "[invalid_request]" in again
    assert after == before  # nothing touched by the refused call
    assert forced["written"] == out["written"]
    assert [Path(p).name for p in elsewhere["written"]] == ["talk.en.srt"]
    assert Path(elsewhere["written"][0]).parent == (workdir / "subs").resolve()
    assert "formats.0" in bad_format and "bilingual_srt" in bad_format and "[invalid_request]" in bad_format
    assert "target" in lonely and "[invalid_request]" in lonely
    values = [p for p, _ in seen]
    assert values == sorted(values) and len(set(values)) == len(values) and values[-1] == 1000
    assert {t for _, t in seen} == {1000.0}
    assert not list(workdir.glob(".*part*"))


async def test_subtitle_file_outside_the_roots_is_refused(
    asr_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    async with in_process(asr_env, roots=[workdir]) as client:
        outside = error_text(
            await client.call_tool(
                "subtitle_file", {"path": "talk.mp4", "model": TINY_ID, "output_dir": str(tmp_path / "x")}
            )
        )
    assert "[path_not_allowed]" in outside and not (tmp_path / "x").exists()


async def test_a_cancelled_subtitle_file_stops_and_leaves_no_file(
    asr_env: dict[str, str], workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered = threading.Event()
    stopped: list[str] = []
    real = pipeline.translate_track

    def slow_translate(*args: Any, context: JobContext | None = None, **kwargs: Any) -> Any:
        entered.set()
        assert context is not None
        deadline = time.monotonic() + 30
        try:
            while time.monotonic() < deadline:  # work in small units, checking between them
                context.check()
                time.sleep(0.02)
        except Cancelled:
            stopped.append("cancelled")
            raise
        return real(*args, context=context, **kwargs)

    monkeypatch.setattr(pipeline, "translate_track", slow_translate)
    arguments = {"path": "talk.mp4", "model": TINY_ID, "source": "en", "targets": ["es"]}
    async with in_process(asr_env, roots=[workdir]) as client:
        async with anyio.create_task_group() as group:

            async def call() -> None:
                await client.call_tool("subtitle_file", arguments)

            group.start_soon(call)
            with anyio.fail_after(60):
                while not entered.is_set():
                    await anyio.sleep(0.02)
            group.cancel_scope.cancel()
        with anyio.fail_after(10):
            while not stopped:
                await anyio.sleep(0.02)
        listed = structured(await client.call_tool("list_languages", {}))  # the session is still usable
    assert stopped == ["cancelled"] and listed["count"] >= 2
    assert sorted(p.name for p in workdir.iterdir()) == ["talk.mp4"]


async def test_a_broken_glossary_file_is_a_tool_error_and_nothing_is_written(
    asr_env: dict[str, str], workdir: Path
) -> None:
    glossary = Path(asr_env["DRAGOMAN_GLOSSARY"])
    glossary.parent.mkdir(parents=True, exist_ok=True)
    glossary.write_text("{not json", encoding="utf-8")
    async with in_process(asr_env, roots=[workdir]) as client:
        broken = error_text(
            await client.call_tool("subtitle_file", {"path": "talk.mp4", "model": TINY_ID, "targets": ["es"]})
        )
    assert "[glossary_file]" in broken
    assert sorted(p.name for p in workdir.iterdir()) == ["talk.mp4"]
