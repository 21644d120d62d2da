"""The model store's value types: what kind a pack is, and an installed pack as status shows it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

PackKind = Literal["argos", "multilingual", "apertium"]


@dataclass(frozen=True)
class PackInfo:
    """An installed pack as ``engine_status`` shows it."""

    id: str
    kind: PackKind
    languages: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...]
    path: str
    size_bytes: int
    version: str
    license: str
    quality: int
    speed: int
    loaded: bool = False
    extra: dict[str, str] = field(default_factory=dict)
