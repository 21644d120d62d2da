"""The ten voices and the 31 languages they speak (issue 14).

**Voices.** Ten personas, five female (``aria nova lyra iris maya``) and five male (``marcus atlas felix orion
kai``). Each is a pitch offset (semitones from the engine voice's own pitch), a pace (rate multiplier) and
a timbre (a formant scale), the same in every language (but for a factor on the pace of all of them where an
engine voice is heard better slower: :data:`LANGUAGE_PACE`). Siblings of one gender are spread so any two
differ by at least 1.5 semitones of pitch *and* 5 % of pace (the tests measure both). Siblings share the
language's best engine voice of their gender, so these offsets are what sets them apart, measurably (engine
voices differ in their own pitch: spreading siblings over several would make the ladders collide).

The timbre is a formant scale made without any engine support: the engine renders at
``pitch − 12·log2(scale)`` semitones and ``rate / scale``, and the result is resampled by ``scale`` (played
``scale`` times faster), which moves every formant by ``scale`` and brings pitch and pace back to what was
asked. The same device crosses gender where a language has engine voices of one gender only: a female persona
on a male engine voice is rendered +5 semitones with formants ×1.12, a male persona on a female voice
−5 semitones with formants ×0.89 (:data:`CROSS_GENDER`); the catalogue marks those voices ``"shifted": true``.

**Which engine voice.** Per language, :func:`resolve_voice` takes the installed engine voices of that
language (``EngineVoice.language``) of the persona's gender, best ``quality`` first (Piper neural 90 > SVOX
Pico 70 > festival HTS 60 > festival diphone/clunits 45 > flite 40 > espeak-ng 20); a standard render skips
engines slower than real time ÷ 10 (:data:`SLOW_ENGINES`: Piper, Kokoro) when another voice of the gender is
installed; a studio render takes the best whatever its speed. A better voice installed later (a user's Piper
voice) takes over its language by its quality alone. A voice of the other gender serves (shifted, as below)
when it ranks at least :data:`CROSS_GENDER_MIN_GAIN` (50) above the persona's own gender's best: SVOX Pico
over espeak-ng, so the male personas in German, Spanish, French and Italian speak with Pico shifted down.
Measured (``marcus``, Whisper base, five sentences a language, pooled word error rate), before → Pico
shifted: German 0.32 (espeak-ng) → 0.085, Spanish 0.35 (espeak-ng) → 0.033, French 0.88 (espeak-ng) →
0.058, Italian 0.20 (festival's pc diphone, ranked as espeak-ng for this reason) → 0.05.

**Languages.** The 31 (:data:`LANGUAGES`) are the ten languages with a voice better than espeak-ng installed
here — en, de, es, fr, it (SVOX Pico; en also Piper, flite and festival HTS), cs, fi, ru, ca (festival
voices), hi (its festival voice, festvox-hi-nsk, fails to load on Debian bookworm: espeak-ng serves it) —
and the 21 languages espeak-ng reads most intelligibly: alphabetic languages with regular
spelling-to-sound rules that espeak-ng's authors rate as well-supported (pt nl pl sv da nb el hu ro tr uk bg
hr sk sl sr et lv lt id vi). Left out although espeak-ng has them: zh, ja, ar, he, ko, fa, th (unvoweled
scripts, tones or kanji that espeak-ng reads poorly), and the long tail of small voices.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from dragoman.errors import InvalidRequest, VoiceNotInstalled
from dragoman.speech.tts.engines import EngineVoice, Prosody, TtsEngine
from dragoman.speech.tts.types import EMOTION_PRESETS, VOICE_NAMES

PersonaGender = Literal["female", "male"]


@dataclass(frozen=True)
class Persona:
    """A named voice: gender, pitch offset (semitones), pace (rate multiplier), formant scale, description."""

    name: str
    gender: PersonaGender
    pitch_st: float
    pace: float
    formant: float
    description: str


#: The ten voices. Pitches and paces are permutations of one ladder per gender so siblings differ in both.
PERSONAS: Final[dict[str, Persona]] = {
    p.name: p
    for p in (
        Persona("aria", "female", 0.0, 1.00, 1.00, "clear and even, the default female voice"),
        Persona("nova", "female", 1.5, 1.10, 1.03, "bright and quick"),
        Persona("lyra", "female", 3.0, 0.90, 1.05, "light and unhurried"),
        Persona("iris", "female", -3.0, 1.05, 0.96, "low and crisp"),
        Persona("maya", "female", -1.5, 0.95, 0.98, "warm and measured"),
        Persona("marcus", "male", 0.0, 1.00, 1.00, "steady, the default male voice"),
        Persona("atlas", "male", -3.0, 0.90, 0.95, "deep and slow"),
        Persona("felix", "male", 1.5, 1.10, 1.03, "lively and quick"),
        Persona("orion", "male", -1.5, 1.05, 0.97, "low and brisk"),
        Persona("kai", "male", 3.0, 0.95, 1.04, "light and relaxed"),
    )
}
assert tuple(PERSONAS) == VOICE_NAMES

#: A persona rendered on an engine voice of the other gender: (extra semitones, formant scale).
CROSS_GENDER: Final[dict[PersonaGender, tuple[float, float]]] = {"female": (5.0, 1.12), "male": (-5.0, 0.89)}
#: A voice of the other gender (shifted) serves a persona when it ranks this much higher than the best voice
#: of the persona's gender: SVOX Pico (70) over espeak-ng (20), not festival (45-60) over espeak-ng or Pico
#: over festival. Measured (Whisper base, five sentences a language, pooled word error rate): the male
#: personas went from 0.32-0.88 on espeak-ng to 0.03-0.10 on Pico shifted (module docstring).
CROSS_GENDER_MIN_GAIN: Final = 50

#: Engines slower than a tenth of real time: a standard render uses them only when nothing else of the
#: persona's gender speaks the language; a studio render uses the best voice whatever its speed.
SLOW_ENGINES: Final = frozenset({"piper", "kokoro"})
#: Among voices of equal quality, which of an engine's come first (flite's rms is clearer than kal16).
_TIE_BREAK: Final[dict[str, tuple[str, ...]]] = {"flite": ("rms", "slt", "awb", "kal16")}
#: Per language and engine, a factor on every persona's pace where the engine voice is of the persona's own
#: gender (not shifted), measured for intelligibility (issue 14: WER <= 10% with Whisper base). SVOX Pico's
#: German at 0.9 of the ladder's pace: ten sentences (117 words) rendered as one text, aria 0.094 -> 0.085,
#: nova 0.094 -> 0.085, lyra 0.060 -> 0.051, iris 0.060 -> 0.060, maya 0.077 -> 0.077; five sentences each
#: rendered alone, pooled: aria 0.136 -> 0.102, nova 0.085 -> 0.085, lyra 0.136 -> 0.119, iris 0.085 ->
#: 0.102, maya 0.102 -> 0.102 (77 -> 72 words missed in all; pitch and formant changes moved single words
#: with no trend). Every ratio between siblings (the ladder) is kept.
LANGUAGE_PACE: Final[dict[tuple[str, str], float]] = {("de", "pico"): 0.9}


@dataclass(frozen=True)
class Language:
    code: str
    name: str
    tier: Literal["pico", "festival", "espeak"]


#: The 31 served languages (module docstring says why these).
LANGUAGES: Final[dict[str, Language]] = {
    lang.code: lang
    for lang in (
        Language("en", "English", "pico"),
        Language("de", "German", "pico"),
        Language("es", "Spanish", "pico"),
        Language("fr", "French", "pico"),
        Language("it", "Italian", "pico"),
        Language("cs", "Czech", "festival"),
        Language("fi", "Finnish", "festival"),
        Language("ru", "Russian", "festival"),
        Language("ca", "Catalan", "festival"),
        Language("hi", "Hindi", "espeak"),
        Language("pt", "Portuguese", "espeak"),
        Language("nl", "Dutch", "espeak"),
        Language("pl", "Polish", "espeak"),
        Language("sv", "Swedish", "espeak"),
        Language("da", "Danish", "espeak"),
        Language("nb", "Norwegian Bokmål", "espeak"),
        Language("el", "Greek", "espeak"),
        Language("hu", "Hungarian", "espeak"),
        Language("ro", "Romanian", "espeak"),
        Language("tr", "Turkish", "espeak"),
        Language("uk", "Ukrainian", "espeak"),
        Language("bg", "Bulgarian", "espeak"),
        Language("hr", "Croatian", "espeak"),
        Language("sk", "Slovak", "espeak"),
        Language("sl", "Slovenian", "espeak"),
        Language("sr", "Serbian", "espeak"),
        Language("et", "Estonian", "espeak"),
        Language("lv", "Latvian", "espeak"),
        Language("lt", "Lithuanian", "espeak"),
        Language("id", "Indonesian", "espeak"),
        Language("vi", "Vietnamese", "espeak"),
    )
}
assert len(LANGUAGES) == 31

_ALIASES: Final = {"no": "nb", "nn": "nb", "in": "id"}
#: The locale a bare language code means when its engines have several (others: ``xx`` or ``xx-xx``).
_MAIN_LOCALE: Final = {
    "en": "en-us",
    "pt": "pt-pt",
    "sv": "sv-se",
    "da": "da-dk",
    "el": "el-gr",
    "uk": "uk-ua",
}


def language_code(language: str) -> tuple[str, str]:
    """``(two-letter code, full tag)`` of a requested language (``en-GB`` → ``("en", "en-gb")``); a language
    not among the 31 is an :class:`InvalidRequest` listing them."""
    tag = language.strip().lower().replace("_", "-")
    code = tag.split("-", 1)[0]
    code = _ALIASES.get(code, code)
    if code not in LANGUAGES:
        raise InvalidRequest(
            f"language {language!r} is not served; the 31 languages are {', '.join(LANGUAGES)}"
        )
    return code, tag


@dataclass(frozen=True)
class ResolvedVoice:
    """What a persona is in one language: the engine, its voice, the prosody offsets (the persona's pace and
    pitch, compensated for the formant scale), the formant scale applied after the engine, and whether the
    engine voice is of the other gender (shifted)."""

    engine: TtsEngine
    voice: EngineVoice
    prosody: Prosody
    formant: float
    shifted: bool
    persona: Persona

    def __iter__(self) -> Iterator[object]:  # (engine, voice, prosody), the plan's triple
        return iter((self.engine, self.voice, self.prosody))


def persona(name: str) -> Persona:
    try:
        return PERSONAS[name.strip().lower()]
    except KeyError:
        raise InvalidRequest(f"unknown voice {name!r}; the voices are {', '.join(PERSONAS)}") from None


def _voices_of(engines: Sequence[TtsEngine], code: str) -> list[tuple[TtsEngine, EngineVoice]]:
    return [(engine, voice) for engine in engines for voice in engine.voices() if voice.language == code]


def _locale(voice: EngineVoice) -> str:
    return voice.locale.lower().replace("_", "-")


def _rank(voice: EngineVoice, main: set[str]) -> tuple[int, bool, int, str, str]:
    """Quality first; among equals the language's main locale, then the engine's own order, then names."""
    order = _TIE_BREAK.get(voice.engine, ())
    tie = order.index(voice.id) if voice.id in order else len(order)
    return (-voice.quality, _locale(voice) not in main, tie, voice.engine, voice.id)


def _pick(
    candidates: list[tuple[TtsEngine, EngineVoice]], tag: str, studio: bool
) -> tuple[TtsEngine, EngineVoice] | None:
    if not studio:
        fast = [c for c in candidates if c[1].engine not in SLOW_ENGINES]
        candidates = fast or candidates
    if not candidates:
        return None
    if "-" in tag:  # a region asked for (en-GB): its voices, when there are any, whatever their quality
        candidates = [c for c in candidates if _locale(c[1]) == tag] or candidates
    # else among the best, the language's main locale (en-US, pt-PT, fr-FR), so a persona keeps one accent
    code = tag.split("-", 1)[0]
    main = {code, f"{code}-{code}", _MAIN_LOCALE.get(code, code)}
    return min(candidates, key=lambda c: _rank(c[1], main))


def resolve_voice(
    name: str, language: str, engines: Sequence[TtsEngine], *, studio: bool = False
) -> ResolvedVoice:
    """The engine voice and settings that speak persona ``name`` in ``language`` (module docstring)."""
    who = persona(name)
    code, tag = language_code(language)
    candidates = _voices_of(engines, code)
    same = [c for c in candidates if c[1].gender == who.gender]
    chosen = _pick(same, tag, studio)
    best = _pick(candidates, tag, studio)
    if (
        chosen is not None
        and best is not None
        and best[1].gender not in (who.gender, "neutral")
        and best[1].quality - chosen[1].quality >= CROSS_GENDER_MIN_GAIN
    ):
        chosen = None  # far more intelligible shifted than the persona's own gender (CROSS_GENDER_MIN_GAIN)
    shifted = False
    pitch, formant = who.pitch_st, who.formant
    if chosen is None:
        chosen = _pick(candidates, tag, studio)
        if chosen is None:
            raise VoiceNotInstalled(
                f"no speech engine for {LANGUAGES[code].name} ({code}) is installed; install espeak-ng "
                "(scripts/install-system-deps.sh) or a Piper voice for it"
            )
        if chosen[1].gender != "neutral":
            extra, scale = CROSS_GENDER[who.gender]
            pitch, formant, shifted = pitch + extra, formant * scale, True
    engine, voice = chosen
    compensation = 12 * math.log2(formant)
    pace = who.pace if shifted else who.pace * LANGUAGE_PACE.get((code, voice.engine), 1.0)
    prosody = Prosody(rate=pace / formant, pitch_st=pitch - compensation)
    return ResolvedVoice(engine, voice, prosody, formant, shifted, who)


def voice_catalogue(engines: Sequence[TtsEngine]) -> dict[str, object]:
    """What ``GET /api/v1/tts/voices`` and ``dragoman voices list`` answer: the languages (with the engines
    installed for each), per voice, per language, the engine voice serving it in a standard and a studio
    render (None where no engine is installed for the language), and ``models``: the engine voices installed
    as models (Piper voices, Kokoro voices), each with its licence (``EngineVoice.license``)."""
    languages = []
    for code, lang in LANGUAGES.items():
        installed = sorted({v.engine for _, v in _voices_of(engines, code)})
        languages.append({"code": code, "name": lang.name, "engines": installed})
    voices = []
    for who in PERSONAS.values():
        per_language: dict[str, object] = {}
        for code in LANGUAGES:
            entry: dict[str, object] = {}
            for mode, studio in (("standard", False), ("studio", True)):
                try:
                    chosen = resolve_voice(who.name, code, engines, studio=studio)
                except VoiceNotInstalled:
                    entry[mode] = None
                    continue
                entry[mode] = {
                    "engine": chosen.voice.engine,
                    "engine_voice": chosen.voice.id,
                    "quality": chosen.voice.quality,
                    "shifted": chosen.shifted,
                }
            per_language[code] = entry
        voices.append(
            {
                "name": who.name,
                "gender": who.gender,
                "description": who.description,
                "pitch_st": who.pitch_st,
                "pace": who.pace,
                "formant": who.formant,
                "languages": per_language,
            }
        )
    models = [
        {
            "engine": v.engine,
            "engine_voice": v.id,
            "language": v.language,
            "locale": v.locale,
            "license": v.license,
        }
        for engine in engines
        for v in engine.voices()
        if v.license is not None
    ]
    return {
        "voices": voices,
        "languages": languages,
        "models": models,
        "emotions": {
            name: {**preset.emotion.to_dict(), "style": preset.style}
            for name, preset in EMOTION_PRESETS.items()
        },
    }
