"""The OCR core: language table, word boxes grouped into paragraphs, real Tesseract reading real text."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont

from dragoman.documents import ocr
from dragoman.errors import OcrUnavailable

DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None, reason="apt-get install tesseract-ocr"
)
needs_font = pytest.mark.skipif(not DEJAVU.is_file(), reason="apt-get install fonts-dejavu-core")


def draw_lines(
    lines: list[tuple[int, int, str]], size: tuple[int, int] = (1000, 300), px: int = 40
) -> tuple[Image.Image, list[tuple[int, int, int, int]]]:
    """A white image with each (x, y, text) drawn in black DejaVu Sans; returns the ink boxes too."""
    font = ImageFont.truetype(str(DEJAVU), px)
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    boxes = []
    for x, y, text in lines:
        draw.text((x, y), text, font=font, fill="black")
        left, top, right, bottom = draw.textbbox((x, y), text, font=font)
        boxes.append((int(left), int(top), int(right), int(bottom)))
    return image, boxes


def overlap(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    """Intersection over the smaller box's area."""
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    if width <= 0 or height <= 0:
        return 0.0
    smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return width * height / smaller


def test_language_table_maps_flores_and_aliases() -> None:
    assert ocr.tesseract_language("eng_Latn") == "eng"
    assert ocr.tesseract_language("es") == "spa"
    assert ocr.tesseract_language("zho_Hans") == "chi_sim"
    assert ocr.tesseract_language("zh-Hant") == "chi_tra"
    assert ocr.tesseract_language("ja") == "jpn"
    assert ocr.tesseract_language("arb_Arab") == "ara"
    assert ocr.tesseract_language("nob_Latn") == "nor"
    assert ocr.tesseract_language("srp_Cyrl") == "srp"
    with pytest.raises(OcrUnavailable, match="no OCR model for Friulian"):
        ocr.tesseract_language("fur_Latn")
    assert ocr.apt_package("chi_sim") == "tesseract-ocr-chi-sim"
    assert ocr.flores_script("rus") == "Cyrl" and ocr.flores_script("spa") == "Latn"


def test_default_languages_prefer_english_then_latin() -> None:
    assert ocr.default_languages({"osd", "spa", "rus", "eng", "deu"}) == "eng+spa+deu"
    assert ocr.default_languages({"osd", "ita", "pol", "spa", "fra", "deu", "eng"}).split("+") == [
        "eng",
        "spa",
        "fra",
        "deu",
    ]
    assert ocr.default_languages({"rus", "ukr", "osd"}) == "rus+ukr"
    with pytest.raises(OcrUnavailable, match="tesseract-ocr-eng"):
        ocr.default_languages({"osd"})


def _data(rows: list[tuple[int, int, int, int, int, int, int, int, float, str]]) -> dict[str, list[object]]:
    keys = ("level", "block_num", "par_num", "line_num", "left", "top", "width", "height", "conf", "text")
    data: dict[str, list[object]] = {k: [] for k in keys}
    data["page_num"] = []
    for row in rows:
        for key, value in zip(keys, row, strict=True):
            data[key].append(value)
        data["page_num"].append(1)
    return data


def test_words_grouped_into_paragraphs_with_lines_joined() -> None:
    data = _data(
        [
            (1, 0, 0, 0, 0, 0, 500, 300, -1, ""),
            (4, 1, 1, 1, 10, 10, 300, 20, -1, ""),
            (5, 1, 1, 1, 10, 10, 50, 20, 90, "The"),
            (5, 1, 1, 1, 70, 12, 120, 18, 80, "transla-"),
            (5, 1, 1, 2, 10, 40, 60, 22, 70, "tion"),
            (5, 1, 1, 2, 75, 40, 8, 20, 95, " "),  # blank word: ignored
            (5, 1, 1, 2, 85, 40, 40, 20, 60, "works"),  # a word space away (a wide gap would cut the line)
            (5, 2, 1, 1, 10, 200, 80, 30, 50, "Second"),
        ]
    )
    first, second = ocr.blocks_from_data(data)
    assert first.text == "The translation works"
    assert first.lines == ("The transla-", "tion works")
    assert first.bbox == (10, 10, 190, 62)
    assert first.confidence == pytest.approx((90 + 80 + 70 + 60) / 4)
    assert first.words == 4 and first.line_height == 21.0
    assert second.text == "Second" and second.bbox == (10, 200, 90, 230)


def test_paragraphs_split_mid_sentence_are_joined_again() -> None:
    data = _data(
        [
            (5, 1, 1, 1, 10, 10, 490, 20, 90, "Introduction"),  # block 1: a heading, then a paragraph
            (5, 1, 2, 1, 10, 40, 200, 20, 90, "The museum opens"),
            (5, 1, 2, 1, 220, 40, 280, 20, 90, "every day from nine"),  # runs to the right edge...
            (5, 1, 3, 1, 10, 70, 150, 20, 90, "until six."),  # ... so this continues the sentence
            (5, 1, 4, 1, 10, 100, 490, 20, 90, "Tickets are sold here."),  # after a full stop: new
        ]
    )
    data["text"][0] = "Introduction"
    data["width"][0] = 150  # a short line: a heading stays apart even without a full stop
    texts = [b.text for b in ocr.blocks_from_data(data)]
    assert texts == [
        "Introduction",
        "The museum opens every day from nine until six.",
        "Tickets are sold here.",
    ]


def test_join_lines_keeps_real_hyphens() -> None:
    assert ocr.join_lines(["well-", "known"]) == "wellknown"
    assert ocr.join_lines(["state-of-the-", "Art"]) == "state-of-the- Art"
    assert ocr.join_lines(["10 -", "20"]) == "10 - 20"
    assert ocr.join_lines([]) == ""


def test_prepare_flattens_transparency_onto_white() -> None:
    image = Image.new("RGBA", (20, 10), (0, 0, 0, 0))
    image.putpixel((5, 5), (0, 0, 0, 255))
    flat = ocr.prepare(image)
    assert flat.mode == "RGB"
    assert flat.getpixel((0, 0)) == (255, 255, 255) and flat.getpixel((5, 5)) == (0, 0, 0)
    wide = Image.new("I;16", (4, 4), 1000)
    assert ocr.prepare(wide).mode == "L"


def test_missing_tesseract_binary_names_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no tesseract there
    with pytest.raises(OcrUnavailable, match="apt-get install tesseract-ocr"):
        ocr.installed_languages()
    with pytest.raises(OcrUnavailable, match="apt-get install tesseract-ocr"):
        ocr.ocr_image(Image.new("L", (10, 10), 255), "eng")


@needs_tesseract
def test_missing_language_names_its_package() -> None:
    missing = next(c for c in ("jpn", "kor", "chi_tra", "tha", "amh") if c not in ocr.installed_languages())
    with pytest.raises(OcrUnavailable, match=f"apt-get install {ocr.apt_package(missing)}"):
        ocr.ocr_image(Image.new("L", (10, 10), 255), f"eng+{missing}")
    with pytest.raises(OcrUnavailable, match=ocr.apt_package(missing)):
        ocr.check_languages(missing)


@needs_tesseract
@needs_font
def test_reads_rendered_text_back_with_boxes() -> None:
    image, drawn = draw_lines(
        [(40, 30, "The house is red."), (40, 150, "The garden is big and the dog"), (40, 200, "sleeps here.")]
    )
    blocks = ocr.ocr_image(image, "eng")
    assert [b.text for b in blocks] == ["The house is red.", "The garden is big and the dog sleeps here."]
    assert blocks[1].lines == ("The garden is big and the dog", "sleeps here.")
    assert all(b.confidence > 80 for b in blocks)
    assert overlap(blocks[0].bbox, drawn[0]) > 0.8
    union = (drawn[1][0], drawn[1][1], max(drawn[1][2], drawn[2][2]), drawn[2][3])
    assert overlap(blocks[1].bbox, union) > 0.8
    assert 25 <= blocks[0].line_height <= 45


@needs_tesseract
@needs_font
def test_reads_light_text_on_a_transparent_image() -> None:
    font = ImageFont.truetype(str(DEJAVU), 40)
    image = Image.new("RGBA", (700, 100), (0, 0, 0, 0))
    ImageDraw.Draw(image).text((20, 20), "Open the window", font=font, fill=(20, 20, 20, 255))
    assert [b.text for b in ocr.ocr_image(image, "eng")] == ["Open the window"]


def test_tesseract_runs_single_threaded_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_THREAD_LIMIT", raising=False)
    env = ocr.tesseract_environment()
    assert env["OMP_THREAD_LIMIT"] == "1" and "OMP_THREAD_LIMIT" not in os.environ  # Tesseract's alone
    assert env["PATH"] == os.environ["PATH"] and len(env) == len(os.environ) + 1
    monkeypatch.setenv("OMP_THREAD_LIMIT", "4")
    assert ocr.tesseract_environment()["OMP_THREAD_LIMIT"] == "4"
    assert ocr.tesseract_environment({"PATH": "/bin"}) == {"PATH": "/bin", "OMP_THREAD_LIMIT": "1"}
