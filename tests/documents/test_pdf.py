# mypy: disallow-untyped-calls=False
# (PyMuPDF's functions carry no annotations)
"""PDF: text translated in place (same boxes, colours, sizes), images, drawings, links and pages untouched;
right-to-left and other scripts rendered; scans through OCR; encrypted and corrupt files refused."""

from __future__ import annotations

import io
import shutil
import threading
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pymupdf
import pytest
from PIL import Image, ImageDraw, ImageFont

from dragoman.documents import _pdf_fonts, _pdf_layout, _pdf_ocr, _pdf_pipeline, _pdf_text, handlers
from dragoman.documents.pdf import PdfHandler
from dragoman.errors import DocumentFormatError, OcrUnavailable
from dragoman.pipelines import translate_file as files
from dragoman.progress import JobContext
from dragoman.settings import Settings
from dragoman.testing.fakes import FakeTranslator
from dragoman.translation.engine import Engine

DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
HAVE_APERTIUM = (
    shutil.which("lt-proc") is not None and Path("/usr/share/apertium/modes/eng-spa.mode").is_file()
)
needs_apertium = pytest.mark.skipif(not HAVE_APERTIUM, reason="apt-get install apertium apertium-eng-spa")
needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None, reason="apt-get install tesseract-ocr"
)
needs_dejavu = pytest.mark.skipif(not DEJAVU.is_file(), reason="apt-get install fonts-dejavu-core")

TITLE = "Annual report"
PARAGRAPH = (
    "The house is red. The garden is big and the children play in it every day after school. "
    "My sister bought a new car yesterday because it was cheap."
)
COLOURED = "The teacher opened the window."
LINKED = "Visit our website."
FOOTER = "Small print at the bottom."
SECOND = "The garden is big."
RED = (1.0, 0.0, 0.0)


class Fake(FakeTranslator):
    """A deterministic translator: ``transform`` applied to each non-blank text; counts its calls."""

    def __init__(self, transform: Callable[[str], str] | None = None, target: str = "spa_Latn") -> None:
        super().__init__(transform or (lambda t: f"[{t.upper()}]"), target=target, keep_blank=True)


def png(size: tuple[int, int], colour: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, "PNG")
    return buffer.getvalue()


def build(path: Path) -> Path:
    """Two A4 pages: a bold title, a wrapped paragraph, red serif text on a drawn box, a linked line
    beside an image, a small footer; the second page has one line and a link back. (Monospaced text is
    code, kept as it is: tests/documents/test_pdf_fidelity.py.)"""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 80), TITLE, fontsize=22, fontname="hebo")
    page.insert_textbox(pymupdf.Rect(72, 110, 520, 220), PARAGRAPH, fontsize=11, fontname="helv")
    page.draw_rect(pymupdf.Rect(60, 240, 540, 300), color=(0, 0, 1), fill=(0.9, 0.9, 1))
    page.insert_text((72, 275), COLOURED, fontsize=14, fontname="tiro", color=RED)
    page.insert_image(pymupdf.Rect(400, 330, 520, 410), stream=png((60, 40), (0, 128, 0)))
    page.insert_text((72, 360), LINKED, fontsize=12, fontname="helv")
    page.insert_link(
        {"kind": pymupdf.LINK_URI, "from": pymupdf.Rect(72, 348, 200, 364), "uri": "https://x.org"}
    )
    page.insert_text((72, 780), FOOTER, fontsize=7, fontname="helv")
    second = doc.new_page(width=842, height=595)  # landscape
    second.insert_text((100, 100), SECOND, fontsize=16, fontname="helv")
    second.insert_link({"kind": pymupdf.LINK_GOTO, "from": pymupdf.Rect(100, 84, 260, 104), "page": 0})
    doc.save(path)
    doc.close()
    return path


def spans(page: pymupdf.Page) -> list[dict[str, Any]]:
    return [s for b in page.get_text("dict")["blocks"] for line in b.get("lines", []) for s in line["spans"]]


def block_at(page: pymupdf.Page, text: str) -> pymupdf.Rect:
    """The box of the block holding ``text`` (lines joined with spaces)."""
    for block in page.get_text("blocks"):
        if text in " ".join(block[4].split()):
            return pymupdf.Rect(block[:4])
    raise AssertionError(f"{text!r} not found in {page.get_text()!r}")


def link_targets(page: pymupdf.Page) -> list[tuple[int, tuple[float, ...], object]]:
    return [
        (link["kind"], tuple(link["from"]), link.get("uri") or link.get("page")) for link in page.get_links()
    ]


def translate(source: Path, translator: Fake, name: str = "out.pdf") -> tuple[Path, Any]:
    output = source.with_name(name)
    report = PdfHandler().translate(source, output, translator, None)
    return output, report


def test_text_is_replaced_in_its_boxes_and_everything_else_stays(tmp_path: Path) -> None:
    source = build(tmp_path / "report.pdf")
    translator = Fake()
    output, report = translate(source, translator)
    before, after = pymupdf.open(source), pymupdf.open(output)
    assert len(translator.calls) == 1 and len(translator.calls[0]) == 6
    assert report.pages == 2 and report.segments == 6 and len(report.boxes) == 6
    assert [b.page for b in report.boxes] == [1, 1, 1, 1, 1, 2]
    assert after.page_count == 2
    for number in range(2):
        old, new = before[number], after[number]
        assert new.rect == old.rect and new.rotation == old.rotation
        assert len(new.get_drawings()) == len(old.get_drawings())
        assert [i["bbox"] for i in new.get_image_info()] == [i["bbox"] for i in old.get_image_info()]
        assert link_targets(new) == link_targets(old)
        text = " ".join(new.get_text().split())
        for original in (TITLE, PARAGRAPH, COLOURED, LINKED, FOOTER, SECOND):
            assert original not in text
    for page_number, original in [(0, TITLE), (0, COLOURED), (0, LINKED), (0, FOOTER), (1, SECOND)]:
        old_box = block_at(before[page_number], original)
        new_box = block_at(after[page_number], f"[{original.upper()}]")
        assert abs(new_box.x0 - old_box.x0) < 3 and abs(new_box.y0 - old_box.y0) < 6, original
    paragraph = block_at(after[0], "[THE HOUSE IS RED.")
    assert paragraph.intersects(block_at(before[0], "The house is red."))
    assert paragraph.y1 < 240  # it stays above the coloured box
    by_text = {s["text"].strip(): s for s in spans(after[0])}
    assert by_text[f"[{COLOURED.upper()}]"]["color"] == 0xFF0000
    assert "Roman" in by_text[f"[{COLOURED.upper()}]"]["font"]  # Times stays a serif
    assert "Bold" in by_text[f"[{TITLE.upper()}]"]["font"]
    assert any(name in by_text[f"[{LINKED.upper()}]"]["font"] for name in ("Sans", "Helvetica"))
    assert report.extracted_text is not None and PARAGRAPH in report.extracted_text
    assert report.translated_text is not None and f"[{SECOND.upper()}]" in report.translated_text
    assert report.boxes[0].text == TITLE and report.boxes[0].translation == f"[{TITLE.upper()}]"


def test_same_text_comes_back_at_the_same_size(tmp_path: Path) -> None:
    source = build(tmp_path / "report.pdf")
    output, _ = translate(source, Fake(lambda t: t))
    old = {s["text"].strip(): s["size"] for s in spans(pymupdf.open(source)[0])}
    new = {s["text"].strip(): s["size"] for s in spans(pymupdf.open(output)[0])}
    for text in (TITLE, COLOURED, LINKED, FOOTER):
        assert new[text] == pytest.approx(old[text], abs=0.3), text


def test_long_translations_shrink_to_a_legible_size_then_reflow_and_are_reported(tmp_path: Path) -> None:
    """Issue 11, item 2: never below 6 pt or 70% of the original; the footer reflows downwards instead
    (it used to shrink to about 3 pt); what still does not fit is reported."""
    source = build(tmp_path / "report.pdf")
    output, report = translate(source, Fake(lambda t: " ".join([t] * 6)))
    page = pymupdf.open(output)[0]
    footer = [s for s in spans(page) if s["text"].startswith(FOOTER)]
    assert footer and all(s["size"] >= 6 - 0.01 for s in footer)
    assert all(s["size"] >= 0.7 * 11 - 0.01 for s in spans(page) if "house" in s["text"])
    paragraph = block_at(page, "The house is red. The garden")
    assert paragraph.y1 < 240 and paragraph.x1 < 530  # never over the box below nor off its column
    assert any("did not fit" in w and "legible size" in w and "page(s) 1" in w for w in report.warnings)


def test_a_label_grows_into_free_space_before_it_shrinks(tmp_path: Path) -> None:
    source = build(tmp_path / "report.pdf")
    longer = "Visit our new website."  # 4 characters more: about 25 points in 12-point Helvetica
    output, _ = translate(source, Fake(lambda t: longer if t == LINKED else t))
    linked = [s for s in spans(pymupdf.open(output)[0]) if s["text"].startswith(longer)]
    assert linked and linked[0]["size"] == pytest.approx(12, abs=0.3)
    old = block_at(pymupdf.open(source)[0], LINKED)
    assert old.x1 + 20 < linked[0]["bbox"][2] < 400  # wider than the original box, and before the image


@pytest.mark.parametrize(
    ("target", "translation", "script"),
    [
        ("arb_Arab", "هذا بيت أحمر", "Arab"),  # no lam: MuPDF extracts its joined forms wrongly
        ("zho_Hans", "房子是红色的", "Hans"),
        ("rus_Cyrl", "Дом красный", "Cyrl"),
    ],
)
def test_other_scripts_render_with_a_font_that_has_them(
    tmp_path: Path, target: str, translation: str, script: str
) -> None:
    if not _pdf_fonts.script_renderable(script):
        pytest.skip(f"MuPDF has no font with {script} glyphs (a PyMuPDF build without its Noto fonts)")
    source = build(tmp_path / "report.pdf")
    output, report = translate(source, Fake(lambda t: translation, target=target))
    page = pymupdf.open(output)[1]
    text = unicodedata.normalize("NFKC", page.get_text())
    for word in translation.split():
        assert word in text
    assert not report.warnings
    if target == "arb_Arab":  # right to left: set against the right edge of the original box
        old = block_at(pymupdf.open(source)[1], SECOND)
        new = pymupdf.Rect(page.get_text("blocks")[0][:4])
        assert abs(new.x1 - old.x1) < 4 and new.x0 > old.x0 + 10


def test_rotated_pages_and_turned_text_are_translated_in_place(tmp_path: Path) -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 80), "The house is red.", fontsize=12)
    page.insert_text((300, 700), "The garden is big.", fontsize=12, rotate=90)
    page.set_rotation(90)
    angled = doc.new_page()
    angled.insert_text(
        (100, 300), "Tilted words here.", fontsize=12, morph=(pymupdf.Point(100, 300), pymupdf.Matrix(30))
    )
    doc.save(tmp_path / "turned.pdf")
    output, report = translate(tmp_path / "turned.pdf", Fake())
    result = pymupdf.open(output)
    assert result[0].rotation == 90 and result[0].rect == pymupdf.open(tmp_path / "turned.pdf")[0].rect
    text = " ".join(result[0].get_text().split())
    assert "[THE HOUSE IS RED.]" in text and "[THE GARDEN IS BIG.]" in text
    turned = [
        line for b in result[0].get_text("dict")["blocks"] for line in b["lines"] if "GARDEN" in str(line)
    ]
    original = [
        line for b in doc[0].get_text("dict")["blocks"] for line in b["lines"] if "garden" in str(line)
    ]
    assert turned[0]["dir"] == pytest.approx(original[0]["dir"], abs=1e-3)
    assert "Tilted words here." in result[1].get_text()  # at 30 degrees: left as it was
    assert any("1 text block(s) at an angle" in w and w.endswith("page(s) 2") for w in report.warnings)


def test_encrypted_pdf_is_refused(tmp_path: Path) -> None:
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "Secret.")
    path = tmp_path / "locked.pdf"
    doc.save(path, encryption=pymupdf.mupdf.PDF_ENCRYPT_AES_256, user_pw="user", owner_pw="owner")
    with pytest.raises(DocumentFormatError, match="encrypted PDF; decrypt it first"):
        translate(path, Fake())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["locked.pdf"]


@pytest.mark.parametrize("content", [b"%PDF-1.7\nnot a pdf at all\n", b"%PDF-1.4\n" + bytes(300)])
def test_corrupt_pdf_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "broken.pdf"
    path.write_bytes(content)
    with pytest.raises(DocumentFormatError, match="not a readable PDF"):
        translate(path, Fake())


def test_sniffing_is_by_content(tmp_path: Path) -> None:
    handler = PdfHandler()
    assert handler.sniff(build(tmp_path / "a.pdf").read_bytes()[:8192], tmp_path / "a.pdf")
    assert not handler.sniff(b"just some text", tmp_path / "a.pdf")
    fake = tmp_path / "fake.pdf"
    fake.write_text("The house is red.", encoding="utf-8")
    with pytest.raises(DocumentFormatError, match="named like pdf"):
        handlers.find_handler(fake)


def scanned_page(doc: pymupdf.Document, lines: Sequence[str]) -> pymupdf.Page:
    """A page that is only an image of rendered text (no text layer), as a scanner makes them."""
    font = ImageFont.truetype(str(DEJAVU), 48)
    image = Image.new("RGB", (1700, 2200), (250, 248, 240))
    draw = ImageDraw.Draw(image)
    for number, line in enumerate(lines):
        draw.text((150, 200 + 200 * number), line, font=font, fill="black")
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    page = doc.new_page(width=612, height=792)
    page.insert_image(page.rect, stream=buffer.getvalue())
    return page


@needs_dejavu
@needs_tesseract
def test_a_scanned_page_goes_through_ocr(tmp_path: Path) -> None:
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "The house is red.", fontsize=12)
    scanned_page(doc, ["The garden is big.", "My sister bought a car."])
    doc.save(tmp_path / "scan.pdf")
    output, report = translate(tmp_path / "scan.pdf", Fake())
    page = pymupdf.open(output)[1]
    text = " ".join(page.get_text().split())
    assert "[THE GARDEN IS BIG.]" in text and "[MY SISTER BOUGHT A CAR.]" in text
    assert len(page.get_image_info()) == 1  # the scan stays, painted over where its text was
    scanned = [b for b in report.boxes if b.page == 2]
    assert [b.text for b in scanned] == ["The garden is big.", "My sister bought a car."]
    assert scanned[0].bbox[1] < scanned[1].bbox[1] and 30 < scanned[0].bbox[0] < 80
    covered = page.get_pixmap(clip=pymupdf.Rect(scanned[0].bbox), colorspace=pymupdf.csGRAY)
    assert not report.warnings
    assert min(covered.samples) < 128  # the translation is written there, in dark ink


def test_scans_without_ocr_are_left_with_a_warning_or_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_ocr(*args: object) -> None:
        raise OcrUnavailable("Tesseract is not installed: run `apt-get install tesseract-ocr`")

    monkeypatch.setattr(_pdf_ocr, "ocr_page", no_ocr)
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "The house is red.", fontsize=12)
    doc.new_page().insert_image(pymupdf.Rect(0, 0, 595, 842), stream=png((200, 300), (240, 240, 240)))
    doc.save(tmp_path / "mixed.pdf")
    output, report = translate(tmp_path / "mixed.pdf", Fake())
    assert any(w.startswith("page(s) 2 have no text layer; OCR not applied") for w in report.warnings)
    assert "[THE HOUSE IS RED.]" in pymupdf.open(output)[0].get_text()
    doc.delete_page(0)
    doc.save(tmp_path / "scan-only.pdf")
    with pytest.raises(OcrUnavailable, match="apt-get install tesseract-ocr"):
        translate(tmp_path / "scan-only.pdf", Fake(), name="scan-only.out.pdf")


def test_an_invisible_ocr_layer_is_replaced_by_visible_text_over_the_scan(tmp_path: Path) -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_image(page.rect, stream=png((100, 140), (255, 255, 255)))
    page.insert_text((72, 100), "The house is red.", fontsize=14, render_mode=3)
    doc.save(tmp_path / "ocred.pdf")
    output, _ = translate(tmp_path / "ocred.pdf", Fake())
    result = pymupdf.open(output)[0]
    [span] = spans(result)
    assert span["text"] == "[THE HOUSE IS RED.]" and span["alpha"] == 255
    assert len(result.get_drawings()) == 1  # the patch that hides the scanned words


def test_docx_export_beside_the_output(tmp_path: Path) -> None:
    docx = pytest.importorskip("docx")
    source = build(tmp_path / "report.pdf")
    output, report = translate(source, Fake(target="spa_Latn"), name="report.es.pdf")
    export = report.extra_outputs["docx"]
    assert export == tmp_path / "report.es.docx" and output.is_file()
    paragraphs = [p.text for p in docx.Document(str(export)).paragraphs if p.text.strip()]
    assert paragraphs[0] == f"[{TITLE.upper()}]" and f"[{SECOND.upper()}]" in paragraphs
    # a second run never writes over the export
    output.unlink()
    _, again = translate(source, Fake(target="spa_Latn"), name="report.es.pdf")
    assert "docx" not in again.extra_outputs and any("report.es.docx exists" in w for w in again.warnings)


def test_long_documents_are_translated_in_groups_that_land_on_their_pages(tmp_path: Path) -> None:
    doc = pymupdf.open()
    for number in range(30):
        page = doc.new_page()
        for k in range(4):
            page.insert_text((72, 100 + 150 * k), f"Page {number} block {k}.", fontsize=12)
    doc.save(tmp_path / "long.pdf")
    translator = Fake()
    output, report = translate(tmp_path / "long.pdf", translator)
    assert len(translator.calls) >= 2  # laid out group by group while the next one is translated
    sent = [t for call in translator.calls for t in call]
    assert sent == [f"Page {n} block {k}." for n in range(30) for k in range(4)]
    result = pymupdf.open(output)
    for number in (0, 13, 29):
        text = " ".join(result[number].get_text().split())
        assert all(f"[PAGE {number} BLOCK {k}.]" in text for k in range(4)), text
    assert report.segments == 120 and len(report.boxes) == 120
    assert [b.page for b in report.boxes] == [n + 1 for n in range(30) for _ in range(4)]


def test_groups_are_consecutive_pages_of_enough_texts() -> None:
    works = [_pdf_layout.PageWork(n, blocks=[object()] * (n % 3)) for n in range(12)]  # type: ignore[list-item]
    batches = _pdf_pipeline.groups(works, 4)
    assert [w.number for b in batches for w in b] == list(range(12))
    assert all(sum(len(w.blocks) for w in b) >= 4 for b in batches[:-1])
    assert _pdf_pipeline.group_size(10) == _pdf_pipeline.GROUP_TEXTS
    assert _pdf_pipeline.group_size(8000) == 1000


def test_fast_layout_matches_the_html_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = build(tmp_path / "report.pdf")
    transform = {PARAGRAPH: "Съешь же ещё этих мягких французских булок, да выпей чаю. " * 3}
    fast, _ = translate(source, Fake(lambda t: transform.get(t, t + " und so weiter")), name="fast.pdf")
    monkeypatch.setattr(_pdf_text, "writable", lambda *args, **kwargs: False)
    shaped, _ = translate(source, Fake(lambda t: transform.get(t, t + " und so weiter")), name="shaped.pdf")
    for page_number in (0, 1):
        quick = sorted(spans(pymupdf.open(fast)[page_number]), key=lambda s: s["bbox"][1])
        html = sorted(spans(pymupdf.open(shaped)[page_number]), key=lambda s: s["bbox"][1])
        assert [s["text"].strip() for s in quick] == [s["text"].strip() for s in html]
        for a, b in zip(quick, html, strict=True):
            assert a["size"] == pytest.approx(b["size"], rel=0.05), a["text"]
            assert a["origin"][0] == pytest.approx(b["origin"][0], abs=1.5), a["text"]
            assert a["origin"][1] == pytest.approx(b["origin"][1], abs=2.0), a["text"]


def test_fast_layout_keeps_line_breaks_and_fits_long_words() -> None:
    style = _pdf_fonts.TextStyle(size=10)
    block = _pdf_layout.Block(0, pymupdf.Rect(0, 0, 100, 40), "x", style, room=pymupdf.Rect(0, 0, 100, 40))
    laid = _pdf_text.lay_out(block, "First item\nSecond item")
    assert laid.lines == ["First item", "Second item"] and laid.scale == 1.0
    long_word = _pdf_text.lay_out(block, "Donaudampfschifffahrtsgesellschaftskapitän")
    font = _pdf_text.metrics_for(style)
    # never below the legible size (issue 11, item 2): the word too long for the box is broken instead
    assert long_word.scale >= 0.7 and len(long_word.lines) > 1 and not long_word.overflow
    assert "".join(long_word.lines) == "Donaudampfschifffahrtsgesellschaftskapitän"
    assert all(font.width(line) * long_word.size <= 100 for line in long_word.lines)
    assert not _pdf_text.writable(block, "مرحبا", rtl=True)
    assert not _pdf_text.writable(block, "cafe\u0301", rtl=False)  # a combining accent needs shaping
    assert _pdf_text.writable(block, "Ça coûte 5 €", rtl=False)


def test_a_heading_in_the_block_of_its_paragraph_becomes_a_block_of_its_own() -> None:
    def line(text: str, size: float, flags: int) -> dict[str, Any]:
        return {"spans": [{"text": text, "size": size, "flags": flags}]}

    bold = _pdf_fonts.FLAG_BOLD
    lines = [line("Results", 16, bold), line("The house", 11, 0), line(" ", 30, 0), line("is red.", 10.5, 0)]
    assert [[x["spans"][0]["text"] for x in run] for run in _pdf_layout.runs(lines)] == [
        ["Results"],
        ["The house", "is red."],
    ]
    assert len(_pdf_layout.runs([line("Bold line", 11, bold), line("and plain", 11, 0)])) == 2
    mixed = {
        "spans": [
            {"text": "Note:", "size": 11, "flags": bold},
            {"text": " the house", "size": 11, "flags": 0},
        ]
    }
    assert len(_pdf_layout.runs([mixed, line("is red.", 11, 0)])) == 1  # a bold lead-in stays in


def test_join_lines_joins_wrapped_lines_and_keeps_paragraph_ends() -> None:
    lines = [("The house is red and the gar-", 400.0), ("den is big.", 90.0), ("Second item", 400.0)]
    assert _pdf_layout.join_lines(lines, 400) == "The house is red and the garden is big.\nSecond item"
    assert _pdf_layout.join_lines([("Well-", 400.0), ("Known", 300.0)], 400) == "Well- Known"


def test_the_font_probe_says_when_a_script_has_no_glyphs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(_pdf_fonts.SCRIPT_SAMPLES, "Zzzz", "\U000f0001")  # a private-use character
    _pdf_fonts.script_renderable.cache_clear()
    try:
        assert _pdf_fonts.script_renderable("Latn")
        assert not _pdf_fonts.script_renderable("Zzzz")
    finally:
        _pdf_fonts.script_renderable.cache_clear()


@pytest.fixture
def engine() -> Any:
    with Engine(Settings.from_env()) as eng:
        yield eng


@needs_apertium
def test_apertium_end_to_end_through_translate_file(engine: Engine, tmp_path: Path) -> None:
    source = build(tmp_path / "report.pdf")
    before = source.read_bytes()
    result = files.translate_file(engine, source, "es", source="en")
    assert result.output_path == tmp_path / "report.es.pdf" and result.format == "pdf"
    assert result.pages == 2 and source.read_bytes() == before
    text = " ".join(pymupdf.open(result.output_path)[0].get_text().split()).lower()
    assert "casa" in text and "the house is red" not in text
    assert result.extra_outputs.get("docx") == tmp_path / "report.es.docx"
    with pytest.raises(Exception, match="exists"):
        files.translate_file(engine, source, "es", source="en")


def test_a_failing_translation_leaves_nothing_behind(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = build(tmp_path / "report.pdf")

    def broken(*args: object, **kwargs: object) -> list[str]:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(files.EngineTextTranslator, "__call__", broken)
    with pytest.raises(RuntimeError):
        files.translate_file(engine, source, "es", source="en")
    assert [p.name for p in tmp_path.iterdir()] == ["report.pdf"]
    assert not [t for t in threading.enumerate() if t.name == "dragoman-pdf"]  # the worker stopped


@needs_apertium
def test_progress_counts_the_documents_texts_and_only_grows(engine: Engine, tmp_path: Path) -> None:
    doc = pymupdf.open()
    for number in range(40):
        doc.new_page().insert_text((72, 100), f"The house number {number} is red.", fontsize=12)
        doc[-1].insert_text((72, 200), "The garden is big.", fontsize=12)
    doc.save(tmp_path / "many.pdf")
    seen: list[tuple[int, int, str]] = []
    context = JobContext.of(lambda d, t, m: seen.append((d, t, m)))
    result = files.translate_file(engine, tmp_path / "many.pdf", "es", source="en", context=context)
    counts = [d for d, _, m in seen if m == "translating"]
    assert len(counts) >= 2 and counts == sorted(counts) and counts[-1] == 80
    assert {t for _, t, m in seen if m == "translating"} == {80}
    assert "casa" in pymupdf.open(result.output_path)[39].get_text()
