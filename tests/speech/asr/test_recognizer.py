"""The recogniser with the tiny random Whisper (issue 15): loading once, language detection, a given language,
word timestamps, resampling, progress, cancellation, typed errors and status. Fast: the model runs in
milliseconds; only its words are gibberish."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from asr_support import noise

from dragoman.errors import (
    AsrModelNotInstalled,
    Cancelled,
    ConfigError,
    EngineTimeout,
    InvalidRequest,
    UnknownLanguage,
)
from dragoman.media.audio import Audio
from dragoman.media.cues import Word, build_cues
from dragoman.progress import JobContext
from dragoman.settings import Settings
from dragoman.speech.asr import Recognizer, Segment, TranscribeOptions, Transcript
from dragoman.speech.asr import recognizer as recognizer_module
from dragoman.testing.whisper import TINY_DECODE, WHISPER_LANGUAGES, build_tiny_whisper

TINY = TranscribeOptions(model="tiny", vad=False, beam_size=1)


def test_auto_detects_a_language_and_says_how_sure(tiny: Recognizer) -> None:
    audio = noise(5.0)
    result = tiny.transcribe(audio, TINY)
    assert isinstance(result, Transcript)
    assert not result.language_given
    assert result.language in WHISPER_LANGUAGES or result.language == "jv"
    assert 0.0 < result.language_probability <= 1.0
    detected, probability = tiny.detect_language(audio, model="tiny", vad=False)
    assert detected == result.language
    assert probability == pytest.approx(result.language_probability)
    assert result.model == "tiny" and result.provenance == "on-device"
    assert result.duration == pytest.approx(5.0)
    assert result.seconds > 0
    assert result.segments and all(isinstance(s, Segment) for s in result.segments)
    assert result.text and result.text == " ".join(s.text for s in result.segments)


@pytest.mark.parametrize(
    ("given", "whisper"), [("es", "es"), ("zh-Hant", "zh"), ("nb", "no"), ("jv", "jv"), ("EN-us", "en")]
)
def test_a_given_language_is_used_as_given(tiny: Recognizer, given: str, whisper: str) -> None:
    result = tiny.transcribe(noise(3.0), TranscribeOptions(language=given, model="tiny", vad=False))
    assert (result.language, result.language_probability, result.language_given) == (whisper, 1.0, True)
    assert not result.warnings


@pytest.mark.parametrize("given", ["tlh", "not a tag!", "qaa", "yue"])
def test_a_language_the_model_does_not_know_is_a_typed_400(tiny: Recognizer, given: str) -> None:
    with pytest.raises(UnknownLanguage) as caught:
        tiny.transcribe(noise(1.0), TranscribeOptions(language=given, model="tiny", vad=False))
    assert (caught.value.status, caught.value.code, caught.value.given) == (400, "unknown_language", given)


def test_word_timestamps_are_ordered_inside_the_audio_and_make_cues(tiny: Recognizer) -> None:
    result = tiny.transcribe(noise(12.0), TINY)
    words = result.words
    assert words and all(isinstance(w, Word) for w in words)
    assert all(w.text and w.text == w.text.strip() for w in words)
    assert all(0.0 <= w.start <= w.end <= result.duration + 0.05 for w in words)
    assert all(a.start <= b.start + 1e-6 for a, b in zip(words, words[1:], strict=False))
    assert all(0.0 <= w.probability <= 1.0 for w in words)
    assert build_cues(words)
    data = result.to_dict()
    assert data["segments"][0]["words"][0]["text"] == words[0].text
    plain = tiny.transcribe(noise(3.0), TranscribeOptions(model="tiny", vad=False, word_timestamps=False))
    assert plain.segments and not plain.words


def test_audio_at_another_rate_is_resampled(tiny: Recognizer) -> None:
    result = tiny.transcribe(noise(4.0, rate=44100), TINY)
    assert result.duration == pytest.approx(4.0, abs=0.01)
    assert result.words


def test_empty_audio_and_bad_options(tiny: Recognizer) -> None:
    empty = tiny.transcribe(Audio(np.zeros(0, dtype=np.float32), 16000), TINY)
    assert (empty.segments, empty.duration) == ((), 0.0)
    assert "the audio is empty" in empty.warnings
    with pytest.raises(InvalidRequest, match="beam_size"):
        tiny.transcribe(noise(1.0), TranscribeOptions(model="tiny", beam_size=0))
    with pytest.raises(InvalidRequest, match="no audio"):
        tiny.detect_language(Audio(np.zeros(0, dtype=np.float32), 16000), model="tiny")


def test_progress_is_reported_in_milliseconds_of_audio(tiny: Recognizer) -> None:
    seen: list[tuple[int, int, str]] = []
    tiny.transcribe(noise(8.0), TINY, JobContext.of(lambda d, t, m: seen.append((d, t, m))))
    assert seen[0] == (0, 8000, "recognising") and seen[-1] == (8000, 8000, "recognising")
    assert all(m == "recognising" and t == 8000 for _, t, m in seen)
    assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen)


def test_a_cancelled_or_late_job_stops(tiny: Recognizer) -> None:
    context = JobContext.of()
    context.cancel.cancel("stop")
    with pytest.raises(Cancelled):
        tiny.transcribe(noise(2.0), TINY, context)
    with pytest.raises(EngineTimeout):
        tiny.transcribe(noise(2.0), TINY, JobContext.of(timeout=-1.0))


def test_the_model_is_loaded_once_per_process(
    settings: Settings, tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import faster_whisper

    from dragoman.models.asr import install

    install(build_tiny_whisper(tmp_path / "once", seed=3), settings)
    made: list[str] = []
    real = faster_whisper.WhisperModel

    def counting(path: str, **kwargs: Any) -> Any:
        made.append(path)
        return real(path, **kwargs)

    monkeypatch.setattr(faster_whisper, "WhisperModel", counting)
    first = Recognizer(settings, decode_overrides=TINY_DECODE)
    second = Recognizer(settings)
    options = TranscribeOptions(model="once", vad=False)
    assert first.load("once") is second.load("once")
    first.transcribe(noise(1.0), options)
    second.detect_language(noise(1.0), model="once", vad=False)
    assert len(made) == 1
    assert any(m["id"] == "once" for m in first.status()["loaded"])


def test_a_model_that_is_not_installed(tiny: Recognizer) -> None:
    with pytest.raises(AsrModelNotInstalled, match="installed: tiny"):
        tiny.transcribe(noise(1.0), TranscribeOptions(model="nope"))


def test_the_device_follows_the_engine_setting(
    tiny_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctranslate2

    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 0)
    recognizer = Recognizer(tiny_settings.replace(device="cuda"), decode_overrides=TINY_DECODE)
    with pytest.raises(ConfigError, match="DRAGOMAN_DEVICE=cuda"):
        recognizer.transcribe(noise(1.0), TINY)
    assert recognizer.status()["device"] is None
    auto = Recognizer(tiny_settings.replace(device="auto"), decode_overrides=TINY_DECODE)
    assert auto.load("tiny").device == "cpu"
    status = auto.status()
    assert (status["installed"], status["default"], status["device"]) == (["tiny"], "whisper-base", "cpu")


def test_threads_follow_the_engine_setting(tiny_settings: Settings) -> None:
    recognizer = Recognizer(tiny_settings.replace(inter_threads=1, intra_threads=1))
    assert recognizer.load("tiny").threads == 1


def test_concurrent_transcriptions_share_the_model(tiny: Recognizer) -> None:
    results: list[Transcript] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(tiny.transcribe(noise(3.0), TINY))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert len({r.text for r in results}) == 1  # same audio, same model, same words


def test_whisper_codes_map_to_bcp47() -> None:
    known = frozenset(WHISPER_LANGUAGES)
    assert recognizer_module.whisper_code("jv", known) == "jw"
    assert recognizer_module.whisper_code("fil", known) == "tl"
    assert recognizer_module.whisper_code("iw", known) == "he"
    assert recognizer_module.whisper_code("haw", known) == "haw"
    assert recognizer_module.whisper_code("deu", known) == "de"


def test_with_vad_the_speech_chunks_are_decoded_as_clips_of_the_audio(
    tiny: Recognizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not joined (a word decoded across a join was timed on the wrong side: test_long_pauses.py): chunks
    less than CLIP_GAP apart make one clip, the others their own; the language is detected first."""
    chunks = [
        {"start": 16000, "end": 32000},
        {"start": 40000, "end": 48000},
        {"start": 120000, "end": 140000},
    ]
    monkeypatch.setattr(recognizer_module, "speech_chunks", lambda samples, parameters=None: chunks)
    model = tiny.load("tiny").model
    seen: dict[str, Any] = {}
    original = model.transcribe

    def spy(audio: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        return original(audio, **kwargs)

    monkeypatch.setattr(model, "transcribe", spy)
    result = tiny.transcribe(noise(10.0), TranscribeOptions(model="tiny", beam_size=1))
    assert seen["vad_filter"] is False
    # the clips joined: 1.0-3.0 s at 0, 7.5-8.75 s at 2.0 s (running to the end)
    assert seen["clip_timestamps"] == [0.0, 2.0, 2.0]
    assert seen["language"] == result.language and 0.0 < result.language_probability <= 1.0
    assert result.words
    assert all(1.0 <= w.start <= 3.0 or 7.5 <= w.start <= 8.75 for w in result.words), result.words


def test_with_vad_and_no_long_pause_faster_whisper_s_own_filter_decodes(
    tiny: Recognizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One clip (no pause of CLIP_GAP or more): the audio goes to faster-whisper with its vad_filter, as it
    always did (decoded as a clip, a dialogue came out without its punctuation and a word misheard)."""
    chunks = [{"start": 16000, "end": 32000}, {"start": 40000, "end": 48000}]
    monkeypatch.setattr(recognizer_module, "speech_chunks", lambda samples, parameters=None: chunks)
    model = tiny.load("tiny").model
    seen: dict[str, Any] = {}
    original = model.transcribe

    def spy(audio: Any, **kwargs: Any) -> Any:
        seen.update(kwargs, samples=len(audio))
        return original(audio, **kwargs)

    monkeypatch.setattr(model, "transcribe", spy)
    tiny.transcribe(noise(5.0), TranscribeOptions(model="tiny", beam_size=1))
    assert seen["vad_filter"] is True and seen.get("clip_timestamps") is None
    assert seen["samples"] == 5 * recognizer_module.RATE  # the whole audio, not the chunks joined


def test_with_vad_and_no_speech_found_nothing_is_decoded(
    tiny: Recognizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recognizer_module, "speech_chunks", lambda samples, parameters=None: [])
    model = tiny.load("tiny").model

    def refuse(audio: Any, **kwargs: Any) -> Any:
        raise AssertionError("decoded with no speech")

    monkeypatch.setattr(model, "transcribe", refuse)
    result = tiny.transcribe(noise(3.0), TranscribeOptions(model="tiny", beam_size=1))
    assert not result.segments and "no speech was heard" in result.warnings
    assert 0.0 < result.language_probability <= 1.0
    given = tiny.transcribe(noise(3.0), TranscribeOptions(language="de", model="tiny", beam_size=1))
    assert (given.language, given.language_probability, given.segments) == ("de", 1.0, ())


def test_decode_clips_merge_only_chunks_closer_than_the_clip_gap() -> None:
    rate = recognizer_module.RATE
    gap = recognizer_module.CLIP_GAP
    chunks = [
        {"start": 0, "end": rate},
        {"start": round((1 + gap - 0.1) * rate), "end": 5 * rate},
        {"start": round((5 + gap) * rate), "end": 9 * rate},
    ]
    assert recognizer_module.decode_clips(chunks) == [(0, 5 * rate), (round((5 + gap) * rate), 9 * rate)]
    assert recognizer_module.decode_clips([]) == []
