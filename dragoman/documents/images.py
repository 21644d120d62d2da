"""Images (PNG, JPEG, TIFF with all its pages): OCR, one translation call, and the translation drawn over
the original text.

The OCR language comes from the source language. Without one, the image is read with English and the other
installed Latin-script languages (:func:`dragoman.documents.ocr.default_languages`), the language of what was
read is detected, and the image is read again with that language when it is not the first one tried (or
a warning names the package to install when Tesseract lacks it). Paragraphs with no letter or digit, or
read with a mean confidence under :data:`MIN_BLOCK_CONFIDENCE`, are noise (specks, photos) and left alone.

The output is the same image with each paragraph's box filled with the colour around it and the
translation written inside, wrapped and shrunk to fit, in a font with the target's script
(:mod:`dragoman.documents._image_render`); a multi-page TIFF comes back with the same pages. Pages are
decoded one at a time (for OCR, then again for drawing), so a long TIFF never sits in memory whole.
Pages over :data:`MAX_PIXELS` pixels, or more than :data:`MAX_FRAMES` of them, are refused as
decompression bombs before any is decoded.
"""

from __future__ import annotations

import logging
import struct
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dragoman.documents import _bounds, ocr
from dragoman.documents._image_render import Info, draw_translations, save_pages
from dragoman.documents.base import DocumentReport, TextBox, TextTranslator
from dragoman.errors import (
    DocumentFormatError,
    DocumentTooLarge,
    DragomanError,
    InvalidRequest,
    OcrUnavailable,
)
from dragoman.progress import ProgressCallback

if TYPE_CHECKING:
    from PIL import Image

log = logging.getLogger("dragoman.documents.images")

#: Most pixels one page may have (a 100 MP image is a 10000x10000 scan, far beyond 600 dpi A4).
MAX_PIXELS = 100_000_000
#: Most pages a TIFF may have.
MAX_FRAMES = 1000
#: Paragraphs read with a lower mean word confidence (0-100) are taken for noise and not translated.
MIN_BLOCK_CONFIDENCE = 30.0

_MAGIC = {b"\x89PNG\r\n\x1a\n": "PNG", b"\xff\xd8\xff": "JPEG", b"II*\x00": "TIFF", b"MM\x00*": "TIFF"}
_SUFFIX_FORMATS = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG", ".tif": "TIFF", ".tiff": "TIFF"}
#: Pillow's format names accepted, and what they are written as (MPO is a JPEG with extra frames).
_FORMATS = {"PNG": "PNG", "JPEG": "JPEG", "MPO": "JPEG", "TIFF": "TIFF"}
#: What Pillow raises on a damaged file, besides its decompression-bomb error.
_CORRUPT = (OSError, SyntaxError, ValueError, EOFError, struct.error, IndexError, TypeError, KeyError)


def image_format(head: bytes) -> str | None:
    """``PNG``, ``JPEG`` or ``TIFF`` when the first bytes are one of them."""
    return next((name for magic, name in _MAGIC.items() if head.startswith(magic)), None)


@dataclass(frozen=True)
class ImageInfo:
    """What the header of an image file says: its format, page count and first page's info."""

    format: str
    pages: int
    info: Info = field(default_factory=dict)


def is_text(block: ocr.OcrBlock) -> bool:
    """True for a paragraph worth translating: some letter or digit, read with enough confidence."""
    return block.confidence >= MIN_BLOCK_CONFIDENCE and any(c.isalnum() for c in block.text)


def _open(path: Path) -> Image.Image:
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # our own limit decides
            image = Image.open(path)
    except Image.DecompressionBombError as exc:
        raise DocumentTooLarge(f"{path.name} is a decompression bomb ({exc}); refused") from exc
    except _CORRUPT as exc:
        raise DocumentFormatError(
            f"{path.name} is not a readable image (corrupt or truncated: {exc})"
        ) from exc
    if image.format not in _FORMATS:
        image.close()
        raise DocumentFormatError(f"{path.name} is {image.format}, not PNG, JPEG or TIFF")
    return image


def _frames(image: Image.Image) -> int:
    return int(getattr(image, "n_frames", 1)) if image.format == "TIFF" else 1


def _check_pixels(path: Path, size: tuple[int, int]) -> None:
    width, height = size
    if width <= 0 or height <= 0:
        raise DocumentFormatError(f"{path.name} has an empty page ({width}x{height})")
    if width * height > MAX_PIXELS:
        raise DocumentTooLarge(
            f"{path.name} is {width}x{height} pixels ({width * height / 1e6:.0f} MP), over the "
            f"{MAX_PIXELS / 1e6:.0f} MP limit (a possible decompression bomb); scale it down first"
        )


def inspect_image(path: Path) -> ImageInfo:
    """Check every page's header (sizes, count) without decoding any; typed errors for bombs and junk."""
    with _open(path) as image:
        try:
            fmt, info, count = _FORMATS[str(image.format)], dict(image.info), _frames(image)
            if count > MAX_FRAMES:
                raise DocumentTooLarge(
                    f"{path.name} has {count} pages, over the {MAX_FRAMES} limit; split it"
                )
            _bounds.check_ocr_pages(count, path.name)  # every page is read by OCR
            for index in range(count):
                image.seek(index)
                _check_pixels(path, image.size)
        except _CORRUPT as exc:
            raise DocumentFormatError(f"{path.name} is not a readable image (corrupt: {exc})") from exc
    return ImageInfo(fmt, count, info)


def iter_pages(path: Path) -> Iterator[Image.Image]:
    """The pages of an image file, decoded one at a time, upright (EXIF orientation applied)."""
    from PIL import ImageOps

    with _open(path) as image:
        try:
            count = _frames(image)
        except _CORRUPT as exc:
            raise DocumentFormatError(f"{path.name} is not a readable image (corrupt: {exc})") from exc
        for index in range(count):
            try:
                image.seek(index)
                _check_pixels(path, image.size)
                image.load()
                page = ImageOps.exif_transpose(image)  # a copy, whether turned or not
            except _CORRUPT as exc:
                raise DocumentFormatError(
                    f"{path.name} is not a readable image (page {index + 1} is corrupt or truncated: {exc})"
                ) from exc
            yield page


@dataclass(frozen=True)
class Page:
    """What OCR found on one page, and which of it is text worth translating."""

    blocks: list[ocr.OcrBlock]

    @property
    def text_blocks(self) -> list[ocr.OcrBlock]:
        return [b for b in self.blocks if is_text(b)]


#: Pages to read: images in memory, or a function that decodes them one at a time (each call anew).
PageSource = Sequence["Image.Image"] | Callable[[], Iterable["Image.Image"]]


def _read(source: PageSource, count: int, lang: str, progress: ProgressCallback | None) -> list[Page]:
    pages = []
    for number, image in enumerate(source() if callable(source) else source, start=1):
        pages.append(Page(ocr.ocr_image(image, lang)))
        if progress is not None:
            progress(number, count, f"OCR page {number}/{count}")
    return pages


def read_pages(
    source: PageSource,
    translate: TextTranslator,
    progress: ProgressCallback | None,
    warns: list[str],
    *,
    count: int | None = None,
) -> tuple[list[Page], str]:
    """OCR every page with the source's language, or with the defaults then the detected language.

    ``source`` is the page images, or a function yielding them (``count`` of them, for progress).
    Sets ``translate.source`` when it detects the language. Returns each page's blocks and the languages.
    """
    count = len(source) if not callable(source) else (count or 1)
    if translate.source is not None:
        lang = ocr.tesseract_language(translate.source)
        ocr.check_languages(lang)
        return _read(source, count, lang, progress), lang
    lang = ocr.default_languages()
    pages = _read(source, count, lang, progress)
    text = "\n\n".join(b.text for page in pages for b in page.text_blocks)
    try:
        detected = translate.detect_language(text) if text.strip() else None
    except DragomanError as exc:
        warns.append(f"source_uncertain: the language of the image's text could not be detected: {exc}")
        detected = None
    if detected is None:
        return pages, lang
    translate.source = detected
    try:
        better = ocr.tesseract_language(detected)
    except OcrUnavailable:  # no Tesseract model for this language at all
        warns.append(f"ocr_language: Tesseract has no model for {detected}; read with {lang}")
        return pages, lang
    if better == lang.split("+")[0]:
        return pages, lang
    if better not in ocr.installed_languages():
        warns.append(
            f"ocr_language: the text looks like {detected} but Tesseract's {better} is not installed; read "
            f"with {lang}. Run `apt-get install {ocr.apt_package(better)}` for a better reading"
        )
        return pages, lang
    log.info("re-reading %d page(s) with %s (detected %s)", count, better, detected)
    return _read(source, count, better, progress), better


def ocr_and_translate(
    path: Path,
    translate: TextTranslator,
    progress: ProgressCallback | None = None,
    *,
    render_to: Path | None = None,
) -> DocumentReport:
    """OCR an image file, translate its paragraphs in one call, and optionally write the rendered image.

    ``render_to`` is written in the format its suffix names (the input's format otherwise).
    """
    meta = inspect_image(path)
    out_format = _SUFFIX_FORMATS.get(render_to.suffix.lower(), meta.format) if render_to else meta.format
    if render_to is not None and meta.pages > 1 and out_format != "TIFF":
        raise InvalidRequest(f"{path.name} has {meta.pages} pages; write it to a .tif file to keep them")
    report = DocumentReport(pages=meta.pages)
    pages, lang = read_pages(lambda: iter_pages(path), translate, progress, report.warnings, count=meta.pages)
    placed = [(number, b) for number, page in enumerate(pages, start=1) for b in page.text_blocks]
    skipped = sum(len(page.blocks) for page in pages) - len(placed)
    if skipped:
        report.warnings.append(
            f"ocr_noise: {skipped} OCR box(es) without letters or read with low confidence were left "
            "untranslated"
        )
    if not placed:
        report.warnings.append(f"no_text: OCR ({lang}) found no text to translate")
    texts = [block.text for _, block in placed]
    translations = translate(texts) if texts else []
    report.segments = len(texts)
    report.characters = sum(len(t) for t in texts)
    report.extracted_text = "\n\n".join(texts)
    report.translated_text = "\n\n".join(translations)
    report.boxes = [
        TextBox(
            page=n,
            bbox=(float(b.bbox[0]), float(b.bbox[1]), float(b.bbox[2]), float(b.bbox[3])),
            text=b.text,
            translation=t,
        )  # fmt: skip
        for (n, b), t in zip(placed, translations, strict=True)
    ]
    if render_to is not None:
        per_page: list[list[tuple[ocr.OcrBlock, str]]] = [[] for _ in pages]
        for (number, block), translation in zip(placed, translations, strict=True):
            per_page[number - 1].append((block, translation))
        script = _script_of(translate.target)
        rendered = (
            (draw_translations(image, items, script, report.warnings), image.mode)
            for image, items in zip(iter_pages(path), per_page, strict=True)
        )
        save_pages(rendered, render_to, out_format, meta.info)
    return report


def _script_of(target: str) -> str:
    from dragoman.languages.catalogue import resolve, script_of

    return script_of(resolve(target))


class ImageHandler:
    """PNG, JPEG and TIFF: OCR, translate, and draw the translation over the text."""

    name = "image"
    suffixes: tuple[str, ...] = tuple(_SUFFIX_FORMATS)

    def sniff(self, head: bytes, path: Path) -> bool:
        return image_format(head) is not None

    def translate(
        self, source: Path, output: Path, translate: TextTranslator, progress: ProgressCallback | None
    ) -> DocumentReport:
        return ocr_and_translate(source, translate, progress, render_to=output)
