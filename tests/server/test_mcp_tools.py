"""The MCP tools' behaviour, in process: the server :func:`build_server` makes, driven by the SDK's client.

Every tool is listed and called against a tiny real pack (and Apertium where installed), over the SDK's
in-memory transport in the handshake-era protocol stdio clients speak. Misbehaving library code (a slow
engine call, a warning) is patched with ``monkeypatch``. What only a real process shows (start-up through
the CLI, stdout hygiene, cancellation over the wire) is in test_mcp_stdio.py.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_support import FRENCH, OPEN_WORLD, READ_ONLY, TOOLS, error_text, in_process, structured
from mcp_types import LoggingMessageNotificationParams

import dragoman.translation.engine as eng
from dragoman.limits import MAX_BATCH_TEXTS, MAX_GLOSSARY_ENTRIES, MAX_TEXT_CHARS

pytestmark = pytest.mark.anyio


# ----- listing ---------------------------------------------------------------------------------------
async def test_every_tool_listed_with_bounded_inputs_output_schema_and_true_annotations(
    server_env: dict[str, str], workdir: Path
) -> None:
    async with in_process(server_env, roots=[workdir]) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        assert tool.description, name
        assert tool.output_schema is not None, name
        assert "provenance" in tool.output_schema["properties"], name
        assert tool.annotations is not None, name
        assert tool.annotations.open_world_hint is (name in OPEN_WORLD), name
        assert tool.annotations.read_only_hint is (name in READ_ONLY), name
        assert tool.annotations.idempotent_hint is (
            name
            not in {
                "translate_file",
                "ocr_translate",
                "speak",
                "subtitle_file",
                "dub_video",
                "translate_files",
            }
        ), name
    # speak writes a new file each call and never overwrites one (issue 14)
    assert tools["speak"].annotations.destructive_hint is False  # type: ignore[union-attr]
    # transcribe writes only a new file when asked; subtitle_file may replace its outputs (issue 15)
    assert tools["transcribe"].annotations.destructive_hint is False  # type: ignore[union-attr]
    assert tools["subtitle_file"].annotations.destructive_hint is True  # type: ignore[union-attr]
    # dub_video may replace its own outputs when told to (issue 16)
    assert tools["dub_video"].annotations.destructive_hint is True  # type: ignore[union-attr]
    assert tools["glossary_remove"].annotations.destructive_hint is True  # type: ignore[union-attr]
    # glossary_add replaces a term already in its scope: destructive (issue 9, item 9)
    assert tools["glossary_add"].annotations.destructive_hint is True  # type: ignore[union-attr]
    for name, tool in tools.items():  # a misspelt argument is refused, never ignored
        assert tool.input_schema.get("additionalProperties") is False, name
    batch = tools["translate_batch"].input_schema["properties"]
    assert batch["texts"]["maxItems"] == MAX_BATCH_TEXTS
    assert batch["texts"]["items"]["maxLength"] == MAX_TEXT_CHARS
    assert batch["glossary"]["anyOf"][0]["maxItems"] == MAX_GLOSSARY_ENTRIES
    assert tools["translate"].input_schema["required"] == ["text", "target"]
    assert tools["translate"].input_schema["properties"]["text"]["maxLength"] == MAX_TEXT_CHARS
    assert tools["translate"].input_schema["properties"]["tier"]["anyOf"][0]["enum"] == ["best", "fast"]
    assert tools["glossary_add"].input_schema["properties"]["entries"]["maxItems"] == MAX_GLOSSARY_ENTRIES
    assert "ctx" not in tools["translate"].input_schema["properties"]
    assert "roots" not in tools["translate_file"].input_schema["properties"]
    assert set(tools["translate"].output_schema["required"]) >= {  # type: ignore[index]
        "translation",
        "source",
        "target",
        "seconds",
        "warnings",
    }


def test_limits_match_the_engine() -> None:
    from dragoman.translation import engine

    # the engine enforces the limits the tools advertise (it imports them from dragoman.limits)
    assert vars(engine)["MAX_BATCH_TEXTS"] == MAX_BATCH_TEXTS
    assert vars(engine)["MAX_TEXT_CHARS"] == MAX_TEXT_CHARS


# ----- calls -----------------------------------------------------------------------------------------
async def test_translate_returns_a_structured_result_and_a_text_block(
    server_env: dict[str, str], workdir: Path
) -> None:
    async with in_process(server_env, roots=[workdir]) as client:
        result = await client.call_tool(
            "translate", {"text": "The house is red.", "target": "es", "source": "en"}
        )
    data = structured(result)
    assert data["source"] == "eng_Latn" and data["target"] == "spa_Latn"
    assert isinstance(data["translation"], str) and data["translation"].strip()
    assert data["seconds"] >= 0 and isinstance(data["warnings"], list)
    assert data["tier"] == "best"
    assert result.content[0].text.startswith(data["translation"])  # type: ignore[union-attr]


async def test_translate_batch_keeps_order_and_detects_each_text(
    server_env: dict[str, str], workdir: Path
) -> None:
    texts = [
        "The weather is lovely today and we are going for a walk.",
        "",
        "A second English sentence here.",
    ]
    async with in_process(server_env, roots=[workdir]) as client:
        data = structured(await client.call_tool("translate_batch", {"texts": texts, "target": "spa_Latn"}))
    assert data["count"] == 3 and len(data["results"]) == 3
    assert data["results"][1]["translation"] == ""  # empty stays empty, in its place
    assert all(r["provenance"] == "on-device" and r["target"] == "spa_Latn" for r in data["results"])
    assert data["results"][0]["source"] == "eng_Latn"


async def test_detect_language_and_list_languages(server_env: dict[str, str], workdir: Path) -> None:
    async with in_process(server_env, roots=[workdir]) as client:
        found = structured(await client.call_tool("detect_language", {"text": FRENCH}))
        short = structured(await client.call_tool("detect_language", {"text": "ok"}))
        installed = structured(await client.call_tool("list_languages", {}))
        catalogue = structured(await client.call_tool("list_languages", {"installed_only": False}))
    assert (found["flores"], found["bcp47"]) == ("fra_Latn", "fr") and found["confidence"] > 0.5
    assert short["flores"] is None and short["reason"]
    assert {row["flores"] for row in installed["languages"]} == {"eng_Latn", "spa_Latn"}
    assert catalogue["count"] >= 200 and catalogue["installed_only"] is False
    rtl = {row["flores"] for row in catalogue["languages"] if row["rtl"]}
    assert "arb_Arab" in rtl and "eng_Latn" not in rtl


async def test_engine_status_reports_paths_packs_and_allowed_dirs(
    server_env: dict[str, str], workdir: Path
) -> None:
    async with in_process(server_env, roots=[workdir]) as client:
        data = structured(await client.call_tool("engine_status", {}))
    assert data["packs_dir"] == server_env["DRAGOMAN_PACKS_DIR"]
    assert data["glossary"]["path"] == server_env["DRAGOMAN_GLOSSARY"]
    assert data["allowed_dirs"] == [str(workdir.resolve())]
    assert data["daemon"]["alive"] is False
    assert "system" in data["platform"]


async def test_glossary_add_list_remove_round_trip_and_applies_to_translate(
    server_env: dict[str, str], workdir: Path
) -> None:
    entries = [{"term": "Dragoman", "translation": "DRAGOMAN-ES", "caseSensitive": True}]
    async with in_process(server_env, roots=[workdir]) as client:
        added = structured(await client.call_tool("glossary_add", {"entries": entries}))
        scoped = structured(
            await client.call_tool(
                "glossary_add",
                {"entries": [{"term": "tea", "translation": "té"}], "source": "en", "target": "es"},
            )
        )
        listed = structured(await client.call_tool("glossary_list", {}))
        pair = structured(await client.call_tool("glossary_list", {"source": "en", "target": "fr"}))
        used = structured(
            await client.call_tool(
                "translate", {"text": "Dragoman works offline.", "target": "es", "source": "en"}
            )
        )
        removed = structured(await client.call_tool("glossary_remove", {"terms": ["Dragoman"]}))
        again = structured(await client.call_tool("glossary_remove", {"terms": ["Dragoman"]}))
    assert added["added"] == 1 and added["path"] == server_env["DRAGOMAN_GLOSSARY"]
    tea = {
        "term": "tea",
        "translation": "té",
        "caseSensitive": False,
        "source": "eng_Latn",
        "target": "spa_Latn",
    }
    assert tea in scoped["entries"] and scoped["count"] == 2  # the scope's own entry plus the unscoped one
    assert {e["term"] for e in listed["entries"]} == {"Dragoman", "tea"}
    assert [e["term"] for e in pair["entries"]] == ["Dragoman"]  # the en->es entry does not apply to en->fr
    assert "DRAGOMAN-ES" in used["translation"]
    assert removed["removed"] == 1 and again["removed"] == 0
    assert json.loads(Path(server_env["DRAGOMAN_GLOSSARY"]).read_text(encoding="utf-8"))


# ----- errors ----------------------------------------------------------------------------------------
async def test_errors_are_tool_errors_with_actionable_text(server_env: dict[str, str], workdir: Path) -> None:
    async with in_process(server_env, roots=[workdir]) as client:
        unknown = error_text(await client.call_tool("translate", {"text": "Hello.", "target": "spanlsh"}))
        pair = error_text(
            await client.call_tool("translate", {"text": "Hello.", "target": "de", "source": "en"})
        )
        too_many = error_text(
            await client.call_tool("translate_batch", {"texts": ["x"] * 65, "target": "es"})
        )
        bad_tier = error_text(
            await client.call_tool("translate", {"text": "Hello.", "target": "es", "tier": "ultra"})
        )
        ocr = error_text(await client.call_tool("ocr_translate", {"path": "scan.png", "target": "es"}))
        fake_png = workdir / "fake.png"
        fake_png.write_bytes(b"not an image at all")
        not_image = error_text(await client.call_tool("ocr_translate", {"path": "fake.png", "target": "es"}))
        still_fine = structured(
            await client.call_tool("translate", {"text": "Hi.", "target": "es", "source": "en"})
        )
    assert "spanlsh" in unknown and "spa_Latn" in unknown and "[unknown_language]" in unknown
    assert "dragoman packs install" in pair and "eng_Latn->spa_Latn" in pair
    assert "64" in too_many
    assert "tier" in bad_tier
    assert "scan.png" in ocr and "does not exist" in ocr and "[invalid_request]" in ocr
    assert "fake.png" in not_image and "[unsupported_document]" in not_image
    assert still_fine["target"] == "spa_Latn"


# ----- progress, concurrency, cancellation ----------------------------------------------------------
async def test_batch_sends_progress_when_given_a_token(server_env: dict[str, str], workdir: Path) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    texts = [f"Sentence number {i} is here." for i in range(40)]
    async with in_process(server_env, roots=[workdir]) as client:
        data = structured(
            await client.call_tool(
                "translate_batch",
                {"texts": texts, "target": "es", "source": "en"},
                progress_callback=on_progress,
            )
        )
        with anyio.fail_after(5):
            while not any(total and progress >= total for progress, total, _ in seen):
                await anyio.sleep(0.01)
    assert data["count"] == 40
    values = [p for p, _, _ in seen]
    assert values == sorted(set(values)) and values[0] == 0 and len(values) >= 2
    assert seen[-1][1] == seen[-1][0] and seen[-1][2]


async def test_calls_run_concurrently_without_blocking_the_loop(
    server_env: dict[str, str], workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A rendezvous in the engine: each call waits inside the engine until the other one is in there too, so
    # both can only succeed if the server runs them at the same time and its loop stays free while one
    # waits (run one after the other, the first waits in vain and fails).
    detecting, translating = threading.Event(), threading.Event()
    original_detect, original_translate = eng.Engine.detect, eng.Engine.translate

    def detect(self: eng.Engine, text: str, *args: Any, **kwargs: Any) -> Any:
        if text == "SLOW":
            detecting.set()
            if not translating.wait(60):
                raise RuntimeError("translate never ran while detect_language was in the engine")
        return original_detect(self, text, *args, **kwargs)

    def translate(self: eng.Engine, *args: Any, **kwargs: Any) -> Any:
        translating.set()
        if not detecting.wait(60):
            raise RuntimeError("detect_language never ran while translate was in the engine")
        return original_translate(self, *args, **kwargs)

    monkeypatch.setattr(eng.Engine, "detect", detect)
    monkeypatch.setattr(eng.Engine, "translate", translate)
    finished: list[str] = []
    async with in_process(server_env, roots=[workdir]) as client:
        structured(await client.call_tool("list_languages", {}))  # the engine exists before the race

        async def call(name: str, args: dict[str, Any]) -> None:
            structured(await client.call_tool(name, args))
            finished.append(name)

        async with anyio.create_task_group() as group:
            group.start_soon(call, "detect_language", {"text": "SLOW"})
            group.start_soon(call, "translate", {"text": "Fast one.", "target": "es", "source": "en"})
    assert sorted(finished) == ["detect_language", "translate"]


async def test_dragoman_warnings_reach_the_client_logging_capability(
    server_env: dict[str, str],
    workdir: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    original = eng.Engine.detect

    def detect(self: eng.Engine, text: str) -> Any:
        logging.getLogger("dragoman.translation.hook").warning("HOOK-WARNING for %s", text[:5])
        logging.getLogger("dragoman.translation.hook").info("HOOK-INFO")
        return original(self, text)

    monkeypatch.setattr(eng.Engine, "detect", detect)
    caplog.set_level(logging.WARNING, logger="dragoman")  # the server's own level, as `dragoman mcp` sets it
    received: list[LoggingMessageNotificationParams] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        received.append(params)

    async with in_process(server_env, roots=[workdir], logging_callback=on_log) as client:
        assert client.server_capabilities.logging is not None
        structured(await client.call_tool("detect_language", {"text": FRENCH}))
        with pytest.warns(MCPDeprecationWarning):  # deprecated by the 2026-07-28 spec, still served
            await client.set_logging_level("error")
        structured(await client.call_tool("detect_language", {"text": FRENCH}))
        with pytest.warns(MCPDeprecationWarning):
            await client.set_logging_level("info")
        structured(await client.call_tool("detect_language", {"text": FRENCH}))
        with anyio.fail_after(5):
            while len(received) < 2:
                await anyio.sleep(0.01)
        await anyio.sleep(0.2)  # room for a wrongly forwarded third record to show up
    # The second call's warning is below the client's level (error); INFO is below the server's own level
    # (WARNING unless `dragoman -v`), so it is never logged at all.
    assert [(r.level, r.data) for r in received] == [
        ("warning", "HOOK-WARNING for Bonjo"),
        ("warning", "HOOK-WARNING for Bonjo"),
    ]
    assert received[0].logger == "dragoman.translation.hook"


# ----- files ---------------------------------------------------------------------------------------------
async def test_translate_file_writes_next_to_the_input_and_never_overwrites(
    server_env: dict[str, str], workdir: Path
) -> None:
    source = workdir / "notes.md"
    source.write_text(
        "# Title\n\nFirst paragraph here.\n\nSecond paragraph, two sentences. Yes.\n", encoding="utf-8"
    )
    (workdir / "report.pdf").write_bytes(b"%PDF-1.4 fake")
    (workdir / "blob.txt").write_bytes(b"\x00\x01\x02binary")
    async with in_process(server_env, roots=[workdir]) as client:
        first = structured(
            await client.call_tool("translate_file", {"path": "notes.md", "target": "es", "source": "en"})
        )
        again = error_text(
            await client.call_tool("translate_file", {"path": "notes.md", "target": "es", "source": "en"})
        )
        forced = structured(
            await client.call_tool(
                "translate_file", {"path": str(source), "target": "es", "source": "en", "overwrite": True}
            )
        )
        onto_input = error_text(
            await client.call_tool(
                "translate_file",
                {"path": "notes.md", "target": "es", "output_path": "notes.md", "overwrite": True},
            )
        )
        pdf = error_text(await client.call_tool("translate_file", {"path": "report.pdf", "target": "es"}))
        binary = error_text(await client.call_tool("translate_file", {"path": "blob.txt", "target": "es"}))
    out = workdir / "notes.es.md"
    assert first["output_path"] == str(out) == forced["output_path"]
    assert first["input_path"] == str(source.resolve()) and first["format"] == "markdown"
    translated = out.read_text(encoding="utf-8")
    assert translated.count("\n\n") == source.read_text(encoding="utf-8").count("\n\n")
    assert "already exists" in again and "overwrite" in again
    assert "input" in onto_input
    assert source.read_text(encoding="utf-8").startswith("# Title")
    assert "report.pdf" in pdf and "[unsupported_document]" in pdf  # named .pdf, not a readable PDF
    assert "blob.txt" in binary and "[unsupported_document]" in binary


@pytest.mark.skipif(
    shutil.which("tesseract") is None, reason="apt-get install tesseract-ocr tesseract-ocr-eng"
)
async def test_ocr_translate_reads_the_image_and_answers_boxes(
    server_env: dict[str, str], workdir: Path
) -> None:
    from PIL import Image, ImageDraw, ImageFont

    font_path = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
    if not font_path.is_file():
        pytest.skip("apt-get install fonts-dejavu-core")
    image = Image.new("RGB", (900, 160), "white")
    ImageDraw.Draw(image).text(
        (30, 50), "The house is red.", fill="black", font=ImageFont.truetype(str(font_path), 48)
    )
    image.save(workdir / "sign.png")
    async with in_process(server_env, roots=[workdir]) as client:
        read = structured(
            await client.call_tool("ocr_translate", {"path": "sign.png", "target": "es", "source": "en"})
        )
        assert not (workdir / "sign.es.png").exists()
        rendered = structured(
            await client.call_tool(
                "ocr_translate", {"path": "sign.png", "target": "es", "source": "en", "render": True}
            )
        )
    assert "house" in read["text"] and read["translation"].strip() and read["provenance"] == "on-device"
    assert read["boxes"] and read["boxes"][0]["page"] == 1 and len(read["boxes"][0]["bbox"]) == 4
    assert read["output_path"] is None
    assert rendered["output_path"] == str(workdir / "sign.es.png") and (workdir / "sign.es.png").is_file()


async def test_file_tools_refuse_paths_outside_the_allowed_dirs(
    server_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    secret = secret_dir / "id_rsa.txt"
    secret.write_text("PRIVATE KEY", encoding="utf-8")
    (workdir / "link.txt").symlink_to(secret)
    (workdir / "ok.txt").write_text("Hello there.", encoding="utf-8")
    async with in_process(server_env, roots=[workdir]) as client:
        direct = error_text(await client.call_tool("translate_file", {"path": str(secret), "target": "es"}))
        dotdot = error_text(
            await client.call_tool("translate_file", {"path": "../secret/id_rsa.txt", "target": "es"})
        )
        link = error_text(await client.call_tool("translate_file", {"path": "link.txt", "target": "es"}))
        out = error_text(
            await client.call_tool(
                "translate_file", {"path": "ok.txt", "target": "es", "output_path": str(secret_dir / "x.txt")}
            )
        )
        ocr = error_text(await client.call_tool("ocr_translate", {"path": str(secret), "target": "es"}))
    for text in (direct, dotdot, link, out, ocr):
        assert "outside the allowed directories" in text and str(workdir.resolve()) in text
        assert "[path_not_allowed]" in text
    assert not (secret_dir / "x.txt").exists() and not (secret_dir / "id_rsa.es.txt").exists()


async def test_client_roots_replace_the_working_directory_and_allowed_dirs_add(
    server_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    extra = tmp_path / "shared"
    for directory in (root, extra):
        directory.mkdir()
        (directory / "a.txt").write_text("Good morning.", encoding="utf-8")
    (workdir / "a.txt").write_text("Good morning.", encoding="utf-8")
    env = {**server_env, "DRAGOMAN_ALLOWED_DIRS": str(extra)}
    async with in_process(env, roots=[root]) as client:
        in_root = structured(
            await client.call_tool("translate_file", {"path": "a.txt", "target": "es", "source": "en"})
        )
        in_extra = structured(
            await client.call_tool(
                "translate_file", {"path": str(extra / "a.txt"), "target": "es", "source": "en"}
            )
        )
        in_cwd = error_text(
            await client.call_tool("translate_file", {"path": str(workdir / "a.txt"), "target": "es"})
        )
    assert in_root["output_path"] == str(root.resolve() / "a.es.txt")
    assert in_extra["output_path"] == str(extra.resolve() / "a.es.txt")
    assert str(root.resolve()) in in_cwd and str(extra.resolve()) in in_cwd


# ----- a real translation through Apertium -----------------------------------------------------------
@pytest.mark.apertium
async def test_translate_through_apertium(server_env: dict[str, str], workdir: Path) -> None:
    if not Path("/usr/share/apertium/modes/eng-spa.mode").exists():
        pytest.skip("apertium eng-spa is not installed")
    env = {**server_env, "DRAGOMAN_APERTIUM": "1", "DRAGOMAN_PACKS_DIR": str(workdir / "no-packs")}
    async with in_process(env, roots=[workdir]) as client:
        data = structured(
            await client.call_tool("translate", {"text": "The house is red.", "target": "es", "source": "en"})
        )
    assert "casa" in data["translation"].lower()
    assert any("apertium" in hop for hop in data["route"])


# ----- speech (issue 14) ---------------------------------------------------------------------------------
async def test_list_voices_answers_ten_voices_31_languages_and_engines(
    server_env: dict[str, str], workdir: Path
) -> None:
    async with in_process(server_env, roots=[workdir]) as client:
        out = structured(await client.call_tool("list_voices", {}))
    assert [v["name"] for v in out["voices"]][:3] == ["aria", "nova", "lyra"] and len(out["voices"]) == 10
    assert len(out["languages"]) == 31 and out["provenance"] == "on-device"
    english = next(lang for lang in out["languages"] if lang["code"] == "en")
    assert english["engines"]  # espeak-ng at least
    assert out["voices"][0]["languages"]["en"]["standard"]["engine"] in english["engines"]
    assert set(out["emotions"]) == {"whisper", "shout", "sad", "urgent", "excited", "warm", "calm"}


async def test_speak_writes_a_new_wav_inside_the_roots_and_never_overwrites(
    server_env: dict[str, str], workdir: Path, tmp_path: Path
) -> None:
    from dragoman.media.audio import read_wav

    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    text = "Good morning. The weather is fine today. We leave at nine."
    (workdir / "taken.wav").write_bytes(b"keep me")
    (workdir / "out").mkdir()
    async with in_process(server_env, roots=[workdir]) as client:
        first = structured(
            await client.call_tool(
                "speak",
                {"text": text, "language": "en", "voice": "marcus", "emotion_preset": "calm"},
                progress_callback=on_progress,
            )
        )
        second = structured(await client.call_tool("speak", {"text": "Hello.", "language": "en"}))
        named = structured(
            await client.call_tool(
                "speak",
                {
                    "text": "Hello.",
                    "language": "de",
                    "output_path": "out/hallo.wav",
                    "emotion": {"pitch_delta_st": 2.0},
                    "speed": 1.2,
                },
            )
        )
        taken = error_text(
            await client.call_tool("speak", {"text": "Hello.", "language": "en", "output_path": "taken.wav"})
        )
        outside = error_text(
            await client.call_tool(
                "speak", {"text": "Hello.", "language": "en", "output_path": str(tmp_path / "x.wav")}
            )
        )
        bad_speed = error_text(await client.call_tool("speak", {"text": "Hi.", "language": "en", "speed": 2}))
        bad_lang = error_text(await client.call_tool("speak", {"text": "Hi.", "language": "xx"}))
        bad_emotion = error_text(
            await client.call_tool("speak", {"text": "Hi.", "language": "en", "emotion": {"energy_ratio": 9}})
        )
    path = Path(first["path"])
    assert path.parent == workdir.resolve() and path.name == "speech-marcus-en-1.wav"
    audio = read_wav(path.read_bytes())
    assert audio.duration == pytest.approx(first["duration_seconds"], abs=0.01) and audio.duration > 2
    assert first["voice"] == "marcus" and first["language"] == "en" and first["engine"]
    assert first["sentences"] == 3 and first["provenance"] == "on-device"
    assert isinstance(first["words"], list)
    assert Path(second["path"]).name == "speech-aria-en-1.wav"
    assert named["path"] == str(workdir.resolve() / "out" / "hallo.wav")
    assert named["language"] == "de"
    assert (workdir / "taken.wav").read_bytes() == b"keep me"
    assert "already exists" in taken and "[invalid_request]" in taken
    assert "[path_not_allowed]" in outside and not (tmp_path / "x.wav").exists()
    assert "speed" in bad_speed and "[invalid_request]" in bad_speed
    assert "'xx'" in bad_lang and "[invalid_request]" in bad_lang
    assert "energy_ratio" in bad_emotion
    assert [p for p, _, _ in seen] == [1.0, 2.0, 3.0] and seen[-1][1] == 3.0
    assert not list(workdir.glob(".*.part"))


async def test_speak_with_a_clone_id_speaks_in_the_clones_matched_voice(
    server_env: dict[str, str], workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``clone_id`` (issue 14): the clone's matched voice overrides ``voice``, as ``cloneId`` on the hosted
    API; an unknown or malformed id is the typed tool error ``[clone_not_found]`` and writes nothing."""
    import uuid

    from dragoman.media.audio import Audio, read_wav
    from dragoman.speech.tts import clones

    monkeypatch.setattr(clones, "default_clone_dir", lambda: tmp_path / "clones")
    clone = clones.Clone(
        id=str(uuid.uuid4()),
        name="Me",
        description="",
        gender="male",
        f0_median=110.0,
        persona="atlas",
        pitch_st=-1.0,
        formant=1.05,
        similarity=0.8,
        similarity_unmatched=0.7,
        reference_seconds=5.0,
        created_at=1.0,
    )
    clones.LocalCloneStore().add(clone, Audio.silence(0.1, 16000))
    async with in_process(server_env, roots=[workdir]) as client:
        spoken = structured(
            await client.call_tool(
                "speak", {"text": "Good morning.", "language": "en", "voice": "aria", "clone_id": clone.id}
            )
        )
        plain = structured(await client.call_tool("speak", {"text": "Good morning.", "language": "en"}))
        unknown = error_text(
            await client.call_tool(
                "speak", {"text": "Hi.", "language": "en", "clone_id": "00000000-0000-0000-0000-000000000000"}
            )
        )
        malformed = error_text(
            await client.call_tool("speak", {"text": "Hi.", "language": "en", "clone_id": "../../etc"})
        )
    assert spoken["voice"] == "atlas" and spoken["clone_id"] == clone.id
    assert Path(spoken["path"]).name == "speech-atlas-en-1.wav"
    assert any(clone.id in note for note in spoken["notes"])
    assert read_wav(Path(spoken["path"]).read_bytes()).duration > 0.3
    assert plain["voice"] == "aria" and plain["clone_id"] is None
    assert "[clone_not_found]" in unknown and "[clone_not_found]" in malformed
    assert sorted(p.name for p in workdir.iterdir() if p.suffix == ".wav") == [
        "speech-aria-en-1.wav",
        "speech-atlas-en-1.wav",
    ]
