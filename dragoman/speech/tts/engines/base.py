"""The engine protocol and its value types, and the one way engines run programs.

An engine renders plain text (already split, normalised and escaped by the voices layer) with one of its own
voices, under a :class:`Prosody` it maps onto its own controls, to mono float32 :class:`Audio`. Engines that
run programs go through :func:`run_program`: an argument list (never a shell), the text on stdin or in a file
we name (never on the command line, so text can never become an option), bounded input, a timeout after which
the program's whole process group is killed, and typed errors.
"""

from __future__ import annotations

import os
import signal
import subprocess
import unicodedata
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from dragoman.errors import EngineTimeout, InvalidRequest, LimitExceeded, SpeechEngineError
from dragoman.limits import MAX_TTS_CHARS
from dragoman.media.audio import Audio

Gender = Literal["female", "male", "neutral"]

#: Seconds one engine call may run per 1,000 characters of text (at least :data:`MIN_TIMEOUT_S`): the
#: slowest engine here (festival HTS) renders 1,000 characters in about 2 s on one core.
TIMEOUT_S_PER_1000_CHARS = 20.0
MIN_TIMEOUT_S = 15.0
#: Bytes of audio (or other output) one program may write before it is stopped: 1 GiB.
MAX_PROGRAM_OUTPUT = 1 << 30

#: Quality ranks (higher is better), from SPEECH.md's measurements: Piper's neural voice (WER 0.03), SVOX Pico
#: (WER 0.00, natural), festival HTS (WER 0.00, less natural), flite (WER 0-0.09), espeak-ng (long tail).
QUALITY_PIPER = 90
QUALITY_PICO = 70
QUALITY_FESTIVAL_HTS = 60
QUALITY_FESTIVAL = 45
QUALITY_FLITE = 40
QUALITY_ESPEAK = 20

# the documented ranges of a Prosody (the voices layer keeps within them)
RATE_MIN, RATE_MAX = 0.25, 4.0
PITCH_ST_MIN, PITCH_ST_MAX = -24.0, 24.0
VOLUME_MIN, VOLUME_MAX = 0.0, 4.0


@dataclass(frozen=True)
class Prosody:
    """How to speak: ``rate`` (1.0 = the voice's own pace; 2.0 = twice as fast), ``pitch_st`` (semitones
    from the voice's own pitch), ``volume`` (linear amplitude factor). Ranges: rate 0.25-4, pitch ±24 st,
    volume 0-4; outside is an :class:`InvalidRequest`."""

    rate: float = 1.0
    pitch_st: float = 0.0
    volume: float = 1.0

    def __post_init__(self) -> None:
        if not RATE_MIN <= self.rate <= RATE_MAX:
            raise InvalidRequest(f"prosody rate {self.rate} is outside {RATE_MIN}..{RATE_MAX}")
        if not PITCH_ST_MIN <= self.pitch_st <= PITCH_ST_MAX:
            raise InvalidRequest(
                f"prosody pitch {self.pitch_st} st is outside {PITCH_ST_MIN}..{PITCH_ST_MAX}"
            )
        if not VOLUME_MIN <= self.volume <= VOLUME_MAX:
            raise InvalidRequest(f"prosody volume {self.volume} is outside {VOLUME_MIN}..{VOLUME_MAX}")

    @property
    def pitch_ratio(self) -> float:
        return float(2 ** (self.pitch_st / 12))


#: The voice as it is: no change of rate, pitch or volume.
NEUTRAL = Prosody()


@dataclass(frozen=True)
class EngineVoice:
    """One voice of one engine: ``id`` is the engine's own name for it (what ``synthesize`` takes),
    ``language`` two-letter (ISO 639-1), ``locale`` the full tag when the voice has one (``en-GB``),
    ``quality`` the rank above (higher is better), ``rate`` its native sample rate. ``license`` is the
    licence of a voice installed as a model (Piper, Kokoro), as the model store reads it (``unknown (...)``
    when the model states none); None for the voices of system engines (espeak-ng, Pico, flite, festival)."""

    engine: str
    id: str
    language: str
    gender: Gender
    quality: int
    rate: int
    locale: str = ""
    name: str = ""
    license: str | None = None


@dataclass(frozen=True)
class WordTiming:
    """A word and where it is in the audio (seconds)."""

    word: str
    start: float
    end: float


@dataclass(frozen=True)
class EngineOutput:
    """What an engine rendered: the audio, and word timings when the engine gives them (else None)."""

    audio: Audio
    words: tuple[WordTiming, ...] | None = None


@runtime_checkable
class TtsEngine(Protocol):
    """A speech engine. ``voices()`` is cheap (cached after the first call); ``synthesize`` is thread-safe."""

    @property
    def name(self) -> str: ...

    def voices(self) -> list[EngineVoice]: ...

    def synthesize(self, text: str, voice_id: str, prosody: Prosody = NEUTRAL) -> EngineOutput: ...


# ----- text and programs --------------------------------------------------------------------------------
def clean_text(text: str, *, limit: int = MAX_TTS_CHARS) -> str:
    """``text`` as an engine may take it: at most ``limit`` characters (else :class:`LimitExceeded`), control
    and format characters (C0/C1, bidi overrides, NUL) turned into spaces, line breaks kept as spaces too."""
    if not isinstance(text, str):
        raise InvalidRequest("text must be a string")
    if len(text) > limit:
        raise LimitExceeded(
            f"text of {len(text)} characters is over the {limit}-character limit of one render"
        )
    return "".join(" " if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp") else ch for ch in text)


def timeout_for(text: str) -> float:
    return max(MIN_TIMEOUT_S, TIMEOUT_S_PER_1000_CHARS * len(text) / 1000)


def run_program(
    argv: list[str], *, stdin: bytes = b"", timeout: float, what: str, env: dict[str, str] | None = None
) -> bytes:
    """Run ``argv`` (no shell) with ``stdin``, return its stdout. The program runs in its own process group:
    at ``timeout`` seconds the whole group is killed and :class:`EngineTimeout` raised; a non-zero exit is a
    :class:`SpeechEngineError` quoting the end of its stderr; output beyond :data:`MAX_PROGRAM_OUTPUT` bytes
    is refused."""
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=env,
        )
    except OSError as exc:
        raise SpeechEngineError(f"{what}: cannot start {argv[0]}: {exc.strerror or exc}") from exc
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        _kill_group(proc)
        raise EngineTimeout(f"{what}: {argv[0]} took longer than {timeout:.3g} s and was stopped") from exc
    except BaseException:
        _kill_group(proc)
        raise
    if proc.returncode != 0:
        tail = err.decode("utf-8", "replace").strip()[-400:]
        raise SpeechEngineError(f"{what}: {argv[0]} exited with status {proc.returncode}: {tail}")
    if len(out) > MAX_PROGRAM_OUTPUT:
        raise SpeechEngineError(f"{what}: {argv[0]} wrote more than {MAX_PROGRAM_OUTPUT} bytes")
    return out


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.kill()
    proc.communicate()


def apply_volume(audio: Audio, volume: float) -> Audio:
    """``audio`` scaled by ``volume`` (for engines without a volume control of their own)."""
    if volume == 1.0:
        return audio
    return Audio(audio.samples * float(volume), audio.rate)
