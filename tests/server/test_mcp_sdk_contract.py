"""The contract between dragoman and the MCP SDK's non-public surface, all of it in ``server/mcp/_sdk.py``.

When one of these fails after an SDK upgrade, the message says what moved: update ``_sdk.py`` for the new
SDK (and the ``mcp`` pin in pyproject.toml to the minor series you tested), not the tools that use it.
"""

from __future__ import annotations

import ast
import inspect
import json
from collections.abc import AsyncIterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp_types import EmptyResult, LoggingLevel, LoggingMessageNotificationParams, SetLevelRequestParams
from packaging.requirements import Requirement

import dragoman
from dragoman.server.mcp import _sdk
from dragoman.server.mcp.server import build_server
from dragoman.settings import Settings

pytestmark = pytest.mark.anyio

UPDATE = "update dragoman/server/mcp/_sdk.py for this MCP SDK"
PACKAGE = Path(dragoman.__file__).parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"


def _sdk_requirement() -> Requirement:
    import tomllib

    deps = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["dependencies"]
    (found,) = [Requirement(d) for d in deps if Requirement(d).name == "mcp"]
    return found


def test_the_installed_sdk_is_the_minor_series_the_adapter_was_tested_with() -> None:
    requirement = _sdk_requirement()
    installed = version("mcp")
    assert requirement.specifier.contains(installed), (
        f"mcp {installed} is installed but pyproject pins {requirement}: run the MCP tests on it, {UPDATE} "
        "if the contract below fails, then move the pin to the new minor series"
    )
    assert "<" in str(requirement.specifier), f"pin the MCP SDK to one minor series, not {requirement}"


# ----- the low-level server under MCPServer ---------------------------------------------------------
def test_mcpserver_still_holds_its_lowlevel_server_where_the_adapter_reads_it() -> None:
    server: MCPServer[Any] = MCPServer("probe")
    found = getattr(server, _sdk.LOWLEVEL_ATTRIBUTE, None)
    assert isinstance(found, Server), (
        f"MCPServer.{_sdk.LOWLEVEL_ATTRIBUTE} is gone or no longer a mcp.server.lowlevel.Server: {UPDATE} "
        "(look for a public accessor: the SDK meant to make it public)"
    )
    assert _sdk.lowlevel(server) is found


def test_a_missing_lowlevel_server_fails_with_a_message_naming_the_adapter() -> None:
    with pytest.raises(RuntimeError, match=r"_lowlevel_server.*dragoman\.server\.mcp\._sdk"):
        _sdk.lowlevel(object())  # type: ignore[arg-type]


def test_lowlevel_add_request_handler_accepts_what_we_pass_and_declares_logging() -> None:
    signature = inspect.signature(Server.add_request_handler)
    assert list(signature.parameters)[1:4] == ["method", "params_type", "handler"], (
        f"Server.add_request_handler{signature} changed: {UPDATE}"
    )

    async def handler(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
        return EmptyResult()

    server: MCPServer[Any] = MCPServer("probe")
    low = _sdk.lowlevel(server)
    assert low.create_initialization_options().capabilities.logging is None
    _sdk.serve_set_level(server, handler)
    entry = low.get_request_handler("logging/setLevel")
    assert entry is not None, f"logging/setLevel is not served after serve_set_level: {UPDATE}"
    assert low.create_initialization_options().capabilities.logging is not None, (
        f"serving logging/setLevel no longer declares the logging capability: {UPDATE}"
    )


def test_lowlevel_run_takes_streams_and_initialization_options() -> None:
    run = inspect.signature(Server.run)
    assert list(run.parameters)[1:4] == ["read_stream", "write_stream", "initialization_options"], (
        f"Server.run{run} changed: {UPDATE}"
    )
    options = inspect.signature(Server.create_initialization_options)
    assert all(p.default is not p.empty for name, p in options.parameters.items() if name != "self"), (
        f"Server.create_initialization_options{options} now needs arguments: {UPDATE}"
    )


# ----- the stdio transport over dragoman's own reader and writer -----------------------------------
class LineFeed:
    """Only what ``_sdk.LineSource`` promises (``__aiter__`` over lines); ends once ``done`` is set."""

    def __init__(self, lines: list[str], done: anyio.Event) -> None:
        self._lines = lines
        self._done = done

    async def _lines_then_wait(self) -> AsyncIterator[str]:
        for line in self._lines:
            yield line
        await self._done.wait()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines_then_wait()


class Sink:
    """Only what ``_sdk.TextSink`` promises (``write`` and ``flush``)."""

    def __init__(self, want: int, done: anyio.Event) -> None:
        self.written: list[str] = []
        self._want = want
        self._done = done

    async def write(self, text: str) -> None:
        self.written.append(text)
        if sum('"id"' in t for t in self.written) >= self._want:
            self._done.set()

    async def flush(self) -> None:
        return None


def _rpc(method: str, params: dict[str, Any], id_: int | None = None) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if id_ is not None:
        message["id"] = id_
    return json.dumps(message) + "\n"


def test_stdio_server_still_takes_our_streams() -> None:
    parameters = inspect.signature(stdio_server).parameters
    assert {"stdin", "stdout"} <= set(parameters), (
        f"mcp.server.stdio.stdio_server no longer takes stdin= and stdout=: {UPDATE} and _stdio.py"
    )


async def test_the_server_runs_on_a_stdio_transport_over_a_bare_line_source_and_sink() -> None:
    """The SDK's stdio transport reads lines from anything iterable and writes through ``write``/``flush``
    only (the cast in ``_sdk.stdio_transport``), and ``_sdk.run_on`` serves a connection on it."""
    done = anyio.Event()
    lines = [
        _rpc(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
            1,
        ),
        _rpc("notifications/initialized", {}),
        _rpc("tools/list", {}, 2),
    ]
    sink = Sink(2, done)
    server = build_server(Settings.from_env())
    with anyio.fail_after(30):
        async with _sdk.stdio_transport(LineFeed(lines, done), sink) as streams:
            await _sdk.run_on(server, streams)
    answers = {m["id"]: m for m in map(json.loads, sink.written) if "id" in m}
    assert all(text.endswith("\n") and text.count("\n") == 1 for text in sink.written)
    assert answers[1]["result"]["serverInfo"]["name"] == "dragoman"
    assert answers[1]["result"]["capabilities"]["logging"] == {}
    assert "translate" in {tool["name"] for tool in answers[2]["result"]["tools"]}


# ----- log forwarding without the deprecation warning ------------------------------------------------
def test_send_log_message_is_still_a_deprecation_wrapper_around_a_callable_we_can_reach() -> None:
    public = ServerSession.send_log_message
    if getattr(public, "__deprecated__", None) is None:
        pytest.fail(
            "ServerSession.send_log_message is no longer deprecated: call it directly in _sdk.send_log "
            "(drop _undecorated) and simplify this test"
        )
    wrapped = getattr(public, "__wrapped__", None)
    assert wrapped is not None and inspect.iscoroutinefunction(wrapped), (
        f"the deprecated ServerSession.send_log_message no longer exposes __wrapped__: {UPDATE} "
        "(without it, every forwarded log record warns MCPDeprecationWarning)"
    )
    assert _sdk._SEND_LOG_MESSAGE is wrapped
    inspect.signature(wrapped).bind(object(), "warning", "data", logger="name")


def _logging_server() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("probe")

    async def shout(ctx: Context[Any, Any]) -> str:
        await _sdk.send_log(ctx.session, "warning", "LOUD", logger="probe.logger")
        await _sdk.send_log(ctx.session, "info", "QUIET", logger="probe.logger")
        return "done"

    server.add_tool(shout)
    return server


async def test_send_log_reaches_a_handshake_era_client_without_any_warning() -> None:
    # pytest turns every warning into an error (pyproject: filterwarnings = error), so a deprecation
    # warning raised inside the tool would come back as a tool error here.
    received: list[LoggingMessageNotificationParams] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        received.append(params)

    async with Client(_logging_server(), mode="legacy", logging_callback=on_log) as client:
        result = await client.call_tool("shout", {})
        assert not result.is_error, f"send_log raised in the tool (a deprecation warning?): {result.content}"
        with anyio.fail_after(5):
            while len(received) < 2:
                await anyio.sleep(0.01)
    assert [(r.level, r.data, r.logger) for r in received] == [
        ("warning", "LOUD", "probe.logger"),
        ("info", "QUIET", "probe.logger"),
    ]


@pytest.mark.parametrize("opt_in", [None, "warning"])
async def test_send_log_keeps_the_sdk_per_request_gate_on_modern_connections(
    opt_in: LoggingLevel | None,
) -> None:
    """On 2026-07-28 connections a log entry is sent only when the request opted in, at or above its level:
    the undecorated call still goes through the SDK's gate."""
    received: list[LoggingMessageNotificationParams] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        received.append(params)

    async with Client(_logging_server(), logging_callback=on_log, log_level=opt_in) as client:
        assert client.protocol_version >= "2026", client.protocol_version
        result = await client.call_tool("shout", {})
        with anyio.fail_after(5):  # polled, not a fixed pause: a busy machine may deliver it late
            while opt_in is not None and not received:
                await anyio.sleep(0.01)
        await anyio.sleep(0.1)  # room for an entry that should not come (QUIET; or LOUD without opting in)
    assert not result.is_error, result.content
    assert [r.data for r in received] == ([] if opt_in is None else ["LOUD"])


# ----- tool arguments: strict models and worded errors (issue 9, items 8 and 9) ----------------------
async def _probe_tool(text: str, count: int = 1) -> str:
    """A probe."""
    return text * count


class _Worded(_sdk.ToolServer[Any]):
    def argument_error(self, tool: str, error: Any, tools: list[str]) -> str:
        return f"WORDED {tool} {sorted(tools) if error is None else [e['type'] for e in error.errors()]}"


async def test_a_tool_arg_model_replaced_after_from_function_is_the_one_validated() -> None:
    """``Tool.fn_metadata.arg_model`` is read at each call (the SDK documents its fields as read live)."""
    tool = _sdk.strict_tool(_probe_tool)
    assert tool.parameters.get("additionalProperties") is False, f"strict_tool's schema lost it: {UPDATE}"
    server = _Worded("probe", tools=[tool])
    async with Client(server, mode="legacy") as client:
        fine = await client.call_tool("_probe_tool", {"text": "a", "count": 2})
        extra = await client.call_tool("_probe_tool", {"text": "a", "cuont": 2})
        missing = await client.call_tool("_probe_tool", {})
        unknown = await client.call_tool("no_such_tool", {})
    assert not fine.is_error, fine.content
    texts = [" ".join(getattr(b, "text", "") for b in r.content) for r in (extra, missing, unknown)]
    assert texts[0] == "Error executing tool _probe_tool: WORDED _probe_tool ['extra_forbidden']", (
        f"an unknown argument is not refused through the strict model, or call_tool is bypassed: {UPDATE}"
    )
    assert texts[1] == "Error executing tool _probe_tool: WORDED _probe_tool ['missing']", (
        f"argument validation errors no longer reach MCPServer.call_tool as a ToolError from a "
        f"ValidationError: {UPDATE}"
    )
    assert texts[2] == "WORDED no_such_tool ['_probe_tool']", f"the unknown-tool error changed: {UPDATE}"


def test_tool_run_still_prefixes_its_errors_as_the_adapter_repeats_it() -> None:
    source = inspect.getsource(Tool.run)
    assert 'f"Error executing tool {self.name}: {exc}"' in source, (
        f"Tool.run words errors otherwise: {UPDATE}"
    )
    assert _sdk.TOOL_ERROR_PREFIX.format(name="x") == "Error executing tool x: "


# ----- nothing else in dragoman touches the SDK's non-public surface ---------------------------------
#: Names of the SDK's private or deprecated surface that only _sdk.py may use.
SDK_NAMES = frozenset({"_lowlevel_server", "send_log_message", "MCPDeprecationWarning"})
#: Calls that swap the process-wide warning filters (not thread-safe): the MCP server uses none of them.
WARNING_FILTERS = frozenset({"catch_warnings", "simplefilter", "filterwarnings"})


def _touches(tree: ast.AST, names: frozenset[str]) -> list[str]:
    """Where ``tree`` names one of ``names`` or imports a private module or name of the SDK."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in names:
            found.append(node.attr)
        elif isinstance(node, ast.Name) and node.id in names:
            found.append(node.id)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in {"mcp", "mcp_types"}:
            if any(part.startswith("_") for part in (node.module or "").split(".")):
                found.append(f"{node.module}")
            found += [
                f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_") or a.name in names
            ]
        elif isinstance(node, ast.Import):
            found += [
                a.name for a in node.names if a.name.split(".")[0] in {"mcp", "mcp_types"} and "._" in a.name
            ]
    return found


def _offenders(paths: list[Path], names: frozenset[str]) -> dict[str, list[str]]:
    return {
        str(path.relative_to(PACKAGE.parent)): touched
        for path in paths
        if (touched := _touches(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), names))
    }


def test_only_the_adapter_touches_private_or_deprecated_sdk_names() -> None:
    paths = [p for p in sorted(PACKAGE.rglob("*.py")) if p != Path(_sdk.__file__)]
    offenders = _offenders(paths, SDK_NAMES)
    assert offenders == {}, f"route these through dragoman/server/mcp/_sdk.py: {offenders}"


def test_the_mcp_server_never_swaps_the_process_wide_warning_filters() -> None:
    offenders = _offenders(sorted((PACKAGE / "server" / "mcp").glob("*.py")), WARNING_FILTERS)
    assert offenders == {}, f"warning filters are process-wide and not thread-safe: {offenders}"


def test_the_scan_sees_what_it_looks_for() -> None:
    sample = (
        "from mcp.shared._stream_protocols import ReadStream\n"
        "from mcp.shared.exceptions import MCPDeprecationWarning\n"
        "import mcp.client._memory\n"
        "server._lowlevel_server.run()\n"
        "import warnings\nwith warnings.catch_warnings():\n    warnings.simplefilter('ignore')\n"
    )
    assert set(_touches(ast.parse(sample), SDK_NAMES)) == {
        "mcp.shared._stream_protocols",
        "mcp.shared.exceptions.MCPDeprecationWarning",
        "mcp.client._memory",
        "_lowlevel_server",
    }
    assert set(_touches(ast.parse(sample), WARNING_FILTERS)) >= {"catch_warnings", "simplefilter"}
