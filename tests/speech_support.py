"""Measurements of rendered speech for the speech tests (F0, speaking time, energy); the installed engines."""

from __future__ import annotations

import functools
import math

import numpy as np
import numpy.typing as npt

from dragoman.media.audio import Audio, rms_db
from dragoman.settings import Settings
from dragoman.speech.tts.engines import TtsEngine
from dragoman.speech.tts.synth import Synthesizer


@functools.cache
def engines() -> tuple[TtsEngine, ...]:
    """The real engines installed on this machine (probed once for the whole test run)."""
    from dragoman.speech.tts.engines.registry import installed_engines

    return tuple(installed_engines(Settings.from_env()))


@functools.cache
def synthesizer() -> Synthesizer:
    return Synthesizer(engines=engines())


def engine_names() -> set[str]:
    return {e.name for e in engines()}


def _frames(x: npt.NDArray[np.float64], size: int, hop: int) -> npt.NDArray[np.float64]:
    if len(x) < size:
        return np.zeros((0, size))
    count = 1 + (len(x) - size) // hop
    idx = np.arange(size)[None, :] + hop * np.arange(count)[:, None]
    frames: npt.NDArray[np.float64] = x[idx]
    return frames


def f0_track(audio: Audio, low: float = 50.0, high: float = 500.0) -> npt.NDArray[np.float64]:
    """F0 (Hz) of each voiced 40 ms frame (hop 10 ms): normalised autocorrelation peak above 0.6 in the
    lag range of ``low``..``high`` Hz, frames within 30 dB of the loudest only; parabolic interpolation."""
    x = audio.samples.astype(np.float64)
    rate = audio.rate
    size, hop = round(0.04 * rate), round(0.01 * rate)
    frames = _frames(x, size, hop)
    if len(frames) == 0:
        return np.zeros(0)
    frames = frames - frames.mean(axis=1, keepdims=True)
    energy = (frames * frames).sum(axis=1)
    loud = energy > energy.max() * 10 ** (-30 / 10)
    frames = frames[loud] * np.hanning(size)[None, :]
    n = 1 << (2 * size - 1).bit_length()
    spec = np.fft.rfft(frames, n, axis=1)
    ac = np.fft.irfft(spec * np.conj(spec), n, axis=1)[:, :size]
    window_ac = np.fft.irfft(np.abs(np.fft.rfft(np.hanning(size), n)) ** 2, n)[:size]
    ac = ac / np.maximum(window_ac[None, :], 1e-12)
    ac = ac / np.maximum(ac[:, :1], 1e-12)
    lo, hi = int(rate / high), min(size - 2, int(rate / low))
    region = ac[:, lo:hi]
    best = region.max(axis=1, keepdims=True)
    # the shortest lag whose peak is within 15 % of the best (the best alone can be a multiple of the period)
    is_peak = np.zeros_like(region, dtype=bool)
    is_peak[:, 1:-1] = (region[:, 1:-1] >= region[:, :-2]) & (region[:, 1:-1] >= region[:, 2:])
    candidates = is_peak & (region >= 0.85 * best)
    lag = np.where(candidates.any(axis=1), np.argmax(candidates, axis=1), np.argmax(region, axis=1)) + lo
    peak = region[np.arange(len(region)), lag - lo]
    voiced = peak > 0.6
    out = []
    for row, k in zip(ac[voiced], lag[voiced], strict=True):
        a, b, c = row[k - 1], row[k], row[k + 1]
        denom = a - 2 * b + c
        shift = min(1.0, max(-1.0, 0.5 * (a - c) / denom)) if denom != 0 else 0.0
        out.append(rate / (k + shift))
    return np.asarray(out)


def f0_median(audio: Audio) -> float:
    track = f0_track(audio)
    return float(np.median(track)) if len(track) else math.nan


def semitones(a: float, b: float) -> float:
    """How many semitones ``b`` is above ``a``."""
    return 12 * math.log2(b / a)


def voiced_fraction(audio: Audio) -> float:
    """Voiced frames among the loud ones (a whisper has few)."""
    x = audio.samples.astype(np.float64)
    size, hop = round(0.04 * audio.rate), round(0.01 * audio.rate)
    frames = _frames(x, size, hop)
    if len(frames) == 0:
        return 0.0
    energy = (frames * frames).sum(axis=1)
    loud = int((energy > energy.max() * 10 ** (-30 / 10)).sum())
    return len(f0_track(audio)) / max(1, loud)


def speech_seconds(audio: Audio, floor_db: float = -35.0) -> float:
    """Seconds between the first and the last sample above ``floor_db`` relative to the peak."""
    x = np.abs(audio.samples)
    if len(x) == 0 or float(x.max()) == 0:
        return 0.0
    loud = np.flatnonzero(x > float(x.max()) * 10 ** (floor_db / 20))
    return (int(loud[-1]) - int(loud[0])) / audio.rate


def active_rms_db(audio: Audio) -> float:
    """RMS level of the loud part (frames within 40 dB of the loudest), so pauses do not count."""
    x = audio.samples.astype(np.float64)
    size = round(0.02 * audio.rate)
    frames = _frames(x, size, size)
    if len(frames) == 0:
        return rms_db(audio)
    energy = (frames * frames).mean(axis=1)
    loud = energy > energy.max() * 1e-4
    return 10 * math.log10(float(energy[loud].mean()))


def high_band_ratio_db(audio: Audio, corner: float = 2000.0) -> float:
    """Energy above ``corner`` Hz relative to the energy below it, in dB (spectral tilt)."""
    x = audio.samples.astype(np.float64)
    power = np.abs(np.fft.rfft(x)) ** 2
    freqs = np.fft.rfftfreq(len(x), 1.0 / audio.rate)
    return 10 * math.log10(float(power[freqs >= corner].sum()) / float(power[freqs < corner].sum()))
