"""Voice matching ("clones", issue 14; spec 2.8, 4.2 and 8).

**What this is, plainly.** No neural identity-cloning model installs offline, so a "clone" here is a *voice
match*: the reference clip is analysed (pitch, spectral envelope) and the nearest of the ten voices is chosen
and adapted to the reference's median pitch and formant scale. The result sounds like the chosen voice moved
toward the reference's register and vocal-tract length; it does not reproduce the speaker's identity. Each
clone reports a similarity figure (:func:`similarity`) measured between the reference and a render of the
matched, adapted voice, next to the same figure for the unadapted voice, so the gain is visible and honest.

**Validation** (:func:`analyse_reference`), in this order:

1. decode: a WAV (:func:`~dragoman.media.audio.read_wav`), else any audio (or video with audio) libav reads
   (mp3, m4a/AAC, ogg/Opus/Vorbis, flac, webm, …), decoded in process with PyAV
   (:func:`dragoman.media.decode.decode_audio`; at most :data:`MAX_DECODED_S` seconds of it: a longer clip is
   400); anything else (not media, corrupt, no audio stream, no samples) is
   :class:`~dragoman.errors.AudioFormatError` (415);
2. mixed to mono and resampled to 16 kHz;
3. silence: a clip whose loudest 20 ms frames are below −55 dBFS is refused (400, "silent");
4. noise: the signal-to-noise estimate (95th percentile frame level minus the 10th, the floor) under
   :data:`MIN_SNR_DB` is refused (400, "too noisy", with the figure);
5. denoise: a spectral gate (per-frequency noise floor from the quietest frames, a soft Wiener-style gain
   with a −18 dB floor so speech is never gated to nothing). RNNoise (``pyrnnoise`` 0.4.5, Apache-2.0, a
   wheel on PyPI) keeps speech better but pulls in matplotlib and audiolab, so it is not a dependency and
   the gate is what runs;
6. silence trimming: Silero VAD through faster-whisper when faster-whisper is installed, else an energy VAD
   (20 ms frames; speech is above ``max(floor + 10 dB, peak − 35 dB)``; gaps under 200 ms bridged, islands
   under 60 ms dropped, 50 ms kept each side of speech, pauses shortened to at most 250 ms);
7. duration after trimming: 3–20 s (:data:`MIN_CLIP_S`, :data:`MAX_CLIP_S`) else 400 with the measured
   duration;
8. F0: pyworld's harvest when pyworld is installed (MIT; 0.3.5 is an sdist needing a C++ build, so not a
   dependency), else normalised autocorrelation (40 ms frames, 50–500 Hz, shortest lag within 15 % of the
   best peak); gender from the median F0: < 150 Hz male, > 165 Hz female, else ``"ambiguous"`` (both
   genders' voices are then candidates).

**Matching** (:func:`match_voice`): every candidate persona renders a fixed calibration passage in the
matching language (English by default); its median F0 and mean spectral envelope (cepstrally smoothed log
spectrum) are measured. The formant scale is the factor in 0.85–1.18 that best maps the persona's envelope
onto the reference's; the persona chosen is the one needing the smallest pitch move (in semitones) plus
envelope mismatch; the pitch offset is the remaining semitone difference (held within ±12).

**Rendering** (:func:`synthesize_with_clone`): the persona renders with its pitch moved by the clone's offset
(engine prosody) and its rate and pitch pre-compensated for the formant scale, then the audio is resampled by
the scale (formants move, pitch and pace come back) — the same device the voices use for timbre.

**Storage**: :class:`LocalCloneStore` keeps clones for the CLI and MCP under the user's data directory
(``platformdirs``): ``clones/<id>/clone.json`` and ``reference.wav`` (the cleaned clip), at most
:data:`MAX_CLONES` (the 26th is :class:`~dragoman.errors.CloneLimitReached`, 409); removing a clone deletes
its clip. Clips are the user's data: nothing here logs them or their contents.
"""

from __future__ import annotations

import importlib
import json
import math
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

import numpy as np
import numpy.typing as npt

from dragoman.errors import AudioFormatError, CloneLimitReached, CloneNotFound, FileTooLarge, InvalidRequest
from dragoman.media.audio import Audio, read_wav, resample, wav_bytes
from dragoman.speech.tts.types import NEUTRAL, Emotion, SynthesisOptions, SynthesisResult
from dragoman.speech.tts.voices import PERSONAS

if TYPE_CHECKING:
    from dragoman.progress import JobContext
    from dragoman.speech.tts.synth import Synthesizer

FloatArray = npt.NDArray[np.float64]
Gender = Literal["female", "male", "ambiguous"]

# ----- limits (spec 8) ------------------------------------------------------------------------------------
MIN_CLIP_S: Final = 3.0
MAX_CLIP_S: Final = 20.0
MAX_CLONES: Final = 25
#: The most bytes a reference upload may have (20 s of 48 kHz 32-bit stereo WAV is 7.7 MB; compressed less).
MAX_CLIP_BYTES: Final = 32 * 1024 * 1024
#: The most seconds of a compressed clip that are decoded (a few bytes of mp3 may hold hours): a clip that
#: lasts longer is refused (400) before analysis; 20 s of speech rarely needs more than a minute of recording.
MAX_DECODED_S: Final = 300.0
#: Below this signal-to-noise estimate (dB) a clip is refused as too noisy.
MIN_SNR_DB: Final = 12.0
#: The loudest frames below this (dBFS) make a clip silent.
SILENT_DBFS: Final = -55.0
MALE_BELOW_HZ: Final = 150.0
FEMALE_ABOVE_HZ: Final = 165.0
ANALYSIS_RATE: Final = 16_000
FORMANT_RANGE: Final = (0.85, 1.18)
PITCH_RANGE_ST: Final = (-12.0, 12.0)
CALIBRATION_TEXT: Final = {
    "en": "The quick brown fox jumps over the lazy dog. She sells sea shells by the sea shore every morning.",
}

_FRAME_S: Final = 0.02
_HOP_S: Final = 0.01


# ----- decoding -------------------------------------------------------------------------------------------
def decode_clip(data: bytes) -> Audio:
    """The clip as mono audio at 16 kHz: a WAV read in process, anything else decoded in process by PyAV
    (:func:`_libav_decode`). Not audio: :class:`AudioFormatError` (415)."""
    if len(data) > MAX_CLIP_BYTES:
        raise FileTooLarge(f"the reference clip is {len(data)} bytes; the most is {MAX_CLIP_BYTES}")
    if not data:
        raise AudioFormatError("the reference clip is empty")
    try:
        audio = read_wav(data)
    except AudioFormatError:
        audio = _libav_decode(data)
    return resample(audio, ANALYSIS_RATE) if audio.rate != ANALYSIS_RATE else audio


def _libav_decode(data: bytes) -> Audio:
    """``data`` (any format libav reads) as mono at 16 kHz, through :func:`dragoman.media.decode.decode_audio`
    on a private temporary file (deleted at once; the clip is the user's data). Media errors are 415, a clip
    longer than :data:`MAX_DECODED_S` is 400."""
    from dragoman.errors import EmptyMedia, FileAccessError, MediaFormatError, NoAudioStream
    from dragoman.media.decode import decode_audio

    refused = "the reference clip is not audio in a format we read (WAV, MP3, M4A/AAC, Ogg, FLAC, WebM, …)"
    with tempfile.NamedTemporaryFile(prefix="dragoman-clip-", suffix=".bin") as handle:
        handle.write(data)
        handle.flush()
        try:
            audio = decode_audio(handle.name, rate=ANALYSIS_RATE, max_seconds=MAX_DECODED_S + 1.0)
        except NoAudioStream:
            raise AudioFormatError(f"{refused}: it holds no audio stream") from None
        except EmptyMedia:
            raise AudioFormatError(f"{refused}: it holds no audio samples") from None
        except (MediaFormatError, FileAccessError):
            raise AudioFormatError(refused) from None
    if audio.duration > MAX_DECODED_S:
        raise InvalidRequest(
            f"the reference clip lasts more than {MAX_DECODED_S:g} s; send 3 to {MAX_CLIP_S:g} s of speech"
        )
    return audio


# ----- framing and levels ---------------------------------------------------------------------------------
def _frames(x: FloatArray, size: int, hop: int) -> FloatArray:
    if len(x) < size:
        return np.zeros((0, size))
    count = 1 + (len(x) - size) // hop
    idx = np.arange(size)[None, :] + hop * np.arange(count)[:, None]
    frames: FloatArray = x[idx]
    return frames


def frame_levels(audio: Audio) -> FloatArray:
    """Level (dBFS) of each 20 ms frame, hop 10 ms."""
    x = audio.samples.astype(np.float64)
    size, hop = round(_FRAME_S * audio.rate), round(_HOP_S * audio.rate)
    frames = _frames(x, size, hop)
    levels: FloatArray = 10 * np.log10(np.mean(frames * frames, axis=1) + 1e-12)
    return levels


def snr_db(audio: Audio) -> float:
    """A signal-to-noise estimate: the 95th percentile frame level minus the 10th (the noise floor)."""
    levels = frame_levels(audio)
    if len(levels) == 0:
        return 0.0
    return float(np.percentile(levels, 95) - np.percentile(levels, 10))


# ----- denoising: spectral gate ---------------------------------------------------------------------------
def denoise(audio: Audio) -> Audio:
    """A spectral gate: per frequency, the noise magnitude is the 10th percentile over frames; each bin is
    scaled by ``max(0.125, 1 − (noise·1.5 / magnitude)²)`` (a −18 dB floor keeps speech natural), then
    overlap-added (Hann, 32 ms, hop 8 ms). Clean audio (noise floor near zero) comes back nearly unchanged."""
    x = audio.samples.astype(np.float64)
    size = 512 if audio.rate <= 16000 else 1024
    hop = size // 4
    if len(x) < size * 2:
        return audio
    pad = np.concatenate([np.zeros(size), x, np.zeros(size)])
    window = np.hanning(size + 1)[:size]
    frames = _frames(pad, size, hop) * window
    spec = np.fft.rfft(frames, axis=1)
    mag = np.abs(spec)
    noise = np.percentile(mag, 10, axis=0)
    gain = np.maximum(0.125, 1.0 - (1.5 * noise[None, :] / np.maximum(mag, 1e-12)) ** 2)
    cleaned = np.fft.irfft(spec * gain, size, axis=1) * window
    out = np.zeros(len(pad))
    norm = np.zeros(len(pad))
    for i, frame in enumerate(cleaned):
        out[i * hop : i * hop + size] += frame
        norm[i * hop : i * hop + size] += window * window
    out = out / np.maximum(norm, 1e-6)
    return Audio(out[size : size + len(x)].astype(np.float32), audio.rate)


# ----- silence trimming -----------------------------------------------------------------------------------
def speech_regions(audio: Audio) -> list[tuple[int, int]]:
    """Sample ranges of speech: Silero VAD (faster-whisper) when installed, else the energy VAD (module
    docstring)."""
    regions = _silero_regions(audio)
    return regions if regions is not None else _energy_regions(audio)


def _silero_regions(audio: Audio) -> list[tuple[int, int]] | None:
    try:
        vad = importlib.import_module("faster_whisper.vad")
    except ImportError:
        return None
    try:
        samples = resample(audio, 16000).samples if audio.rate != 16000 else audio.samples
        options = vad.VadOptions(min_silence_duration_ms=250, speech_pad_ms=50)
        stamps = vad.get_speech_timestamps(samples, options)
        scale = audio.rate / 16000
        return [(int(s["start"] * scale), int(s["end"] * scale)) for s in stamps]
    except Exception:  # a broken optional install falls back to the energy VAD
        return None


def _energy_regions(audio: Audio) -> list[tuple[int, int]]:
    levels = frame_levels(audio)
    if len(levels) == 0:
        return []
    floor, peak = float(np.percentile(levels, 10)), float(np.percentile(levels, 99))
    threshold = max(floor + 10.0, peak - 35.0)
    speech = levels > threshold
    hop = round(_HOP_S * audio.rate)
    size = round(_FRAME_S * audio.rate)
    runs: list[list[int]] = []
    for i, flag in enumerate(speech):
        if not flag:
            continue
        if runs and i - runs[-1][1] <= 20:  # bridge gaps under 200 ms
            runs[-1][1] = i
        else:
            runs.append([i, i])
    pad = round(0.05 * audio.rate)
    regions = []
    for first, last in runs:
        if last - first + 1 < 6:  # islands under 60 ms: clicks, not speech
            continue
        start = max(0, first * hop - pad)
        end = min(len(audio.samples), last * hop + size + pad)
        regions.append((start, end))
    return regions


def trim_silence(audio: Audio) -> Audio:
    """The speech regions joined, each pause between them kept to at most 250 ms."""
    regions = speech_regions(audio)
    if not regions:
        return Audio(np.zeros(0, dtype=np.float32), audio.rate)
    longest = round(0.25 * audio.rate)
    parts: list[npt.NDArray[np.float32]] = []
    previous_end: int | None = None
    for start, end in regions:
        if previous_end is not None:
            start = max(start, previous_end)
            gap = start - previous_end
            if gap > longest:
                parts.append(audio.samples[previous_end : previous_end + longest // 2])
                parts.append(audio.samples[start - longest // 2 : start])
            else:
                parts.append(audio.samples[previous_end:start])
        parts.append(audio.samples[start:end])
        previous_end = end
    return Audio(np.concatenate(parts).astype(np.float32), audio.rate)


# ----- pitch ----------------------------------------------------------------------------------------------
def f0_track(audio: Audio, low: float = 50.0, high: float = 500.0) -> FloatArray:
    """F0 (Hz) of each voiced frame: pyworld's harvest when installed, else normalised autocorrelation."""
    track = _harvest(audio, low, high)
    return track if track is not None else _autocorrelation_f0(audio, low, high)


def _harvest(audio: Audio, low: float, high: float) -> FloatArray | None:
    try:
        pyworld = importlib.import_module("pyworld")
    except ImportError:
        return None
    x = audio.samples.astype(np.float64)
    f0, _ = pyworld.harvest(x, audio.rate, f0_floor=low, f0_ceil=high, frame_period=10.0)
    voiced: FloatArray = np.asarray(f0, dtype=np.float64)
    return voiced[voiced > 0]


def _autocorrelation_f0(audio: Audio, low: float, high: float) -> FloatArray:
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
    if len(frames) == 0:
        return np.zeros(0)
    n = 1 << (2 * size - 1).bit_length()
    spec = np.fft.rfft(frames, n, axis=1)
    ac = np.fft.irfft(spec * np.conj(spec), n, axis=1)[:, :size]
    window_ac = np.fft.irfft(np.abs(np.fft.rfft(np.hanning(size), n)) ** 2, n)[:size]
    ac = ac / np.maximum(window_ac[None, :], 1e-12)
    ac = ac / np.maximum(ac[:, :1], 1e-12)
    lo, hi = int(rate / high), min(size - 2, int(rate / low))
    region = ac[:, lo:hi]
    best = region.max(axis=1, keepdims=True)
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
    return np.asarray(out, dtype=np.float64)


def f0_median(audio: Audio) -> float:
    track = f0_track(audio)
    return float(np.median(track)) if len(track) >= 5 else 0.0


def gender_of(f0: float) -> Gender:
    """Below 150 Hz male, above 165 Hz female, between (or no pitch found): ambiguous."""
    if f0 <= 0:
        return "ambiguous"
    if f0 < MALE_BELOW_HZ:
        return "male"
    if f0 > FEMALE_ABOVE_HZ:
        return "female"
    return "ambiguous"


# ----- spectral envelope and MFCC -------------------------------------------------------------------------
def _power_frames(audio: Audio, size: int = 512) -> FloatArray:
    x = audio.samples.astype(np.float64)
    frames = _frames(x, size, size // 2)
    if len(frames) == 0:
        return np.zeros((0, size // 2 + 1))
    energy = (frames * frames).sum(axis=1)
    loud = energy > energy.max() * 10 ** (-30 / 10)
    power: FloatArray = np.abs(np.fft.rfft(frames[loud] * np.hanning(size)[None, :], axis=1)) ** 2
    return power


def envelope(audio: Audio) -> FloatArray:
    """Mean spectral envelope of the speech (16 kHz, 257 bins to 8 kHz): the log power spectrum averaged over
    the loud frames, cepstrally smoothed (the first 30 quefrency bins), mean level removed."""
    audio = resample(audio, ANALYSIS_RATE) if audio.rate != ANALYSIS_RATE else audio
    power = _power_frames(audio)
    if len(power) == 0:
        return np.zeros(257)
    log = np.log(power.mean(axis=0) + 1e-10)
    cep = np.fft.irfft(log)
    cep[30:-29] = 0.0
    smooth = np.fft.rfft(cep).real[: len(log)]
    centred: FloatArray = smooth - smooth.mean()
    return centred


def _warped(env: FloatArray, scale: float) -> FloatArray:
    """The envelope of the same voice with every formant times ``scale``: E'(f) = E(f / scale)."""
    bins = np.arange(len(env))
    warped: FloatArray = np.interp(bins / scale, bins, env)
    return warped


def _band(env: FloatArray) -> FloatArray:
    lo, hi = int(200 / 8000 * (len(env) - 1)), int(5000 / 8000 * (len(env) - 1))
    part = env[lo:hi]
    centred: FloatArray = part - part.mean()
    return centred


def formant_scale(reference: FloatArray, voice: FloatArray) -> tuple[float, float]:
    """(scale, rms mismatch): the formant scale in :data:`FORMANT_RANGE` that best maps ``voice``'s envelope
    onto ``reference``'s (200 Hz – 5 kHz), and the mismatch left (natural-log units)."""
    best = (1.0, math.inf)
    for scale in np.arange(FORMANT_RANGE[0], FORMANT_RANGE[1] + 1e-9, 0.01):
        diff = _band(reference) - _band(_warped(voice, float(scale)))
        err = float(np.sqrt(np.mean(diff * diff)))
        if err < best[1]:
            best = (round(float(scale), 3), err)
    return best


def _mel_filters(n_fft: int, rate: int, count: int = 26) -> FloatArray:
    def mel(f: FloatArray | float) -> FloatArray:
        return np.asarray(2595 * np.log10(1 + np.asarray(f) / 700))

    def hz(m: FloatArray) -> FloatArray:
        return np.asarray(700 * (10 ** (m / 2595) - 1))

    points = hz(np.linspace(mel(60.0), mel(rate / 2 * 0.95), count + 2))
    bins = np.floor((n_fft + 1) * points / rate).astype(int)
    filters = np.zeros((count, n_fft // 2 + 1))
    for i in range(count):
        a, b, c = bins[i], bins[i + 1], bins[i + 2]
        for k in range(a, b):
            filters[i, k] = (k - a) / max(1, b - a)
        for k in range(b, c):
            filters[i, k] = (c - k) / max(1, c - b)
    return filters


def mean_mfcc(audio: Audio, count: int = 13) -> FloatArray:
    """The mean of MFCCs 1..``count``−1 over the loud frames (16 kHz, 32 ms frames, 26 mel bands)."""
    audio = resample(audio, ANALYSIS_RATE) if audio.rate != ANALYSIS_RATE else audio
    power = _power_frames(audio)
    if len(power) == 0:
        return np.zeros(count - 1)
    logmel = np.log(power @ _mel_filters(512, ANALYSIS_RATE).T + 1e-10)
    n = logmel.shape[1]
    basis = np.cos(np.pi / n * (np.arange(n)[None, :] + 0.5) * np.arange(count)[:, None])
    mfcc = logmel @ basis.T
    mean: FloatArray = mfcc.mean(axis=0)[1:]
    return mean


def similarity(a: Audio, b: Audio) -> float:
    """Cosine similarity of the mean MFCCs (1–12) of two recordings: 1.0 the same average timbre. A coarse
    figure: any two voices of one gender score fairly high; it says how far matching moved the voice, not
    whether it is the same person."""
    x, y = mean_mfcc(a), mean_mfcc(b)
    denom = float(np.linalg.norm(x) * np.linalg.norm(y))
    return round(float(np.dot(x, y)) / denom, 4) if denom > 0 else 0.0


# ----- analysis of a reference ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ReferenceAnalysis:
    """A validated reference: the cleaned, trimmed clip (16 kHz), its length, F0, gender and SNR estimate."""

    audio: Audio
    seconds: float
    f0_median: float
    gender: Gender
    snr_db: float


def analyse_reference(data: bytes) -> ReferenceAnalysis:
    """Decode, validate, denoise, trim and measure a reference clip (module docstring for each step)."""
    raw = decode_clip(data)
    levels = frame_levels(raw)
    if len(levels) == 0 or float(levels.max()) < SILENT_DBFS:
        raise InvalidRequest("the reference clip is silent: no speech was found in it")
    snr = snr_db(raw)
    if snr < MIN_SNR_DB:
        raise InvalidRequest(
            f"the reference clip is too noisy: its signal-to-noise estimate is {snr:.1f} dB; "
            f"at least {MIN_SNR_DB:g} dB is needed (record closer to the microphone, in a quieter room)"
        )
    cleaned = denoise(raw)
    trimmed = trim_silence(cleaned)
    seconds = round(trimmed.duration, 2)
    if seconds == 0:
        raise InvalidRequest("the reference clip is silent: no speech was found in it")
    if not MIN_CLIP_S <= seconds <= MAX_CLIP_S:
        raise InvalidRequest(
            f"the reference clip has {seconds:.2f} s of speech after silence trimming; "
            f"it must have {MIN_CLIP_S:g} to {MAX_CLIP_S:g} s"
        )
    f0 = f0_median(trimmed)
    return ReferenceAnalysis(trimmed, seconds, round(f0, 1), gender_of(f0), round(snr, 1))


# ----- matching -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Calibration:
    f0: float
    envelope: FloatArray


_CALIBRATIONS: dict[tuple[int, str, str], _Calibration] = {}
_CALIBRATION_LOCK = threading.Lock()


def _calibration(synth: Synthesizer, persona: str, language: str) -> _Calibration:
    key = (id(synth), persona, language)
    with _CALIBRATION_LOCK:
        found = _CALIBRATIONS.get(key)
    if found is not None:
        return found
    text = CALIBRATION_TEXT.get(language, CALIBRATION_TEXT["en"])
    audio = synth.synthesize(text, SynthesisOptions(persona, language)).audio
    made = _Calibration(f0_median(audio), envelope(audio))
    with _CALIBRATION_LOCK:
        _CALIBRATIONS[key] = made
    return made


@dataclass(frozen=True)
class VoiceMatch:
    persona: str
    pitch_st: float
    formant: float
    similarity: float
    similarity_unmatched: float


def match_voice(reference: ReferenceAnalysis, synth: Synthesizer, language: str = "en") -> VoiceMatch:
    """The nearest persona and its pitch and formant offsets (module docstring), with the similarity of a
    render of the adapted voice to the reference, and of the persona unadapted."""
    genders = {"female", "male"} if reference.gender == "ambiguous" else {reference.gender}
    ref_env = envelope(reference.audio)
    best: tuple[float, str, float, float] | None = None
    for persona in (p for p in PERSONAS.values() if p.gender in genders):
        cal = _calibration(synth, persona.name, language)
        scale, mismatch = formant_scale(ref_env, cal.envelope)
        pitch = (
            12 * math.log2(reference.f0_median / cal.f0) if reference.f0_median > 0 and cal.f0 > 0 else 0.0
        )
        score = abs(pitch) / 2.0 + mismatch + abs(math.log(scale)) * 2.0
        if best is None or score < best[0]:
            best = (score, persona.name, pitch, scale)
    assert best is not None
    _, name, pitch, scale = best
    pitch = round(min(max(pitch, PITCH_RANGE_ST[0]), PITCH_RANGE_ST[1]), 2)
    text = CALIBRATION_TEXT.get(language, CALIBRATION_TEXT["en"])
    plain = synth.synthesize(text, SynthesisOptions(name, language)).audio
    adapted = render_adapted(synth, text, SynthesisOptions(name, language), pitch, scale).audio
    return VoiceMatch(
        persona=name,
        pitch_st=pitch,
        formant=scale,
        similarity=similarity(reference.audio, adapted),
        similarity_unmatched=similarity(reference.audio, plain),
    )


# ----- the clone record and rendering ---------------------------------------------------------------------
@dataclass(frozen=True)
class Clone:
    """A voice match: its id (UUID), name and description, the reference's gender and median F0, the persona
    chosen and its offsets, the similarity figures, the trimmed reference's length and when it was made."""

    id: str
    name: str
    description: str
    gender: str
    f0_median: float
    persona: str
    pitch_st: float
    formant: float
    similarity: float
    similarity_unmatched: float
    reference_seconds: float
    created_at: float
    method: str = "voice matching (nearest voice adapted to the reference's pitch and formants)"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Clone:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})  # type: ignore[arg-type]


def check_name(name: str, description: str = "") -> tuple[str, str]:
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise InvalidRequest("a clone needs a name of 1 to 100 characters")
    description = (description or "").strip()
    if len(description) > 1000:
        raise InvalidRequest("a clone's description has at most 1000 characters")
    return name, description


def make_clone(
    data: bytes, name: str, description: str, synth: Synthesizer, language: str = "en"
) -> tuple[Clone, Audio]:
    """Validate and analyse ``data`` and match a voice: the record and the cleaned clip (to store)."""
    name, description = check_name(name, description)
    reference = analyse_reference(data)
    match = match_voice(reference, synth, language)
    clone = Clone(
        id=str(uuid.uuid4()),
        name=name,
        description=description,
        gender=reference.gender,
        f0_median=reference.f0_median,
        persona=match.persona,
        pitch_st=match.pitch_st,
        formant=match.formant,
        similarity=match.similarity,
        similarity_unmatched=match.similarity_unmatched,
        reference_seconds=reference.seconds,
        created_at=time.time(),
    )
    return clone, reference.audio


def _clamp(value: float, bounds: tuple[float, float]) -> float:
    return min(max(value, bounds[0]), bounds[1])


def adapted_options(options: SynthesisOptions, pitch_st: float, formant: float) -> SynthesisOptions:
    """``options`` with the emotion refined so the engine renders ``pitch_st − 12·log2(formant)`` semitones
    higher and ``1/formant`` times as fast: after :func:`~dragoman.speech.tts.synth.formant_shift` by
    ``formant`` the pitch is ``pitch_st`` higher, the pace as asked, and the formants times ``formant``."""
    base = options.emotion or NEUTRAL
    compensation = 12 * math.log2(formant)
    emotion = Emotion(
        speed_ratio=_clamp(base.speed_ratio / formant, (0.5, 2.0)),
        pitch_delta_st=_clamp(base.pitch_delta_st + pitch_st - compensation, (-12.0, 12.0)),
        energy_ratio=base.energy_ratio,
        pause_scale=base.pause_scale,
    )
    return replace(options, emotion=emotion)


def render_adapted(
    synth: Synthesizer,
    text: str,
    options: SynthesisOptions,
    pitch_st: float,
    formant: float,
    context: JobContext | None = None,
) -> SynthesisResult:
    """``options``' persona moved by ``pitch_st`` semitones with its formants times ``formant``
    (:func:`adapted_options`, then the audio played ``formant`` times faster)."""
    from dragoman.speech.tts.engines import WordTiming
    from dragoman.speech.tts.synth import formant_shift

    result = synth.synthesize(text, adapted_options(options, pitch_st, formant), context)
    audio = formant_shift(result.audio, formant)
    words = result.words
    if words is not None and formant != 1.0:
        words = tuple(WordTiming(w.word, w.start / formant, w.end / formant) for w in words)
    return replace(result, audio=audio, words=words, options=options)


def stream_with_clone(
    synth: Synthesizer,
    text: str,
    options: SynthesisOptions,
    clone: Clone,
    context: JobContext | None = None,
) -> Iterator[Audio]:
    """:meth:`Synthesizer.stream` in the clone's matched voice (each chunk formant-shifted). Everything that
    can be refused is refused before the first chunk, as there."""
    from dragoman.speech.tts.synth import formant_shift

    options = replace(options, voice=clone.persona, clone_id=clone.id)
    chunks = synth.stream(text, adapted_options(options, clone.pitch_st, clone.formant), context)
    return (formant_shift(chunk, clone.formant) for chunk in chunks)


def synthesize_with_clone(
    synth: Synthesizer,
    text: str,
    options: SynthesisOptions,
    clone: Clone,
    context: JobContext | None = None,
) -> SynthesisResult:
    """A render in the clone's matched voice: the clone's persona overrides ``options.voice`` (spec 4.2:
    voiceId stays required, the clone overrides it); speed, emotion and studio apply as usual."""
    options = replace(options, voice=clone.persona, clone_id=clone.id)
    result = render_adapted(synth, text, options, clone.pitch_st, clone.formant, context)
    note = (
        f"voice matched to clone {clone.id} ({clone.persona} adapted: {clone.pitch_st:+.1f} st, "
        f"formants ×{clone.formant:g})"
    )
    return replace(result, notes=(*result.notes, note))


# ----- local storage (CLI, MCP) ---------------------------------------------------------------------------
def default_clone_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("dragoman")) / "clones"


class LocalCloneStore:
    """Clones on this machine: ``<root>/<id>/clone.json`` and ``reference.wav``; at most 25."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or default_clone_dir()
        self._lock = threading.Lock()

    def _dir(self, clone_id: str) -> Path:
        try:
            canonical = str(uuid.UUID(clone_id))
        except (ValueError, AttributeError, TypeError):
            raise CloneNotFound(f"no clone {clone_id!r}") from None
        return self.root / canonical

    def list(self) -> list[Clone]:
        if not self.root.is_dir():
            return []
        found = []
        for record in sorted(self.root.glob("*/clone.json")):
            try:
                found.append(Clone.from_dict(json.loads(record.read_text(encoding="utf-8"))))
            except (OSError, ValueError, TypeError):
                continue
        return sorted(found, key=lambda c: c.created_at)

    def get(self, clone_id: str) -> Clone:
        record = self._dir(clone_id) / "clone.json"
        if not record.is_file():
            raise CloneNotFound(f"no clone {clone_id!r}")
        return Clone.from_dict(json.loads(record.read_text(encoding="utf-8")))

    def clip_path(self, clone_id: str) -> Path:
        return self._dir(clone_id) / "reference.wav"

    def add(self, clone: Clone, clip: Audio) -> Clone:
        with self._lock:
            if len(self.list()) >= MAX_CLONES:
                raise CloneLimitReached(
                    f"you have {MAX_CLONES} clones, the most there may be; remove one first"
                )
            folder = self._dir(clone.id)
            folder.mkdir(parents=True, exist_ok=False)
            (folder / "reference.wav").write_bytes(wav_bytes(clip))
            tmp = folder / "clone.json.part"
            tmp.write_text(json.dumps(clone.to_dict(), ensure_ascii=False, indent=2), encoding="utf-8")
            tmp.replace(folder / "clone.json")
        return clone

    def create(
        self, data: bytes, name: str, description: str, synth: Synthesizer, language: str = "en"
    ) -> Clone:
        if len(self.list()) >= MAX_CLONES:  # refused before any analysis
            raise CloneLimitReached(f"you have {MAX_CLONES} clones, the most there may be; remove one first")
        clone, clip = make_clone(data, name, description, synth, language)
        return self.add(clone, clip)

    def remove(self, clone_id: str) -> None:
        folder = self._dir(clone_id)
        if not (folder / "clone.json").is_file():
            raise CloneNotFound(f"no clone {clone_id!r}")
        shutil.rmtree(folder)


def persona_names() -> Sequence[str]:
    return tuple(PERSONAS)
