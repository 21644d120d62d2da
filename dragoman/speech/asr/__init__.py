"""Speech recognition (issue 15): faster-whisper models of kind ``asr`` turning audio into word-timed
transcripts. A capability: it imports media, models, languages and the ground floor only."""

from dragoman.speech.asr.recognizer import Recognizer
from dragoman.speech.asr.types import Segment, TranscribeOptions, Transcript, Word

__all__ = ["Recognizer", "Segment", "TranscribeOptions", "Transcript", "Word"]
