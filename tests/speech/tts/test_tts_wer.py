"""Issue 14's intelligibility check, now that the recogniser exists (issue 15): renders of the embedded
voices, transcribed by the embedded Whisper base (one recogniser per session, tests/speech/conftest.py),
scored by word error rate (:func:`dragoman.speech.asr.score.word_error_rate`).

Issue 14's target is WER <= 10% for every language served by a Pico or Piper voice. The personas that Pico
serves (aria, nova, lyra, iris, maya: female; the male personas use flite, festival or espeak-ng here, or
Piper where its voice is installed) were measured on these sentences with Whisper base (int8, beam 5):

==== ==================================================== ==========
lang WER per voice (aria nova lyra iris maya)              target met
==== ==================================================== ==========
en   0.00 0.06 0.00 0.00 0.00                              yes
es   0.08 0.08 0.08 0.08 0.08                              yes
de   0.08 0.15 0.23 0.15 0.23 ("zuschauen" heard as two)  no
fr   0.20 0.13 0.07 0.13 0.07                              no
it   0.07 0.13 0.07 0.07 0.00                              no
==== ==================================================== ==========

On one sentence the target holds in English and Spanish and not for every voice in German, French and
Italian, where Whisper base mishears a word or two ("Fuchs" as "Fuß", "paresseux" as "paraissé"). The bounds
below are the target where it is met and the measured worst plus one word elsewhere, so a regression in any
voice or in the recogniser fails. Slow: 17 renders of about 5 s, transcribed on 2 cores. On five sentences a
language, each rendered and transcribed alone and pooled, every female persona is within the target in
English (0.000-0.032), Spanish (0.033), French (0.014-0.029) and Italian (0.033-0.100), and German is not
(aria 0.136, nova 0.085, lyra 0.136, iris 0.085, maya 0.102): see the ten-sentence check below.

The male personas in es, de, fr and it are served by Pico shifted down (a far better voice of the other
gender beats espeak-ng and festival's Italian diphone: voices.py ``CROSS_GENDER_MIN_GAIN``), and held to the
same bounds.

One sentence is too few words to judge a 10% target (one word of 13 is 8%), so the target itself is checked on
ten sentences a language (:data:`POOLED`: 117 German, 112 Italian words), rendered as one text and transcribed
once, for the personas that missed it on the first five sentences (German aria, lyra and maya) or met it by at
most one word (German nova 0.085, Italian maya 0.100, lyra 0.083). The German excess on five sentences was one
to three words that moved with no trend in pitch or formant scale (aria, the native Pico voice, missed too),
and pitch or timbre settings that fixed those five were as bad or worse on five other sentences (German lyra
at formant scale 1.00 instead of 1.05: 0.136 -> 0.085 on the five, 0.034 -> 0.086 on the other five), so the
persona ladder stays. Pace had a weak trend (slower better in 8, equal in 4, worse in 1 of 13 paired
measurements), so Pico's German speaks every female persona at 0.9 of its pace (voices.LANGUAGE_PACE; the
ladder's ratios kept). Measured on the ten (one render each, Whisper base int8, beam 5), before -> after:
German aria 0.094 -> 0.085, nova 0.094 -> 0.085, lyra 0.060 -> 0.051, iris 0.060 -> 0.060, maya 0.077 ->
0.077; Italian (unchanged) maya 0.054, lyra 0.080. On the first five German sentences alone, each rendered and
transcribed alone, the target is still missed by a word: aria 0.102, nova 0.085, lyra 0.119, iris 0.102, maya
0.102 (before: 0.136, 0.085, 0.136, 0.085, 0.102). Every German render shares errors of Pico's or the scorer's
(``frischem`` heard as ``frischen``, ``zuschauen`` as ``zu schauen``, ``neun`` written ``9``): about four
words of the margin. Slow: six renders of about 45 s.

The scorer now reads 0-20 written in digits as their words, given the language (score.NUMBER_WORDS), so
``9`` for ``neun`` is no error. Re-measured with it (Whisper base int8, beam 5; digits as digits -> as
words, the same renders): the first five German sentences each alone, pooled over 59 words: aria 0.102 ->
0.085, nova 0.068 -> 0.051, lyra 0.085 -> 0.068, iris 0.102 -> 0.085, maya 0.085 -> 0.068, every persona
within the target; the ten as one text: aria 0.085 -> 0.077, nova 0.077, lyra 0.017 -> 0.009, maya 0.060
(this run's recogniser heard lyra and maya better than the figures above: one render, one transcription
each).
"""

from __future__ import annotations

import pytest
from speech_support import engine_names, engines, synthesizer

from dragoman.speech.asr import Recognizer, TranscribeOptions
from dragoman.speech.asr.score import word_error_rate
from dragoman.speech.tts.types import SynthesisOptions
from dragoman.speech.tts.voices import PERSONAS, resolve_voice

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif("pico" not in engine_names(), reason="pip install py-nanotts (SVOX Pico)"),
]

TEXTS = {
    "en": "The quick brown fox jumps over the lazy dog while the children watch from the garden.",
    "es": "El rápido zorro marrón salta sobre el perro perezoso mientras los niños miran.",
    "de": "Der schnelle braune Fuchs springt über den faulen Hund, während die Kinder zuschauen.",
    "fr": "Le renard brun rapide saute par-dessus le chien paresseux pendant que les enfants regardent.",
    "it": "La veloce volpe marrone salta sopra il cane pigro mentre i bambini guardano dal giardino.",
}
#: Issue 14's target where it is met (en, es); elsewhere the measured worst plus one word.
BOUND = {"en": 0.10, "es": 0.10, "de": 0.31, "fr": 0.27, "it": 0.2}
CASES = [("en", v) for v in ("aria", "nova", "lyra", "iris", "maya")] + [
    (code, v) for code in ("es", "de", "fr", "it") for v in ("aria", "nova")
]
#: The male personas speak with Pico shifted down where only espeak-ng has a male voice (voices.py:
#: CROSS_GENDER_MIN_GAIN); before they were heard far worse (marcus, five sentences pooled: de 0.32, es
#: 0.35, fr 0.88 on espeak-ng, it 0.20 on festival's pc diphone; on Pico shifted 0.085, 0.033, 0.058, 0.05).
CASES += [(code, "marcus") for code in ("es", "de", "fr", "it")]


@pytest.mark.parametrize(("language", "voice"), CASES)
def test_pico_voices_are_understood_by_the_recogniser(
    base_recognizer: Recognizer, language: str, voice: str
) -> None:
    result = synthesizer().synthesize(TEXTS[language], SynthesisOptions(voice, language))
    assert result.engine == "pico", (voice, language, result.engine)
    heard = base_recognizer.transcribe(result.audio, TranscribeOptions(language=language))
    wer = word_error_rate(TEXTS[language], heard.text, language)
    assert wer <= BOUND[language], (voice, language, round(wer, 3), heard.text)


#: Ten sentences a language for the pooled check of the target (the first five are the five of the
#: measurement in voices.py's module docstring).
POOLED = {
    "de": (
        "Der schnelle braune Fuchs springt über den faulen Hund, während die Kinder zuschauen.",
        "Morgen fahren wir mit dem Zug nach Berlin und besuchen unsere Großeltern.",
        "Bitte schließen Sie das Fenster, denn es wird heute Abend sehr kalt.",
        "Die Bibliothek öffnet um neun Uhr und schließt am späten Nachmittag.",
        "Mein Bruder kocht gerne Suppe mit frischem Gemüse aus dem Garten.",
        "Im Sommer schwimmen die Kinder gerne im kalten See hinter dem Dorf.",
        "Der Arzt sagt, dass meine Mutter noch eine Woche im Bett bleiben muss.",
        "Wir haben gestern Abend einen langen Spaziergang durch den Wald gemacht.",
        "Kannst du mir bitte das Salz und den Pfeffer über den Tisch reichen?",
        "Die Lehrerin erklärt den Schülern geduldig die neue Aufgabe.",
    ),
    "it": (
        "La veloce volpe marrone salta sopra il cane pigro mentre i bambini guardano dal giardino.",
        "Domani prenderemo il treno per Roma per andare a trovare i nostri nonni.",
        "Per favore chiudete la finestra, perché stasera farà molto freddo.",
        "La biblioteca apre alle nove e chiude nel tardo pomeriggio.",
        "Mio fratello ama preparare la zuppa con le verdure fresche dell'orto.",
        "D'estate i ragazzi nuotano nel lago freddo dietro il paese.",
        "Il medico dice che mia madre deve restare a letto ancora una settimana.",
        "Ieri sera abbiamo fatto una lunga passeggiata nel bosco.",
        "Puoi passarmi il sale e il pepe, per favore?",
        "La maestra spiega con pazienza il nuovo compito agli studenti.",
    ),
}
#: Issue 14's target, held on the ten sentences.
TARGET = 0.10
POOLED_CASES = [
    ("de", "aria"),
    ("de", "nova"),
    ("de", "lyra"),
    ("de", "maya"),
    ("it", "lyra"),
    ("it", "maya"),
]


@pytest.mark.parametrize(("language", "voice"), POOLED_CASES)
def test_pico_personas_meet_the_target_over_ten_sentences(
    base_recognizer: Recognizer, language: str, voice: str
) -> None:
    text = " ".join(POOLED[language])
    result = synthesizer().synthesize(text, SynthesisOptions(voice, language))
    assert result.engine == "pico", (voice, language, result.engine)
    heard = base_recognizer.transcribe(result.audio, TranscribeOptions(language=language))
    wer = word_error_rate(text, heard.text, language)
    print(f"{language} {voice}: WER {wer:.3f}")
    assert wer <= TARGET, (voice, language, round(wer, 3), heard.text)


def test_german_pico_personas_speak_at_nine_tenths_of_their_pace() -> None:
    """voices.LANGUAGE_PACE: the female personas on Pico's German, not the male ones shifted onto it, nor
    another language."""
    for name in ("aria", "nova", "lyra", "iris", "maya"):
        german = resolve_voice(name, "de", engines())
        english = resolve_voice(name, "en", engines())
        assert german.voice.engine == "pico" and not german.shifted
        assert german.prosody.rate == pytest.approx(0.9 * english.prosody.rate), name
        assert english.prosody.rate == pytest.approx(PERSONAS[name].pace / PERSONAS[name].formant), name
    marcus = resolve_voice("marcus", "de", engines())
    assert marcus.shifted and marcus.prosody.rate == pytest.approx(1.0 / marcus.formant)


#: Ten English sentences (123 words), for the Piper voice: rendered as one text.
ENGLISH = (
    "The quick brown fox jumps over the lazy dog while the children watch from the garden.",
    "Tomorrow we are taking the train to London to visit our grandparents.",
    "Please close the window, because it will be very cold this evening.",
    "The library opens at nine in the morning and closes late in the afternoon.",
    "My brother likes to cook soup with fresh vegetables from the garden.",
    "In the summer the children swim in the cold lake behind the village.",
    "The doctor says that my mother must stay in bed for another week.",
    "Yesterday evening we went for a long walk through the forest.",
    "Could you please pass me the salt and the pepper across the table?",
    "The teacher patiently explains the new exercise to the students.",
)


@pytest.mark.skipif("piper" not in engine_names(), reason="the embedded Piper voice is not installed")
@pytest.mark.parametrize("voice", ["marcus", "atlas"])
def test_the_piper_voice_meets_the_target_over_ten_sentences(base_recognizer: Recognizer, voice: str) -> None:
    """Piper's neural en_US-joe-medium serves the English male personas in studio renders; measured over
    the ten sentences (Whisper base int8, beam 5): marcus 0.000, atlas 0.000-0.008 over two runs ('in'
    heard 'and' once), felix, orion and kai 0.000."""
    text = " ".join(ENGLISH)
    result = synthesizer().synthesize(text, SynthesisOptions(voice, "en", studio=True))
    assert result.engine == "piper", (voice, result.engine)
    heard = base_recognizer.transcribe(result.audio, TranscribeOptions(language="en"))
    wer = word_error_rate(text, heard.text, "en")
    print(f"en {voice} (piper): WER {wer:.3f}")
    assert wer <= TARGET, (voice, round(wer, 3), heard.text)
