"""OCR an image and translate it: what the MCP tool ``ocr_translate`` and ``dragoman ocr`` answer with.

Like :func:`dragoman.pipelines.translate_file.translate_file`, but the answer is the text: what OCR read, its
translation, and the boxes (page, bbox in pixels, text, translation). The rendered image (the translation
drawn over the original text) is written only when asked, beside the input as ``NAME.<target>.EXT`` or at
``output``, atomically and never over an existing file unless ``overwrite``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dragoman.documents import images
from dragoman.documents.base import DocumentReport, TextBox, atomic_output, check_size, read_head
from dragoman.documents.handlers import output_path
from dragoman.errors import DocumentFormatError
from dragoman.limits import Provenance, Tier
from dragoman.pipelines.translate_file import FALLBACK_SOURCE, EngineTextTranslator
from dragoman.progress import JobContext
from dragoman.translation.types import GlossaryEntry, TranslateOptions

if TYPE_CHECKING:
    from dragoman.translation.engine import Engine


@dataclass(frozen=True)
class OcrTranslation:
    """The result of :func:`ocr_translate`: ``DocumentResult``'s fields,
    with ``output_path`` None when no image was rendered."""

    input_path: Path
    output_path: Path | None
    format: str
    source: str
    target: str
    provenance: Provenance
    seconds: float
    segments: int
    characters: int
    extracted_text: str
    translated_text: str
    pages: int | None = None
    warnings: tuple[str, ...] = ()
    boxes: tuple[TextBox, ...] = ()

    @property
    def text(self) -> str:
        return self.extracted_text

    @property
    def translation(self) -> str:
        return self.translated_text


def ocr_translate(
    engine: Engine,
    path: str | Path,
    target: str,
    *,
    source: str | None = None,
    render: bool = True,
    output: str | Path | None = None,
    overwrite: bool = False,
    tier: Tier | None = None,
    glossary: Sequence[GlossaryEntry] = (),
    context: JobContext | None = None,
) -> OcrTranslation:
    """Read the text of a PNG, JPEG or TIFF image with OCR and translate it into ``target``.

    Without ``source`` the image is read with the default languages and the text's language detected
    (then read again with it). With ``render`` the translated image is written too. ``glossary`` and
    ``context`` are as for :func:`~dragoman.pipelines.translate_file.translate_file`.
    """
    started = time.perf_counter()
    context = context or JobContext()
    source_path = Path(path).expanduser().absolute()
    check_size(source_path)
    if images.image_format(read_head(source_path, 16)) is None:
        raise DocumentFormatError(
            f"{source_path.name} is not a PNG, JPEG or TIFF image; use translate_file for documents"
        )
    options = TranslateOptions(target, source, tier, tuple(glossary))
    translator = EngineTextTranslator(engine, options, context=context)
    context.check()  # a call cancelled (or timed out) while it waited for a thread does not start
    out: Path | None = None
    if render:
        out = output_path(source_path, output, target)
        with atomic_output(out, overwrite=overwrite) as partial:
            report: DocumentReport = images.ocr_and_translate(
                source_path, translator, context.report, render_to=partial
            )
    else:
        report = images.ocr_and_translate(source_path, translator, context.report)
    return OcrTranslation(
        input_path=source_path,
        output_path=out,
        format=images.ImageHandler.name,
        source=translator.source or FALLBACK_SOURCE,
        target=translator.target,
        provenance=engine.provenance,
        seconds=time.perf_counter() - started,
        segments=report.segments,
        characters=report.characters,
        extracted_text=report.extracted_text or "",
        translated_text=report.translated_text or "",
        pages=report.pages,
        warnings=tuple(dict.fromkeys([*translator.warnings, *report.warnings])),
        boxes=tuple(report.boxes),
    )
