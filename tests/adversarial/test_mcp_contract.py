"""The MCP tools against hostile and careless arguments: every refusal is a tool error of one shape.

``Error executing tool NAME: <what is wrong, what the tool takes> [code]``, like every other tool error:
never pydantic's dump (a web link, the rejected input, no code), never a bare "Error executing tool".
Unknown arguments are refused (a misspelt ``glosary`` used to be dropped silently, applying the glossary
file instead), and a file tool meeting the file system (a folder or a pipe as output, a full or read-only
disk) answers a typed error. Issue 9, items 8 and 9. Inputs are generated here.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from mcp_support import TOOLS, error_text, in_process, stdio_session, structured

pytestmark = pytest.mark.anyio

#: The fewest valid arguments of each tool (paths relative to the allowed folder).
MINIMAL: dict[str, dict[str, Any]] = {
    "translate": {"text": "Hello.", "target": "es", "source": "en"},
    "translate_batch": {"texts": ["Hello."], "target": "es", "source": "en"},
    "detect_language": {"text": "Hello there, how are you today?"},
    "list_languages": {},
    "engine_status": {},
    "glossary_add": {"entries": [{"term": "Acme", "translation": "Acme"}]},
    "glossary_list": {},
    "glossary_remove": {"terms": ["Acme"]},
    "translate_file": {"path": "in.txt", "target": "es", "source": "en"},
    "ocr_translate": {"path": "in.png", "target": "es", "source": "en"},
    "speak": {"text": "Hello.", "language": "en"},
    "list_voices": {},
    "transcribe": {"path": "in.mp4"},
    "subtitle_file": {"path": "in.mp4"},
    "dub_video": {"path": "in.mp4", "targets": ["es"]},
    "translate_files": {"path": "*.txt", "target": "es", "source": "en"},
    "list_pairs": {},
    "packs_list": {},
    "packs_install": {"source": "en:es"},
}
SHAPE = re.compile(r"^Error executing tool (?P<tool>\w+): (?P<message>.+) \[(?P<code>[a-z_]+)\]$", re.DOTALL)


def shaped(text: str, tool: str, code: str) -> str:
    """The message of a tool error of the one shape (asserted), without prefix and code."""
    found = SHAPE.match(text)
    assert found is not None, text
    assert found["tool"] == tool and found["code"] == code, text
    for leak in ("pydantic.dev", "validation error for", "input_value", "input_type", "Traceback"):
        assert leak not in text, text
    return found["message"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """The one folder the file tools may use (DRAGOMAN_ALLOWED_DIRS), holding a small text file."""
    path = tmp_path / "work"
    path.mkdir()
    (path / "in.txt").write_text("Hello world.\n", encoding="utf-8")
    return path


@pytest.fixture
def env(packs_dir: Path, tiny_argos_pack: Path, workdir: Path) -> dict[str, str]:
    """This test's DRAGOMAN_* environment: the tiny en->es pack, Apertium off, files in ``workdir`` only."""
    shutil.copytree(tiny_argos_pack, packs_dir / tiny_argos_pack.name)
    return {**os.environ, "DRAGOMAN_APERTIUM": "0", "DRAGOMAN_ALLOWED_DIRS": str(workdir)}


def test_every_tool_has_minimal_arguments() -> None:
    assert set(MINIMAL) == TOOLS


@pytest.mark.parametrize("tool", sorted(TOOLS))
@pytest.mark.parametrize("extra", ["bogus", "glosary", "ctx", "roots", "Target"])
async def test_unknown_arguments_are_refused_by_every_tool(
    env: dict[str, str], workdir: Path, tool: str, extra: str
) -> None:
    async with in_process(env) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}[tool]
        result = await client.call_tool(tool, {**MINIMAL[tool], extra: "x"})
    assert listed.input_schema.get("additionalProperties") is False
    message = shaped(error_text(result), tool, "invalid_request")
    assert f"unknown argument {extra!r}" in message
    for name in listed.input_schema["properties"]:  # what the tool takes, so the agent can correct it
        assert name in message
    assert not (workdir / "in.es.txt").exists()  # nothing ran


async def test_a_misspelt_glossary_never_falls_back_to_the_glossary_file(
    env: dict[str, str], tmp_path: Path
) -> None:
    async with in_process(env) as client:
        structured(
            await client.call_tool("glossary_add", {"entries": [{"term": "Hello", "translation": "QQQ"}]})
        )
        refused = await client.call_tool("translate", {"text": "Hello.", "target": "es", "glosary": []})
        none = structured(
            await client.call_tool("translate", {"text": "Hello.", "target": "es", "glossary": []})
        )
    assert "unknown argument 'glosary'" in shaped(error_text(refused), "translate", "invalid_request")
    assert "QQQ" not in none["translation"]


BAD_ARGUMENTS: list[tuple[str, dict[str, Any], str, str]] = [
    ("translate", {"text": "Hi"}, "missing argument 'target'", "invalid_request"),
    ("translate", {"target": "es"}, "missing argument 'text'", "invalid_request"),
    ("translate", {"text": "Hi", "target": "es", "tier": "ultra"}, "tier", "invalid_request"),
    ("translate", {"text": 5, "target": "es"}, "text", "invalid_request"),
    ("translate", {"text": ["a"], "target": "es"}, "text", "invalid_request"),
    ("translate", {"text": None, "target": "es"}, "text", "invalid_request"),
    ("translate", {"text": "Hi", "target": "e"}, "target", "invalid_request"),
    ("translate", {"text": "Hi", "target": "x" * 65}, "target", "invalid_request"),
    ("translate", {"text": "a \ud800 b", "target": "es"}, "text", "invalid_request"),
    ("translate", {"text": "x" * 1_000_001, "target": "es"}, "text", "limit_exceeded"),
    (
        "translate",
        {"text": "Hi", "target": "es", "glossary": [{"term": "a"}]},
        "translation",
        "invalid_request",
    ),
    (
        "translate",
        {"text": "Hi", "target": "es", "glossary": [{"term": "a", "translation": "b", "case": True}]},
        "unknown argument 'glossary.0.case'",
        "invalid_request",
    ),
    (
        "translate",
        {"text": "Hi", "target": "es", "glossary": [{"term": "t", "translation": "x"}] * 201},
        "glossary",
        "limit_exceeded",
    ),
    ("translate", {"text": "Hi", "target": "es", "glossary": "[[[[" * 10_000}, "glossary", "invalid_request"),
    ("translate_batch", {"texts": ["x"] * 65, "target": "es"}, "64", "limit_exceeded"),
    ("translate_batch", {"texts": [], "target": "es"}, "texts", "invalid_request"),
    ("translate_batch", {"texts": "x", "target": "es"}, "texts", "invalid_request"),
    ("detect_language", {"text": ""}, "text", "invalid_request"),
    ("list_languages", {"installed_only": "maybe"}, "installed_only", "invalid_request"),
    ("glossary_add", {"entries": []}, "entries", "invalid_request"),
    ("glossary_add", {"entries": [{"term": "", "translation": "x"}]}, "term", "invalid_request"),
    ("glossary_remove", {"terms": "Acme"}, "terms", "invalid_request"),
    ("translate_file", {"path": "", "target": "es"}, "path", "invalid_request"),
    (
        "translate_file",
        {"path": "in.txt", "target": "es", "output_path": "x" * 5000},
        "output_path",
        "invalid_request",
    ),
    ("ocr_translate", {"path": "in.png", "target": "es", "render": "maybe"}, "render", "invalid_request"),
    ("transcribe", {"path": "in.mp4", "language": "x" * 17}, "language", "invalid_request"),
    ("subtitle_file", {"path": "in.mp4", "formats": ["ass"]}, "formats", "invalid_request"),
    ("subtitle_file", {"path": "in.mp4", "formats": []}, "formats", "invalid_request"),
    ("subtitle_file", {"path": "in.mp4", "targets": ["es"] * 21}, "targets", "invalid_request"),
    ("subtitle_file", {"path": "in.mp4", "overwrite": "maybe"}, "overwrite", "invalid_request"),
    ("dub_video", {"path": "in.mp4"}, "missing argument 'targets'", "invalid_request"),
    ("dub_video", {"path": "in.mp4", "targets": []}, "targets", "invalid_request"),
    ("dub_video", {"path": "in.mp4", "targets": ["es"] * 11}, "targets", "invalid_request"),
    (
        "dub_video",
        {"path": "in.mp4", "targets": ["es"], "voice_mode": "loud"},
        "voice_mode",
        "invalid_request",
    ),
    ("dub_video", {"path": "in.mp4", "targets": ["es"], "clone_id": "x" * 65}, "clone_id", "invalid_request"),
]


@pytest.mark.parametrize(("tool", "arguments", "needle", "code"), BAD_ARGUMENTS)
async def test_argument_errors_have_the_shape_of_every_tool_error(
    env: dict[str, str], tool: str, arguments: dict[str, Any], needle: str, code: str
) -> None:
    async with in_process(env) as client:
        result = await client.call_tool(tool, arguments)
    assert needle in shaped(error_text(result), tool, code)


async def test_an_unknown_tool_names_the_tools(env: dict[str, str]) -> None:
    async with in_process(env) as client:
        result = await client.call_tool("translat", {"text": "Hi", "target": "es"})
    text = error_text(result)
    assert text.endswith("[invalid_request]") and "'translat'" in text
    assert all(name in text for name in TOOLS)


# ----- file tools and the file system ------------------------------------------------------------
@pytest.mark.parametrize("overwrite", [False, True])
async def test_a_folder_as_output_is_a_typed_error(
    env: dict[str, str], workdir: Path, overwrite: bool
) -> None:
    (workdir / "outdir").mkdir()
    async with in_process(env) as client:
        result = await client.call_tool(
            "translate_file", {**MINIMAL["translate_file"], "output_path": "outdir", "overwrite": overwrite}
        )
    assert "is a folder" in shaped(error_text(result), "translate_file", "invalid_request")
    assert (workdir / "outdir").is_dir() and not list(workdir.glob(".*.part"))


async def test_a_pipe_as_output_is_never_replaced(env: dict[str, str], workdir: Path) -> None:
    os.mkfifo(workdir / "pipe")
    async with in_process(env) as client:
        result = await client.call_tool(
            "translate_file", {**MINIMAL["translate_file"], "output_path": "pipe", "overwrite": True}
        )
    assert "not a regular file" in shaped(error_text(result), "translate_file", "invalid_request")
    assert (workdir / "pipe").is_fifo()


@pytest.mark.parametrize(
    ("code", "needle"),
    [
        (errno.ENOSPC, "no space left"),
        (errno.EACCES, "permission denied"),
        (errno.EROFS, "read-only file system"),
        (errno.EDQUOT, "no space left"),
        (errno.EIO, "Input/output error"),
    ],
)
async def test_a_failing_disk_is_a_typed_error(
    env: dict[str, str], workdir: Path, monkeypatch: pytest.MonkeyPatch, code: int, needle: str
) -> None:
    from dragoman.documents import partials

    def refuse(destination: Path) -> Path:
        raise OSError(code, os.strerror(code), str(destination))

    monkeypatch.setattr(partials, "create", refuse)
    async with in_process(env) as client:
        result = await client.call_tool("translate_file", MINIMAL["translate_file"])
        still = structured(await client.call_tool("translate", MINIMAL["translate"]))
    message = shaped(error_text(result), "translate_file", "file_access")
    assert needle in message and "in.es.txt" in message
    assert still["target"] == "spa_Latn"


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("deep.json", '{"a": ' * 5000 + '"x"' + "}" * 5000),
        ("deep-list.json", '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    ],
)
async def test_deeply_nested_documents_are_typed(
    env: dict[str, str], workdir: Path, name: str, content: str
) -> None:
    (workdir / name).write_text(content, encoding="utf-8")
    async with in_process(env) as client:
        result = await client.call_tool("translate_file", {"path": name, "target": "es", "source": "en"})
    text = error_text(result)
    found = SHAPE.match(text)
    assert found is not None and found["code"] in (
        "unsupported_document",
        "invalid_request",
        "limit_exceeded",
    ), text


async def test_glossary_add_is_annotated_destructive_as_it_replaces(env: dict[str, str]) -> None:
    async with in_process(env) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        structured(
            await client.call_tool("glossary_add", {"entries": [{"term": "Acme", "translation": "One"}]})
        )
        after = structured(
            await client.call_tool("glossary_add", {"entries": [{"term": "Acme", "translation": "Two"}]})
        )
    assert [e["translation"] for e in after["entries"] if e["term"] == "Acme"] == ["Two"]  # replaced
    annotations = tools["glossary_add"].annotations
    assert annotations is not None and annotations.destructive_hint is True


def test_the_schemas_forbid_unknown_properties_at_every_level() -> None:
    """Nested objects (glossary entries) forbid extras too, so a generated client cannot send them."""
    import anyio

    from dragoman.server.mcp.server import build_server
    from dragoman.settings import Settings

    async def schemas() -> dict[str, Any]:
        return {t.name: t.input_schema for t in await build_server(Settings.from_env({})).list_tools()}

    found = anyio.run(schemas)
    entry = found["translate"]["$defs"]["GlossaryEntryInput"]
    assert entry.get("additionalProperties") is False, json.dumps(entry)
    assert all(schema.get("additionalProperties") is False for schema in found.values())


async def test_dragoman_mcp_v_serves_and_logs_to_stderr_only(env: dict[str, str], tmp_path: Path) -> None:
    """`dragoman mcp -v` was refused by the argument parser; its logs must never reach stdout (the wire)."""
    errlog = tmp_path / "stderr.log"
    args = ["-m", "dragoman.cli", "mcp", "-v"]
    async with stdio_session(env, tmp_path, errlog, args=args) as session:
        result = await session.call_tool("translate", {**MINIMAL["translate"], "glosary": []})
        fine = await session.call_tool("translate", MINIMAL["translate"])
    assert "unknown argument 'glosary'" in error_text(result)
    assert structured(fine)["target"] == "spa_Latn"  # stdout stayed a clean JSON-RPC stream
    assert "INFO dragoman.server.mcp: dragoman MCP server" in errlog.read_text(encoding="utf-8")
