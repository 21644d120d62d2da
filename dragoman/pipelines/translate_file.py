"""Translate a whole file: find its format by content, translate its texts through the engine, write the
translated file beside it (``NAME.<target>.EXT``) or where asked, atomically, never over the input.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from dragoman.documents.base import (
    DocumentReport,
    TextBox,
    atomic_output,
)
from dragoman.documents.handlers import find_handler, output_path
from dragoman.languages.catalogue import resolve
from dragoman.limits import Provenance, Tier
from dragoman.progress import JobContext
from dragoman.translation.types import GlossaryEntry, TranslateOptions

if TYPE_CHECKING:
    from dragoman.translation.engine import Engine

log = logging.getLogger("dragoman.documents")

FALLBACK_SOURCE = "eng_Latn"
#: Characters of a document's text that language detection reads when no source is given.
DETECTION_SAMPLE_CHARS = 4000
#: Texts per engine pass; each pass reports progress.
TEXTS_PER_PASS = 256


@dataclass(frozen=True)
class DocumentResult:
    """The result of translating a file (the MCP tool and the CLI shape their answers from it)."""

    input_path: Path
    output_path: Path
    format: str
    source: str
    target: str
    provenance: Provenance
    seconds: float
    segments: int
    characters: int
    pages: int | None = None
    warnings: tuple[str, ...] = ()
    boxes: tuple[TextBox, ...] = ()
    extracted_text: str | None = None
    translated_text: str | None = None
    extra_outputs: dict[str, Path] = field(default_factory=dict)


class EngineTextTranslator:
    """The :class:`~dragoman.documents.base.TextTranslator` a handler gets: engine passes, progress, warnings.

    Without a source language, the first texts handed in are detected once, as one sample: a document is
    one language far more often than a batch of unrelated strings is. Each pass of at most
    :data:`TEXTS_PER_PASS` texts is reported through the ``context`` (which stops the work once cancelled or
    past its deadline); the engine checks the same context between its chunks.
    """

    def __init__(
        self, engine: Engine, options: TranslateOptions, *, context: JobContext | None = None
    ) -> None:
        self.engine = engine
        self.options = options
        self.target = resolve(options.target)
        self.source = resolve(options.source) if options.source else None
        self.context = context or JobContext()
        # The engine checks cancellation and the deadline; progress is counted here, in texts.
        self._engine_context = JobContext(cancel=self.context.cancel, deadline=self.context.deadline)
        self.warnings: list[str] = []
        self.translated = 0

    def _detect(self, texts: Sequence[str]) -> str:
        sample = "\n".join(t for t in texts if t.strip())[:DETECTION_SAMPLE_CHARS]
        if not sample.strip():
            return FALLBACK_SOURCE
        found = self.engine.detect(sample)
        if found.flores is None:
            self.warnings.append(
                f"source_uncertain: language detection was uncertain ({found.reason}); "
                f"assumed {FALLBACK_SOURCE}. Pass source to be sure."
            )
            return FALLBACK_SOURCE
        return found.flores

    def detect_language(self, text: str) -> str | None:
        """The FLORES code of ``text``, or None when detection is uncertain (OCR picks its language)."""
        return self.engine.detect(text).flores

    def __call__(self, texts: Sequence[str], *, done: int = 0, total: int | None = None) -> list[str]:
        texts = list(texts)
        if not any(t.strip() for t in texts):
            return texts
        if self.source is None:
            self.source = self._detect(texts)
        options = replace(self.options, target=self.target, source=self.source)
        out: list[str] = []
        count = len(texts)
        overall = max(total, done + count) if total is not None else done + count
        for start in range(0, count, TEXTS_PER_PASS):
            chunk = texts[start : start + TEXTS_PER_PASS]
            results = self.engine.translate_many(chunk, options, context=self._engine_context)
            out.extend(r.translation for r in results)
            for result in results:
                self.warnings.extend(w for w in result.warnings if w not in self.warnings)
            self.translated += len(chunk)
            self.context.report(done + start + len(chunk), overall, "translating")
        return out


def translate_file(
    engine: Engine,
    path: str | Path,
    target: str,
    *,
    source: str | None = None,
    output: str | Path | None = None,
    overwrite: bool = False,
    tier: Tier | None = None,
    glossary: Sequence[GlossaryEntry] = (),
    context: JobContext | None = None,
) -> DocumentResult:
    """Translate a file into ``target`` and write it out; the input is never modified.

    ``glossary`` holds the entries to consider (the engine applies those scoped to the pair); ``context``
    receives progress (texts translated) and stops the work once cancelled or past its deadline.
    """
    started = time.perf_counter()
    context = context or JobContext()
    source_path = Path(path).expanduser().absolute()
    handler = find_handler(source_path)
    options = TranslateOptions(target, source, tier, tuple(glossary))
    translator = EngineTextTranslator(engine, options, context=context)
    out = output_path(source_path, output, target)
    context.check()  # a call cancelled (or timed out) while it waited for a thread does not start
    with atomic_output(out, overwrite=overwrite) as partial:
        report: DocumentReport = handler.translate(source_path, partial, translator, context.report)
    return DocumentResult(
        input_path=source_path,
        output_path=out,
        format=handler.name,
        source=translator.source or FALLBACK_SOURCE,
        target=translator.target,
        provenance=engine.provenance,
        seconds=time.perf_counter() - started,
        segments=report.segments,
        characters=report.characters,
        pages=report.pages,
        warnings=tuple(dict.fromkeys([*translator.warnings, *report.warnings])),
        boxes=tuple(report.boxes),
        extracted_text=report.extracted_text,
        translated_text=report.translated_text,
        extra_outputs=dict(report.extra_outputs),
    )
