"""Voice matching ("clones", issue 14): reference checks, gender, matching, the 25-clone limit, storage."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from speech_support import f0_median, synthesizer

from dragoman.errors import AudioFormatError, CloneLimitReached, CloneNotFound, InvalidRequest
from dragoman.media.audio import Audio, wav_bytes
from dragoman.speech.tts import clones
from dragoman.speech.tts.types import SynthesisOptions
from dragoman.speech.tts.voices import PERSONAS

SENTENCES = [
    "Hello there, this is a reference recording for voice matching.",
    "It has several sentences, so that it lasts long enough.",
    "We speak clearly and not too fast, in a quiet room.",
    "The numbers one, two and three are spoken as well.",
]


@functools.cache
def speech(voice: str, count: int = 3) -> Audio:
    text = " ".join((SENTENCES * 10)[:count])
    return synthesizer().synthesize(text, SynthesisOptions(voice, "en")).audio


def _with_silence(audio: Audio, seconds: float) -> Audio:
    pad = np.zeros(round(seconds * audio.rate), dtype=np.float32)
    return Audio(np.concatenate([pad, audio.samples, pad]), audio.rate)


def test_a_female_reference_is_female_and_matches_a_female_voice() -> None:
    clone, clip = clones.make_clone(wav_bytes(speech("lyra")), "Me", "", synthesizer())
    assert clone.gender == "female" and clone.f0_median > 165
    assert PERSONAS[clone.persona].gender == "female"
    assert 3.0 <= clone.reference_seconds <= 20.0 and clip.rate == clones.ANALYSIS_RATE
    assert -12 <= clone.pitch_st <= 12 and 0.85 <= clone.formant <= 1.18
    assert 0.0 < clone.similarity <= 1.0 and 0.0 < clone.similarity_unmatched <= 1.0


def test_a_male_reference_is_male_and_matches_a_male_voice() -> None:
    clone, _ = clones.make_clone(wav_bytes(speech("atlas")), "Him", "deep", synthesizer())
    assert clone.gender == "male" and clone.f0_median < 150
    assert PERSONAS[clone.persona].gender == "male"


def test_a_clone_renders_near_the_reference_pitch() -> None:
    """A male reference 3 semitones below marcus: the clone's render lands within 1.5 semitones of its F0,
    nearer than marcus himself."""
    import math

    from dragoman.media.audio import pitch_shift

    reference = pitch_shift(speech("marcus"), -3.0)
    clone, _ = clones.make_clone(wav_bytes(reference), "Low", "", synthesizer())
    options = SynthesisOptions("aria", "en")  # the clone overrides the voice
    rendered = clones.synthesize_with_clone(synthesizer(), " ".join(SENTENCES[:2]), options, clone)
    marcus = synthesizer().synthesize(" ".join(SENTENCES[:2]), SynthesisOptions("marcus", "en"))
    target = f0_median(reference)

    def distance(audio: Audio) -> float:
        return abs(12 * math.log2(f0_median(audio) / target))

    assert distance(rendered.audio) < 1.5, (clone, f0_median(rendered.audio), target)
    assert distance(rendered.audio) < distance(marcus.audio)
    assert rendered.voice == clone.persona and rendered.options.clone_id == clone.id
    assert rendered.audio.duration == pytest.approx(marcus.audio.duration, rel=0.25)


def test_silence_is_trimmed_before_the_duration_is_measured() -> None:
    one = speech("aria", 1)  # about 3.5 s of speech
    assert one.duration < 20
    padded = _with_silence(one, 9.0)  # 21+ s of file
    analysis = clones.analyse_reference(wav_bytes(padded))
    assert analysis.seconds < one.duration + 0.2


def test_too_short_is_a_400_with_the_measured_duration() -> None:
    short = speech("aria", 1)
    two_seconds = Audio(short.samples[: 2 * short.rate], short.rate)
    with pytest.raises(InvalidRequest, match=r"\d\.\d\d s of speech") as caught:
        clones.analyse_reference(wav_bytes(_with_silence(two_seconds, 2.0)))
    assert caught.value.status == 400


def test_too_long_is_a_400() -> None:
    long = speech("aria", 12)
    assert long.duration > 20
    with pytest.raises(InvalidRequest, match="after silence trimming"):
        clones.analyse_reference(wav_bytes(long))


def test_silent_is_a_400() -> None:
    with pytest.raises(InvalidRequest, match="silent"):
        clones.analyse_reference(wav_bytes(Audio.silence(8.0, 16000)))
    hiss = np.random.default_rng(1).normal(0, 10**-3.5, 16000 * 8)  # -70 dBFS of hiss
    with pytest.raises(InvalidRequest, match="silent"):
        clones.analyse_reference(wav_bytes(Audio(hiss.astype(np.float32), 16000)))


def test_noisy_is_a_400_and_clean_enough_is_not() -> None:
    clean = speech("aria")
    rms = float(np.sqrt(np.mean(clean.samples.astype(np.float64) ** 2)))
    rng = np.random.default_rng(7)
    noise = rng.normal(0, rms, len(clean.samples))
    with pytest.raises(InvalidRequest, match="too noisy"):
        clones.analyse_reference(wav_bytes(Audio((clean.samples + noise).astype(np.float32), clean.rate)))
    with pytest.raises(InvalidRequest, match="too noisy"):
        clones.analyse_reference(wav_bytes(Audio((noise * 0.3).astype(np.float32), clean.rate)))
    light = clean.samples + noise * 10 ** (-30 / 20)  # 30 dB below the speech: accepted and denoised
    analysis = clones.analyse_reference(wav_bytes(Audio(light.astype(np.float32), clean.rate)))
    assert analysis.gender == "female"


@pytest.mark.parametrize(
    "data", [b"", b"this is plainly text, not audio" * 50, b"RIFF\x00\x00\x00\x00WAVEjunk"]
)
def test_not_audio_is_a_415(data: bytes) -> None:
    with pytest.raises(AudioFormatError) as caught:
        clones.analyse_reference(data)
    assert caught.value.status == 415


_FFMPEG = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs the ffmpeg program")


def _encoded(audio: Audio, suffix: str, *args: str, source: tuple[str, ...] = ()) -> bytes:
    """``audio`` encoded by the ffmpeg program into a ``suffix`` file (made here, read back as bytes)."""
    with tempfile.TemporaryDirectory() as folder:
        src = Path(folder) / "in.wav"
        out = Path(folder) / f"out{suffix}"
        src.write_bytes(wav_bytes(audio))
        command = ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", *source, "-i", str(src)]
        subprocess.run([*command, *args, str(out)], check=True, capture_output=True, timeout=120)
        return out.read_bytes()


@_FFMPEG
@pytest.mark.parametrize(
    ("suffix", "args"),
    [
        (".mp3", ("-c:a", "libmp3lame", "-b:a", "64k")),
        (".m4a", ("-c:a", "aac", "-b:a", "64k")),
        (".ogg", ("-c:a", "libvorbis")),
        (".flac", ("-c:a", "flac")),
        (".webm", ("-c:a", "libopus", "-b:a", "48k")),
    ],
)
def test_a_reference_in_any_format_libav_reads_is_decoded_like_its_wav(
    suffix: str, args: tuple[str, ...]
) -> None:
    """Clips other than WAV are decoded in process (PyAV) and then checked like a WAV: the same speech
    length after trimming (within the codec's padding), the same gender and pitch."""
    clean = speech("lyra")
    as_wav = clones.analyse_reference(wav_bytes(clean))
    data = _encoded(_with_silence(clean, 1.0), suffix, *args)
    assert not data.startswith(b"RIFF")
    analysis = clones.analyse_reference(data)
    assert analysis.gender == as_wav.gender == "female"
    assert analysis.seconds == pytest.approx(as_wav.seconds, abs=0.3)
    assert analysis.f0_median == pytest.approx(as_wav.f0_median, rel=0.05)


@_FFMPEG
def test_compressed_clips_keep_the_duration_rules() -> None:
    short = speech("aria", 1)
    two_seconds = Audio(short.samples[: 2 * short.rate], short.rate)
    with pytest.raises(InvalidRequest, match=r"\d\.\d\d s of speech") as caught:
        clones.analyse_reference(_encoded(_with_silence(two_seconds, 1.0), ".mp3", "-c:a", "libmp3lame"))
    assert caught.value.status == 400
    with pytest.raises(InvalidRequest, match="after silence trimming") as caught:
        clones.analyse_reference(_encoded(speech("aria", 12), ".ogg", "-c:a", "libvorbis"))
    assert caught.value.status == 400
    quiet = Audio(np.zeros(16000 * 5, dtype=np.float32), 16000)
    with pytest.raises(InvalidRequest, match="silent"):
        clones.analyse_reference(_encoded(quiet, ".flac", "-c:a", "flac"))


@_FFMPEG
def test_a_compressed_clip_longer_than_the_decode_bound_is_a_400(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clones, "MAX_DECODED_S", 5.0)
    data = _encoded(speech("aria", 3), ".mp3", "-c:a", "libmp3lame", "-b:a", "32k")
    with pytest.raises(InvalidRequest, match="lasts more than 5 s") as caught:
        clones.analyse_reference(data)
    assert caught.value.status == 400


@_FFMPEG
def test_corrupt_or_audio_less_media_is_a_415() -> None:
    clean = speech("aria")
    mp3 = _encoded(clean, ".mp3", "-c:a", "libmp3lame")
    video_only = _encoded(
        clean, ".webm", "-map", "0:v", "-t", "1", "-c:v", "libvpx", source=("-f", "lavfi", "-i", "testsrc")
    )
    garbage = bytes(np.random.default_rng(7).integers(0, 256, 20_000, dtype=np.uint8))
    for data in (mp3[:200], b"ID3" + garbage, b"OggS" + garbage, b"fLaC" + garbage, video_only):
        with pytest.raises(AudioFormatError) as caught:
            clones.analyse_reference(data)
        assert caught.value.status == 415 and caught.value.code == "unsupported_audio"


def _fake(index: int) -> clones.Clone:
    import uuid

    return clones.Clone(
        id=str(uuid.uuid4()),
        name=f"c{index}",
        description="",
        gender="female",
        f0_median=200.0,
        persona="aria",
        pitch_st=0.0,
        formant=1.0,
        similarity=0.9,
        similarity_unmatched=0.9,
        reference_seconds=5.0,
        created_at=float(index),
    )


def test_the_26th_clone_is_refused_and_remove_deletes_the_clip(tmp_path: Path) -> None:
    store = clones.LocalCloneStore(tmp_path / "clones")
    clip = Audio.silence(0.1, 16000)
    made = [store.add(_fake(i), clip) for i in range(clones.MAX_CLONES)]
    assert len(store.list()) == 25
    with pytest.raises(CloneLimitReached) as caught:
        store.add(_fake(99), clip)
    assert caught.value.status == 409
    with pytest.raises(CloneLimitReached):  # refused before any analysis
        store.create(b"not even audio", "x", "", synthesizer())
    victim = made[3]
    folder = tmp_path / "clones" / victim.id
    assert (folder / "reference.wav").is_file()
    assert json.loads((folder / "clone.json").read_text())["persona"] == "aria"
    store.remove(victim.id)
    assert not folder.exists() and victim.id not in {c.id for c in store.list()}
    with pytest.raises(CloneNotFound):
        store.get(victim.id)
    with pytest.raises(CloneNotFound):
        store.remove(victim.id)
    with pytest.raises(CloneNotFound):
        store.get("../../etc")
    store.add(_fake(100), clip)  # room again


def test_a_clone_is_stored_and_read_back(tmp_path: Path) -> None:
    store = clones.LocalCloneStore(tmp_path)
    clone = store.create(wav_bytes(speech("marcus")), "Me", "my voice", synthesizer())
    assert store.get(clone.id) == clone
    assert store.clip_path(clone.id).stat().st_size > 3 * 16000 * 2
