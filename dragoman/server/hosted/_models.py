"""The hosted v1 wire models (spec 2.1-2.4, 4.1, 7.1): every v1 request is parsed and every v1 answer
serialised through a model here, and ``/openapi.json`` is generated from the same models.

v2 speaks the daemon's models (:mod:`dragoman.server._wire`). Requests are strict and forbid unknown fields,
as the daemon's are. Where the spec leaves a name open, the name here is the contract (HOSTED.md): the v1
language row (``code``, ``native_name``, ``script``, ``variants``, ``tier``, ``credit_multiplier``), the
usage extras (``balance``, ``test_balance``, ``month_spend``, ``products``, ``rate_limit``, ``daily_quota``),
and the one v1 error body ``{"error", "code", ...}``.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dragoman.errors import InvalidRequest
from dragoman.limits import MAX_GLOSSARY_ENTRIES, MAX_TEXT_CHARS
from dragoman.server import _json as strict_json
from dragoman.server._wire import GlossaryItem

#: The most jobs one ``GET /api/v1/jobs`` lists (spec 4.6: not shown; ours).
MAX_JOB_LIST = 200
#: Target languages of one multi-target batch (ours: the v2 batch bound).
MAX_BATCH_TARGETS = 64

M = TypeVar("M", bound=BaseModel)
JobStatus = Literal["queued", "active", "done", "failed", "canceled"]


def _none(value: Any) -> bool:
    return value is None


# ----- errors (spec 7.1: body shape not shown; this is the contract) ------------------------------------
class HostedErrorBody(BaseModel):
    """Every v1 (and v2) error answer: ``error`` (a sentence saying what to do), ``code`` (stable name),
    and, for some codes, the fields below."""

    model_config = ConfigDict(extra="allow")

    error: str = Field(description="what went wrong and what to do next")
    code: str = Field(
        description="a stable machine-readable name, e.g. 'rate_limited', 'insufficient_credits'"
    )
    retry_after: int | None = Field(
        None, description="seconds to wait before retrying (429 rate_limited, 409 idempotency_in_progress)"
    )
    limit: int | None = Field(
        None, description="the limit that was reached (429: requests a minute or characters a day)"
    )
    remaining: int | None = Field(None, description="what is left of that limit (429)")
    resets_at: str | None = Field(
        None,
        description="ISO 8601 UTC instant the limit resets (429; 402 monthly_cap_reached)",
    )


# ----- translate (spec 4.1) ---------------------------------------------------------------------------
_EXAMPLE = '{"text": "Hello", "src": "en", "tgt": "es"}'


class V1TranslateRequest(BaseModel):
    """JSON body of ``POST /api/v1/translate``: ``text``, ``src`` and one of ``tgt`` (``target`` is its
    alias) or ``targets`` (a multi-target batch). A file is sent as ``multipart/form-data`` instead, with
    fields ``file``, ``src``, ``tgt`` (or ``target`` / ``targets``, comma-separated), ``webhook``."""

    model_config = ConfigDict(strict=True, extra="forbid")

    text: str = Field(
        min_length=1,
        description=f"the text to translate, at most {MAX_TEXT_CHARS:,} characters (1 MB); at most 500 are "
        "answered at once (sync), longer texts become a job",
        max_length=MAX_TEXT_CHARS,
    )
    src: str = Field(description="source language (ISO 639-1 like 'en'; BCP-47 and FLORES-200 accepted)")
    tgt: str | None = Field(None, description="target language (ISO 639-1 like 'es')")
    target: str | None = Field(None, description="alias of tgt (one description of the spec names it so)")
    targets: list[str] | None = Field(
        None,
        min_length=1,
        description=f"several target languages (at most {MAX_BATCH_TARGETS}): a batch, one job a target; "
        "the answer holds batch_id and the child job ids",
        json_schema_extra={"maxItems": MAX_BATCH_TARGETS},
    )
    webhook: str | None = Field(
        None, description="https URL for this request's job.done / job.failed events (overrides the key's)"
    )
    title: str | None = Field(
        None, max_length=200, description="a title for the job list (default: the text)"
    )
    glossary: list[GlossaryItem] | None = Field(
        None,
        description=f"terms kept verbatim as given (at most {MAX_GLOSSARY_ENTRIES})",
        json_schema_extra={"maxItems": MAX_GLOSSARY_ENTRIES},
    )

    def target_list(self) -> list[str]:
        return target_list(self.tgt, self.target, self.targets)


def target_list(tgt: str | None, target: str | None, targets: list[str] | None) -> list[str]:
    """The one target of ``tgt``/``target``, or the batch's ``targets``; InvalidRequest otherwise."""
    given = [name for name, value in (("tgt", tgt), ("target", target), ("targets", targets)) if value]
    if not given:
        raise InvalidRequest(f"missing field 'tgt' (the target language, e.g. 'es'); for example {_EXAMPLE}")
    if len(given) > 1 and given != ["tgt", "target"]:
        raise InvalidRequest(f"give one of tgt, target (its alias) or targets; got {', '.join(given)}")
    if tgt and target and tgt != target:
        raise InvalidRequest(f"tgt {tgt!r} and its alias target {target!r} differ; give one")
    if targets:
        if len(targets) > MAX_BATCH_TARGETS:
            raise InvalidRequest(f"a batch has at most {MAX_BATCH_TARGETS} targets; got {len(targets)}")
        if len(set(targets)) != len(targets):
            raise InvalidRequest("targets holds a language twice; give each once")
        return list(targets)
    return [tgt or target or ""]


def _validation_message(exc: ValidationError, model: type[BaseModel]) -> str:
    parts: list[str] = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"])
        if err["type"] == "missing":
            parts.append(f"missing field {loc!r}")
        elif err["type"] == "extra_forbidden":
            allowed = ", ".join(f.alias or n for n, f in model.model_fields.items())
            parts.append(f"unknown field {loc!r}; allowed: {allowed}")
        else:
            parts.append(f"{loc}: {err['msg']}")
    more = len(exc.errors()) - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def parse_model(model: type[M], body: bytes, example: str) -> M:
    """``body`` (strict JSON) validated as ``model``, or :class:`InvalidRequest` saying why."""
    if not body.strip():
        raise InvalidRequest(f"the body is empty; send a JSON object such as {example}")
    data = strict_json.loads(body, example=example)
    if not isinstance(data, dict):
        raise InvalidRequest(f"the body must be a JSON object, got {type(data).__name__}; e.g. {example}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidRequest(_validation_message(exc, model)) from exc


def parse_translate_v1(body: bytes) -> V1TranslateRequest:
    return parse_model(V1TranslateRequest, body, _EXAMPLE)


class SyncTranslateResponse(BaseModel):
    """A text of at most 500 characters, translated at once (spec 3: straight to done)."""

    job_id: str
    status: Literal["done"] = "done"
    sync: Literal[True] = True
    credits: int = Field(description="credits charged")
    elapsed_seconds: float
    result: str = Field(description="the translated text")


class AcceptedResponse(BaseModel):
    """202: the job is queued; poll ``poll_url`` (every 2 to 5 seconds) or wait for the webhook."""

    job_id: str
    status: Literal["queued"] = "queued"
    sync: Literal[False] = False
    poll_url: str = Field(description="absolute URL of GET /api/v1/jobs/{job_id}")
    credits_reserved: int = Field(description="credits reserved for the job (charged when it is done)")
    batch_id: str | None = Field(None, exclude_if=_none, description="present for a child of a batch")
    target: str | None = Field(None, exclude_if=_none, description="the child's target language (batches)")


class BatchAcceptedResponse(BaseModel):
    """202: a multi-target batch, one child job a target (each reports on its own; ``batch.completed``
    fires once when every child is terminal)."""

    batch_id: str
    status: Literal["queued"] = "queued"
    sync: Literal[False] = False
    job_ids: list[str] = Field(description="the child jobs, in the order of targets")
    jobs: list[AcceptedResponse] = Field(description="each child with its target and poll_url")
    credits_reserved: int = Field(description="credits reserved for every child together")


# ----- jobs (spec 2.1, 2.2) ---------------------------------------------------------------------------
class JobResponse(BaseModel):
    """Spec 2.1. ``result`` only when done, ``error`` only when failed, exports only for done documents,
    ``batch_id`` only for a batch child."""

    job_id: str
    status: JobStatus
    sync: bool
    poll_url: str = Field(description="absolute URL of this job")
    progress_percent: int = Field(ge=0, le=100)
    credits: int | None = Field(description="credits charged; null while pending")
    elapsed_seconds: float = Field(description="wall time since the job was created (until it ended)")
    title: str
    created_at: str = Field(description="ISO 8601 UTC with milliseconds")
    result: str | None = Field(None, exclude_if=_none, description="the translated text (done)")
    error: str | None = Field(None, exclude_if=_none, description="why it failed (failed)")
    export_docx: str | None = Field(None, exclude_if=_none, description="URL of the DOCX export")
    export_pdf: str | None = Field(None, exclude_if=_none, description="URL of the PDF export")
    batch_id: str | None = Field(None, exclude_if=_none)


class CancelResponse(BaseModel):
    """``DELETE /api/v1/jobs/{id}``: canceled, and the reservation refunded at once."""

    ok: Literal[True] = True
    job_id: str
    status: Literal["canceled"] = "canceled"
    credits_refunded: int


class JobListItem(BaseModel):
    """Spec 2.2."""

    job_id: str
    status: JobStatus
    title: str
    credits: int | None = Field(description="credits charged; null while pending")
    created_at: str = Field(description="ISO 8601 UTC with milliseconds")


class JobListResponse(BaseModel):
    jobs: list[JobListItem] = Field(description="most recent first")
    total: int = Field(description="count of all jobs of the key")
    limit: int
    offset: int


# ----- quote (spec 2.3, 4.1) --------------------------------------------------------------------------
_QUOTE_EXAMPLE = '{"chars": 1200, "src": "en", "tgt": "es"}'


class QuoteRequest(BaseModel):
    """Either ``chars`` or ``fileBytes`` (with ``mime``), and the language pair."""

    model_config = ConfigDict(strict=True, extra="forbid", populate_by_name=False)

    chars: int | None = Field(None, ge=0, le=10**12, description="characters to translate")
    file_bytes: int | None = Field(
        None, alias="fileBytes", ge=0, le=10**13, description="size of a file; characters estimated from mime"
    )
    mime: str | None = Field(None, description="the file's MIME type (with fileBytes)")
    src: str = Field(description="source language")
    tgt: str | None = Field(None, description="target language")
    target: str | None = Field(None, description="alias of tgt")


def parse_quote(body: bytes) -> QuoteRequest:
    quote = parse_model(QuoteRequest, body, _QUOTE_EXAMPLE)
    if (quote.chars is None) == (quote.file_bytes is None):
        raise InvalidRequest(f"give either chars or fileBytes (with mime); for example {_QUOTE_EXAMPLE}")
    if quote.file_bytes is not None and not quote.mime:
        raise InvalidRequest("fileBytes needs mime (the file's type, e.g. application/pdf)")
    return quote


class QuoteBreakdown(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    chars: int
    src: str
    tgt: str
    lang_tier: int = Field(alias="langTier", description="1 high-, 2 mid-, 3 low-resource (the pair's max)")


class QuoteResponse(BaseModel):
    """Exactly what the job would reserve: max(1, ceil(chars / 100)) x langTier."""

    credits: int
    breakdown: QuoteBreakdown

    def dump(self) -> bytes:
        return self.model_dump_json(by_alias=True).encode()


# ----- usage (spec 2.4, 4.1) ----------------------------------------------------------------------------
class UsageDay(BaseModel):
    day: str = Field(description="YYYY-MM-DD (UTC)")
    requests: int
    credits_spent: int


class RateLimitHeadroom(BaseModel):
    limit: int = Field(description="requests a minute (fixed window)")
    remaining: int = Field(description="requests left in this window")
    reset_seconds: int = Field(description="seconds until the window ends")


class DailyQuota(BaseModel):
    limit: int = Field(description="v2 characters a UTC day")
    remaining: int
    resets_at: str = Field(description="ISO 8601 UTC: the next UTC midnight")


class UsageResponse(BaseModel):
    """Spec 2.4 (``key_id``, 30 UTC days including empty ones) and the second description's extras."""

    key_id: str
    days: list[UsageDay] = Field(description="the last 30 UTC days, oldest first, zeros included")
    mode: Literal["live", "test"] = Field(description="test keys spend test_balance")
    balance: int = Field(
        description="the balance this key spends: live credits, or test credits for a test key"
    )
    live_balance: int = Field(description="the account's live credit balance")
    test_balance: int = Field(description="the account's test credit balance")
    month_spend: int = Field(description="credits this key spent this UTC month")
    monthly_cap: int | None = Field(description="the key's monthly spend cap (null: none)")
    month_resets_at: str = Field(description="ISO 8601 UTC: the first instant of next month")
    products: dict[str, int] = Field(description="credits spent this UTC month by product ('translate', …)")
    rate_limit: RateLimitHeadroom
    daily_quota: DailyQuota


# ----- languages (spec 2.5, v1 row names are ours) --------------------------------------------------------
class V1LanguageRow(BaseModel):
    """A language of ``GET /api/v1/languages``."""

    code: str = Field(description="the code to send as src/tgt: ISO 639-1 where one exists, else BCP-47")
    flores: str = Field(description="FLORES-200 code (also accepted as src/tgt)")
    bcp47: str
    name: str = Field(description="English name")
    native_name: str = Field(description="the language's name for itself (English when unknown)")
    script: str = Field(description="ISO 15924 script, e.g. 'Latn'")
    rtl: bool
    variants: list[str] = Field(description="FLORES codes of the same language in other scripts")
    tier: Literal[1, 2, 3] = Field(description="1 high-, 2 mid-, 3 low-resource")
    credit_multiplier: int = Field(description="credits per 100 characters into or out of this language")
