"""Images: OCR, one translation call, the translation drawn over the text; bombs and corrupt files refused."""

from __future__ import annotations

import shutil
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont
from support import needs_apertium

from dragoman.documents import _image_render as render
from dragoman.documents import handlers, images, ocr
from dragoman.errors import DocumentFormatError, DocumentTooLarge, InvalidRequest, OcrUnavailable
from dragoman.pipelines import translate_file as files
from dragoman.pipelines.ocr_translate import ocr_translate
from dragoman.settings import Settings
from dragoman.testing.fakes import FakeTranslator
from dragoman.translation.engine import Engine

DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None, reason="apt-get install tesseract-ocr"
)
needs_font = pytest.mark.skipif(not DEJAVU.is_file(), reason="apt-get install fonts-dejavu-core")


class Brackets(FakeTranslator):
    """A deterministic fake translator: ``[UPPER CASE]``; counts its calls; optionally 'detects'."""

    def __init__(self, source: str | None = None, detected: str | None = None) -> None:
        super().__init__(lambda t: f"[{t.upper()}]", source=source, detected=detected)


def page(lines: Sequence[tuple[int, int, str]], size: tuple[int, int] = (900, 300)) -> Image.Image:
    font = ImageFont.truetype(str(DEJAVU), 40)
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, size[1] - 60, size[0], size[1]), fill=(200, 230, 255))  # a band the text avoids
    for x, y, text in lines:
        draw.text((x, y), text, font=font, fill="black")
    return image


def ink_box(x: int, y: int, text: str) -> tuple[float, float, float, float]:
    font = ImageFont.truetype(str(DEJAVU), 40)
    return tuple(float(v) for v in ImageDraw.Draw(Image.new("L", (1, 1))).textbbox((x, y), text, font=font))  # type: ignore[return-value]


def overlap(a: Sequence[float], b: Sequence[float]) -> float:
    width, height = min(a[2], b[2]) - max(a[0], b[0]), min(a[3], b[3]) - max(a[1], b[1])
    smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return 0.0 if width <= 0 or height <= 0 else width * height / smaller


def png_header(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width`` x ``height`` (what a decompression bomb looks like)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 64))
        + chunk(b"IEND", b"")
    )


def spy_on_ocr(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The languages every OCR run is asked for, in order."""
    used: list[str] = []
    real = ocr.ocr_image

    def spy(image: Image.Image, lang: str) -> list[ocr.OcrBlock]:
        used.append(lang)
        return real(image, lang)

    monkeypatch.setattr(ocr, "ocr_image", spy)
    return used


@pytest.fixture
def engine() -> Any:
    with Engine(Settings.from_env()) as eng:
        yield eng


def test_sniffs_png_jpeg_tiff_by_content() -> None:
    handler = images.ImageHandler()
    for head in (b"\x89PNG\r\n\x1a\n....", b"\xff\xd8\xff\xe0..", b"II*\x00....", b"MM\x00*...."):
        assert handler.sniff(head, Path("x"))
    assert not handler.sniff(b"GIF89a", Path("x.png")) and not handler.sniff(b"hello", Path("x.png"))
    assert any(isinstance(h, images.ImageHandler) for h in handlers.all_handlers())


@needs_tesseract
@needs_font
def test_png_boxes_translation_and_rendering(tmp_path: Path) -> None:
    lines = [
        (40, 30, "The house is red."),
        (40, 130, "The garden is big and the dog"),
        (40, 180, "sleeps here."),
    ]
    source = tmp_path / "sign.png"
    page(lines).save(source)
    translator = Brackets(source="eng_Latn")
    out = tmp_path / "sign.es.png"
    report = images.ImageHandler().translate(source, out, translator, None)

    assert translator.calls == [["The house is red.", "The garden is big and the dog sleeps here."]]
    assert report.extracted_text == "The house is red.\n\nThe garden is big and the dog sleeps here."
    assert report.translated_text == "[THE HOUSE IS RED.]\n\n[THE GARDEN IS BIG AND THE DOG SLEEPS HERE.]"
    assert (report.pages, report.segments) == (1, 2)
    assert [(b.page, b.text, b.translation) for b in report.boxes][0] == (
        1,
        "The house is red.",
        "[THE HOUSE IS RED.]",
    )
    assert overlap(report.boxes[0].bbox, ink_box(*lines[0])) > 0.8
    second = ink_box(*lines[1]), ink_box(*lines[2])
    assert overlap(report.boxes[1].bbox, (second[0][0], second[0][1], second[0][2], second[1][3])) > 0.8

    before = np.asarray(Image.open(source).convert("RGB")).astype(int)
    after_image = Image.open(out)
    assert after_image.format == "PNG" and after_image.size == (900, 300)
    after = np.asarray(after_image.convert("RGB")).astype(int)
    near = np.zeros(before.shape[:2], dtype=bool)
    for number, box in enumerate(report.boxes):
        x0, y0, x1, y1 = (int(v) for v in box.bbox)
        assert (before[y0:y1, x0:x1] != after[y0:y1, x0:x1]).any(axis=2).mean() > 0.05
        margin = 15
        right = x1 + margin if number else None  # a one-line box's longer translation goes on to its right
        near[max(0, y0 - margin) : y1 + margin, max(0, x0 - margin) : right] = True
    assert not (before != after).any(axis=2)[~near].any()  # nothing changed away from the boxes
    assert tuple(after[285, 450]) == (200, 230, 255)

    reread = ocr.ocr_image(after_image, "eng")
    assert "[THEHOUSEISRED.]" in [b.text.replace(" ", "") for b in reread]  # (Tesseract may read "RED. ]")
    assert "SLEEPS" in " ".join(b.text for b in reread)


@needs_tesseract
@needs_font
def test_multipage_tiff_comes_back_multipage(tmp_path: Path) -> None:
    first = page([(40, 40, "The house is red.")])
    second = page([(40, 40, "The cat sleeps.")]).convert("L")
    source = tmp_path / "scan.tif"
    first.save(source, save_all=True, append_images=[second], compression="tiff_lzw")
    translator = Brackets(source="en")
    progress: list[tuple[int, int, str]] = []
    report = images.ImageHandler().translate(
        source, tmp_path / "scan.es.tif", translator, lambda d, t, m: progress.append((d, t, m))
    )
    assert report.pages == 2 and len(translator.calls) == 1
    assert [(b.page, b.text) for b in report.boxes] == [(1, "The house is red."), (2, "The cat sleeps.")]
    assert [p[:2] for p in progress] == [(1, 2), (2, 2)]
    with Image.open(tmp_path / "scan.es.tif") as out:
        assert getattr(out, "n_frames", 1) == 2
        out.seek(1)
        assert out.mode == "L"
        assert "[THECATSLEEPS.]" in [b.text.replace(" ", "") for b in ocr.ocr_image(out.copy(), "eng")]
    with pytest.raises(InvalidRequest, match=r"\.tif"):
        images.ImageHandler().translate(source, tmp_path / "flat.png", translator, None)


@needs_tesseract
@needs_font
def test_jpeg_is_read_and_written_as_jpeg(tmp_path: Path) -> None:
    source = tmp_path / "photo.jpg"
    page([(40, 40, "The house is red.")]).save(source, quality=90)
    report = images.ImageHandler().translate(source, tmp_path / "out.jpg", Brackets(source="eng"), None)
    assert [b.text for b in report.boxes] == ["The house is red."]
    with Image.open(tmp_path / "out.jpg") as out:
        assert out.format == "JPEG"


@needs_tesseract
@needs_font
def test_source_language_chooses_the_ocr_language(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "a.png"
    page([(40, 40, "La casa es roja.")]).save(source)
    used = spy_on_ocr(monkeypatch)
    images.ocr_and_translate(source, Brackets(source="spa_Latn"))
    assert used == ["spa"]


@needs_tesseract
@needs_font
def test_unknown_source_is_detected_and_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "a.png"
    page([(40, 40, "La casa es roja.")]).save(source)
    used = spy_on_ocr(monkeypatch)
    default = ocr.default_languages()

    spanish = Brackets(detected="spa_Latn")
    report = images.ocr_and_translate(source, spanish)
    assert used == [default, "spa"] and spanish.source == "spa_Latn"
    assert report.extracted_text == "La casa es roja."

    used.clear()
    english = Brackets(detected="eng_Latn")
    images.ocr_and_translate(source, english)
    assert used == [default] and english.source == "eng_Latn"

    used.clear()
    missing = next(
        c
        for c in ("jpn_Jpan", "kor_Hang", "tha_Thai")
        if ocr.tesseract_language(c) not in ocr.installed_languages()
    )
    report = images.ocr_and_translate(source, Brackets(detected=missing))
    assert used == [default]
    assert any(ocr.apt_package(ocr.tesseract_language(missing)) in w for w in report.warnings)


@needs_tesseract
def test_missing_ocr_language_is_reported_before_reading(tmp_path: Path) -> None:
    source = tmp_path / "a.png"
    Image.new("RGB", (50, 50), "white").save(source)
    missing = next(
        c
        for c in ("jpn_Jpan", "kor_Hang", "tha_Thai")
        if ocr.tesseract_language(c) not in ocr.installed_languages()
    )
    with pytest.raises(OcrUnavailable, match=ocr.apt_package(ocr.tesseract_language(missing))):
        images.ocr_and_translate(source, Brackets(source=missing))


@needs_tesseract
def test_blank_image_has_no_text(tmp_path: Path) -> None:
    source = tmp_path / "blank.png"
    Image.new("RGB", (300, 200), "white").save(source)
    translator = Brackets(source="eng")
    report = images.ImageHandler().translate(source, tmp_path / "blank.es.png", translator, None)
    assert report.boxes == [] and translator.calls == [] and report.extracted_text == ""
    assert any(w.startswith("no_text") for w in report.warnings)
    assert (tmp_path / "blank.es.png").is_file()


@pytest.mark.parametrize(("width", "height"), [(20_000, 20_000), (11_000, 10_000)])
def test_decompression_bomb_is_refused(tmp_path: Path, width: int, height: int) -> None:
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(png_header(width, height))
    with pytest.raises(DocumentTooLarge, match="decompression bomb") as refused:
        images.inspect_image(bomb)
    assert (refused.value.status, refused.value.code) == (413, "document_too_large")


@pytest.mark.parametrize("name", ["garbage", "truncated"])
def test_corrupt_image_is_refused(tmp_path: Path, name: str) -> None:
    bad = tmp_path / "bad.png"
    if name == "garbage":
        bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x13\x37" * 100)
    else:
        Image.effect_noise((200, 200), 50).save(bad)
        bad.write_bytes(bad.read_bytes()[:400])
    with pytest.raises(DocumentFormatError, match="bad.png"):
        list(images.iter_pages(bad))


def test_text_is_shrunk_and_wrapped_to_fit() -> None:
    font = render.font_for("Latn")
    assert font is not None and font[0].name == "DejaVuSans.ttf" or not DEJAVU.is_file()
    short = render.fit_text("Casa", font, 400, 60, 40)
    assert short.lines == ("Casa",) and short.font.size == 40
    long = render.fit_text("La casa es roja y el jardín es muy grande", font, 200, 80, 40)
    assert len(long.lines) > 1 and long.font.size < 40
    assert long.height <= 80 and long.width <= 200
    tiny = render.fit_text("Unbelievablylongword " * 20, font, 30, 10, 40)
    assert tiny.font.size == render.MIN_FONT_PX  # overflows at the smallest size


@needs_tesseract
@needs_font
def test_missing_font_for_the_target_script_is_a_warning(tmp_path: Path) -> None:
    if render.font_for("Hans") is not None:
        pytest.skip("a CJK font is installed")
    source = tmp_path / "a.png"
    page([(40, 40, "The house is red.")]).save(source)
    translator = Brackets(source="eng")
    translator.target = "zho_Hans"
    report = images.ImageHandler().translate(source, tmp_path / "a.zh.png", translator, None)
    assert any("fonts-noto-cjk" in w for w in report.warnings)


# ----- end to end: the real engine through Apertium ---------------------------------------------------
@needs_tesseract
@needs_font
@needs_apertium
def test_translate_file_reads_and_translates_an_image(engine: Engine, tmp_path: Path) -> None:
    source = tmp_path / "sign.png"
    page([(40, 40, "The house is red."), (40, 140, "The dog is big.")]).save(source)
    result = files.translate_file(engine, source, "es")
    assert result.output_path == tmp_path / "sign.es.png" and result.format == "image"
    assert result.source == "eng_Latn"  # detected from the OCR text
    assert result.translated_text is not None and "casa" in result.translated_text.lower()
    assert [b.text for b in result.boxes] == ["The house is red.", "The dog is big."]
    assert "casa" in result.boxes[0].translation.lower()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sign.es.png", "sign.png"]


@needs_tesseract
@needs_font
@needs_apertium
def test_ocr_translate_renders_only_when_asked(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "note.jpg"
    page([(40, 40, "The house is red.")]).save(source, quality=95)
    result = ocr_translate(engine, source, "spa_Latn", source="en", render=False)
    assert result.output_path is None and "casa" in result.translation.lower()
    assert result.text == "The house is red." and result.boxes[0].page == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["note.jpg"]

    rendered = ocr_translate(engine, source, "es", source="en")
    assert rendered.output_path == tmp_path / "note.es.jpg" and rendered.output_path.is_file()
    with pytest.raises(InvalidRequest, match="exists"):
        ocr_translate(engine, source, "es", source="en")

    def broken(*args: object) -> object:
        raise RuntimeError("renderer on fire")

    monkeypatch.setattr(images, "draw_translations", broken)
    with pytest.raises(RuntimeError):
        ocr_translate(engine, source, "es", source="en", output=tmp_path / "other.jpg")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["note.es.jpg", "note.jpg"]

    text = tmp_path / "notes.txt"
    text.write_text("The house is red.", encoding="utf-8")
    with pytest.raises(DocumentFormatError, match="translate_file"):
        ocr_translate(engine, text, "es", render=False)


@needs_tesseract
@needs_font
def test_pages_in_memory_are_read_as_the_pdf_handler_does() -> None:
    warns: list[str] = []
    pages, lang = images.read_pages(
        [page([(40, 40, "The house is red.")])], Brackets(source="en"), None, warns
    )
    assert lang == "eng" and [b.text for b in pages[0].text_blocks] == ["The house is red."]
    assert warns == []


@needs_tesseract
@needs_font
def test_exif_orientation_is_applied_before_reading(tmp_path: Path) -> None:
    from PIL import ImageOps

    source = tmp_path / "phone.jpg"
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 degrees clockwise to display"
    page([(40, 40, "The house is red.")]).transpose(Image.Transpose.ROTATE_90).save(source, exif=exif)
    with Image.open(source) as stored:
        assert stored.size == (300, 900) and ImageOps.exif_transpose(stored).size == (900, 300)
    report = images.ImageHandler().translate(source, tmp_path / "out.jpg", Brackets(source="en"), None)
    assert [b.text for b in report.boxes] == ["The house is red."]
    with Image.open(tmp_path / "out.jpg") as out:
        assert out.size == (900, 300)


def test_too_many_pages_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "many.tif"
    blank = Image.new("L", (40, 40), 255)
    blank.save(source, save_all=True, append_images=[blank, blank])
    assert images.inspect_image(source).pages == 3
    monkeypatch.setattr(images, "MAX_FRAMES", 2)
    with pytest.raises(DocumentTooLarge, match="3 pages"):
        images.inspect_image(source)


def _ink_rows_and_right(image: Image.Image, box: tuple[int, int, int, int]) -> tuple[int, int]:
    """The height of the dark ink inside ``box`` (rows with any) and its rightmost column."""
    dark = np.asarray(image.convert("L").crop(box)) < 128
    rows, columns = np.flatnonzero(dark.any(axis=1)), np.flatnonzero(dark.any(axis=0))
    return int(rows[-1] - rows[0] + 1), int(box[0] + columns[-1])


@needs_font
def test_a_line_is_drawn_at_its_own_size_using_the_free_space_to_its_right() -> None:
    """A one-line label whose translation is three times as long used to shrink into its own box (and a
    short translation grew to a third larger than the source); now a translation is drawn at most at the
    source's own size, and a line that would have to shrink first goes on into the free space to its right,
    an em short of what is there (a rule), never over it."""
    image = Image.new("RGB", (1200, 200), "white")
    draw = ImageDraw.Draw(image)
    draw.text((40, 40), "Name", font=ImageFont.truetype(str(DEJAVU), 40), fill="black")
    draw.line((900, 0, 900, 200), fill="black", width=3)  # a rule the text must stop before
    box = tuple(int(v) for v in draw.textbbox((40, 40), "Name", font=ImageFont.truetype(str(DEJAVU), 40)))
    block = ocr.OcrBlock("Name", box, 95.0, ("Name",), float(box[3] - box[1]), 1)  # type: ignore[arg-type]
    source_height, _ = _ink_rows_and_right(image, (0, 0, 880, 200))
    warnings: list[str] = []
    longer = render.draw_translations(image, [(block, "Nombre completo del titular")], "Latn", warnings)
    height, right = _ink_rows_and_right(longer, (0, 0, 880, 200))
    assert height >= 0.85 * source_height, (height, source_height)  # not shrunk into "Name"'s box
    assert box[2] + 200 < right < 900 - 20  # on to the right, short of the rule
    assert (np.asarray(longer)[:, 899:902] == np.asarray(image)[:, 899:902]).all()  # the rule untouched
    shorter = render.draw_translations(image, [(block, "Nom")], "Latn", warnings)
    height, _ = _ink_rows_and_right(shorter, (0, 0, 880, 200))
    assert height <= 1.1 * source_height, (height, source_height)  # not drawn larger than the source
    assert warnings == []
