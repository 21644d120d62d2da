"""Music between sentences gets no captions (issue 15: "silence and music left without captions"), through
the subtitles pipeline (:func:`dragoman.pipelines.subtitles.make_subtitles`, which the CLI and the MCP tool
call) with the embedded Whisper base, its VAD on as always.

The media: an English sentence (SVOX Pico, :func:`dragoman.testing.media.make_speech_audio`), one second of
silence, eight seconds of music alone, one second of silence, a second sentence, then a third sentence
spoken over a quieter bed of the same music that starts 1.5 s before it and ends 1.5 s after it; noise at
-40 dBFS throughout, in an MP4 (AAC) with ffmpeg's test video. The music is made here with numpy, the same
samples on every run: struck chords with harmonics (I-vi-IV-V), a bass line, a kick drum on the beat and a
hi-hat off it at 120 bpm, a bright lead with vibrato in eighth notes, and a hummed "aah" melody (harmonics
weighted by the formants of the vowel, the music nearest a voice), mixed to a peak of 0.6 (speech: 0.7).

Checked: no cue (and no recognised word) reaches into the music-only stretches by more than
:data:`MARGIN`; each sentence, the one over music included, starts a cue where its voice starts and is
heard with a small word error rate (0.15; 0.5 over the bed, measured 0.375: "after lunch" is heard as "a few
months"), so the music is not left empty by dropping everything near it.

Measured (Whisper base int8, beam 5): Silero VAD finds no speech in this music bar a 60 ms blip at its
first chord, and Whisper writes nothing there; with VAD off it writes nothing there either (on this music;
Whisper is known to write "Thank you." or lyrics on real recordings). Slow: two transcriptions.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from asr_support import THREE_SENTENCES, subtitles_by_language

from dragoman.media.audio import Audio, write_wav
from dragoman.media.ffmpeg import run_ffmpeg
from dragoman.pipelines.subtitles import SubtitleResult
from dragoman.speech.asr import Recognizer
from dragoman.speech.asr.score import word_error_rate
from dragoman.testing.media import RATE, SpeechClip, make_speech_audio

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="apt-get install ffmpeg"),
]

SENTENCES = THREE_SENTENCES
#: Seconds of music alone between the first two sentences, and silence either side of it.
MUSIC, QUIET = 8.0, 1.0
#: The bed under the third sentence: how far it reaches before and after the voice (seconds), its peak.
BED_REACH, BED_PEAK = 1.5, 0.25
#: How far a cue may reach into music (seconds): the pipeline's word timings sit within 0.3 s of the voice.
MARGIN = 0.3
FloatArray = npt.NDArray[np.float64]


def _decay(t: FloatArray) -> FloatArray:
    """A struck note's envelope: a 5 ms attack, then an exponential decay."""
    return np.exp(-3.0 * t) * (1.0 - np.exp(-200.0 * t))


def music(seconds: float, *, peak: float = 0.6, bpm: float = 120.0, seed: int = 7) -> FloatArray:
    """Instrumental music at 16 kHz (see the module docstring), scaled to ``peak``."""
    n = round(seconds * RATE)
    t = np.arange(n) / RATE
    beat = 60.0 / bpm
    rng = np.random.default_rng(seed)
    band = np.zeros(n)
    chords = (
        (261.63, 329.63, 392.0),
        (220.0, 261.63, 329.63),
        (174.61, 220.0, 261.63),
        (196.0, 246.94, 293.66),
    )
    for k in range(int(np.ceil(seconds / beat))):
        at = k * beat
        s, e = round(at * RATE), min(n, round((at + beat) * RATE))
        tt = t[s:e] - at
        chord = chords[(k // 4) % len(chords)]
        for f in chord:
            for h, a in ((1, 1.0), (2, 0.4), (3, 0.2)):
                band[s:e] += 0.12 * a * _decay(tt) * np.sin(2 * np.pi * f * h * tt)
        band[s:e] += 0.25 * _decay(tt) * np.sin(np.pi * chord[0] * tt)  # bass, an octave down
        kick = tt[: round(0.15 * RATE)]
        sweep = 50.0 + 100.0 * np.exp(-30.0 * kick)
        band[s : s + len(kick)] += 0.5 * np.exp(-25.0 * kick) * np.sin(2 * np.pi * sweep * kick)
        hs = round((at + beat / 2) * RATE)
        he = min(n, hs + round(0.05 * RATE))
        if hs < n:
            band[hs:he] += 0.15 * np.exp(-80.0 * (np.arange(he - hs) / RATE)) * rng.normal(0.0, 1.0, he - hs)
    # a bright lead in eighth notes, with vibrato
    lead = np.zeros(n)
    notes = (392.0, 440.0, 523.25, 440.0, 392.0, 329.63, 293.66, 329.63)
    for k in range(int(np.ceil(seconds / (beat / 2)))):
        at = k * beat / 2
        s, e = round(at * RATE), min(n, round((at + beat / 2) * RATE))
        tt = t[s:e] - at
        f = notes[k % len(notes)]
        phase = 2 * np.pi * f * tt + (f * 0.02 / 5.5) * np.sin(2 * np.pi * 5.5 * tt)
        envelope = np.minimum(1.0, tt / 0.02) * np.exp(-2.0 * tt)
        lead[s:e] = envelope * sum(np.sin(h * phase) / h for h in range(1, 8))
    # a hummed "aah" melody: a note a beat, harmonics weighted by the vowel's formants
    f0, envelope = np.zeros(n), np.zeros(n)
    hum = (196.0, 220.0, 246.94, 261.63, 246.94, 220.0, 196.0, 174.61)
    for k in range(int(np.ceil(seconds / beat))):
        at = k * beat
        s, e = round(at * RATE), min(n, round((at + beat) * RATE))
        tt = t[s:e] - at
        f0[s:e] = hum[k % len(hum)] * (1.0 + 0.01 * np.sin(2 * np.pi * 5.5 * tt))
        envelope[s:e] = np.minimum(1.0, tt / 0.05) * np.minimum(1.0, np.maximum(0.0, beat - tt) / 0.05)
    phase = np.cumsum(2 * np.pi * f0 / RATE)
    voice = np.zeros(n)
    for h in range(1, 35):
        fh = h * f0
        weight = sum(
            g / (1.0 + ((fh - fc) / bw) ** 2)
            for fc, bw, g in ((700, 90, 1.0), (1220, 100, 0.5), (2600, 150, 0.25))
        )
        voice += weight * np.sin(h * phase) * (fh < 7900)
    voice *= envelope
    mix = (
        band / np.max(np.abs(band)) + 0.5 * lead / np.max(np.abs(lead)) + 0.5 * voice / np.max(np.abs(voice))
    )
    fade = round(0.05 * RATE)
    mix[:fade] *= np.linspace(0.0, 1.0, fade)
    mix[-fade:] *= np.linspace(1.0, 0.0, fade)
    return np.asarray(mix * (peak / np.max(np.abs(mix))), dtype=np.float64)


def _media(path: Path) -> tuple[list[SpeechClip], list[tuple[float, float]], list[tuple[float, float]]]:
    """Write the media (see the module docstring); answer where each sentence is, where the music plays
    alone, and where the bed under the third sentence plays."""
    gaps = (QUIET + MUSIC + QUIET, BED_REACH + 0.5)
    audio, clips = make_speech_audio([("en", s) for s in SENTENCES], gap=max(gaps), lead=BED_REACH + 0.7)
    samples = audio.samples.astype(np.float64)
    # the track's gaps are all max(gaps) long; the music sits QUIET after the first sentence ends
    start = clips[0].end + QUIET
    alone = music(MUSIC)
    at = round(start * RATE)
    samples[at : at + len(alone)] += alone
    bed_start, bed_end = clips[2].start - BED_REACH, clips[2].end + BED_REACH
    bed = music(bed_end - bed_start, peak=BED_PEAK, seed=8)
    at = round(bed_start * RATE)
    samples[at : at + len(bed)] += bed[: len(samples) - at]
    with tempfile.TemporaryDirectory() as folder:
        wav = Path(folder) / "track.wav"
        write_wav(Audio(samples.astype(np.float32), RATE), wav)
        size = f"testsrc=size=160x120:rate=10:duration={len(samples) / RATE:.3f}"
        args = ["-y", "-i", str(wav), "-f", "lavfi", "-i", size, "-map", "1:v", "-map", "0:a"]
        args += ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-preset", "ultrafast", "-c:a", "aac"]
        run_ffmpeg([*args, "-shortest", "-f", "mp4", str(path)], timeout=120)
    music_alone = [
        (start, start + MUSIC),
        (bed_start, clips[2].start),  # the bed before and after the third sentence's voice
        (clips[2].end, bed_end),
    ]
    return clips, music_alone, [(bed_start, bed_end)]


@pytest.fixture(scope="module")
def subtitled(
    tmp_path_factory: pytest.TempPathFactory, base_recognizer: Recognizer
) -> dict[str, tuple[SubtitleResult, list[SpeechClip], list[tuple[float, float]]]]:
    folder = tmp_path_factory.mktemp("music")
    media = folder / "music.mp4"
    clips, music_alone, _ = _media(media)
    results = subtitles_by_language(media, base_recognizer, folder)
    return {language: (result, clips, music_alone) for language, result in results.items()}


@pytest.mark.parametrize("language", ["en", "auto"])
def test_no_cue_over_music_and_every_sentence_captioned(
    subtitled: dict[str, tuple[SubtitleResult, list[SpeechClip], list[tuple[float, float]]]], language: str
) -> None:
    result, clips, music_alone = subtitled[language]
    cues = result.tracks[0].cues
    shown = [(round(c.start, 2), round(c.end, 2), c.text) for c in cues]
    print(f"\n{language}: music alone {[(round(a, 2), round(b, 2)) for a, b in music_alone]}; cues {shown}")
    assert result.transcript.language == "en"
    for lo, hi in music_alone:
        inside = (lo + MARGIN, hi - MARGIN)
        assert not [c for c in cues if c.start < inside[1] and c.end > inside[0]], (lo, hi, shown)
        words = [w for w in result.transcript.words if w.start < inside[1] and w.end > inside[0]]
        assert not words, (lo, hi, words)
    # every sentence is captioned, the one spoken over music too, where its voice starts
    for clip in clips:
        assert any(abs(c.start - clip.start) <= MARGIN for c in cues), (clip, shown)
        heard = " ".join(c.text for c in cues if clip.start - MARGIN <= c.start <= clip.end)
        bound = 0.5 if clip is clips[2] else 0.15
        assert word_error_rate(clip.text, heard) <= bound, (clip.text, heard)
    srt = result.paths[0].read_text(encoding="utf-8")
    assert srt.count(" --> ") == len(cues)
