# mypy: disallow-untyped-calls=False
# (PyMuPDF's functions carry no annotations)
"""OCR keeps the layout (issue 11, item 5): a form's labels and values, a table's cells and two columns of
text come back as separate blocks, each translated on its own and drawn back in its own box.

Images are drawn here with DejaVu Sans and read by the real Tesseract. Before the fix, the values of a form
were one paragraph ("John Smith 12 Oak Street Springfield ...") and its labels two, each row of an unruled
table was one sentence ("Item Quantity Price Total"), a ruled table lost all but two of its cells, and two
columns were read across as one paragraph.
"""

from __future__ import annotations

import io
import math
import re
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pymupdf
import pytest
from fake_backend_support import fake_engine, shout
from growth import assert_linear
from PIL import Image, ImageDraw, ImageFont

from dragoman.documents import _ocr_words, _tesseract, images, ocr
from dragoman.documents.pdf import PdfHandler
from dragoman.pipelines import translate_file as files
from dragoman.testing.fakes import FakeTranslator

DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None, reason="apt-get install tesseract-ocr"
)
needs_font = pytest.mark.skipif(not DEJAVU.is_file(), reason="apt-get install fonts-dejavu-core")

FORM = [
    ("Name:", "John Smith"),
    ("Address:", "12 Oak Street"),
    ("City:", "Springfield"),
    ("Phone:", "555 0100"),
    ("Email:", "john@example.com"),
]
TABLE = [
    ["Item", "Quantity", "Price", "Total"],
    ["Apples", "Three", "Cheap", "Ninety"],
    ["Bread", "Seven", "Costly", "Twelve"],
]
COLUMN_A = ["The river runs through the old", "town and under seven bridges", "before it reaches the sea."]
COLUMN_B = ["Markets open early on Sunday", "and sell fruit, bread and fish", "to visitors from the coast."]

Box = tuple[int, int, int, int]


def font(px: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(DEJAVU), px)


def form_image() -> tuple[Image.Image, dict[str, Box]]:
    """Five rows of ``Label:`` and its value a few ems to the right (not in a column), 60 px apart."""
    image = Image.new("RGB", (1300, 400), "white")
    draw, face = ImageDraw.Draw(image), font(32)
    boxes: dict[str, Box] = {}
    for row, (label, value) in enumerate(FORM):
        y = 30 + 60 * row
        boxes[label] = draw.textbbox((60, y), label, font=face)  # type: ignore[assignment]
        x = boxes[label][2] + 100
        draw.text((60, y), label, font=face, fill="black")
        draw.text((x, y), value, font=face, fill="black")
        boxes[value] = draw.textbbox((x, y), value, font=face)  # type: ignore[assignment]
    return image, boxes


def table_image(ruled: bool) -> tuple[Image.Image, dict[str, Box]]:
    """Three rows of four cells, with or without ruling lines around every cell."""
    image = Image.new("RGB", (1400, 520), "white")
    draw, face = ImageDraw.Draw(image), font(30)
    boxes: dict[str, Box] = {}
    for row, cells in enumerate(TABLE):
        for column, text in enumerate(cells):
            at = (80 + 330 * column, 60 + 150 * row)
            draw.text(at, text, font=face, fill="black")
            boxes[text] = draw.textbbox(at, text, font=face)  # type: ignore[assignment]
    if ruled:
        for row in range(4):
            draw.line((40, 30 + 150 * row, 1360, 30 + 150 * row), fill="black", width=3)
        for column in range(5):
            draw.line((40 + 330 * column, 30, 40 + 330 * column, 480), fill="black", width=3)
    return image, boxes


def columns_image() -> Image.Image:
    image = Image.new("RGB", (1500, 300), "white")
    draw, face = ImageDraw.Draw(image), font(28)
    for number, (a, b) in enumerate(zip(COLUMN_A, COLUMN_B, strict=True)):
        draw.text((60, 60 + 45 * number), a, font=face, fill="black")
        draw.text((800, 60 + 45 * number), b, font=face, fill="black")
    return image


def letters(text: str) -> str:
    return re.sub(r"[^0-9a-z]", "", text.lower())


def inside(point: tuple[float, float], box: Sequence[float], margin: float) -> bool:
    return box[0] - margin <= point[0] <= box[2] + margin and box[1] - margin <= point[1] <= box[3] + margin


def centre(box: Sequence[float]) -> tuple[float, float]:
    return ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)


@needs_tesseract
@needs_font
def test_form_labels_and_values_are_separate_blocks_in_row_order() -> None:
    image, boxes = form_image()
    blocks = ocr.ocr_image(image, "eng")
    found = [letters(b.text) for b in blocks]
    wanted = [letters(text) for pair in FORM for text in pair]
    assert found == wanted, [b.text for b in blocks]  # row by row: each label, then its value
    for block in blocks:  # each block sits on its own label or value
        text = next(t for pair in FORM for t in pair if letters(t) == letters(block.text))
        assert inside(centre(block.bbox), boxes[text], 4), (block.text, block.bbox, boxes[text])


@needs_tesseract
@needs_font
@pytest.mark.parametrize("ruled", [False, True], ids=["unruled", "ruled"])
def test_table_cells_are_separate_blocks_in_row_order(ruled: bool) -> None:
    image, boxes = table_image(ruled)
    blocks = ocr.ocr_image(image, "eng")
    assert [b.text for b in blocks] == [cell for row in TABLE for cell in row]
    for block in blocks:
        assert inside(centre(block.bbox), boxes[block.text], 4)


@needs_tesseract
@needs_font
def test_two_columns_are_read_one_after_the_other() -> None:
    blocks = ocr.ocr_image(columns_image(), "eng")
    assert [b.text for b in blocks] == [" ".join(COLUMN_A), " ".join(COLUMN_B)]
    assert blocks[0].bbox[2] < 700 < blocks[1].bbox[0]
    assert blocks[0].lines == tuple(COLUMN_A)


@needs_tesseract
@needs_font
def test_each_cell_translation_is_drawn_in_its_own_cell(tmp_path: Path) -> None:
    image, boxes = table_image(ruled=True)
    source, rendered = tmp_path / "table.png", tmp_path / "table.es.png"
    image.save(source)
    translator = FakeTranslator(str.upper)
    report = images.ocr_and_translate(source, translator, render_to=rendered)
    assert translator.calls == [[cell for row in TABLE for cell in row]]  # one call, each cell on its own
    assert [(b.text, b.translation) for b in report.boxes] == [(c, c.upper()) for row in TABLE for c in row]
    again = ocr.ocr_image(Image.open(rendered), "eng")
    read = {letters(b.text): b for b in again}
    for cell in (c for row in TABLE for c in row):
        block = read.get(letters(cell.upper()))
        assert block is not None, (cell, [b.text for b in again])
        assert inside(centre(block.bbox), boxes[cell], 8), (cell, block.bbox, boxes[cell])
        assert cell not in {b.text for b in again}  # the original is painted over


@needs_tesseract
@needs_font
def test_scanned_pdf_table_cells_are_written_back_in_their_cells(tmp_path: Path) -> None:
    image, boxes = table_image(ruled=False)
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    doc = pymupdf.open()
    page = doc.new_page(width=image.width * 72 / 150, height=image.height * 72 / 150)  # a 150 dpi scan
    page.insert_image(page.rect, stream=buffer.getvalue())
    doc.save(tmp_path / "scan.pdf")
    output = tmp_path / "scan.es.pdf"
    report = PdfHandler().translate(tmp_path / "scan.pdf", output, FakeTranslator(str.upper), None)
    cells = [cell for row in TABLE for cell in row]
    assert [b.text for b in report.boxes] == cells
    words = pymupdf.open(output)[0].get_text("words")
    scale = 72 / 150
    for cell in cells:
        found = [w for w in words if letters(str(w[4])) == letters(cell.upper())]
        assert len(found) == 1, (cell, [w[4] for w in words])
        cell_box = [v * scale for v in boxes[cell]]
        assert inside(centre(found[0][:4]), cell_box, 4), (cell, found[0][:4], cell_box)


# --- growth: linear in the words and the pixels -------------------------------------------------------------

_HEADER = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext"


def _row(block: int, par: int, line: int, word: int, left: int, top: int, width: int, text: str) -> str:
    return f"5\t1\t{block}\t{par}\t{line}\t{word}\t{left}\t{top}\t{width}\t20\t90\t{text}"


def _table_tsv(n: int) -> str:
    """About ``n`` characters of TSV: one Tesseract paragraph whose lines are table rows of 4 cells."""
    rows, line = [_HEADER], 0
    while sum(len(r) for r in rows) < n:
        line += 1
        rows += [_row(1, 1, line, c, 100 + 300 * c, 40 * line, 60, "cell") for c in range(4)]
    return "\n".join(rows)


def _narrow_table_tsv(n: int) -> str:
    """About ``n`` characters of TSV: one paragraph of table rows of 40 cells 20 px apart (under the line
    cut, over the gutter width): every gap a gutter."""
    rows, line = [_HEADER], 0
    while sum(len(r) for r in rows) < n:
        line += 1
        rows += [_row(1, 1, line, c, 100 + 80 * c, 40 * line, 60, "cell") for c in range(40)]
    return "\n".join(rows)


def _wide_line_tsv(n: int) -> str:
    """Two lines of many pieces each (every word far from the next): the sweep between lines."""
    rows, word = [_HEADER], 0
    while sum(len(r) for r in rows) < n:
        word += 1
        rows += [_row(1, 1, line, word, 200 * word, 30 * line, 50, "alpha beta") for line in (1, 2)]
    return "\n".join(rows)


def _prose_tsv(n: int) -> str:
    """Two columns read as one paragraph of many lines: each line cut in two, the halves joined down."""
    rows, line = [_HEADER], 0
    while sum(len(r) for r in rows) < n:
        line += 1
        for start in (0, 1000):
            rows += [_row(1, 1, line, w, start + 60 * w, 30 * line, 50, "word") for w in range(8)]
    return "\n".join(rows)


def _form_tsv(n: int) -> str:
    """Label blocks beside a value paragraph, row after row: the rows cut apart."""
    rows, line = [_HEADER], 0
    while sum(len(r) for r in rows) < n:
        line += 1
        rows.append(_row(1 + line, 1, 1, 1, 50, 40 * line, 80, "Label:"))
        rows += [_row(1, 1, line, w, 400 + 60 * w, 40 * line, 50, "value") for w in range(3)]
    return "\n".join(rows)


def test_layout_grouping_is_linear_in_the_words() -> None:
    def work(tsv: str) -> object:
        return ocr.blocks_from_data(_tesseract._columns(tsv))

    inputs = {
        "table": _table_tsv,
        "narrow table": _narrow_table_tsv,
        "wide line": _wide_line_tsv,
        "columns": _prose_tsv,
        "form": _form_tsv,
    }
    assert_linear(work, inputs, 20_000, repeats=3)


def test_erasing_rules_is_linear_in_the_pixels() -> None:
    def make(n: int) -> str:
        return str(n)

    def work(size: str) -> object:
        side = int(size)
        image = Image.new("L", (side, 60), 255)
        draw = ImageDraw.Draw(image)
        for y in range(0, image.height, 7):
            draw.line((0, y, side, y), fill=0, width=2)
        for x in range(0, side, 40):
            draw.line((x, 0, x, image.height), fill=0, width=2)
        return ocr.erase_rules(image)

    assert_linear(work, {"ruled grid": make}, 2_000, repeats=3)


@needs_font
def test_erasing_rules_keeps_letters_and_filled_cells() -> None:
    image = Image.new("L", (1200, 400), 255)
    draw = ImageDraw.Draw(image)
    draw.rectangle((100, 50, 700, 150), fill=0)  # a dark header cell: thick, not a rule
    draw.line((50, 250, 1150, 250), fill=0, width=3)  # a rule
    draw.line((900, 20, 900, 380), fill=0, width=2)  # a rule
    draw.text((100, 300), "Il", font=font(60), fill=0)
    erased = ocr.erase_rules(image)
    assert erased.getpixel((400, 100)) == 0  # the filled cell stays
    assert erased.getpixel((600, 250)) == 255 and erased.getpixel((900, 200)) == 255
    assert erased.crop((100, 300, 200, 380)).getextrema()[0] == 0  # the letters stay


REAL = Path(__file__).parents[1] / "data" / "real" / "ocr"


@needs_tesseract
def test_a_real_screenshot_keeps_its_labels_apart_from_each_other_and_their_values() -> None:
    """Cargo's build-timings summary: before, ``Targets Profile:`` and ``Max concurrency: Build start:``
    came back as one block each (two labels merged into one sentence)."""
    image = Image.open(REAL / "cargo-build-info.png")
    blocks = ocr.ocr_image(ocr.prepare(image), "eng")
    texts = [b.text for b in blocks]
    for label in (
        "Profile:",
        "Fresh units:",
        "Total units:",
        "Max concurrency:",
        "Build start:",
        "Total time:",
    ):
        assert label in texts, texts
    assert "dev" in texts and any(t.startswith("cargo 0.70.0") for t in texts), texts
    for block in blocks:  # the labels end left of the rule at x=269, the values start right of it
        assert block.bbox[2] < 269 or block.bbox[0] > 269, (block.text, block.bbox)


@needs_tesseract
def test_a_real_form_screenshot_keeps_its_sidebar_apart_and_its_names(
    tmp_path: Path, packs_dir: Path, tiny_argos_pack: Path
) -> None:
    """GitHub's OAuth page for crates.io (the Cargo Book's screenshot): the form column and the boxed
    sidebar beside it come back as separate blocks (none crosses the gutter between them), the headings,
    the prose and the button apart, each translated on its own. The white-on-green button ('Authorize
    application' at the bottom) was not read: Tesseract found its block and no word in it; that block is now
    read again on its own (_ocr_words.read_empty_blocks). Known gaps: the avatar (as tall as its text) and the
    chevron come back as letters. The domain and the handle in its prose (crates.io,
    @rust-lang) come back as written: a model upper-casing every word it may change changed them before
    two-part names with a web domain or file extension and handles were taken for code (identifiers.py).
    The team and info icons before a line's text were read as 'i' and '@' and painted over with those
    letters; now they are left out of the text (_ocr_words.without_icons) and stay in the image, and a
    block whose translation is its own text (the sidebar's bold 'crates.io') keeps its original pixels."""
    source = tmp_path / "acl.png"
    shutil.copy(REAL / "cargo-auth-level-acl.png", source)
    blocks = ocr.ocr_image(ocr.prepare(Image.open(source)), "eng")
    texts = [b.text for b in blocks]
    for expected in (
        "Authorize application",
        "Review permissions",
        "Organization access",
        "crates.io",
        "Cargo: Rust's community crate host",
        "Organizations determine whether the application can access their data.",
        "Grant access",
        "Organizations and teams",
        "Learn more about OAuth",
    ):
        assert expected in texts, texts
    assert "crates.io by @rust-lang would like permission to access your account" in texts, texts
    button = [b.bbox for b in blocks if b.text == "Authorize application" and b.bbox[1] > 840]
    assert len(button) == 1 and button[0][0] > 60 and button[0][2] < 370, button  # inside the button
    for block in blocks:  # below the heading, the form ends left of x=950 and the sidebar starts right of it
        if block.bbox[1] > 350:
            assert block.bbox[2] < 950 or block.bbox[0] > 950, (block.text, block.bbox)
    with fake_engine(packs_dir, tiny_argos_pack, shout) as engine:  # a model that upper-cases all it may
        result = files.translate_file(engine, source, "es", source="en")
    translated = {b.text: b.translation for b in result.boxes}
    assert translated["Review permissions"] == "REVIEW PERMISSIONS"
    assert translated["Cargo: Rust's community crate host"] == "CARGO: RUST'S COMMUNITY CRATE HOST"
    line = translated["crates.io by @rust-lang would like permission to access your account"]
    assert line == "crates.io BY @rust-lang WOULD LIKE PERMISSION TO ACCESS YOUR ACCOUNT", line
    assert translated["crates.io"] == "crates.io"
    worded = {t for t in texts if any(c.isalpha() for c in t)}  # (marks alone are left as they are)
    assert {b.text for b in result.boxes} == worded  # one translation per block, none merged
    assert result.output_path is not None
    before, after = Image.open(source).convert("RGB"), Image.open(result.output_path).convert("RGB")
    sidebar = next(b.bbox for b in result.boxes if b.text == "crates.io" and b.bbox[0] > 950)
    for box in ((100, 427, 156, 491), (1092, 650, 1108, 688), sidebar):  # team icon, info icon, kept name
        assert before.crop(box).tobytes() == after.crop(box).tobytes(), box
    heading = next(b.bbox for b in result.boxes if b.text == "Review permissions")
    assert before.crop(heading).tobytes() != after.crop(heading).tobytes()  # translated: painted over
    pressed = next(b for b in result.boxes if b.text == "Authorize application" and b.bbox[1] > 840)
    assert pressed.translation == "AUTHORIZE APPLICATION"
    light = (np.asarray(after.crop(pressed.bbox)).min(axis=2) > 230).sum()  # the white ink, drawn again
    assert light > 100 and before.crop(pressed.bbox).tobytes() != after.crop(pressed.bbox).tobytes()


@needs_tesseract
def test_a_real_scanned_page_keeps_list_items_and_sentences_whole() -> None:
    """A real 300 dpi scan (OCRmyPDF's test page, a 1985 product sheet). Tesseract reads its small printed
    bullets as ``¢``, ``©`` and ``®``, merges three list items into one paragraph, and puts the last line of
    an item that wraps under its text (a hanging indent), or of a column's paragraph, in a block of its
    own. Each list item is now one block that starts with a bullet written ``•``; a block that goes on with
    the sentence above it joins it; the two columns stay apart. Known: the column's last sentence goes on at
    the top of the next column ('simply use LOCATE'), which is left a block of its own."""
    blocks = ocr.ocr_image(ocr.prepare(Image.open(REAL / "linn-sequencer.png")), "eng")
    texts = [b.text for b in blocks]
    items = [t for t in texts if t.startswith("• ")]
    assert len(items) == 19, texts  # 9 in the first list, 10 in the second
    assert not any(mark in t for t in texts for mark in "¢©®"), texts
    for start, end in (
        ("• Each of the 100 sequences", "plays up to 16 polyphonic synthesizers!"),
        ("• Ultra-fast", "holds over 110,000 notes per disk!"),
        ("• Exclusive REPEAT function", "pre-selected rhythmic value."),
        ("• Simple, easy to learn operation", "If needed, the HELP button displays additional explanations."),
        ("• Two FOOTSWITCH INPUTS", "including ERASE, REPEAT, PLAY/STOP, or LOCATE."),
        (
            "To record a sequence",
            "only all timing errors will be corrected! (Timing correction may be adjusted or defeated).",
        ),
        (
            "To erase a wrong note",
            "Notes may also be added, erased, or changed using the SINGLE STEP function.",
        ),
    ):
        assert any(t.startswith(start) and end in t for t in texts), (start, texts)
    assert "• One or all tracks may be TRANSPOSED at the touch of a key." in texts  # not merged with the next
    assert "• Exclusive real-time ERASE function makes editing FAST." in texts
    starts_lower = [t for t in texts if t[:1].islower()]
    assert [t.split()[0] for t in starts_lower] == ["simply", "linn"], starts_lower  # (the logo: 'Linn')
    for block in blocks:  # the two columns, between the lists: the gutter is at about x=1265
        if 1280 < block.bbox[1] < 2250:
            assert block.bbox[2] < 1265 or block.bbox[0] > 1265, (block.text, block.bbox)


def _words(rows: list[tuple[int, int, int, int, int, str]]) -> str:
    """TSV of words given as (block, line, left, top, width, text), all in paragraph 1, 20 px high."""
    return "\n".join(
        [_HEADER] + [_row(b, 1, line, n, x, y, w, t) for n, (b, line, x, y, w, t) in enumerate(rows)]
    )


def test_icons_read_as_letters_are_left_out_of_the_text() -> None:
    """A screenshot's icon before a line's text (Tesseract reads it as 'i' or '@': a word of one or two
    characters, half as tall again as the line's words, a wide gap before the next) is left out of the
    text, also where it starts a part of a line after a wide gap; a drop cap set against its word, a capital
    of the line's height, and a short word of the text's height between wide gaps (a table cell) stay."""

    def line(*words: tuple[int, int, int, str], block: int = 1) -> list[str]:
        return [
            f"5\t1\t{block}\t1\t1\t{n}\t{x}\t{100 + 20 - h}\t{w}\t{h}\t90\t{t}"
            for n, (x, w, h, t) in enumerate(words)
        ]

    def texts(*rows: list[str]) -> list[str]:
        tsv = "\n".join([_HEADER, *(r for row in rows for r in row)])
        return [b.text for b in ocr.blocks_from_data(_tesseract._columns(tsv))]

    icon = line(
        (100, 40, 44, "i"), (170, 150, 20, "Organizations"), (330, 40, 20, "and"), (380, 60, 20, "teams")
    )
    assert texts(icon) == ["Organizations and teams"]
    after_gap = line(
        (100, 60, 20, "Their"), (170, 50, 20, "data."), (600, 16, 38, "@"), (640, 60, 20, "Learn"),
        (710, 50, 20, "more"),
    )  # fmt: skip
    assert texts(after_gap) == ["Their data.", "Learn more"]
    drop_cap = line((100, 40, 44, "T"), (142, 40, 20, "he"), (190, 60, 20, "house"), (260, 40, 20, "is"))
    assert texts(drop_cap) == ["T he house is"]
    capital = line((100, 12, 20, "I"), (140, 40, 20, "am"), (190, 60, 20, "here"))
    assert texts(capital) == ["I am here"]
    cells = line((100, 60, 20, "Name"), (400, 24, 20, "No"), (700, 60, 20, "Value"))
    assert " ".join(texts(cells)).split() == ["Name", "No", "Value"]


def test_blocks_read_empty_are_read_again_on_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """A block Tesseract found with no word in it (a light button) is cropped with a margin and read again
    as one block; its words join the page's at the crop's offset, as a block of their own. Blocks too tall
    (a photo) or narrower than high are not; a read with no letters or a low confidence adds nothing; at
    most SECOND_LOOKS are read, each given what is left of the time, none once it is spent."""
    header = _HEADER.split("\t")

    def rows(*values: tuple[int, ...] | tuple[object, ...]) -> dict[str, list[Any]]:
        return {key: [row[n] for row in values] for n, key in enumerate(header)}

    page = rows(
        (2, 1, 1, 0, 0, 0, 10, 10, 300, 20, -1, ""),
        (5, 1, 1, 1, 1, 1, 10, 10, 80, 20, 95, "Title"),
        (2, 1, 2, 0, 0, 0, 50, 100, 200, 40, -1, ""),  # the button: found, no word
        (2, 1, 3, 0, 0, 0, 50, 300, 400, 400, -1, ""),  # a photo: too tall
        (2, 1, 4, 0, 0, 0, 500, 100, 10, 60, -1, ""),  # narrower than high
    )
    asked: list[tuple[tuple[int, int], float, int | None]] = []
    answers = {
        (212, 52): rows(
            (5, 1, 1, 1, 1, 1, 30, 12, 60, 16, 93, "Press"), (5, 1, 1, 1, 1, 2, 100, 12, 40, 16, 91, "me")
        ),
    }

    def fake(
        image: Image.Image, lang: str, timeout: float, *, psm: int | None = None
    ) -> dict[str, list[Any]]:
        asked.append((image.size, timeout, psm))
        return answers.get(image.size, rows((5, 1, 1, 1, 1, 1, 3, 3, 20, 16, 95, "--")))

    monkeypatch.setattr(_ocr_words, "image_to_data", fake)
    image = Image.new("RGB", (800, 800), "white")
    data = _ocr_words.read_empty_blocks(image, {k: list(v) for k, v in page.items()}, "eng", math.inf)
    assert asked == [((212, 52), 0, 6)]  # the button alone, as one block, with no time limit
    words = [(data["block_num"][i], data["left"][i], data["top"][i], data["text"][i]) for i in range(5, 7)]
    assert words == [(6, 74, 106, "Press"), (6, 144, 106, "me")]  # (50-6+30, 100-6+12): where they are
    assert [b.text for b in ocr.blocks_from_data(data)] == ["Title", "Press me"]

    answers[(212, 52)] = rows((5, 1, 1, 1, 1, 1, 30, 12, 60, 16, 40, "Prcss"))  # unsure: nothing added
    assert _ocr_words.read_empty_blocks(image, {k: list(v) for k, v in page.items()}, "eng", math.inf) == page
    many = rows(*[(2, 1, b, 0, 0, 0, 10, 30 * b, 100, 20, -1, "") for b in range(1, 21)])
    asked.clear()
    _ocr_words.read_empty_blocks(image, many, "eng", time.monotonic() + 60)
    assert len(asked) == _ocr_words.SECOND_LOOKS and all(0 < timeout <= 60 for _, timeout, _ in asked)
    asked.clear()
    _ocr_words.read_empty_blocks(image, many, "eng", time.monotonic() + 0.5)  # less than a second left
    assert asked == []


def test_bullets_start_items_and_blocks_that_go_on_with_a_sentence_join_it() -> None:
    """Synthetic TSV (20 px words): lines starting with a bullet alone are items of their own, misread
    bullets written ``•`` where two lines or more start so, a lone ``©`` kept; a block Tesseract starts
    under an open sentence joins it when it starts lower-case or under the item's text, not when the
    sentence ended, when it starts with a capital at the margin, or when it is far below."""

    def tsv(*rows: tuple[int, int, int, int, int, str]) -> list[str]:  # block, line, left, top, width, text
        body = [_row(b, 1, line, n, x, y, w, t) for n, (b, line, x, y, w, t) in enumerate(rows)]
        return [b.text for b in ocr.blocks_from_data(_tesseract._columns("\n".join([_HEADER, *body])))]

    def item(
        block: int, line: int, y: int, bullet: str, *words: str
    ) -> list[tuple[int, int, int, int, int, str]]:
        return [(block, line, 100, y, 12, bullet)] + [
            (block, line, 130 + 70 * k, y, 60, w) for k, w in enumerate(words)
        ]

    listed = tsv(
        *item(1, 1, 100, "¢", "One", "item", "here."), *item(1, 2, 130, "©", "Two", "items", "there.")
    )
    assert listed == ["• One item here.", "• Two items there."]
    assert tsv(*item(1, 1, 100, "©", "2024", "Forat", "Electronics")) == ["© 2024 Forat Electronics"]
    hanging = [
        *item(1, 1, 100, "•", "Holds", "many", "notes"),
        (2, 1, 130, 130, 60, "Per"),
        (2, 1, 200, 130, 60, "disk!"),
    ]
    assert tsv(*hanging) == ["• Holds many notes Per disk!"]
    prose = [(1, 1, 100 + 70 * k, 100, 60, w) for k, w in enumerate(["it", "will", "be"])]
    assert tsv(*prose, (2, 1, 100, 130, 60, "gone.")) == ["it will be gone."]
    assert tsv(*prose, (2, 1, 100, 130, 60, "Gone.")) == ["it will be", "Gone."]
    assert tsv(*prose, (2, 1, 100, 300, 60, "gone.")) == ["it will be", "gone."]  # far below
    ended = [(1, 1, 100 + 70 * k, 100, 60, w) for k, w in enumerate(["it", "is", "done."])]
    assert tsv(*ended, (2, 1, 100, 130, 60, "gone.")) == ["it is done.", "gone."]


def test_whole_lines_join_when_wrapped_even_double_spaced_and_stay_apart_when_not() -> None:
    words = [
        # a double-spaced paragraph (lines 60 px apart, 20 px high): each line full, so wrapped
        *[(1, line, 100 + 100 * k, 60 * line, 80, "word") for line in (1, 2) for k in range(4)],
        (1, 3, 100, 180, 80, "end."),
        # a short line over another: the next line's first word would have fitted after it
        (2, 1, 100, 400, 80, "Total"),
        (2, 1, 200, 400, 80, "due"),
        (2, 2, 100, 430, 80, "Paid"),
        (2, 2, 200, 430, 80, "on"),
        (2, 2, 300, 430, 80, "Monday"),
        (2, 2, 400, 430, 80, "morning"),
    ]
    texts = [b.text for b in ocr.blocks_from_data(_tesseract._columns(_words(words)))]
    assert texts == [" ".join(["word"] * 8 + ["end."]), "Total due", "Paid on Monday morning"]


VALUES = ["John Smith", "12 Oak Street", "Springfield", "555 0100", "Blue Bank Ltd"]
NARROW_PROSE = [
    "The river runs through",
    "the old town and under",
    "seven bridges before it",
    "reaches the sea.",
]


def column_image(lines: Sequence[str]) -> Image.Image:
    """Lines one under the other at the left, 60 px apart, nothing beside them."""
    image = Image.new("RGB", (900, 60 * len(lines) + 80), "white")
    draw, face = ImageDraw.Draw(image), font(30)
    for row, text in enumerate(lines):
        draw.text((60, 40 + 60 * row), text, font=face, fill="black")
    return image


@needs_tesseract
@needs_font
def test_a_column_of_values_with_no_labels_beside_it_is_one_block_per_value() -> None:
    """Tesseract reads the column as one paragraph; the fit of each next line's first word said it was
    wrapped (lines of similar length), so it came back as ``John Smith 12 Oak Street Springfield`` and
    ``555 0100 Blue Bank Ltd``. A narrow column of prose of the same shape stays one paragraph, its short
    last line too: Tesseract puts that line in a block of its own, and it was a paragraph of its own (the
    sentence cut in two) before a block that goes on with the sentence above it was joined to it."""
    blocks = ocr.ocr_image(column_image(VALUES), "eng")
    assert [b.text for b in blocks] == VALUES
    assert all(b.lines == (b.text,) for b in blocks)
    prose = ocr.ocr_image(column_image(NARROW_PROSE), "eng")
    assert [b.lines for b in prose] == [tuple(NARROW_PROSE)], [b.text for b in prose]


def test_only_lines_that_end_and_start_as_items_are_read_as_a_list() -> None:
    """Prose breaks after or before a lower-case word nearly every time (German nouns included); a comma or
    a hyphen at a line's end goes on; two lines are too few to tell."""

    def texts(lines: list[str]) -> list[str]:
        words = [
            (1, n + 1, 100 + 90 * k, 40 * (n + 1), 80, word)
            for n, line in enumerate(lines)
            for k, word in enumerate(line.split())
        ]
        return [b.text for b in ocr.blocks_from_data(_tesseract._columns(_words(words)))]

    values = ["Jane Doe", "Oak Street", "jane@example.org", "Tel 0100"]
    assert texts(values) == values
    german = ["Der Fluss fließt durch", "die Stadt und unter", "Brücken zum Meer"]
    assert texts(german) == [" ".join(german)]
    commas = ["Oak Street West,", "Spring Field Road,", "New Ohio State"]
    assert texts(commas) == [" ".join(commas)]
    two = ["John Smith", "Oak Street"]
    assert len(texts(two)) == 1


NARROW_TABLE = [
    ["Item", "Quantity", "Price", "Total"],
    ["Apples", "Three", "Cheap", "Ninety"],
    ["Bread", "Seven", "Costly", "Twelve"],
    ["Milk", "Two", "Fair", "Eight"],
]


def narrow_table_image(gutter: int) -> Image.Image:
    """Four rows of four cells, each column ``gutter`` px right of the widest cell before it (30 px is
    about one em of the 30 px font), no rules."""
    image = Image.new("RGB", (1100, 360), "white")
    draw, face = ImageDraw.Draw(image), font(30)
    xs = [60]
    for column in range(1, 4):
        widest = max(draw.textlength(row[column - 1], font=face) for row in NARROW_TABLE)
        xs.append(xs[-1] + int(widest) + gutter)
    for row, cells in enumerate(NARROW_TABLE):
        for column, text in enumerate(cells):
            draw.text((xs[column], 40 + 60 * row), text, font=face, fill="black")
    return image


@needs_tesseract
@needs_font
def test_table_cells_one_em_apart_are_separate_blocks() -> None:
    """Gaps of about one em are under the line cut (two word heights), so each row came back partly
    merged (``Quantity Price``, ``Apples Three Bread``); lined up over the rows they are a table's gutters."""
    blocks = ocr.ocr_image(narrow_table_image(30), "eng")
    assert [b.text for b in blocks] == [cell for row in NARROW_TABLE for cell in row]


@needs_font
def test_justified_prose_with_wide_spaces_is_not_cut_at_lined_up_gaps() -> None:
    """Justified lines whose spaces are half an em wide, some of them lined up over three lines: no
    gutter (a gutter's gap is at least 0.8 word heights wide, in most lines of the paragraph)."""
    words = [
        (1, line, 100 + 95 * k, 40 * line, 80, "word") for line in range(1, 5) for k in range(6)
    ]  # gaps of 15 px between 20 px high words, all lined up
    texts = [b.text for b in ocr.blocks_from_data(_tesseract._columns(_words(words)))]
    assert texts == [" ".join(["word"] * 24)]
    # the same paragraph with one column of 35 px gaps (over two word spaces, under the line cut of 45)
    # lined up over all its lines is a table
    wide = [(b, line, x + (20 if x > 300 else 0), y, w, t) for b, line, x, y, w, t in words]
    cut = [b.text for b in ocr.blocks_from_data(_tesseract._columns(_words(wide)))]
    assert cut == [" ".join(["word"] * 12)] * 2  # two columns, each read down
