"""The dub's limiter holds TRUE peaks (ITU-R BS.1770-4 Annex 2: the signal oversampled 4x), not sample peaks
(issue 16, item 2)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from growth import assert_linear

from dragoman.media.audio import Audio, resample, true_peak_db
from dragoman.pipelines.dub import mix
from dragoman.pipelines.dub.mix import (
    MIX_RATE,
    TRUE_PEAK_DBTP,
    limit_context,
    limit_file,
    true_peak_limit,
    true_peaks,
)

RATE = MIX_RATE


def _db(value: float) -> float:
    return 20 * math.log10(value)


def _measured_dbtp(x: npt.NDArray[np.float64]) -> float:
    """The true peak as media.audio measures it (its own 4x resampler, not the limiter's interpolator)."""
    return true_peak_db(Audio(x.astype(np.float32), RATE))


def _quarter_rate_sine(amplitude: float, seconds: float = 1.0) -> npt.NDArray[np.float64]:
    """A sine at a quarter of the rate sampled 45 degrees off its crests: every sample is at
    amplitude / sqrt(2) (3 dB under the true peak)."""
    n = np.arange(round(seconds * RATE))
    return amplitude * np.sin(2 * np.pi * n / 4 + np.pi / 4)


def _music(seconds: float, seed: int) -> npt.NDArray[np.float64]:
    """Band-limited noise (made at 32 kHz: nothing over 16 kHz) plus a loud tone near 19 kHz, with silence at
    either end."""
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal(round(seconds * 32_000)).astype(np.float32) * 0.3
    x = resample(Audio(noise, 32_000), RATE).samples.astype(np.float64)
    t = np.arange(len(x)) / RATE
    x += 0.6 * np.sin(2 * np.pi * rng.uniform(17_000, 19_500) * t + rng.uniform(0, 2 * np.pi))
    x[:2000] = 0.0
    x[-2000:] = 0.0
    return x


def test_inter_sample_peaks_over_the_ceiling_are_brought_under_it() -> None:
    x = _quarter_rate_sine(0.99)
    # the sample peaks are under the ceiling (a sample-peak limiter leaves this alone) ...
    assert _db(float(np.max(np.abs(x)))) < TRUE_PEAK_DBTP - 1.5
    # ... while the true peak is over it
    assert _measured_dbtp(x) > TRUE_PEAK_DBTP + 0.8
    y = true_peak_limit(x, RATE)
    assert _measured_dbtp(y) <= TRUE_PEAK_DBTP + 0.01
    assert _db(float(true_peaks(y).max())) <= TRUE_PEAK_DBTP + 1e-6
    # held at the ceiling, not far under it (in the middle, away from the ease in and out at the ends)
    middle = y[RATE // 4 : 3 * RATE // 4]
    assert _measured_dbtp(middle) > TRUE_PEAK_DBTP - 0.1


def test_true_peaks_measure_the_crest_between_samples() -> None:
    x = _quarter_rate_sine(0.5)
    assert float(true_peaks(x)[100:-100].max()) == pytest.approx(0.5, abs=0.002)
    assert float(np.max(np.abs(x))) == pytest.approx(0.5 / math.sqrt(2), abs=1e-9)


def test_music_like_signal_is_held_under_the_ceiling_and_untouched_away_from_its_peaks() -> None:
    for seed in range(3):
        x = _music(2.0, seed) * 1.6
        assert _measured_dbtp(x) > 2.0
        y = true_peak_limit(x, RATE)
        assert _measured_dbtp(y) <= TRUE_PEAK_DBTP + 0.02
        assert not np.any(np.abs(y) > np.abs(x) + 1e-12)  # a limiter never raises a sample


def test_quiet_signal_comes_back_unchanged() -> None:
    x = _music(1.0, 7) * 0.2
    assert _measured_dbtp(x) < TRUE_PEAK_DBTP
    assert np.array_equal(true_peak_limit(x, RATE), x)


def test_one_peak_is_limited_only_around_itself() -> None:
    x = 0.3 * np.sin(2 * np.pi * 440 * np.arange(RATE) / RATE)
    x[RATE // 2] = 1.5  # one click over the ceiling
    y = true_peak_limit(x, RATE)
    assert _measured_dbtp(y) <= TRUE_PEAK_DBTP + 0.01
    reach = limit_context(RATE)
    changed = np.flatnonzero(y != x)
    assert changed.min() >= RATE // 2 - reach and changed.max() <= RATE // 2 + reach


def test_limit_file_joins_its_blocks_as_the_whole_signal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mix, "_LIMIT_BLOCK", 7_001)  # many seams, some inside the peaks' reach
    x = _music(1.5, 3).astype(np.float32)
    raw, out = tmp_path / "mix.f32", tmp_path / "limited.f32"
    raw.write_bytes(x.astype("<f4").tobytes())
    limit_file(raw, out, 6.0, rate=RATE)
    got = np.frombuffer(out.read_bytes(), dtype="<f4")
    whole = true_peak_limit(x.astype(np.float64) * 10 ** (6.0 / 20), RATE)
    assert len(got) == len(x)
    np.testing.assert_allclose(got, whole.astype(np.float32), atol=1e-6)
    assert _measured_dbtp(got.astype(np.float64)) <= TRUE_PEAK_DBTP + 0.02


def test_limiter_cost_is_linear() -> None:
    signals: dict[int, npt.NDArray[np.float64]] = {}

    def make(n: int) -> str:
        if n not in signals:  # loud everywhere: the limiter works on every sample
            signals[n] = np.resize(_quarter_rate_sine(0.99, 0.1), n) * np.linspace(0.5, 2.0, n)
        return "x" * n

    # 200,000 samples and more: both sides are past the caches and the mmap threshold (1 MiB once Pico has
    # loaded), so neither side gets memory the other pays for (40,000 against 160,000 measured up to 8.3)
    assert_linear(lambda text: true_peak_limit(signals[len(text)], RATE), {"loud": make}, 200_000)
