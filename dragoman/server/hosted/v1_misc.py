"""Hosted v1's small routes: ``GET /api/v1/languages`` and ``POST /api/v1/quote`` (no key), and
``GET /api/v1/usage`` (the key's days, balance, month spend, rate-limit and daily-quota headroom)."""

from __future__ import annotations

from functools import cache

import anyio
import anyio.to_thread
from pydantic import TypeAdapter
from starlette.requests import Request
from starlette.responses import Response

from dragoman.errors import InvalidRequest
from dragoman.languages import catalogue
from dragoman.server._http import JSON, model_response
from dragoman.server.hosted._common import MAX_SMALL_BODY_BYTES, Upload, read_limited, read_multipart
from dragoman.server.hosted._gate import authenticate
from dragoman.server.hosted._models import (
    DailyQuota,
    QuoteBreakdown,
    QuoteResponse,
    RateLimitHeadroom,
    UsageDay,
    UsageResponse,
    V1LanguageRow,
    parse_quote,
    target_list,
)
from dragoman.service import billing, usage
from dragoman.service.usage import iso_ms


@cache
def _native_name(bcp47: str, name: str) -> str:
    try:
        import langcodes

        native = str(langcodes.Language.get(bcp47).autonym())
    except Exception:  # langcodes' data may lack a language: the English name stands in
        return name
    return native or name


@cache
def v1_language_rows() -> bytes:
    rows: list[V1LanguageRow] = []
    languages = catalogue.all_languages()
    by_lang3: dict[str, list[str]] = {}
    for lang in languages:
        by_lang3.setdefault(lang.flores[:3], []).append(lang.flores)
    for lang in languages:
        tier = billing.lang_tier(lang.flores)
        short = lang.bcp47.split("-", 1)[0]
        code = lang.bcp47 if len(by_lang3[lang.flores[:3]]) > 1 or len(short) != 2 else short
        rows.append(
            V1LanguageRow(
                code=code,
                flores=lang.flores,
                bcp47=lang.bcp47,
                name=lang.name,
                native_name=_native_name(lang.bcp47, lang.name),
                script=lang.flores.split("_", 1)[1],
                rtl=lang.rtl,
                variants=[f for f in by_lang3[lang.flores[:3]] if f != lang.flores],
                tier=tier,  # type: ignore[arg-type]
                credit_multiplier=tier,
            )
        )
    return TypeAdapter(list[V1LanguageRow]).dump_json(rows)


async def languages_v1(request: Request) -> Response:
    """Every language with its codes, native name, script variants and credit tier multiplier."""
    return Response(v1_language_rows(), media_type=JSON)


def _quote_sync(body: bytes) -> QuoteResponse:
    req = parse_quote(body)
    tgt = target_list(req.tgt, req.target, None)[0]
    chars = (
        req.chars if req.chars is not None else billing.estimate_chars(req.file_bytes or 0, req.mime or "")
    )
    quote = billing.translation_quote(chars, req.src, tgt)
    breakdown = QuoteBreakdown(chars=quote.chars, src=quote.src, tgt=quote.tgt, langTier=quote.lang_tier)
    return QuoteResponse(credits=quote.credits, breakdown=breakdown)


def _quote_file(upload: Upload) -> QuoteResponse:
    """The quote of a file sent as multipart (``file``, ``src``, ``tgt``): its characters counted."""
    from dragoman.service.translation_jobs import count_document_chars

    fields = upload.fields
    unknown = sorted(set(fields) - {"src", "tgt", "target"})
    if unknown:
        raise InvalidRequest(f"unknown form field(s) {', '.join(unknown)}; allowed: file, src, tgt")
    src = fields.get("src")
    if not src:
        raise InvalidRequest("missing field 'src' (the source language, e.g. 'en')")
    tgt = target_list(fields.get("tgt"), fields.get("target"), None)[0]
    billing.translation_quote(0, src, tgt)  # 400 for an unknown language before the file is read
    chars = count_document_chars(upload.path, upload.declared_mime, source=None if src == "auto" else src)
    quote = billing.translation_quote(chars, src, tgt)
    breakdown = QuoteBreakdown(chars=quote.chars, src=quote.src, tgt=quote.tgt, langTier=quote.lang_tier)
    return QuoteResponse(credits=quote.credits, breakdown=breakdown)


async def quote_v1(request: Request) -> Response:
    """What a translation would reserve (1 credit per 100 characters, rounded up, times langTier; min 1).

    ``{"product": "caption", "durationSeconds", "targetLangs"}`` quotes a subtitle batch instead (spec 8:
    30 credits a minute for captions, 60 a minute per target language, pro-rata per second rounded up);
    ``{"product": "dub", "durationSeconds", "targetLang" | "targets"}`` a dub (150 a minute per target).

    JSON ``{chars | fileBytes+mime, src, tgt}``, or multipart with the ``file`` itself (its characters are
    counted as the job would count them)."""
    if request.headers.get("content-type", "").lower().startswith("multipart/form-data"):
        upload, _ = await read_multipart(request, request.app.state.tmp_dir)
        try:
            quote = await anyio.to_thread.run_sync(_quote_file, upload)
        finally:
            upload.close()
    else:
        body = await read_limited(request, MAX_SMALL_BODY_BYTES)
        from dragoman.server.hosted.v1_subtitles import caption_quote

        caption = caption_quote(body)  # {"product": "caption", ...}: subtitles (issue 15)
        if caption is not None:
            return Response(caption, media_type=JSON)
        from dragoman.server.hosted.v1_dub import dub_quote

        dub = dub_quote(body)  # {"product": "dub", ...}: dubbing (issue 16)
        if dub is not None:
            return Response(dub, media_type=JSON)
        quote = await anyio.to_thread.run_sync(_quote_sync, body)
    return Response(quote.dump(), media_type=JSON)


async def usage_v1(request: Request) -> Response:
    """The key's last 30 UTC days, balance, month spend by product, rate-limit and daily-quota headroom."""
    key = await authenticate(request)
    state = request.app.state
    await anyio.to_thread.run_sync(state.tally.flush)  # this request and those before it are in the report
    report = await anyio.to_thread.run_sync(usage.usage_report, state.db, key)
    window = await anyio.to_thread.run_sync(state.limiter.peek, key.key_id)  # Redis: I/O
    return model_response(
        UsageResponse(
            key_id=report.key_id,
            days=[
                UsageDay(day=d.day, requests=d.requests, credits_spent=d.credits_spent) for d in report.days
            ],
            mode=key.mode,
            balance=report.balance,
            live_balance=report.live_balance,
            test_balance=report.test_balance,
            month_spend=report.month_spend,
            monthly_cap=report.monthly_cap,
            month_resets_at=iso_ms(report.month_resets_at_ms),
            products=dict(report.products),
            rate_limit=RateLimitHeadroom(
                limit=window.limit, remaining=window.remaining, reset_seconds=window.reset_seconds()
            ),
            daily_quota=DailyQuota(
                limit=report.daily_quota,
                remaining=max(0, report.daily_quota - report.daily_chars_used),
                resets_at=iso_ms(report.daily_quota_resets_at_ms),
            ),
        )
    )
