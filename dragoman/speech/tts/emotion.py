"""Emotions applied to a render (issue 14): through the engine's prosody, then after the engine.

The numbers of an :class:`~dragoman.speech.tts.types.Emotion` are applied so every engine behaves alike:

- ``speed_ratio`` and ``pitch_delta_st`` go to the engine as :class:`Prosody` (its rate and pitch controls:
  espeak-ng ``-s``/``-p``, Pico's speed/pitch, flite/festival's duration stretch and F0 target, Piper's
  length scale), together with the request's ``speed`` and the voice's own pace and pitch offset
  (:func:`prosody_for`). The rate handed to an engine is held in :data:`ENGINE_RATE_RANGE`.
- ``energy_ratio`` is a gain after the engine (:func:`apply_energy`), with a soft limiter so a shout is louder
  without clipping: engines' own volume controls differ too much to be comparable.
- ``pause_scale`` scales the silence between sentences (:mod:`~dragoman.speech.tts.studio`,
  :func:`~dragoman.speech.tts.studio.pause_seconds`).
- a preset's ``style`` is a voice quality made after the engine (:func:`apply_style`): **whisper**
  replaces the voiced excitation with noise shaped by the speech's own smoothed spectrum (a short-time Fourier
  resynthesis with random phase: the words stay, the pitch goes — a noise-excited approximation of a whisper,
  not a recording of one); **bright** lifts the spectrum above 1.5 kHz by up to 6 dB (the flatter spectral
  tilt of raised effort, used by ``shout`` and ``excited``); **dark** lowers it above 2.5 kHz by up to 4 dB
  (``warm``, ``sad``).
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
import numpy.typing as npt

from dragoman.media.audio import Audio
from dragoman.speech.tts.engines import Prosody
from dragoman.speech.tts.types import Emotion, Style

#: The rate range handed to engines (speed × emotion × voice pace); beyond it engines garble or refuse.
ENGINE_RATE_RANGE: Final = (0.35, 3.0)
#: The pitch offset range handed to engines, in semitones (voice offset + emotion delta).
ENGINE_PITCH_RANGE: Final = (-12.0, 12.0)
#: Soft limiter: samples above this magnitude are bent under 1.0 (tanh) rather than clipped.
_KNEE: Final = 0.7


def prosody_for(voice: Prosody, speed: float, emotion: Emotion) -> Prosody:
    """The engine prosody of a render: the voice's offsets, times the speed, plus the emotion."""
    rate = voice.rate * speed * emotion.speed_ratio
    pitch = voice.pitch_st + emotion.pitch_delta_st
    return Prosody(
        rate=min(max(rate, ENGINE_RATE_RANGE[0]), ENGINE_RATE_RANGE[1]),
        pitch_st=min(max(pitch, ENGINE_PITCH_RANGE[0]), ENGINE_PITCH_RANGE[1]),
        volume=voice.volume,
    )


def _soft_limit(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    mag = np.abs(x)
    over = mag > _KNEE
    if not over.any():
        return x
    bent = _KNEE + (1.0 - _KNEE) * np.tanh((mag - _KNEE) / (1.0 - _KNEE))
    return np.where(over, np.sign(x) * bent, x)


def apply_energy(audio: Audio, ratio: float) -> Audio:
    """``audio`` with its amplitude times ``ratio`` (peaks above 0.7 bent softly under 1.0)."""
    if ratio == 1.0 or len(audio.samples) == 0:
        return audio
    x = audio.samples.astype(np.float64) * ratio
    return Audio(_soft_limit(x).astype(np.float32), audio.rate)


# ----- voice qualities ----------------------------------------------------------------------------------
def _frames(rate: int) -> tuple[int, int]:
    size = 1 << max(8, round(math.log2(rate * 0.032)))  # ~32 ms
    return size, size // 4


def _stft(x: npt.NDArray[np.float64], size: int, hop: int) -> npt.NDArray[np.complex128]:
    window = np.hanning(size)
    padded = np.concatenate([np.zeros(size), x, np.zeros(size + hop)])
    count = 1 + (len(padded) - size) // hop
    idx = np.arange(size)[None, :] + hop * np.arange(count)[:, None]
    return np.fft.rfft(padded[idx] * window[None, :], axis=1)


def _istft(spec: npt.NDArray[np.complex128], size: int, hop: int, length: int) -> npt.NDArray[np.float64]:
    window = np.hanning(size)
    frames = np.fft.irfft(spec, size, axis=1) * window[None, :]
    total = size + hop * (len(frames) - 1)
    out = np.zeros(total)
    norm = np.zeros(total)
    for i, frame in enumerate(frames):
        out[i * hop : i * hop + size] += frame
        norm[i * hop : i * hop + size] += window * window
    out /= np.maximum(norm, 1e-8)
    return out[size : size + length]


def whisper(audio: Audio, *, seed: int = 0) -> Audio:
    """Noise-excited resynthesis: each frame's magnitude spectrum smoothed over ~400 Hz (the harmonics, and
    with them the pitch, are gone; the formants stay), given random phase, overlap-added; same RMS."""
    x = audio.samples.astype(np.float64)
    if len(x) == 0:
        return audio
    size, hop = _frames(audio.rate)
    spec = _stft(x, size, hop)
    mag = np.abs(spec)
    bins = max(3, round(400 / (audio.rate / size)))
    kernel = np.ones(bins) / bins
    smooth = np.apply_along_axis(lambda row: np.convolve(row, kernel, mode="same"), 1, mag)
    rng = np.random.default_rng(seed)
    phase = np.exp(2j * np.pi * rng.random(smooth.shape))
    y = _istft(smooth * phase, size, hop, len(x))
    rms_in = float(np.sqrt(np.mean(x * x)))
    rms_out = float(np.sqrt(np.mean(y * y)))
    if rms_out > 0:
        y *= rms_in / rms_out
    return Audio(_soft_limit(y).astype(np.float32), audio.rate)


def tilt(audio: Audio, corner_hz: float, gain_db: float) -> Audio:
    """A gentle shelf: frequencies above ``corner_hz`` moved by up to ``gain_db`` (a smooth ramp over an
    octave), applied by FFT over the whole signal."""
    x = audio.samples.astype(np.float64)
    if len(x) == 0 or gain_db == 0:
        return audio
    size = 1 << (len(x) - 1).bit_length()
    freqs = np.fft.rfftfreq(size, 1.0 / audio.rate)
    ramp = np.clip(np.log2(np.maximum(freqs, 1.0) / corner_hz) + 0.5, 0.0, 1.0)
    response = 10 ** (gain_db * ramp / 20)
    y = np.fft.irfft(np.fft.rfft(x, size) * response, size)[: len(x)]
    return Audio(_soft_limit(y).astype(np.float32), audio.rate)


def apply_style(audio: Audio, style: Style) -> Audio:
    """The preset's voice quality (module docstring)."""
    if style == "whisper":
        return whisper(audio)
    if style == "bright":
        return tilt(audio, 1500.0, 6.0)
    if style == "dark":
        return tilt(audio, 2500.0, -4.0)
    return audio
