"""espeak-ng (GPL-3) as a program: 100+ languages, the long-tail fallback, and Piper's phonemizer.

``espeak-ng --stdin --stdout -v VOICE -s WPM -p PITCH -a AMP``: the text goes on stdin, never on the command
line; the voice is one of those ``espeak-ng --voices`` listed (checked before it is passed). Prosody: rate ×
175 words a minute (80-450), pitch 50 ± 6.5 units a semitone (measured: 20 → 79 Hz, 50 → 100 Hz, 80 → 135 Hz
for en-us; units 0-99, beyond that the rest is shifted after synthesis), amplitude 100 × volume (0-200);
a rate beyond 80-450 words a minute is reached by time-stretching the rest.

Word timings: the espeak-ng program prints no word events (they are in libespeak-ng's API, GPL code we keep
out of our process), so ``words`` is None; the voices layer aligns against the known text.
"""

from __future__ import annotations

import re
import shutil
import threading

import numpy as np

from dragoman.errors import VoiceNotInstalled
from dragoman.media.audio import Audio, pitch_shift, read_wav, time_stretch
from dragoman.speech.tts.engines.base import (
    NEUTRAL,
    QUALITY_ESPEAK,
    EngineOutput,
    EngineVoice,
    Gender,
    Prosody,
    clean_text,
    run_program,
    timeout_for,
)

PROGRAM = "espeak-ng"
DEFAULT_WPM = 175
WPM_MIN, WPM_MAX = 80, 450
PITCH_UNITS_PER_ST = 6.5
#: espeak-ng codes that are not two-letter but have an ISO 639-1 code we serve them under.
_TWO_LETTER = {"cmn": "zh"}
#: the female variant offered beside each (male) language voice
FEMALE_VARIANT = "f3"
_VOICE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,40}(\+[a-zA-Z0-9_]{1,20})?$")


def available() -> bool:
    return shutil.which(PROGRAM) is not None


def parse_voices(listing: str) -> list[EngineVoice]:
    """The voices of ``espeak-ng --voices`` output: each language with a two-letter code (or one in
    :data:`_TWO_LETTER`) as listed (male), plus its female variant ``CODE+f3``."""
    voices: list[EngineVoice] = []
    seen: set[str] = set()
    for line in listing.splitlines()[1:]:
        cols = line.split()
        if len(cols) < 4:
            continue
        code, age_gender, name = cols[1], cols[2], cols[3]
        primary = code.split("-")[0].lower()
        language = _TWO_LETTER.get(primary, primary)
        if len(language) != 2 or code in seen or not _VOICE_ID.match(code):
            continue
        seen.add(code)
        gender: Gender = "female" if age_gender.endswith("F") else "male"
        label = name.replace("_", " ")
        voices.append(EngineVoice("espeak", code, language, gender, QUALITY_ESPEAK, 22050, code, label))
        if gender == "male":
            voices.append(
                EngineVoice(
                    "espeak",
                    f"{code}+{FEMALE_VARIANT}",
                    language,
                    "female",
                    QUALITY_ESPEAK,
                    22050,
                    code,
                    f"{label} (female)",
                )
            )
    return voices


class EspeakEngine:
    """espeak-ng, run as a program for each render."""

    name = "espeak"

    def __init__(self, program: str | None = None) -> None:
        self.program = program or shutil.which(PROGRAM) or PROGRAM
        self._voices: list[EngineVoice] | None = None
        self._lock = threading.Lock()

    def voices(self) -> list[EngineVoice]:
        with self._lock:
            if self._voices is None:
                out = run_program([self.program, "--voices"], timeout=15.0, what="listing espeak-ng voices")
                self._voices = parse_voices(out.decode("utf-8", "replace"))
            return list(self._voices)

    def _check_voice(self, voice_id: str) -> None:
        if not any(v.id == voice_id for v in self.voices()):
            raise VoiceNotInstalled(
                f"espeak-ng has no voice {voice_id!r}; `espeak-ng --voices` lists them (en-us, de, fr-fr…)"
            )

    def argv(self, voice_id: str, prosody: Prosody) -> tuple[list[str], float]:
        """The command line for ``voice_id`` under ``prosody``, and the semitones left to shift afterwards."""
        self._check_voice(voice_id)
        wpm = round(min(WPM_MAX, max(WPM_MIN, DEFAULT_WPM * prosody.rate)))
        wanted = 50 + PITCH_UNITS_PER_ST * prosody.pitch_st
        units = round(min(99.0, max(0.0, wanted)))
        left_st = (wanted - units) / PITCH_UNITS_PER_ST
        amplitude = round(min(200.0, max(0.0, 100 * prosody.volume)))
        argv = [self.program, "--stdin", "--stdout", "-v", voice_id, "-s", str(wpm), "-p", str(units)]
        argv += ["-a", str(amplitude)]
        return argv, left_st

    def synthesize(self, text: str, voice_id: str, prosody: Prosody = NEUTRAL) -> EngineOutput:
        clean = clean_text(text)
        argv, left_st = self.argv(voice_id, prosody)
        out = run_program(
            argv, stdin=clean.encode("utf-8"), timeout=timeout_for(clean), what=f"espeak-ng voice {voice_id}"
        )
        audio = read_wav(out) if out else Audio(np.zeros(0, dtype=np.float32), 22050)
        if abs(left_st) > 0.05:
            audio = pitch_shift(audio, left_st)
        wpm = DEFAULT_WPM * prosody.rate
        if not WPM_MIN <= wpm <= WPM_MAX:  # beyond espeak-ng's own range: the rest by time stretch
            audio = time_stretch(audio, min(WPM_MAX, max(WPM_MIN, wpm)) / wpm)
        return EngineOutput(audio, None)

    def phonemes(self, text: str, voice_id: str, *, timeout: float | None = None) -> list[str]:
        """IPA phonemes of ``text``, one string per clause (``espeak-ng -q --ipa``), for Piper voices."""
        clean = clean_text(text)
        argv = [self.program, "-q", "--ipa", "--stdin", "-v", voice_id]
        if not _VOICE_ID.match(voice_id):
            raise VoiceNotInstalled(f"espeak-ng voice {voice_id!r} is not a voice name")
        out = run_program(
            argv, stdin=clean.encode("utf-8"), timeout=timeout or timeout_for(clean), what="phonemizing"
        )
        return [line.strip() for line in out.decode("utf-8", "replace").splitlines() if line.strip()]
