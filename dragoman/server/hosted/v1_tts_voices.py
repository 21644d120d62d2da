"""Hosted v1 voice matches ("clones"), word timings and word edits (spec 4.2 and 8; issue 14).

A clone is a **voice match**, not an identity clone: the nearest of the ten voices adapted to the reference's
pitch and formants (:mod:`dragoman.speech.tts.clones` says how, and what the similarity figure means).

* ``POST /api/v1/tts/voices/clones`` (multipart: ``file`` the reference, 3–20 s of speech after silence
  trimming; ``name``; ``description`` optional): 201 with the clone (:class:`CloneResponse`; ``clone_id`` is
  the ``cloneId`` of ``POST /api/v1/tts/synth``). 415 for a file that is not audio, 400 for a clip that is
  too short, too long (the measured duration is in the message), silent or too noisy; 409
  ``clone_limit_reached`` for a 26th clone of the key. Free (spec 8: credits only when rendering).
* ``GET /api/v1/tts/voices/clones``: the key's clones; ``GET …/clones/{clone_id}``: one;
  ``DELETE …/clones/{clone_id}``: ``{"clone_id", "deleted": true}``, the clone and its stored clip removed.
* ``GET`` or ``POST /api/v1/tts/jobs/{job_id}/words``: the done tts job's word timings
  (:class:`WordsResponse`: ``words`` = ``[{index, word, start, end}]``, seconds into the audio), aligned on
  the first request and kept.
* ``POST /api/v1/tts/jobs/{job_id}/edit`` (:class:`EditRequest`: ``{"edits": [{"index": 3, "word":
  "today", "pitch_st": 2, "speed": 0.8, "gain_db": 3, "pause_ms": 200}]}``; ``word`` optional, checked
  when given; ranges: pitch_st −12..12 semitones, speed 0.5..2 (> 1 faster), gain_db −24..12, pause_ms
  0..3000 of silence after the word): only the edited words' spans are re-processed and spliced in; the
  job's audio (``audio_url``) becomes the edited audio and the answer (:class:`EditResponse`) carries the new
  timings. Free within 12 hours of the render (``editable_until``), 410 ``edit_window_closed`` after.
  Edits of one job sent at the same time are applied one after the other, each on the audio the one before
  left (edits are relative: two ``gain_db: 3`` make a word 6 dB louder), whichever API process takes them;
  409 ``edit_conflict`` (nothing applied: retry) only when other edits kept landing first
  (:mod:`dragoman.service.tts_voices` says how).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import Response

from dragoman.errors import (
    AudioFormatError,
    BodyTooLarge,
    CloneLimitReached,
    CloneNotFound,
    EditConflict,
    EditWindowClosed,
    FileTooLarge,
    IdempotencyConflict,
    IdempotencyMismatch,
    InvalidRequest,
    JobNotFound,
    PlanWithoutApi,
    RateLimited,
    Unauthorized,
)
from dragoman.server._http import ApiRoute, model_response
from dragoman.server.hosted._common import read_limited, read_multipart
from dragoman.server.hosted._gate import Reservation, authenticate, idempotent
from dragoman.server.hosted._models import parse_model
from dragoman.server.hosted.v1_tts import _tts_job
from dragoman.service import tts_voices
from dragoman.service.usage import iso_ms

if TYPE_CHECKING:
    from dragoman.server.hosted._common import Upload
    from dragoman.service.accounts import KeyInfo
    from dragoman.speech.tts.clones import Clone

MAX_EDIT_JSON_BYTES = 256 * 1024
_EDIT_EXAMPLE = '{"edits": [{"index": 3, "pitch_st": 2, "speed": 0.8, "gain_db": 3, "pause_ms": 200}]}'


class CloneResponse(BaseModel):
    """A voice match: the nearest voice adapted to the reference (not an identity clone)."""

    clone_id: str = Field(description="UUID; the cloneId of POST /api/v1/tts/synth")
    name: str
    description: str
    gender: str = Field(description="female, male or ambiguous (median F0 < 150 Hz male, > 165 Hz female)")
    f0_median: float = Field(description="the reference's median F0 in Hz")
    persona: str = Field(description="the voice matched (one of the ten)")
    pitch_st: float = Field(description="semitones the voice is moved toward the reference")
    formant: float = Field(description="formant scale applied (0.85-1.18)")
    similarity: float = Field(description="cosine similarity of mean MFCCs, reference vs the adapted voice")
    similarity_unmatched: float = Field(description="the same figure for the voice before adaptation")
    reference_seconds: float = Field(description="speech in the reference after silence trimming")
    created_at: str
    method: str


class CloneListResponse(BaseModel):
    clones: list[CloneResponse]
    limit: int = Field(description="clones a key may keep (25)")


class CloneDeletedResponse(BaseModel):
    clone_id: str
    deleted: bool = Field(description="true: the clone and its reference clip are gone")


class WordTimingModel(BaseModel):
    index: int
    word: str
    start: float = Field(description="seconds into the audio")
    end: float


class WordsResponse(BaseModel):
    """A tts job's word timings (aligned against its text on the first request)."""

    job_id: str
    words: list[WordTimingModel]
    editable_until: str = Field(description="edits are free until then (12 hours after the render)")


class WordEditModel(BaseModel):
    model_config = ConfigDict(strict=False, extra="forbid")

    index: int = Field(description="the word's index in /words")
    word: str | None = Field(None, description="the word, checked against /words when given")
    pitch_st: float = Field(0.0, description="-12 to 12 semitones")
    speed: float = Field(1.0, description="0.5 to 2 (above 1 faster)")
    gain_db: float = Field(0.0, description="-24 to 12 dB")
    pause_ms: float = Field(0.0, description="0 to 3000 ms of silence after the word")


class EditRequest(BaseModel):
    """Per-word edits of a tts job's audio."""

    model_config = ConfigDict(strict=False, extra="forbid")

    edits: list[WordEditModel] = Field(min_length=1, max_length=1000)


class EditResponse(BaseModel):
    job_id: str
    edits_applied: int
    duration_seconds: float
    words: list[WordTimingModel]
    credits: int = Field(description="0: edits are free within the word editor's 12 hours")
    editable_until: str
    audio_url: str


def _clone_response(clone: Clone) -> CloneResponse:
    return CloneResponse(
        clone_id=clone.id,
        name=clone.name,
        description=clone.description,
        gender=clone.gender,
        f0_median=clone.f0_median,
        persona=clone.persona,
        pitch_st=clone.pitch_st,
        formant=clone.formant,
        similarity=clone.similarity,
        similarity_unmatched=clone.similarity_unmatched,
        reference_seconds=clone.reference_seconds,
        created_at=iso_ms(int(clone.created_at * 1000)),
        method=clone.method,
    )


# ----- clones -------------------------------------------------------------------------------------------
def _create(request: Request, key: KeyInfo, upload: Upload) -> Response:
    from dragoman.media.audio import wav_bytes
    from dragoman.speech.tts.clones import MAX_CLIP_BYTES, check_name, make_clone

    state = request.app.state
    name, description = check_name(upload.fields.get("name", ""), upload.fields.get("description", ""))
    if tts_voices.count_clones(state.db, key.key_id) >= 25:  # refused before the analysis
        raise CloneLimitReached("this key has 25 voice clones, the most there may be; delete one first")
    if upload.path.stat().st_size > MAX_CLIP_BYTES:
        raise FileTooLarge(f"the reference clip is over {MAX_CLIP_BYTES:,} bytes")
    data = upload.path.read_bytes()
    clone, clip = make_clone(data, name, description, state.synthesizer)
    tts_voices.add_clone(state.db, state.storage, key.key_id, clone, wav_bytes(clip))
    return model_response(_clone_response(clone), 201)


async def create_clone(request: Request) -> Response:
    """Make a voice match from a reference clip (multipart file, name, description)."""
    key = await authenticate(request)
    if not request.headers.get("content-type", "").lower().startswith("multipart/form-data"):
        raise InvalidRequest("send multipart/form-data with a 'file' part (the reference audio) and a 'name'")
    upload, body_print = await read_multipart(request, request.app.state.tmp_dir)
    try:

        async def run(_reservation: Reservation | None) -> Response:
            return await anyio.to_thread.run_sync(_create, request, key, upload)

        return await idempotent(request, key, body_print, run)
    finally:
        upload.close()


async def list_clones(request: Request) -> Response:
    """The key's voice clones."""
    key = await authenticate(request)
    found = await anyio.to_thread.run_sync(tts_voices.list_clones, request.app.state.db, key.key_id)
    return model_response(CloneListResponse(clones=[_clone_response(c) for c in found], limit=25))


async def get_clone(request: Request) -> Response:
    """One voice clone."""
    key = await authenticate(request)
    clone_id = request.path_params["clone_id"]
    clone = await anyio.to_thread.run_sync(tts_voices.get_clone, request.app.state.db, key.key_id, clone_id)
    return model_response(_clone_response(clone))


async def delete_clone(request: Request) -> Response:
    """Delete a voice clone and its stored reference clip."""
    key = await authenticate(request)
    state = request.app.state
    clone_id = request.path_params["clone_id"]
    await anyio.to_thread.run_sync(tts_voices.delete_clone, state.db, state.storage, key.key_id, clone_id)
    return model_response(CloneDeletedResponse(clone_id=clone_id, deleted=True))


# ----- words and edits --------------------------------------------------------------------------------------
def _words(request: Request, key: KeyInfo) -> WordsResponse:
    job = _tts_job(request, key)
    words = tts_voices.words_of(job, request.app.state.storage, request.app.state.db)
    return WordsResponse(
        job_id=job.id,
        words=[WordTimingModel.model_validate(w) for w in words],
        editable_until=iso_ms(tts_voices.editable_until_ms(job)),
    )


async def job_words(request: Request) -> Response:
    """A tts job's word timings (aligned on the first request)."""
    key = await authenticate(request)
    return model_response(await anyio.to_thread.run_sync(_words, request, key))


async def job_words_post(request: Request) -> Response:
    """A tts job's word timings (aligned on the first request; POST as GET)."""
    return await job_words(request)


def _edit(request: Request, key: KeyInfo, body: dict[str, Any]) -> EditResponse:
    from dragoman.server.hosted._common import base_url
    from dragoman.service.tts_jobs import audio_url

    job = _tts_job(request, key)
    done = tts_voices.edit_job(job, request.app.state.storage, body, db=request.app.state.db)
    return EditResponse(
        job_id=job.id,
        edits_applied=done["edits_applied"],
        duration_seconds=done["duration_seconds"],
        words=[WordTimingModel.model_validate(w) for w in done["words"]],
        credits=0,
        editable_until=iso_ms(done["editable_until_ms"]),
        audio_url=audio_url(base_url(request), job.id),
    )


async def edit_job(request: Request) -> Response:
    """Edit words of a tts job's audio (pitch, speed, gain, pause after); free within 12 hours."""
    key = await authenticate(request)
    raw = await read_limited(request, MAX_EDIT_JSON_BYTES)
    parsed = parse_model(EditRequest, raw, _EDIT_EXAMPLE)
    body = {"edits": [e.model_dump(exclude_none=True) for e in parsed.edits]}
    return model_response(await anyio.to_thread.run_sync(_edit, request, key, body))


def openapi_fixups(paths: dict[str, Any]) -> None:
    """The clone upload's multipart body and its 201 in the OpenAPI document (called by ``._openapi``)."""
    create = paths["/api/v1/tts/voices/clones"]["post"]
    create["requestBody"] = {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file", "name"],
                    "properties": {
                        "file": {
                            "type": "string",
                            "format": "binary",
                            "description": "reference audio: 3 to 20 s of speech after silence trimming",
                        },
                        "name": {"type": "string", "maxLength": 100},
                        "description": {"type": "string", "maxLength": 1000},
                    },
                }
            }
        },
    }
    if "200" in create["responses"]:
        create["responses"]["201"] = create["responses"].pop("200")


_AUTH = (Unauthorized, PlanWithoutApi, RateLimited)

#: The routes of this module, added to the hosted app's table (:data:`dragoman.server.hosted.app.ROUTES`).
ROUTES = [
    ApiRoute(
        "/api/v1/tts/voices/clones",
        create_clone,
        method="POST",
        response=CloneResponse,
        response_description="201: the voice match (clone_id is the cloneId of /api/v1/tts/synth)",
        errors=(
            *_AUTH,
            IdempotencyConflict,
            IdempotencyMismatch,
            InvalidRequest,
            AudioFormatError,
            FileTooLarge,
            CloneLimitReached,
        ),
    ),
    ApiRoute(
        "/api/v1/tts/voices/clones",
        list_clones,
        method="GET",
        response=CloneListResponse,
        response_description="the key's voice clones",
        errors=_AUTH,
    ),
    ApiRoute(
        "/api/v1/tts/voices/clones/{clone_id}",
        get_clone,
        method="GET",
        response=CloneResponse,
        response_description="the voice clone",
        errors=(*_AUTH, CloneNotFound),
    ),
    ApiRoute(
        "/api/v1/tts/voices/clones/{clone_id}",
        delete_clone,
        method="DELETE",
        response=CloneDeletedResponse,
        response_description="the clone and its reference clip are deleted",
        errors=(*_AUTH, CloneNotFound),
    ),
    ApiRoute(
        "/api/v1/tts/jobs/{job_id}/words",
        job_words,
        method="GET",
        response=WordsResponse,
        response_description="the job's word timings",
        errors=(*_AUTH, JobNotFound),
    ),
    ApiRoute(
        "/api/v1/tts/jobs/{job_id}/words",
        job_words_post,
        method="POST",
        response=WordsResponse,
        response_description="the job's word timings",
        errors=(*_AUTH, JobNotFound),
    ),
    ApiRoute(
        "/api/v1/tts/jobs/{job_id}/edit",
        edit_job,
        method="POST",
        request=EditRequest,
        response=EditResponse,
        response_description="the edited audio's new word timings (audio_url serves the edited audio)",
        errors=(*_AUTH, JobNotFound, InvalidRequest, BodyTooLarge, EditWindowClosed, EditConflict),
    ),
]

__all__ = [
    "ROUTES",
    "CloneDeletedResponse",
    "CloneListResponse",
    "CloneResponse",
    "EditRequest",
    "EditResponse",
    "WordsResponse",
    "create_clone",
    "delete_clone",
    "edit_job",
    "get_clone",
    "job_words",
    "job_words_post",
    "list_clones",
    "openapi_fixups",
]
