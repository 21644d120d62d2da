"""The values of a dub (issue 16): what is asked (:class:`DubOptions`), what each spoken line became
(:class:`DubLine`), the files written (:class:`DubOutputs`) and the whole result (:class:`DubResult`).

Times are float seconds from the start of the media."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from dragoman.errors import InvalidRequest
from dragoman.limits import Provenance, Tier
from dragoman.translation.types import GlossaryEntry

VoiceMode = Literal["preset", "match", "clone"]
VOICE_MODES: tuple[str, ...] = get_args(VoiceMode)

#: Stage names, in order, as ``DubResult.stage_seconds`` and the progress messages name them.
STAGES: tuple[str, ...] = ("probe", "recognise", "translate", "voices", "synthesise", "fit", "mix", "mux")


@dataclass(frozen=True)
class DubOptions:
    """What one dub asks for.

    - ``target``: the language spoken in the output (BCP-47 or FLORES-200); ``source``: the spoken
      language, ``"auto"`` to detect it.
    - ``voice``: the persona for ``preset`` mode (and the fallback for a line whose speaker's pitch cannot be
      measured in ``match`` mode); ``voice_mode``: ``preset`` (one voice for every line), ``match`` (each line
      voiced by a persona of the original speaker's gender, speakers told apart by pitch, the pitch moved
      toward the speaker's), ``clone`` (``clone_id``'s matched voice for every line).
    - ``tier``, ``glossary``: as for any translation.
    - ``subtitles``: the user's own SRT/VTT in the source language, used instead of recognition.
    - ``duck_db``: the level of the original audio under a dub line (dB; the background stays between lines at
      its own level); ``loudness_lufs``: the integrated loudness of the output audio (EBU R128; −16 LUFS is
      the usual target for online video), peaks limited to −1 dBFS.
    - ``natural_speed``: the synthesis speeds that still sound natural (a line is rendered faster, up to the
      upper bound, to fit its slot; one much shorter than its slot is rendered slower, down to the lower);
      ``max_stretch``: how much further a line may be compressed by time-stretching (pitch kept) before it is
      left to overlap the next one.
    - ``keep_original``: the output video keeps the original audio as a second, non-default track."""

    target: str
    source: str = "auto"
    voice: str = "aria"
    voice_mode: VoiceMode = "preset"
    clone_id: str | None = None
    tier: Tier | None = None
    glossary: tuple[GlossaryEntry, ...] = ()
    subtitles: Path | None = None
    duck_db: float = -15.0
    loudness_lufs: float = -16.0
    natural_speed: tuple[float, float] = (0.9, 1.2)
    max_stretch: float = 1.5
    keep_original: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.target, str) or not self.target.strip():
            raise InvalidRequest("name the target language to dub into, such as 'es'")
        if self.voice_mode not in VOICE_MODES:
            raise InvalidRequest(
                f"unknown voice mode {self.voice_mode!r}; the modes are {', '.join(VOICE_MODES)}"
            )
        if self.voice_mode == "clone" and not self.clone_id:
            raise InvalidRequest("voice mode 'clone' needs a clone id")
        if self.voice_mode != "clone" and self.clone_id:
            raise InvalidRequest("a clone id is used with voice mode 'clone' only")
        if not _finite(self.duck_db) or not -60.0 <= self.duck_db <= 0.0:
            raise InvalidRequest(f"duck_db must be between -60 and 0 dB, got {self.duck_db!r}")
        if not _finite(self.loudness_lufs) or not -40.0 <= self.loudness_lufs <= -5.0:
            raise InvalidRequest(f"loudness_lufs must be between -40 and -5, got {self.loudness_lufs!r}")
        low, high = self.natural_speed
        if not (_finite(low) and _finite(high) and 0.5 <= low <= 1.0 <= high <= 1.8):
            raise InvalidRequest("natural_speed must be (low, high) with 0.5 <= low <= 1 <= high <= 1.8")
        if not _finite(self.max_stretch) or not 1.0 <= self.max_stretch <= 3.0:
            raise InvalidRequest(f"max_stretch must be between 1 and 3, got {self.max_stretch!r}")
        if self.subtitles is not None:
            object.__setattr__(self, "subtitles", Path(self.subtitles))
        object.__setattr__(self, "glossary", tuple(self.glossary))


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class DubLine:
    """One spoken line: its slot in the original (``start``..``end``: a sentence, its cues merged), the
    source text and its translation, the voice that spoke it (persona name; ``gender`` and ``f0`` (Hz) of the
    original speaker in ``match`` mode), the synthesis ``speed``, the time-stretch compression applied after
    it (1.0: none), where the dub line was placed (``placed_start``..``placed_end``), and whether it had to
    be compressed beyond the natural speed range (``beyond_natural``) or runs into the next line
    (``overlaps``)."""

    index: int
    start: float
    end: float
    source_text: str
    text: str
    voice: str
    gender: str | None
    f0: float | None
    speed: float
    stretch: float
    placed_start: float
    placed_end: float
    beyond_natural: bool
    overlaps: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "index": self.index,
            "start": round(self.start, 3),
            "end": round(self.end, 3),
            "source_text": self.source_text,
            "text": self.text,
            "voice": self.voice,
            "gender": self.gender,
            "f0": None if self.f0 is None else round(self.f0, 1),
            "speed": round(self.speed, 3),
            "stretch": round(self.stretch, 3),
            "placed_start": round(self.placed_start, 3),
            "placed_end": round(self.placed_end, 3),
            "beyond_natural": self.beyond_natural,
            "overlaps": self.overlaps,
        }


@dataclass(frozen=True)
class DubOutputs:
    """The files written: the dubbed video (None for an audio-only input), the dubbed audio on its own, and
    the subtitles keyed ``"srt:<lang>"``, ``"vtt:<lang>"``, ``"txt:<lang>"`` (both languages) and
    ``"bilingual_srt"``."""

    video: Path | None
    audio: Path
    subtitles: Mapping[str, Path] = field(default_factory=dict)

    def paths(self) -> tuple[Path, ...]:
        found = [self.video] if self.video is not None else []
        return (*found, self.audio, *self.subtitles.values())

    def to_dict(self) -> dict[str, object]:
        return {
            "video": None if self.video is None else str(self.video),
            "audio": str(self.audio),
            "subtitles": {k: str(v) for k, v in self.subtitles.items()},
        }


@dataclass(frozen=True)
class DubResult:
    """What a dub did: the spoken language (and Whisper's confidence in it; 1.0 when given), the target, the
    media's duration, every line, the files, the seconds each stage took (:data:`STAGES`), warnings (lines
    compressed beyond the natural range or overlapping, no speech found, ...)."""

    source_language: str
    language_probability: float
    target: str
    duration: float
    lines: tuple[DubLine, ...]
    outputs: DubOutputs
    stage_seconds: Mapping[str, float]
    warnings: tuple[str, ...] = ()
    provenance: Provenance = "on-device"

    @property
    def share_natural(self) -> float:
        """The share of lines that fit without compression beyond the natural range (1.0 with no lines)."""
        if not self.lines:
            return 1.0
        return sum(not line.beyond_natural for line in self.lines) / len(self.lines)

    def to_dict(self) -> dict[str, object]:
        return {
            "source_language": self.source_language,
            "language_probability": round(self.language_probability, 3),
            "target": self.target,
            "duration": round(self.duration, 3),
            "lines": [line.to_dict() for line in self.lines],
            "outputs": self.outputs.to_dict(),
            "stage_seconds": {k: round(v, 3) for k, v in self.stage_seconds.items()},
            "share_natural": round(self.share_natural, 3),
            "warnings": list(self.warnings),
            "provenance": self.provenance,
        }
