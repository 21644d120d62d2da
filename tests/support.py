"""What the system offers the tests: each test that needs a system package skips only when it is missing,
and says which Debian package installs it (``make test`` installs them where apt-get can)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

APERTIUM_MODES = Path("/usr/share/apertium/modes")
HAVE_APERTIUM = shutil.which("lt-proc") is not None and (APERTIUM_MODES / "eng-spa.mode").is_file()
HAVE_TESSERACT = shutil.which("tesseract") is not None

needs_apertium = pytest.mark.skipif(
    not HAVE_APERTIUM, reason="Apertium eng-spa is not installed: apt-get install apertium apertium-eng-spa"
)
needs_tesseract = pytest.mark.skipif(
    not HAVE_TESSERACT, reason="Tesseract is not installed: apt-get install tesseract-ocr"
)


class UpperTranslator:
    """A fake :class:`~dragoman.documents.base.TextTranslator`: upper-cases the text outside what
    ``protected`` matches (what the engine keeps as it is), and records each call's texts."""

    protected: re.Pattern[str] = re.compile(r"<[^<>]*>")
    source: str | None = "eng_Latn"

    def __init__(self, target: str = "spa_Latn") -> None:
        self.target = target
        self.calls: list[list[str]] = []

    def __call__(self, texts: Sequence[str], *, done: int = 0, total: int | None = None) -> list[str]:
        self.calls.append(list(texts))
        return [self.one(t) for t in texts]

    def detect_language(self, text: str) -> str | None:
        return None

    def one(self, text: str) -> str:
        parts = self.protected.split(text)
        out = [parts[0].upper()]
        for kept, part in zip(self.protected.findall(text), parts[1:], strict=True):
            out += [kept, part.upper()]
        return "".join(out)
