"""The engine's value types: frozen dataclasses shared by every layer. Pydantic lives only at the edges."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from dragoman.languages.types import Detection
from dragoman.limits import Provenance, Tier
from dragoman.models.types import PackKind
from dragoman.progress import ProgressCallback

__all__ = [
    "Detection",
    "PackKind",
    "Provenance",
    "ProgressCallback",
    "Tier",
]  # re-exported for the translation layer


@dataclass(frozen=True)
class Protected:
    """A span that must come out of translation unchanged, or as a fixed glossary translation.

    ``source`` is the text as it stands in the input; ``output`` is what the translation must contain in
    its place (equal to ``source`` for placeholders, URLs and code; the glossary translation for terms).
    """

    source: str
    output: str
    kind: Literal["placeholder", "glossary"] = "placeholder"


#: A segment ready for a backend: plain text interleaved with protected spans.
Piece = str | Protected
Pieces = tuple[Piece, ...]


@dataclass(frozen=True)
class GlossaryEntry:
    """Spec 2.7: ``term`` is kept verbatim as ``translation``; optionally scoped to a language pair."""

    term: str
    translation: str
    case_sensitive: bool = False
    source: str | None = None  # FLORES code, or None for every source
    target: str | None = None  # FLORES code, or None for every target

    def applies_to(self, source: str, target: str) -> bool:
        return (self.source is None or self.source == source) and (
            self.target is None or self.target == target
        )


@dataclass(frozen=True)
class Hop:
    """One step of a route: a pack that translates ``source`` into ``target``."""

    pack_id: str
    kind: PackKind
    source: str
    target: str
    quality: int
    speed: int


@dataclass(frozen=True)
class Route:
    hops: tuple[Hop, ...]

    @property
    def quality(self) -> int:
        return min(h.quality for h in self.hops)

    @property
    def speed(self) -> int:
        return min(h.speed for h in self.hops)

    def describe(self) -> list[str]:
        return [f"{h.pack_id}:{h.source}->{h.target}" for h in self.hops]


@dataclass(frozen=True)
class TranslateOptions:
    """What a caller asks of :meth:`~dragoman.translation.engine.Engine.translate`; echoed in each result.

    ``target`` and ``source`` are BCP-47 or FLORES-200 codes (``source`` None: detect each text).
    ``tier`` None takes the engine's default (``DRAGOMAN_TIER``). ``glossary`` is every entry the caller
    wants considered, any scope: the engine applies, per language pair, those scoped to it (at most
    :data:`~dragoman.limits.MAX_GLOSSARY_ENTRIES`, most specific first). The engine owns no glossary of its
    own: the local front doors put the user's glossary file here when a request carries none.
    """

    target: str
    source: str | None = None
    tier: Tier | None = None
    glossary: Sequence[GlossaryEntry] = ()

    def __post_init__(self) -> None:
        # A list (or any other sequence of entries) is kept as a tuple, so options stay hashable; a string
        # is left for the engine's validation to refuse by name.
        if self.glossary is None:
            object.__setattr__(self, "glossary", ())
        elif not isinstance(self.glossary, tuple | str | bytes):
            object.__setattr__(self, "glossary", tuple(self.glossary))


@dataclass(frozen=True)
class BatchOutput:
    """What a backend returns for a batch: one translation per segment, in order, and what it learned.

    ``notes`` counts what the caller should know, by warning code (Apertium: ``unknown_words``, the words
    it left untranslated); codes with nothing to report are left out. The engine sums them per hop and
    turns them into result warnings. ``segment_notes``, when the backend can tell, are the same counts
    segment by segment (one mapping per segment, summing to ``notes``): the engine's batcher then hands
    each caller of a merged call its own notes, instead of running each caller's part again to learn them.
    """

    texts: tuple[str, ...]
    notes: Mapping[str, int] = field(default_factory=dict)
    segment_notes: tuple[Mapping[str, int], ...] | None = None


def add_notes(into: dict[str, int], notes: Mapping[str, int]) -> None:
    """Add ``notes``' counts into ``into``, code by code (a backend's calls, a caller's parts, a hop)."""
    for code, count in notes.items():
        into[code] = into.get(code, 0) + count


@dataclass(frozen=True)
class TranslationResult:
    """Spec 2.6 plus what produced it (``route``, detection) and the options it answers."""

    translation: str
    source: str
    target: str
    provenance: Provenance
    seconds: float
    warnings: tuple[str, ...] = ()
    route: tuple[str, ...] = ()
    tier: Tier = "best"
    detected: Detection | None = None
    #: What was asked, as the engine took it: codes resolved to FLORES, the tier chosen, the entries checked.
    options: TranslateOptions = field(kw_only=True)

    def to_dict(self) -> dict[str, object]:
        """The spec's fields, then ``route`` and ``tier``."""
        return {
            "translation": self.translation,
            "source": self.source,
            "target": self.target,
            "provenance": self.provenance,
            "seconds": round(self.seconds, 6),
            "warnings": list(self.warnings),
            "route": list(self.route),
            "tier": self.tier,
        }
