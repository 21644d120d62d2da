"""What the MCP tool server's tests share: two ways to reach the server, and readers of its answers.

* :func:`in_process`: the server built by :func:`~dragoman.server.mcp.server.build_server` and driven by the
  SDK's :class:`mcp.Client` over its in-memory transport, in the handshake-era protocol every stdio client
  speaks today. Tool behaviour is tested this way: no process to start, and library code is patched with
  ``monkeypatch`` like anywhere else.
* :func:`stdio_session`: ``python -m dragoman.cli mcp`` as a subprocess, the SDK's stdio client. Kept for what
  only a real process shows: start-up through the CLI, stdout hygiene, cancellation over the wire. Library
  code misbehaves there through a ``python -c`` wrapper (:func:`hooked`); the server has no test hooks.
"""

from __future__ import annotations

import contextlib
import sys
import textwrap
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, ClientSession
from mcp.client.session import ClientRequestContext, ListRootsFnT, LoggingFnT
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult, ListRootsResult, Root
from pydantic import FileUrl

from dragoman.server.mcp.server import build_server
from dragoman.settings import Settings

SERVER_ARGS = ["-m", "dragoman.cli", "mcp"]
TOOLS = {
    "translate",
    "translate_batch",
    "detect_language",
    "list_languages",
    "engine_status",
    "glossary_add",
    "glossary_list",
    "glossary_remove",
    "translate_file",
    "ocr_translate",
    "speak",
    "list_voices",
    "transcribe",
    "subtitle_file",
    "dub_video",
    "translate_files",
    "list_pairs",
    "packs_list",
    "packs_install",
}
READ_ONLY = {
    "translate",
    "translate_batch",
    "detect_language",
    "list_languages",
    "engine_status",
    "glossary_list",
    "list_voices",
    "list_pairs",
    "packs_list",
}
#: The tools that reach beyond this device (annotated open-world): only installs do (issue 17).
OPEN_WORLD = {"packs_install"}
FRENCH = "Bonjour, je voudrais réserver une table pour deux personnes ce soir, s'il vous plaît."


def _root(root: Path | str) -> Root:
    """A root for a directory, or for a URI sent as given (unvalidated, as a careless client might)."""
    if isinstance(root, Path):
        return Root(uri=FileUrl(root.as_uri()), name=root.name)
    return Root.model_construct(uri=root)


def _roots_callback(roots: list[Path | str] | None) -> ListRootsFnT | None:
    """A client that declares the roots capability and answers ``roots``, or none when ``roots`` is None."""
    if roots is None:
        return None

    async def list_roots(context: ClientRequestContext) -> ListRootsResult:
        return ListRootsResult(roots=[_root(r) for r in roots])

    return list_roots


@contextlib.asynccontextmanager
async def in_process(
    env: Mapping[str, str],
    *,
    roots: list[Path | str] | None = None,
    logging_callback: LoggingFnT | None = None,
) -> AsyncIterator[Client]:
    """A client of the tool server built in this process from ``env``'s settings. File tools may use
    ``roots`` (offered through the roots capability; None: the client does not declare it) and
    ``DRAGOMAN_ALLOWED_DIRS`` only, never the process's working directory."""
    server = build_server(Settings.from_env(env))
    async with Client(
        server,
        mode="legacy",  # the initialize handshake, as stdio clients do
        list_roots_callback=_roots_callback(roots),
        logging_callback=logging_callback,
    ) as client:
        yield client


def hooked(patch: str) -> list[str]:
    """Arguments running the server after ``patch`` (Python source) ran in the server process."""
    code = "import os, sys, time\nimport dragoman.translation.engine as eng\n" + textwrap.dedent(patch)
    code += "\nfrom dragoman.cli import main\nsys.exit(main(['mcp']))\n"
    return ["-c", code]


@contextlib.asynccontextmanager
async def stdio_session(
    env: dict[str, str],
    cwd: Path,
    errlog: Path,
    *,
    args: list[str] | None = None,
    roots: list[Path | str] | None = None,
) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session with ``python -m dragoman.cli mcp`` (or ``args``) over stdio."""
    params = StdioServerParameters(command=sys.executable, args=args or SERVER_ARGS, env=env, cwd=cwd)
    with errlog.open("a", encoding="utf-8") as log:
        async with stdio_client(params, errlog=log) as (read, write):
            async with ClientSession(read, write, list_roots_callback=_roots_callback(roots)) as client:
                with anyio.fail_after(60):
                    await client.initialize()
                yield client


def structured(result: CallToolResult) -> dict[str, Any]:
    """The structured content of a successful call, which always says where the work ran."""
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert result.structured_content["provenance"] == "on-device"
    return dict(result.structured_content)


def error_text(result: CallToolResult) -> str:
    """The text of a tool error (``isError``), never empty."""
    assert result.is_error, result
    text = " ".join(getattr(block, "text", "") for block in result.content)
    assert text
    return text
