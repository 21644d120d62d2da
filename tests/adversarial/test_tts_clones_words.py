"""Adversarial checks of voice matching and word timings/edits (issue 14): work linear in the input, hostile
reference files refused quickly and typed, clips and names never logged."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import numpy as np
import pytest
from growth import assert_linear

from dragoman.errors import AudioFormatError, DragomanError, FileTooLarge
from dragoman.media.audio import Audio, wav_bytes
from dragoman.speech.tts import clones
from dragoman.speech.tts.words import WordEdit, align_render, apply_edits

RATE = 16000
SENTENCE = "one two three four five six."


def _speechlike(sentences: int) -> Audio:
    """Per sentence six 'words' (200 ms tone bursts with 40 ms dips between), sentences 300 ms apart."""
    t = np.arange(round(0.2 * RATE)) / RATE
    burst = (0.3 * np.sin(2 * np.pi * 180 * t) * np.hanning(len(t))).astype(np.float32)
    dip = np.zeros(round(0.04 * RATE), dtype=np.float32)
    pause = np.zeros(round(0.3 * RATE), dtype=np.float32)
    sentence = np.concatenate([np.concatenate([burst, dip]) for _ in range(6)])
    return Audio(np.concatenate([pause, *([np.concatenate([sentence, pause])] * sentences)]), RATE)


_CASES: dict[str, tuple[Audio, str]] = {}


def _case(n: int) -> str:
    key = str(n)
    if key not in _CASES:
        _CASES[key] = (_speechlike(n), " ".join([SENTENCE] * n))
    return key


def test_alignment_is_linear_in_the_sentences() -> None:
    def work(key: str) -> object:
        audio, text = _CASES[key]
        return align_render(audio, text, "en")

    audio, text = _CASES[_case(10)]
    words = align_render(audio, text, "en")
    assert len(words) == 60 and all(a.end <= b.start for a, b in zip(words, words[1:], strict=False))
    assert_linear(work, {"sentences": _case}, 10)


def test_edits_are_linear_in_the_edits() -> None:
    def work(key: str) -> object:
        audio, text = _CASES[key]
        words = align_render(audio, text, "en")
        return apply_edits(audio, words, [WordEdit(i, gain_db=-3.0, pause_ms=10) for i in range(len(words))])

    assert_linear(work, {"every word edited": _case}, 10)


def _wav_header(rate: int, data_size: int, bits: int = 16, channels: int = 1) -> bytes:
    block = channels * bits // 8
    return (
        b"RIFF" + struct.pack("<I", min(0xFFFFFFFF, 36 + data_size)) + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, channels, rate, rate * block, block, bits)
        + b"data" + struct.pack("<I", data_size)
    )  # fmt: skip


@pytest.mark.parametrize(
    "data",
    [
        _wav_header(16000, 0xFFFFFFF0) + b"\x00\x01" * 1000,  # claims 4 GB, holds 2 KB
        _wav_header(0, 2000) + b"\x00" * 2000,  # zero rate
        _wav_header(16000, 2000, bits=13) + b"\x00" * 2000,  # 13-bit samples
        _wav_header(16000, 2000, channels=0) + b"\x00" * 2000,
        b"RIFF\xff\xff\xff\xffWAVE",  # no chunks
        b"\x00" * 5000,
    ],
)
def test_hostile_wavs_are_typed_refusals(data: bytes) -> None:
    with pytest.raises(DragomanError) as caught:
        clones.analyse_reference(data)
    assert caught.value.status in (400, 415)


def test_an_oversized_upload_is_refused_before_decoding() -> None:
    with pytest.raises(FileTooLarge):
        clones.decode_clip(b"\x00" * (clones.MAX_CLIP_BYTES + 1))


def test_a_wav_of_nan_samples_is_not_speech() -> None:
    floats = np.full(16000 * 5, np.nan, dtype="<f4").tobytes()
    header = (
        b"RIFF" + struct.pack("<I", 36 + len(floats)) + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 3, 1, 16000, 64000, 4, 32) + b"data" + struct.pack("<I", len(floats))
    )  # fmt: skip
    with pytest.raises(DragomanError) as caught:
        clones.analyse_reference(header + floats)
    assert caught.value.status in (400, 415)


def test_clips_and_names_are_never_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from speech_support import synthesizer

    from dragoman.speech.tts.types import SynthesisOptions

    text = "This reference is private. Nobody should read it in a log. It lasts long enough to be matched."
    audio = synthesizer().synthesize(text, SynthesisOptions("kai", "en")).audio
    store = clones.LocalCloneStore(tmp_path)
    with caplog.at_level(logging.DEBUG):
        clone = store.create(wav_bytes(audio), "Private Person", "secret description", synthesizer())
        store.remove(clone.id)
        with pytest.raises(AudioFormatError):
            store.create(b"Private Person's notes" * 100, "Private Person", "", synthesizer())
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "Private Person" not in logged and "secret description" not in logged and "RIFF" not in logged
