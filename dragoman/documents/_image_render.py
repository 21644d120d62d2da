"""Drawing translations over an image: each OCR box filled with the colour around it, the translation
written inside in a font that has the target's script, wrapped and shrunk to fit, then the pages saved in
the input's format and modes (a TIFF one page at a time).

Fonts: DejaVu Sans (``fonts-dejavu-core``) for Latin, Cyrillic, Greek, Armenian, Georgian, Hebrew and
Arabic; Noto (``fonts-noto-core``) for the Indic and South-East Asian scripts; Noto Sans CJK
(``fonts-noto-cjk``) for Chinese, Japanese and Korean. A missing font is a warning naming its package, as
is right-to-left text without libraqm (Pillow then cannot shape it).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dragoman.documents import ocr
from dragoman.errors import DocumentFormatError

if TYPE_CHECKING:
    import numpy as np
    from PIL import Image, ImageFont

Info = dict[str | tuple[int, int], Any]

#: Smallest font size a translation is shrunk to; past that it overflows its box.
MIN_FONT_PX = 8
_LINE_PITCH = 1.15  # line distance, in font sizes
_FONT_DIRS = (
    Path("/usr/share/fonts/truetype/dejavu"),
    Path("/usr/share/fonts/truetype/noto"),
    Path("/usr/share/fonts/opentype/noto"),
    Path("/usr/share/fonts/opentype/noto-cjk"),
)
_DEJAVU_SCRIPTS = frozenset({"Latn", "Cyrl", "Grek", "Armn", "Geor", "Hebr", "Arab"})
_CJK_INDEX = {"Jpan": 0, "Hang": 1, "Hans": 2, "Hant": 3}  # faces of NotoSansCJK-Regular.ttc
_NOTO_NAMES = {
    "Deva": "Devanagari", "Beng": "Bengali", "Guru": "Gurmukhi", "Gujr": "Gujarati", "Orya": "Oriya",
    "Taml": "Tamil", "Telu": "Telugu", "Knda": "Kannada", "Mlym": "Malayalam", "Sinh": "Sinhala",
    "Thai": "Thai", "Laoo": "Lao", "Khmr": "Khmer", "Mymr": "Myanmar", "Ethi": "Ethiopic",
    "Tibt": "Tibetan", "Tfng": "Tifinagh", "Olck": "OlChiki",
}  # fmt: skip
_RTL_SCRIPTS = frozenset({"Arab", "Hebr"})


def font_for(script: str) -> tuple[Path, int] | None:
    """A TrueType font (file and face index) with the glyphs of ``script``, or None when none is installed."""
    if script in _CJK_INDEX:
        names: tuple[tuple[str, int], ...] = (("NotoSansCJK-Regular.ttc", _CJK_INDEX[script]),)
    elif script in _NOTO_NAMES:
        names = tuple((f"Noto{kind}{_NOTO_NAMES[script]}-Regular.ttf", 0) for kind in ("Sans", "Serif"))
    else:
        names = (("DejaVuSans.ttf", 0), ("NotoSans-Regular.ttf", 0))
    for name, index in names:
        for folder in _FONT_DIRS:
            if (folder / name).is_file():
                return folder / name, index
    return None


def font_package(script: str) -> str:
    if script in _CJK_INDEX:
        return "fonts-noto-cjk"
    return "fonts-dejavu-core" if script in _DEJAVU_SCRIPTS else "fonts-noto-core"


@functools.lru_cache(maxsize=256)
def _font(file: Path | None, index: int, size: int) -> ImageFont.FreeTypeFont:
    from PIL import ImageFont

    if file is None:
        return ImageFont.load_default(size)  # type: ignore[return-value]
    return ImageFont.truetype(str(file), size, index=index)


@dataclass(frozen=True)
class _Layout:
    font: ImageFont.FreeTypeFont
    lines: tuple[str, ...]
    top: int  # from the first baseline up to the highest ink (negative)
    bottom: int  # from the last baseline down to the lowest ink
    pitch: int
    width: float

    @property
    def height(self) -> int:
        return -self.top + (len(self.lines) - 1) * self.pitch + self.bottom


def _wrap(text: str, font: ImageFont.FreeTypeFont, width: float) -> list[str]:
    """Greedy wrapping at spaces (anywhere for text without spaces); words wider than ``width`` split."""
    spaced = " " in text.strip()
    tokens = text.split() if spaced else list(text.strip())
    sep = " " if spaced else ""
    lines: list[str] = []
    current = ""
    for token in tokens:
        candidate = f"{current}{sep}{token}" if current else token
        if font.getlength(candidate) <= width:
            current = candidate
            continue
        if current:
            lines.append(current)
        current = token
        while len(current) > 1 and font.getlength(current) > width:  # a word wider than the box
            cut = max(
                1, next((i for i in range(len(current), 0, -1) if font.getlength(current[:i]) <= width), 1)
            )
            lines.append(current[:cut])
            current = current[cut:]
    if current:
        lines.append(current)
    return lines or [""]


def _layout(text: str, file: Path | None, index: int, size: int, width: float) -> _Layout:
    font = _font(file, index, size)
    lines = tuple(_wrap(text, font, width))
    boxes = [font.getbbox(line or " ", anchor="ls") for line in lines]
    return _Layout(
        font=font,
        lines=lines,
        top=int(min(b[1] for b in boxes)),
        bottom=int(max(b[3] for b in boxes)),
        pitch=max(1, round(size * _LINE_PITCH)),
        width=max(font.getlength(line) for line in lines),
    )


def fit_text(text: str, font: tuple[Path, int] | None, width: int, height: int, max_size: int) -> _Layout:
    """The largest layout of ``text`` (at most ``max_size`` px) that fits ``width`` x ``height``; at
    :data:`MIN_FONT_PX` when none fits (it then overflows)."""
    file, index = font if font is not None else (None, 0)
    low, high = MIN_FONT_PX, max(MIN_FONT_PX, max_size)
    best: _Layout | None = None
    while low <= high:
        size = (low + high) // 2
        layout = _layout(text, file, index, size, width)
        if layout.height <= height and layout.width <= width:
            best, low = layout, size + 1
        else:
            high = size - 1
    return best or _layout(text, file, index, MIN_FONT_PX, width)


Colour = tuple[int, ...]


def _colours(
    pixels: np.ndarray, box: tuple[int, int, int, int], region: tuple[int, int, int, int]
) -> tuple[Colour, Colour]:
    """The background (median of a ring around ``region``) and the text colour (the median of the 5% of
    pixels in ``box`` farthest from the background; black or white when the box shows no contrast)."""
    import numpy as np

    height, width = pixels.shape[:2]
    x0, y0, x1, y1 = region
    ring = pixels[max(0, y0 - 3) : min(height, y1 + 3), max(0, x0 - 3) : min(width, x1 + 3)].astype(int)
    mask = np.ones(ring.shape[:2], dtype=bool)
    mask[y0 - max(0, y0 - 3) : y1 - max(0, y0 - 3), x0 - max(0, x0 - 3) : x1 - max(0, x0 - 3)] = False
    border = ring[mask] if mask.any() else ring.reshape(-1, ring.shape[2])
    background = np.median(border, axis=0)
    inside = pixels[box[1] : box[3], box[0] : box[2]].reshape(-1, pixels.shape[2]).astype(int)
    distance = np.abs(inside[:, :3] - background[:3]).sum(axis=1) if inside.size else np.zeros(1)
    if distance.max() < 48:
        light = float(background[:3].mean()) >= 128
        ink = np.array([0, 0, 0, 255] if light else [255, 255, 255, 255])[: pixels.shape[2]]
    else:
        strongest = distance >= max(0.6 * distance.max(), np.percentile(distance, 95))  # stroke cores
        ink = np.median(inside[strongest], axis=0)
        if pixels.shape[2] == 4:
            ink[3] = 255
    return tuple(int(v) for v in background), tuple(int(v) for v in ink)


def _free_right(
    pixels: np.ndarray, region: tuple[int, int, int, int], background: Colour, limit: int, gap: int
) -> int:
    """How far right of ``region`` (up to ``limit``) its rows show nothing but ``background``: the x where
    the first column with anything else on it starts (a word, a rule, an icon: on 15% of the rows or more),
    less ``gap``."""
    import numpy as np

    x0, y0, x1, y1 = region
    if limit <= x1:
        return x1
    strip = pixels[y0:y1, x1:limit, :3].astype(int)
    marked = (np.abs(strip - np.array(background[:3])).sum(axis=2) >= 48).sum(axis=0)
    busy = marked >= max(2, 0.15 * (y1 - y0))  # (a speck of a scan's dust is not)
    if not busy.any():
        return limit
    first = int(np.argmax(busy))
    return x1 + max(0, first - gap)


def draw_translations(
    image: Image.Image, items: list[tuple[ocr.OcrBlock, str]], script: str, warns: list[str]
) -> Image.Image:
    """A copy of ``image`` with each block's box filled with its surrounding colour and its translation
    written inside. A block whose translation is its own text (a name, a domain, a mark read as a letter)
    is left as it is: the original pixels show the same text in its own font and weight, or the icon."""
    import numpy as np
    from PIL import ImageDraw, features

    alpha = image.mode in ("RGBA", "LA", "PA", "La", "RGBa") or "transparency" in image.info
    work = image.convert("RGBA") if alpha else ocr.prepare(image).convert("RGB")
    items = [
        (block, translation) for block, translation in items if translation.strip() != block.text.strip()
    ]
    if not items:
        return work
    font = font_for(script) or font_for("Latn")
    if font_for(script) is None:
        warns.append(
            f"font_missing: no font with {script} glyphs is installed; the rendered image may show boxes "
            f"instead of letters. Run `apt-get install {font_package(script)}`"
        )
    rtl = script in _RTL_SCRIPTS
    raqm = features.check("raqm")
    if rtl and not raqm:
        warns.append(
            "rtl_layout: Pillow has no libraqm, so right-to-left text is drawn unshaped; run "
            "`apt-get install libraqm0` for correct rendering"
        )
    pixels = np.asarray(work)
    draw = ImageDraw.Draw(work)
    plans = []
    overflow = 0
    # the text's right edge on the page: its blocks' rightmost, or as far from the right edge as the
    # leftmost is from the left one
    margin = max(
        *(block.bbox[2] for block, _ in items), work.width - min(block.bbox[0] for block, _ in items)
    )
    for block, translation in items:
        pad = max(2, round(block.line_height * 0.2))
        x0, y0, x1, y1 = block.bbox
        region = (max(0, x0 - pad), max(0, y0 - pad), min(work.width, x1 + pad), min(work.height, y1 + pad))
        background, ink = _colours(pixels, block.bbox, region)
        width, height = region[2] - region[0], region[3] - region[1]
        # the source's own size in this font (its longest line's ink as tall as the lines read): the
        # translation is never drawn larger
        longest = max(block.lines or (block.text,), key=len)
        cap = round(block.line_height * 1.35)
        size = round(fit_text(longest, font, 1 << 20, math.ceil(block.line_height) + 1, cap).font.size)
        layout = fit_text(translation, font, width, height, size)
        if layout.font.size < size and len(block.lines) == 1 and not rtl:
            # a line (a label, a list item) that had to shrink takes the free space to its right, an em
            # short of whatever is there (a paragraph keeps its column's width)
            free = _free_right(pixels, region, background, min(work.width, margin + pad), size)
            if free > region[2]:
                width = free - region[0]
                layout = fit_text(translation, font, width, height, size)
        overflow += layout.height > height or layout.width > width
        plans.append((region, background, ink, layout))
    for region, background, _, _ in plans:
        draw.rectangle((region[0], region[1], region[2] - 1, region[3] - 1), fill=background)
    for region, _, ink, layout in plans:
        y = region[1] + max(0, (region[3] - region[1] - layout.height) // 2) - layout.top
        for line in layout.lines:
            if rtl and raqm:
                draw.text((region[2], y), line, font=layout.font, fill=ink, anchor="rs", direction="rtl")
            else:
                draw.text((region[0], y), line, font=layout.font, fill=ink, anchor="ls")
            y += layout.pitch
    if overflow:
        warns.append(
            f"text_overflow: {overflow} translation(s) did not fit their box even at {MIN_FONT_PX} px"
        )
    return work


def save_pages(pages: Iterable[tuple[Image.Image, str]], output: Path, fmt: str, info: Info) -> None:
    """Write rendered pages, each given with its original mode, as ``fmt`` (every page for TIFF, appended
    one at a time), in modes close to the input's."""
    from PIL import TiffImagePlugin

    params: dict[str, object] = {k: info[k] for k in ("dpi", "icc_profile") if info.get(k)}
    if fmt == "JPEG":
        params["quality"] = 92
    try:
        if fmt != "TIFF":
            image, mode = next(iter(pages))
            _output_mode(image, mode, fmt).save(output, format=fmt, **params)
            return
        with TiffImagePlugin.AppendingTiffWriter(str(output), new=True) as tiff:
            for image, mode in pages:
                page = _output_mode(image, mode, fmt)
                page.save(
                    tiff, format="TIFF", compression="group4" if page.mode == "1" else "tiff_lzw", **params
                )
                tiff.newFrame()
    except (OSError, ValueError) as exc:
        raise DocumentFormatError(f"could not write the rendered image as {fmt}: {exc}") from exc


def _output_mode(page: Image.Image, mode: str, fmt: str) -> Image.Image:
    if mode == "1":
        return page.convert("L").point(lambda v: 255 if v >= 128 else 0).convert("1")
    if mode in ("LA", "La") and fmt != "JPEG":
        return page.convert("LA")
    if mode in ("L", "LA", "La", "I", "I;16", "I;16B", "I;16L", "F"):
        return page.convert("L")
    return page.convert("RGB") if fmt == "JPEG" else page
