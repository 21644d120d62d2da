# mypy: disallow-untyped-calls=False
# (PyMuPDF's functions carry no annotations)
"""The PDF layer's shortcuts through MuPDF give what the PyMuPDF calls they replace give: one reading of a
page for its text and its obstacles, redaction without annotation objects, text lines shown without
``TextWriter.append``."""

from __future__ import annotations

import io

import pymupdf
import pytest
from PIL import Image

from dragoman.documents import _pdf_document, _pdf_fonts, _pdf_layout, _pdf_text


def page_with_everything() -> tuple[pymupdf.Document, pymupdf.Page]:
    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), (0, 128, 0)).save(buffer, "PNG")
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 80), "A bold title", fontsize=20, fontname="hebo")
    page.insert_textbox(
        pymupdf.Rect(72, 100, 300, 200), "A paragraph that wraps over lines. " * 4, fontsize=10
    )
    page.draw_rect(pymupdf.Rect(60, 240, 540, 300), color=(0, 0, 1), fill=(0.9, 0.9, 1))
    page.draw_line((72, 320), (500, 320))
    page.insert_text((72, 275), "Red text on a box", fontsize=14, fontname="tiro", color=(1, 0, 0))
    page.insert_image(pymupdf.Rect(400, 330, 520, 410), stream=buffer.getvalue())
    page.insert_text((72, 500), "Turned", fontsize=12, rotate=90)
    page.insert_text((72, 780), "Page 1. See the website.", fontsize=8)
    page.insert_link(
        {"kind": pymupdf.LINK_URI, "from": pymupdf.Rect(72, 770, 200, 784), "uri": "https://x.org"}
    )
    return doc, page


def test_one_reading_gives_the_text_dict_and_the_bbox_log_obstacles() -> None:
    _, page = page_with_everything()
    content, obstacles = _pdf_layout.read_page(page)
    expected = page.get_text("dict", flags=_pdf_layout.TEXT_FLAGS, sort=True)
    assert content["blocks"] == expected["blocks"]
    logged = [pymupdf.Rect(box) for kind, box in page.get_bboxlog() if kind in _pdf_layout.OBSTACLE_KINDS]
    assert obstacles == logged and len(obstacles) >= 4  # the box (fill and stroke), the line, the image


def test_redaction_removes_only_the_text_in_its_rectangles() -> None:
    doc, page = page_with_everything()

    def drawn(page: pymupdf.Page) -> list[object]:
        images = [i["bbox"] for i in page.get_image_info()]
        return [*images, *({k: v for k, v in d.items() if k != "seqno"} for d in page.get_drawings())]

    before = drawn(page)
    _pdf_document.redact(page, [pymupdf.Rect(60, 60, 540, 210)])  # the title and the paragraph
    text = page.get_text()
    assert "A bold title" not in text and "paragraph" not in text
    assert "Red text on a box" in text and "Turned" in text
    assert drawn(page) == before
    assert not list(page.annots(types=[pymupdf.mupdf.PDF_ANNOT_REDACT]))  # none left behind
    doc.close()


def test_lines_are_shown_where_text_writer_append_puts_them() -> None:
    style = _pdf_fonts.TextStyle(size=11, color=0x336699, family="monospace")
    block = _pdf_layout.Block(0, pymupdf.Rect(72, 100, 300, 160), "x", style, centered=True)
    laid = _pdf_text.lay_out(block, "The first line of text is long enough to wrap\nand a second")
    fast, slow = pymupdf.open(), pymupdf.open()
    fast_page, slow_page = fast.new_page(), slow.new_page()
    writers = _pdf_text.TextWriters(fast_page)
    writers.add(block, laid, center=True)
    writers.write()
    font = _pdf_text.metrics_for(style)
    writer = pymupdf.TextWriter(slow_page.rect)
    baseline = block.rect.y0 + (laid.pitch - laid.size) / 2 + _pdf_text.ASCENT * laid.size
    for line in laid.lines:
        x = block.rect.x0 + max(0.0, (block.rect.width - font.width(line) * laid.size) / 2)
        writer.append((x, baseline), line, font=font.font, fontsize=laid.size)
        baseline += laid.pitch
    writer.write_text(slow_page, color=(0x33 / 255, 0x66 / 255, 0x99 / 255))

    def spans(page: pymupdf.Page) -> list[tuple[str, str, float, int, tuple[float, float]]]:
        return [
            (s["text"], s["font"], s["size"], s["color"], s["origin"])
            for b in page.get_text("dict")["blocks"]
            for line in b["lines"]
            for s in line["spans"]
        ]

    assert len(laid.lines) > 1
    got, expected = spans(fast_page), spans(slow_page)
    assert [s[:4] for s in got] == [s[:4] for s in expected]
    for (*_, origin), (*_, want) in zip(got, expected, strict=True):
        assert origin == pytest.approx(want, abs=1e-3)
    assert fast_page.get_fonts() == slow_page.get_fonts()  # the monospaced font's widths repaired alike


def test_a_font_answers_coverage_and_word_widths_from_what_it_met_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shortcuts of the writing path (issue 11): coverage of characters met before without a loop,
    word widths remembered (within a bound) and the same as summed afresh."""
    font = _pdf_text.Metrics(pymupdf.Font("helv"))
    assert font.covers("Two words\nand more")
    assert font.covers("more and\nwords")  # every character met: the quick answer
    assert not font.covers("cafe\u0301")  # a combining mark needs shaping
    assert not font.covers("cafe\u0301")  # (remembered as missing)
    assert font.covers("face")
    for word in ("Two", "words", "and", "more", "face"):
        assert font.word_width(word) == font.width(word)
    monkeypatch.setattr(_pdf_text, "WORDS_KEPT", 3)
    for word in ("a", "an", "and", "more", "word"):
        assert font.word_width(word) == font.width(word)
        assert len(font.words) <= 3


def test_lay_out_from_fitted_runs_is_lay_out_alone() -> None:
    """``Rewriter.write`` finds a translation's runs and fonts once (``fitted``) for both the check and the
    layout: the layout is the one ``lay_out`` finds on its own."""
    doc, page = page_with_everything()
    work = _pdf_layout.page_blocks(page)
    book = _pdf_text.FontBook()
    book.note(page)
    translation = "Una traducción algo más larga que el original, con palabras que caben en la línea"
    laid_out = 0
    for block in work.blocks:
        fit = _pdf_text.fitted(block, translation, rtl=False, book=book)
        assert (fit is not None) == _pdf_text.writable(block, translation, rtl=False, book=book)
        if fit is None:
            continue
        once, alone = (
            _pdf_text.lay_out(block, translation, book, fit=fit),
            _pdf_text.lay_out(block, translation, book),
        )
        assert (once.lines, once.size, once.scale, once.widths, once.pieces) == (
            alone.lines,
            alone.size,
            alone.scale,
            alone.widths,
            alone.pieces,
        )
        laid_out += 1
    assert laid_out >= 3
    assert _pdf_text.fitted(work.blocks[0], translation, rtl=True, book=book) is None
    doc.close()
