"""The speech engines dragoman drives, behind one protocol (:class:`~.base.TtsEngine`).

espeak-ng, flite and festival run as programs (GPL/BSD code stays out of our process); SVOX Pico through
py-nanotts (Apache-2.0); Piper voices with onnxruntime directly, phonemes from the ``espeak-ng`` program.
:func:`~.registry.installed_engines` probes which are installed, once per process.
"""

from dragoman.speech.tts.engines.base import (
    EngineOutput,
    EngineVoice,
    Prosody,
    TtsEngine,
    WordTiming,
)

__all__ = ["EngineOutput", "EngineVoice", "Prosody", "TtsEngine", "WordTiming"]
