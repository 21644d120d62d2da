"""Words stay with their own sentence across long pauses (issue 15: timings line up with where the speech was
placed, ±0.3 s), through the subtitles pipeline with the embedded Whisper base, its VAD on as always.

The media: three English sentences (SVOX Pico, :func:`dragoman.testing.media.make_speech_media`) with 10 s of
silence between them and 2.2 s before the first, noise at -40 dBFS throughout, in an MP4 (AAC) with ffmpeg's
test video; the track of tests/speech/asr/test_music_is_not_captioned.py with its music left out.

Found on it: faster-whisper's VAD filter cut the audio into its speech chunks (padded by 400 ms, split at
silences of 2 s or more) and joined them into one stream for Whisper; Whisper decoded "yesterday my" as one
segment across the join, and faster-whisper put the word "my" (which begins the second sentence, at 14.6 s)
on the first chunk's side by the word's middle: 4.32-5.60 s, 9 s before it is spoken, so the cue
"... yesterday my" stayed on screen 1 s after the voice stopped. The recogniser now decodes each speech chunk
as its own clip and puts each segment back inside its own clip (no word can cross a long pause).

Checked, with the language given and detected: every recognised word lies within :data:`MARGIN` of the
sentence it belongs to (the sentence whose span is nearest the word), each sentence's first word starts
within :data:`MARGIN` of where its voice starts and is the first word said, no cue reaches into the pauses by
more than :data:`MARGIN`, and each sentence is heard with a small word error rate (:data:`WER`: Whisper base
hears the third sentence alone as "... the river at two lunch", 0.25, with no VAD at all as well as decoded as
its own clip; joined after the second sentence, as the VAD filter joined it, it heard "after lunch").
Slow: two transcriptions.
"""

from __future__ import annotations

import shutil

import pytest
from asr_support import THREE_SENTENCES, subtitles_by_language

from dragoman.media.cues import Word
from dragoman.pipelines.subtitles import SubtitleResult
from dragoman.speech.asr import Recognizer
from dragoman.speech.asr.score import word_error_rate
from dragoman.testing.media import SpeechClip, make_speech_media

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="apt-get install ffmpeg"),
]

SENTENCES = THREE_SENTENCES
#: Seconds of silence between the sentences, and before the first and after the last.
PAUSE, LEAD = 10.0, 2.2
#: How far a word or cue may lie from its sentence's voice (seconds).
MARGIN = 0.3
#: The word error rate each sentence is heard within (see the module docstring).
WER = 0.25


def _distance(word: Word, clip: SpeechClip) -> float:
    """How far ``word`` lies outside ``clip`` (0 when within it)."""
    return max(0.0, clip.start - word.start, word.end - clip.end)


@pytest.fixture(scope="module")
def subtitled(
    tmp_path_factory: pytest.TempPathFactory, base_recognizer: Recognizer
) -> tuple[list[SpeechClip], dict[str, SubtitleResult]]:
    folder = tmp_path_factory.mktemp("pauses")
    media = folder / "pauses.mp4"
    clips = make_speech_media(media, [("en", s) for s in SENTENCES], gap=PAUSE, lead=LEAD)
    return clips, subtitles_by_language(media, base_recognizer, folder)


@pytest.mark.parametrize("language", ["en", "auto"])
def test_every_word_stays_with_its_sentence_across_long_pauses(
    subtitled: tuple[list[SpeechClip], dict[str, SubtitleResult]], language: str
) -> None:
    clips, results = subtitled
    result = results[language]
    words = result.transcript.words
    cues = result.tracks[0].cues
    timed = [(w.text, round(w.start, 2), round(w.end, 2)) for w in words]
    shown = [(round(c.start, 2), round(c.end, 2), c.text) for c in cues]
    print(f"\n{language}: clips {[(c.start, c.end) for c in clips]}\nwords {timed}\ncues {shown}")
    assert result.transcript.language == "en"
    mine: dict[int, list[Word]] = {i: [] for i in range(len(clips))}
    for word in words:
        nearest = min(range(len(clips)), key=lambda i: _distance(word, clips[i]))
        assert _distance(word, clips[nearest]) <= MARGIN, (word, timed)
        mine[nearest].append(word)
    for index, clip in enumerate(clips):
        heard = mine[index]
        assert heard, (clip, timed)
        assert abs(heard[0].start - clip.start) <= MARGIN, (clip, heard[0], timed)
        said_first = clip.text.split()[0].lower()
        assert heard[0].text.strip(".,").lower() == said_first, (clip, heard[0], timed)
        text = " ".join(w.text for w in heard)
        assert word_error_rate(clip.text, text) <= WER, (clip.text, text)
    # no cue shows in a pause, bar the margin at either edge
    for before, after in zip(clips, clips[1:], strict=False):
        inside = (before.end + MARGIN, after.start - MARGIN)
        assert not [c for c in cues if c.start < inside[1] and c.end > inside[0]], (inside, shown)
