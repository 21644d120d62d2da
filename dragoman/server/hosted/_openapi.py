"""The hosted service's OpenAPI document: :func:`~dragoman.server._http.openapi_document` over the route
table (:data:`.app.ROUTES`), with what the table cannot say: the description, bearer security per route,
the ``RateLimit-*`` headers of v1's authenticated answers, the ``job_id`` path parameter, Idempotency-Key,
the multipart forms, translate's 202 answers and the exports' binary bodies."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter
from starlette.routing import BaseRoute

from dragoman import __version__
from dragoman.server._http import JSON, METHOD_NOT_ALLOWED, NOT_FOUND, UNEXPECTED, openapi_document
from dragoman.server.hosted._models import AcceptedResponse, BatchAcceptedResponse, HostedErrorBody
from dragoman.server.hosted._ranges import openapi_ranged
from dragoman.server.hosted.v1_jobs import EXPORT_TYPES
from dragoman.service import idempotency

_JOB_ID = "job_id"
COMMON_ERRORS = (NOT_FOUND, METHOD_NOT_ALLOWED, UNEXPECTED)
_BEARER_ROUTES = {
    ("/api/v2/translate", "post"),
    ("/api/v1/translate", "post"),
    ("/api/v1/jobs", "get"),
    ("/api/v1/jobs/{job_id}", "get"),
    ("/api/v1/jobs/{job_id}", "delete"),
    ("/api/v1/jobs/{job_id}/export/docx", "get"),
    ("/api/v1/jobs/{job_id}/export/pdf", "get"),
    ("/api/v1/usage", "get"),
    ("/api/v1/tts/synth", "post"),
    ("/api/v1/tts/synth/stream", "post"),
    ("/api/v1/tts/jobs/{job_id}", "get"),
    ("/api/v1/tts/jobs/{job_id}/audio", "get"),
}
_RATE_HEADERS_DOC = {
    "RateLimit-Limit": "requests a minute allowed to the key (fixed window)",
    "RateLimit-Remaining": "requests left in this window",
    "RateLimit-Reset": "seconds until the window ends",
}

DESCRIPTION = """\
The hosted translation service: v1 (jobs, quote, usage; spec 4.1) and v2 (the local daemon's translate
contract with provenance 'server'; spec 4.4).

Authentication: `Authorization: Bearer svc_live_…` (or `svc_test_…`, spending test credits) on every route but
`GET /api/v1/languages`, `POST /api/v1/quote`, `GET /api/v2/languages` and this document.

Errors: every error is JSON `{"error": "<what to do>", "code": "<stable name>", ...}`; some codes add fields:
`rate_limited` (429) `retry_after`, `limit`, `remaining`, `resets_at` and a `Retry-After` header;
`quota_exceeded` (429, v2; error 'daily character quota exceeded') `remaining`, `limit`, `resets_at`;
`insufficient_credits` (402) `balance`, `required`; `monthly_cap_reached` (402) `cap`, `spent`, `resets_at`;
`idempotency_in_progress` (409) `retry_after`; `job_finished` (409) `status`;
`rate_limiter_unavailable` (503: the shared rate limiter's Redis cannot be reached; the request is refused,
never served unmetered) and `storage_unavailable` (503: the file store cannot be reached) `retry_after` and a
`Retry-After` header.

Order of checks on v1 authenticated routes: 401 → 403 → 429 (60 requests a minute per key; job polls and
export downloads count: prefer webhooks) → Idempotency-Key → 400/413/415 → 402 → work.

Idempotency-Key (POST /api/v1/translate and /api/v2/translate; 24 hours, per key): the same key and request
replays the stored answer with `Idempotent-Replayed: true`; the same key with another request is 422; while
the first runs, 409 with `Retry-After`. Errors are not stored (a retry runs again).

Credits: 1 credit per 100 characters, rounded up, times the pair's language tier (1, 2 or 3), at least 1;
`POST /api/v1/quote` says exactly what a job reserves.
"""


def hosted_openapi(routes: Sequence[BaseRoute]) -> bytes:
    """The document of ``routes`` (the hosted route table), as compact UTF-8 JSON."""
    document = openapi_document(
        routes,
        title="dragoman hosted service",
        version=__version__,
        description=DESCRIPTION,
        common_errors=COMMON_ERRORS,
        bearer=True,
    )
    schemas = document["components"]["schemas"]
    error_schema = TypeAdapter(HostedErrorBody).json_schema(ref_template="#/components/schemas/{model}")
    schemas["ErrorBody"] = error_schema
    paths = document["paths"]
    operations = [(path, method, op) for path, ops in paths.items() for method, op in ops.items()]
    from dragoman.server.hosted.v1_dub import BEARER_ROUTES as DUB_BEARER_ROUTES
    from dragoman.server.hosted.v1_subtitles import BEARER_ROUTES as SUBTITLE_BEARER_ROUTES

    bearer_routes = _BEARER_ROUTES | SUBTITLE_BEARER_ROUTES | DUB_BEARER_ROUTES
    for path, method, operation in operations:
        if (path, method) in bearer_routes:
            operation["security"] = [{"bearer": []}]
        else:
            operation["security"] = [{}]
        if path.startswith("/api/v1/") and (path, method) in bearer_routes:
            headers = {
                name: {"description": text, "schema": {"type": "integer"}}
                for name, text in _RATE_HEADERS_DOC.items()
            }
            for status, answer in operation["responses"].items():
                if status not in ("401", "403", "404", "405", "502"):
                    answer["headers"] = dict(headers)
            if "429" in operation["responses"]:
                operation["responses"]["429"]["headers"]["Retry-After"] = {
                    "description": "seconds to wait",
                    "schema": {"type": "integer"},
                }
        if "{job_id}" in path:
            operation.setdefault("parameters", []).append(
                {"name": _JOB_ID, "in": "path", "required": True, "schema": {"type": "string"}}
            )
        if path in ("/api/v1/translate", "/api/v2/translate"):
            operation.setdefault("parameters", []).append(
                {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": False,
                    "description": "run this POST once within 24 hours (per key)",
                    "schema": {"type": "string", "minLength": 1, "maxLength": idempotency.MAX_KEY_CHARS},
                }
            )
    translate = paths["/api/v1/translate"]["post"]
    translate["requestBody"]["content"]["multipart/form-data"] = {
        "schema": {
            "type": "object",
            "required": ["file", "src"],
            "properties": {
                "file": {
                    "type": "string",
                    "format": "binary",
                    "description": "PDF, DOCX, PNG, JPG or TIFF; 200 MB",
                },
                "src": {"type": "string"},
                "tgt": {"type": "string"},
                "target": {"type": "string", "description": "alias of tgt"},
                "targets": {"type": "string", "description": "comma-separated target languages: a batch"},
                "webhook": {"type": "string"},
                "title": {"type": "string"},
            },
        }
    }
    paths["/api/v1/quote"]["post"]["requestBody"]["content"]["multipart/form-data"] = {
        "schema": {
            "type": "object",
            "required": ["file", "src"],
            "properties": {
                "file": {"type": "string", "format": "binary", "description": "the document to count"},
                "src": {"type": "string"},
                "tgt": {"type": "string"},
                "target": {"type": "string", "description": "alias of tgt"},
            },
        }
    }
    accepted = TypeAdapter(AcceptedResponse | BatchAcceptedResponse).json_schema(
        ref_template="#/components/schemas/{model}", mode="serialization"
    )
    schemas.update(accepted.pop("$defs", {}))
    translate["responses"]["202"] = {
        "description": "a job (longer text, a file) or a batch (targets): poll poll_url or await the webhook",
        "content": {JSON: {"schema": accepted}},
        "headers": dict(translate["responses"]["200"].get("headers", {})),
    }
    for fmt, mime in EXPORT_TYPES.items():
        answer = paths[f"/api/v1/jobs/{{job_id}}/export/{fmt}"]["get"]["responses"]["200"]
        answer["content"] = {mime: {"schema": {"type": "string", "format": "binary"}}}
        answer.setdefault("headers", {})["Content-Disposition"] = {
            "description": "attachment; filename=…",
            "schema": {"type": "string"},
        }
        openapi_ranged(paths[f"/api/v1/jobs/{{job_id}}/export/{fmt}"]["get"], answer["content"])
    _tts(paths, schemas)
    from dragoman.server.hosted.v1_subtitles import openapi_fixups as subtitle_fixups

    subtitle_fixups(paths)  # subtitles (issue 15): raw bodies, 202s, the download's formats
    from dragoman.server.hosted.v1_dub import openapi_fixups as dub_fixups

    dub_fixups(paths)  # dubbing (issue 16): 202, Idempotency-Key, the files, the quote's dub form
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _tts(paths: dict[str, Any], schemas: dict[str, Any]) -> None:
    """Voice rendering's audio bodies and synth's 202 (issue 14)."""
    from dragoman.server.hosted.v1_tts import TtsAcceptedResponse

    wav = {"audio/wav": {"schema": {"type": "string", "format": "binary"}}}
    for path, method in (
        ("/api/v1/tts/synth", "post"),
        ("/api/v1/tts/synth/stream", "post"),
        ("/api/v1/tts/jobs/{job_id}/audio", "get"),
    ):
        paths[path][method]["responses"]["200"]["content"] = dict(wav)
    openapi_ranged(paths["/api/v1/tts/jobs/{job_id}/audio"]["get"], wav)  # stored: Range (not the POSTs)
    accepted = TypeAdapter(TtsAcceptedResponse).json_schema(
        ref_template="#/components/schemas/{model}", mode="serialization"
    )
    schemas.update(accepted.pop("$defs", {}))
    from dragoman.server.hosted.v1_tts_voices import openapi_fixups

    openapi_fixups(paths)  # voice clones (issue 14): multipart body, 201
    synth = paths["/api/v1/tts/synth"]["post"]
    synth["responses"]["202"] = {
        "description": "more than 1,500 characters: a tts job; poll poll_url or await tts.done",
        "content": {JSON: {"schema": accepted}},
    }
