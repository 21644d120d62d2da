"""festival (Debian ``festival`` and ``festvox-*`` voices) as a program: ``text2wave``.

``text2wave -eval (voice_NAME) [-eval PARAMS] -o WAVFILE`` with the text on stdin, in the encoding the
voice's lexicon uses (ISO-8859-2 for Czech, ISO-8859-1 for Catalan, Finnish and Italian, UTF-8 for Russian
and US English; characters the encoding lacks become spaces). The voice is one of :data:`KNOWN` whose
folder exists under ``/usr/share/festival/voices`` (no text and no caller string ever reaches an ``-eval``:
those are built from our own names and numbers). Prosody: rate through HTS's ``-r`` (HTS voices) or
``Duration_Stretch`` (diphone and unit-selection voices); pitch shifted after synthesis; volume scales the
samples. festival starts afresh for each render (0.4-1.3 s of start-up, loading the voice). Word timings:
None. The Hindi voice (festvox-hi-nsk) is not offered: it fails to load on bookworm (hindi_phones.scm).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from dragoman.errors import SpeechEngineError, VoiceNotInstalled
from dragoman.media.audio import pitch_shift, read_wav
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
    run_program,
    timeout_for,
)

PROGRAM = "text2wave"
VOICES_DIR = Path("/usr/share/festival/voices")
#: Start-up of festival and loading a voice, added to each render's timeout.
STARTUP_S = 10.0


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
    FestivalVoice("russian/msu_ru_nsh_clunits", "ru", "ru-RU", "male", False, 16000, "utf-8", "nsh"),
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


class FestivalEngine:
    name = "festival"

    def __init__(self, program: str | None = None, voices_dir: Path = VOICES_DIR) -> None:
        self.program = program or shutil.which(PROGRAM) or PROGRAM
        self.voices_dir = voices_dir
        self._voices: dict[str, FestivalVoice] | None = None
        self._lock = threading.Lock()

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

    def argv(self, voice: FestivalVoice, prosody: Prosody, out: Path) -> list[str]:
        argv = [self.program, "-eval", f"(voice_{voice.name})"]
        if abs(prosody.rate - 1.0) > 1e-3:
            if voice.hts:
                extra = f'(list (list "-r" {prosody.rate:.4f}))'
                expr = f"(set! hts_engine_params (append hts_engine_params {extra}))"
            else:
                expr = f"(Parameter.set 'Duration_Stretch {1.0 / prosody.rate:.4f})"
            argv += ["-eval", expr]
        return argv + ["-o", str(out)]

    def synthesize(self, text: str, voice_id: str, prosody: Prosody = NEUTRAL) -> EngineOutput:
        voice = self._installed().get(voice_id)
        if voice is None:
            names = ", ".join(self._installed())
            raise VoiceNotInstalled(f"festival has no voice {voice_id!r}; installed: {names or 'none'}")
        clean = clean_text(text)
        with tempfile.TemporaryDirectory(prefix="dragoman-festival-") as tmp:
            wav_file = Path(tmp) / "out.wav"
            run_program(
                self.argv(voice, prosody, wav_file),
                stdin=encode(clean, voice.encoding) + b"\n",
                timeout=STARTUP_S + timeout_for(clean),
                what=f"festival voice {voice_id}",
            )
            if not wav_file.is_file():
                raise SpeechEngineError(f"festival voice {voice_id} wrote no audio")
            audio = read_wav(wav_file)
        audio = pitch_shift(audio, prosody.pitch_st)
        return EngineOutput(apply_volume(audio, prosody.volume), None)
