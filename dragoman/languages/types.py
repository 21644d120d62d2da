"""The language layer's value types: a catalogue row and what detection found."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Language:
    """A row of spec 2.5: FLORES-200 code, BCP-47 code, English name, right-to-left flag."""

    flores: str
    bcp47: str
    name: str
    rtl: bool


@dataclass(frozen=True)
class Detection:
    """What language identification found. ``flores`` is None when the answer is uncertain."""

    flores: str | None
    bcp47: str | None
    name: str | None
    confidence: float
    label: str | None  # the model's own top label (an ISO 639 code), even when uncertain
    reason: str | None = None  # why flores is None: "too short", "low confidence", "mixed"
