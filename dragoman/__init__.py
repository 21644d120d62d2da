"""dragoman: on-device translation with one engine behind several front doors.

The public surface is what a Python user needs; everything else is internal::

    from dragoman import Engine, TranslateOptions
    with Engine() as engine:
        print(engine.translate("The house is red.", TranslateOptions(target="es")).translation)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> the module that defines it. Imported on first use, so `import dragoman` stays cheap
#: (CTranslate2, PyMuPDF and the MCP SDK load only when the engine or a document is used).
_PUBLIC: dict[str, str] = {
    "Detection": "dragoman.languages.types",
    "DocumentResult": "dragoman.pipelines.translate_file",
    "DragomanError": "dragoman.errors",
    "Engine": "dragoman.translation.engine",
    "GlossaryEntry": "dragoman.translation.types",
    "Settings": "dragoman.settings",
    "TranslateOptions": "dragoman.translation.types",
    "TranslationResult": "dragoman.translation.types",
    "translate_file": "dragoman.pipelines.translate_file",
}

__all__ = [
    "Detection",
    "DocumentResult",
    "DragomanError",
    "Engine",
    "GlossaryEntry",
    "Settings",
    "TranslateOptions",
    "TranslationResult",
    "__version__",
    "translate_file",
]

if TYPE_CHECKING:
    from dragoman.errors import DragomanError
    from dragoman.languages.types import Detection
    from dragoman.pipelines.translate_file import DocumentResult, translate_file
    from dragoman.settings import Settings
    from dragoman.translation.engine import Engine
    from dragoman.translation.types import GlossaryEntry, TranslateOptions, TranslationResult


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'dragoman' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
