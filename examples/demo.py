"""`make demo`: the main job on the embedded default (Apertium), with no model pack installed.

Translates real sentences English -> Spanish and back, a batch that mixes languages, shows language
detection and the engine's status. Runs offline; takes a few seconds.
"""

from __future__ import annotations

import shutil
import sys
import time

from dragoman import Engine, TranslateOptions
from dragoman.errors import DragomanError
from dragoman.server.daemon.portfile import daemon_status
from dragoman.status import engine_status

SENTENCES_EN = [
    "The house is red and the garden is very big.",
    "Dr. Smith will arrive at 3.30 p.m. on Monday. Please call {name} at %s.",
    "Translation runs on this computer, not in the cloud.",
]


def main() -> int:
    if shutil.which("lt-proc") is None:
        print(
            "Apertium is not installed: run `make demo` as root on Debian, or `apt-get install apertium "
            "apertium-eng-spa`, then try again.",
            file=sys.stderr,
        )
        return 1
    with Engine() as engine:
        print("== English -> Spanish (Apertium, on-device)")
        started = time.perf_counter()
        results = engine.translate_batch(SENTENCES_EN, TranslateOptions("es", source="en"))
        for source, result in zip(SENTENCES_EN, results, strict=True):
            print(f"  {source}\n  -> {result.translation}")
        print(
            f"  [{len(results)} texts in {time.perf_counter() - started:.3f}s; route {results[0].route}; "
            f"provenance {results[0].provenance}]"
        )

        print("\n== Spanish -> English, source detected")
        back = engine.translate("La casa es roja y el jardín es muy grande.", TranslateOptions("eng_Latn"))
        print(
            f"  La casa es roja y el jardín es muy grande.\n  -> {back.translation}  (source {back.source})"
        )

        print("\n== A batch that mixes languages (each text detected on its own)")
        mixed = [
            "Good morning, how are you today?",
            "Buenos días, ¿cómo estás hoy?",
            "Bon dia, com estàs avui?",
        ]
        for text, result in zip(mixed, engine.translate_batch(mixed, TranslateOptions("es")), strict=True):
            print(f"  [{result.source}] {text} -> {result.translation} {list(result.warnings) or ''}")

        print("\n== Language detection")
        for text in [
            "Where is the train station?",
            "Où est la gare ?",
            "Wo ist der Bahnhof?",
            "駅はどこですか？",
            "ok",
        ]:
            found = engine.detect(text)
            print(
                f"  {text!r}: {found.flores or 'uncertain'} "
                f"({found.confidence:.2f}{', ' + found.reason if found.reason else ''})"
            )

        print("\n== Errors are typed and say what to do")
        try:
            engine.translate("Hello", TranslateOptions("klingon"))
        except DragomanError as exc:
            print(f"  {type(exc).__name__} ({exc.status}): {exc.message}")

        print("\n== Status")
        status = engine_status(engine, daemon=daemon_status(engine.settings))
        print(
            f"  ctranslate2 {status['platform']['ctranslate2']}, CPU compute types "
            f"{', '.join(status['platform']['compute_types_cpu'])}"
        )
        print(f"  Apertium pairs: {', '.join(status['apertium']['pairs'])}")
        print(f"  packs loaded: {', '.join(p['id'] for p in status['packs'] if p['loaded'])}")
        print(f"  Tesseract: {status['tesseract']['version']}; daemon alive: {status['daemon']['alive']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
