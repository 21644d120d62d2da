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

So the target holds in English and Spanish and not for every voice in German, French and Italian, where
Whisper base mishears Pico's pitch-shifted personas ("Fuchs" as "Fuß", "paresseux" as "paraissé"): a larger
recognition model (``dragoman asr install``) would say whether the voices or the recogniser are at fault.
The bounds below are the target where it is met and the measured worst plus one word elsewhere, so a
regression in any voice or in the recogniser fails. Slow: 17 renders of about 5 s, transcribed on 2 cores.

The male personas in es, de, fr and it are served by Pico shifted down (a far better voice of the other
gender beats espeak-ng and festival's Italian diphone: voices.py ``CROSS_GENDER_MIN_GAIN``), and held to the
same bounds.
"""

from __future__ import annotations

import pytest
from speech_support import engine_names, synthesizer

from dragoman.speech.asr import Recognizer, TranscribeOptions
from dragoman.speech.asr.score import word_error_rate
from dragoman.speech.tts.types import SynthesisOptions

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
    wer = word_error_rate(TEXTS[language], heard.text)
    assert wer <= BOUND[language], (voice, language, round(wer, 3), heard.text)
