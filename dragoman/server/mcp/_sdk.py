"""The one place dragoman reaches past the MCP SDK's public surface (mcp 2.3, pinned ``>=2.3,<2.4``).

Three things the tool server needs have no public spelling in the SDK, so each lives here, behind a function
with a stable signature, and ``tests/server/test_mcp_sdk_contract.py`` fails with a clear message when an SDK
upgrade moves what it relies on:

* the low-level :class:`~mcp.server.lowlevel.Server` under an :class:`~mcp.server.mcpserver.MCPServer`
  (``MCPServer._lowlevel_server``; the SDK's own in-memory transport reads it the same way, with a
  "make it public" TODO). dragoman needs it twice: to serve ``logging/setLevel`` (which the 2026-07-28 spec
  removed, so MCPServer has no decorator for it; the SDK's docs point at ``Server.add_request_handler``) and
  to run the server on dragoman's own stdio streams (:mod:`dragoman.server.mcp._stdio`) instead of
  :meth:`MCPServer.run_stdio_async`'s.
* log forwarding: every SDK call that sends ``notifications/message`` is marked deprecated (SEP-2577) and
  emits an ``MCPDeprecationWarning`` on each call, although handshake-era clients (every stdio client today)
  still use the logging capability. :func:`send_log` calls the undecorated ``ServerSession.send_log_message``
  (``__wrapped__``, which ``typing_extensions.deprecated`` keeps), so it keeps the SDK's per-request log gate
  for 2026-07-28 connections without the warning, and without ``warnings.catch_warnings()``, which swaps the
  process-wide warning filters and is not safe beside other threads.
* :func:`stdio_transport`: ``mcp.server.stdio.stdio_server`` types its streams as ``anyio.AsyncFile[str]``
  but only iterates lines from one and awaits ``write``/``flush`` on the other; the cast that lets
  dragoman's non-blocking pipe reader and writer through is made here, once.

* :class:`ToolServer`: tool arguments that fail validation. ``Tool.run`` turns the ``ValidationError`` into
  a ``ToolError`` whose text is pydantic's dump (a web link, the rejected input, no ``[code]``), and an
  argument the tool does not take is silently dropped (its argument model ignores extras). A subclass of
  :class:`MCPServer` overrides the public :meth:`MCPServer.call_tool` (which the SDK's ``tools/call`` handler
  calls) to re-word those errors, and :func:`strict_tool` gives each tool an argument model that forbids
  extras (``additionalProperties: false`` in its input schema), through ``Tool.fn_metadata.arg_model``,
  which the SDK documents as read live.

Nothing else in dragoman names a private SDK attribute or a deprecated SDK call.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar, cast

from mcp.server.lowlevel import Server
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp_types import CallToolResult, EmptyResult, InputRequiredResult, LoggingLevel, SetLevelRequestParams
from pydantic import ConfigDict, ValidationError

if TYPE_CHECKING:
    import anyio
    from mcp.server.context import ServerRequestContext
    from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase

#: The (read, write) streams of one MCP connection, as the SDK's transports yield them.
Streams: TypeAlias = tuple[Any, Any]
SetLevelHandler: TypeAlias = Callable[
    ["ServerRequestContext[Any, Any]", SetLevelRequestParams], Awaitable[EmptyResult]
]

#: The attribute of MCPServer holding its low-level Server (private in mcp 2.3).
LOWLEVEL_ATTRIBUTE = "_lowlevel_server"
#: What the SDK puts before a tool's error text (``Tool.run``); dragoman's argument errors keep it.
TOOL_ERROR_PREFIX = "Error executing tool {name}: "
L = TypeVar("L")


class LineSource(Protocol):
    """What :func:`stdio_transport` reads: lines of text, each ending in a newline but maybe the last."""

    def __aiter__(self) -> AsyncIterator[str]: ...


class TextSink(Protocol):
    """What :func:`stdio_transport` writes to: one JSON-RPC message and its newline per ``write``."""

    async def write(self, text: str) -> object: ...

    async def flush(self) -> object: ...


def lowlevel(server: MCPServer[Any]) -> Server[Any]:
    """The low-level server under ``server``."""
    found = getattr(server, LOWLEVEL_ATTRIBUTE, None)
    if not isinstance(found, Server):
        raise RuntimeError(
            f"the MCP SDK's MCPServer has no {LOWLEVEL_ATTRIBUTE!r} low-level Server any more: "
            "dragoman.server.mcp._sdk needs updating for this SDK version"
        )
    return found


def serve_set_level(server: MCPServer[Any], handler: SetLevelHandler) -> None:
    """Serve ``logging/setLevel`` with ``handler``; the server then declares the logging capability."""
    lowlevel(server).add_request_handler("logging/setLevel", SetLevelRequestParams, handler)


async def run_on(server: MCPServer[Any], streams: Streams) -> None:
    """Serve one connection on ``streams`` until the read side ends (what ``run_stdio_async`` does, on
    streams of our choosing)."""
    low = lowlevel(server)
    read, write = streams
    await low.run(read, write, low.create_initialization_options())


@contextlib.asynccontextmanager
async def stdio_transport(
    stdin: LineSource | None = None, stdout: TextSink | None = None
) -> AsyncIterator[Streams]:
    """The SDK's stdio transport: over ``stdin``/``stdout`` when given, else over the real descriptors
    (which the SDK then claims and diverts itself)."""
    async with stdio_server(
        stdin=cast("anyio.AsyncFile[str] | None", stdin), stdout=cast("anyio.AsyncFile[str] | None", stdout)
    ) as streams:
        yield streams


def _undecorated(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` without its ``@deprecated`` wrapper (the wrapper only warns, then calls it)."""
    if getattr(function, "__deprecated__", None) is None:
        return function
    return cast("Callable[..., Any]", getattr(function, "__wrapped__", function))


_SEND_LOG_MESSAGE = _undecorated(ServerSession.send_log_message)


async def send_log(session: ServerSession, level: LoggingLevel, data: str, logger: str | None) -> None:
    """Send one ``notifications/message`` to the client of ``session`` (gated as the SDK gates it: always
    on handshake-era connections, on 2026-07-28 ones only when the request opted in at that level)."""
    await _SEND_LOG_MESSAGE(session, level, data, logger=logger)


# ----- tool arguments -----------------------------------------------------------------------------
def strict_tool(fn: Callable[..., Any], **options: Any) -> Tool:
    """The SDK's :class:`Tool` for ``fn`` (``options`` as :meth:`MCPServer.add_tool` takes them), whose
    arguments refuse names the tool does not take; its input schema says ``additionalProperties: false``."""
    tool = Tool.from_function(fn, **options)
    loose = tool.fn_metadata.arg_model
    config = {"model_config": ConfigDict(extra="forbid"), "__module__": __name__}
    strict = cast("type[ArgModelBase]", type(loose.__name__, (loose,), config))
    tool.fn_metadata.arg_model = strict
    tool.parameters = strict.model_json_schema(by_alias=True)
    return tool


class ToolServer(MCPServer[L]):
    """An :class:`MCPServer` whose argument errors (and calls of unknown tools) are worded by
    :meth:`argument_error` instead of pydantic's dump; every other tool error passes as it is."""

    def argument_error(self, tool: str, error: ValidationError | None, tools: list[str]) -> str:
        """The text after ``Error executing tool NAME:`` for arguments that fail ``error`` (None: no such
        tool; ``tools`` names those there are). Subclasses word it; this default is the SDK's."""
        return str(error) if error is not None else f"Unknown tool: {tool}"

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[L, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):  # Tool.run: the arguments failed the tool's model
                text = self.argument_error(name, cause, [])
                raise ToolError(TOOL_ERROR_PREFIX.format(name=name) + text) from cause
            if cause is None and str(exc) == f"Unknown tool: {name}":  # ToolManager.call_tool
                tools = sorted(t.name for t in await self.list_tools())
                raise ToolError(self.argument_error(name, None, tools)) from exc
            raise
