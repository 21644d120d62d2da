"""The wire contract, written once: spec 2.5 (language row), 2.6 (translation result), 2.7 (glossary entry),
the translate request of spec 4.4 and the ``{"error", "code"}`` body.

Every front door speaks through these models: the daemon parses its requests with :func:`parse_translate`
and serialises every answer through a model here (``TranslationResultModel.from_result(r)``), so its
OpenAPI document (generated from the same models) and its answers cannot drift; the MCP server's tool
outputs derive from them; hosted v2 will reuse them. Limits come from :mod:`dragoman.limits`.

Requests are strict (no coercion: ``"tier": 1`` or ``"text": 5`` is a 400, not a guess) and forbid unknown
fields (a misspelt ``glosary`` must not silently fall back to the user's glossary file). The batch and
glossary limits are checked before validation so that their errors carry the ``limit_exceeded`` code; the
schema states them for generated clients, as it states the term length the engine checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dragoman.errors import DragomanError, InvalidRequest, LimitExceeded
from dragoman.languages.types import Language
from dragoman.limits import MAX_BATCH_TEXTS, MAX_GLOSSARY_ENTRIES, MAX_TERM_CHARS, Provenance, Tier
from dragoman.server import _json as strict_json
from dragoman.translation.types import GlossaryEntry, TranslationResult

__all__ = [
    "BatchResponse",
    "ErrorBody",
    "GlossaryItem",
    "LanguageRow",
    "TranslateRequest",
    "TranslationResultModel",
    "parse_translate",
]

_EXAMPLE = '{"text": "Hello", "target": "es"}'


def _no_lone_surrogates(value: str, field: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{field} holds a lone UTF-16 surrogate at index {exc.start}; send valid Unicode"
        ) from exc
    return value


# ----- spec 2.5, 2.6, 2.7 -----------------------------------------------------------------------------
class LanguageRow(BaseModel):
    """Spec 2.5."""

    flores: str
    bcp47: str
    name: str
    rtl: bool

    @classmethod
    def from_language(cls, language: Language) -> Self:
        return cls(flores=language.flores, bcp47=language.bcp47, name=language.name, rtl=language.rtl)


class GlossaryItem(BaseModel):
    """Spec 2.7: ``term`` is kept verbatim as ``translation``."""

    model_config = ConfigDict(strict=True, extra="forbid", populate_by_name=False)

    term: str = Field(
        min_length=1,
        description="the text to keep; matched on word boundaries",
        json_schema_extra={"maxLength": MAX_TERM_CHARS},
    )
    translation: str = Field(
        description="what the term must become in every translation",
        json_schema_extra={"maxLength": MAX_TERM_CHARS},
    )
    case_sensitive: bool = Field(False, alias="caseSensitive", description="match the term's case exactly")

    @field_validator("term", "translation")
    @classmethod
    def _unicode(cls, value: str) -> str:
        return _no_lone_surrogates(value, "glossary entry")

    def to_entry(self) -> GlossaryEntry:
        return GlossaryEntry(self.term, self.translation, case_sensitive=self.case_sensitive)


def glossary_entries(items: Sequence[GlossaryItem] | None) -> tuple[GlossaryEntry, ...] | None:
    """The engine's entries for a request's glossary; None (no glossary given) stays None."""
    return None if items is None else tuple(item.to_entry() for item in items)


class TranslationResultModel(BaseModel):
    """Spec 2.6, plus ``route`` (the packs used) and ``tier``."""

    translation: str
    source: str = Field(description="canonical FLORES-200 code (detected when the request gave none)")
    target: str = Field(description="canonical FLORES-200 code")
    provenance: Provenance = Field(
        description="where the work ran: 'on-device' on this machine, 'server' on the hosted service"
    )
    seconds: float
    warnings: list[str] = Field(description="empty when none; each starts with a short name and a colon")
    route: list[str] = Field(description="the hops taken, 'pack:src->tgt'; empty when nothing was translated")
    tier: Tier

    @classmethod
    def from_result(cls, result: TranslationResult) -> Self:
        return cls(
            translation=result.translation,
            source=result.source,
            target=result.target,
            provenance=result.provenance,
            seconds=round(result.seconds, 6),
            warnings=list(result.warnings),
            route=list(result.route),
            tier=result.tier,
        )


class BatchResponse(BaseModel):
    """The answer to a batch (``texts``)."""

    results: list[TranslationResultModel] = Field(description="one result per input text, in input order")

    @classmethod
    def from_results(cls, results: Sequence[TranslationResult]) -> Self:
        return cls(results=[TranslationResultModel.from_result(r) for r in results])


class BatchingInfo(BaseModel):
    """The engine's dynamic batcher (:mod:`dragoman.translation.batcher`): what it merged, what waits now.
    Part of ``GET /health``'s engine object and of MCP ``engine_status``."""

    enabled: bool = Field(description="concurrent callers' segments are merged per route")
    batches: int = Field(description="backend calls the batcher formed since the engine started")
    segments: int = Field(description="segments those calls translated")
    mean_batch_size: float = Field(description="segments per call formed (0 before the first)")
    merged_batches: int = Field(description="calls that held more than one caller's segments")
    reruns: int = Field(description="callers' parts run again alone after a merged call failed")
    queue_depth: int = Field(description="segments waiting for a batch now")
    waiting_callers: int = Field(description="callers with segments waiting now")
    running_batches: int = Field(description="batches running now")
    max_segments: int = Field(description="segments per call at most")
    max_chars: int = Field(description="characters per call at most (a longer segment goes alone)")
    max_queued: int = Field(description="segments that may wait per route; beyond it: 503 saturated")
    window_ms: float = Field(description="how long a busy route waits to fill a batch (an idle one never)")


class ErrorBody(BaseModel):
    """Every error answer."""

    error: str = Field(description="what went wrong and what to do next")
    code: str | None = Field(None, description="a stable machine-readable name, e.g. 'unknown_language'")

    @classmethod
    def from_error(cls, exc: DragomanError) -> Self:
        return cls(error=exc.message, code=exc.code)


# ----- spec 4.4: the translate request ----------------------------------------------------------------
class TranslateRequest(BaseModel):
    """Body of ``POST /translate`` (spec 4.4). Exactly one of ``text`` and ``texts``."""

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        # ``null`` counts as absent, so "exactly one" is stated on the non-null types.
        json_schema_extra={
            "oneOf": [
                {"properties": {"text": {"type": "string"}}, "required": ["text"]},
                {"properties": {"texts": {"type": "array"}}, "required": ["texts"]},
            ]
        },
    )

    text: str | None = Field(
        None, description="one text; the answer is one result", examples=["Hello, world."]
    )
    texts: list[str] | None = Field(
        None,
        description=f"a batch of at most {MAX_BATCH_TEXTS} texts; "
        "the answer is {results: [...]} in input order",
        json_schema_extra={"maxItems": MAX_BATCH_TEXTS},
    )
    target: str = Field(
        description="target language: BCP-47 ('es') or FLORES-200 ('spa_Latn')", examples=["es", "spa_Latn"]
    )
    source: str | None = Field(
        None, description="source language; detected when omitted (eng_Latn if uncertain)"
    )
    tier: Tier | None = Field(
        None, description="'best' (highest quality, the default) or 'fast' (primary engine plus guards)"
    )
    glossary: list[GlossaryItem] | None = Field(
        None,
        description=(
            f"at most {MAX_GLOSSARY_ENTRIES} entries; when omitted the user's glossary file applies, "
            "an empty list applies none"
        ),
        json_schema_extra={"maxItems": MAX_GLOSSARY_ENTRIES},
    )

    @field_validator("text")
    @classmethod
    def _text_unicode(cls, value: str | None) -> str | None:
        return None if value is None else _no_lone_surrogates(value, "text")

    @field_validator("texts")
    @classmethod
    def _texts_unicode(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            for i, item in enumerate(value):
                _no_lone_surrogates(item, f"texts[{i}]")
        return value


def _validation_message(exc: ValidationError) -> str:
    parts: list[str] = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"])
        if err["type"] == "missing" and loc == "target":
            parts.append(
                "missing field 'target' (the target language, BCP-47 like 'es' or FLORES-200 like 'spa_Latn')"
            )
        elif err["type"] == "missing":
            parts.append(f"missing field {loc!r}")
        elif err["type"] == "extra_forbidden":
            allowed = ", ".join(f.alias or n for n, f in TranslateRequest.model_fields.items())
            glossary = "term, translation, caseSensitive"
            parts.append(
                f"unknown field {loc!r}; allowed: {glossary if loc.startswith('glossary') else allowed}"
            )
        else:
            parts.append(f"{loc}: {err['msg']}")
    more = len(exc.errors()) - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def parse_translate(body: bytes) -> TranslateRequest:
    """The request of ``POST /translate``, or :class:`InvalidRequest` (:class:`LimitExceeded`) saying why."""
    if not body.strip():
        raise InvalidRequest(f"the body is empty; send a JSON object such as {_EXAMPLE}")
    data = strict_json.loads(body, example=_EXAMPLE)  # deep nesting, NaN, duplicate keys: 400 too
    if not isinstance(data, dict):
        raise InvalidRequest(
            f"the body must be a JSON object, got {type(data).__name__}; for example {_EXAMPLE}"
        )
    if isinstance(data.get("texts"), list) and len(data["texts"]) > MAX_BATCH_TEXTS:
        raise LimitExceeded(
            f"a batch holds at most {MAX_BATCH_TEXTS} texts; got {len(data['texts'])}: split it"
        )
    if isinstance(data.get("glossary"), list) and len(data["glossary"]) > MAX_GLOSSARY_ENTRIES:
        raise LimitExceeded(
            f"a glossary holds at most {MAX_GLOSSARY_ENTRIES} entries; got {len(data['glossary'])}"
        )
    try:
        request = TranslateRequest.model_validate(data)
    except ValidationError as exc:
        raise InvalidRequest(_validation_message(exc)) from exc
    if request.text is not None and request.texts is not None:
        raise InvalidRequest("give either text (one string) or texts (a list), not both")
    if request.text is None and request.texts is None:
        raise InvalidRequest(f"missing text or texts: give the text to translate, for example {_EXAMPLE}")
    return request
