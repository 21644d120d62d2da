"""Dubbing end to end with the embedded recogniser (issue 16's proof, slow): the test dialogue is recognised
by Whisper base (word timings), translated (fixed Spanish for the test's sentences, matched whatever
punctuation Whisper hears), voiced and mixed; the dub is then recognised back by Whisper base, which must
hear Spanish with a bounded word error rate, and each line must start within 200 ms of its original.

The lines are 2 s apart: with 1.2 s, Whisper base sometimes heard the whole dialogue as one sentence
without punctuation, its word timings stretched over the pauses, so nothing told the lines apart."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from dub_support import DIALOGUE, SPANISH, DictEngine, first_audio, levels_db, speech_onset

from dragoman.pipelines.dub import DubOptions, dub_file
from dragoman.settings import Settings
from dragoman.speech.asr import Recognizer, TranscribeOptions
from dragoman.speech.asr.score import normalised_words, word_error_rate
from dragoman.speech.tts.synth import Synthesizer
from dragoman.testing.dub import make_dialogue_media

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("ffmpeg") is None or shutil.which("flite") is None, reason="apt-get install ffmpeg flite"
    ),
]

#: The most word error rate accepted for the dub heard back (Pico's Spanish, time-fitted, over the ducked
#: original and the background). Measured 0.13 to 0.33 over eight runs: the man's lines are spoken by the
#: female Pico voice shifted down 5 semitones with its formants lowered (no male Spanish voice better than
#: espeak-ng is installed), which Whisper base sometimes mishears ("Llevaré un paraguas para los dos" heard
#: as "Le va a venir para aguas para los ojos"); the woman's lines are heard right.
MAX_WER = 0.4


@pytest.fixture(scope="module")
def whisper_base(tmp_path_factory: pytest.TempPathFactory) -> Recognizer:
    root = tmp_path_factory.mktemp("asr-base")
    return Recognizer(Settings.build(packs_dir=root / "packs", device="cpu"))


def test_a_dub_recognised_back_in_spanish(whisper_base: Recognizer, tmp_path: Path) -> None:
    media = tmp_path / "talk.mp4"
    clips = make_dialogue_media(media, DIALOGUE, gap=2.0, background_db=-30.0)
    result = dub_file(
        media,
        DubOptions("es", voice_mode="match"),
        synthesizer=Synthesizer(),
        recognizer=whisper_base,
        engine=DictEngine(),
        out_dir=tmp_path / "out",
    )
    assert result.source_language == "en"
    # Whisper may hear the dialogue with or without punctuation: the lines say the Spanish in order
    expected = " ".join(SPANISH[text] for _, text in DIALOGUE)
    said = " ".join(line.text for line in result.lines)
    assert normalised_words(said) == normalised_words(expected)
    assert result.outputs.video is not None
    audio = first_audio(result.outputs.video)
    floor = float(sorted(levels_db(audio)[5:30])[10])
    for (speaker, _), clip in zip(DIALOGUE, clips, strict=True):
        line = min(result.lines, key=lambda ln: abs(ln.start - clip.start))  # the line that starts the clip
        assert abs(line.start - clip.start) <= 0.2, (line, clip)
        assert line.gender == speaker, (line, clip)
        onset = speech_onset(audio, clip.start - 0.5, clip.start + 0.8, floor + 10.0)
        assert onset is not None and abs(onset - clip.start) <= 0.2, (clip, onset)
    voices = {
        speaker: {ln.voice for ln in result.lines if ln.gender == speaker} for speaker in ("female", "male")
    }
    assert len(voices["female"]) == len(voices["male"]) == 1 and voices["female"] != voices["male"]
    heard = whisper_base.transcribe(first_audio(result.outputs.audio), TranscribeOptions(language="auto"))
    assert heard.language == "es"
    assert word_error_rate(expected, heard.text) <= MAX_WER, heard.text
