"""What speech recognition answers (issue 15): frozen values, timestamps in float seconds of the audio.

A :class:`Transcript` holds the language heard (or given), the :class:`Segment` s faster-whisper decoded, each
with its :class:`Word` s (the cue builder of :mod:`dragoman.media.cues` takes those words), and how it was
made (model, provenance, wall seconds, warnings).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dragoman.media.cues import Word

__all__ = ["Segment", "TranscribeOptions", "Transcript", "Word"]


@dataclass(frozen=True)
class Segment:
    """One decoded stretch of speech: its span, text, words, and the decoder's confidence in it."""

    start: float
    end: float
    text: str
    words: tuple[Word, ...]
    avg_logprob: float
    no_speech_prob: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "start": round(self.start, 3),
            "end": round(self.end, 3),
            "text": self.text,
            "avg_logprob": round(self.avg_logprob, 4),
            "no_speech_prob": round(self.no_speech_prob, 4),
            "words": [
                {
                    "text": w.text,
                    "start": round(w.start, 3),
                    "end": round(w.end, 3),
                    "probability": round(w.probability, 4),
                }
                for w in self.words
            ],
        }


@dataclass(frozen=True)
class TranscribeOptions:
    """How to recognise: ``language`` "auto" (detect) or a BCP-47 tag; ``beam_size`` 1 is greedy; ``vad``
    skips silence and music (Silero VAD); ``model`` an installed model id (None: the embedded Whisper base,
    installed on first use)."""

    language: str = "auto"
    beam_size: int = 5
    vad: bool = True
    word_timestamps: bool = True
    model: str | None = None


@dataclass(frozen=True)
class Transcript:
    """What was heard. ``language`` is Whisper's code for it (two letters, three for ``haw``; Whisper's
    ``jw`` is given as BCP-47 ``jv``); ``language_probability`` is the detector's confidence (1.0 when the
    language was given); ``duration`` is the audio's length in seconds and ``seconds`` the wall time taken."""

    language: str
    language_probability: float
    language_given: bool
    duration: float
    segments: tuple[Segment, ...]
    model: str
    provenance: str
    seconds: float
    warnings: tuple[str, ...] = ()

    @property
    def words(self) -> tuple[Word, ...]:
        """Every word, in order."""
        return tuple(w for s in self.segments for w in s.words)

    @property
    def text(self) -> str:
        """The segments' texts joined (stripped, one space between)."""
        return " ".join(t for s in self.segments if (t := s.text.strip()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "language": self.language,
            "language_probability": round(self.language_probability, 4),
            "language_given": self.language_given,
            "duration": round(self.duration, 3),
            "model": self.model,
            "provenance": self.provenance,
            "seconds": round(self.seconds, 3),
            "warnings": list(self.warnings),
            "text": self.text,
            "segments": [s.to_dict() for s in self.segments],
        }
