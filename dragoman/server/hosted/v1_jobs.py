"""Hosted v1 jobs: ``GET /api/v1/jobs`` (the key's list), ``GET``/``DELETE /api/v1/jobs/{job_id}`` (a job;
cancel with refund) and the DOCX/PDF exports of done document jobs, streamed from storage (one byte range
``Range`` gets a 206, past the end a 416, ``HEAD`` the headers alone: :mod:`._ranges`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response

from dragoman.errors import InvalidRequest, JobNotFound
from dragoman.server._http import model_response
from dragoman.server.hosted._common import job_url
from dragoman.server.hosted._gate import authenticate
from dragoman.server.hosted._models import CancelResponse, JobListItem, JobListResponse, JobResponse
from dragoman.server.hosted._ranges import file_response
from dragoman.service import dub_jobs, jobs, subtitle_jobs
from dragoman.service.storage import Storage, safe_name
from dragoman.service.usage import iso_ms

if TYPE_CHECKING:
    from dragoman.service.jobs import JobRecord

EXPORT_TYPES: Mapping[str, str] = {
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pdf": "application/pdf",
}


def job_response(request: Request, job: JobRecord) -> JobResponse:
    url = job_url(request, job.id)
    done = job.status == jobs.DONE
    return JobResponse(
        job_id=job.id,
        status=job.status,  # type: ignore[arg-type]
        sync=job.sync,
        poll_url=url,
        progress_percent=100 if done else job.progress_percent,
        credits=job.credits,
        elapsed_seconds=round(job.elapsed_seconds(), 3),
        title=job.title,
        created_at=iso_ms(job.created_ms),
        result=job.result if done else None,
        error=job.error if job.status == jobs.FAILED else None,
        export_docx=f"{url}/export/docx" if done and "docx" in job.artifacts else None,
        export_pdf=f"{url}/export/pdf" if done and "pdf" in job.artifacts else None,
        batch_id=job.batch_id,
    )


async def get_job(request: Request) -> Response:
    """A job: status, progress, credits, result or error, export URLs (poll every 2-5 s, or use webhooks)."""
    key = await authenticate(request)
    job = await anyio.to_thread.run_sync(
        jobs.get, request.app.state.db, key.key_id, request.path_params["job_id"]
    )
    return model_response(job_response(request, job))


async def cancel_job(request: Request) -> Response:
    """Cancel a queued or running job; its reserved credits are refunded at once."""
    key = await authenticate(request)
    job_id = request.path_params["job_id"]
    refunded = await anyio.to_thread.run_sync(jobs.cancel, request.app.state.db, key.key_id, job_id)
    # a subtitle batch's engine job canceled: its children fail (refunded) now, not at the next poll
    await anyio.to_thread.run_sync(subtitle_jobs.reconcile, request.app.state.db, [job_id])
    await anyio.to_thread.run_sync(dub_jobs.reconcile, request.app.state.db, [job_id])  # a dub's, likewise
    return model_response(CancelResponse(job_id=job_id, credits_refunded=refunded))


def _int_query(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise InvalidRequest(f"{name} must be a whole number from {low} to {high}; got {raw[:40]!r}")
    return int(raw)


async def list_jobs_v1(request: Request) -> Response:
    """The key's jobs, most recent first (50 by default, at most 200), and their total."""
    key = await authenticate(request)
    unknown = sorted(set(request.query_params) - {"limit", "offset"})
    if unknown:
        raise InvalidRequest(f"unknown query parameter {unknown[0][:40]!r}; allowed: limit, offset")
    limit = _int_query(request, "limit", jobs.LIST_DEFAULT, 1, jobs.LIST_MAX)
    offset = _int_query(request, "offset", 0, 0, 10**9)
    items, total = await anyio.to_thread.run_sync(
        jobs.list_jobs, request.app.state.db, key.key_id, limit, offset
    )
    return model_response(
        JobListResponse(
            jobs=[
                JobListItem(
                    job_id=j.id,
                    status=j.status,  # type: ignore[arg-type]
                    title=j.title,
                    credits=j.credits,
                    created_at=iso_ms(j.created_ms),
                )
                for j in items
            ],
            total=total,
            limit=limit,
            offset=offset,
        )
    )


async def _export(request: Request, fmt: Literal["docx", "pdf"]) -> Response:
    key = await authenticate(request)
    state = request.app.state
    job_id = request.path_params["job_id"]
    job = await anyio.to_thread.run_sync(jobs.get, state.db, key.key_id, job_id)
    stored = job.artifacts.get(fmt)
    if job.status != jobs.DONE or not stored:
        why = "has no document source" if "upload" not in job.params else f"is {job.status}"
        raise JobNotFound(
            f"no {fmt} export of job {job_id}: the job {why} (exports exist for done document jobs)"
        )
    stem = Path(str(job.params.get("filename") or "document")).stem or "document"
    name = f"{safe_name(stem, default='document')}.{job.params.get('tgt', 'translated')}.{fmt}"
    storage: Storage = state.storage
    try:
        size = await anyio.to_thread.run_sync(storage.size, stored)
    except FileNotFoundError:
        raise JobNotFound(f"the {fmt} export of job {job_id} is no longer kept (results: 30 days)") from None
    return file_response(  # one byte range gets a 206, past the end a 416 (see _ranges, as the dub files)
        request,
        storage,
        stored,
        size,
        media_type=EXPORT_TYPES[fmt],
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


async def export_docx(request: Request) -> Response:
    """The formatted DOCX export of a done document job."""
    return await _export(request, "docx")


async def export_pdf(request: Request) -> Response:
    """The PDF export of a done document job."""
    return await _export(request, "pdf")
