"""The speech synthesis options and result, and the emotion object (issue 14).

One options object per render (:class:`SynthesisOptions`), echoed in the result (:class:`SynthesisResult`).
Every bound is checked when the object is made, so a front door that builds one from a request answers 400
(:class:`~dragoman.errors.InvalidRequest`) for a value out of range, with a message naming the range.

The emotion object (:class:`Emotion`) is four numbers, each relative to the voice's neutral delivery:

========================  ========  ============  ==================================================
field                     neutral   range         what it moves
========================  ========  ============  ==================================================
``speed_ratio``           1.0       0.5 – 2.0     speaking rate (multiplies ``speed`` and the voice's pace)
``pitch_delta_st``        0.0       −12 – +12     mean pitch, in semitones (added to the voice's offset)
``energy_ratio``          1.0       0.25 – 4.0    loudness, as an amplitude ratio (×2 = +6 dB)
``pause_scale``           1.0       0.0 – 3.0     pauses between sentences (0 runs them together)
========================  ========  ============  ==================================================

A preset (:data:`EMOTION_PRESETS`) is such an object plus a voice quality (``style``) the numbers cannot
express (a whisper's noise excitation, a shout's brighter spectral tilt). When a request gives both a preset
and an object, the object refines the preset: ratios multiply, the pitch delta adds, and the sum is held
inside the ranges above (:meth:`Emotion.refine`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal, get_args

from dragoman.errors import InvalidRequest
from dragoman.limits import TTS_SPEED_MAX, TTS_SPEED_MIN

if TYPE_CHECKING:
    from dragoman.media.audio import Audio
    from dragoman.speech.tts.engines import WordTiming

# ----- the emotion object's ranges (documented above; 400 outside) --------------------------------------
SPEED_RATIO_RANGE: Final = (0.5, 2.0)
PITCH_DELTA_ST_RANGE: Final = (-12.0, 12.0)
ENERGY_RATIO_RANGE: Final = (0.25, 4.0)
PAUSE_SCALE_RANGE: Final = (0.0, 3.0)

#: The ten voices: five female, then five male.
VoiceName = Literal["aria", "nova", "lyra", "iris", "maya", "marcus", "atlas", "felix", "orion", "kai"]
VOICE_NAMES: Final[tuple[str, ...]] = get_args(VoiceName)

#: The seven emotion presets.
EmotionPreset = Literal["whisper", "shout", "sad", "urgent", "excited", "warm", "calm"]
EMOTION_PRESET_NAMES: Final[tuple[str, ...]] = get_args(EmotionPreset)

#: A voice quality applied after the engine: ``neutral`` (none), ``whisper`` (the voiced excitation replaced
#: by noise shaped like the speech's spectrum: no pitch left), ``bright`` (high frequencies lifted, a shout's
#: tilt), ``dark`` (high frequencies softened, a warm or sad delivery).
Style = Literal["neutral", "whisper", "bright", "dark"]


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidRequest(f"{name} must be a number, not {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number):
        raise InvalidRequest(f"{name} must be a finite number, not {value!r}")
    return number


def _in_range(name: str, value: object, bounds: tuple[float, float]) -> float:
    number = _number(name, value)
    low, high = bounds
    if not low <= number <= high:
        raise InvalidRequest(f"{name} must be between {low:g} and {high:g}, not {number:g}")
    return number


def _clamp(value: float, bounds: tuple[float, float]) -> float:
    return min(max(value, bounds[0]), bounds[1])


@dataclass(frozen=True)
class Emotion:
    """How a render departs from the voice's neutral delivery; ranges in the module docstring."""

    speed_ratio: float = 1.0
    pitch_delta_st: float = 0.0
    energy_ratio: float = 1.0
    pause_scale: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "speed_ratio", _in_range("speed_ratio", self.speed_ratio, SPEED_RATIO_RANGE))
        object.__setattr__(
            self, "pitch_delta_st", _in_range("pitch_delta_st", self.pitch_delta_st, PITCH_DELTA_ST_RANGE)
        )
        object.__setattr__(
            self, "energy_ratio", _in_range("energy_ratio", self.energy_ratio, ENERGY_RATIO_RANGE)
        )
        object.__setattr__(self, "pause_scale", _in_range("pause_scale", self.pause_scale, PAUSE_SCALE_RANGE))

    def refine(self, other: Emotion) -> Emotion:
        """This emotion (a preset's) refined by ``other``: ratios multiply, pitch adds, held in range."""
        return Emotion(
            speed_ratio=_clamp(self.speed_ratio * other.speed_ratio, SPEED_RATIO_RANGE),
            pitch_delta_st=_clamp(self.pitch_delta_st + other.pitch_delta_st, PITCH_DELTA_ST_RANGE),
            energy_ratio=_clamp(self.energy_ratio * other.energy_ratio, ENERGY_RATIO_RANGE),
            pause_scale=_clamp(self.pause_scale * other.pause_scale, PAUSE_SCALE_RANGE),
        )

    @classmethod
    def from_mapping(cls, data: object) -> Emotion:
        """An emotion from a request's JSON object; unknown keys and wrong types are a 400."""
        if not isinstance(data, dict):
            raise InvalidRequest(
                "emotion must be an object with speed_ratio, pitch_delta_st, energy_ratio, pause_scale"
            )
        known = {"speed_ratio", "pitch_delta_st", "energy_ratio", "pause_scale"}
        unknown = sorted(str(k) for k in data if k not in known)
        if unknown:
            raise InvalidRequest(f"emotion has unknown fields {unknown}; known: {sorted(known)}")
        return cls(**{str(k): v for k, v in data.items()})

    def to_dict(self) -> dict[str, float]:
        return {
            "speed_ratio": self.speed_ratio,
            "pitch_delta_st": self.pitch_delta_st,
            "energy_ratio": self.energy_ratio,
            "pause_scale": self.pause_scale,
        }


NEUTRAL: Final = Emotion()


@dataclass(frozen=True)
class EmotionStyle:
    """A preset: the emotion's numbers and the voice quality (``style``) applied after the engine."""

    emotion: Emotion
    style: Style = "neutral"


#: The seven presets. Each moves rate, pitch, energy and pauses in the direction its name says; the tests
#: (tests/speech/test_emotion.py) measure F0, duration and energy against neutral.
EMOTION_PRESETS: Final[dict[str, EmotionStyle]] = {
    "whisper": EmotionStyle(Emotion(0.92, 0.0, 0.35, 1.3), "whisper"),
    "shout": EmotionStyle(Emotion(1.05, 4.0, 2.5, 0.8), "bright"),
    "sad": EmotionStyle(Emotion(0.8, -2.5, 0.7, 1.6), "dark"),
    "urgent": EmotionStyle(Emotion(1.3, 1.5, 1.3, 0.45), "neutral"),
    "excited": EmotionStyle(Emotion(1.15, 3.0, 1.4, 0.75), "bright"),
    "warm": EmotionStyle(Emotion(0.93, -1.0, 1.0, 1.15), "dark"),
    "calm": EmotionStyle(Emotion(0.85, -1.5, 0.8, 1.45), "neutral"),
}


@dataclass(frozen=True)
class SynthesisOptions:
    """What one render asks for. ``voice`` is one of the ten names; ``language`` a two-letter code (checked
    against the served languages when the voice is resolved); ``speed`` 0.5–1.8; ``emotion_preset`` one of the
    seven; ``emotion`` the object refining it; ``studio`` the studio render (48 kHz, −16 LUFS, longer pauses
    and breaths); ``clone_id`` is echoed: a clone (a voice match) is applied by
    :func:`~dragoman.speech.tts.clones.synthesize_with_clone`, which renders its persona through the
    synthesizer."""

    voice: str
    language: str
    speed: float = 1.0
    emotion_preset: str | None = None
    emotion: Emotion | None = None
    studio: bool = False
    clone_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.voice, str) or self.voice.strip().lower() not in VOICE_NAMES:
            raise InvalidRequest(f"unknown voice {self.voice!r}; the voices are {', '.join(VOICE_NAMES)}")
        object.__setattr__(self, "voice", self.voice.strip().lower())
        if not isinstance(self.language, str) or not self.language.strip():
            raise InvalidRequest("language must be a two-letter code such as 'en'")
        object.__setattr__(self, "language", self.language.strip().lower().replace("_", "-"))
        object.__setattr__(self, "speed", _in_range("speed", self.speed, (TTS_SPEED_MIN, TTS_SPEED_MAX)))
        if self.emotion_preset is not None:
            preset = str(self.emotion_preset).strip().lower()
            if preset not in EMOTION_PRESETS:
                names = ", ".join(EMOTION_PRESET_NAMES)
                raise InvalidRequest(f"unknown emotion {self.emotion_preset!r}; the presets are {names}")
            object.__setattr__(self, "emotion_preset", preset)
        if self.emotion is not None and not isinstance(self.emotion, Emotion):
            object.__setattr__(self, "emotion", Emotion.from_mapping(self.emotion))
        if not isinstance(self.studio, bool):
            raise InvalidRequest("studio must be true or false")

    @property
    def effective(self) -> EmotionStyle:
        """The preset (or neutral) refined by the emotion object."""
        base = EMOTION_PRESETS[self.emotion_preset] if self.emotion_preset else EmotionStyle(NEUTRAL)
        if self.emotion is None:
            return base
        return EmotionStyle(base.emotion.refine(self.emotion), base.style)

    def to_dict(self) -> dict[str, object]:
        return {
            "voice": self.voice,
            "language": self.language,
            "speed": self.speed,
            "emotion_preset": self.emotion_preset,
            "emotion": self.emotion.to_dict() if self.emotion else None,
            "studio": self.studio,
            "clone_id": self.clone_id,
        }


@dataclass(frozen=True)
class SynthesisResult:
    """One render: the audio, which voice, engine and engine voice made it, in which language, the word
    timings where the engine gave them (offsets into ``audio``), the options echoed, and the seconds it
    took."""

    audio: Audio
    voice: str
    engine: str
    engine_voice: str
    language: str
    words: tuple[WordTiming, ...] | None
    options: SynthesisOptions
    seconds: float
    sentences: int = 1
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, object]:
        return {
            "voice": self.voice,
            "engine": self.engine,
            "engine_voice": self.engine_voice,
            "language": self.language,
            "duration": self.audio.duration,
            "sample_rate": self.audio.rate,
            "sentences": self.sentences,
            "seconds": self.seconds,
            "options": self.options.to_dict(),
            "words": None
            if self.words is None
            else [{"word": w.word, "start": w.start, "end": w.end} for w in self.words],
            "notes": list(self.notes),
        }
