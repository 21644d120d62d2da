"""Audio as numpy: the :class:`Audio` value, WAV in and out (real and streaming RIFF headers), resampling,
EBU R128 loudness and loudness normalisation. numpy only (no scipy): resampling is a windowed-sinc polyphase
filter bank, the K-weighting filter of ITU-R BS.1770 is applied through its exact frequency response (FFT,
padded so the IIR's tail fits).

Samples are float32 mono in [-1, 1] (values beyond are kept until written, where they are clipped).
"""

from __future__ import annotations

import io
import math
import struct
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from dragoman.errors import AudioFormatError, InvalidRequest

FloatArray = npt.NDArray[np.float32]

# The most a WAV we read may hold (bytes of sample data): 1 GiB, about 3 hours of 48 kHz 16-bit stereo.
MAX_WAV_BYTES = 1 << 30
# Sample rates we accept anywhere (a rate outside is a corrupt header or a mistake).
MIN_RATE = 1000
MAX_RATE = 384_000


@dataclass(frozen=True)
class Audio:
    """Mono float32 samples at ``rate`` Hz."""

    samples: FloatArray
    rate: int

    def __post_init__(self) -> None:
        if not MIN_RATE <= self.rate <= MAX_RATE:
            raise InvalidRequest(f"sample rate {self.rate} Hz is outside {MIN_RATE}..{MAX_RATE}")
        samples = np.asarray(self.samples)
        if samples.ndim != 1:
            raise InvalidRequest(f"audio must be mono (one dimension), got shape {samples.shape}")
        if samples.dtype != np.float32:
            samples = samples.astype(np.float32)
        object.__setattr__(self, "samples", samples)

    @property
    def duration(self) -> float:
        """Length in seconds."""
        return len(self.samples) / self.rate

    @staticmethod
    def silence(seconds: float, rate: int) -> Audio:
        return Audio(np.zeros(max(0, round(seconds * rate)), dtype=np.float32), rate)

    def __len__(self) -> int:
        return len(self.samples)


def concat(parts: list[Audio], rate: int | None = None) -> Audio:
    """Parts joined end to end, each resampled to ``rate`` (default: the first part's)."""
    if not parts:
        return Audio(np.zeros(0, dtype=np.float32), rate or 16000)
    target = rate or parts[0].rate
    arrays = [resample(p, target).samples for p in parts]
    return Audio(np.concatenate(arrays).astype(np.float32), target)


# ----- WAV --------------------------------------------------------------------------------------------
def pcm16(audio: Audio) -> bytes:
    """Little-endian signed 16-bit PCM of ``audio`` (clipped to [-1, 1], rounded)."""
    clipped = np.clip(audio.samples, -1.0, 1.0)
    return np.round(clipped * 32767.0).astype("<i2").tobytes()


def _pcm(audio: Audio, sample_width: int) -> bytes:
    clipped = np.clip(audio.samples.astype(np.float64), -1.0, 1.0)
    if sample_width == 2:
        return pcm16(audio)
    if sample_width == 1:
        return np.round(clipped * 127.0 + 128.0).astype(np.uint8).tobytes()
    if sample_width == 3:
        ints = np.round(clipped * 8388607.0).astype("<i4")
        return ints.view(np.uint8).reshape(-1, 4)[:, :3].tobytes()
    if sample_width == 4:
        return np.round(clipped * 2147483647.0).astype("<i4").tobytes()
    raise InvalidRequest(f"sample width {sample_width} bytes: use 1, 2, 3 or 4")


def _header(rate: int, channels: int, sample_width: int, data_size: int) -> bytes:
    block = channels * sample_width
    riff_size = 0xFFFFFFFF if data_size == 0xFFFFFFFF else 36 + data_size
    return (
        b"RIFF"
        + struct.pack("<I", riff_size)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, channels, rate, rate * block, block, sample_width * 8)
        + b"data"
        + struct.pack("<I", data_size)
    )


def wav_bytes(audio: Audio, *, sample_width: int = 2) -> bytes:
    """A complete PCM WAV file (44-byte header with the real RIFF and data sizes)."""
    data = _pcm(audio, sample_width)
    if len(data) > 0xFFFFFFFF - 36:
        raise InvalidRequest("audio too long for a WAV file (4 GiB)")
    return _header(audio.rate, 1, sample_width, len(data)) + data


def streaming_wav_header(rate: int, channels: int = 1, sample_width: int = 2) -> bytes:
    """The header of a WAV whose length is not known yet: RIFF and data sizes are 0xFFFFFFFF (what players
    and ffmpeg accept for a stream); PCM follows it."""
    if not MIN_RATE <= rate <= MAX_RATE or channels < 1 or sample_width not in (1, 2, 3, 4):
        raise InvalidRequest("streaming WAV header: bad rate, channels or sample width")
    return _header(rate, channels, sample_width, 0xFFFFFFFF)


def write_wav(audio: Audio, path: str | Path, *, sample_width: int = 2) -> None:
    Path(path).write_bytes(wav_bytes(audio, sample_width=sample_width))


def read_wav(source: str | Path | bytes) -> Audio:
    """A WAV file (path or bytes) as mono float32: PCM 8/16/24/32-bit or IEEE float 32/64, any channel count
    (mixed down). Streaming headers (sizes 0 or 0xFFFFFFFF) read to the end of the data. Anything else is an
    :class:`AudioFormatError`."""
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
    else:
        path = Path(source)
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise AudioFormatError(f"cannot read {path}: {exc.strerror or exc}") from exc
        if size > MAX_WAV_BYTES + 1_000_000:
            raise AudioFormatError(f"{path} is larger than {MAX_WAV_BYTES} bytes")
        data = path.read_bytes()
    return _parse_wav(data)


def _parse_wav(data: bytes) -> Audio:
    if len(data) < 12 or data[:4] not in (b"RIFF", b"RF64") or data[8:12] != b"WAVE":
        raise AudioFormatError("not a WAV file (no RIFF/WAVE header)")
    pos = 12
    fmt: tuple[int, int, int, int] | None = None
    while pos + 8 <= len(data):
        chunk_id = data[pos : pos + 4]
        (chunk_size,) = struct.unpack("<I", data[pos + 4 : pos + 8])
        body = pos + 8
        if chunk_id == b"fmt ":
            if chunk_size < 16 or body + 16 > len(data):
                raise AudioFormatError("WAV fmt chunk too short")
            tag, channels, rate, _, _, bits = struct.unpack("<HHIIHH", data[body : body + 16])
            if tag == 0xFFFE and chunk_size >= 40 and body + 26 <= len(data):
                (tag,) = struct.unpack("<H", data[body + 24 : body + 26])  # WAVE_FORMAT_EXTENSIBLE
            fmt = (tag, channels, rate, bits)
        elif chunk_id == b"data":
            if fmt is None:
                raise AudioFormatError("WAV data chunk before its fmt chunk")
            end = len(data) if chunk_size in (0, 0xFFFFFFFF) else min(len(data), body + chunk_size)
            return _decode(data[body:end], *fmt)
        if chunk_size == 0xFFFFFFFF:
            break
        pos = body + chunk_size + (chunk_size & 1)
    raise AudioFormatError("WAV file without a data chunk")


def _decode(raw: bytes, tag: int, channels: int, rate: int, bits: int) -> Audio:
    if channels < 1 or channels > 64:
        raise AudioFormatError(f"WAV with {channels} channels")
    if not MIN_RATE <= rate <= MAX_RATE:
        raise AudioFormatError(f"WAV sample rate {rate} Hz is outside {MIN_RATE}..{MAX_RATE}")
    width = bits // 8
    if bits % 8 or width < 1:
        raise AudioFormatError(f"WAV with {bits}-bit samples")
    frame = width * channels
    raw = raw[: len(raw) - len(raw) % frame]
    samples: npt.NDArray[np.float64]
    if tag == 1:
        if width == 1:
            samples = (np.frombuffer(raw, dtype=np.uint8).astype(np.float64) - 128.0) / 128.0
        elif width == 2:
            samples = np.frombuffer(raw, dtype="<i2").astype(np.float64) / 32768.0
        elif width == 3:
            b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
            ints = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
            ints = np.where(ints >= 1 << 23, ints - (1 << 24), ints)
            samples = ints.astype(np.float64) / 8388608.0
        elif width == 4:
            samples = np.frombuffer(raw, dtype="<i4").astype(np.float64) / 2147483648.0
        else:
            raise AudioFormatError(f"WAV with {bits}-bit PCM")
    elif tag == 3 and width in (4, 8):
        samples = np.frombuffer(raw, dtype="<f4" if width == 4 else "<f8").astype(np.float64)
        samples = np.nan_to_num(samples, nan=0.0, posinf=1.0, neginf=-1.0)
    else:
        raise AudioFormatError(
            f"WAV encoding {tag:#x} with {bits}-bit samples is not supported (PCM or float)"
        )
    if channels > 1:
        samples = samples.reshape(-1, channels).mean(axis=1)
    return Audio(samples.astype(np.float32), rate)


# ----- resampling ---------------------------------------------------------------------------------------
_TAPS_PER_SIDE = 24  # zero crossings each side of the windowed sinc: > 80 dB stop band with Kaiser beta 8


@lru_cache(maxsize=16)
def _filter_bank(up: int, down: int) -> tuple[npt.NDArray[np.float64], float]:
    """``up`` phases × (2·half) taps of a Kaiser-windowed sinc low-pass at min(1, up/down) of the input's
    Nyquist, scaled for unity gain; and the cut-off scale."""
    cutoff = min(1.0, up / down) * 0.97
    half = math.ceil(_TAPS_PER_SIDE / cutoff)
    phases = np.arange(up, dtype=np.float64)[:, None] / up
    k = np.arange(-half + 1, half + 1, dtype=np.float64)[None, :]
    t = k - phases  # the distance of each input tap from the output instant
    # the Kaiser window evaluated continuously at t (np.kaiser only gives it at integers)
    x = np.clip(t / half, -1.0, 1.0)
    win = np.i0(8.0 * np.sqrt(1.0 - x * x)) / np.i0(8.0)
    bank = cutoff * np.sinc(cutoff * t) * win
    bank /= bank.sum(axis=1, keepdims=True)
    return bank, float(half)


def resample(audio: Audio, rate: int) -> Audio:
    """``audio`` at ``rate`` Hz: a windowed-sinc polyphase filter (low-passed below the lower Nyquist)."""
    if rate == audio.rate:
        return audio
    if not MIN_RATE <= rate <= MAX_RATE:
        raise InvalidRequest(f"sample rate {rate} Hz is outside {MIN_RATE}..{MAX_RATE}")
    g = math.gcd(rate, audio.rate)
    up, down = rate // g, audio.rate // g
    x = audio.samples.astype(np.float64)
    n_out = (len(x) * up) // down
    if n_out == 0 or len(x) == 0:
        return Audio(np.zeros(n_out, dtype=np.float32), rate)
    bank, half_f = _filter_bank(up, down)
    half = int(half_f)
    padded = np.concatenate([np.zeros(half), x, np.zeros(half + 1)])
    out = np.empty(n_out, dtype=np.float64)
    if down <= 2 or up <= 4:  # few phases or steps: one C correlation per phase beats gathering taps
        for p in range(up):
            first = next((n for n in range(p, p + up * down + 1) if (n * down) % up == p), None)
            if first is None or first >= n_out:
                continue
            full = np.correlate(padded, bank[p], mode="valid")  # full[i] = sum_k padded[i + k] * bank[p][k]
            base0 = (first * down) // up
            count = len(range(first, n_out, up))
            # tap k of output n sits at input base + (k - half + 1), i.e. padded index base + k + 1
            out[first::up] = full[base0 + 1 : base0 + 1 + count * down : down][:count]
        return Audio(out.astype(np.float32), rate)
    taps = np.arange(-half + 1, half + 1)
    block = max(1, 2_000_000 // (2 * half))
    for start in range(0, n_out, block):
        n = np.arange(start, min(n_out, start + block))
        pos = n * down  # output instant n in input samples is pos / up
        base = pos // up
        phase = pos % up
        idx = base[:, None] + taps[None, :] + half
        out[start : start + len(n)] = np.einsum("ij,ij->i", padded[idx], bank[phase])
    return Audio(out.astype(np.float32), rate)


# ----- loudness (ITU-R BS.1770-4 / EBU R128) ------------------------------------------------------------
def _k_weighting(rate: int) -> list[tuple[tuple[float, float, float], tuple[float, float, float]]]:
    """The two biquads of BS.1770's K-weighting at ``rate`` (the formulas that give the standard's 48 kHz
    coefficients): a high shelf (+4 dB above ~1.7 kHz) and the RLB high pass (~38 Hz)."""
    # stage 1: high shelf
    f0, gain_db, q = 1681.974450955533, 3.999843853973347, 0.7071752369554196
    k = math.tan(math.pi * f0 / rate)
    vh = 10 ** (gain_db / 20)
    vb = vh**0.4996667741545416
    a0 = 1 + k / q + k * k
    shelf = (
        ((vh + vb * k / q + k * k) / a0, 2 * (k * k - vh) / a0, (vh - vb * k / q + k * k) / a0),
        (1.0, 2 * (k * k - 1) / a0, (1 - k / q + k * k) / a0),
    )
    # stage 2: high pass
    f0, q = 38.13547087602444, 0.5003270373238773
    k = math.tan(math.pi * f0 / rate)
    a0 = 1 + k / q + k * k
    highpass = ((1.0, -2.0, 1.0), (1.0, 2 * (k * k - 1) / a0, (1 - k / q + k * k) / a0))
    return [shelf, highpass]


def _k_weighted(x: npt.NDArray[np.float64], rate: int) -> npt.NDArray[np.float64]:
    """``x`` through the K-weighting filter: the biquads' exact frequency response applied by FFT over the
    signal padded with 2 s of zeros (the impulse response has decayed far below 1e-9 by then)."""
    n = len(x) + 2 * rate
    size = 1 << (n - 1).bit_length()
    spectrum = np.fft.rfft(x, size)
    z = np.exp(-1j * np.pi * np.arange(size // 2 + 1) / (size // 2))  # e^{-jw}
    for b, a in _k_weighting(rate):
        spectrum *= (b[0] + b[1] * z + b[2] * z * z) / (a[0] + a[1] * z + a[2] * z * z)
    return np.fft.irfft(spectrum, size)[: len(x)]


ABSOLUTE_GATE_LUFS = -70.0
RELATIVE_GATE_LU = -10.0


def loudness_lufs(audio: Audio) -> float:
    """Integrated loudness (LUFS) of mono ``audio`` per BS.1770-4: K-weighting, 400 ms blocks overlapping by
    75 %, the absolute gate at -70 LUFS and the relative gate 10 LU below the absolutely gated mean.
    ``-inf`` for silence or audio shorter than one block."""
    rate = audio.rate
    x = audio.samples.astype(np.float64)
    block, step = round(0.4 * rate), round(0.1 * rate)
    if len(x) < block:
        return float("-inf")
    y = _k_weighted(x, rate)
    cumulative = np.concatenate([[0.0], np.cumsum(y * y)])
    starts = np.arange(0, len(y) - block + 1, step)
    power = (cumulative[starts + block] - cumulative[starts]) / block
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


def true_peak_db(audio: Audio) -> float:
    """Peak level (dBTP) estimated on 4× oversampled audio, as BS.1770 Annex 2 describes."""
    if len(audio.samples) == 0:
        return float("-inf")
    over = resample(audio, min(audio.rate * 4, MAX_RATE)).samples
    peak = max(float(np.max(np.abs(over))), float(np.max(np.abs(audio.samples))))
    return 20 * math.log10(peak) if peak > 0 else float("-inf")


def _limit(x: npt.NDArray[np.float64], ceiling: float, rate: int) -> npt.NDArray[np.float64]:
    """A look-ahead peak limiter: per-sample gain never above ``ceiling / |x|`` around each peak, eased in
    and out over ~2 ms so it does not click."""
    need = np.minimum(1.0, ceiling / np.maximum(np.abs(x), 1e-12))
    if float(need.min()) >= 1.0:
        return x
    w = max(1, round(0.002 * rate))
    padded = np.concatenate([np.ones(w), need, np.ones(w)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * w + 1)
    env = windows.min(axis=1)  # min over ±w: covers every sample the smoothing below can reach
    kernel = np.ones(w + 1) / (w + 1)
    smooth = np.convolve(np.concatenate([np.ones(w // 2), env, np.ones(w - w // 2)]), kernel, mode="valid")
    limited: npt.NDArray[np.float64] = x * np.minimum(smooth[: len(x)], env)
    return limited


def normalise_loudness(audio: Audio, target_lufs: float, true_peak_db_max: float = -1.0) -> Audio:
    """``audio`` at ``target_lufs`` integrated loudness with its true peak at most ``true_peak_db_max`` dBTP
    (gain, then a look-ahead limiter on the peaks; the gain is corrected twice for what the limiter took).
    Silence comes back unchanged."""
    current = loudness_lufs(audio)
    if not math.isfinite(current):
        return audio
    x = audio.samples.astype(np.float64)
    gain_db = target_lufs - current
    ceiling = 10 ** (true_peak_db_max / 20)
    out = x
    for _ in range(3):
        # sample peaks limited 0.3 dB under the ceiling leave room for inter-sample peaks
        out = _limit(x * 10 ** (gain_db / 20), ceiling * 10 ** (-0.3 / 20), audio.rate)
        measured = loudness_lufs(Audio(out.astype(np.float32), audio.rate))
        if not math.isfinite(measured) or abs(measured - target_lufs) < 0.1:
            break
        gain_db += target_lufs - measured
    result = Audio(out.astype(np.float32), audio.rate)
    peak = true_peak_db(result)
    if peak > true_peak_db_max:
        result = Audio((out * 10 ** ((true_peak_db_max - peak) / 20)).astype(np.float32), audio.rate)
    return result


def gain(audio: Audio, factor: float) -> Audio:
    return Audio((audio.samples * np.float32(factor)).astype(np.float32), audio.rate)


def rms_db(audio: Audio) -> float:
    """RMS level in dBFS (``-inf`` for silence)."""
    if len(audio.samples) == 0:
        return float("-inf")
    rms = float(np.sqrt(np.mean(audio.samples.astype(np.float64) ** 2)))
    return 20 * math.log10(rms) if rms > 0 else float("-inf")


def to_wav_stream(audio: Audio) -> io.BytesIO:
    """A complete WAV in a file-like object (for front doors that stream a body)."""
    return io.BytesIO(wav_bytes(audio))


# ----- time stretch and pitch shift ---------------------------------------------------------------------
def time_stretch(audio: Audio, factor: float) -> Audio:
    """``audio`` lasting ``factor`` times as long at the same pitch (WSOLA: Hann frames of 30 ms overlapped by
    half, each taken within ±10 ms of its nominal place where it best continues the previous one)."""
    if not 0.1 <= factor <= 10.0:
        raise InvalidRequest(f"time stretch factor {factor} is outside 0.1..10")
    x = audio.samples.astype(np.float64)
    if abs(factor - 1.0) < 1e-3 or len(x) == 0:
        return audio
    frame = max(16, round(0.03 * audio.rate)) & ~1
    hop = frame // 2
    tol = round(0.01 * audio.rate)
    n_frames = int(math.ceil(len(x) * factor / hop)) + 1
    padded = np.concatenate([np.zeros(tol), x, np.zeros(frame + 2 * tol + hop)])
    window = np.hanning(frame + 1)[:frame]  # periodic Hann: halves overlapped sum to one
    out = np.zeros(n_frames * hop + frame)
    prev = 0  # where the previous frame was taken (in x)
    for k in range(n_frames):
        nominal = round(k * hop / factor)
        if k == 0:
            start = 0
        else:
            template = padded[tol + prev + hop : tol + prev + hop + frame]  # the natural continuation
            lo = max(0, nominal - tol)
            hi = min(len(x), nominal + tol)
            if hi <= lo or np.dot(template, template) < 1e-12:
                start = min(max(nominal, 0), len(x))
            else:
                region = padded[tol + lo : tol + hi + frame]
                scores = np.correlate(region, template, mode="valid")
                start = lo + int(np.argmax(scores))
        out[k * hop : k * hop + frame] += padded[tol + start : tol + start + frame] * window
        prev = start
    length = round(len(x) * factor)
    return Audio(out[:length].astype(np.float32), audio.rate)


def pitch_shift(audio: Audio, semitones: float) -> Audio:
    """``audio`` ``semitones`` higher (lower when negative) at the same length: stretched in time by the
    pitch ratio, then resampled back to its length (formants move with the pitch, as a tape would)."""
    if abs(semitones) < 1e-3 or len(audio.samples) == 0:
        return audio
    ratio = 2 ** (semitones / 12)
    stretched = time_stretch(audio, ratio)
    # play the stretched audio ratio times faster: resample from rate*ratio to rate
    fake_rate = max(MIN_RATE, min(MAX_RATE, round(audio.rate * ratio / 10) * 10))
    shifted = resample(Audio(stretched.samples, fake_rate), audio.rate).samples
    n = len(audio.samples)  # the rate's rounding to 10 Hz leaves a few samples over or short
    fitted = shifted[:n] if len(shifted) >= n else np.concatenate([shifted, np.zeros(n - len(shifted))])
    return Audio(fitted.astype(np.float32), audio.rate)
