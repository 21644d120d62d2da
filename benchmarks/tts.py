"""Speech synthesis (issue 14): real-time factor per engine and mode, time to the first streamed byte over
HTTP, and intelligibility, in one run.

    python benchmarks/tts.py            # every installed engine, 7 rounds
    python benchmarks/tts.py --quick    # a smoke run: 2 rounds, fewer voices and languages

1. **Real-time factor per engine** (standard): each installed engine speaks the same English (or its own
   language's) sentence through its own voice, sides alternated round by round; the figure is the audio's
   seconds over the render's seconds ("x real time"; target: at least 10x for standard renders).
2. **Per mode**: the synthesizer (voice ``aria``) in standard and studio mode for a language of each engine
   family, alternated; studio renders at 48 kHz with loudness normalisation, so it costs more.
3. **Time to first streamed byte** over HTTP: ``POST /api/v1/tts/synth/stream`` of a short sentence on a
   hosted service running in this process (SQLite, loopback): milliseconds until the first audio bytes
   after the WAV header arrive, alternated with the whole inline render (``POST /api/v1/tts/synth``) of the
   same sentence. Target: under 300 ms.
4. **Intelligibility**: the word error rate of each render as the embedded Whisper base hears it, through
   dragoman's own recogniser (``dragoman.speech.asr.Recognizer``; never a hub model name, which would need the
   internet).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness as harness

SENTENCE = "The quick brown fox jumps over the lazy dog while the children watch from the garden."
TEXTS = {
    "en": "The quick brown fox jumps over the lazy dog while the children watch from the garden.",
    "de": "Der schnelle braune Fuchs springt über den faulen Hund, während die Kinder zuschauen.",
    "fi": "Nopea ruskea kettu hyppää laiskan koiran yli, kun lapset katsovat puutarhasta.",
    "pt": "A rápida raposa castanha salta sobre o cão preguiçoso enquanto as crianças olham.",
    "es": "El rápido zorro marrón salta sobre el perro perezoso mientras los niños miran.",
    "fr": "Le renard brun rapide saute par-dessus le chien paresseux pendant que les enfants regardent.",
    "cs": "Rychlá hnědá liška skáče přes líného psa, zatímco se děti dívají ze zahrady.",
    "ru": "Быстрая коричневая лиса прыгает через ленивую собаку, пока дети смотрят из сада.",
    "ca": "La guineu marró ràpida salta per sobre del gos mandrós mentre els nens miren des del jardí.",
    "it": "La veloce volpe marrone salta sopra il cane pigro mentre i bambini guardano dal giardino.",
}
SHORT = "Hello, this is a short sentence."


def rtf_side(render: Any) -> Any:
    def side() -> float:
        started = time.perf_counter()
        seconds = render()
        return float(seconds) / (time.perf_counter() - started)

    return side


def text2wave_render(voice: Any) -> float:
    """festival's own ``text2wave`` started afresh for one render (voice loading included), as dragoman ran
    festival before its sessions: the side-by-side reference for the festival rows."""
    from dragoman.media.audio import read_wav
    from dragoman.speech.tts.engines import festival

    spec = next(v for v in festival.KNOWN if v.name == voice.id)
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "out.wav"
        subprocess.run(
            ["text2wave", "-eval", f"(voice_{spec.name})", "-o", str(out)],
            input=festival.encode(TEXTS.get(voice.language, SENTENCE), spec.encoding) + b"\n",
            check=True,
            capture_output=True,
            timeout=120,
        )
        return float(read_wav(out).duration)


def engines_part(synthesizer: Any, rounds: int) -> None:
    from dragoman.speech.tts.engines import Prosody

    sides: dict[str, Any] = {}
    for engine in synthesizer.engines():
        voices = engine.voices()
        if not voices:
            print(f"  {engine.name}: no voice installed (skipped)")
            continue
        chosen = [next((v for v in voices if v.language == "en"), voices[0])]
        if engine.name == "festival":  # it serves the languages nothing faster speaks: each one's first voice
            chosen += [
                v
                for v in voices
                if v.language != "en" and v == next(w for w in voices if w.language == v.language)
            ]
        for voice in chosen:
            text = TEXTS.get(voice.language, SENTENCE)

            def render(engine: Any = engine, voice: Any = voice, text: str = text) -> float:
                return float(engine.synthesize(text, voice.id, Prosody()).audio.duration)

            sides[f"{engine.name}:{voice.id}"] = rtf_side(render)
        if engine.name == "festival" and shutil.which("text2wave"):  # as festival was run before sessions
            sides[f"text2wave:{chosen[0].id}"] = rtf_side(lambda v=chosen[0]: text2wave_render(v))
    rows = harness.alternate_measured(sides, rounds, warmup=1)
    print(f"\n1. real-time factor per engine, standard render ({rounds} alternated rounds; target >= 10x)")
    for name in rows.names:
        spread = rows.spread(name)
        mark = "" if spread.median >= 10 else "   (under the 10x target)"
        print(f"  {name:<28} {spread.text('.1f', 'x')} real time{mark}")


def modes_part(synthesizer: Any, rounds: int, languages: list[str]) -> None:
    from dragoman.speech.tts.types import SynthesisOptions

    sides: dict[str, Any] = {}
    for code in languages:
        for mode in ("standard", "studio"):
            options = SynthesisOptions("aria", code, studio=mode == "studio")
            try:
                resolved = synthesizer.resolve(options)
            except Exception as exc:  # a language no installed engine serves
                print(f"  {code} {mode}: {exc}")
                continue

            def render(options: Any = options, code: str = code) -> float:
                return float(synthesizer.synthesize(TEXTS[code], options).audio.duration)

            sides[f"{code} {mode} ({resolved.voice.engine})"] = rtf_side(render)
    rows = harness.alternate_measured(sides, rounds, warmup=1)
    print(f"\n2. real-time factor per mode, voice aria ({rounds} alternated rounds)")
    for name in rows.names:
        print(f"  {name:<32} {rows.spread(name).text('.1f', 'x')} real time")


def stream_part(rounds: int) -> None:
    import httpx

    from dragoman.server.hosted.app import create_app
    from dragoman.service import accounts, migrate
    from dragoman.service.db import Database
    from dragoman.settings import Settings
    from dragoman.testing.daemon import BackgroundDaemon
    from dragoman.translation.engine import Engine

    tmp = Path(tempfile.mkdtemp(prefix="dragoman-bench-tts-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRAGOMAN_")}
    env.update(
        DRAGOMAN_PACKS_DIR=str(tmp / "packs"),
        DRAGOMAN_GLOSSARY=str(tmp / "glossary.json"),
        DRAGOMAN_STATE_DIR=str(tmp / "state"),
        DRAGOMAN_HOSTED_DIR=str(tmp / "hosted"),
        DRAGOMAN_APERTIUM="0",
    )
    settings = Settings.from_env(env)
    db = Database(settings.hosted.database_url)
    migrate.upgrade(db)
    account = accounts.create_account(db, name="benchmark", plan="pro", credits=10**9)
    key = accounts.create_key(db, account.id).key
    engine = Engine(settings, provenance="server")
    app = create_app(settings, engine, db=db, rate_per_minute=10**6, start_workers=False)
    body = {"voiceId": "aria", "targetLang": "en", "text": SHORT}
    with (
        BackgroundDaemon(app) as daemon,
        httpx.Client(base_url=daemon.url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client,
    ):

        def first_byte() -> float:
            started = time.perf_counter()
            got = b""
            at: float | None = None
            with client.stream("POST", "/api/v1/tts/synth/stream", json=body) as response:
                response.raise_for_status()
                for chunk in response.iter_raw():
                    got += chunk
                    if at is None and len(got) > 44:
                        at = time.perf_counter()
            assert at is not None, "no audio streamed"
            return (at - started) * 1000

        def inline() -> float:
            started = time.perf_counter()
            response = client.post("/api/v1/tts/synth", json=body)
            response.raise_for_status()
            return (time.perf_counter() - started) * 1000

        rows = harness.alternate_measured(
            {"stream: first audio byte": first_byte, "inline: whole WAV": inline}, rounds, warmup=1
        )
    engine.close()
    print(
        f"\n3. over HTTP (hosted, loopback, SQLite), a short sentence ({len(SHORT)} characters), voice aria"
    )
    for name in rows.names:
        print(f"  {name:<26} {rows.spread(name).text('.0f', ' ms')}")
    ttfb = rows.spread("stream: first audio byte").median
    print(
        f"  target: first streamed audio under 300 ms: {'met' if ttfb < 300 else 'NOT met'} ({ttfb:.0f} ms)"
    )


def intelligibility_part(synthesizer: Any, voices: list[str], languages: list[str]) -> None:
    from dragoman.settings import Settings
    from dragoman.speech.asr import Recognizer, TranscribeOptions
    from dragoman.speech.asr.score import word_error_rate
    from dragoman.speech.tts.types import SynthesisOptions

    # The embedded Whisper base through dragoman's own recogniser (never a hub model name: offline machines).
    print("\n4. intelligibility: word error rate of the embedded Whisper base's transcription")
    recognizer = Recognizer(Settings.from_env())
    for code in languages:
        cells: list[str] = []
        for voice in voices:
            result = synthesizer.synthesize(TEXTS[code], SynthesisOptions(voice, code))
            heard = recognizer.transcribe(result.audio, TranscribeOptions(language=code))
            cells.append(f"{voice} WER {word_error_rate(TEXTS[code], heard.text, code):.0%}")
        engine = synthesizer.resolve(SynthesisOptions(voices[0], code)).voice.engine
        print(f"  {code} ({engine}): " + "; ".join(cells))


def main(argv: list[str] | None = None) -> int:
    parser = harness.parser(__doc__, rounds=7, quick_rounds=2)
    parser.add_argument("--no-http", action="store_true", help="skip the HTTP streaming part")
    args = parser.parse_args(argv)
    rounds = harness.rounds_of(args)

    from dragoman.settings import Settings
    from dragoman.speech.tts.synth import Synthesizer

    synthesizer = Synthesizer(Settings.from_env())
    names = [e.name for e in synthesizer.engines()]
    print(f"speech engines installed: {', '.join(names) or 'none'}; {os.cpu_count()} CPUs; {rounds} rounds")
    engines_part(synthesizer, rounds)
    languages = ["en", "fi", "pt"] if args.quick else ["en", "de", "fi", "pt", "cs"]
    modes_part(synthesizer, rounds, languages)
    if not args.no_http:
        stream_part(max(rounds, 3))
    voices = ["aria", "marcus"] if args.quick else ["aria", "nova", "lyra", "iris", "maya", "marcus", "kai"]
    intelligibility_part(synthesizer, voices, list(TEXTS) if not args.quick else ["en", "fi", "pt"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
