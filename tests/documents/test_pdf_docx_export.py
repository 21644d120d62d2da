# mypy: disallow-untyped-calls=False
# (PyMuPDF's and python-docx's functions carry no annotations)
"""The DOCX export of a translated PDF keeps the document's structure (issue 11, item 2): headings as Word
headings, tables as Word tables, list items, columns in reading order, running headers in the section's
header (not in the text), a page break between pages, inline bold and monospace, right-to-left targets;
LibreOffice opens it. PDFs built here with PyMuPDF, and real ones (tests/data/real/pdf/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pymupdf
import pytest
from growth import assert_linear
from office_support import libreoffice_elements, needs_libreoffice

from dragoman.documents import _pdf_docx_export as export
from dragoman.documents._export import Paragraph, Table
from dragoman.documents._pdf_fonts import TextStyle
from dragoman.documents._pdf_layout import Block, PageWork
from dragoman.documents.pdf import PdfHandler
from dragoman.testing.fakes import FakeTranslator

docx = pytest.importorskip("docx")

REAL = Path(__file__).resolve().parents[1] / "data" / "real" / "pdf"
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
LEFT = "The left column starts here. " * 8
RIGHT = "The right column comes second. " * 8
ITEMS = ["The first item", "The second item", "The third item"]
RUNNING = "Field Guide to Houses"


def build(path: Path, pages: int = 2) -> Path:
    """Pages with a running header (left and right parts), a heading, two columns, a second heading, a 3x3
    table, a bulleted list, a line with a bold word and a monospace word, and a page number."""
    doc = pymupdf.open()
    for number in range(pages):
        page = doc.new_page(width=595, height=842)
        page.insert_text((72, 40), RUNNING, fontsize=9, fontname="helv")
        page.insert_text((480, 40), f"Chapter {number + 1}", fontsize=9, fontname="helv")
        page.insert_text((72, 100), f"Houses and gardens {number + 1}", fontsize=20, fontname="hebo")
        page.insert_textbox(pymupdf.Rect(72, 130, 285, 330), LEFT, fontsize=10, fontname="helv")
        page.insert_textbox(pymupdf.Rect(310, 130, 523, 330), RIGHT, fontsize=10, fontname="helv")
        page.insert_text((72, 360), "A small table", fontsize=14, fontname="hebo")
        for row in range(3):
            for column in range(3):
                page.insert_text(
                    (80 + 150 * column, 390 + 20 * row), f"cell {row}{column}", fontsize=10, fontname="helv"
                )
        for index, item in enumerate(ITEMS):
            page.insert_text((80, 470 + 16 * index), f"\u2022 {item}", fontsize=10, fontname="helv")
        x = 72.0
        for text, font in (
            ("Run the ", "helv"),
            ("main", "hebo"),
            (" program with ", "helv"),
            ("make", "cour"),
        ):
            page.insert_text((x, 540), text, fontsize=10, fontname=font)
            x += pymupdf.get_text_length(text, fontname=font, fontsize=10)
        page.insert_text((72, 556), " today.", fontsize=10, fontname="helv")
        page.insert_text((295, 810), str(number + 1), fontsize=9, fontname="helv")
    doc.save(path)
    return path


def translated(source: Path, target: str = "spa_Latn") -> tuple[Any, Any]:
    """The DOCX export of ``source`` translated (upper-cased) into ``target``, and the report."""
    report = PdfHandler().translate(
        source, source.with_name("out.pdf"), FakeTranslator(target=target, keep_blank=True), None
    )
    return docx.Document(str(report.extra_outputs["docx"])), report


def body(document: Any) -> list[tuple[str, Any]]:
    """The body in order: ("p", paragraph) and ("table", table)."""
    out: list[tuple[str, Any]] = []
    for element in document.element.body.iterchildren():
        if element.tag == W + "p":
            out.append(("p", docx.text.paragraph.Paragraph(element, document)))
        elif element.tag == W + "tbl":
            out.append(("table", docx.table.Table(element, document)))
    return out


def texts(document: Any) -> list[str]:
    return [p.text for kind, p in body(document) if kind == "p" and p.text.strip()]


def index_of(paragraphs: list[str], start: str) -> int:
    return next(i for i, text in enumerate(paragraphs) if text.startswith(start))


def test_headings_tables_lists_and_columns_in_reading_order(tmp_path: Path) -> None:
    document, report = translated(build(tmp_path / "guide.pdf"))
    paragraphs = [p for kind, p in body(document) if kind == "p" and p.text.strip()]
    styles = {p.text: p.style.name for p in paragraphs}
    assert styles["HOUSES AND GARDENS 1"] == "Heading 1" and styles["HOUSES AND GARDENS 2"] == "Heading 1"
    assert styles["A SMALL TABLE"] == "Heading 2"
    assert {styles[item.upper()] for item in ITEMS} == {"List Bullet"}  # the bullet left to the style
    tables = [t for kind, t in body(document) if kind == "table"]
    assert len(tables) == 2
    for table in tables:
        assert (len(table.rows), len(table.columns)) == (3, 3)
        cells = [[cell.text for cell in row.cells] for row in table.rows]
        assert cells == [[f"CELL {r}{c}" for c in range(3)] for r in range(3)]
    order = [p.text for p in paragraphs]
    first_page = order[: index_of(order, "HOUSES AND GARDENS 2")]
    assert (
        index_of(first_page, "HOUSES AND GARDENS 1")
        < index_of(first_page, "THE LEFT COLUMN")
        < index_of(first_page, "THE RIGHT COLUMN")
        < index_of(first_page, "A SMALL TABLE")
        < index_of(first_page, ITEMS[0].upper())
    )
    # the table comes after its heading, before the list
    kinds = [kind if kind == "table" else p.text for kind, p in body(document)]
    assert kinds.index("A SMALL TABLE") < kinds.index("table") < kinds.index(ITEMS[0].upper())
    # a page break between the pages
    breaks = document.element.body.findall(f".//{W}br[@{W}type='page']")
    assert len(breaks) == 1
    assert report.extra_outputs["docx"].name == "guide.es.docx"


def test_running_header_and_page_numbers_go_to_the_section_not_the_text(tmp_path: Path) -> None:
    document, _ = translated(build(tmp_path / "guide.pdf", pages=3))
    paragraphs = texts(document)
    assert not any(RUNNING.upper() in text or text.startswith("CHAPTER") for text in paragraphs)
    assert not any(text.strip().isdigit() for text in paragraphs)  # page numbers
    [section] = document.sections
    header = "\n".join(p.text for p in section.header.paragraphs)
    assert header.count(RUNNING.upper()) == 1 and "CHAPTER" not in header  # what changes is left out
    footer = section.footer._element
    assert any(" PAGE " in f.get(W + "instr") for f in footer.iter(W + "fldSimple"))


def test_inline_bold_and_monospace_runs_are_kept(tmp_path: Path) -> None:
    document, _ = translated(build(tmp_path / "guide.pdf", pages=1))
    [paragraph] = [p for kind, p in body(document) if kind == "p" and p.text.startswith("RUN THE")]
    runs = {run.text.strip(): run for run in paragraph.runs if run.text.strip()}
    assert runs["MAIN"].bold and not runs["RUN THE"].bold
    assert runs["make"].font.name == "Courier New"  # code: kept as it is, in a monospace font


def test_right_to_left_targets_are_set_right_to_left(tmp_path: Path) -> None:
    document, _ = translated(build(tmp_path / "guide.pdf", pages=1), target="arb_Arab")
    paragraphs = [p for kind, p in body(document) if kind == "p" and p.text.strip()]
    assert paragraphs and all(p._p.find(f"{W}pPr/{W}bidi") is not None for p in paragraphs)
    [table] = [t for kind, t in body(document) if kind == "table"]
    assert table._tbl.find(f"{W}tblPr/{W}bidiVisual") is not None
    assert all(p._p.find(f"{W}pPr/{W}bidi") is not None for cell in table._cells for p in cell.paragraphs)


PROSE = (
    "The house stands at the end of the road, and the garden behind it is large and green; the owner "
    "walks there every morning before the sun is high, and the neighbours say that the roses are the "
    "finest in the valley, though nobody has ever seen him water them or cut them back in the autumn."
)


def test_justified_and_centred_paragraphs_keep_their_alignment(tmp_path: Path) -> None:
    """A justified paragraph comes back justified in Word (``w:jc both``), a centred title centred, a
    left-aligned paragraph with no alignment of its own; a justified block holding two paragraphs (the
    first one's short last line) becomes two justified Word paragraphs, so no line ending in a break is
    stretched."""
    source = tmp_path / "aligned.pdf"
    with pymupdf.open() as doc:
        page = doc.new_page(width=595, height=842)
        title = "On Houses"
        width = pymupdf.get_text_length(title, fontname="tibo", fontsize=16)
        page.insert_text(((595 - width) / 2, 60), title, fontsize=16, fontname="tibo")
        page.insert_textbox(
            pymupdf.Rect(72, 90, 300, 330),
            f"{PROSE}\nThe second paragraph is short.\n{PROSE}",
            fontsize=11,
            fontname="tiro",
            align=pymupdf.TEXT_ALIGN_JUSTIFY,
        )
        page.insert_textbox(pymupdf.Rect(72, 400, 300, 600), PROSE, fontsize=11, fontname="tiro")
        doc.save(source)
    document, _ = translated(source)
    aligned = [(p.text, p.alignment) for kind, p in body(document) if kind == "p" and p.text.strip()]
    alignment = docx.enum.text.WD_PARAGRAPH_ALIGNMENT
    center, justify = alignment.CENTER, alignment.JUSTIFY
    upper = PROSE.upper()
    assert aligned == [
        ("ON HOUSES", center),
        (upper, justify),
        ("THE SECOND PARAGRAPH IS SHORT.", justify),
        (upper, justify),
        (upper, None),
    ], aligned
    assert not document.element.body.findall(f".//{W}p/{W}pPr/{W}jc[@{W}val='both']/../..//{W}br")


@pytest.mark.slow
@needs_libreoffice
def test_libreoffice_opens_the_export_and_sees_its_structure(tmp_path: Path) -> None:
    _, report = translated(build(tmp_path / "guide.pdf"))
    found = libreoffice_elements(report.extra_outputs["docx"])
    assert found["table"] == 2 and found["tr"] == 6 and found["td"] == 18
    assert found["h1"] == 2 and found["h2"] == 2 and found["li"] == 6


def test_real_manual_keeps_headings_lists_and_leaves_out_its_running_header(tmp_path: Path) -> None:
    source = tmp_path / "bzip2.pdf"
    source.write_bytes((REAL / "bzip2-manual-p4-7.pdf").read_bytes())
    document, _ = translated(source)
    paragraphs = [p for kind, p in body(document) if kind == "p" and p.text.strip()]
    styles = {p.text: p.style.name for p in paragraphs}
    assert styles["1. INTRODUCTION"] == "Heading 1"
    assert styles["2.3. DESCRIPTION"] == "Heading 2" and styles["2.4. OPTIONS"] == "Heading 2"
    bullets = [p.text for p in paragraphs if p.style.name == "List Bullet"]
    assert "filename.bz2 BECOMES filename" in bullets and len(bullets) >= 8
    header = document.sections[0].header.paragraphs[0].text
    assert header == "HOW TO USE BZIP2" and header not in [p.text for p in paragraphs]  # pages 2 and 3's
    assert not any(p.text in {"1", "3", "4"} for p in paragraphs)  # page numbers
    breaks = document.element.body.findall(f".//{W}br[@{W}type='page']")
    assert len(breaks) == 2  # three pages


def test_real_manual_keeps_its_property_table_and_its_code(tmp_path: Path) -> None:
    source = tmp_path / "fontconfig.pdf"
    source.write_bytes((REAL / "fontconfig-user-p1-3.pdf").read_bytes())
    document, _ = translated(source)
    rows = [
        [cell.text for cell in row.cells] for kind, t in body(document) if kind == "table" for row in t.rows
    ]
    assert ["slant", "Int", "Italic, oblique or roman"] in rows  # the table is in monospace: kept as is
    assert len(rows) > 30
    [synopsis] = [
        p for kind, p in body(document) if kind == "p" and p.text.startswith("/etc/fonts/fonts.conf")
    ]
    assert "/etc/fonts/conf.d" in synopsis.text and synopsis.runs[0].font.name == "Courier New"


@pytest.mark.parametrize("name", ["fontconfig-user-p1-3.pdf", "libtasn1-p5-11.pdf"])
def test_real_manuals_have_word_headings(tmp_path: Path, name: str) -> None:
    source = tmp_path / name
    source.write_bytes((REAL / name).read_bytes())
    document, _ = translated(source)
    paragraphs = [p for kind, p in body(document) if kind == "p" and p.text.strip()]
    levels = {p.style.name for p in paragraphs if p.style.name.startswith("Heading")}
    assert levels == {"Heading 1", "Heading 2", "Heading 3"}
    assert sum(p.style.name == "Normal" for p in paragraphs) > 10


# --- the structure alone: reading order and growth -----------------------------------------------------


def block(x0: float, y0: float, x1: float, y1: float, text: str, size: float = 10.0, lines: int = 1) -> Block:
    return Block(
        page=0,
        rect=pymupdf.Rect(x0, y0, x1, y1),
        text=text,
        style=TextStyle(size=size),
        lines=lines,
        line_rects=[(x0, y0, x1, y0 + size * 1.2)],
    )


def page(blocks: list[Block], height: float = 842.0) -> PageWork:
    return PageWork(number=0, blocks=blocks, page_rect=pymupdf.Rect(0, 0, 595, height))


def test_two_columns_whose_paragraphs_line_up_are_read_column_by_column() -> None:
    # paragraphs of the left and right columns start on the same lines: columns, not a table
    blocks = []
    for row in range(4):
        y = 100 + 80 * row
        blocks.append(block(72, y, 285, y + 60, f"left {row}", lines=5))
        blocks.append(block(310, y, 523, y + 60, f"right {row}", lines=5))
    result = export.outline([page(blocks)], [b.text for b in blocks])
    assert not any(isinstance(item, Table) for item in result.items)
    assert [item.text for item in result.items if isinstance(item, Paragraph)] == [
        *(f"left {row}" for row in range(4)),
        *(f"right {row}" for row in range(4)),
    ]


def test_a_table_missing_a_cell_keeps_its_grid() -> None:
    blocks = [
        block(80, 100, 120, 112, "a"),
        block(230, 100, 270, 112, "b"),
        block(380, 100, 420, 112, "c"),
        block(80, 120, 120, 132, "d"),
        block(380, 120, 420, 132, "f"),
    ]
    [table] = export.outline([page(blocks)], [b.text for b in blocks]).items
    assert isinstance(table, Table)
    assert [["".join(p.text for p in cell) for cell in row] for row in table.rows] == [
        ["a", "b", "c"],
        ["d", "", "f"],
    ]


def _works(kind: str, n: int) -> tuple[list[PageWork], list[str]]:
    blocks: list[Block] = []
    count = max(3, n // 4)
    if kind == "grid":  # a table of many rows (one page, tall)
        for index in range(count):
            row, column = divmod(index, 3)
            blocks.append(block(80 + 150 * column, 20 * row, 120 + 150 * column, 20 * row + 12, "cell"))
    elif kind == "staircase":  # every block below and right of the one before
        blocks += [block(i * 0.5, i * 14, i * 0.5 + 40, i * 14 + 12, "step") for i in range(count)]
    elif kind == "columns":  # two columns of many paragraphs
        for index in range(count):
            x = 72 if index % 2 else 310
            y = (index // 2) * 30 + (index % 2) * 7
            blocks.append(block(x, y, x + 200, y + 25, "text " * 10, lines=2))
    else:  # nested: columns in bands in columns... (an XY cut as deep as it goes)
        for index in range(count):
            x, y = (index * 37) % 500, (index * 53) % (count * 10)
            blocks.append(block(x, y, x + 30, y + 12, "dot"))
    height = max(b.rect.y1 for b in blocks) + 100
    return [page(blocks, height)], [b.text for b in blocks]


@pytest.mark.slow  # about 15 s of growth-ratio measurements in all (CI runs them)
@pytest.mark.parametrize("kind", ["grid", "staircase", "columns", "scattered"])
def test_the_structure_is_found_in_linear_time(kind: str) -> None:
    def work(text: str) -> object:
        works, translations = _works(kind, len(text))
        return export.outline(works, translations)

    assert_linear(work, {kind: lambda n: "x" * n}, 8000)


def test_a_heading_numbered_on_every_page_and_a_table_at_the_bottom_stay_in_the_text() -> None:
    # "Step 1", "Step 2" set large at the top of each page are headings, not a running header; a table's
    # numbers in the bottom margin are no page numbers
    works = []
    for number in range(3):
        blocks = [
            block(72, 40, 200, 62, f"Step {number + 1}", size=18),
            block(72, 100, 500, 160, "Body text " * 20, lines=5),
        ]
        blocks += [
            block(80 + 100 * c, 770 + 14 * r, 110 + 100 * c, 782 + 14 * r, str(r * 3 + c))
            for r in range(2)
            for c in range(3)
        ]
        works.append(PageWork(number=number, blocks=blocks, page_rect=pymupdf.Rect(0, 0, 595, 842)))
    translations = [b.text for w in works for b in w.blocks]
    result = export.outline(works, translations)
    headings = [item.text for item in result.items if isinstance(item, Paragraph) and item.heading]
    assert headings == ["Step 1", "Step 2", "Step 3"] and not result.header
    tables = [item for item in result.items if isinstance(item, Table)]
    assert len(tables) == 3 and all(len(t.rows) == 2 and len(t.rows[0]) == 3 for t in tables)
    assert not result.page_numbers
