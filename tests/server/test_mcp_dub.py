"""The MCP tool ``dub_video`` (issue 16), in process: inside the allowed roots only, never over a file,
progress on one growing scale, a cancelled call stops at the next line and leaves no file, typed errors. A
short video of English speech made in the test, its own source subtitles given (no recogniser needed), the
tiny en->es pack translating, the real synthesizer, mixer and ffmpeg."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from dub_front_support import fake_result, make_dub_media, needs_ffmpeg, stream_kinds
from mcp_support import error_text, in_process, structured

from dragoman.errors import Cancelled
from dragoman.pipelines import dub as pipeline
from dragoman.server.mcp._runtime import ServerState

pytestmark = [pytest.mark.anyio, needs_ffmpeg]


@pytest.fixture(scope="module")
def media_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("dub-media")
    make_dub_media(folder)
    return folder


@pytest.fixture
def dub_env(server_env: dict[str, str], media_dir: Path, workdir: Path) -> dict[str, str]:
    for name in ("talk.mp4", "source.srt"):
        shutil.copy(media_dir / name, workdir / name)
    return server_env


ARGUMENTS: dict[str, Any] = {
    "path": "talk.mp4",
    "targets": ["es"],
    "source": "en",
    "subtitles": "source.srt",
}


async def test_dub_video_writes_the_files_reports_progress_and_never_overwrites(
    dub_env: dict[str, str], workdir: Path
) -> None:
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async with in_process(dub_env, roots=[workdir]) as client:
        out = structured(await client.call_tool("dub_video", ARGUMENTS, progress_callback=on_progress))
        before = {p.name: p.read_bytes() for p in workdir.iterdir()}
        again = error_text(await client.call_tool("dub_video", ARGUMENTS))
        after = {p.name: p.read_bytes() for p in workdir.iterdir()}
        forced = structured(await client.call_tool("dub_video", {**ARGUMENTS, "overwrite": True}))
    assert out["path"] == str((workdir / "talk.mp4").resolve()) and out["provenance"] == "on-device"
    assert out["source_language"] == "en" and out["confidence"] == 1.0
    (dub,) = out["dubs"]
    assert dub["target"] == "es" and dub["lines"] == 2 and dub["voices"] == ["aria"]
    assert Path(dub["video"]).name == "talk.es.mp4" and Path(dub["audio"]).name == "talk.es.dub.m4a"
    assert stream_kinds(Path(dub["video"])).count("video") == 1
    assert set(dub["stage_seconds"]) >= {"probe", "translate", "synthesise", "mix", "mux"}
    assert dub["duration_seconds"] == pytest.approx(out["duration_seconds"], abs=0.1)
    assert set(out["written"]) == {dub["video"], dub["audio"], *dub["subtitles"].values()}
    assert all(Path(p).parent == workdir.resolve() and Path(p).is_file() for p in out["written"])
    assert "already exists" in again and "[invalid_request]" in again
    assert after == before  # nothing touched by the refused call
    assert forced["written"] == out["written"]
    values = [p for p, _ in seen]
    assert values and values == sorted(values) and len(set(values)) == len(values)
    assert len({t for _, t in seen}) == 1  # one scale
    assert not list(workdir.glob(".*"))


async def test_paths_outside_the_roots_are_refused(
    dub_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    (tmp_path / "outside.srt").write_text("1\n00:00:00,000 --> 00:00:01,000\nHi\n", encoding="utf-8")
    async with in_process(dub_env, roots=[workdir]) as client:
        refused = [
            error_text(await client.call_tool("dub_video", {**ARGUMENTS, **change}))
            for change in (
                {"path": str(tmp_path / "talk.mp4")},
                {"output_dir": str(tmp_path / "x")},
                {"subtitles": str(tmp_path / "outside.srt")},
            )
        ]
    assert all("[path_not_allowed]" in text for text in refused), refused
    assert not (tmp_path / "x").exists()
    assert sorted(p.name for p in workdir.iterdir()) == ["source.srt", "talk.mp4"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"voice_mode": "match", "voice": "aria"}, "voice names the one voice"),
        ({"voice_mode": "clone"}, "needs clone_id"),
        ({"clone_id": "abc"}, "needs voice_mode 'clone'"),
    ],
)
async def test_contradicting_voice_arguments_are_refused(
    dub_env: dict[str, str], workdir: Path, change: dict[str, Any], message: str
) -> None:
    async with in_process(dub_env, roots=[workdir]) as client:
        text = error_text(await client.call_tool("dub_video", {**ARGUMENTS, **change}))
    assert message in text and text.endswith("[invalid_request]"), text


async def test_typed_errors_for_an_unknown_voice_clone_and_media(
    dub_env: dict[str, str], workdir: Path
) -> None:
    (workdir / "notes.mp4").write_text("this is not a video at all", encoding="utf-8")
    async with in_process(dub_env, roots=[workdir]) as client:
        voice = error_text(await client.call_tool("dub_video", {**ARGUMENTS, "voice": "zeus"}))
        clone = error_text(
            await client.call_tool(
                "dub_video",
                {**ARGUMENTS, "voice_mode": "clone", "clone_id": "00000000-0000-0000-0000-000000000000"},
            )
        )
        media = error_text(await client.call_tool("dub_video", {**ARGUMENTS, "path": "notes.mp4"}))
    assert "zeus" in voice and "[invalid_request]" in voice
    assert "[clone_not_found]" in clone
    assert "[unsupported_media]" in media
    assert sorted(p.name for p in workdir.iterdir()) == ["notes.mp4", "source.srt", "talk.mp4"]


async def test_several_targets_are_one_batch_on_the_servers_models(
    dub_env: dict[str, str], workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Any] = []

    def recorded(media: Path, targets: Any, options: Any, **kwargs: Any) -> list[Any]:
        calls.append((media, list(targets), options, kwargs))
        return [fake_result(media, target) for target in targets]

    monkeypatch.setattr(pipeline, "dub_batch", recorded)
    arguments = {**ARGUMENTS, "targets": ["es", "fr"], "voice_mode": "match", "output_dir": "out"}
    async with in_process(dub_env, roots=[workdir]) as client:
        first = structured(await client.call_tool("dub_video", arguments))
        structured(await client.call_tool("dub_video", arguments))
    (media, targets, options, kwargs), (_, _, _, second) = calls
    assert media == (workdir / "talk.mp4").resolve()
    assert targets == ["es", "fr"] and options.voice_mode == "match"
    assert kwargs["out_dir"] == (workdir / "out").resolve()
    # one recogniser, synthesizer and engine per server process
    for name in ("recognizer", "synthesizer", "engine"):
        assert kwargs[name] is second[name], name
    assert [d["target"] for d in first["dubs"]] == ["es", "fr"]
    assert first["dubs"][0]["beyond_natural"] == [1] and first["dubs"][0]["voices"] == ["aria", "marcus"]
    assert first["warnings"] == ["es: line 1 compressed", "fr: line 1 compressed"]


async def test_a_cancelled_dub_stops_at_the_next_line_and_leaves_no_file(
    dub_env: dict[str, str], workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered = threading.Event()
    stopped: list[str] = []
    real_batch = pipeline.dub_batch
    real_synthesizer = ServerState.synthesizer

    def slow_synthesizer(self: ServerState) -> Any:
        synthesizer = real_synthesizer(self)
        if getattr(synthesizer, "_slowed", False):
            return synthesizer
        speak = synthesizer.synthesize

        def slow(*args: Any, **kwargs: Any) -> Any:
            entered.set()
            time.sleep(0.5)
            return speak(*args, **kwargs)

        synthesizer.synthesize = slow  # type: ignore[method-assign]
        synthesizer._slowed = True  # type: ignore[attr-defined]
        return synthesizer

    def watched(*args: Any, **kwargs: Any) -> Any:
        try:
            return real_batch(*args, **kwargs)
        except Cancelled:
            stopped.append("cancelled")
            raise

    monkeypatch.setattr(ServerState, "synthesizer", slow_synthesizer)
    monkeypatch.setattr(pipeline, "dub_batch", watched)
    async with in_process(dub_env, roots=[workdir]) as client:
        async with anyio.create_task_group() as group:

            async def call() -> None:
                await client.call_tool("dub_video", ARGUMENTS)

            group.start_soon(call)
            with anyio.fail_after(120):
                while not entered.is_set():
                    await anyio.sleep(0.02)
            group.cancel_scope.cancel()
        with anyio.fail_after(30):
            while not stopped:
                await anyio.sleep(0.02)
        listed = structured(await client.call_tool("list_languages", {}))  # the session is still usable
    assert stopped == ["cancelled"] and listed["count"] >= 2
    assert sorted(p.name for p in workdir.iterdir()) == ["source.srt", "talk.mp4"]
