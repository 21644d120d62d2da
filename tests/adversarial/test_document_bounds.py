# mypy: disallow-untyped-calls=False
"""Documents are bounded in the work and memory they can cause (issue 9, item 2).

A file within the size limit could hold hours of OCR (thousands of blank scans), a zip container of many
small entries, each under the per-entry ratio check, could inflate to the full uncompressed bound, and a DOCX
that passes every zip bound could still parse into gigabytes. Each is now refused before the work grows, with
:class:`~dragoman.errors.DocumentTooLarge` (413, ``document_too_large``): pages and pages to OCR per PDF (and
TIFF), aggregate expansion of a zip container, bytes and tags of markup parsed (DOCX/PPTX/XLSX parts, HTML,
XLIFF). The memory tests run a handler in a child process under an address-space cap (``RLIMIT_AS``): the
crafted DOCX is refused within it, and without the bounds the same file runs out of it.
"""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
import zipfile
from pathlib import Path

import docx
import pymupdf
import pytest
from PIL import Image

from dragoman.documents import _bounds, _pdf_ocr, _zipcheck
from dragoman.documents.docx import DocxHandler
from dragoman.documents.html import HtmlHandler
from dragoman.documents.images import ImageHandler
from dragoman.documents.pdf import PdfHandler
from dragoman.documents.pptx import PptxHandler
from dragoman.documents.strings import MAX_JSON_DEPTH, JsonHandler, XliffHandler
from dragoman.documents.xlsx import XlsxHandler
from dragoman.errors import DocumentFormatError, DocumentTooLarge
from dragoman.limits import (
    MAX_MARKUP_NODES,
    MAX_OCR_PAGES,
    MAX_PDF_PAGES,
    MAX_ZIP_RATIO,
    ZIP_RATIO_FLOOR_BYTES,
)
from dragoman.testing.fakes import FakeTranslator

W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def _refused(excinfo: pytest.ExceptionInfo[DocumentTooLarge]) -> None:
    assert excinfo.value.status == 413
    assert excinfo.value.code == "document_too_large"


def test_bounds_are_documented_and_sane() -> None:
    assert 100 <= MAX_PDF_PAGES <= 10_000
    assert 10 <= MAX_OCR_PAGES < MAX_PDF_PAGES
    assert MAX_ZIP_RATIO <= _zipcheck.MAX_RATIO
    for name in ("MAX_PDF_PAGES", "MAX_OCR_PAGES", "MAX_MARKUP_BYTES", "MAX_MARKUP_NODES", "MAX_ZIP_RATIO"):
        assert f"\n{name}: Final" in Path(sys.modules["dragoman.limits"].__file__ or "").read_text()


# --- PDF and OCR pages ------------------------------------------------------------------------------------


def test_a_pdf_over_the_page_limit_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "long.pdf"
    with pymupdf.open() as doc:
        for _ in range(MAX_PDF_PAGES + 1):
            doc.new_page(width=200, height=200)
        doc.save(source)
    with pytest.raises(DocumentTooLarge, match=f"{MAX_PDF_PAGES + 1} pages") as excinfo:
        PdfHandler().translate(source, tmp_path / "out.pdf", FakeTranslator(), None)
    _refused(excinfo)
    assert not (tmp_path / "out.pdf").exists()


def _scan_pdf(path: Path, pages: int) -> None:
    """``pages`` pages of one small grey image each and no text: scans, for OCR."""
    png = io.BytesIO()
    Image.new("L", (64, 64), 200).save(png, format="PNG")
    with pymupdf.open() as doc:
        for _ in range(pages):
            page = doc.new_page(width=200, height=200)
            page.insert_image(pymupdf.Rect(0, 0, 200, 200), stream=png.getvalue())
        doc.save(path, garbage=3, deflate=True)


def test_a_pdf_of_too_many_scans_is_refused_before_any_ocr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[int] = []
    monkeypatch.setattr(_pdf_ocr, "ocr_page", lambda page, *args: ran.append(page.number))
    source = tmp_path / "scans.pdf"
    _scan_pdf(source, MAX_OCR_PAGES + 1)
    assert source.stat().st_size < 200_000  # a small file: blank scans cost nothing to send
    with pytest.raises(DocumentTooLarge, match=f"{MAX_OCR_PAGES + 1} pages to read by OCR") as excinfo:
        PdfHandler().translate(source, tmp_path / "out.pdf", FakeTranslator(), None)
    _refused(excinfo)
    assert ran == []


def test_scans_up_to_the_ocr_limit_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_bounds, "MAX_OCR_PAGES", 3)
    ran: list[int] = []
    monkeypatch.setattr(_pdf_ocr, "ocr_page", lambda page, *args: ran.append(page.number))
    source = tmp_path / "scans.pdf"
    _scan_pdf(source, 3)
    PdfHandler().translate(source, tmp_path / "out.pdf", FakeTranslator(), None)
    assert ran == [0, 1, 2]


def test_a_tiff_of_too_many_pages_to_ocr_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "scans.tiff"
    blank = Image.new("L", (16, 16), 255)
    blank.save(source, save_all=True, append_images=[blank] * MAX_OCR_PAGES)
    with pytest.raises(DocumentTooLarge, match="to read by OCR") as excinfo:
        ImageHandler().translate(source, tmp_path / "out.tiff", FakeTranslator(), None)
    _refused(excinfo)


# --- zip containers ---------------------------------------------------------------------------------------


def _docx_with(path: Path, document_xml: bytes | None = None, extra: dict[str, bytes] | None = None) -> Path:
    base = io.BytesIO()
    docx.Document().save(base)
    with zipfile.ZipFile(base) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "word/document.xml" and document_xml is not None:
                data = document_xml
            out.writestr(info.filename, data)
        for name, data in (extra or {}).items():
            out.writestr(name, data)
    return path


def test_a_small_archive_that_inflates_as_a_whole_is_refused(tmp_path: Path) -> None:
    """Entries of 1 MiB each are under the per-entry ratio check; together they expand over 1000 times."""
    entries = ZIP_RATIO_FLOOR_BYTES // (1 << 20) + 4
    pads = {f"word/media/pad{i}.bin": b"\x00" * (1 << 20) for i in range(entries)}
    source = _docx_with(tmp_path / "inflating.docx", extra=pads)
    assert source.stat().st_size < 200_000
    with pytest.raises(DocumentTooLarge, match="as a whole") as excinfo:
        DocxHandler().translate(source, tmp_path / "out.docx", FakeTranslator(), None)
    _refused(excinfo)


def test_an_archive_under_the_aggregate_ratio_is_translated(tmp_path: Path) -> None:
    rnd = random.Random(1)
    pads = {f"word/media/pad{i}.bin": rnd.randbytes(1 << 20) for i in range(ZIP_RATIO_FLOOR_BYTES >> 20)}
    paragraph = f"<w:document {W}><w:body><w:p><w:r><w:t>A house</w:t></w:r></w:p></w:body></w:document>"
    source = _docx_with(tmp_path / "media.docx", paragraph.encode(), pads)
    DocxHandler().translate(source, tmp_path / "out.docx", FakeTranslator(), None)
    assert "A HOUSE" in docx.Document(str(tmp_path / "out.docx")).paragraphs[0].text


def _paragraphs(tags: int, seed: int = 7) -> bytes:
    """A document.xml of about ``tags`` tags: short paragraphs, every fourth with a random word, so that
    it compresses about 37 times (under every zip bound) yet parses into a huge tree."""
    rnd = random.Random(seed)
    plain = b"<w:p><w:r><w:t>a</w:t></w:r></w:p>"
    body = [
        b"<w:p><w:r><w:t>" + bytes(rnd.choices(b"abcdefghijklmnopqrstuvwxyz", k=3)) + b"</w:t></w:r></w:p>"
        if i % 4 == 0
        else plain
        for i in range(tags // 6 + 1)
    ]
    return f"<w:document {W}><w:body>".encode() + b"".join(body) + b"</w:body></w:document>"


def test_markup_over_the_tag_bound_is_refused_before_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # python-docx's template parts hold about 12,500 tags (styles.xml most); the body adds 6,000.
    monkeypatch.setattr(_bounds, "MAX_MARKUP_NODES", 15_000)
    source = _docx_with(tmp_path / "many.docx", _paragraphs(6_000))
    with pytest.raises(DocumentTooLarge, match="markup tags") as excinfo:
        DocxHandler().translate(source, tmp_path / "out.docx", FakeTranslator(), None)
    _refused(excinfo)
    monkeypatch.setattr(_bounds, "MAX_MARKUP_NODES", 30_000)
    DocxHandler().translate(source, tmp_path / "out.docx", FakeTranslator(), None)


def test_markup_over_the_byte_bound_is_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _docx_with(tmp_path / "big.docx", _paragraphs(3_000))
    monkeypatch.setattr(_bounds, "MAX_MARKUP_BYTES", 10_000)
    read: list[str] = []
    original = zipfile.ZipFile.read

    def spy(self: zipfile.ZipFile, name: str | zipfile.ZipInfo, pwd: bytes | None = None) -> bytes:
        read.append(name if isinstance(name, str) else name.filename)
        return original(self, name, pwd)

    monkeypatch.setattr(zipfile.ZipFile, "read", spy)
    with pytest.raises(DocumentTooLarge, match="MB of markup") as excinfo:
        DocxHandler().translate(source, tmp_path / "out.docx", FakeTranslator(), None)
    _refused(excinfo)
    assert "word/document.xml" not in read


def test_every_office_format_counts_its_markup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PPTX and XLSX parts go through the same counted reader as DOCX."""
    import openpyxl  # type: ignore[import-untyped]
    import pptx

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    assert slide.shapes.title is not None
    slide.shapes.title.text = "A house"
    deck.save(str(tmp_path / "deck.pptx"))
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    for row in range(1, 40):
        sheet.cell(row=row, column=1, value=f"A house {row}")
    book.save(tmp_path / "book.xlsx")
    monkeypatch.setattr(_bounds, "MAX_MARKUP_NODES", 60)
    for handler, name in ((PptxHandler(), "deck.pptx"), (XlsxHandler(), "book.xlsx")):
        with pytest.raises(DocumentTooLarge, match="markup tags"):
            handler.translate(tmp_path / name, tmp_path / f"out-{name}", FakeTranslator(), None)


def test_html_and_xliff_count_their_markup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_bounds, "MAX_MARKUP_NODES", 100)
    page = tmp_path / "page.html"
    page.write_text("<html><body>" + "<p>A house</p>" * 60 + "</body></html>", encoding="utf-8")
    with pytest.raises(DocumentTooLarge, match="markup tags"):
        HtmlHandler().translate(page, tmp_path / "out.html", FakeTranslator(), None)
    xliff = tmp_path / "strings.xlf"
    units = "".join(f'<trans-unit id="{i}"><source>A house</source></trans-unit>' for i in range(40))
    xliff.write_text(
        '<?xml version="1.0"?><xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">'
        f'<file source-language="en" datatype="plaintext" original="x"><body>{units}</body></file></xliff>',
        encoding="utf-8",
    )
    with pytest.raises(DocumentTooLarge, match="markup tags"):
        XliffHandler().translate(xliff, tmp_path / "out.xlf", FakeTranslator(), None)
    monkeypatch.setattr(_bounds, "MAX_MARKUP_BYTES", 1_000)
    with pytest.raises(DocumentTooLarge, match="MB of markup"):
        XliffHandler().translate(xliff, tmp_path / "out.xlf", FakeTranslator(), None)


# --- memory under a cap -----------------------------------------------------------------------------------

#: The child's address-space cap: a few times what refusing the file takes (under 100 MB of RSS), far below
#: what parsing it takes (1.6 GB measured).
MEMORY_CAP = 768 * 1024 * 1024

_CHILD = """
import json, resource, sys
from pathlib import Path
from dragoman.documents import _bounds
if sys.argv[2] == "unbounded":
    _bounds.MAX_MARKUP_NODES = _bounds.MAX_MARKUP_BYTES = 1 << 60
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[3]), int(sys.argv[3])))
from dragoman.documents.docx import DocxHandler
from dragoman.errors import DragomanError
from dragoman.testing.fakes import FakeTranslator
try:
    source = Path(sys.argv[1])
    DocxHandler().translate(source, source.with_name("out.docx"), FakeTranslator(), None)
    outcome = "translated"
except DragomanError as exc:
    outcome = exc.code
except MemoryError:
    outcome = "MemoryError"
# VmHWM: this process's peak RSS (ru_maxrss would include the parent's peak, inherited across exec)
status = Path("/proc/self/status").read_text()
peak = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) * 1024
print(json.dumps({"outcome": outcome, "peak": peak}))
"""


@pytest.fixture(scope="module")
def expanding_docx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An 800 KB DOCX within every zip bound whose document.xml holds 5 million tags."""
    path = _docx_with(
        tmp_path_factory.mktemp("memory") / "expanding.docx", _paragraphs(int(MAX_MARKUP_NODES * 2.6))
    )
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        _zipcheck.check_entries(archive, path.name)  # passes the zip bounds, aggregate ratio included
        part = archive.getinfo("word/document.xml")
    assert part.file_size < _zipcheck.MAX_RATIO * part.compress_size
    assert sum(i.file_size for i in infos) < MAX_ZIP_RATIO * sum(i.compress_size for i in infos)
    assert path.stat().st_size < 1_500_000
    return path


def _run_capped(path: Path, mode: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), mode, str(MEMORY_CAP)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS caps the address space on Linux")
def test_an_expanding_docx_is_refused_within_a_memory_cap(expanding_docx: Path) -> None:
    result = _run_capped(expanding_docx, "bounded")
    assert result["outcome"] == "document_too_large"
    peak = result["peak"]
    assert isinstance(peak, int) and peak < 300 * 1024 * 1024


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS caps the address space on Linux")
def test_without_the_bounds_the_same_docx_outgrows_the_cap(expanding_docx: Path) -> None:
    """The control: the file really does expand past the cap when nothing stops it (about 15 s)."""
    assert _run_capped(expanding_docx, "unbounded")["outcome"] == "MemoryError"


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a":' * 500 + '"A house"' + "}" * 500])
def test_deeply_nested_json_is_a_typed_error(tmp_path: Path, text: str) -> None:
    """Python's JSON reader and the walk over a string file recurse: deep nesting is refused, never a
    RecursionError (an untyped crash)."""
    source = tmp_path / "deep.json"
    source.write_text(text, encoding="utf-8")
    with pytest.raises(DocumentFormatError, match="nests objects and arrays"):
        JsonHandler().translate(source, tmp_path / "out.json", FakeTranslator(), None)
    source.write_text('{"a":' * (MAX_JSON_DEPTH - 1) + '"A house"' + "}" * (MAX_JSON_DEPTH - 1))
    JsonHandler().translate(source, tmp_path / "out.json", FakeTranslator(), None)
    assert "A HOUSE" in (tmp_path / "out.json").read_text(encoding="utf-8")
