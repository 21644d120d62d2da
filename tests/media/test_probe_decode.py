"""Probing and decoding media of every container the issue names, made with ffmpeg in the test."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from dragoman.errors import Cancelled, EmptyMedia, FileTooLarge, MediaFormatError, NoAudioStream
from dragoman.media.decode import decode_audio, iter_audio
from dragoman.media.probe import probe, require_audio
from dragoman.progress import JobContext

SECONDS = 2.0
TONE = 440.0
# container suffix -> (ffmpeg audio codec, video codec or None)
FORMATS = {
    "mp4": ("aac", "libx264"),
    "mkv": ("libopus", "libx264"),
    "webm": ("libopus", "libvpx"),
    "mov": ("aac", "libx264"),
    "mp3": ("libmp3lame", None),
    "wav": ("pcm_s16le", None),
    "m4a": ("aac", None),
    "ogg": ("libvorbis", None),
    "flac": ("flac", None),
}


def ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-v", "error", "-y", *args], check=True, timeout=60)


def make_media(path: Path, seconds: float = SECONDS, *, video: bool = True, audio: bool = True) -> Path:
    suffix = path.suffix.lstrip(".")
    audio_codec, video_codec = FORMATS[suffix]
    args: list[str] = []
    if audio:
        args += ["-f", "lavfi", "-i", f"sine=frequency={TONE}:sample_rate=44100:duration={seconds}"]
    if video and video_codec:
        args += ["-f", "lavfi", "-i", f"testsrc=size=64x48:rate=10:duration={seconds}"]
        args += ["-c:v", video_codec, "-pix_fmt", "yuv420p"]
        if video_codec == "libx264":
            args += ["-preset", "ultrafast"]
    if audio:
        args += ["-ac", "2", "-c:a", audio_codec]
    ffmpeg(*args, str(path))
    return path


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("media")
    return {suffix: make_media(folder / f"tone.{suffix}") for suffix in FORMATS}


def _peak_hz(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    return float(np.argmax(spectrum) * rate / len(samples))


@pytest.mark.parametrize("suffix", list(FORMATS))
def test_probe_and_decode_every_container(media: dict[str, Path], suffix: str) -> None:
    info = probe(media[suffix])
    assert info.has_audio
    assert info.has_video == (FORMATS[suffix][1] is not None)
    assert abs(info.duration - SECONDS) < 0.1, info
    assert info.size_bytes == media[suffix].stat().st_size
    stream = require_audio(info)
    assert stream.sample_rate == 44100 or suffix in ("mkv", "webm")  # Opus runs at 48 kHz
    assert stream.channels == 2
    audio = decode_audio(media[suffix])
    assert audio.rate == 16000 and audio.samples.dtype == np.float32
    assert abs(audio.duration - SECONDS) < 0.1
    assert abs(_peak_hz(audio.samples, audio.rate) - TONE) < 5  # resampled, not sped up or slowed
    assert 0.05 < float(np.max(np.abs(audio.samples))) <= 1.01  # stereo mixed down, not silenced


def test_decode_rate_max_seconds_and_chunks(media: dict[str, Path]) -> None:
    audio = decode_audio(media["wav"], rate=22050, max_seconds=0.5)
    assert audio.rate == 22050 and len(audio) == int(0.5 * 22050)
    chunks = list(iter_audio(media["mp4"], 16000, 0.3))
    assert all(len(c) == int(0.3 * 16000) for c in chunks[:-1])
    assert 0 < len(chunks[-1]) <= int(0.3 * 16000)
    whole = decode_audio(media["mp4"])
    assert np.allclose(np.concatenate([c.samples for c in chunks]), whole.samples, atol=1e-6)


def test_decode_is_cancellable_and_reports_progress(tmp_path: Path) -> None:
    long = make_media(tmp_path / "long.wav", 35.0)
    reports: list[tuple[int, int, str]] = []
    context = JobContext.of(lambda done, total, what: reports.append((done, total, what)))
    audio = decode_audio(long, context=context)
    assert abs(audio.duration - 35.0) < 0.05
    assert len(reports) >= 3 and reports[-1][1] == 35000 and reports[0][2] == "decoding"
    assert [r[0] for r in reports] == sorted(r[0] for r in reports)
    cancelled = JobContext.of()
    cancelled.cancel.cancel("stop")
    with pytest.raises(Cancelled):
        decode_audio(long, context=cancelled)


def test_no_audio_stream(tmp_path: Path) -> None:
    silent = make_media(tmp_path / "silent.mp4", audio=False)
    info = probe(silent)
    assert info.has_video and not info.has_audio
    with pytest.raises(NoAudioStream) as caught:
        require_audio(info)
    assert caught.value.status == 422 and caught.value.code == "no_audio_stream"
    with pytest.raises(NoAudioStream):
        decode_audio(silent)


def test_bad_files_get_typed_errors(tmp_path: Path, media: dict[str, Path]) -> None:
    text = tmp_path / "notes.mp4"
    text.write_text("this is not a video\n" * 20)
    empty = tmp_path / "empty.mkv"
    empty.write_bytes(b"")
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(media["mp4"].read_bytes()[:2000])  # the index (moov) is at the end: lost
    for bad in (text, empty, cut):
        with pytest.raises(MediaFormatError) as caught:
            probe(bad)
        assert caught.value.status == 415 and caught.value.code == "unsupported_media"
    with pytest.raises(MediaFormatError):
        decode_audio(text)


def test_a_file_named_as_another_type_is_refused(tmp_path: Path, media: dict[str, Path]) -> None:
    png = tmp_path / "still.png"
    ffmpeg("-f", "lavfi", "-i", "testsrc=size=32x32", "-frames:v", "1", str(png))
    for lie, content in (("photo.mp4", png), ("tone.mp4", media["wav"]), ("tone.mp3", media["flac"])):
        liar = tmp_path / lie
        liar.write_bytes(content.read_bytes())
        with pytest.raises(MediaFormatError, match="named|not audio or video"):
            probe(liar)
    with pytest.raises(MediaFormatError):
        probe(png)  # an image is not media, whatever its name
    honest = tmp_path / "tone.bin"  # an unknown suffix: the content decides
    honest.write_bytes(media["wav"].read_bytes())
    assert probe(honest).container == "wav"


def test_zero_seconds_and_size_limit(tmp_path: Path, media: dict[str, Path]) -> None:
    zero = tmp_path / "zero.wav"
    ffmpeg("-f", "lavfi", "-i", "sine=duration=1", "-t", "0", str(zero))
    with pytest.raises(EmptyMedia) as caught:
        probe(zero)
    assert caught.value.status == 422 and caught.value.code == "empty_media"
    size = media["mp4"].stat().st_size
    with pytest.raises(FileTooLarge) as too_large:
        probe(media["mp4"], max_bytes=size - 1)
    assert too_large.value.status == 413
    assert probe(media["mp4"], max_bytes=size).size_bytes == size
