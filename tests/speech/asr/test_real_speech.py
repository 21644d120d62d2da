"""Subtitles end to end on real speech (issue 15, Proof): sentences synthesised by the embedded voices (SVOX
Pico in en, es, de, fr, it; espeak-ng for Dutch) with silence and seeded noise between them, in an MP4 with
ffmpeg's test video (:func:`dragoman.testing.media.make_speech_media`); the embedded Whisper base (one
recogniser per session, conftest) hears them through the pipeline (probe, decode, recognise, cue).

Checked per language: the word error rate against the sentences said (bounds measured on this model and
these voices, with a margin: Whisper base is weaker on Pico's French and Italian and on espeak-ng), the
timing of every sentence (first word within 0.3 s of where the voice starts, last word within 0.3 s of where
it stops), the cue rules (media.cues.rule_violations), no cue in the silences; then the English captions
translated into Spanish by Apertium land on the right cues, and ffmpeg muxes the SRT into the MP4.

Slow: one media file and one transcription per language (about 2 s each on 2 cores, beam 5).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support import needs_apertium

from dragoman.media.cues import Cue, rule_violations
from dragoman.media.ffmpeg import mux_subtitles
from dragoman.media.probe import MediaInfo
from dragoman.pipelines.subtitles import SubtitleTrack, caption_track, recognise_file, render_track
from dragoman.speech.asr import Recognizer, TranscribeOptions, Transcript
from dragoman.speech.asr.score import word_error_rate
from dragoman.testing.media import SpeechClip, make_speech_media

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("ffmpeg") is None or shutil.which("espeak-ng") is None,
        reason="apt-get install ffmpeg espeak-ng",
    ),
]

SENTENCES: dict[str, tuple[str, ...]] = {
    "en": (
        "The old man bought a red car yesterday.",
        "My sister opened the blue door this morning.",
        "When the rain stopped in the afternoon, the children ran outside and played football in the park "
        "until dinner.",
    ),
    "es": ("El viejo compró un coche rojo ayer.", "Mi hermana abrió la puerta azul esta mañana."),
    "de": (
        "Der alte Mann kaufte gestern ein rotes Auto.",
        "Meine Schwester öffnete heute Morgen die blaue Tür.",
    ),
    "fr": ("Le vieil homme a acheté une voiture rouge hier.", "Ma sœur a ouvert la porte bleue ce matin."),
    "it": (
        "Il vecchio ha comprato una macchina rossa ieri.",
        "Mia sorella ha aperto la porta blu stamattina.",
    ),
    "nl": ("De oude man kocht gisteren een rode auto.", "Mijn zus opende vanmorgen de blauwe deur."),
}
#: Word error rate bounds. Measured (Whisper base, int8, beam 5): en 0.00, de 0.125 ("öffnete heute Morgen"
#: heard as "öfter heute machen"; 0.00 on Pico's earlier renders, which varied with the process's freed memory
#: until engines/pico.py had its pool zero-filled), es 0.07 ("puerta" heard as "fuerza"), it 0.25, fr 0.44
#: (Pico's French), nl 0.53 (espeak-ng).
WER_BOUND = {"en": 0.1, "es": 0.15, "de": 0.2, "it": 0.4, "fr": 0.6, "nl": 0.75}
#: How far a sentence's first word may start from where its voice starts, and its last word end (seconds).
TOLERANCE = 0.3


class Heard:
    """A language's media, where each sentence was placed, and what the pipeline made of it."""

    def __init__(self, path: Path, clips: list[SpeechClip], info: MediaInfo, transcript: Transcript) -> None:
        self.path = path
        self.clips = clips
        self.info = info
        self.transcript = transcript
        self.track: SubtitleTrack = caption_track(transcript)


@pytest.fixture(scope="module")
def heard(tmp_path_factory: pytest.TempPathFactory, base_recognizer: Recognizer) -> dict[str, Heard]:
    """Each language's media made, probed, decoded and recognised once (the language given)."""
    folder = tmp_path_factory.mktemp("real-speech")
    out: dict[str, Heard] = {}
    for language, sentences in SENTENCES.items():
        path = folder / f"speech-{language}.mp4"
        clips = make_speech_media(path, [(language, s) for s in sentences], gap=1.0, noise_db=-40.0)
        info, transcript = recognise_file(path, base_recognizer, TranscribeOptions(language=language))
        out[language] = Heard(path, clips, info, transcript)
    return out


def _words_of(item: Heard, clip: SpeechClip) -> list[tuple[str, float, float]]:
    """The recognised words nearest ``clip`` (each word goes to the sentence whose span is nearest)."""

    def distance(c: SpeechClip, start: float, end: float) -> float:
        return max(0.0, c.start - end, start - c.end)

    return [
        (w.text, w.start, w.end)
        for w in item.transcript.words
        if min(item.clips, key=lambda c: distance(c, w.start, w.end)) is clip
    ]


@pytest.mark.parametrize("language", list(SENTENCES))
def test_whisper_base_recognises_the_sentences(heard: dict[str, Heard], language: str) -> None:
    item = heard[language]
    assert item.info.has_video and item.info.has_audio
    assert (item.transcript.language, item.transcript.model) == (language, "whisper-base")
    wer = word_error_rate(" ".join(SENTENCES[language]), item.transcript.text)
    assert wer <= WER_BOUND[language], (language, round(wer, 3), item.transcript.text)


@pytest.mark.parametrize("language", list(SENTENCES))
def test_word_timings_line_up_with_the_speech(heard: dict[str, Heard], language: str) -> None:
    item = heard[language]
    for clip in item.clips:
        words = _words_of(item, clip)
        assert words, (clip, item.transcript.text)
        first, last = words[0], words[-1]
        assert abs(first[1] - clip.start) <= TOLERANCE, (language, clip.text, clip.start, first)
        assert abs(last[2] - clip.end) <= TOLERANCE, (language, clip.text, clip.end, last)
    every = item.transcript.words
    assert all(a.start <= a.end <= b.start + 1e-6 for a, b in zip(every, every[1:], strict=False))


@pytest.mark.parametrize("language", list(SENTENCES))
def test_cues_obey_the_rules_and_leave_the_silence_empty(heard: dict[str, Heard], language: str) -> None:
    item = heard[language]
    cues = item.track.cues
    assert cues
    for index, cue in enumerate(cues):
        following = cues[index + 1] if index + 1 < len(cues) else None
        assert rule_violations(cue, following) == [], (language, cue)
    # each sentence starts a cue where its voice starts; no cue starts in a silence
    for clip in item.clips:
        assert any(abs(c.start - clip.start) <= TOLERANCE for c in cues), (language, clip, cues)
    for cue in cues:
        assert any(c.start - TOLERANCE <= cue.start <= c.end for c in item.clips), (language, cue)


#: The languages Pico speaks, whose detection is checked on the media above.
PICO_LANGUAGES = ("en", "es", "de", "fr", "it")


@pytest.mark.parametrize("language", PICO_LANGUAGES)
def test_auto_detects_each_pico_language(
    heard: dict[str, Heard], base_recognizer: Recognizer, language: str
) -> None:
    # the same media as above, recognised with source 'auto': the language heard is the one spoken, with its
    # probability. Measured (Whisper base int8, beam 5, 2 cores): en 0.987, es 0.981, de 0.997, fr 0.844,
    # it 0.995. The floor is the one under which the transcript warns that the language is uncertain. A single
    # short French sentence ("Le vieil homme a acheté une voiture rouge hier.") alone was heard as Russian at
    # 0.33: detection needs more than one Pico French sentence
    from dragoman.speech.asr.recognizer import UNCERTAIN_LANGUAGE

    _, transcript = recognise_file(heard[language].path, base_recognizer, TranscribeOptions(language="auto"))
    probability = transcript.language_probability
    print(f"\n{language}: detected {transcript.language} at {probability:.4f}")
    assert (transcript.language, transcript.language_given) == (language, False)
    assert isinstance(probability, float) and 0.0 < probability <= 1.0
    assert probability > UNCERTAIN_LANGUAGE, (language, probability)
    assert not [w for w in transcript.warnings if "uncertain" in w], transcript.warnings


@needs_apertium
def test_translated_cues_land_on_their_sentences(heard: dict[str, Heard], tmp_path: Path) -> None:
    from support import isolated_settings

    from dragoman.pipelines.subtitles import translate_track
    from dragoman.translation.engine import Engine
    from dragoman.translation.types import TranslateOptions

    item = heard["en"]
    source = item.track
    with Engine(isolated_settings(tmp_path, apertium=True)) as engine:
        spanish = translate_track(source, engine, "es")
        by_sentence = _cues_by_sentence(item, source.cues, spanish.cues)
        assert sorted(by_sentence) == list(range(len(SENTENCES["en"])))
        # what each sentence was heard as, translated on its own (recognition may vary by a word; the check
        # is that each sentence's translation is on that sentence's cues)
        heard_sentences = [" ".join(c.text for c, _ in by_sentence[k]) for k in sorted(by_sentence)]
        expected = [engine.translate(s, TranslateOptions("es", "en")).translation for s in heard_sentences]
    for k, said in enumerate(SENTENCES["en"]):
        assert word_error_rate(said, heard_sentences[k]) <= 0.2, (said, heard_sentences[k])
    assert spanish.language == "es" and spanish.translated and spanish.source_language == "en"
    assert [(c.start, c.end) for c in spanish.cues] == [(c.start, c.end) for c in source.cues]
    # the translations of a sentence's cues, in order, read as the translation of that sentence (of no other)
    assert len(by_sentence[2]) >= 2  # the long sentence spans cues: its translation is shared over them
    for k, pairs in by_sentence.items():
        assert all(t.text.strip() for _, t in pairs), pairs
        laid = " ".join(t.text for _, t in pairs)
        errors = [word_error_rate(e, laid) for e in expected]
        assert errors[k] <= 0.15, (k, laid, expected[k])
        assert errors[k] == min(errors), (k, laid, errors)


def _cues_by_sentence(
    item: Heard, cues: tuple[Cue, ...], translated: tuple[Cue, ...]
) -> dict[int, list[tuple[Cue, Cue]]]:
    """Each (source cue, translated cue) under the sentence it was spoken in (the clip nearest to it)."""
    by_sentence: dict[int, list[tuple[Cue, Cue]]] = {}
    for cue, other in zip(cues, translated, strict=True):
        owner = min(
            range(len(item.clips)),
            key=lambda k: abs((item.clips[k].start + item.clips[k].end) / 2 - (cue.start + cue.end) / 2),
        )
        assert item.clips[owner].start - TOLERANCE <= cue.start <= item.clips[owner].end, (cue, item.clips)
        by_sentence.setdefault(owner, []).append((cue, other))
    return by_sentence


def test_ffmpeg_muxes_the_srt_into_the_mp4(heard: dict[str, Heard], tmp_path: Path) -> None:
    item = heard["de"]
    srt = tmp_path / "speech.de.srt"
    srt.write_text(render_track(item.track, "srt"), encoding="utf-8")
    out = mux_subtitles(item.path, {"de": srt}, tmp_path / "subtitled.mp4")
    probed = subprocess.run(
        ["ffprobe", "-v", "error", "-show_streams", "-of", "json", str(out)],
        capture_output=True,
        check=True,
        text=True,
        timeout=60,
    )
    streams = json.loads(probed.stdout)["streams"]
    subtitles = [s for s in streams if s["codec_type"] == "subtitle"]
    assert [(s["codec_name"], s["tags"].get("language")) for s in subtitles] == [("mov_text", "deu")]
    assert {s["codec_type"] for s in streams} == {"video", "audio", "subtitle"}
    # the subtitles read back out of the MP4 are the cues written
    back = subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "error", "-i", str(out), "-map", "0:s:0", "-f", "srt", "-"],
        capture_output=True,
        check=True,
        text=True,
        timeout=60,
    ).stdout
    for cue in item.track.cues:
        assert all(line in back for line in cue.lines), (cue, back)


@needs_apertium
def test_the_user_glossary_acts_on_the_translated_captions(
    heard: dict[str, Heard],
    base_recognizer: Recognizer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `dragoman subtitles --to es` on the English media, Apertium en->es translating: first without a glossary
    # (Apertium says "coche" for "car"), then with the user's glossary holding car -> automóvil, which the
    # command reads and hands to the pipeline; the same cues come back, the first sentence's with the term
    import pysrt

    import dragoman.cli.subtitles as cli_subtitles
    from dragoman.cli import main
    from dragoman.server.local_store import GlossaryStore
    from dragoman.settings import Settings
    from dragoman.translation.types import GlossaryEntry

    monkeypatch.setenv("DRAGOMAN_APERTIUM", "1")
    monkeypatch.setattr(cli_subtitles, "make_recognizer", lambda settings: base_recognizer)
    media = heard["en"].path

    def read(path: Path) -> list[tuple[float, float, str]]:
        cues = pysrt.open(str(path), encoding="utf-8")
        return [(c.start.ordinal / 1000, c.end.ordinal / 1000, c.text.replace("\n", " ")) for c in cues]

    def subtitles(folder: Path) -> tuple[list[tuple[float, float, str]], list[tuple[float, float, str]]]:
        argv = ["subtitles", str(media), "--from", "en", "--to", "es", "--format", "srt", "-o", str(folder)]
        assert main(argv) == 0, capsys.readouterr()
        capsys.readouterr()
        return read(folder / f"{media.stem}.en.srt"), read(folder / f"{media.stem}.es.srt")

    english, plain = subtitles(tmp_path / "plain")
    GlossaryStore(Settings.from_env().local.glossary_path).add(
        [GlossaryEntry("car", "automóvil")], source="en", target="es"
    )
    english_again, glossed = subtitles(tmp_path / "glossary")
    print(f"\nheard: {english}\nwithout the glossary: {plain}\nwith it: {glossed}")
    assert english_again == english
    assert [(a, b) for a, b, _ in plain] == [(a, b) for a, b, _ in glossed] == [(a, b) for a, b, _ in english]
    # the cues of each sentence (the clip whose span holds the cue's start)
    sentences = [
        [k for k, (a, _, _) in enumerate(english) if clip.start - TOLERANCE <= a <= clip.end]
        for clip in heard["en"].clips
    ]
    assert all(sentences) and sorted(k for ks in sentences for k in ks) == list(range(len(english)))
    # "The old man bought a red car yesterday.": Apertium says "coche"; with the glossary, "automóvil"
    first = sentences[0]
    plain_text = " ".join(plain[k][2] for k in first)
    glossed_text = " ".join(glossed[k][2] for k in first)
    assert "car" in " ".join(english[k][2] for k in first).split(), english
    assert "coche" in plain_text and "automóvil" not in plain_text, plain_text
    assert "automóvil" in glossed_text and "coche" not in glossed_text, glossed_text
    # a sentence heard without "car" comes out as before; one heard with it has the term too
    for cues in sentences[1:]:
        said = re.findall(r"[\w']+", " ".join(english[k][2] for k in cues).lower())
        if "car" in said:
            assert "automóvil" in " ".join(glossed[k][2] for k in cues), (english, glossed)
        else:
            assert [glossed[k] for k in cues] == [plain[k] for k in cues], (plain, glossed)
    assert any("car" not in re.findall(r"[\w']+", english[k][2].lower()) for k in sentences[1])
