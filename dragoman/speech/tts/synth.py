"""The synthesizer: text and options in, audio out, sentence by sentence (issue 14).

:class:`Synthesizer` loads the installed engines once per process (lazily, under a lock) and is safe to share
between threads. A render:

1. checks the text (≤ 50,000 characters), removes markup, normalises dates and digit groups and cuts it into
   sentences (:mod:`~dragoman.speech.tts.text`);
2. resolves the voice for the language (:func:`~dragoman.speech.tts.voices.resolve_voice`) and the emotion
   (preset refined by the object) into engine prosody (:func:`~dragoman.speech.tts.emotion.prosody_for`);
3. renders each sentence with the engine, then applies the voice's formant scale, the preset's voice quality
   and the energy gain (:mod:`~dragoman.speech.tts.emotion`);
4. joins the sentences with pauses (studio: trimmed sentences, longer pauses, breaths, 48 kHz, −16 LUFS;
   :mod:`~dragoman.speech.tts.studio`);
5. gives word timings: the engine's events where it has them, else the words aligned against the known text
   (:func:`~dragoman.speech.tts.words.align_render`).

Progress is reported after every sentence and cancellation (and the deadline) is checked before each one, so
a cancelled render stops within one sentence. :meth:`Synthesizer.stream` yields the audio sentence by
sentence: the first sentence's audio comes as soon as it is rendered, before the rest is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dragoman.media.audio import Audio, resample
from dragoman.progress import JobContext
from dragoman.speech.tts import studio as studio_mode
from dragoman.speech.tts.emotion import apply_energy, apply_style, prosody_for
from dragoman.speech.tts.engines import Prosody, WordTiming
from dragoman.speech.tts.text import prepare
from dragoman.speech.tts.types import EmotionStyle, SynthesisOptions, SynthesisResult
from dragoman.speech.tts.voices import ResolvedVoice, resolve_voice, voice_catalogue

if TYPE_CHECKING:
    from dragoman.settings import Settings
    from dragoman.speech.tts.engines import TtsEngine


def formant_shift(audio: Audio, scale: float) -> Audio:
    """``audio`` played ``scale`` times faster (every frequency, formants included, times ``scale``; the
    duration divided by it), by linear interpolation. The voices layer asks the engine for a correspondingly
    lower pitch and slower rate first, so only the formants move in the end."""
    if scale == 1.0 or len(audio.samples) < 2:
        return audio
    x = audio.samples.astype(np.float64)
    n_out = max(1, int(len(x) / scale))
    positions = np.arange(n_out) * scale
    return Audio(np.interp(positions, np.arange(len(x)), x).astype(np.float32), audio.rate)


@dataclass(frozen=True)
class _Plan:
    sentences: list[str]
    voice: ResolvedVoice
    style: EmotionStyle
    prosody: Prosody
    options: SynthesisOptions


@dataclass(frozen=True)
class _Piece:
    audio: Audio
    words: tuple[WordTiming, ...] | None
    word_count: int


class Synthesizer:
    """Speech synthesis over the installed engines (loaded once, on first use). ``engines`` replaces the
    probe (tests, a front door that already holds them)."""

    def __init__(self, settings: Settings | None = None, engines: Sequence[TtsEngine] | None = None) -> None:
        self._settings = settings
        self._engines: list[TtsEngine] | None = list(engines) if engines is not None else None
        self._lock = threading.Lock()

    def engines(self) -> list[TtsEngine]:
        if self._engines is None:
            with self._lock:
                if self._engines is None:
                    from dragoman.settings import Settings
                    from dragoman.speech.tts.engines.registry import installed_engines

                    self._engines = list(installed_engines(self._settings or Settings.from_env()))
        return self._engines

    def catalogue(self) -> dict[str, object]:
        """The voices, languages and emotions (:func:`~dragoman.speech.tts.voices.voice_catalogue`)."""
        return voice_catalogue(self.engines())

    def resolve(self, options: SynthesisOptions) -> ResolvedVoice:
        return resolve_voice(options.voice, options.language, self.engines(), studio=options.studio)

    # ----- the render -------------------------------------------------------------------------------
    def _plan(self, text: str, options: SynthesisOptions) -> _Plan:
        voice = self.resolve(options)
        sentences = prepare(text, voice.voice.language)
        style = options.effective
        prosody = prosody_for(voice.prosody, options.speed, style.emotion)
        return _Plan(sentences, voice, style, prosody, options)

    def _render(self, plan: _Plan, index: int) -> _Piece:
        sentence = plan.sentences[index]
        output = plan.voice.engine.synthesize(sentence, plan.voice.voice.id, plan.prosody)
        audio, words = output.audio, output.words
        scale = plan.voice.formant
        if scale != 1.0:
            audio = formant_shift(audio, scale)
            if words is not None:
                words = tuple(WordTiming(w.word, w.start / scale, w.end / scale) for w in words)
        audio = apply_style(audio, plan.style.style)
        audio = apply_energy(audio, plan.style.emotion.energy_ratio)
        # engines pad a sentence with silence of their own, of varying length: trimmed, every pause is ours
        start, end = studio_mode.trim_bounds(audio)
        offset = start / audio.rate
        audio = Audio(audio.samples[start:end], audio.rate)
        if words is not None:
            words = tuple(
                WordTiming(w.word, max(0.0, w.start - offset), max(0.0, w.end - offset)) for w in words
            )
        return _Piece(audio, words, len(sentence.split()))

    def _gap(
        self, plan: _Plan, index: int, previous: _Piece, since_breath: int, rate: int
    ) -> tuple[Audio, bool]:
        """The silence (and studio breath) before sentence ``index`` (> 0)."""
        seconds = studio_mode.pause_seconds(
            studio=plan.options.studio, pause_scale=plan.style.emotion.pause_scale, speed=plan.options.speed
        )
        if not plan.options.studio or not studio_mode.wants_breath(index, previous.word_count, since_breath):
            return Audio.silence(seconds, rate), False
        speech = previous.audio.samples
        level = float(np.sqrt(np.mean(speech.astype(np.float64) ** 2))) if len(speech) else 0.01
        breath = studio_mode.breath(rate, level * 10 ** (-30 / 20), seed=index)
        half = Audio.silence(seconds / 2, rate)
        return Audio(np.concatenate([half.samples, breath.samples, half.samples]), rate), True

    def synthesize(
        self, text: str, options: SynthesisOptions, context: JobContext | None = None
    ) -> SynthesisResult:
        """The whole render (module docstring). Raises what the text, voice or engine refuse (typed), and
        :class:`~dragoman.errors.Cancelled` between sentences when the context is cancelled."""
        begun = time.monotonic()
        context = context or JobContext()
        plan = self._plan(text, options)
        rate = plan.voice.voice.rate
        parts: list[np.ndarray] = []
        words: list[WordTiming] | None = []
        position = 0
        previous: _Piece | None = None
        since_breath = 0
        total = len(plan.sentences)
        if options.studio:
            edge = Audio.silence(studio_mode.STUDIO_EDGE_S, rate)
            parts.append(edge.samples)
            position += len(edge.samples)
        for index in range(total):
            context.check()
            piece = self._render(plan, index)
            if piece.audio.rate != rate:
                piece = _Piece(resample(piece.audio, rate), piece.words, piece.word_count)
            if previous is not None:
                gap, breathed = self._gap(plan, index, previous, since_breath, rate)
                since_breath = 0 if breathed else since_breath + 1
                parts.append(gap.samples)
                position += len(gap.samples)
            offset = position / rate
            if words is not None and piece.words is not None:
                words.extend(WordTiming(w.word, w.start + offset, w.end + offset) for w in piece.words)
            elif piece.words is None:
                words = None
            parts.append(piece.audio.samples)
            position += len(piece.audio.samples)
            previous = piece
            context.report(index + 1, total, f"sentence {index + 1} of {total}")
        if options.studio:
            parts.append(Audio.silence(studio_mode.STUDIO_EDGE_S, rate).samples)
        audio = Audio(np.concatenate(parts).astype(np.float32), rate)
        if options.studio:
            audio = studio_mode.master(
                resample(audio, studio_mode.STUDIO_RATE), plan.style.emotion.energy_ratio
            )
        if words is None:  # no engine events: the words aligned against the known text (tts.words)
            from dragoman.speech.tts.words import align_render

            words = list(align_render(audio, text, plan.voice.voice.language))
        notes: list[str] = []
        if plan.voice.shifted:
            gender, voice = plan.voice.persona.gender, plan.voice.voice
            notes.append(
                f"{options.voice} is a {gender} voice rendered on the {voice.gender} engine voice "
                f"{voice.id!r} with pitch and formants shifted: no {gender} voice as intelligible for the "
                "language is installed"
            )
        return SynthesisResult(
            audio=audio,
            voice=options.voice,
            engine=plan.voice.voice.engine,
            engine_voice=plan.voice.voice.id,
            language=plan.voice.voice.language,
            words=tuple(words) if words is not None else None,
            options=options,
            seconds=time.monotonic() - begun,
            sentences=total,
            notes=tuple(notes),
        )

    def stream(
        self, text: str, options: SynthesisOptions, context: JobContext | None = None
    ) -> Iterator[Audio]:
        """The render as chunks of audio, one per sentence (with the pause before it), in order; all at one
        rate (the engine voice's, or 48 kHz in studio mode, where each chunk is normalised on its own).
        Everything that can be refused (text, voice, options) is refused before the first chunk."""
        context = context or JobContext()
        plan = self._plan(text, options)
        return self._chunks(plan, context)

    def _chunks(self, plan: _Plan, context: JobContext) -> Iterator[Audio]:
        rate = plan.voice.voice.rate
        studio = plan.options.studio
        previous: _Piece | None = None
        since_breath = 0
        total = len(plan.sentences)
        for index in range(total):
            context.check()
            piece = self._render(plan, index)
            audio = resample(piece.audio, rate)
            head: list[np.ndarray] = []
            if studio and index == 0:
                head.append(Audio.silence(studio_mode.STUDIO_EDGE_S, rate).samples)
            if previous is not None:
                gap, breathed = self._gap(plan, index, previous, since_breath, rate)
                since_breath = 0 if breathed else since_breath + 1
                head.append(gap.samples)
            tail = (
                [Audio.silence(studio_mode.STUDIO_EDGE_S, rate).samples]
                if studio and index == total - 1
                else []
            )
            chunk = Audio(np.concatenate([*head, audio.samples, *tail]).astype(np.float32), rate)
            if studio:
                chunk = studio_mode.master(
                    resample(chunk, studio_mode.STUDIO_RATE), plan.style.emotion.energy_ratio
                )
            previous = piece
            context.report(index + 1, total, f"sentence {index + 1} of {total}")
            yield chunk

    def stream_rate(self, options: SynthesisOptions) -> int:
        """The sample rate :meth:`stream` will yield for ``options`` (for a streaming WAV header)."""
        return studio_mode.STUDIO_RATE if options.studio else self.resolve(options).voice.rate
