"""The daemon's wire types: pydantic models at the edge, and the OpenAPI document built from them.

Request models are strict (no coercion: ``"tier": 1`` or ``"text": 5`` is a 400, not a guess) and forbid
unknown fields (a misspelt ``glosary`` must not silently fall back to the user's glossary file). Limits
(64 texts, 200 glossary entries) are checked by the daemon itself so that their errors carry the
``limit_exceeded`` code; the schema still states them for generated clients.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.json_schema import models_json_schema

from dragoman.errors import InvalidRequest, LimitExceeded
from dragoman.limits import MAX_BATCH_TEXTS, MAX_GLOSSARY_ENTRIES, Provenance, Tier

_EXAMPLE = '{"text": "Hello", "target": "es"}'


def _no_lone_surrogates(value: str, field: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{field} holds a lone UTF-16 surrogate at index {exc.start}; send valid Unicode"
        ) from exc
    return value


class GlossaryItem(BaseModel):
    """Spec 2.7: ``term`` is kept verbatim as ``translation``."""

    model_config = ConfigDict(strict=True, extra="forbid", populate_by_name=False)

    term: str = Field(min_length=1, description="the text to keep; matched on word boundaries")
    translation: str = Field(description="what the term must become in every translation")
    case_sensitive: bool = Field(False, alias="caseSensitive", description="match the term's case exactly")

    @field_validator("term", "translation")
    @classmethod
    def _unicode(cls, value: str) -> str:
        return _no_lone_surrogates(value, "glossary entry")


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
    try:
        data = json.loads(body)
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8/16/32
        raise InvalidRequest(
            f"the body is not valid JSON ({exc}); send a JSON object such as {_EXAMPLE}"
        ) from exc
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


class TranslationResultModel(BaseModel):
    """Spec 2.6, plus ``route`` (the packs used) and ``tier``."""

    translation: str
    source: str = Field(description="canonical FLORES-200 code (detected when the request gave none)")
    target: str = Field(description="canonical FLORES-200 code")
    provenance: Provenance
    seconds: float
    warnings: list[str] = Field(description="empty when none; each starts with a short name and a colon")
    route: list[str] = Field(description="the hops taken, 'pack:src->tgt'; empty when nothing was translated")
    tier: Tier


class BatchResponse(BaseModel):
    results: list[TranslationResultModel] = Field(description="one result per input text, in input order")


class LanguageRow(BaseModel):
    """Spec 2.5."""

    flores: str
    bcp47: str
    name: str
    rtl: bool


class Backends(BaseModel):
    ctranslate2: bool = Field(description="the ctranslate2 runtime imports (neural packs usable)")
    apertium: bool = Field(description="Apertium is enabled and lt-proc is on PATH")


class QueueInfo(BaseModel):
    workers: int = Field(description="engine threads")
    limit: int = Field(description="requests allowed to wait for a thread; beyond it: 503")
    in_flight: int = Field(description="requests admitted whose engine work has not finished")
    timeout_seconds: float = Field(description="per-request limit; beyond it: 504")


class EngineInfo(BaseModel):
    """The ``engine`` object of ``GET /health`` (its content is left open by the spec)."""

    version: str = Field(description="dragoman version")
    provenance: Provenance
    uptime_seconds: float = Field(description="seconds since the engine started")
    packs_installed: list[str] = Field(
        description="ids of every usable pack (installed packs, Apertium pairs)"
    )
    packs_loaded: list[str] = Field(description="ids of packs loaded in memory (a pack loads on first use)")
    backends: Backends
    queue: QueueInfo
    auth: bool = Field(description="true when SERVICE_SERVE_TOKEN is set (bearer token required)")


class HealthResponse(BaseModel):
    ok: bool
    engine: EngineInfo


class ErrorBody(BaseModel):
    error: str = Field(description="what went wrong and what to do next")
    code: str | None = Field(None, description="a stable machine-readable name, e.g. 'unknown_language'")


_MODELS: tuple[type[BaseModel], ...] = (
    TranslateRequest,
    TranslationResultModel,
    BatchResponse,
    LanguageRow,
    HealthResponse,
    ErrorBody,
)


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    texts = {
        400: "invalid request: malformed JSON, wrong types, unknown field, missing target or text/texts, "
        "batch over 64, glossary over 200, unknown language, unsupported pair",
        401: "SERVICE_SERVE_TOKEN is set and the bearer token is missing or wrong",
        403: "Host header is not a loopback name, or Origin is not in the allowed list",
        404: "no such route",
        405: "method not allowed on this route",
        413: "body over 2 MB",
        502: "the engine failed (never an empty translation)",
        503: "saturated: too many requests waiting; retry after Retry-After seconds",
        504: "the engine took longer than the per-request timeout",
    }
    return {str(c): _json(_ref("ErrorBody"), texts[c]) for c in codes}


def openapi_document(version: str) -> dict[str, Any]:
    """OpenAPI 3.1 for every route, with schemas from the pydantic models."""
    _, top = models_json_schema(
        [(m, "validation" if m is TranslateRequest else "serialization") for m in _MODELS],
        ref_template="#/components/schemas/{model}",
    )
    schemas: dict[str, Any] = top.get("$defs", {})
    common = (401, 403, 404, 405)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "dragoman local daemon",
            "version": version,
            "description": "On-device translation on loopback (spec 4.4); every error is {error, code}.",
        },
        "paths": {
            "/translate": {
                "post": {
                    "operationId": "translate",
                    "summary": "Translate one text or a batch",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": _ref("TranslateRequest")}},
                    },
                    "responses": {
                        "200": _json(
                            {"oneOf": [_ref("TranslationResultModel"), _ref("BatchResponse")]},
                            "one result for text; {results} for texts",
                        ),
                        **_errors(400, *common, 413, 502, 503, 504),
                    },
                }
            },
            "/health": {
                "get": {
                    "operationId": "health",
                    "summary": "Liveness and engine state",
                    "responses": {
                        "200": _json(_ref("HealthResponse"), "the daemon is up"),
                        **_errors(*common),
                    },
                }
            },
            "/languages": {
                "get": {
                    "operationId": "languages",
                    "summary": "Languages the installed packs reach (spec 2.5 rows)",
                    "parameters": [
                        {
                            "name": "all",
                            "in": "query",
                            "required": False,
                            "description": "'1' or 'true': the whole FLORES-200 catalogue instead",
                            "schema": {"type": "string", "enum": ["0", "1", "true", "false"]},
                        }
                    ],
                    "responses": {
                        "200": _json({"type": "array", "items": _ref("LanguageRow")}, "language rows"),
                        **_errors(400, *common, 503),
                    },
                }
            },
            "/openapi.json": {
                "get": {
                    "operationId": "openapi",
                    "summary": "This document",
                    "responses": {"200": _json({"type": "object"}, "OpenAPI 3.1"), **_errors(*common)},
                }
            },
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{}, {"bearer": []}],
    }
