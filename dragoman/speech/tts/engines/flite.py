"""flite (BSD-style licence, Debian ``flite``) as a program: US and Scottish English voices at 16 kHz.

``flite -voice NAME -f TEXTFILE -o WAVFILE --setf duration_stretch=S``: the text goes in a file we write in
a private temporary folder (never on the command line); the voice is one ``flite -lv`` lists. Rate maps
onto flite's own ``duration_stretch`` (1 / rate); pitch is shifted after synthesis (flite's
``int_f0_target_mean`` moves only some voices); volume scales the samples. Word timings: None.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path

from dragoman.errors import SpeechEngineError, VoiceNotInstalled
from dragoman.media.audio import pitch_shift, read_wav
from dragoman.speech.tts.engines.base import (
    NEUTRAL,
    QUALITY_FLITE,
    EngineOutput,
    EngineVoice,
    Gender,
    Prosody,
    apply_volume,
    clean_text,
    run_program,
    timeout_for,
)

PROGRAM = "flite"
#: What flite's voices are: (gender, locale, name). Limited-domain voices (awb_time: the time of day) and
#: the 8 kHz kal are not offered.
KNOWN: dict[str, tuple[Gender, str, str]] = {
    "slt": ("female", "en-US", "flite slt (US female)"),
    "rms": ("male", "en-US", "flite rms (US male)"),
    "awb": ("male", "en-GB", "flite awb (Scottish male)"),
    "kal16": ("male", "en-US", "flite kal16 (US male, diphone)"),
}
RATE = 16000


def available() -> bool:
    return shutil.which(PROGRAM) is not None


class FliteEngine:
    name = "flite"

    def __init__(self, program: str | None = None) -> None:
        self.program = program or shutil.which(PROGRAM) or PROGRAM
        self._voices: list[EngineVoice] | None = None
        self._lock = threading.Lock()

    def voices(self) -> list[EngineVoice]:
        with self._lock:
            if self._voices is None:
                out = run_program([self.program, "-lv"], timeout=15.0, what="listing flite voices")
                listed = out.decode("utf-8", "replace").split(":", 1)[-1].split()
                self._voices = [
                    EngineVoice("flite", v, "en", KNOWN[v][0], QUALITY_FLITE, RATE, KNOWN[v][1], KNOWN[v][2])
                    for v in listed
                    if v in KNOWN
                ]
            return list(self._voices)

    def synthesize(self, text: str, voice_id: str, prosody: Prosody = NEUTRAL) -> EngineOutput:
        if not any(v.id == voice_id for v in self.voices()):
            names = ", ".join(v.id for v in self.voices())
            raise VoiceNotInstalled(f"flite has no voice {voice_id!r}; installed: {names}")
        clean = clean_text(text)
        stretch = 1.0 / prosody.rate
        with tempfile.TemporaryDirectory(prefix="dragoman-flite-") as tmp:
            text_file, wav_file = Path(tmp) / "text.txt", Path(tmp) / "out.wav"
            text_file.write_text(clean + "\n", encoding="utf-8")
            argv = [self.program, "-voice", voice_id, "-f", str(text_file), "-o", str(wav_file)]
            argv += ["--setf", f"duration_stretch={stretch:.4f}"]
            run_program(argv, timeout=timeout_for(clean), what=f"flite voice {voice_id}")
            if not wav_file.is_file():
                raise SpeechEngineError(f"flite voice {voice_id} wrote no audio")
            audio = read_wav(wav_file)
        audio = pitch_shift(audio, prosody.pitch_st)
        return EngineOutput(apply_volume(audio, prosody.volume), None)
