"""The ``translate`` job kind of the hosted service: text and documents through the one shared engine.

:func:`make_translate_handler` gives the job runner its :data:`~dragoman.service.jobs.Handler` for
``translate`` jobs. The engine is the service's, made with provenance ``'server'``.

- **Text** (params ``text``, ``src``, ``tgt``, optional ``glossary`` of spec 2.7 entries): one engine call
  with the job's :class:`~dragoman.progress.JobContext`; the engine reports progress after each chunk of
  segments (at most 256 segments or 16,000 characters) and stops between chunks once the job is canceled
  (its lease lost, its row canceled). ``result`` is the translation.
- **Documents** (params ``upload`` (storage key), ``filename``, ``mime``, ``src``, ``tgt``): the upload is
  copied into a private temporary folder, its type sniffed from its content (the declared ``mime`` is not
  trusted), and it goes through the document pipeline, whose translator reports progress per pass of texts
  and stops between passes once canceled. What is stored, under ``exports/<job id>/``:

  ======== ======================== ===================================== ================================
  source   ``document``             ``docx``                              ``pdf``
  ======== ======================== ===================================== ================================
  PDF      the translated PDF       the PDF handler's DOCX export         the translated PDF
  DOCX     the translated DOCX      the translated DOCX                   LibreOffice's PDF of it (PyMuPDF
                                                                          ``Story`` layout without it)
  image    the image, translation   OCR'd translation, one paragraph per  the same paragraphs as a PDF
           drawn over its text      text block
  ======== ======================== ===================================== ================================

  ``result`` is the translated plain text for documents too.

Errors are raised as they come: the runner fails a job for good on a :class:`~dragoman.errors.DragomanError`
whose status is under 500 (a bad file: 415, 413, 400) and retries the others.

:func:`count_document_chars` counts what a document job would send to the engine, without translating (for
quotes given a file and for the credits a file job reserves); :func:`sniff_mime` names a file's type from its
first bytes (PDF, DOCX, PNG, JPEG, TIFF; None for anything else: the front door answers 415).
"""

from __future__ import annotations

import logging
import math
import re
import struct
import tempfile
import warnings
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dragoman.errors import ConfigError, DocumentFormatError, InvalidRequest
from dragoman.languages.catalogue import get, resolve
from dragoman.limits import MAX_FILE_BYTES
from dragoman.pipelines import exports
from dragoman.progress import JobContext
from dragoman.service.jobs import Handler, JobOutcome, JobRecord
from dragoman.translation.types import GlossaryEntry, TranslateOptions

if TYPE_CHECKING:
    from dragoman.service.storage import Storage
    from dragoman.translation.engine import Engine

log = logging.getLogger("dragoman.service.translate")

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PNG = "image/png"
JPEG = "image/jpeg"
TIFF = "image/tiff"
#: The file types a translate job takes, and the suffix its copy gets (the handlers check suffix and content).
DOCUMENT_SUFFIXES: dict[str, str] = {PDF: ".pdf", DOCX: ".docx", PNG: ".png", JPEG: ".jpg", TIFF: ".tif"}
IMAGE_TYPES = frozenset({PNG, JPEG, TIFF})
#: Bytes of a file's start that :func:`sniff_mime` is meant to be given (DOCX needs its first zip entries).
SNIFF_BYTES = 64 * 1024
#: Largest export stored (a translated document may outgrow its source a little; this bounds a runaway).
MAX_EXPORT_BYTES = 4 * MAX_FILE_BYTES
#: Pixels per character when an image's characters are estimated rather than read: a page of body text
#: scanned at 300 dpi (A4: 2480 x 3508, 8.7 MP) holds about 3,000 characters.
PIXELS_PER_CHAR = 2_900

_ZIP_LOCAL = b"PK\x03\x04"
_PDF_MARKER = re.compile(rb"%PDF-\d")
_DOCX_MAIN = b"word/document.xml"


# ----- sniffing ---------------------------------------------------------------------------------------------
def sniff_mime(head: bytes) -> str | None:
    """The MIME type of a file from its first bytes (give it :data:`SNIFF_BYTES`): PDF, DOCX, PNG, JPEG or
    TIFF (either byte order); None for anything else, a truncated signature included.

    A PDF may have junk before ``%PDF-<digit>`` in its first 1024 bytes (as readers and the PDF handler
    allow). A DOCX is a zip one of whose entries in ``head`` is ``word/document.xml`` (Word, LibreOffice and
    python-docx write it among the first entries; :func:`sniff_path` also reads a zip's directory).
    """
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return PNG
    if head.startswith(b"\xff\xd8\xff"):
        return JPEG
    if head.startswith((b"II*\x00", b"MM\x00*")):
        return TIFF
    if _PDF_MARKER.search(head[:1024]):
        return PDF
    if head.startswith(_ZIP_LOCAL) and _zip_head_has(head, _DOCX_MAIN):
        return DOCX
    return None


def _zip_head_has(head: bytes, name: bytes) -> bool:
    """True when a zip local file header in ``head`` names ``name`` (headers are found by signature, so
    entries written with a data descriptor, whose sizes are unknown here, do not stop the search)."""
    at = head.find(_ZIP_LOCAL)
    while at != -1 and at + 30 <= len(head):
        (name_len,) = struct.unpack_from("<H", head, at + 26)
        start = at + 30
        if head[start : start + name_len] == name:
            return True
        at = head.find(_ZIP_LOCAL, at + 4)
    return False


def sniff_path(path: Path) -> str | None:
    """:func:`sniff_mime` of a file on disk; a zip whose first entries do not settle it is read by its
    directory (a DOCX whose ``word/document.xml`` comes late)."""
    with path.open("rb") as handle:
        head = handle.read(SNIFF_BYTES)
    found = sniff_mime(head)
    if found is None and head.startswith(_ZIP_LOCAL):
        try:
            with zipfile.ZipFile(path) as archive:
                if _DOCX_MAIN.decode() in archive.namelist():
                    return DOCX
        except (zipfile.BadZipFile, OSError, ValueError):
            return None
    return found


def _checked_type(path: Path, declared: str | None) -> str:
    found = sniff_path(path)
    if found is None:
        raise DocumentFormatError(
            f"{declared or 'the file'}: the content is not PDF, DOCX, PNG, JPEG or TIFF (what the translate "
            "endpoint takes)"
        )
    if declared and declared.split(";")[0].strip().lower() not in (found, "application/octet-stream"):
        log.info("upload declared as %s is %s by its content; taken as %s", declared, found, found)
    return found


# ----- counting ---------------------------------------------------------------------------------------------
class _CountingTranslator:
    """A :class:`~dragoman.documents.base.TextTranslator` that translates nothing: it gives the texts back
    and counts the characters of those that are not blank (what the engine would be sent)."""

    def __init__(self, source: str | None, target: str) -> None:
        self.source = source
        self.target = target
        self.characters = 0

    def __call__(self, texts: Sequence[str], *, done: int = 0, total: int | None = None) -> list[str]:
        texts = list(texts)
        self.characters += sum(len(t) for t in texts if t.strip())
        return texts

    def detect_language(self, text: str) -> str | None:
        return None


def translated_characters(texts: Sequence[str]) -> int:
    """The characters of ``texts`` a document job sends to the engine (blank texts are not sent)."""
    return sum(len(t) for t in texts if t.strip())


def count_document_chars(
    path: Path, mime: str | None, *, source: str | None = None, target: str = "eng_Latn"
) -> int:
    """The characters a translate job of the file at ``path`` would send to the engine, without translating.

    A DOCX goes through its format handler with a translator that gives every text back (the same
    extraction the job's translation makes); a PDF is read as its handler reads it, without the layout
    (scanned pages by OCR, with ``source``'s language when given). An image's text costs OCR to read, so
    it is estimated from its pixels instead: one character per :data:`PIXELS_PER_CHAR` pixels of every
    page (at least 1). The type is the content's (``mime`` is what the client declared); 415 when it is
    none of PDF, DOCX, PNG, JPEG, TIFF.
    """
    path = Path(path)
    kind = _checked_type(path, mime)
    if kind in IMAGE_TYPES:
        return _estimate_image_chars(path)
    if kind == PDF:
        return _count_pdf(path, resolve(source) if source else None, resolve(target))
    from dragoman.documents.base import check_size
    from dragoman.documents.handlers import find_handler

    check_size(path)
    with tempfile.TemporaryDirectory(prefix="dragoman-count-") as work:
        folder = Path(work)
        source_path = path
        if path.suffix.lower() != DOCUMENT_SUFFIXES[kind]:  # the handlers want the suffix of the content
            source_path = folder / f"source{DOCUMENT_SUFFIXES[kind]}"
            source_path.symlink_to(path.absolute())
        handler = find_handler(source_path)
        counter = _CountingTranslator(resolve(source) if source else None, resolve(target))
        output = folder / "out" / f"count{DOCUMENT_SUFFIXES[kind]}"
        output.parent.mkdir()
        handler.translate(source_path, output, counter, None)
    return counter.characters


def _count_pdf(path: Path, source: str | None, target: str) -> int:
    """A PDF's characters as the PDF handler reads them (pages, through OCR for scans; bookmark titles),
    without laying anything out: the reading half of :class:`~dragoman.documents._pdf_pipeline.PdfJob`,
    a tenth of the whole dry run's time. The tests hold it to what the job translates."""
    from dragoman.documents import _pdf_document as document
    from dragoman.documents import _pdf_pipeline as pipeline
    from dragoman.documents.base import DocumentReport, check_size

    check_size(path)
    counter = _CountingTranslator(source, target)
    with pipeline.MUPDF_LOCK:  # MuPDF is not thread-safe: one PDF at a time in the process
        doc = document.open_pdf(path)
        try:
            pipeline._check_bounds(doc, path.name)
            document.unrotate(doc)
            reader = document.PageReader(doc, counter, DocumentReport(), grow=not get(target).rtl)
            works = [reader.read(number) for number in range(doc.page_count)]
            reader.finish(works)
            texts = [block.text for work in works for block in work.blocks]
            texts += [title for _, title in document.outline(doc)]
        finally:
            document.close(doc)
    return translated_characters(texts)


def _estimate_image_chars(path: Path) -> int:
    from PIL import Image

    from dragoman.documents.images import inspect_image

    meta = inspect_image(path)  # typed errors for bombs, junk and too many pages; nothing decoded
    pixels = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # inspect_image's limit decides
        with Image.open(path) as image:
            for index in range(meta.pages):
                image.seek(index)
                width, height = image.size
                pixels += width * height
    return max(1, math.ceil(pixels / PIXELS_PER_CHAR))


# ----- the handler ------------------------------------------------------------------------------------------
def make_translate_handler(engine: Engine) -> Handler:
    """The runner's handler of ``translate`` jobs, over ``engine`` (which must have provenance 'server')."""
    if engine.provenance != "server":
        raise ConfigError(
            f"the hosted service translates with provenance 'server'; this engine's is {engine.provenance!r}"
        )

    def handle(job: JobRecord, context: JobContext, storage: Storage) -> JobOutcome:
        params = job.params
        if params.get("upload"):
            text, artifacts = translate_document_job(engine, job.id, params, context, storage)
            return JobOutcome(result=text, artifacts=artifacts)
        return JobOutcome(result=translate_text_job(engine, params, context))

    return handle


def _options(params: Mapping[str, Any]) -> TranslateOptions:
    target = params.get("tgt") or params.get("target")
    if not isinstance(target, str) or not target.strip():
        raise InvalidRequest("the job names no target language (tgt)")
    source = params.get("src") or params.get("source")
    if source is not None and not isinstance(source, str):
        raise InvalidRequest("src must be a language code")
    if source is not None and source.strip().lower() in ("", "auto"):
        source = None
    return TranslateOptions(resolve(target), resolve(source) if source else None, None, _glossary(params))


def _glossary(params: Mapping[str, Any]) -> tuple[GlossaryEntry, ...]:
    """Spec 2.7 entries (``term``, ``translation``, optional ``caseSensitive``) as the engine's."""
    items = params.get("glossary") or ()
    if not isinstance(items, list | tuple):
        raise InvalidRequest("glossary must be a list of entries")
    entries = []
    for i, item in enumerate(items):
        if isinstance(item, GlossaryEntry):
            entries.append(item)
            continue
        if not isinstance(item, Mapping):
            raise InvalidRequest(f"glossary[{i}] must be an object with term and translation")
        term, translation = item.get("term"), item.get("translation")
        if not isinstance(term, str) or not isinstance(translation, str):
            raise InvalidRequest(f"glossary[{i}] needs term and translation strings")
        case = item.get("caseSensitive", item.get("case_sensitive", False))
        entries.append(GlossaryEntry(term, translation, case_sensitive=bool(case)))
    return tuple(entries)


def translate_text_job(engine: Engine, params: Mapping[str, Any], context: JobContext) -> str:
    """The translation of a text job's ``text``; progress per chunk, canceled between chunks."""
    text = params.get("text")
    if not isinstance(text, str):
        raise InvalidRequest("the job has no text to translate")
    options = _options(params)
    context.check()
    return engine.translate(text, options, context=context).translation


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _stem(filename: str | None) -> str:
    """A file name's stem reduced to a safe storage key segment (``document`` when nothing is left)."""
    base = (filename or "").replace("\\", "/").rsplit("/", 1)[-1]
    stem = base.rsplit(".", 1)[0] if "." in base.lstrip(".") else base
    cleaned = _UNSAFE.sub("_", stem).strip("._-")[:80]
    return cleaned or "document"


def translate_document_job(
    engine: Engine,
    job_id: str,
    params: Mapping[str, Any],
    context: JobContext,
    storage: Storage,
) -> tuple[str, dict[str, str]]:
    """Translate the uploaded document of a job and store its exports: (translated text, artifacts)."""
    from dragoman.pipelines.ocr_translate import ocr_translate
    from dragoman.pipelines.translate_file import translate_file

    upload = params.get("upload")
    if not isinstance(upload, str):
        raise InvalidRequest("the job names no upload")
    options = _options(params)
    target = get(options.target)
    rtl = target.rtl
    stem = _stem(params.get("filename"))
    with tempfile.TemporaryDirectory(prefix="dragoman-job-") as work:
        folder = Path(work)
        raw = folder / "upload.bin"
        try:
            with raw.open("wb") as handle:
                for chunk in storage.open_stream(upload):
                    handle.write(chunk)
        except FileNotFoundError as exc:  # purged or deleted: no retry brings it back
            raise InvalidRequest(
                "the uploaded file is no longer stored (uploads are kept for 7 days); upload it again"
            ) from exc
        declared = params.get("mime")
        kind = _checked_type(raw, declared if isinstance(declared, str) else None)
        suffix = DOCUMENT_SUFFIXES[kind]
        (folder / "in").mkdir()
        (folder / "out").mkdir()
        source = raw.rename(folder / "in" / f"{stem}{suffix}")
        translated = folder / "out" / f"{stem}.{target.bcp47}{suffix}"
        context.check()
        files: dict[str, Path] = {}
        if kind in IMAGE_TYPES:
            ocr = ocr_translate(
                engine,
                source,
                options.target,
                source=options.source,
                output=translated,
                glossary=options.glossary,
                context=context,
            )
            text = ocr.translated_text
            paragraphs = [box.translation for box in ocr.boxes]
            context.check()
            files["docx"] = folder / "out" / f"{stem}.{target.bcp47}.docx"
            exports.text_docx(paragraphs, files["docx"], rtl=rtl)
            files["pdf"] = folder / "out" / f"{stem}.{target.bcp47}.pdf"
            exports.text_pdf(paragraphs, files["pdf"], rtl=rtl)
            files["document"] = translated
        else:
            result = translate_file(
                engine,
                source,
                options.target,
                source=options.source,
                output=translated,
                glossary=options.glossary,
                context=context,
            )
            text = result.translated_text or ""
            context.check()
            files["document"] = translated
            if kind == PDF:
                files["pdf"] = translated
                docx = result.extra_outputs.get("docx")
                if docx is None or not docx.is_file():  # the handler skipped it: made from the text
                    docx = folder / "out" / f"{stem}.{target.bcp47}.export.docx"
                    exports.text_docx(text.split("\n\n"), docx, rtl=rtl)
                files["docx"] = docx
            else:
                files["docx"] = translated
                files["pdf"] = folder / "out" / f"{stem}.{target.bcp47}.pdf"
                method = exports.docx_pdf(translated, files["pdf"], rtl=rtl)
                log.debug("job %s: PDF export by %s", job_id, method)
        context.check()
        artifacts: dict[str, str] = {}
        stored: dict[Path, str] = {}
        for name, path in files.items():
            if path not in stored:
                key = f"exports/{job_id}/{path.name}"
                storage.put_stream(key, _chunks(path), MAX_EXPORT_BYTES)
                stored[path] = key
            artifacts[name] = stored[path]
    return text, artifacts


def _chunks(path: Path, size: int = 1024 * 1024) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while block := handle.read(size):
            yield block
