"""festival (Debian ``festival`` and ``festvox-*`` voices) as a program: ``festival --pipe`` sessions.

Each voice is spoken by a festival process kept running with that voice loaded
(:mod:`~dragoman.speech.tts.engines._festival_session`): festival's start-up and voice loading (0.5-1.3 s)
are paid once per process, not per render, and each render writes what ``text2wave`` would (byte for byte).
The text goes in a file of ours, in the encoding the voice's lexicon uses (ISO-8859-2 for Czech, ISO-8859-1
for Catalan, Finnish and Italian, UTF-8 for Russian and US English; characters the encoding lacks become
spaces); the voice is one of :data:`KNOWN` whose folder exists under ``/usr/share/festival/voices`` (no text
and no caller string ever reaches the Scheme sent: that is built from our own names and numbers). Prosody:
rate through HTS's ``-r`` (HTS voices) or ``Duration_Stretch`` (diphone voices), both put back to the
voice's own after each render, or a pitch-keeping time-stretch of the render (the unit-selection Russian
voice, whose units keep their durations whatever ``Duration_Stretch`` says); pitch shifted after
synthesis; volume scales the samples. Renders at once get a session each; :data:`IDLE_SESSIONS` a voice are
kept for the next. Word timings: None. The Hindi voice (festvox-hi-nsk) is not offered: it fails to load
on bookworm (hindi_phones.scm).
"""

from __future__ import annotations

import shutil
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path

from dragoman.errors import SpeechEngineError, VoiceNotInstalled
from dragoman.media.audio import pitch_shift, time_stretch
from dragoman.speech.tts.engines._festival_session import FestivalSession
from dragoman.speech.tts.engines.base import (
    NEUTRAL,
    QUALITY_ESPEAK,
    QUALITY_FESTIVAL,
    QUALITY_FESTIVAL_HTS,
    EngineOutput,
    EngineVoice,
    Gender,
    Prosody,
    apply_volume,
    clean_text,
    timeout_for,
)

PROGRAM = "festival"
VOICES_DIR = Path("/usr/share/festival/voices")
#: How long festival may take to start and load a voice.
STARTUP_S = 20.0
#: Sessions kept running per voice between renders (more renders at once start more, closed after).
IDLE_SESSIONS = 1


@dataclass(frozen=True)
class FestivalVoice:
    folder: str  # <VOICES_DIR>/<folder>; the voice's function is (voice_<name>)
    language: str
    locale: str
    gender: Gender
    hts: bool
    rate: int
    encoding: str
    label: str
    #: The rank where measurement put the voice below its kind's (None: HTS or diphone/clunits' rank).
    quality: int | None = None
    #: Unit selection (clunits) keeps its units' durations whatever ``Duration_Stretch`` says: its rate is
    #: a time-stretch of the render, keeping its pitch.
    clunits: bool = False

    @property
    def name(self) -> str:
        return self.folder.rsplit("/", 1)[-1]


KNOWN: tuple[FestivalVoice, ...] = (
    FestivalVoice("us/cmu_us_slt_arctic_hts", "en", "en-US", "female", True, 32000, "utf-8", "slt (HTS)"),
    FestivalVoice("catalan/upc_ca_ona_hts", "ca", "ca-ES", "female", True, 16000, "latin-1", "ona (HTS)"),
    FestivalVoice("czech/czech_dita", "cs", "cs-CZ", "female", False, 32000, "iso-8859-2", "dita"),
    FestivalVoice("finnish/suo_fi_lj_diphone", "fi", "fi-FI", "female", False, 22050, "latin-1", "lj"),
    FestivalVoice("finnish/hy_fi_mv_diphone", "fi", "fi-FI", "male", False, 22050, "latin-1", "mv"),
    FestivalVoice("italian/lp_diphone", "it", "it-IT", "female", False, 16000, "latin-1", "lp"),
    # Whisper base heard pc 0.20 word error rate over five sentences, SVOX Pico shifted down 0.05: ranked as
    # espeak-ng, so the Italian male personas speak with Pico shifted (voices.CROSS_GENDER_MIN_GAIN)
    FestivalVoice("italian/pc_diphone", "it", "it-IT", "male", False, 16000, "latin-1", "pc", QUALITY_ESPEAK),
    FestivalVoice(
        "russian/msu_ru_nsh_clunits", "ru", "ru-RU", "male", False, 16000, "utf-8", "nsh", clunits=True
    ),
)


def available() -> bool:
    return shutil.which(PROGRAM) is not None and any((VOICES_DIR / v.folder).is_dir() for v in KNOWN)


def encode(text: str, encoding: str) -> bytes:
    """``text`` in ``encoding``, characters it lacks turned into spaces."""
    out = []
    for ch in text:
        try:
            out.append(ch.encode(encoding))
        except UnicodeEncodeError:
            out.append(b" ")
    return b"".join(out)


def _close_all(idle: dict[str, list[FestivalSession]]) -> None:
    for sessions in idle.values():
        for session in sessions:
            session.close()
    idle.clear()


class FestivalEngine:
    name = "festival"

    def __init__(self, program: str | None = None, voices_dir: Path = VOICES_DIR) -> None:
        self.program = program or shutil.which(PROGRAM) or PROGRAM
        self.voices_dir = voices_dir
        self._voices: dict[str, FestivalVoice] | None = None
        self._lock = threading.Lock()
        self._idle: dict[str, list[FestivalSession]] = {}
        self._finalizer = weakref.finalize(self, _close_all, self._idle)

    def _installed(self) -> dict[str, FestivalVoice]:
        with self._lock:
            if self._voices is None:
                self._voices = {v.name: v for v in KNOWN if (self.voices_dir / v.folder).is_dir()}
            return self._voices

    def voices(self) -> list[EngineVoice]:
        return [
            EngineVoice(
                "festival",
                v.name,
                v.language,
                v.gender,
                v.quality if v.quality is not None else QUALITY_FESTIVAL_HTS if v.hts else QUALITY_FESTIVAL,
                v.rate,
                v.locale,
                v.label,
            )
            for v in self._installed().values()
        ]

    @staticmethod
    def setup(voice: FestivalVoice) -> str:
        """Scheme run once a session has loaded ``voice``: its own rate parameters, kept to restore."""
        if voice.hts:
            return "(defvar dragoman_hts_params hts_engine_params)"
        return "(defvar dragoman_stretch (Parameter.get 'Duration_Stretch))"

    @staticmethod
    def prosody_scheme(voice: FestivalVoice, prosody: Prosody) -> tuple[str, str]:
        """Scheme setting a render's rate, and putting the voice's own back after it."""
        if voice.hts:
            restore = "(set! hts_engine_params dragoman_hts_params)"
            if abs(prosody.rate - 1.0) <= 1e-3:
                return restore, restore
            extra = f'(list (list "-r" {prosody.rate:.4f}))'
            return f"(set! hts_engine_params (append dragoman_hts_params {extra}))", restore
        restore = "(Parameter.set 'Duration_Stretch dragoman_stretch)"
        if voice.clunits or abs(prosody.rate - 1.0) <= 1e-3:
            return restore, restore
        return f"(Parameter.set 'Duration_Stretch {1.0 / prosody.rate:.4f})", restore

    def _take(self, voice: FestivalVoice) -> FestivalSession:
        with self._lock:
            idle = self._idle.get(voice.name)
            while idle:
                session = idle.pop()
                if session.alive:
                    return session
                session.close()
        return FestivalSession(self.program, voice.name, self.setup(voice), STARTUP_S)

    def _give_back(self, session: FestivalSession) -> None:
        with self._lock:
            idle = self._idle.setdefault(session.name, [])
            if session.alive and len(idle) < IDLE_SESSIONS:
                idle.append(session)
                return
        session.close()

    def close(self) -> None:
        """Stop the sessions kept running (a later render starts a new one)."""
        with self._lock:
            _close_all(self._idle)

    def synthesize(self, text: str, voice_id: str, prosody: Prosody = NEUTRAL) -> EngineOutput:
        voice = self._installed().get(voice_id)
        if voice is None:
            names = ", ".join(self._installed())
            raise VoiceNotInstalled(f"festival has no voice {voice_id!r}; installed: {names or 'none'}")
        clean = clean_text(text)
        before, after = self.prosody_scheme(voice, prosody)
        text_bytes = encode(clean, voice.encoding) + b"\n"
        for attempt in (1, 2):  # a second try only when the session had gone before anything was sent
            session = self._take(voice)
            try:
                audio = session.render(text_bytes, before, after, timeout_for(clean))
                break
            except SpeechEngineError:
                if attempt == 2 or not session.lost:
                    raise
            finally:
                self._give_back(session)
        if voice.clunits and abs(prosody.rate - 1.0) > 1e-3:
            audio = time_stretch(audio, 1.0 / prosody.rate)
        audio = pitch_shift(audio, prosody.pitch_st)
        return EngineOutput(apply_volume(audio, prosody.volume), None)
