"""Which of the words Tesseract reads are the text (issue 11): OCR's second look at blocks it found but
read no word in (:func:`read_empty_blocks`), icons it reads as letters (:func:`without_icons`), and list
bullets, misread ones included (:func:`bullet_words`, :func:`word_text`). :mod:`.ocr` groups the words
into paragraphs; these decide what goes in.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dragoman.documents._tesseract import image_to_data

if TYPE_CHECKING:
    from PIL import Image

log = logging.getLogger("dragoman.documents.ocr")

#: An icon Tesseract reads as a letter or a mark before a line's text (:func:`without_icons`): a word of
#: at most ICON_CHARS characters, ICON_HEIGHT times the median height of the line's words (itself
#: included) or more, and apart from the next word by ICON_GAP of that height or more (a drop cap is set
#: against its word).
ICON_CHARS = 2
ICON_HEIGHT = 1.5
ICON_GAP = 0.8

#: A list item's bullet as Tesseract reads it at the start of a line: the bullets themselves, and the
#: symbols it takes a printed bullet for (a scanned manual's bullets came back as ``¢``, ``©``, ``®``, ``*``).
#: A line that starts with one of these alone, before a word, starts a paragraph (:func:`.ocr._wraps`); where
#: :data:`BULLET_LINES` lines or more of a page do, the misread ones are written ``•`` again.
BULLETS = frozenset("•·◦▪▫‣⁃∙●○■□-*¢©®")
TRUE_BULLETS = frozenset("•·◦▪▫‣⁃∙●○■□-")
BULLET_LINES = 2

#: Blocks Tesseract found but read no word in, read again on their own (:func:`read_empty_blocks`): at
#: most SECOND_LOOKS an image, of a height in SECOND_LOOK_HEIGHTS (px: a line of text or a few, not a
#: photo), cropped with SECOND_LOOK_MARGIN px around; kept when their words' mean confidence is at least
#: SECOND_LOOK_CONFIDENCE.
SECOND_LOOKS = 8
SECOND_LOOK_HEIGHTS = (8, 200)
SECOND_LOOK_MARGIN = 6
SECOND_LOOK_CONFIDENCE = 60


def read_empty_blocks(
    image: Image.Image, data: dict[str, list[Any]], tesseract_lang: str, deadline: float
) -> dict[str, list[Any]]:
    """``data`` with the words of the blocks Tesseract found but read nothing in, each read again on its
    own. Its thresholding is made for the whole page, and light text on a colour (a button's white on
    green) can fall on the wrong side of it: the block is found, its words are not. Each such block the
    size of a line or a few (:data:`SECOND_LOOK_HEIGHTS`, as wide as high or wider, at most
    :data:`SECOND_LOOKS` an image) is cropped with a margin and read as one block of text; what comes back
    with letters and a mean confidence of :data:`SECOND_LOOK_CONFIDENCE` or more joins the page's words as
    a block of its own. The reads share what is left of the OCR's time."""
    levels, texts, confs = data.get("level", []), data.get("text", []), data.get("conf", [])
    worded = {
        (data["page_num"][i], data["block_num"][i])
        for i, level in enumerate(levels)
        if level == 5 and str(texts[i]).strip() and float(confs[i]) >= 0
    }
    low, high = SECOND_LOOK_HEIGHTS
    empty = [
        i
        for i, level in enumerate(levels)
        if level == 2
        and (data["page_num"][i], data["block_num"][i]) not in worded
        and low <= int(data["height"][i]) <= high
        and int(data["width"][i]) >= int(data["height"][i])
    ][:SECOND_LOOKS]
    next_block = max((int(b) for b in data.get("block_num", [0])), default=0) + 1
    for done, i in enumerate(empty):
        left, top = int(data["left"][i]), int(data["top"][i])
        box = (
            max(0, left - SECOND_LOOK_MARGIN),
            max(0, top - SECOND_LOOK_MARGIN),
            min(image.width, left + int(data["width"][i]) + SECOND_LOOK_MARGIN),
            min(image.height, top + int(data["height"][i]) + SECOND_LOOK_MARGIN),
        )
        remaining = deadline - time.monotonic()
        if remaining < 1:
            log.debug("OCR: no time left to read %d empty block(s) again", len(empty) - done)
            break
        found = image_to_data(
            image.crop(box), tesseract_lang, 0 if math.isinf(remaining) else remaining, psm=6
        )
        words = [
            j
            for j, level in enumerate(found.get("level", []))
            if level == 5 and str(found["text"][j]).strip() and float(found["conf"][j]) >= 0
        ]
        if (
            not words
            or not any(c.isalpha() for j in words for c in str(found["text"][j]))
            or statistics.fmean(float(found["conf"][j]) for j in words) < SECOND_LOOK_CONFIDENCE
        ):
            continue
        shift = {"left": box[0], "top": box[1]}
        for j in words:
            for key, column in data.items():
                if key == "page_num":
                    column.append(data["page_num"][i])
                elif key == "block_num":
                    column.append(next_block + int(found["block_num"][j]))
                else:
                    value = found.get(key, [0] * len(found["level"]))[j]
                    column.append(int(value) + shift[key] if key in shift else value)
        next_block += max(int(found["block_num"][j]) for j in words) + 1
    return data


def without_icons(
    line: list[int],
    texts: Sequence[Any],
    left: list[int],
    top: list[int],
    right: list[int],
    bottom: list[int],
) -> list[int]:
    """A line's words (its word rows, in order) without the icons Tesseract read as a letter or a mark (a
    screenshot's info, help or avatar symbol): a word of at most :data:`ICON_CHARS` characters,
    :data:`ICON_HEIGHT` times the median height of the line's words or more (the median counts the icon
    too, so in a line of two words only an icon three times as tall as the word is found), that starts the
    line or a part of it (after a gap of :data:`ICON_GAP` of that height or more) and is as far from the
    next word. Left out of the text, the icon stays in the image: the translation is painted over the
    words' boxes only."""
    if len(line) < 2:
        return line
    height = statistics.median(bottom[i] - top[i] for i in line)
    if height <= 0:
        return line
    gap = ICON_GAP * height
    kept = []
    for position, i in enumerate(line):
        icon = (
            position + 1 < len(line)
            and len(str(texts[i]).strip()) <= ICON_CHARS
            and bottom[i] - top[i] >= ICON_HEIGHT * height
            and (position == 0 or left[i] - right[line[position - 1]] >= gap)
            and left[line[position + 1]] - right[i] >= gap
        )
        if not icon:
            kept.append(i)
    return kept


def bullet_words(
    lines: Mapping[tuple[int, int, int], Mapping[int, list[int]]], data: Mapping[str, Sequence[Any]]
) -> frozenset[int]:
    """The words that are a list item's bullet: one of :data:`BULLETS` alone at the start of a line, before
    a word. A misread bullet (``©``, ``¢``) counts only where :data:`BULLET_LINES` lines or more of its page
    start so; a dash or a bullet counts always."""
    found: dict[int, list[int]] = {}
    for (page, _, _), numbered in lines.items():
        for line in numbered.values():
            text = str(data["text"][line[0]]).strip()
            if len(line) > 1 and len(text) == 1 and text in BULLETS:
                found.setdefault(page, []).append(line[0])
    return frozenset(
        i
        for on_page in found.values()
        for i in on_page
        if len(on_page) >= BULLET_LINES or str(data["text"][i]).strip() in TRUE_BULLETS
    )


def word_text(data: Mapping[str, Sequence[Any]], i: int, bullets: frozenset[int]) -> str:
    """A word's text; a bullet Tesseract misread (``©``) as the bullet it is."""
    text = str(data["text"][i]).strip()
    return "•" if i in bullets and text not in TRUE_BULLETS else text
