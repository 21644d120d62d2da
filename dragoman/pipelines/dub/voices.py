"""Who speaks each dub line (issue 16): the three voice modes.

- ``preset``: the named persona for every line (the dubbed speech has one voice, whoever spoke).
- ``match``: each line's original speaker is measured in the original audio (median F0 of the line's
  slot, :func:`~dragoman.speech.tts.clones.f0_median`; gender from it,
  :func:`~dragoman.speech.tts.clones.gender_of`, an ambiguous pitch going to the nearer side of
  :data:`GENDER_SPLIT_HZ`). Lines whose pitch is within :data:`SPEAKER_SPREAD_ST` semitones of a speaker
  already heard (same gender) are that speaker; otherwise a new speaker takes the next persona of its
  gender (the one asked for first when it is of that gender). So a
  dialogue of a man and a woman keeps two voices, and two women of clearly different pitch get two female
  voices. Each speaker's persona is moved toward the speaker's own pitch by at most :data:`MATCH_PITCH_ST`
  semitones (formants untouched). A line with no measurable pitch (whispered, music, no audio) takes the
  previous line's speaker, or the persona asked for. What it does not do: it does not tell apart two speakers
  of the same gender and similar pitch, does not follow a change of speaker inside one sentence, and does not
  copy timbre or identity (that is what ``clone`` approximates, from a reference clip).
- ``clone``: the clone's matched voice (its persona adapted in pitch and formants to the reference clip,
  :func:`~dragoman.speech.tts.clones.synthesize_with_clone`) for every line; a voice match, not an identity
  clone (see the speech docs)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dragoman.media.audio import Audio
from dragoman.pipelines.dub.lines import Slot
from dragoman.pipelines.dub.types import DubOptions
from dragoman.progress import JobContext
from dragoman.speech.tts.clones import (
    CALIBRATION_TEXT,
    Clone,
    LocalCloneStore,
    f0_median,
    gender_of,
    render_adapted,
    synthesize_with_clone,
)
from dragoman.speech.tts.synth import Synthesizer
from dragoman.speech.tts.types import SynthesisOptions
from dragoman.speech.tts.voices import PERSONAS

#: Pitch (Hz) that splits an ambiguous speaker (between clones' male and female bounds) into male or female.
GENDER_SPLIT_HZ = 157.5
#: Lines whose median pitch is within this many semitones of a speaker's are that speaker's.
SPEAKER_SPREAD_ST = 4.0
#: The most a matched persona is moved toward its speaker's pitch (semitones).
MATCH_PITCH_ST = 3.0
#: Frames this far below the loudest of a line (dB) are left out of its pitch.
VOICE_GATE_DB = -20.0
#: The most seconds of a slot whose pitch is measured (the start of a long line says who speaks it).
F0_SECONDS = 8.0


@dataclass(frozen=True)
class VoiceChoice:
    """The voice of one line: the persona, the speaker's gender and F0 (match mode), the pitch offset of the
    persona (semitones), and the clone (clone mode)."""

    voice: str
    gender: str | None = None
    f0: float | None = None
    pitch_st: float = 0.0
    speaker: int = 0
    clone: Clone | None = None


@dataclass
class _Speaker:
    gender: str
    log_f0: list[float] = field(default_factory=list)
    persona: str = "aria"

    @property
    def f0(self) -> float:
        return float(2 ** np.mean(self.log_f0))


def line_f0(audio: Audio | None, slot: Slot) -> float:
    """The median F0 (Hz) of ``audio`` in ``slot`` (its first :data:`F0_SECONDS`); 0.0 when none."""
    if audio is None:
        return 0.0
    lo = max(0, round(slot.start * audio.rate))
    hi = min(len(audio.samples), round(min(slot.end, slot.start + F0_SECONDS) * audio.rate))
    if hi - lo < round(0.2 * audio.rate):
        return 0.0
    return f0_median(Audio(loud_part(audio.samples[lo:hi], audio.rate), audio.rate))


def loud_part(samples: npt.NDArray[np.float32], rate: int) -> npt.NDArray[np.float32]:
    """``samples`` with every 20 ms frame more than :data:`VOICE_GATE_DB` below the loudest one silenced:
    the background under and between the words (music, a hum) does not count in the pitch."""
    size = max(1, round(0.02 * rate))
    count = len(samples) // size
    if count == 0:
        return samples
    frames = samples[: count * size].astype(np.float64).reshape(count, size)
    levels = np.sqrt((frames * frames).mean(axis=1))
    keep = levels >= float(levels.max()) * 10 ** (VOICE_GATE_DB / 20)
    gated: npt.NDArray[np.float32] = (frames * keep[:, None]).reshape(-1).astype(np.float32)
    return gated


def _personas(gender: str, first: str) -> list[str]:
    names = [p.name for p in PERSONAS.values() if p.gender == gender]
    return [first, *(n for n in names if n != first)] if first in names else names


def match_speakers(f0s: Sequence[float], default_voice: str) -> list[VoiceChoice]:
    """The voice of each line from its speaker's median F0 (``match`` mode; module docstring). Linear: at
    most ten speakers are compared per line."""
    speakers: list[_Speaker] = []
    used: dict[str, int] = {"female": 0, "male": 0}
    choices: list[VoiceChoice] = []
    previous: int | None = None
    for f0 in f0s:
        if f0 <= 0:
            if previous is None:
                choices.append(VoiceChoice(default_voice))
            else:
                s = speakers[previous]
                choices.append(VoiceChoice(s.persona, s.gender, None, 0.0, previous))
            continue
        gender = gender_of(f0)
        if gender == "ambiguous":
            gender = "male" if f0 < GENDER_SPLIT_HZ else "female"
        log_f0 = math.log2(f0)
        best: tuple[float, int] | None = None
        for k, s in enumerate(speakers):
            if s.gender != gender:
                continue
            distance = abs(12 * (log_f0 - math.log2(s.f0)))
            if best is None or distance < best[0]:
                best = (distance, k)
        names = _personas(gender, default_voice)
        if best is not None and (best[0] <= SPEAKER_SPREAD_ST or used[gender] >= len(names)):
            index = best[1]
        else:
            speakers.append(_Speaker(gender, [], names[used[gender]]))
            used[gender] += 1
            index = len(speakers) - 1
        speaker = speakers[index]
        if len(speaker.log_f0) < 64:  # enough to know the speaker; keeps the mean's cost constant
            speaker.log_f0.append(log_f0)
        previous = index
        choices.append(VoiceChoice(speaker.persona, gender, f0, 0.0, index))
    return choices


class Voicer:
    """Renders dub lines in the chosen mode for one target language (module docstring)."""

    def __init__(
        self,
        synthesizer: Synthesizer,
        language: str,
        options: DubOptions,
        *,
        clone_store: LocalCloneStore | None = None,
    ) -> None:
        self.synthesizer = synthesizer
        self.language = language
        self.options = options
        self.clone: Clone | None = None
        self._persona_f0: dict[str, float] = {}
        if options.voice_mode == "clone":
            assert options.clone_id is not None
            self.clone = (clone_store or LocalCloneStore()).get(options.clone_id)
        # refused now, before any work: an unknown voice, a language no voice speaks
        synthesizer.resolve(SynthesisOptions(self.clone.persona if self.clone else options.voice, language))

    def choose(
        self, slots: Sequence[Slot], audio: Audio | None, context: JobContext | None = None
    ) -> list[VoiceChoice]:
        """Each line's voice (``audio``: the original at any rate, used in ``match`` mode)."""
        mode = self.options.voice_mode
        if mode == "clone":
            assert self.clone is not None
            return [
                VoiceChoice(self.clone.persona, self.clone.gender, None, 0.0, 0, self.clone) for _ in slots
            ]
        if mode == "preset":
            return [VoiceChoice(self.options.voice) for _ in slots]
        f0s: list[float] = []
        for k, slot in enumerate(slots):
            if context is not None and k % 16 == 0:
                context.check()
            f0s.append(line_f0(audio, slot))
        choices = match_speakers(f0s, self.options.voice)
        speakers: dict[int, list[float]] = {}
        for choice in choices:
            if choice.f0:
                speakers.setdefault(choice.speaker, []).append(math.log2(choice.f0))
        adapted: list[VoiceChoice] = []
        for choice in choices:
            logs = speakers.get(choice.speaker)
            pitch = 0.0
            if logs and choice.gender is not None:
                own = self.persona_f0(choice.voice)
                if own > 0:
                    target = 12 * (float(np.mean(logs[:64])) - math.log2(own))
                    pitch = round(max(-MATCH_PITCH_ST, min(MATCH_PITCH_ST, target)), 2)
            adapted.append(
                VoiceChoice(choice.voice, choice.gender, choice.f0, pitch, choice.speaker, choice.clone)
            )
        return adapted

    def persona_f0(self, persona: str) -> float:
        """The median F0 of ``persona`` speaking the target language (measured once)."""
        if persona not in self._persona_f0:
            text = CALIBRATION_TEXT.get(self.language, CALIBRATION_TEXT["en"])
            audio = self.synthesizer.synthesize(text, SynthesisOptions(persona, self.language)).audio
            self._persona_f0[persona] = f0_median(audio)
        return self._persona_f0[persona]

    def render(
        self, text: str, choice: VoiceChoice, speed: float, context: JobContext | None = None
    ) -> Audio:
        """``text`` spoken by ``choice`` at ``speed`` (1.0: the persona's own pace)."""
        options = SynthesisOptions(choice.voice, self.language, speed=speed)
        if choice.clone is not None:
            return synthesize_with_clone(self.synthesizer, text, options, choice.clone, context).audio
        if choice.pitch_st:
            return render_adapted(self.synthesizer, text, options, choice.pitch_st, 1.0, context).audio
        return self.synthesizer.synthesize(text, options, context).audio
