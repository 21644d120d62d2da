"""The hosted ``translate`` job kind (issue 12, B2): text and document jobs through the shared engine, their
exports, the type sniffing of uploads and the character count that quotes and reservations use.

The engine is a real one over the tiny en->es pack (random weights: gibberish, but deterministic), with
provenance 'server'; files are made in the tests (python-docx, PyMuPDF, Pillow) and opened again with the
same libraries (LibreOffice, where installed, makes a DOCX's PDF).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import os
import shutil
import struct
import time
import unicodedata
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import docx
import pymupdf
import pytest
from PIL import Image, ImageDraw, ImageFont
from support import HAVE_TESSERACT, isolated_settings

from dragoman.errors import Cancelled, ConfigError, DocumentFormatError, InvalidRequest
from dragoman.pipelines import exports
from dragoman.progress import CancelToken, JobContext
from dragoman.service import translation_jobs as tj
from dragoman.service.jobs import JobOutcome, JobRecord
from dragoman.service.storage import Storage
from dragoman.testing.tinypack import sample_sentences
from dragoman.translation.engine import Engine
from dragoman.translation.types import TranslateOptions, TranslationResult

FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
REAL_PDF = Path(__file__).parent.parent / "data" / "real" / "pdf"


def nfkc(text: str) -> str:
    """Text as compared with what PyMuPDF reads back (shaped scripts come back as presentation forms)."""
    return unicodedata.normalize("NFKC", text)


# ----- fixtures ---------------------------------------------------------------------------------------------
@pytest.fixture
def engine(tmp_path: Path, tiny_argos_pack: Path) -> Iterator[Engine]:
    root = tmp_path / "engine"
    shutil.copytree(tiny_argos_pack, root / "packs" / tiny_argos_pack.name)
    with Engine(isolated_settings(root), provenance="server") as eng:
        yield eng


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    return Storage.local(tmp_path / "files")


class Spy:
    """Counts the characters of the non-blank texts the engine is sent (what a job translates)."""

    def __init__(self, engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
        self.characters = 0
        real = engine.translate_many

        def translate_many(
            texts: Sequence[str], options: TranslateOptions, *, context: JobContext | None = None
        ) -> list[TranslationResult]:
            self.characters += sum(len(t) for t in texts if t.strip())
            return real(texts, options, context=context)

        monkeypatch.setattr(engine, "translate_many", translate_many)


def job(params: dict[str, Any], job_id: str = "0f6a1c2e-0000-4000-8000-000000000001") -> JobRecord:
    """A ``translate`` job row as the runner hands it over (every other column a neutral value)."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(JobRecord):
        values[f.name] = {
            "id": job_id,
            "kind": "translate",
            "status": "active",
            "params": params,
            "artifacts": {},
            "sync": False,
            "title": "",
        }.get(f.name, 0 if f.type in ("int", int) else None)
    return JobRecord(**values)


def open_docx(data: bytes) -> Any:
    opener: Any = docx.Document  # not annotated for streams
    return opener(io.BytesIO(data))


def open_pdf(data: bytes) -> Any:
    opener: Any = pymupdf.open
    return opener(stream=data, filetype="pdf")


def upload(storage: Storage, data: bytes, name: str) -> str:
    key = f"uploads/test/{name}"
    storage.put_bytes(key, data)
    return key


def run_document(
    engine: Engine, storage: Storage, data: bytes, name: str, mime: str, context: JobContext | None = None
) -> JobOutcome:
    handler = tj.make_translate_handler(engine)
    params = {"upload": upload(storage, data, name), "filename": name, "mime": mime, "src": "en", "tgt": "es"}
    return handler(job(params), context or JobContext(), storage)


# ----- files ------------------------------------------------------------------------------------------------
def docx_bytes(paragraphs: int = 3) -> bytes:
    document = docx.Document()
    document.add_heading("The annual report", 1)
    for sentence in sample_sentences(paragraphs, seed=3):
        document.add_paragraph(sentence)
    table = document.add_table(rows=2, cols=2)
    for r, row in enumerate(table.rows):
        for c, cell in enumerate(row.cells):
            cell.text = f"The cell {r} {c} is here."
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def pdf_bytes(
    lines: Sequence[str] = ("The house is red.", "The garden is big and green."), *, bookmarks: bool = False
) -> bytes:
    opener: Any = pymupdf.open
    doc = opener()
    page = doc.new_page()
    for i, line in enumerate(lines):
        page.insert_text((72, 100 + 40 * i), line, fontsize=12)
    if bookmarks:  # translated too: one more translator call after the pages' texts
        doc.set_toc([[1, "The first chapter", 1], [2, "A small section", 1]])
    data = doc.tobytes()
    doc.close()
    return bytes(data)


def image_bytes(fmt: str = "PNG", text: str = "The house is red.") -> bytes:
    image = Image.new("RGB", (900, 200), "white")
    font = ImageFont.truetype(str(FONT), 48) if FONT.is_file() else ImageFont.load_default()
    ImageDraw.Draw(image).text((30, 60), text, fill="black", font=font)
    out = io.BytesIO()
    image.save(out, fmt)
    return out.getvalue()


def mm_tiff(width: int = 4, height: int = 4) -> bytes:
    """A grey big-endian ("MM", Motorola) TIFF, written by hand: Pillow writes little-endian ones only."""
    entries = [(256, 3, width), (257, 3, height), (258, 3, 8), (259, 3, 1), (262, 3, 1), (273, 4, 0)]
    entries += [(277, 3, 1), (278, 3, height), (279, 4, width * height)]
    data_at = 8 + 2 + 12 * len(entries) + 4
    out = b"MM\x00*" + struct.pack(">I", 8) + struct.pack(">H", len(entries))
    for tag, kind, value in entries:
        value = data_at if tag == 273 else value
        packed = struct.pack(">HH", value, 0) if kind == 3 else struct.pack(">I", value)
        out += struct.pack(">HHI", tag, kind, 1) + packed
    return out + struct.pack(">I", 0) + bytes([200]) * (width * height)


def zip_bytes(names: Sequence[str]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name in names:
            archive.writestr(name, b"<x/>" if name.endswith(".xml") else b"data")
    return out.getvalue()


# ----- text jobs --------------------------------------------------------------------------------------------
def test_a_text_job_reports_progress_per_chunk_and_answers_the_engines_translation(engine: Engine) -> None:
    text = " ".join(sample_sentences(600, seed=5))  # more than one chunk of 256 segments
    seen: list[tuple[int, int]] = []
    context = JobContext(progress=lambda done, total, message: seen.append((done, total)))
    outcome = tj.make_translate_handler(engine)(job({"text": text, "src": "en", "tgt": "es"}), context, None)  # type: ignore[arg-type]
    expected = engine.translate(text, TranslateOptions("spa_Latn", "eng_Latn")).translation
    assert outcome.result == expected and outcome.result
    assert outcome.credits is None and dict(outcome.artifacts) == {}
    assert len(seen) >= 3, seen
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and seen[-1][0] == seen[-1][1]


def test_a_canceled_text_job_stops_between_chunks(engine: Engine) -> None:
    text = " ".join(sample_sentences(600, seed=6))
    token = CancelToken()
    seen: list[int] = []

    def progress(done: int, total: int, message: str) -> None:
        seen.append(done)
        token.cancel("job canceled")

    context = JobContext(progress=progress, cancel=token)
    with pytest.raises(Cancelled):
        tj.make_translate_handler(engine)(job({"text": text, "src": "en", "tgt": "es"}), context, None)  # type: ignore[arg-type]
    assert len(seen) == 1  # the chunk in flight finished; none started after the cancel


def test_text_job_glossary_and_bad_params(engine: Engine) -> None:
    handler = tj.make_translate_handler(engine)
    params = {
        "text": "The house is red.",
        "src": "en",
        "tgt": "es",
        "glossary": [{"term": "house", "translation": "CASA"}],
    }
    outcome = handler(job(params), JobContext(), None)  # type: ignore[arg-type]
    assert outcome.result is not None and "CASA" in outcome.result
    with pytest.raises(Exception) as info:
        handler(job({"text": "x", "src": "en"}), JobContext(), None)  # type: ignore[arg-type]
    assert getattr(info.value, "status", 500) == 400  # permanent: the runner does not retry it


def test_the_handler_wants_a_server_engine(tmp_path: Path) -> None:
    with Engine(isolated_settings(tmp_path)) as local, pytest.raises(ConfigError, match="server"):
        tj.make_translate_handler(local)


# ----- document jobs ----------------------------------------------------------------------------------------
def test_a_docx_job_stores_the_translated_docx_and_a_pdf_of_it(engine: Engine, storage: Storage) -> None:
    seen: list[int] = []
    context = JobContext(progress=lambda done, total, message: seen.append(done))
    outcome = run_document(engine, storage, docx_bytes(), "Annual report (2025).docx", tj.DOCX, context)
    assert set(outcome.artifacts) == {"document", "docx", "pdf"}
    assert outcome.artifacts["document"] == outcome.artifacts["docx"]
    assert all(key.startswith("exports/0f6a1c2e-") for key in outcome.artifacts.values())
    translated = open_docx(storage.get_bytes(outcome.artifacts["docx"]))
    assert len(translated.tables) == 1 and translated.paragraphs[0].style.name == "Heading 1"
    assert translated.paragraphs[1].text and translated.paragraphs[1].text != sample_sentences(1, seed=3)[0]
    pdf = open_pdf(storage.get_bytes(outcome.artifacts["pdf"]))
    text = "".join(page.get_text() for page in pdf)
    assert pdf.page_count >= 1 and nfkc(translated.paragraphs[1].text.split()[0]) in nfkc(text)
    assert outcome.result and translated.paragraphs[1].text in outcome.result
    assert seen  # progress reported as the texts were translated


def test_without_libreoffice_a_docx_pdf_is_laid_out_with_headings_and_tables(
    engine: Engine, storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(exports, "soffice", lambda: None)
    outcome = run_document(engine, storage, docx_bytes(), "r.docx", tj.DOCX)
    translated = open_docx(storage.get_bytes(outcome.artifacts["docx"]))
    pdf = open_pdf(storage.get_bytes(outcome.artifacts["pdf"]))
    page = pdf[0]
    assert page.find_tables().tables, "the table stays a table"
    heading = translated.paragraphs[0].text.split()[0]
    sizes = {
        s["size"]
        for b in page.get_text("dict")["blocks"]
        for ln in b.get("lines", [])
        for s in ln["spans"]
        if heading in s["text"]
    }
    assert sizes and max(sizes) > 14  # the heading is set larger than the body (11 pt)


def test_a_pdf_job_stores_the_translated_pdf_and_its_docx_export(engine: Engine, storage: Storage) -> None:
    outcome = run_document(engine, storage, pdf_bytes(), "scan.pdf", tj.PDF)
    assert set(outcome.artifacts) == {"document", "docx", "pdf"}
    assert outcome.artifacts["document"] == outcome.artifacts["pdf"]
    pdf = open_pdf(storage.get_bytes(outcome.artifacts["pdf"]))
    assert pdf.page_count == 1 and "house" not in pdf[0].get_text()
    exported = open_docx(storage.get_bytes(outcome.artifacts["docx"]))
    words = " ".join(p.text for p in exported.paragraphs)
    assert outcome.result and words.split() and words.split()[0] in outcome.result


@pytest.mark.skipif(not HAVE_TESSERACT, reason="Tesseract is not installed: apt-get install tesseract-ocr")
@pytest.mark.parametrize(
    ("fmt", "mime", "name"), [("PNG", tj.PNG, "sign.png"), ("TIFF", tj.TIFF, "sign.tif")]
)
def test_an_image_job_is_ocr_translated_into_docx_and_pdf(
    engine: Engine, storage: Storage, fmt: str, mime: str, name: str
) -> None:
    outcome = run_document(engine, storage, image_bytes(fmt), name, mime)
    assert set(outcome.artifacts) == {"document", "docx", "pdf"}
    assert tj.sniff_mime(storage.get_bytes(outcome.artifacts["document"])[:64]) == mime
    exported = open_docx(storage.get_bytes(outcome.artifacts["docx"]))
    paragraphs = [p.text for p in exported.paragraphs if p.text]
    assert paragraphs and outcome.result == "\n\n".join(paragraphs)
    pdf = open_pdf(storage.get_bytes(outcome.artifacts["pdf"]))
    assert nfkc(paragraphs[0].split()[0]) in nfkc(pdf[0].get_text())


@pytest.mark.skipif(not HAVE_TESSERACT, reason="Tesseract is not installed: apt-get install tesseract-ocr")
def test_a_png_named_pdf_is_taken_for_what_it_is(engine: Engine, storage: Storage) -> None:
    outcome = run_document(engine, storage, image_bytes(), "lying.pdf", tj.PDF)
    assert storage.get_bytes(outcome.artifacts["document"]).startswith(b"\x89PNG")
    assert outcome.artifacts["document"].endswith("lying.es.png")


@pytest.mark.parametrize(
    "data", [b"just some text, not a document\n" * 20, zip_bytes(["xl/workbook.xml", "[Content_Types].xml"])]
)
def test_an_upload_of_another_type_fails_for_good(engine: Engine, storage: Storage, data: bytes) -> None:
    with pytest.raises(DocumentFormatError) as info:
        run_document(engine, storage, data, "x.docx", tj.DOCX)
    assert info.value.status == 415
    assert storage.list("exports") == []


def test_a_document_job_canceled_midway_stops_between_passes_and_stores_nothing(
    engine: Engine, storage: Storage
) -> None:
    token = CancelToken()
    seen: list[tuple[int, int]] = []

    def progress(done: int, total: int, message: str) -> None:
        seen.append((done, total))
        if done:  # the first pass of texts is translated: the job is canceled now
            token.cancel("job canceled")

    with pytest.raises(Cancelled):
        run_document(
            engine, storage, docx_bytes(paragraphs=600), "long.docx", tj.DOCX, JobContext(progress, token)
        )
    translated = [done for done, _ in seen if done]
    assert len(translated) == 1 and translated[0] < seen[-1][1]  # one pass of several, then it stopped
    assert storage.list("exports") == []


def test_a_job_whose_upload_is_gone_fails_for_good(engine: Engine, storage: Storage) -> None:
    params = {
        "upload": "uploads/gone/r.docx",
        "filename": "r.docx",
        "mime": tj.DOCX,
        "src": "en",
        "tgt": "es",
    }
    with pytest.raises(InvalidRequest, match="no longer stored") as info:
        tj.make_translate_handler(engine)(job(params), JobContext(), storage)
    assert info.value.status == 400


def test_documents_without_text_still_get_their_exports(engine: Engine, storage: Storage) -> None:
    empty = io.BytesIO()
    docx.Document().save(empty)
    outcome = run_document(engine, storage, empty.getvalue(), "empty.docx", tj.DOCX)
    assert outcome.result == "" and set(outcome.artifacts) == {"document", "docx", "pdf"}
    assert open_pdf(storage.get_bytes(outcome.artifacts["pdf"])).page_count >= 1


def test_a_canceled_document_job_stores_nothing(engine: Engine, storage: Storage) -> None:
    token = CancelToken()
    token.cancel("job canceled")
    with pytest.raises(Cancelled):
        run_document(engine, storage, docx_bytes(), "r.docx", tj.DOCX, JobContext(cancel=token))
    assert storage.list("exports") == []


# ----- sniffing ---------------------------------------------------------------------------------------------
def test_sniff_mime_names_real_files() -> None:
    assert tj.sniff_mime(pdf_bytes()) == tj.PDF
    assert tj.sniff_mime(b"\n\n" + pdf_bytes()) == tj.PDF  # junk before %PDF- (readers allow it)
    assert tj.sniff_mime(docx_bytes()) == tj.DOCX
    assert tj.sniff_mime(docx_bytes()[: tj.SNIFF_BYTES]) == tj.DOCX
    assert tj.sniff_mime(image_bytes("PNG")) == tj.PNG
    assert tj.sniff_mime(image_bytes("JPEG")) == tj.JPEG
    tiff_le = image_bytes("TIFF")
    assert tiff_le[:4] == b"II*\x00" and tj.sniff_mime(tiff_le) == tj.TIFF
    big = mm_tiff()
    with Image.open(io.BytesIO(big)) as opened:  # a real image: Pillow reads it
        assert opened.size == (4, 4)
    assert tj.sniff_mime(big) == tj.TIFF


@pytest.mark.parametrize(
    "head",
    [
        b"",
        b"\x89PNG\r\n",  # truncated signatures
        b"\x89PN",
        b"%PDF",
        b"\xff\xd8",
        b"II*",
        b"MM\x00",
        b"PK\x03\x04\x14\x00",
        b"PK\x03\x04" + b"\x00" * 22 + b"\x11\x00",  # a local header whose name is cut off
        b"GIF89a" + b"\x00" * 40,
        b"<html>" + b" " * 2000 + b"%PDF-1.7",  # past the first 1024 bytes
        b"<p>%PDF- is how a PDF starts</p>",  # no version after the marker
    ],
)
def test_sniff_mime_refuses_truncated_and_other_heads(head: bytes) -> None:
    assert tj.sniff_mime(head) is None


def test_sniff_mime_refuses_zips_that_are_not_docx(tmp_path: Path) -> None:
    for names in (["word.txt"], ["xl/workbook.xml"], ["ppt/presentation.xml"], ["word/document.xml.bak"]):
        data = zip_bytes(names)
        assert tj.sniff_mime(data) is None, names
        path = tmp_path / "x.docx"
        path.write_bytes(data)
        assert tj.sniff_path(path) is None, names


def test_a_docx_whose_main_part_comes_late_is_found_by_its_directory(tmp_path: Path) -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive, zipfile.ZipFile(io.BytesIO(docx_bytes())) as real:
        archive.writestr("word/media/noise.bin", bytes(range(256)) * 400)  # 100 KB stored first
        for info in real.infolist():
            archive.writestr(info, real.read(info))
    path = tmp_path / "late.docx"
    path.write_bytes(out.getvalue())
    assert tj.sniff_mime(out.getvalue()[: tj.SNIFF_BYTES]) is None
    assert tj.sniff_path(path) == tj.DOCX


# ----- counting ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("kind", "name"), [(tj.DOCX, "r.docx"), (tj.PDF, "r.pdf")])
def test_count_document_chars_is_what_the_job_translates(
    engine: Engine, storage: Storage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, name: str
) -> None:
    data = (
        docx_bytes(paragraphs=8)
        if kind == tj.DOCX
        else pdf_bytes(sample_sentences(6, seed=9), bookmarks=True)
    )
    path = tmp_path / "counted.bin"  # the suffix does not decide: the content does
    path.write_bytes(data)
    counted = tj.count_document_chars(path, kind, source="en")
    spy = Spy(engine, monkeypatch)
    run_document(engine, storage, data, name, kind)
    assert counted == spy.characters > 0


def test_count_of_a_real_pdf_is_what_the_job_translates(
    engine: Engine, storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = REAL_PDF / "bzip2-manual-p4-7.pdf"  # headings, code, a bookmark outline (tests/data/real/pdf)
    counted = tj.count_document_chars(real, tj.PDF, source="en")
    spy = Spy(engine, monkeypatch)
    run_document(engine, storage, real.read_bytes(), real.name, tj.PDF)
    assert counted == spy.characters > 1000


def test_count_document_chars_estimates_images_from_their_pixels(tmp_path: Path) -> None:
    path = tmp_path / "a.png"
    path.write_bytes(image_bytes())
    assert tj.count_document_chars(path, tj.PNG) == math.ceil(900 * 200 / tj.PIXELS_PER_CHAR)
    tiff = tmp_path / "pages.tif"
    first, second = Image.new("L", (300, 300), 255), Image.new("L", (600, 100), 255)
    first.save(tiff, "TIFF", save_all=True, append_images=[second])
    assert tj.count_document_chars(tiff, tj.TIFF) == math.ceil((90_000 + 60_000) / tj.PIXELS_PER_CHAR)
    large = tmp_path / "large.png"  # over Pillow's warning size, under the service's 100 MP: no warning
    Image.new("1", (10_000, 9_500)).save(large)
    assert tj.count_document_chars(large, tj.PNG) == math.ceil(95_000_000 / tj.PIXELS_PER_CHAR)
    junk = tmp_path / "junk.pdf"
    junk.write_bytes(b"nothing here")
    with pytest.raises(DocumentFormatError):
        tj.count_document_chars(junk, tj.PDF)


# ----- exports: LibreOffice as a subprocess --------------------------------------------------------------
def fake_soffice(tmp_path: Path, body: str) -> str:
    script = tmp_path / "fake-soffice"
    script.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    script.chmod(0o755)
    return str(script)


def test_a_hung_libreoffice_is_killed_with_its_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    # soffice starts soffice.bin, which is what hangs: the child must die with it
    binary = fake_soffice(tmp_path, f"sleep 300 & echo $! > {pidfile}; wait")
    source = tmp_path / "a.docx"
    source.write_bytes(docx_bytes())
    started = time.monotonic()
    assert not exports.libreoffice_convert(source, tmp_path / "a.pdf", binary=binary, timeout=1)
    assert time.monotonic() - started < 30
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.05)
    assert not _alive(child)
    assert not (tmp_path / "a.pdf").exists()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(FileNotFoundError):  # a zombie has exited: it is not running
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    return True


def test_a_failing_libreoffice_falls_back_to_the_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for body in ("echo broken >&2; exit 1", "exit 0"):  # an error; success that writes nothing
        binary = fake_soffice(tmp_path, body)
        monkeypatch.setattr(exports, "soffice", lambda binary=binary: binary)
        source = tmp_path / "a.docx"
        source.write_bytes(docx_bytes())
        output = tmp_path / "a.pdf"
        output.unlink(missing_ok=True)
        assert exports.docx_pdf(source, output) == "story"
        pdf = open_pdf(output.read_bytes())
        assert "The annual report" in pdf[0].get_text()


@pytest.mark.skipif(
    exports.soffice() is None, reason="LibreOffice is missing: apt-get install libreoffice-writer-nogui"
)
def test_libreoffice_makes_the_pdf_of_a_docx_when_installed(tmp_path: Path) -> None:
    source = tmp_path / "a.docx"
    source.write_bytes(docx_bytes())
    output = tmp_path / "a.pdf"
    assert exports.docx_pdf(source, output) == "libreoffice"
    pdf = open_pdf(output.read_bytes())
    assert "The annual report" in pdf[0].get_text() and "LibreOffice" in str(pdf.metadata.get("producer"))


def test_the_layout_pdf_writes_other_scripts_and_right_to_left(tmp_path: Path) -> None:
    ltr, rtl = tmp_path / "ltr.pdf", tmp_path / "rtl.pdf"
    exports.text_pdf(["日本語のテキストです。", "한국어 문장", "Привет мир"], ltr)
    exports.text_pdf(["שלום עולם", "مرحبا بالعالم"], rtl, rtl=True)
    text = nfkc(open_pdf(ltr.read_bytes())[0].get_text())
    assert "日本語のテキストです。" in text and "한국어 문장" in text and "Привет мир" in text
    page = open_pdf(rtl.read_bytes())[0]
    assert "שלום עולם" in nfkc(page.get_text())
    assert any("Arabic" in font[3] for font in page.get_fonts())  # shaped in a font that has the script
    line = next(b for b in page.get_text("dict")["blocks"] if "שלום" in str(b))
    assert line["bbox"][0] > page.rect.width / 2  # set flush right (left to right, it starts at the margin)
