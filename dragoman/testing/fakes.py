"""Fake translators (and a blocking engine) for tests, benchmarks and examples: deterministic stand-ins.

Each satisfies :class:`~dragoman.documents.base.TextTranslator` (what document handlers call), records the
texts of every call in ``calls``, and rewrites each text with a plain function, so a test can tell which
parts of a document went through translation and which were kept.
"""

from __future__ import annotations

import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from dragoman.languages.types import Language
from dragoman.limits import Provenance
from dragoman.progress import JobContext
from dragoman.translation.types import TranslateOptions, TranslationResult


class FakeTranslator:
    """Rewrites each text with ``rewrite``; blank texts come back as given when ``keep_blank``.

    ``detected`` is what :meth:`detect_language` answers (None: uncertain), for handlers that detect the
    source of a region (OCR) when ``source`` is None.
    """

    def __init__(
        self,
        rewrite: Callable[[str], str] = str.upper,
        *,
        source: str | None = "eng_Latn",
        target: str = "spa_Latn",
        detected: str | None = None,
        keep_blank: bool = False,
    ) -> None:
        self.rewrite = rewrite
        self.source = source
        self.target = target
        self.detected = detected
        self.keep_blank = keep_blank
        self.calls: list[list[str]] = []

    def __call__(self, texts: Sequence[str], *, done: int = 0, total: int | None = None) -> list[str]:
        self.calls.append(list(texts))
        return [t if self.keep_blank and not t.strip() else self.rewrite(t) for t in texts]

    def detect_language(self, text: str) -> str | None:
        return self.detected


class UpperTranslator(FakeTranslator):
    """Upper-cases the text outside what ``protected`` matches (what the engine keeps as it is)."""

    protected: re.Pattern[str] = re.compile(r"<[^<>]*>")

    def __init__(self, target: str = "spa_Latn") -> None:
        super().__init__(self.one, target=target)

    def one(self, text: str) -> str:
        parts = self.protected.split(text)
        out = [parts[0].upper()]
        for kept, part in zip(self.protected.findall(text), parts[1:], strict=True):
            out += [kept, part.upper()]
        return "".join(out)


class _StandInEngine(ABC):
    """What the daemon needs of an engine, no packs; subclasses say how :meth:`translate` answers."""

    provenance: Provenance = "on-device"

    def __init__(self) -> None:
        self.started = time.time()

    def pack_ids(self) -> list[str]:
        return []

    def loaded_packs(self) -> list[str]:
        return []

    @abstractmethod
    def translate(
        self, text: str, options: TranslateOptions, *, context: JobContext | None = None
    ) -> TranslationResult:
        """One text's result."""

    def translate_batch(
        self, texts: Sequence[str], options: TranslateOptions, *, context: JobContext | None = None
    ) -> list[TranslationResult]:
        return [self.translate(t, options) for t in texts]

    def languages(self, *, installed_only: bool = True) -> list[Language]:
        return []


class BlockingEngine(_StandInEngine):
    """For saturation and shutdown tests: ``translate`` signals :attr:`entered` and then waits (at most
    30 s) for the test to set :attr:`release`."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)

    def translate(
        self, text: str, options: TranslateOptions, *, context: JobContext | None = None
    ) -> TranslationResult:
        self.entered.release()
        assert self.release.wait(30)
        return TranslationResult(text.upper(), "eng_Latn", "spa_Latn", "on-device", 0.0, options=options)


class SleepingEngine(_StandInEngine):
    """For measuring a front door alone (``benchmarks/http_path.py``): ``translate`` sleeps ``seconds``
    (the GIL released, as while Apertium's pipeline or a model works) and answers the text reversed."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def translate(
        self, text: str, options: TranslateOptions, *, context: JobContext | None = None
    ) -> TranslationResult:
        time.sleep(self.seconds)
        answer = text[::-1]
        return TranslationResult(answer, "eng_Latn", "spa_Latn", "on-device", self.seconds, options=options)
