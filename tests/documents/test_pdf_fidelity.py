# mypy: disallow-untyped-calls=False
# (PyMuPDF's functions carry no annotations)
"""PDF fidelity on real-world files (issue 11, item 2): the document's own fonts kept where they have the
glyphs (a fallback of the same class otherwise, checked with poppler's ``pdffonts``), monospace code left as
it is, inline bold and code kept inside a paragraph, table cells and a running header's parts as blocks of
their own, nothing written below a legible size, no translated text drawn over other text, bookmark titles
translated.

The real files are pages of manuals Debian packages install (``tests/data/real/pdf/README.md``); the
translator is a deterministic fake that keeps the numbered placeholders (as the engine does).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pymupdf
import pytest

from dragoman.documents import _pdf_document, _pdf_fonts, _pdf_layout, _pdf_text
from dragoman.documents.base import DocumentReport
from dragoman.documents.pdf import PdfHandler
from dragoman.testing.fakes import FakeTranslator

REAL = Path(__file__).resolve().parent.parent / "data" / "real" / "pdf"
FILES = sorted(p.name for p in REAL.glob("*.pdf"))
needs_pdffonts = pytest.mark.skipif(
    shutil.which("pdffonts") is None, reason="apt-get install poppler-utils (pdffonts)"
)
#: A word of the translated text (placeholders ``<1>``, ``</1>``, ``<2/>`` are not words).
WORD = re.compile(r"(?<![<\w/])([A-Za-z]{4,})")


def longer(text: str) -> str:
    """Words of four letters or more get their last letter doubled: about 15% longer, in the document's
    own glyphs only."""
    return WORD.sub(lambda m: m.group(1) + m.group(1)[-1], text)


def accented(text: str) -> str:
    """Accented letters the documents' font subsets lack: the fallback fonts write them."""
    return WORD.sub(lambda m: m.group(1).replace("o", "ó").replace("n", "ñ").replace("a", "á"), text)


def translate(name: str, rewrite: Callable[[str], str], tmp_path: Path) -> tuple[Path, DocumentReport]:
    output = tmp_path / f"{rewrite.__name__}-{name}"
    report = PdfHandler().translate(REAL / name, output, FakeTranslator(rewrite, keep_blank=True), None)
    return output, report


def pdffonts(path: Path) -> list[tuple[str, str, bool]]:
    """``pdffonts``' rows: (name without subset prefix, type, embedded)."""
    out = subprocess.run(["pdffonts", str(path)], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    header, rule = lines[0], lines[1]
    columns = [m.start() for m in re.finditer(r"-+", rule)]
    rows = []
    for line in lines[2:]:
        cells = [line[a:b].strip() for a, b in zip(columns, [*columns[1:], len(line)], strict=True)]
        rows.append((_pdf_fonts.base_name(cells[0]), cells[1], cells[3] == "yes"))
    assert header.startswith("name")
    return rows


def programs(path: Path) -> dict[bytes, str]:
    """The font programs embedded in a PDF, with their names."""
    with pymupdf.open(path) as doc:
        found = {}
        for page in doc:
            for xref, _, _, name, *_ in page.get_fonts():
                buffer = doc.extract_font(xref)[3]
                if buffer:
                    found[buffer] = _pdf_fonts.base_name(name)
        return found


def advances_off(path: Path, fonts_of: Path) -> tuple[int, int]:
    """Characters in ``path`` written in a font of ``fonts_of`` (by name), and how many of them advance
    by another width than that font's glyph: text drawn with wrong widths (squeezed or spread out)."""
    with pymupdf.open(fonts_of) as source:
        own = {}
        for page in source:
            for xref, _, _, name, *_ in page.get_fonts():
                buffer = source.extract_font(xref)[3]
                if buffer:
                    own[_pdf_fonts.base_name(name)] = pymupdf.Font(fontbuffer=buffer)
    checked = off = 0
    with pymupdf.open(path) as doc:
        for page in doc:
            for block in page.get_text("rawdict")["blocks"]:
                for line in block.get("lines", []):
                    for span in line["spans"]:
                        font = own.get(_pdf_fonts.base_name(span["font"]))
                        if font is None:
                            continue
                        for char in span["chars"]:
                            if not char["c"].strip() or not font.has_glyph(ord(char["c"])):
                                continue
                            checked += 1
                            width = char["bbox"][2] - char["bbox"][0]
                            off += (
                                abs(width - font.glyph_advance(ord(char["c"])) * span["size"])
                                > 0.05 * span["size"]
                            )
    return checked, off


def warned_pages(report: DocumentReport) -> set[int]:
    """Pages named in the warning about translations that did not fit at the legible size."""
    pages: set[int] = set()
    for warning in report.warnings:
        if "did not fit" in warning:
            pages |= {int(n) for n in re.findall(r"\d+", warning.split("page(s)")[1])}
    return pages


def glyphs(page: pymupdf.Page) -> list[tuple[pymupdf.Rect, str]]:
    return [
        (pymupdf.Rect(char["bbox"]), char["c"])
        for block in page.get_text("rawdict")["blocks"]
        for line in block.get("lines", [])
        for span in line["spans"]
        for char in span["chars"]
        if char["c"].strip()
    ]


def overlaps(page: pymupdf.Page) -> int:
    """Pairs of glyphs drawn over each other (more than half of the smaller one covered): text written
    over text. Glyphs are bucketed on a grid, so a page costs about linear time."""
    cells: dict[tuple[int, int], list[pymupdf.Rect]] = {}
    count = 0
    for rect, _ in glyphs(page):
        rect = pymupdf.Rect(rect.x0, rect.y0 + 0.25 * rect.height, rect.x1, rect.y1 - 0.25 * rect.height)
        if rect.is_empty:
            continue
        key = (int(rect.x0 // 20), int(rect.y0 // 20))
        for dx in (-1, 0, 1):
            for dy in (-1, 0, 1):
                for other in cells.get((key[0] + dx, key[1] + dy), []):
                    common = rect & other
                    if not common.is_empty and common.get_area() > 0.5 * min(
                        rect.get_area(), other.get_area()
                    ):
                        count += 1
        cells.setdefault(key, []).append(rect)
    return count


@pytest.mark.parametrize(
    ("font", "family"),
    [
        ("NimbusSanL-Bold", "sans-serif"),
        ("ABCDEF+NimbusSanL-Regu", "sans-serif"),
        ("NimbusMonL-Regu", "monospace"),
        ("NimbusRomNo9L-Regu", "Times"),
        ("CMTT10", "monospace"),
        ("CMSLTT10", "monospace"),
        ("CMSS10", "sans-serif"),
        ("CMR10", "Times"),
        ("CMBX12", "Times"),
        ("URWPalladioL-Roma", "Times"),
        ("DejaVuSans", "sans-serif"),
        ("DejaVuSansMono-Bold", "monospace"),
        ("DejaVuSerif", "Times"),
        ("LiberationSans-Bold", "sans-serif"),
        ("LiberationMono", "monospace"),
        ("LiberationSerif-Italic", "Times"),
        ("TeXGyreHeros-Regular", "sans-serif"),
        ("TeXGyreTermes-Bold", "Times"),
        ("TeXGyreCursor-Regular", "monospace"),
        ("ArialMT", "sans-serif"),
        ("TimesNewRomanPSMT", "Times"),
        ("Palatino-Roman", "Times"),
        ("Computer Modern Typewriter", "monospace"),
    ],
)
def test_fonts_are_classed_by_a_broad_table_of_names(font: str, family: str) -> None:
    assert _pdf_fonts.classify(font) == family


def test_fonts_the_table_does_not_know_are_classed_by_their_flags() -> None:
    assert _pdf_fonts.classify("F12", _pdf_fonts.FLAG_MONO) == "monospace"
    assert _pdf_fonts.classify("F13", _pdf_fonts.FLAG_SERIF) == "Times"
    assert _pdf_fonts.classify("F14", 0) == "sans-serif"
    style = _pdf_fonts.style_of({"font": "XYZABC+CMBX12", "flags": 0, "size": 12.0})
    assert style.bold and style.family == "Times" and style.font == "CMBX12"


@needs_pdffonts
@pytest.mark.parametrize("name", FILES)
def test_the_documents_own_fonts_are_kept_where_they_have_the_glyphs(name: str, tmp_path: Path) -> None:
    output, _ = translate(name, longer, tmp_path)
    source = programs(REAL / name)
    written = programs(output)
    assert written, "no fonts in the output"
    # every font of the output is one of the document's own font programs: no Times/Courier stand-in
    assert set(written) <= set(source), sorted(set(written.values()) - set(source.values()))
    assert all(embedded for *_, embedded in pdffonts(output))
    base14 = ("Times", "Helvetica", "Courier")
    assert not [n for n, *_ in pdffonts(output) if n.startswith(base14)]
    # and written with the glyphs' own widths (a font of the same name must not lend its widths)
    checked, off = advances_off(output, REAL / name)
    assert checked > 500 and off <= 0.01 * checked, (checked, off)
    in_source, off_in_source = advances_off(REAL / name, REAL / name)  # (the check holds on the source)
    assert off_in_source <= 0.02 * in_source


@needs_pdffonts
@pytest.mark.parametrize("name", FILES)
def test_fallback_fonts_are_of_the_class_of_the_source(name: str, tmp_path: Path) -> None:
    output, _ = translate(name, accented, tmp_path)
    source = programs(REAL / name)
    source_classes = {_pdf_fonts.classify(n) for n, *_ in pdffonts(REAL / name)}
    fallbacks = [
        (n, kind) for n, kind, _ in pdffonts(output) if n.startswith(("Times", "Helvetica", "Courier"))
    ]
    assert fallbacks, "the accented letters should need fallback fonts"
    assert {_pdf_fonts.classify(n) for n, _ in fallbacks} <= source_classes
    assert all(embedded for *_, embedded in pdffonts(output))
    # the document's own fonts stay where the text needs no new glyph
    assert set(programs(output)) & set(source)


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("rewrite", [longer, accented])
def test_nothing_is_written_below_a_legible_size_nor_over_other_text(
    name: str, rewrite: Callable[[str], str], tmp_path: Path
) -> None:
    output, report = translate(name, rewrite, tmp_path)
    warned = warned_pages(report)
    with pymupdf.open(REAL / name) as before, pymupdf.open(output) as after:
        smallest = min(
            s["size"]
            for page in before
            for b in page.get_text("dict")["blocks"]
            for line in b.get("lines", [])
            for s in line["spans"]
            if s["text"].strip()
        )
        for old, new in zip(before, after, strict=True):
            sizes = [
                s["size"]
                for b in new.get_text("dict")["blocks"]
                for line in b.get("lines", [])
                for s in line["spans"]
                if s["text"].strip()
            ]
            assert sizes and min(sizes) >= min(6.0, smallest) - 0.01, (new.number, min(sizes))
            if new.number + 1 not in warned:  # (what did not fit is said, and may run over)
                assert overlaps(new) <= overlaps(old), new.number
    if rewrite is accented:  # as long as the source: everything fits
        assert not warned, report.warnings


@pytest.mark.parametrize("name", FILES)
def test_monospace_code_is_left_as_it_is(name: str, tmp_path: Path) -> None:
    output, _ = translate(name, accented, tmp_path)
    with pymupdf.open(REAL / name) as before, pymupdf.open(output) as after:
        code = 0
        for old, new in zip(before, after, strict=True):
            text = " ".join(new.get_text().split())
            for block in old.get_text("dict")["blocks"]:
                for line in block.get("lines", []):
                    for span in line["spans"]:
                        words = " ".join(span["text"].split())
                        if _pdf_fonts.style_of(span).code and len(words) > 3 and WORD.search(words):
                            code += 1
                            assert words in text, (new.number, words)
        assert code > 3


@pytest.mark.parametrize("name", [n for n in FILES if pymupdf.open(REAL / n).get_toc()])
def test_bookmark_titles_are_translated(name: str, tmp_path: Path) -> None:
    output, _ = translate(name, accented, tmp_path)
    with pymupdf.open(REAL / name) as before, pymupdf.open(output) as after:
        old, new = before.get_toc(), after.get_toc()
        assert len(old) > 1
        assert new == [[level, accented(title), page] for level, title, page in old]
        assert any(title != accented(title) for _, title, _ in old)


def test_table_cells_and_a_running_headers_parts_are_blocks_of_their_own(tmp_path: Path) -> None:
    """Cells side by side used to be one block (written over the left cell, the right one left empty),
    and a running header's left and right parts one line."""
    source = tmp_path / "table.pdf"
    with pymupdf.open() as doc:
        page = doc.new_page()
        page.insert_text((72, 40), "Annual report", fontsize=9, fontname="tiro")
        page.insert_text((470, 40), "Chapter two", fontsize=9, fontname="tiro")
        rows = [
            ("Colour", "The colour of the house"),
            ("Size", "How big the garden is"),
            ("Owner", "The person who bought"),
        ]
        for index, (left, right) in enumerate(rows):
            page.insert_text((72, 100 + 14 * index), left, fontsize=11, fontname="helv")
            page.insert_text((150, 100 + 14 * index), right, fontsize=11, fontname="helv")
        page.insert_text((150, 142), "the car", fontsize=11, fontname="helv")  # a cell's second line
        doc.save(source)
    output = tmp_path / "out.pdf"
    translator = FakeTranslator(str.upper, keep_blank=True)
    report = PdfHandler().translate(source, output, translator, None)
    texts = [box.text for box in report.boxes]
    assert texts == [
        "Annual report",
        "Chapter two",
        "Colour",
        "Size",
        "Owner",
        "The colour of the house",
        "How big the garden is",
        "The person who bought the car",
    ]
    with pymupdf.open(output) as doc:
        words = {w[4]: pymupdf.Rect(w[:4]) for w in doc[0].get_text("words")}
        assert words["CHAPTER"].x0 > 400 and words["ANNUAL"].x0 < 100  # each part where it was
        assert words["HOUSE"].x0 > 150 and words["OWNER"].x0 < 100 and words["OWNER"].x1 < 150
        assert overlaps(doc[0]) == 0


def test_columns_split_only_at_wide_gaps() -> None:
    def line(parts: list[tuple[float, str]], y: float) -> dict[str, Any]:
        spans = [
            {
                "text": t,
                "size": 10.0,
                "flags": 0,
                "font": "Helvetica",
                "color": 0,
                "bbox": (x, y - 8, x + 5 * len(t), y + 2),
                "origin": (x, y),
            }
            for x, t in parts
        ]
        box = (parts[0][0], y - 8, parts[-1][0] + 5 * len(parts[-1][1]), y + 2)
        return {"spans": spans, "dir": (1.0, 0.0), "bbox": box}

    prose = [line([(72, "The house is red."), (162, "The garden")], 100), line([(72, "is big.")], 112)]
    assert len(_pdf_layout.columns(prose)) == 1  # a sentence gap (about 0.5 em) is no column
    header = [line([(72, "Annual report"), (470, "Chapter two")], 40)]
    assert [[s["text"] for ln in block for s in ln["spans"]] for block in _pdf_layout.columns(header)] == [
        ["Annual report"],
        ["Chapter two"],
    ]


def test_inline_bold_and_code_stay_inside_a_paragraph(tmp_path: Path) -> None:
    """A bold word and a monospace command inside a sentence used to be flattened into the paragraph's
    font; now the bold word is translated in bold, the command is kept in monospace, unchanged."""
    source = tmp_path / "inline.pdf"
    with pymupdf.open() as doc:
        page = doc.new_page()
        page.insert_htmlbox(
            pymupdf.Rect(72, 72, 500, 200),
            "<p>Always <b>check</b> the house, then run <code>make install</code> in the garden.</p>",
            css="* {font-family: serif; font-size: 12px}",
        )
        doc.save(source)
    output = tmp_path / "out.pdf"
    translator = FakeTranslator(str.upper, keep_blank=True)
    report = PdfHandler().translate(source, output, translator, None)
    sent = translator.calls[0][0]
    # the report says what the page reads, without placeholders (characters are counted on it)
    assert report.extracted_text == "Always check the house, then run make install in the garden."
    assert report.translated_text == "ALWAYS CHECK THE HOUSE, THEN RUN make install IN THE GARDEN."
    assert report.characters == len(report.extracted_text)
    assert report.boxes[0].translation == report.translated_text
    assert re.fullmatch(r"Always <(\d+)>check</\1> the house, then run <(\d+)/> in the garden\.", sent), sent
    with pymupdf.open(output) as doc:
        spans = [
            s for b in doc[0].get_text("dict")["blocks"] for line in b.get("lines", []) for s in line["spans"]
        ]
    by_text = {s["text"].strip(): s for s in spans if s["text"].strip()}
    bold = next(s for t, s in by_text.items() if "CHECK" in t)
    assert _pdf_fonts.style_of(bold).bold and "ALWAYS" not in bold["text"]
    code = next(s for t, s in by_text.items() if "make install" in t)
    assert _pdf_fonts.style_of(code).code and code["text"].strip() == "make install"
    plain = next(s for t, s in by_text.items() if "THE HOUSE" in t)
    assert not _pdf_fonts.style_of(plain).bold and not _pdf_fonts.style_of(plain).code


def test_runs_put_back_code_the_translation_lost() -> None:
    style = _pdf_fonts.TextStyle(size=10, family="Times")
    code = _pdf_fonts.TextStyle(size=9, family="monospace")
    block = _pdf_layout.Block(
        0,
        pymupdf.Rect(0, 0, 200, 40),
        "Run <1/> now",
        style,
        tags={1: _pdf_layout.Inline(True, "ls -l", code)},
    )
    assert _pdf_text.plain_text(block, "Ejecute <1/> ahora") == "Ejecute ls -l ahora"
    assert _pdf_text.plain_text(block, "Ejecute ahora") == "Ejecute ahora ls -l"
    runs = _pdf_text.runs_of(block, "Ejecute <1/> ahora")
    assert [(t, s.family, s.size) for t, s in runs] == [
        ("Ejecute ", "Times", 10),
        ("ls -l", "monospace", 10),
        (" ahora", "Times", 10),
    ]


def test_turned_text_that_does_not_fit_at_a_legible_size_is_still_written() -> None:
    """``insert_htmlbox`` writes nothing when the text does not fit at its smallest scale: a turned block
    is tried at the legible size first, then smaller rather than lost."""
    with pymupdf.open() as doc:
        page = doc.new_page()
        block = _pdf_layout.Block(
            0, pymupdf.Rect(100, 100, 115, 200), "x", _pdf_fonts.TextStyle(size=12), rotate=90
        )
        text = "A long translation that never fits in this narrow turned box"
        scale = _pdf_document.draw_turned(page, block, text, rtl=False)
        assert 0 < scale < 0.7 and " ".join(page.get_text().replace("\ufb01", "fi").split()) == text


def test_table_of_contents_entries_stay_lines_of_their_own() -> None:
    """Entries of a table of contents fill their lines (dot leaders up to the page number): each ends its
    paragraph, even with the page number in another look (a link's colour: a placeholder)."""
    lines = [
        ("1 Introduction . . . . . . . . 3", 400.0),
        ("2 Usage . . . . . . . . <1>5</1>", 400.0),
        ("3 More", 400.0),
    ]
    assert (
        _pdf_layout.join_lines(lines, 400)
        == "1 Introduction . . . . . . . . 3\n2 Usage . . . . . . . . <1>5</1>\n3 More"
    )
    assert (
        _pdf_layout.join_lines([("The value is 3.", 400.0), ("Next", 400.0)], 400) == "The value is 3. Next"
    )


def test_formulas_and_inline_math_are_left_as_they_are() -> None:
    """Text in mathematical fonts (TeX's CMMI, CMSY, CMEX...) is a formula's: a displayed formula is left as
    it is, inline math goes to the translator as a placeholder and comes back unchanged."""

    def span(text: str, font: str, x: float) -> dict[str, Any]:
        return {
            "text": text,
            "size": 10.0,
            "flags": 0,
            "font": font,
            "color": 0,
            "bbox": (x, 92, x + 5 * len(text), 102),
            "origin": (x, 100),
        }

    def line(*spans: dict[str, Any]) -> dict[str, Any]:
        return {"spans": list(spans), "dir": (1.0, 0.0), "bbox": (72, 92, 300, 102)}

    page = pymupdf.Rect(0, 0, 595, 842)
    assert _pdf_fonts.is_math_font("ABCDEF+CMMI10") and _pdf_fonts.is_math_font("CMEX10")
    assert not _pdf_fonts.is_math_font("CMR10") and not _pdf_fonts.is_math_font("NimbusRomNo9L-Regu")
    formula = line(span("CRC", "CMR10", 72), span("u", "CMMI7", 90), span("(M, v) =", "CMMI10", 95))
    assert _pdf_layout.block_of(0, [formula], page) == "code"
    prose = line(
        span("The value of ", "CMR10", 72), span("v", "CMMI10", 140), span(" is known here.", "CMR10", 146)
    )
    block = _pdf_layout.block_of(0, [prose], page)
    assert isinstance(block, _pdf_layout.Block)
    assert block.text == "The value of <1/> is known here." and block.tags[1].text == "v"
    assert _pdf_text.plain_text(block, "El valor de <1/> es conocido.") == "El valor de v es conocido."


PROSE = (
    "The house stands at the end of the road, and the garden behind it is large and green; the owner "
    "walks there every morning before the sun is high, and the neighbours say that the roses are the "
    "finest in the valley, though nobody has ever seen him water them or cut them back in the autumn."
)


def rows(page: pymupdf.Page) -> list[tuple[float, float, float]]:
    """The page's lines of words as (baseline, left edge, right edge), top to bottom (words on one
    baseline, whatever the gaps between them, are one line)."""
    found: dict[int, list[float]] = {}
    for x0, _, x1, y1, *_ in page.get_text("words"):
        row = found.setdefault(round(y1), [x0, x1])
        row[0], row[1] = min(row[0], x0), max(row[1], x1)
    return [(y, x0, x1) for y, (x0, x1) in sorted(found.items())]


def test_justified_paragraphs_come_back_justified(tmp_path: Path) -> None:
    """A justified paragraph used to come back left-aligned: now every line of the translation but the
    last ends at the paragraph's right edge, as in the source; a left-aligned one stays ragged."""
    source = tmp_path / "justified.pdf"
    with pymupdf.open() as doc:
        page = doc.new_page()
        justify, left = pymupdf.Rect(72, 72, 300, 300), pymupdf.Rect(72, 400, 300, 600)
        page.insert_textbox(justify, PROSE, fontsize=11, fontname="tiro", align=pymupdf.TEXT_ALIGN_JUSTIFY)
        page.insert_textbox(left, PROSE, fontsize=11, fontname="tiro", align=pymupdf.TEXT_ALIGN_LEFT)
        source_lines = [x1 for y, _, x1 in rows(page) if y < 350]
        doc.save(source)
    assert len(source_lines) >= 4 and all(abs(x1 - 300) < 1.0 for x1 in source_lines[:-1])
    with pymupdf.open(source) as doc:
        work = _pdf_layout.page_blocks(doc[0])
    assert [block.justified for block in work.blocks] == [True, False]
    output = tmp_path / "out.pdf"
    PdfHandler().translate(source, output, FakeTranslator(longer, keep_blank=True), None)
    with pymupdf.open(output) as doc:
        after = rows(doc[0])
        assert overlaps(doc[0]) == 0
    upper = [(x0, x1) for y, x0, x1 in after if y < 350]
    lower = [(x0, x1) for y, x0, x1 in after if y > 350]
    assert len(upper) >= 4 and len(lower) >= 4
    assert all(abs(x0 - 72) < 1.0 and abs(x1 - 300) < 1.0 for x0, x1 in upper[:-1]), upper
    assert upper[-1][1] < 290  # the last line is not stretched
    assert max(x1 for _, x1 in lower[:-1]) - min(x1 for _, x1 in lower[:-1]) > 10, lower  # still ragged


def test_justified_blocks_are_found_by_both_edges() -> None:
    full = [(72.0, 0.0, 300.0, 10.0), (72.0, 12.0, 299.6, 22.0), (72.0, 24.0, 300.0, 34.0)]
    assert _pdf_layout.justified([*full, (72.0, 36.0, 150.0, 46.0)], 11)
    assert not _pdf_layout.justified(full[:2], 11)  # two lines tell nothing
    ragged = [(72.0, 0.0, 300.0, 10.0), (72.0, 12.0, 280.0, 22.0), (72.0, 24.0, 293.0, 34.0)]
    assert not _pdf_layout.justified([*ragged, (72.0, 36.0, 150.0, 46.0)], 11)
    right = [(90.0, 0.0, 300.0, 10.0), (72.0, 12.0, 300.0, 22.0), (120.0, 24.0, 300.0, 34.0)]
    assert not _pdf_layout.justified([*right, (200.0, 36.0, 300.0, 46.0)], 11)  # flush right
    indented = [(90.0, 0.0, 300.0, 10.0), *full[1:], (72.0, 36.0, 150.0, 46.0)]
    assert _pdf_layout.justified(indented, 11)  # a paragraph's first line may be indented


def test_a_justified_paragraph_ending_in_a_long_line_ends_there() -> None:
    """A justified block's line that stops short of the right edge but is too long to be taken for a
    paragraph's end by its length alone ends a paragraph all the same (and the next one may be indented);
    ragged text whose right edge one or two lines touch by chance is not justified."""
    full = [(72.0, 12.0 * i, 300.0, 12.0 * i + 10) for i in range(5)]
    two = [*full[:2], (72.0, 24.0, 260.0, 34.0), (84.0, 36.0, 300.0, 46.0), *full[4:]]
    two.append((72.0, 60.0, 150.0, 70.0))
    assert _pdf_layout.paragraph_ends(two, 11) == frozenset({2})
    assert _pdf_layout.paragraph_ends(full, 11) == frozenset()
    ragged = [(72.0, 0.0, 300.0, 10.0), (72.0, 12.0, 299.5, 22.0), (72.0, 24.0, 270.0, 34.0)]
    ragged += [(72.0, 36.0, 281.0, 46.0), (72.0, 48.0, 262.0, 58.0), (72.0, 60.0, 150.0, 70.0)]
    assert _pdf_layout.paragraph_ends(ragged, 11) is None  # two lines flush, three not
    texts = [(f"line {i}", box[2] - box[0]) for i, box in enumerate(two)]
    assert _pdf_layout.join_lines(texts, 228, frozenset({2})) == "line 0 line 1 line 2\nline 3 line 4 line 5"


def test_a_two_line_paragraph_among_justified_ones_is_justified(tmp_path: Path) -> None:
    """Two lines tell nothing by themselves, so a justified column's two-line paragraphs used to come back
    ragged among justified ones. Now a block of two lines whose edges are those of a justified block on the
    page, its first line flush to both, is justified too; the same two lines in another column, or on a
    page with no justified block, are not."""
    short = "The owner walks in the garden every morning and every evening of the long year."

    def page_with(path: Path, *, justify_neighbour: bool, column: pymupdf.Rect) -> Path:
        with pymupdf.open() as doc:
            page = doc.new_page()
            align = pymupdf.TEXT_ALIGN_JUSTIFY if justify_neighbour else pymupdf.TEXT_ALIGN_LEFT
            page.insert_textbox(
                pymupdf.Rect(72, 72, 300, 300), PROSE, fontsize=11, fontname="tiro", align=align
            )
            page.insert_textbox(column, short, fontsize=11, fontname="tiro", align=pymupdf.TEXT_ALIGN_JUSTIFY)
            doc.save(path)
        return path

    same_column = pymupdf.Rect(72, 320, 300, 400)
    source = page_with(tmp_path / "column.pdf", justify_neighbour=True, column=same_column)
    with pymupdf.open(source) as doc:
        before = [(x0, x1) for y, x0, x1 in rows(doc[0]) if y > 310]
        work = _pdf_layout.page_blocks(doc[0])
    assert len(before) == 2 and abs(before[0][1] - 300) < 1.0 and before[1][1] < 250, before
    assert [(block.lines, block.justified) for block in work.blocks] == [
        (work.blocks[0].lines, True),
        (2, True),
    ]
    elsewhere = page_with(
        tmp_path / "other.pdf", justify_neighbour=True, column=pymupdf.Rect(320, 320, 540, 400)
    )
    alone = page_with(tmp_path / "alone.pdf", justify_neighbour=False, column=same_column)
    for path in (elsewhere, alone):
        with pymupdf.open(path) as doc:
            assert [block.justified for block in _pdf_layout.page_blocks(doc[0]).blocks][1:] == [False], path
    output = tmp_path / "out.pdf"
    PdfHandler().translate(
        source, output, FakeTranslator(lambda t: longer(f"{t} {t}"), keep_blank=True), None
    )
    with pymupdf.open(output) as doc:
        lower = [(x0, x1) for y, x0, x1 in rows(doc[0]) if y > 310]
        assert overlaps(doc[0]) == 0
    assert len(lower) >= 3, lower
    assert all(abs(x0 - 72) < 1.0 and abs(x1 - 300) < 1.0 for x0, x1 in lower[:-1]), lower
    assert lower[-1][1] < 290  # the last line is not stretched


def test_two_justified_paragraphs_in_one_block_stay_two(tmp_path: Path) -> None:
    """Two justified paragraphs MuPDF reads as one block, the first ending in a long line: the translation
    keeps them apart (the first one's last line not stretched) and both are justified."""
    source = tmp_path / "two.pdf"
    with pymupdf.open() as doc:
        page = doc.new_page()
        box = pymupdf.Rect(72, 72, 300, 400)
        text = f"{PROSE}\n{PROSE}"
        page.insert_textbox(box, text, fontsize=11, fontname="tiro", align=pymupdf.TEXT_ALIGN_JUSTIFY)
        doc.save(source)
    with pymupdf.open(source) as doc:
        [block] = _pdf_layout.page_blocks(doc[0]).blocks
    assert block.justified and block.text.count("\n") == 1, block.text
    output = tmp_path / "out.pdf"
    PdfHandler().translate(source, output, FakeTranslator(keep_blank=True), None)
    with pymupdf.open(output) as doc:
        after = rows(doc[0])
        assert overlaps(doc[0]) == 0
    ragged = [x1 for _, _, x1 in after if x1 < 299.0]
    assert len(after) >= 8 and len(ragged) == 2, after  # each paragraph's last line, and only those


def test_superscripts_stay_raised_and_small(tmp_path: Path) -> None:
    """A footnote mark (a smaller span raised above the line, as Word writes one) used to be written on
    the baseline at the line's size; now it is raised, at its own size, clear of the next line."""
    source = tmp_path / "footnote.pdf"
    with pymupdf.open() as doc:
        page = doc.new_page()
        writer = pymupdf.TextWriter(page.rect)
        font = pymupdf.Font("tiro")
        writer.append((72, 400), "The house is red", font=font, fontsize=11)
        writer.append((writer.last_point.x, 396), "1", font=font, fontsize=7)
        rest = " and the garden is big and the car is blue and the road is long."
        writer.append((writer.last_point.x, 400), rest, font=font, fontsize=11)
        writer.append((72, 413), "Another line of the same paragraph is here.", font=font, fontsize=11)
        writer.write_text(page)
        doc.save(source)
    output = tmp_path / "out.pdf"
    translator = FakeTranslator(str.upper, keep_blank=True)
    PdfHandler().translate(source, output, translator, None)
    assert re.search(r"RED<(\d+)>1</\1> AND", str.upper(translator.calls[0][0]))
    with pymupdf.open(output) as doc:
        lines = [line for b in doc[0].get_text("dict")["blocks"] for line in b.get("lines", [])]
    spans = [(line, s) for line in lines for s in line["spans"] if s["text"].strip()]
    mark = next(s for _, s in spans if s["text"].strip() == "1")
    body = next(s for _, s in spans if "RED" in s["text"])
    assert mark["size"] < 0.8 * body["size"]
    assert mark["origin"][1] < body["origin"][1] - 0.2 * body["size"]  # raised
    assert mark["bbox"][0] >= body["bbox"][2] - 0.5  # after "RED", not over it
    below = [s for _, s in spans if s["origin"][1] > body["origin"][1] + 1]
    assert below and not any(pymupdf.Rect(mark["bbox"]).intersects(s["bbox"]) for s in below)


def test_subscripts_are_runs_of_their_own_lowered() -> None:
    """A smaller span below the baseline (the 2 of H2O) is a run of its own that keeps its size and its
    lowered baseline; a span of the line's size on the baseline is not."""

    def span(text: str, x: float, size: float, y: float) -> dict[str, Any]:
        return {
            "text": text,
            "size": size,
            "flags": 4,
            "font": "Times-Roman",
            "color": 0,
            "bbox": (x, y - 0.8 * size, x + 0.5 * size * len(text), y + 0.2 * size),
            "origin": (x, y),
        }

    line = {
        "spans": [
            span("Water is H", 72, 10, 100),
            span("2", 120, 6, 102.5),
            span("O at home.", 123, 10, 100),
        ],
        "dir": (1.0, 0.0),
        "bbox": (72, 92, 300, 103),
    }
    block = _pdf_layout.block_of(0, [line], pymupdf.Rect(0, 0, 595, 842))
    assert isinstance(block, _pdf_layout.Block)
    assert block.text == "Water is H<1>2</1>O at home."
    look = block.tags[1].style
    assert look.ratio == 0.6 and look.rise == -0.25
    runs = _pdf_text.runs_of(block, "El agua es H<1>2</1>O en casa.")
    assert [(text, style.rise) for text, style in runs] == [
        ("El agua es H", 0.0),
        ("2", -0.25),
        ("O en casa.", 0.0),
    ]
    laid = _pdf_text.lay_out(block, "El agua es H<1>2</1>O en casa.")
    (pieces,) = laid.pieces
    assert [(text, font.ratio, font.rise) for _, text, font, _ in pieces] == [
        ("El agua es H", 1.0, 0.0),
        ("2", 0.6, -0.25),
        ("O en casa.", 1.0, 0.0),
    ]
