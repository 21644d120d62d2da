"""Test media with real speech at known times: sentences synthesised by our own TTS engines, laid on a
track with silence and low noise between them, muxed by ffmpeg with its ``testsrc`` video.

Speech comes from SVOX Pico (py-nanotts, in process; Whisper transcribes it with no errors in its six
voices) for English, German, Spanish, French and Italian, and from the espeak-ng program for any other
language it speaks. Each sentence's rendered audio is trimmed of the silence the engine puts around it, so
a :class:`SpeechClip`'s ``start`` and ``end`` are where the voice starts and stops (within ~10 ms), which is
what recognised word timings are checked against.

The track is the same, sample for sample, on every run and whatever ran before in the process: the noise
comes from a seeded generator, and :func:`make_speech_audio` renders its sentences in a fresh Python process
(hash seed fixed), where the allocations before each render are always the same. py-nanotts mallocs Pico's
2.5 MB pool for every render and Pico reads some of it before writing it, so a render depends on what the
process allocated and freed before (glibc's mmap threshold grows after the first pool is freed, and later
pools come from the reused heap): in process, the same sentence came out a little different after other
renders or after Whisper had run, which was enough to move the tiny random Whisper's words in the tests
that transcribe this media. (A fixed ``MALLOC_MMAP_THRESHOLD_`` gives every render zeroed memory too, but
Whisper base then mishears one of the German test sentences.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dragoman.media.audio import Audio, resample, write_wav
from dragoman.media.ffmpeg import run_ffmpeg

RATE = 16000
#: Pico's voice for each language it speaks.
PICO_VOICES = {"en": "en-US", "de": "de-DE", "es": "es-ES", "fr": "fr-FR", "it": "it-IT"}
#: espeak-ng voices for languages whose code is not espeak-ng's own.
_ESPEAK_ALIASES = {"zh": "cmn"}
#: Pico voices that have rendered once in this process (see :func:`synthesize`).
_WARMED: set[str] = set()
#: Peak level each sentence is scaled to.
SPEECH_PEAK = 0.7
# container -> (ffmpeg muxer, audio codec, video codec or None when the container holds no video)
CONTAINERS: dict[str, tuple[str, str, str | None]] = {
    "mp4": ("mp4", "aac", "libx264"),
    "mov": ("mov", "aac", "libx264"),
    "mkv": ("matroska", "aac", "libx264"),
    "webm": ("webm", "libopus", "libvpx"),
    "m4a": ("ipod", "aac", None),
    "mp3": ("mp3", "libmp3lame", None),
    "wav": ("wav", "pcm_s16le", None),
    "ogg": ("ogg", "libvorbis", None),
    "flac": ("flac", "flac", None),
}


@dataclass(frozen=True)
class SpeechClip:
    """A sentence in the test media: its text, language, and where the voice starts and ends (seconds)."""

    text: str
    language: str
    start: float
    end: float


def synthesize(language: str, text: str) -> Audio:
    """``text`` spoken in ``language`` (Pico where it has a voice, else espeak-ng) at 16 kHz, trimmed of
    the silence around the voice."""
    from dragoman.speech.tts.engines.base import clean_text

    primary = language.split("-")[0].lower()
    if primary in PICO_VOICES:
        from dragoman.speech.tts.engines.pico import PicoEngine

        engine_pico, voice_pico = PicoEngine(), PICO_VOICES[primary]
        # Pico's pacing of a sentence depends on what it rendered before (measured: one Spanish sentence
        # lasted 2.68 s as the voice's first render, then 2.56 s after English and 2.62 s after German): each
        # voice renders once and drops it, and the same short English render goes before every sentence, so
        # a sentence comes out the same whatever came before it
        if voice_pico not in _WARMED:
            engine_pico.synthesize("One.", voice_pico)
            _WARMED.add(voice_pico)
        engine_pico.synthesize("One.", "en-US")
        audio = engine_pico.synthesize(clean_text(text), voice_pico).audio
    else:
        from dragoman.speech.tts.engines.espeak import EspeakEngine

        engine = EspeakEngine()
        wanted = _ESPEAK_ALIASES.get(primary, primary)
        voice = next((v.id for v in engine.voices() if v.id == wanted), None) or next(
            (v.id for v in engine.voices() if v.language == primary and "+" not in v.id), None
        )
        if voice is None:
            raise ValueError(f"no voice speaks {language!r} (Pico: {', '.join(PICO_VOICES)}; espeak-ng)")
        audio = engine.synthesize(clean_text(text), voice).audio
    return _trimmed(resample(audio, RATE))


def _trimmed(audio: Audio) -> Audio:
    samples = audio.samples
    if not len(samples):
        return audio
    peak = float(np.max(np.abs(samples)))
    if peak <= 0:
        return Audio(samples[:0], audio.rate)
    loud = np.flatnonzero(np.abs(samples) > 0.02 * peak)
    trimmed = samples[loud[0] : loud[-1] + 1]
    return Audio((trimmed * (SPEECH_PEAK / peak)).astype(np.float32), audio.rate)


def _render_fresh(sentences: Sequence[tuple[str, str]]) -> list[np.ndarray]:
    """Each of ``sentences`` ((language, text) pairs) through :func:`synthesize`, in order, in a new Python
    process (see the module's notes), so the renders are the same samples whatever ran before in this
    process; unknown languages raise
    :class:`ValueError` as :func:`synthesize` does."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "speech.npz"
        code = "import sys; from dragoman.testing.media import _render_main; _render_main(sys.argv[1])"
        done = subprocess.run(
            [sys.executable, "-c", code, str(out)],
            input=json.dumps([list(pair) for pair in sentences]),
            env={**os.environ, "PYTHONHASHSEED": "0"},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode == 3:
            raise ValueError(done.stdout.strip())
        if done.returncode != 0:
            raise RuntimeError(f"rendering test speech failed: {done.stderr.strip()[-2000:]}")
        with np.load(out) as arrays:
            return [arrays[f"arr_{i}"].astype(np.float32) for i in range(len(sentences))]


def _render_main(out: str) -> None:
    """The child of :func:`_render_fresh`: sentences (JSON) on stdin, the renders to ``out`` (.npz)."""
    sentences = json.loads(sys.stdin.read())
    try:
        rendered = [synthesize(language, text).samples for language, text in sentences]
    except ValueError as exc:
        sys.stdout.write(str(exc))
        sys.exit(3)
    np.savez(out, *rendered)


def make_speech_audio(
    sentences: Sequence[tuple[str, str]],
    *,
    gap: float = 1.0,
    lead: float = 0.7,
    noise_db: float | None = -40.0,
    seed: int = 15,
) -> tuple[Audio, list[SpeechClip]]:
    """A 16 kHz track of ``sentences`` ((language, text) pairs) spoken in turn: ``lead`` seconds of silence
    first and last, ``gap`` seconds between sentences, noise at ``noise_db`` dBFS RMS throughout (None: none);
    and where each sentence was placed."""
    rendered = _render_fresh(sentences)
    pieces: list[np.ndarray] = [np.zeros(round(lead * RATE), dtype=np.float32)]
    clips: list[SpeechClip] = []
    at = len(pieces[0])
    for index, (language, text) in enumerate(sentences):
        if index:
            pieces.append(np.zeros(round(gap * RATE), dtype=np.float32))
            at += len(pieces[-1])
        speech = rendered[index]
        clips.append(SpeechClip(text, language, at / RATE, (at + len(speech)) / RATE))
        pieces.append(speech)
        at += len(speech)
    pieces.append(np.zeros(round(lead * RATE), dtype=np.float32))
    track = np.concatenate(pieces)
    if noise_db is not None:
        rng = np.random.default_rng(seed)
        track = track + rng.normal(0.0, 10 ** (noise_db / 20), len(track)).astype(np.float32)
    return Audio(track.astype(np.float32), RATE), clips


def make_speech_media(
    path: str | Path,
    sentences: Sequence[tuple[str, str]],
    *,
    gap: float = 1.0,
    lead: float = 0.7,
    noise_db: float | None = -40.0,
    video: bool = True,
    container: str | None = None,
    seed: int = 15,
) -> list[SpeechClip]:
    """Write media of ``sentences`` ((language, text) pairs) to ``path`` and return where each was placed
    (see :func:`make_speech_audio`). ``container`` (default: from the suffix of ``path``, else mp4) is one of
    :data:`CONTAINERS`; video (ffmpeg's ``testsrc``, 160x120 at 10 fps, H.264 or VP8) is added where the
    container holds video and ``video`` is true; audio is AAC, Opus, MP3, PCM, Vorbis or FLAC by container."""
    path = Path(path)
    kind = (container or path.suffix.lstrip(".") or "mp4").lower()
    if kind not in CONTAINERS:
        kind = "mp4" if container is None else kind
    if kind not in CONTAINERS:
        raise ValueError(f"container {kind!r}: use one of {', '.join(CONTAINERS)}")
    muxer, audio_codec, video_codec = CONTAINERS[kind]
    audio, clips = make_speech_audio(sentences, gap=gap, lead=lead, noise_db=noise_db, seed=seed)
    with tempfile.TemporaryDirectory() as folder:
        wav = Path(folder) / "speech.wav"
        write_wav(audio, wav)
        args = ["-y", "-i", str(wav)]
        if video and video_codec is not None:
            size = f"testsrc=size=160x120:rate=10:duration={audio.duration:.3f}"
            args += ["-f", "lavfi", "-i", size, "-map", "1:v", "-map", "0:a"]
            args += ["-c:v", video_codec, "-pix_fmt", "yuv420p"]
            args += ["-preset", "ultrafast"] if video_codec == "libx264" else ["-deadline", "realtime"]
        args += ["-c:a", audio_codec, "-shortest", "-f", muxer, str(path)]
        run_ffmpeg(args, timeout=120)
    return clips
