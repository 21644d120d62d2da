"""The daemon's own wire types: what ``GET /health`` answers. The shared ones (spec 2.5, 2.6, 2.7, the
translate request, the error body) are in :mod:`dragoman.server._wire`."""

from __future__ import annotations

from pydantic import BaseModel, Field

from dragoman.limits import Provenance
from dragoman.server._wire import BatchingInfo


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
    batching: BatchingInfo | None = Field(
        default=None, description="the engine's dynamic batcher (null for an engine without one)"
    )
    auth: bool = Field(description="true when SERVICE_SERVE_TOKEN is set (bearer token required)")


class HealthResponse(BaseModel):
    ok: bool
    engine: EngineInfo
