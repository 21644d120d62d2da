"""A Procrastinate worker whose ``dub`` handler recognises with the tiny Whisper and dubs with the dub
pipeline, for the hosted dub test in procrastinate mode (run as a script: ``python tests/hosted_dub_worker.py
QUEUES``, configured by the ``DRAGOMAN_*`` variables; the tiny model is installed as ``tiny-whisper`` in the
store of ``DRAGOMAN_PACKS_DIR``'s parent)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str]) -> int:
    from hosted_subtitles_support import DECODE, TINY_ID

    from dragoman.service import dispatch, worker
    from dragoman.service.db import Database
    from dragoman.service.dub_jobs import make_dub_handler
    from dragoman.settings import Settings
    from dragoman.speech.asr import Recognizer
    from dragoman.speech.tts.synth import Synthesizer
    from dragoman.translation.engine import Engine

    settings = Settings.from_env()
    queues = dispatch.parse_queues(argv[0] if argv else "dub,webhooks")
    db = Database.from_settings(settings.hosted)
    with Engine(settings, provenance="server") as engine:
        handler = make_dub_handler(
            db,
            Recognizer(settings, decode_overrides=DECODE),
            engine,
            Synthesizer(settings),
            model=TINY_ID,
            allow_private=settings.hosted.webhooks_allow_private,
            hosted=settings.hosted,
        )
        try:
            return worker.run_worker(settings, queues, handlers={"dub": handler}, maintenance_s=1)
        finally:
            db.dispose()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
