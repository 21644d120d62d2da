"""What the system offers the tests: each test that needs a system package skips only when it is missing,
and says which Debian package installs it (``make test`` installs them where apt-get can)."""

from __future__ import annotations

import shutil
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
