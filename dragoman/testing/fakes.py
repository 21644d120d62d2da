"""Fake translators for tests, benchmarks and examples: deterministic stand-ins for the engine.

Each satisfies :class:`~dragoman.documents.base.TextTranslator` (what document handlers call), records the
texts of every call in ``calls``, and rewrites each text with a plain function, so a test can tell which
parts of a document went through translation and which were kept.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence


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
