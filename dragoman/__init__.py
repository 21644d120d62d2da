"""dragoman: on-device translation with one engine behind several front doors.

The public surface is small; everything else is internal::

    from dragoman import Engine, TranslateOptions
    with Engine() as engine:
        print(engine.translate("The house is red.", TranslateOptions(target="es")).translation)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["DragomanError", "Engine", "Settings", "TranslateOptions", "TranslationResult", "__version__"]

if TYPE_CHECKING:
    from dragoman.errors import DragomanError
    from dragoman.settings import Settings
    from dragoman.translation.engine import Engine
    from dragoman.translation.types import TranslateOptions, TranslationResult


def __getattr__(name: str) -> Any:
    # Lazy, so that `import dragoman` stays cheap (ctranslate2 loads only when the engine is used).
    if name == "Engine":
        from dragoman.translation.engine import Engine

        return Engine
    if name == "DragomanError":
        from dragoman.errors import DragomanError

        return DragomanError
    if name == "TranslationResult":
        from dragoman.translation.types import TranslationResult

        return TranslationResult
    if name == "TranslateOptions":
        from dragoman.translation.types import TranslateOptions

        return TranslateOptions
    if name == "Settings":
        from dragoman.settings import Settings

        return Settings
    raise AttributeError(name)
