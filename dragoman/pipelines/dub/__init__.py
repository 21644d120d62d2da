"""Dubbing (issue 16): a video in one language in, the same video speaking another out.

:func:`dub_file` (one target) and :func:`dub_batch` (several, one recognition) in
:mod:`~dragoman.pipelines.dub.pipeline`; the values in :mod:`~dragoman.pipelines.dub.types`; lines
(:mod:`.lines`), voices (:mod:`.voices`), fitting (:mod:`.fit`) and the mix (:mod:`.mix`) each on their
own."""

from __future__ import annotations

from dragoman.pipelines.dub.pipeline import SourceTrack, dub_batch, dub_file, planned_files
from dragoman.pipelines.dub.types import (
    STAGES,
    VOICE_MODES,
    DubLine,
    DubOptions,
    DubOutputs,
    DubResult,
    VoiceMode,
)

__all__ = [
    "STAGES",
    "VOICE_MODES",
    "DubLine",
    "DubOptions",
    "DubOutputs",
    "DubResult",
    "SourceTrack",
    "VoiceMode",
    "dub_batch",
    "dub_file",
    "planned_files",
]
