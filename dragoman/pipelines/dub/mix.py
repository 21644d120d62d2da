"""The dub's soundtrack (issue 16): the original audio with the dub lines over it, in bounded memory.

- **Lines** are kept at the mix rate (:data:`MIX_RATE`) in a temporary file of raw float32
  (:class:`LineStore`), not in memory, so a long video's thousands of lines cost disk, not RAM.
- **Mixing** streams the original audio in chunks of :data:`CHUNK_SECONDS` (PyAV,
  :func:`~dragoman.media.decode.iter_audio`): under each placed line the original is lowered by
  ``DubOptions.duck_db`` with :data:`RAMP_SECONDS` ramps either side (so speech is pushed under the dub while
  music and effects stay audible under it, and at their own level between lines), the line is added, and the
  chunk is appended to a raw float32 file and measured (:class:`LoudnessMeter`). Memory: one chunk, the parts
  of the lines that overlap it (read from the store, not mapped), and ten loudness values per second of
  media.
- **Loudness**: the mix's integrated loudness (ITU-R BS.1770-4, the same measure as
  :func:`~dragoman.media.audio.loudness_lufs`, here chunk by chunk) gives the gain to
  ``DubOptions.loudness_lufs`` (at most :data:`MAX_GAIN_DB` up, so near-silence is not blown up into
  noise). :func:`limit_file` applies that gain to the raw mix and holds its **true peak** at
  :data:`TRUE_PEAK_DBTP` (−1 dBTP), streamed block by block before ffmpeg encodes it.
- **True-peak limiter** (:func:`true_peak_limit`): the peak is measured as ITU-R BS.1770-4 Annex 2 measures
  a true peak, on the signal oversampled 4× (here a Kaiser-windowed sinc interpolator, 16 taps a phase, for
  the three points between two samples), so inter-sample peaks count, not only sample peaks (a sine at a
  quarter of the rate sampled 45° off its crest has sample peaks 3 dB under its true peak). The gain at
  each sample is at most ceiling / true peak over the :data:`LIMIT_ATTACK_S` ahead and
  :data:`LIMIT_HOLD_S` behind, eased in and out linearly over :data:`LIMIT_ATTACK_S` (a look-ahead limiter:
  no delay, no clicks). Cost: linear in the length; memory: one block plus its context either side. The
  ceiling is that of the PCM handed to the encoder: AAC or Opus may add a few tenths of a dB of their own."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO

import numpy as np
import numpy.typing as npt

from dragoman.media.audio import ABSOLUTE_GATE_LUFS, RELATIVE_GATE_LU, Audio, _k_weighting, resample
from dragoman.progress import JobContext

#: The rate the soundtrack is mixed and encoded at (Hz).
MIX_RATE = 48_000
#: Seconds of original audio mixed at a time.
CHUNK_SECONDS = 10.0
#: Seconds over which the original is lowered before a line and raised again after it.
RAMP_SECONDS = 0.05
#: The most the mix is raised toward the loudness target (dB).
MAX_GAIN_DB = 20.0
#: The limiter's true-peak ceiling (dBTP: the peak of the signal oversampled 4×, BS.1770-4 Annex 2).
TRUE_PEAK_DBTP = -1.0
#: The limiter's look-ahead (and its ease in and out), and how long it holds a reduction after a peak (s).
LIMIT_ATTACK_S = 0.005
LIMIT_HOLD_S = 0.02
#: True-peak interpolation: points per sample, input samples either side of a point, Kaiser window beta.
OVERSAMPLE = 4
_TP_TAPS = 16
_TP_BETA = 8.0
#: Samples the limiter works on at a time in :func:`limit_file`.
_LIMIT_BLOCK = 480_000
#: Seconds of preceding audio the K-weighting of a chunk sees, and of zeros after it (the filter's impulse
#: response has fallen below 1e-9 of its peak within about 0.2 s).
_K_CONTEXT_S = 0.5


@lru_cache(maxsize=1)
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (None elsewhere)."""
    try:
        import ctypes

        trim: Callable[[int], int] = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def release_freed_memory() -> None:
    """Hand the memory freed by a chunk's arrays back to the system (glibc keeps the freed blocks of
    arrays of a few MB in its heap, where the next chunk's arrays of slightly other sizes do not always fit:
    the resident size then grew with the media's length, about 15 MB a minute, with nothing alive)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@lru_cache(maxsize=8)
def _k_response(size: int, rate: int) -> npt.NDArray[np.complex128]:
    """The K-weighting filter's frequency response on the bins of a ``size``-point real FFT."""
    z = np.exp(-1j * np.pi * np.arange(size // 2 + 1) / (size // 2))
    response = np.ones(size // 2 + 1, dtype=np.complex128)
    for b, a in _k_weighting(rate):
        response *= (b[0] + b[1] * z + b[2] * z * z) / (a[0] + a[1] * z + a[2] * z * z)
    return response


def _k_filter(x: npt.NDArray[np.float64], rate: int) -> npt.NDArray[np.float64]:
    """``x`` K-weighted (by FFT, padded with :data:`_K_CONTEXT_S` of zeros; the response is cached per FFT
    size, and chunks of one length share one size)."""
    n = len(x) + round(_K_CONTEXT_S * rate)
    size = 1 << (n - 1).bit_length()
    filtered: npt.NDArray[np.float64] = np.fft.irfft(np.fft.rfft(x, size) * _k_response(size, rate), size)
    return filtered[: len(x)]


@dataclass(frozen=True)
class PlacedLine:
    """A fitted line in the :class:`LineStore`: where it starts in the media (seconds), and its samples'
    offset and count in the store."""

    start: float
    offset: int
    length: int

    def start_sample(self, rate: int = MIX_RATE) -> int:
        return round(self.start * rate)


class LineStore:
    """Fitted lines as raw float32 at :data:`MIX_RATE` in ``path`` (appended; read back piece by piece with
    ordinary reads, not memory-mapped: a mapping's pages stay resident as they are touched, so mapping the
    store made the mix's peak memory grow with the total length of the lines, about 8 MB a minute of
    dialogue)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: BinaryIO | None = path.open("wb")
        self._size = 0
        self._reader: BinaryIO | None = None

    def add(self, start: float, audio: Audio) -> PlacedLine:
        assert self._file is not None, "the store is closed for writing"
        samples = resample(audio, MIX_RATE).samples.astype("<f4", copy=False)
        self._file.write(samples.tobytes())
        placed = PlacedLine(start, self._size, len(samples))
        self._size += len(samples)
        return placed

    def samples(self, line: PlacedLine, lo: int = 0, hi: int | None = None) -> npt.NDArray[np.float32]:
        """Samples ``lo..hi`` of ``line`` (all of it by default), read from the store."""
        if self._file is not None:
            self._file.close()
            self._file = None
        hi = line.length if hi is None else min(hi, line.length)
        lo = max(0, lo)
        if hi <= lo:
            return np.zeros(0, dtype=np.float32)
        if self._reader is None:
            self._reader = self.path.open("rb")
        self._reader.seek(4 * (line.offset + lo))
        data = self._reader.read(4 * (hi - lo))
        return np.frombuffer(data, dtype="<f4").astype(np.float32)

    def close(self) -> None:
        for handle in (self._file, self._reader):
            if handle is not None:
                handle.close()
        self._file = None
        self._reader = None


class LoudnessMeter:
    """Integrated loudness (BS.1770-4: K-weighting, 400 ms blocks every 100 ms, absolute and relative gates)
    of audio fed chunk by chunk. Each chunk is K-weighted with :data:`_K_CONTEXT_S` of the audio before it,
    so the result matches a measure of the whole within a few hundredths of a dB."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._segment = round(0.1 * rate)
        self._tail = np.zeros(0, dtype=np.float64)
        self._pending = np.zeros(0, dtype=np.float64)  # K-weighted squares not yet making a segment
        self._segments: list[float] = []

    def feed(self, samples: npt.NDArray[np.float32]) -> None:
        x = samples.astype(np.float64)
        if len(x) == 0:
            return
        joined = np.concatenate([self._tail, x])
        y = _k_filter(joined, self.rate)[len(self._tail) :]
        self._tail = joined[-round(_K_CONTEXT_S * self.rate) :]
        squares = np.concatenate([self._pending, y * y])
        whole = len(squares) // self._segment
        if whole:
            sums = squares[: whole * self._segment].reshape(whole, self._segment).sum(axis=1)
            self._segments.extend(float(s) for s in sums)
        self._pending = squares[whole * self._segment :]

    def lufs(self) -> float:
        """The integrated loudness so far (``-inf`` for silence or less than one block)."""
        seg = np.asarray(self._segments, dtype=np.float64)
        if len(seg) < 4:
            return float("-inf")
        power = (seg[:-3] + seg[1:-2] + seg[2:-1] + seg[3:]) / (4 * self._segment)
        with np.errstate(divide="ignore"):
            block_lufs = -0.691 + 10 * np.log10(power)
        gated = power[block_lufs > ABSOLUTE_GATE_LUFS]
        if len(gated) == 0:
            return float("-inf")
        relative = -0.691 + 10 * math.log10(float(gated.mean())) + RELATIVE_GATE_LU
        final = power[(block_lufs > ABSOLUTE_GATE_LUFS) & (block_lufs > relative)]
        if len(final) == 0:
            return float("-inf")
        return -0.691 + 10 * math.log10(float(final.mean()))


def _duck_envelope(
    a: int, n: int, lines: Sequence[PlacedLine], duck: float, rate: int
) -> npt.NDArray[np.float64]:
    """The original's gain over samples ``a..a+n``: 1, lowered to ``duck`` under each line with ramps."""
    gain = np.ones(n, dtype=np.float64)
    ramp = max(1, round(RAMP_SECONDS * rate))
    t = np.arange(a, a + n, dtype=np.float64)
    for line in lines:
        s = line.start_sample(rate)
        e = s + line.length
        lo, hi = max(a, s - ramp), min(a + n, e + ramp)
        if hi <= lo:
            continue
        seg = t[lo - a : hi - a]
        w = np.clip((seg - (s - ramp)) / ramp, 0.0, 1.0) * np.clip(((e + ramp) - seg) / ramp, 0.0, 1.0)
        gain[lo - a : hi - a] = np.minimum(gain[lo - a : hi - a], 1.0 - (1.0 - duck) * w)
    return gain


def mix_to_file(
    original: Iterable[Audio] | None,
    total_samples: int,
    lines: Sequence[PlacedLine],
    store: LineStore,
    out: Path,
    *,
    duck_db: float,
    context: JobContext | None = None,
) -> float:
    """Mix ``lines`` (sorted by start) over ``original`` (chunks at :data:`MIX_RATE`; None: silence of
    ``total_samples``) into ``out`` as raw float32 little-endian mono; answers the mix's integrated loudness
    (LUFS). The mix lasts as long as the original audio (``total_samples`` when there is none); a line running
    past the end is cut there."""
    rate = MIX_RATE
    duck = 10 ** (duck_db / 20)
    ramp = round(RAMP_SECONDS * rate)
    meter = LoudnessMeter(rate)
    ordered = sorted(lines, key=lambda line: line.start)
    chunks: Iterable[Audio]
    if original is None:
        size = round(CHUNK_SECONDS * rate)
        chunks = (
            Audio(np.zeros(min(size, total_samples - a), dtype=np.float32), rate)
            for a in range(0, total_samples, size)
        )
    else:
        chunks = original
    active: list[PlacedLine] = []
    upcoming = 0
    a = 0
    with out.open("wb") as sink:
        for chunk in chunks:
            if context is not None:
                context.check()
            n = len(chunk.samples)
            if n == 0:
                continue
            b = a + n
            while upcoming < len(ordered) and ordered[upcoming].start_sample(rate) - ramp < b:
                active.append(ordered[upcoming])
                upcoming += 1
            active = [line for line in active if line.start_sample(rate) + line.length + ramp > a]
            mixed = chunk.samples.astype(np.float64) * _duck_envelope(a, n, active, duck, rate)
            for line in active:
                s = line.start_sample(rate)
                lo, hi = max(a, s), min(b, s + line.length)
                if hi > lo:
                    mixed[lo - a : hi - a] += store.samples(line, lo - s, hi - s)
            out32 = mixed.astype("<f4")
            meter.feed(out32)
            sink.write(out32.tobytes())
            a = b
            del mixed, out32
            release_freed_memory()
    return meter.lufs()


def gain_to(measured: float, target: float, *, lines: int) -> float:
    """The gain (dB) that brings a mix measured at ``measured`` LUFS to ``target``: none for silence or a
    mix with no dub line (the original is given back as it was), at most :data:`MAX_GAIN_DB` up."""
    if lines == 0 or not math.isfinite(measured):
        return 0.0
    return float(min(MAX_GAIN_DB, target - measured))


# ----- the true-peak limiter ----------------------------------------------------------------------
@lru_cache(maxsize=1)
def _tp_phases() -> npt.NDArray[np.float64]:
    """The interpolator: row j - 1 gives the point j / :data:`OVERSAMPLE` after sample n from samples
    n - taps + 1 .. n + taps (a Kaiser-windowed sinc, each row summing to 1)."""
    i = np.arange(-_TP_TAPS + 1, _TP_TAPS + 1, dtype=np.float64)
    rows = []
    for j in range(1, OVERSAMPLE):
        t = i - j / OVERSAMPLE
        window = np.i0(_TP_BETA * np.sqrt(np.clip(1 - (t / _TP_TAPS) ** 2, 0.0, 1.0))) / np.i0(_TP_BETA)
        h = np.sinc(t) * window
        rows.append(h / h.sum())
    return np.array(rows)


def true_peaks(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Per sample n, the largest magnitude of ``x`` oversampled :data:`OVERSAMPLE` times over [n, n + 1)
    (the sample and the points after it; zeros outside ``x``): the true peak of BS.1770-4 Annex 2, sample by
    sample."""
    peaks = np.abs(x)
    if len(x) == 0:
        return peaks
    padded = np.concatenate([np.zeros(_TP_TAPS - 1), x, np.zeros(_TP_TAPS)])
    for h in _tp_phases():
        np.maximum(peaks, np.abs(np.correlate(padded, h, mode="valid")), out=peaks)
    return peaks


def _sliding_min(a: npt.NDArray[np.float64], before: int, after: int) -> npt.NDArray[np.float64]:
    """``out[n] = min(a[n - before .. n + after])`` (1 outside ``a``), in linear time (van Herk/Gil-Werman:
    minima running forward and backward within blocks of the window's length)."""
    size = before + after + 1
    padded = np.concatenate([np.ones(before), a, np.ones(after)])
    blocks = -(-len(padded) // size)
    grid = np.concatenate([padded, np.ones(blocks * size - len(padded))]).reshape(blocks, size)
    forward = np.minimum.accumulate(grid, axis=1).ravel()
    backward = np.minimum.accumulate(grid[:, ::-1], axis=1)[:, ::-1].ravel()
    out: npt.NDArray[np.float64] = np.minimum(backward[: len(a)], forward[size - 1 : size - 1 + len(a)])
    return out


def _boxcar(a: npt.NDArray[np.float64], half: int) -> npt.NDArray[np.float64]:
    """The means of ``a`` over ``n - half .. n + half`` for n from ``half`` to ``len(a) - half - 1`` (the
    windows wholly inside ``a``)."""
    sums = np.concatenate([[0.0], np.cumsum(a)])
    width = 2 * half + 1
    out: npt.NDArray[np.float64] = (sums[width:] - sums[:-width]) / width
    return out


def _limit_reach(rate: int) -> tuple[int, int]:
    """The limiter's ease (samples either side of the mean) and hold (samples)."""
    return max(1, round(LIMIT_ATTACK_S * rate / 2)), max(1, round(LIMIT_HOLD_S * rate))


def limit_context(rate: int) -> int:
    """Samples either side of a sample that its limited value depends on (a block of :func:`limit_file`
    reads this much more either side, so blocks join seamlessly)."""
    half, hold = _limit_reach(rate)
    return hold + 4 * half + 4 * _TP_TAPS


def true_peak_limit(
    x: npt.NDArray[np.float64], rate: int, ceiling_db: float = TRUE_PEAK_DBTP
) -> npt.NDArray[np.float64]:
    """``x`` with its true peak (4× oversampled) held at ``ceiling_db`` dBTP: the gain at each sample is at
    most ceiling / true peak of every sample from :data:`LIMIT_HOLD_S` before it to the interpolator's reach
    after it, the minimum eased over :data:`LIMIT_ATTACK_S` (so it starts falling that long before a peak).
    Linear in ``len(x)``; ``x`` comes back as it is when nothing is over the ceiling."""
    ceiling = 10 ** (ceiling_db / 20)
    peaks = true_peaks(x)
    if len(x) == 0 or float(peaks.max()) <= ceiling:
        return x
    need = np.minimum(1.0, ceiling / np.maximum(peaks, 1e-12))
    half, hold = _limit_reach(rate)
    # min over [n - half - hold, n + half + taps], then the mean over [n - half, n + half]: the gain at n is
    # at most the need of every sample in [n - hold, n + taps] (the points the interpolation around n uses)
    widened = np.concatenate([np.ones(half), need, np.ones(half)])  # so every mean below is of minima
    gain = np.minimum(_boxcar(_sliding_min(widened, half + hold, half + 2 * _TP_TAPS), half), 1.0)
    out: npt.NDArray[np.float64] = x * gain
    return out


def limit_file(
    raw: Path,
    out: Path,
    gain_db: float,
    *,
    rate: int = MIX_RATE,
    ceiling_db: float = TRUE_PEAK_DBTP,
    context: JobContext | None = None,
) -> None:
    """Write ``raw`` (float32 mono) to ``out`` raised by ``gain_db`` with its true peak held at
    ``ceiling_db`` (:func:`true_peak_limit`), a block at a time with :func:`limit_context` samples read either
    side, so the result is that of the whole signal in bounded memory."""
    total = raw.stat().st_size // 4
    reach = limit_context(rate)
    factor = 10 ** (gain_db / 20)
    with raw.open("rb") as source, out.open("wb") as sink:
        for a in range(0, total, _LIMIT_BLOCK):
            if context is not None:
                context.check()
            b = min(total, a + _LIMIT_BLOCK)
            lo, hi = max(0, a - reach), min(total, b + reach)
            source.seek(lo * 4)
            block = np.frombuffer(source.read((hi - lo) * 4), dtype="<f4").astype(np.float64) * factor
            limited = true_peak_limit(block, rate, ceiling_db)
            sink.write(limited[a - lo : b - lo].astype("<f4").tobytes())
            del block, limited
            release_freed_memory()
