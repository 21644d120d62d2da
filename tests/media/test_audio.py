"""dragoman.media.audio: WAV in and out, streaming headers, resampling, BS.1770 loudness, normalisation,
time stretch and pitch shift, measured on signals made in the test."""

from __future__ import annotations

import io
import math
import struct
import wave
from pathlib import Path

import numpy as np
import pytest

from dragoman.errors import AudioFormatError, InvalidRequest
from dragoman.media.audio import (
    Audio,
    loudness_lufs,
    normalise_loudness,
    pcm16,
    pitch_shift,
    read_wav,
    resample,
    streaming_wav_header,
    time_stretch,
    true_peak_db,
    wav_bytes,
)


def sine(freq: float, seconds: float, rate: int, amplitude: float = 1.0) -> Audio:
    t = np.arange(round(seconds * rate)) / rate
    return Audio((amplitude * np.sin(2 * np.pi * freq * t)).astype(np.float32), rate)


def dominant_hz(audio: Audio) -> float:
    spectrum = np.abs(np.fft.rfft(audio.samples * np.hanning(len(audio.samples))))
    return float(np.argmax(spectrum) * audio.rate / len(audio.samples))


def autocorr_f0(audio: Audio) -> float:
    x = audio.samples.astype(np.float64)
    x = x - x.mean()
    ac = np.correlate(x[:4096], x[:4096], "full")[4095:]
    lo, hi = audio.rate // 1000, audio.rate // 50
    return audio.rate / (lo + int(np.argmax(ac[lo:hi])))


# ----- WAV ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("width", [1, 2, 3, 4])
def test_wav_round_trip_each_width(width: int) -> None:
    audio = sine(440, 0.25, 16000, 0.5)
    data = wav_bytes(audio, sample_width=width)
    back = read_wav(data)
    assert back.rate == 16000 and len(back) == len(audio)
    tolerance = {1: 1 / 100, 2: 1 / 30000, 3: 1e-6, 4: 1e-6}[width]
    assert float(np.max(np.abs(back.samples - audio.samples))) < tolerance


def test_wav_has_real_riff_sizes_and_the_stdlib_reads_it(tmp_path: Path) -> None:
    audio = sine(300, 0.1, 22050, 0.3)
    data = wav_bytes(audio)
    assert data[:4] == b"RIFF" and data[8:16] == b"WAVEfmt "
    assert struct.unpack("<I", data[4:8])[0] == len(data) - 8
    assert struct.unpack("<I", data[40:44])[0] == len(data) - 44 == 2 * len(audio)
    with wave.open(io.BytesIO(data)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()) == (
            1,
            2,
            22050,
            len(audio),
        )
        assert w.readframes(len(audio)) == pcm16(audio)
    path = tmp_path / "x.wav"
    path.write_bytes(data)
    assert np.array_equal(read_wav(path).samples, read_wav(data).samples)


def test_streaming_header_then_pcm_reads_to_the_end() -> None:
    header = streaming_wav_header(24000)
    assert len(header) == 44
    assert struct.unpack("<I", header[4:8])[0] == 0xFFFFFFFF
    assert struct.unpack("<I", header[40:44])[0] == 0xFFFFFFFF
    first, second = sine(200, 0.1, 24000, 0.4), sine(200, 0.05, 24000, 0.4)
    stream = header + pcm16(first) + pcm16(second)
    back = read_wav(stream)
    assert back.rate == 24000 and len(back) == len(first) + len(second)


def test_stereo_and_float_wavs_are_mixed_down() -> None:
    left = np.full(100, 0.5, dtype="<f4")
    right = np.full(100, -0.25, dtype="<f4")
    frames = np.stack([left, right], axis=1).tobytes()
    fmt = struct.pack("<HHIIHH", 3, 2, 8000, 8000 * 8, 8, 32)
    data = b"RIFF" + struct.pack("<I", 36 + len(frames)) + b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt
    data += b"data" + struct.pack("<I", len(frames)) + frames
    back = read_wav(data)
    assert back.rate == 8000 and len(back) == 100
    assert np.allclose(back.samples, 0.125)


@pytest.mark.parametrize(
    "data",
    [b"", b"RIFF\x00\x00\x00\x00WAVE", b"not a wav at all", b"RIFF\x10\x00\x00\x00WAVEdata\x00\x00\x00\x00"],
)
def test_what_is_not_a_wav_is_refused(data: bytes) -> None:
    with pytest.raises(AudioFormatError):
        read_wav(data)


def test_absurd_rates_are_refused() -> None:
    header = bytearray(streaming_wav_header(16000))
    header[24:28] = struct.pack("<I", 5)
    with pytest.raises(AudioFormatError):
        read_wav(bytes(header) + b"\x00\x00" * 10)
    with pytest.raises(InvalidRequest):
        Audio(np.zeros(10, dtype=np.float32), 10)


# ----- resampling ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("src", "dst"), [(22050, 48000), (16000, 48000), (48000, 16000), (32000, 22050)])
def test_resample_keeps_a_tone_and_the_length(src: int, dst: int) -> None:
    audio = sine(440, 1.0, src, 0.5)
    out = resample(audio, dst)
    assert out.rate == dst and abs(len(out) - dst) <= 1
    reference = 0.5 * np.sin(2 * np.pi * 440 * np.arange(len(out)) / dst)
    inner = slice(200, len(out) - 200)
    assert float(np.max(np.abs(out.samples[inner] - reference[inner]))) < 1e-3
    assert abs(dominant_hz(out) - 440) < 2


def test_downsampling_removes_what_is_above_the_new_nyquist() -> None:
    audio = sine(7000, 1.0, 48000, 0.5)  # above 16 kHz audio's 8 kHz Nyquist? no: 7 kHz stays
    assert float(np.max(np.abs(resample(audio, 16000).samples[200:-200]))) > 0.45
    alias = sine(11000, 1.0, 48000, 0.5)  # above 8 kHz: must not fold back to 5 kHz
    assert float(np.max(np.abs(resample(alias, 16000).samples[200:-200]))) < 0.005


# ----- loudness ------------------------------------------------------------------------------------------
def test_full_scale_997_hz_sine_measures_minus_3_01_lufs() -> None:
    # BS.1770-4: a 0 dBFS 997 Hz sine in one channel of the front reads -3.01 LKFS
    assert loudness_lufs(sine(997, 5.0, 48000)) == pytest.approx(-3.01, abs=0.05)
    assert loudness_lufs(sine(997, 5.0, 44100)) == pytest.approx(-3.01, abs=0.05)


def test_halving_the_amplitude_lowers_loudness_by_6_02_lu() -> None:
    full = loudness_lufs(sine(1000, 3.0, 48000))
    half = loudness_lufs(sine(1000, 3.0, 48000, 0.5))
    assert full - half == pytest.approx(20 * math.log10(2), abs=0.01)


def test_gating_ignores_silence_and_very_quiet_parts() -> None:
    tone = sine(997, 10.0, 48000, 0.5)
    silent = np.zeros(48000 * 10, dtype=np.float32)
    padded = Audio(np.concatenate([silent, tone.samples, silent]), 48000)
    # absolute gate: 20 s of silence around the tone leave its loudness alone (an ungated mean: -4.8 LU;
    # the blocks straddling its edges still count, as the standard has it: ~0.13 LU)
    assert loudness_lufs(padded) == pytest.approx(loudness_lufs(tone), abs=0.2)
    # relative gate: a part 20 LU quieter is gated out (it would pull an ungated mean down by ~2.5 LU)
    quiet = sine(997, 10.0, 48000, 0.05).samples
    mixed = Audio(np.concatenate([tone.samples, quiet]), 48000)
    assert loudness_lufs(mixed) == pytest.approx(loudness_lufs(tone), abs=0.2)
    assert loudness_lufs(Audio(silent, 48000)) == float("-inf")


def test_k_weighting_lifts_highs_and_cuts_lows() -> None:
    mid = loudness_lufs(sine(1000, 2.0, 48000, 0.5))
    assert loudness_lufs(sine(8000, 2.0, 48000, 0.5)) > mid + 3  # the +4 dB shelf
    assert loudness_lufs(sine(30, 2.0, 48000, 0.5)) < mid - 1  # the high pass


@pytest.mark.parametrize("target", [-16.0, -23.0])
def test_normalise_within_half_an_lu_with_the_peak_under_its_ceiling(target: float) -> None:
    rng = np.random.default_rng(3)
    t = np.arange(48000 * 4) / 48000
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 1.5 * t) ** 2
    speechy = envelope * (0.3 * np.sin(2 * np.pi * 180 * t) + 0.05 * rng.standard_normal(len(t)))
    audio = Audio(speechy.astype(np.float32) * 0.1, 48000)
    out = normalise_loudness(audio, target, -1.5)
    assert abs(loudness_lufs(out) - target) < 0.5
    assert true_peak_db(out) <= -1.5 + 1e-6


def test_normalising_a_loud_target_limits_the_peaks() -> None:
    audio = sine(440, 3.0, 48000, 0.1)
    out = normalise_loudness(audio, -6.0, -1.0)
    assert true_peak_db(out) <= -1.0 + 1e-6
    assert abs(loudness_lufs(out) - -6.0) < 1.5  # a limited sine cannot reach it exactly: it gets close


# ----- stretch and shift ---------------------------------------------------------------------------------
@pytest.mark.parametrize("factor", [0.6, 1.5])
def test_time_stretch_changes_length_not_pitch(factor: float) -> None:
    audio = sine(200, 2.0, 16000, 0.5)
    out = time_stretch(audio, factor)
    assert len(out) == round(len(audio) * factor)
    assert autocorr_f0(out) == pytest.approx(200, rel=0.03)


@pytest.mark.parametrize("semitones", [-5.0, 4.0])
def test_pitch_shift_changes_pitch_not_length(semitones: float) -> None:
    audio = sine(200, 2.0, 16000, 0.5)
    out = pitch_shift(audio, semitones)
    assert abs(len(out) - len(audio)) <= 2
    assert autocorr_f0(out) == pytest.approx(200 * 2 ** (semitones / 12), rel=0.03)
