"""Hostile media input (issue 15): files with no audio, corrupt, cut short, of 0 seconds, lying about their
type or their size, over the size limit; decoding and the cue builder growing linearly with their input.
Every input is made in the test."""

from __future__ import annotations

import random
import struct
import subprocess
import time
import tracemalloc
from pathlib import Path

import pytest
from growth import assert_linear

from dragoman.errors import (
    DragomanError,
    EmptyMedia,
    FileTooLarge,
    MediaFormatError,
    NoAudioStream,
)
from dragoman.limits import MAX_FILE_BYTES
from dragoman.media.cues import Word, build_cues
from dragoman.media.decode import decode_audio, iter_audio
from dragoman.media.probe import probe, require_audio

#: Noise bytes, the same on every run (random bytes can happen to read as MPEG audio: a fixed draw that
#: does not is a test that means the same each time).
_NOISE = random.Random(15)


def ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-v", "error", "-y", *args], check=True, timeout=120)


def _tone_mp4(path: Path, seconds: float, *, faststart: bool = False) -> Path:
    args = ["-f", "lavfi", "-i", f"sine=duration={seconds}", "-f", "lavfi"]
    args += ["-i", f"testsrc=size=64x48:rate=10:duration={seconds}", "-c:v", "libx264", "-preset"]
    args += ["ultrafast", "-c:a", "aac"]
    if faststart:
        args += ["-movflags", "+faststart"]
    ffmpeg(*args, str(path))
    return path


def _wav_header(rate: int, channels: int, data_bytes: int, riff_bytes: int | None = None) -> bytes:
    block = 2 * channels
    fmt = struct.pack("<IHHIIHH", 16, 1, channels, rate, (rate * block) & 0xFFFFFFFF, block & 0xFFFF, 16)
    riff = 36 + data_bytes if riff_bytes is None else riff_bytes
    return b"RIFF" + struct.pack("<I", riff) + b"WAVEfmt " + fmt + b"data" + struct.pack("<I", data_bytes)


def test_video_without_audio(tmp_path: Path) -> None:
    silent = tmp_path / "silent.mkv"
    ffmpeg("-f", "lavfi", "-i", "testsrc=size=64x48:rate=10:duration=2", "-c:v", "libx264", str(silent))
    with pytest.raises(NoAudioStream):
        require_audio(probe(silent))
    with pytest.raises(NoAudioStream):
        decode_audio(silent)
    with pytest.raises(NoAudioStream):
        next(iter_audio(silent))


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\x00" * 4096,
        _NOISE.randbytes(64 * 1024),
        b"ftypisom" + _NOISE.randbytes(5000),  # the start of an MP4, then noise
        b"RIFF\x24\x00\x00\x00WAVE",  # a WAV cut inside its header
        b"\x1aE\xdf\xa3" + _NOISE.randbytes(3000),  # the EBML magic of Matroska, then noise
        b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"\xff" * 100,  # an ID3 tag and nothing after it
        b"not media at all\n" * 100,
    ],
    ids=["empty", "zeros", "random", "mp4-magic", "wav-header-cut", "mkv-magic", "id3-only", "text"],
)
def test_garbage_gets_a_typed_error(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "upload.bin"
    bad.write_bytes(content)
    with pytest.raises((MediaFormatError, EmptyMedia, NoAudioStream)) as caught:
        probe(bad)
        decode_audio(bad)
    assert caught.value.status in (415, 422)


def test_cut_short_files(tmp_path: Path) -> None:
    whole = _tone_mp4(tmp_path / "whole.mp4", 4.0)
    data = whole.read_bytes()
    for cut in (100, len(data) // 2, len(data) - 200):  # the index (moov) is at the end: any cut loses it
        piece = tmp_path / f"cut{cut}.mp4"
        piece.write_bytes(data[:cut])
        with pytest.raises(MediaFormatError):
            probe(piece)
    # with the index first (faststart), a cut file declares 4 s but holds less: believed for what it holds
    fast = _tone_mp4(tmp_path / "fast.mp4", 4.0, faststart=True)
    half = tmp_path / "half.mp4"
    half.write_bytes(fast.read_bytes()[: fast.stat().st_size // 2])
    info = probe(half)
    assert info.declared_duration is not None and info.declared_duration >= 3.9
    assert info.duration < 3.0
    decoded = decode_audio(half)
    assert abs(decoded.duration - info.duration) < 0.3
    # a long one (its end is looked for near the declared end first, then found by reading from the start)
    long = _tone_mp4(tmp_path / "long.mp4", 60.0, faststart=True)
    long_cut = tmp_path / "long-cut.mp4"
    long_cut.write_bytes(long.read_bytes()[: long.stat().st_size * 2 // 3])
    assert probe(long).duration == pytest.approx(60.0, abs=0.1)
    info = probe(long_cut)
    assert info.declared_duration == pytest.approx(60.0, abs=0.1) and 20 < info.duration < 50
    assert abs(decode_audio(long_cut).duration - info.duration) < 0.5


def test_zero_seconds(tmp_path: Path) -> None:
    zero = tmp_path / "zero.wav"
    zero.write_bytes(_wav_header(16000, 1, 0))
    with pytest.raises(EmptyMedia) as caught:
        probe(zero)
    assert caught.value.to_dict()["code"] == "empty_media"
    with pytest.raises(EmptyMedia):
        decode_audio(zero)
    empty_mp4 = tmp_path / "zero.mp4"
    ffmpeg("-f", "lavfi", "-i", "sine=duration=1", "-t", "0", "-c:a", "aac", str(empty_mp4))
    with pytest.raises((EmptyMedia, MediaFormatError)):
        probe(empty_mp4)


def test_files_lying_about_their_type(tmp_path: Path) -> None:
    png = tmp_path / "frame.png"
    ffmpeg("-f", "lavfi", "-i", "testsrc=size=32x32", "-frames:v", "1", str(png))
    flac = tmp_path / "tone.flac"
    ffmpeg("-f", "lavfi", "-i", "sine=duration=1", str(flac))
    html_page = b"<!doctype html><html><body>" + b"<p>video</p>" * 200 + b"</body></html>"
    for name, content in (
        ("movie.mp4", png.read_bytes()),
        ("movie.mkv", png.read_bytes()),
        ("song.mp3", flac.read_bytes()),
        ("clip.webm", flac.read_bytes()),
        ("page.mp4", html_page),
        ("voice.wav", b"#!/bin/sh\necho hello\n" * 50),
    ):
        liar = tmp_path / name
        liar.write_bytes(content)
        with pytest.raises(MediaFormatError) as caught:
            probe(liar)
        assert caught.value.status == 415 and caught.value.code == "unsupported_media", name


def test_headers_declaring_more_than_the_file_holds(tmp_path: Path) -> None:
    one_second = b"\x00\x10" * 16000
    huge = tmp_path / "huge.wav"  # declares 2 GB of samples (over 18 hours), holds one second
    huge.write_bytes(_wav_header(16000, 1, 0x7FFFF000, riff_bytes=0x7FFFFFFF) + one_second)
    info = probe(huge)
    assert info.duration == pytest.approx(1.0, abs=0.01)
    tracemalloc.start()
    try:
        audio = decode_audio(huge)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert audio.duration == pytest.approx(1.0, abs=0.01)
    assert peak < 32 * 1024 * 1024  # memory follows what is there, not what the header claims
    rate = tmp_path / "rate.wav"  # an impossible sample rate
    rate.write_bytes(_wav_header(0x7FFFFFFF, 1, len(one_second)) + one_second)
    with pytest.raises(MediaFormatError):
        probe(rate)
    with pytest.raises(DragomanError):
        decode_audio(rate)
    channels = tmp_path / "channels.wav"  # 65,535 channels
    channels.write_bytes(_wav_header(16000, 65535, len(one_second)) + one_second)
    with pytest.raises((MediaFormatError, EmptyMedia)):
        probe(channels)


def test_size_limit_is_checked_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.mp4"
    with big.open("wb") as handle:  # sparse: 1 byte past the limit, nothing written
        handle.truncate(MAX_FILE_BYTES + 1)
    started = time.monotonic()
    with pytest.raises(FileTooLarge) as caught:
        probe(big, max_bytes=MAX_FILE_BYTES)
    assert caught.value.status == 413
    assert time.monotonic() - started < 2.0  # refused from its size, not read
    with pytest.raises(MediaFormatError):
        probe(big)  # without a limit it is read, and it is not media


def _wav_of(seconds: int, folder: Path) -> str:
    path = folder / f"tone{seconds}.mp4"
    if not path.exists():
        ffmpeg("-f", "lavfi", "-i", f"sine=frequency=300:duration={seconds}", "-c:a", "aac", str(path))
    return str(path)


def test_decoding_grows_linearly_with_duration(tmp_path: Path) -> None:
    # PyAV decodes in this thread: the shared check times its CPU and measures again before failing
    tones = {"aac tone": lambda n: _wav_of(n, tmp_path)}
    assert_linear(lambda p: decode_audio(p), tones, 15, repeats=3)
    assert_linear(lambda p: probe(p), tones, 15, repeats=3)


def _words(n: int) -> str:
    return " ".join(["well, this is one,", "and that", "is the other one.", "wordy" * 3] * (n // 6 + 1))


def test_cue_building_grows_linearly_with_the_words() -> None:
    def work(text: str) -> object:
        tokens = text.split()
        return build_cues([Word(w, i * 0.3, i * 0.3 + 0.25) for i, w in enumerate(tokens)])

    assert_linear(work, {"words": _words}, 1000, repeats=3)
    one_huge_word = "x" * 200_000  # one word longer than any line: its own cue, not quadratic
    assert_linear(work, {"one huge word": lambda n: one_huge_word[:n] + " end."}, 20_000, repeats=3)
