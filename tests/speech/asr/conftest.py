"""Fixtures of the speech recognition tests (issue 15): the tiny Whisper built once per session (copy it
before changing it), and settings with their own model store (the Whisper base recogniser of the slow tests is
tests/speech/conftest.py's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dragoman.settings import Settings
from dragoman.speech.asr import Recognizer
from dragoman.testing.whisper import TINY_DECODE, build_tiny_whisper

TINY_ID = "tiny"


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Whisper directory named ``tiny`` (read-only: copy it before changing it)."""
    return build_tiny_whisper(tmp_path_factory.mktemp("asr-tiny") / TINY_ID)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.build(packs_dir=tmp_path / "data" / "packs", device="cpu")


@pytest.fixture
def tiny_settings(settings: Settings, tiny_model: Path) -> Settings:
    """Settings whose store holds the tiny Whisper as ``tiny``."""
    from dragoman.models.asr import install

    install(tiny_model, settings)
    return settings


@pytest.fixture
def tiny(tiny_settings: Settings) -> Recognizer:
    return Recognizer(tiny_settings, decode_overrides=TINY_DECODE)


# base_recognizer (Whisper base, one per session) is in tests/speech/conftest.py, shared with tests/speech/tts
