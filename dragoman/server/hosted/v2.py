"""Hosted v2 (spec 4.4): the local daemon's translate contract with provenance 'server', a bearer API key and
the key's daily character quota (429 ``daily character quota exceeded``); characters taken are given back
when the engine fails. ``GET /api/v2/languages`` is the daemon's route itself (:mod:`.app`'s route table)."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response

from dragoman.errors import BodyTooLarge, DragomanError, InvalidRequest
from dragoman.limits import MAX_LOCAL_BODY_BYTES
from dragoman.server._http import EnginePool, model_response
from dragoman.server._wire import (
    BatchResponse,
    TranslateRequest,
    TranslationResultModel,
    glossary_entries,
    parse_translate,
)
from dragoman.server.daemon.app import _checked
from dragoman.server.hosted._common import read_limited
from dragoman.server.hosted._gate import Reservation, idempotent
from dragoman.service import accounts, idempotency, usage
from dragoman.service.db import Database, now_ms
from dragoman.translation.types import TranslateOptions

if TYPE_CHECKING:
    from dragoman.service.accounts import KeyInfo
    from dragoman.translation.engine import Engine

log = logging.getLogger("dragoman.server.hosted")


@dataclass(frozen=True)
class _V2Admitted:
    """A v2 request past its checks: the key, the parsed request, its texts and the quota characters taken
    (at ``taken_ms``, so that a failure gives them back to the same UTC day)."""

    key: KeyInfo
    req: TranslateRequest
    texts: list[str]
    chars: int
    taken_ms: int


def _v2_take(db: Database, key: KeyInfo, body: bytes) -> _V2Admitted:
    """400 (the body), then 429 (the day's quota: one atomic statement, :func:`usage.add_v2_chars`)."""
    req = parse_translate(body)
    texts = [req.text] if req.text is not None else list(req.texts or [])
    chars = sum(len(t) for t in texts)
    taken_ms = now_ms()
    usage.add_v2_chars(db, key, chars, at_ms=taken_ms)
    return _V2Admitted(key, req, texts, chars, taken_ms)


def _v2_key(state: Any, header: str | None) -> KeyInfo:
    """401, 403; the request is counted in the key's usage of the day."""
    key = accounts.authenticate(state.db, header)
    state.tally.add(key.key_id)
    return key


def _v2_admit(state: Any, header: str | None, body: bytes, unread: DragomanError | None) -> _V2Admitted:
    """The checks of a request without an Idempotency-Key, in the order they always have (401, 403, then
    the body's 413/400, then 429), in one hop to a worker thread instead of two."""
    key = _v2_key(state, header)
    if unread is not None:
        raise unread
    return _v2_take(state.db, key, body)


async def translate_v2(request: Request) -> Response:
    """Translate one text or a batch (the local daemon's contract; provenance 'server')."""
    state = request.app.state
    header = request.headers.get("authorization")
    if "idempotency-key" not in request.headers:
        # The body (at most MAX_LOCAL_BODY_BYTES) is read before the key is checked, so that key, body and
        # quota are checked in one thread hop; an error reading it is raised after the key's 401/403.
        body, unread = b"", None
        try:
            body = await read_limited(request, MAX_LOCAL_BODY_BYTES)
        except (BodyTooLarge, InvalidRequest) as exc:
            unread = exc
        admitted = await anyio.to_thread.run_sync(_v2_admit, state, header, body, unread)
        return await _translate_v2(request, admitted)
    key = await anyio.to_thread.run_sync(_v2_key, state, header)
    body = await read_limited(request, MAX_LOCAL_BODY_BYTES)
    body_print = idempotency.fingerprint(request.method, request.url.path, body)

    async def run(reservation: Reservation | None) -> Response:
        admitted = await anyio.to_thread.run_sync(_v2_take, state.db, key, body)
        return await _translate_v2(request, admitted)

    return await idempotent(request, key, body_print, run)


def _work_not_done(exc: BaseException) -> bool:
    """An engine failure answered with a 5xx (or an unexpected error, answered 502): no translation was
    handed out, so the quota's characters go back. Not a cancellation: the engine may still finish."""
    if isinstance(exc, DragomanError):
        return exc.status >= 500
    return isinstance(exc, Exception)


async def _translate_v2(request: Request, admitted: _V2Admitted) -> Response:
    state = request.app.state
    req, texts = admitted.req, admitted.texts
    engine: Engine = state.engine
    pool: EnginePool = state.pool
    try:
        options = TranslateOptions(
            req.target, req.source, req.tier, tuple(glossary_entries(req.glossary) or ())
        )
        if req.text is not None:
            text = req.text
            one = await pool.run(lambda context: engine.translate(text, options, context=context))
            _checked([text], [one])
            return model_response(TranslationResultModel.from_result(one))
        results = await pool.run(lambda context: engine.translate_batch(texts, options, context=context))
        _checked(texts, results)
        return model_response(BatchResponse.from_results(results))
    except BaseException as exc:
        if admitted.chars and _work_not_done(exc):
            give_back = functools.partial(
                usage.give_back_v2_chars, state.db, admitted.key, admitted.chars, at_ms=admitted.taken_ms
            )
            with anyio.CancelScope(shield=True):
                try:
                    await anyio.to_thread.run_sync(give_back)
                except Exception:  # the engine's error is the answer; this one is only logged
                    log.exception("v2 quota characters of a failed request could not be given back")
        raise
