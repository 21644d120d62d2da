"""``engine_status``: what this device can do, where everything lives, what is loaded, whether a daemon runs.

Composed from each package's own ``status()``: the engine's (packs and broken packs, the detection model,
Apertium, CTranslate2's support on this CPU, the batcher, uptime), Tesseract's
(:func:`dragoman.documents.ocr.status`), speech recognition's (:func:`asr_status`),
and the local daemon's liveness, which the front door asks and passes in
(:func:`dragoman.server.daemon.portfile.daemon_status`): this module sits below the front doors and imports
none of them, and the engine knows nothing of the daemon.

Everything here is cheap: the versions and languages of system binaries are kept until the binary or its
data change (:mod:`dragoman.probes`).
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dragoman import __version__
from dragoman.documents import ocr
from dragoman.errors import DragomanError

if TYPE_CHECKING:
    from dragoman.settings import Settings
    from dragoman.translation.engine import Engine


def platform_status() -> dict[str, Any]:
    """The operating system, machine, Python and CPU count of this process."""
    return {
        "system": platform.system(),
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        "cpu_count": os.cpu_count(),
    }


def asr_status(settings: Settings) -> dict[str, Any]:
    """Speech recognition (issue 15): the installed models of kind ``asr``, the default, the ones loaded in
    this process and the device (:meth:`dragoman.speech.asr.Recognizer.status`; nothing is loaded). A store
    that cannot be read is reported, not raised: status answers whatever else is broken."""
    from dragoman.speech.asr import Recognizer

    try:
        return Recognizer(settings).status()
    except DragomanError as exc:
        return {"error": exc.message, "code": exc.code}


def engine_status(engine: Engine, *, daemon: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The whole device's status (``dragoman status``, the MCP ``engine_status`` tool).

    ``daemon`` is what the front door found of the local daemon (``{"alive", "port", "pid", "url"}``), or
    None where it did not look.
    """
    translation = engine.status()
    return {
        "version": __version__,
        "provenance": translation["provenance"],
        "platform": {**platform_status(), **translation["ctranslate2"]},
        "packs_dir": translation["packs_dir"],
        "packs": translation["packs"],
        "broken_packs": translation["broken_packs"],
        "detection": translation["detection"],
        "glossary": {"path": str(engine.settings.local.glossary_path)},
        "apertium": translation["apertium"],
        "tesseract": ocr.status(),
        "asr": asr_status(engine.settings),
        "daemon": dict(daemon) if daemon is not None else None,
        "batching": translation["batching"],
        "uptime_seconds": translation["uptime_seconds"],
    }
