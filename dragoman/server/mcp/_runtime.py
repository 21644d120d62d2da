"""The plumbing under the MCP tools: the lifespan state, engine calls off the event loop, errors, progress.

Kept apart from :mod:`dragoman.server.mcp.server` so the tools there read as what they are: a signature, one
engine call, one answer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, LoggingLevel, TextContent
from pydantic import BaseModel

from dragoman.errors import Cancelled, DragomanError
from dragoman.progress import CancelToken, JobContext
from dragoman.server.local_store import GlossaryStore
from dragoman.server.mcp import _sdk
from dragoman.settings import Settings

if TYPE_CHECKING:
    from dragoman.speech.asr import Recognizer
    from dragoman.speech.tts.synth import Synthesizer
    from dragoman.translation.engine import Engine

log = logging.getLogger("dragoman.server.mcp")
T = TypeVar("T")

#: The protocol's levels, least severe first.
_LOG_LEVELS: tuple[LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
_FROM_PYTHON: dict[str, LoggingLevel] = {"DEBUG": "debug", "INFO": "info", "WARNING": "warning"}
#: Records logged by ``dragoman.*`` during the current tool call, forwarded to the client afterwards.
_CALL_RECORDS: ContextVar[list[logging.LogRecord] | None] = ContextVar("dragoman_mcp_records", default=None)


class ServerState:
    """What the lifespan holds: settings, the user's glossary file, the lazily created engine, the client's
    log level."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.glossary = GlossaryStore(settings.local.glossary_path)
        self.client_log_level: LoggingLevel = "warning"
        self._engine: Engine | None = None
        self._synthesizer: Synthesizer | None = None
        self._recognizer: Recognizer | None = None
        self._lock = threading.Lock()

    def engine(self) -> Engine:
        """The engine, created on first use (from a worker thread: importing it loads ctranslate2)."""
        with self._lock:
            if self._engine is None:
                from dragoman.translation.engine import Engine

                self._engine = Engine(self.settings)
            return self._engine

    def synthesizer(self) -> Synthesizer:
        """The speech synthesizer (issue 14), created on first use; its engines are probed once."""
        with self._lock:
            if self._synthesizer is None:
                from dragoman.speech.tts.synth import Synthesizer

                self._synthesizer = Synthesizer(self.settings)
            return self._synthesizer

    def recognizer(self) -> Recognizer:
        """The speech recogniser (issue 15), created on first use; it loads each model once."""
        with self._lock:
            if self._recognizer is None:
                from dragoman.speech.asr import Recognizer

                self._recognizer = Recognizer(self.settings)
            return self._recognizer

    def close(self) -> None:
        with self._lock:
            if self._engine is not None:
                self._engine.close()
                self._engine = None


Ctx: TypeAlias = Context[ServerState, Any]


class CallLogHandler(logging.Handler):
    """Collects ``dragoman.*`` records of the tool call that emitted them (context variables follow the
    call into its worker thread)."""

    def emit(self, record: logging.LogRecord) -> None:
        records = _CALL_RECORDS.get()
        if records is not None:
            records.append(record)


def state_of(ctx: Ctx) -> ServerState:
    state = ctx.request_context.lifespan_context
    assert isinstance(state, ServerState)
    return state


def tool_error(exc: DragomanError) -> ToolError:
    """The SDK's tool error for one of ours: the message an agent acts on, then the error code."""
    return ToolError(f"{exc.message} [{exc.code}]")


class _ClientCancel(CancelToken):
    """A cancel token that is also set once the MCP call it serves has been cancelled by the client
    (``notifications/cancelled``): read on the worker thread the call handed its work to."""

    __slots__ = ("_cancelled_exc",)

    def __init__(self, cancelled_exc: type[BaseException]) -> None:
        super().__init__()
        self._cancelled_exc = cancelled_exc

    @property
    def cancelled(self) -> bool:
        if not super().cancelled:
            try:
                anyio.from_thread.check_cancelled()
            except self._cancelled_exc:
                self.cancel("the client cancelled the call")
            except RuntimeError:  # not on the call's worker thread: only an explicit cancel counts
                pass
        return super().cancelled


def job_context(report: Callable[[float, float | None, str | None], Any]) -> JobContext:
    """The :class:`JobContext` of one tool call, built on the event loop and used on its worker thread.

    Its progress forwards to ``report`` (the SDK's progress notification) on the event loop, dropping
    counts that do not grow (the protocol wants progress to increase; a second route pass restarts the
    count); its cancel token is set once the client cancels the call, so the engine stops between chunks
    (:class:`~dragoman.errors.Cancelled`) instead of finishing work nobody waits for.
    """
    last = [0.0]

    def progress(done: int, total: int, message: str) -> None:
        if done <= last[0]:
            return
        last[0] = float(done)
        try:
            anyio.from_thread.run(report, float(done), float(total) if total > 0 else None, message)
        except Exception:  # progress is best effort: a client that went away must not fail the work
            log.debug("could not send a progress notification", exc_info=True)

    return JobContext(progress, _ClientCancel(anyio.get_cancelled_exc_class()))


async def forward_logs(ctx: Ctx, records: Sequence[logging.LogRecord]) -> None:
    """Send the call's log records at or above the client's level through the MCP logging capability."""
    if not records:
        return
    floor = _LOG_LEVELS.index(state_of(ctx).client_log_level)
    for record in records:
        level = _FROM_PYTHON.get(record.levelname, "error")
        if _LOG_LEVELS.index(level) < floor:
            continue
        try:
            await _sdk.send_log(ctx.session, level, record.getMessage(), logger=record.name)
        except Exception:  # the client went away or refused: logs are best effort
            log.debug("could not forward a log record to the client", exc_info=True)
            return


async def run_engine(ctx: Ctx, work: Callable[[Engine], T]) -> T:
    """Run ``work`` with the engine on a worker thread; our errors become tool errors."""
    state = state_of(ctx)
    records: list[logging.LogRecord] = []
    token = _CALL_RECORDS.set(records)
    try:
        result = await anyio.to_thread.run_sync(lambda: work(state.engine()))
    except Cancelled:
        await anyio.lowlevel.checkpoint()  # the client cancelled the call: this raises the cancellation
        raise
    except DragomanError as exc:
        await forward_logs(ctx, records)
        raise tool_error(exc) from exc
    finally:
        _CALL_RECORDS.reset(token)
    await forward_logs(ctx, records)
    return result


def answer(model: BaseModel, text: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=model.model_dump(mode="json", by_alias=True),
    )
