"""PDF (PyMuPDF): text translated in place, everything else untouched.

Each text block of each page becomes one text to translate (:mod:`dragoman.documents._pdf_layout`: lines
joined into a paragraph, the look of most of its characters, the room the translation may grow into). Text
on one line separated by a wide gap (table cells side by side, a running header's left and right parts, a
label set flush right) is split into blocks of their own. Monospace text is code: a block all in monospace
is left as it is, and a monospace run inside a paragraph goes to the translator as a placeholder (``<n/>``)
and comes back unchanged; a bold, italic or differently coloured run goes as ``<n>...</n>`` and is written
back in its own look. The original text is removed with redaction annotations that fill nothing and leave
images and vector graphics alone (``PDF_REDACT_IMAGE_NONE``, ``PDF_REDACT_LINE_ART_NONE``), and each
translation is laid out into its block's box, in the colour and size of the block, in the document's own
font wherever that font (often a subset) has the glyphs the translation needs, else in a font of the same
class (serif, sans, monospace; weight and slant; :func:`dragoman.documents._pdf_fonts.classify` knows the
Nimbus, Computer/Latin Modern, DejaVu, Liberation, URW, TeX Gyre and usual office fonts by name, the rest by
their flags), and in fonts that have the target script's glyphs (:mod:`dragoman.documents._pdf_fonts`,
:mod:`._pdf_text`, :mod:`._pdf_document`). A translation shrinks to fit, but never below a legible size
(6 pt or 70% of the original, whichever is larger): past that it reflows downwards into the free space
below its block, and what still does not fit is said in a warning. Right-to-left targets are set
right-to-left. Redaction drops the link annotations it overlaps: the same link objects are put back, so
links keep working. Bookmark (outline) titles are translated. Page sizes and rotation stay; text at an
angle other than a multiple of 90 degrees is left as it is, with a warning.

The texts go to the translator a group of pages at a time, each group laid out on a worker thread while
the next is translated (:mod:`dragoman.documents._pdf_pipeline`); progress counts the document's texts.

A page with no text but with images is a scan: it goes through OCR (:mod:`dragoman.documents._pdf_ocr`);
text that is part of an image (recognised, or an invisible OCR layer) is painted over with the colour
around it before its translation is written there. A document of scans only, without Tesseract, is an
:class:`~dragoman.errors.OcrUnavailable` error; scanned pages among text pages are left as they are,
with a warning. Encrypted PDFs are refused (decrypt first), as are corrupt ones.

Besides the PDF, the translated text is exported as DOCX, ``NAME.<target>.docx`` beside the output
(``DocumentReport.extra_outputs["docx"]``), never over an existing file, with the document's structure
(:mod:`dragoman.documents._pdf_docx_export`): headings as Word headings, tables as Word tables, list items,
columns in reading order, a page break between pages, running headers and footers in the section's header
and footer rather than in the text, inline bold, italic and monospace runs. PyMuPDF is imported only when a
PDF is translated.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dragoman.documents._export import Outline
from dragoman.documents.base import DocumentReport, TextTranslator, atomic_output
from dragoman.languages.catalogue import get
from dragoman.progress import ProgressCallback


def export_name(source: Path, output: Path, target: str) -> Path:
    """Where the DOCX export of a translated PDF goes: ``NAME.<bcp47>.docx`` beside the output."""
    return output.parent / f"{source.stem}.{get(target).bcp47}.docx"


class PdfHandler:
    name = "pdf"
    suffixes: tuple[str, ...] = (".pdf",)

    def sniff(self, head: bytes, path: Path) -> bool:
        return b"%PDF-" in head[:1024]

    def translate(
        self, source: Path, output: Path, translate: TextTranslator, progress: ProgressCallback | None
    ) -> DocumentReport:
        from dragoman.documents._pdf_docx_export import outline
        from dragoman.documents._pdf_pipeline import PdfJob

        job = PdfJob(source, output, translate)
        report = job.run(progress)
        structure = outline(job.works, job.translations)
        self.export_docx(structure, export_name(source, output, translate.target), translate.target, report)
        return report

    @staticmethod
    def export_docx(
        content: Sequence[str] | Outline, destination: Path, target: str, report: DocumentReport
    ) -> None:
        """The translated text as DOCX at ``destination`` (plain paragraphs, or the document's structure:
        headings, tables, lists, reading order), skipped with a warning if that file exists."""
        from dragoman.documents.docx import write_docx_export

        if destination.exists():
            report.warnings.append(f"{destination.name} exists; the DOCX export was not written over it")
            return
        with atomic_output(destination) as partial:
            write_docx_export(content, partial, rtl=get(target).rtl)
        report.extra_outputs["docx"] = destination
