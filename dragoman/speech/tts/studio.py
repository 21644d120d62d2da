"""Studio mode and the pauses between sentences (issue 14).

A standard render joins the sentences at the engine voice's own rate with a short pause
(:data:`STANDARD_PAUSE_S`, times the emotion's ``pause_scale``, divided by the speed). In both modes each
sentence's own leading and trailing silence (engines pad with varying amounts) is trimmed first, so every
pause is the length asked for.

A **studio** render is measurably different, not a label:

- **engine**: the best installed voice for the language, however slow (a standard render may prefer a faster
  engine of nearly the same quality; :func:`~dragoman.speech.tts.voices.resolve_voice`);
- **48 kHz** output (:data:`STUDIO_RATE`), resampled with a windowed-sinc filter;
- **loudness** normalised to **−16 LUFS integrated** (EBU R128 / ITU-R BS.1770-4 measurement; −16 LUFS is the
  usual target for spoken-word streaming and podcasts) with the **true peak at most −1.5 dBTP**
  (:data:`TARGET_LUFS`, :data:`TRUE_PEAK_DB`). An emotion's ``energy_ratio`` moves the target
  (``−16 + 20·log10(energy_ratio)``, held in −30…−9 LUFS), so a whisper stays quieter than a shout;
- **sentence-level pauses** of :data:`STUDIO_PAUSE_S` (longer than standard), with :data:`STUDIO_EDGE_S` of
  room before the first and after the last sentence;
- **breath spacing**: a soft breath (band-limited noise under a rise-and-fall envelope, 30 dB below the
  speech) in the pause before every sentence that follows a long one (≥ :data:`BREATH_AFTER_WORDS` words)
  and at least every :data:`BREATH_EVERY` sentences, with the pause lengthened by :data:`BREATH_S`.

When streaming, each sentence is normalised on its own (the whole render's integrated loudness is not known
until its end); the assembled render is normalised as a whole.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np

from dragoman.media.audio import Audio, normalise_loudness

STUDIO_RATE: Final = 48_000
TARGET_LUFS: Final = -16.0
TRUE_PEAK_DB: Final = -1.5
STUDIO_TARGET_RANGE: Final = (-30.0, -9.0)

STANDARD_PAUSE_S: Final = 0.3
STUDIO_PAUSE_S: Final = 0.55
STUDIO_EDGE_S: Final = 0.25
BREATH_S: Final = 0.3
BREATH_AFTER_WORDS: Final = 12
BREATH_EVERY: Final = 3
#: Samples below this (relative to the sentence's peak) count as silence when a sentence is trimmed.
_SILENCE_REL: Final = 0.01


def pause_seconds(*, studio: bool, pause_scale: float, speed: float) -> float:
    """The silence between two sentences."""
    base = STUDIO_PAUSE_S if studio else STANDARD_PAUSE_S
    return base * pause_scale / speed


def trim_bounds(audio: Audio, *, keep_s: float = 0.04) -> tuple[int, int]:
    """Sample bounds of ``audio`` without its leading and trailing silence (keeping ``keep_s`` each side)."""
    x = audio.samples
    if len(x) == 0:
        return 0, 0
    peak = float(np.max(np.abs(x)))
    if peak == 0:
        return 0, 0
    loud = np.flatnonzero(np.abs(x) > peak * _SILENCE_REL)
    keep = round(keep_s * audio.rate)
    return max(0, int(loud[0]) - keep), min(len(x), int(loud[-1]) + 1 + keep)


def trim(audio: Audio, *, keep_s: float = 0.04) -> Audio:
    """``audio`` without its leading and trailing silence (keeping ``keep_s`` each side)."""
    start, end = trim_bounds(audio, keep_s=keep_s)
    return Audio(audio.samples[start:end], audio.rate)


def breath(rate: int, level_rms: float, *, seed: int = 0) -> Audio:
    """A soft in-breath: noise band-limited to about 400–3000 Hz under a raised-cosine envelope, at
    ``level_rms`` RMS."""
    n = round(BREATH_S * rate)
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal(n)
    spectrum = np.fft.rfft(noise)
    freqs = np.fft.rfftfreq(n, 1.0 / rate)
    spectrum *= ((freqs > 400) & (freqs < 3000)) / np.sqrt(np.maximum(freqs, 400) / 400)
    shaped = np.fft.irfft(spectrum, n)
    envelope = np.sin(np.linspace(0, math.pi, n)) ** 2
    shaped *= envelope
    rms = float(np.sqrt(np.mean(shaped * shaped))) or 1.0
    return Audio((shaped * level_rms / rms).astype(np.float32), rate)


def wants_breath(index: int, previous_words: int, since_breath: int) -> bool:
    """Whether the pause before sentence ``index`` (not the first) gets a breath."""
    return index > 0 and (previous_words >= BREATH_AFTER_WORDS or since_breath >= BREATH_EVERY)


def target_lufs(energy_ratio: float) -> float:
    """The studio loudness target for an emotion's energy (module docstring)."""
    target = TARGET_LUFS + 20 * math.log10(energy_ratio)
    return min(max(target, STUDIO_TARGET_RANGE[0]), STUDIO_TARGET_RANGE[1])


def master(audio: Audio, energy_ratio: float = 1.0) -> Audio:
    """The loudness of a studio render: at :func:`target_lufs`, true peak ≤ :data:`TRUE_PEAK_DB`."""
    return normalise_loudness(audio, target_lufs(energy_ratio), TRUE_PEAK_DB)
