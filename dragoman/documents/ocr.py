"""OCR with Tesseract: the core shared by the image handler and scanned PDF pages.

:func:`ocr_image` reads a Pillow image and groups Tesseract's word boxes (``image_to_data``) into paragraphs
(:class:`OcrBlock`): the words of a paragraph are joined with spaces across its lines (a word hyphenated at a
line end is joined back), because a paragraph translates far better as a whole than line by line; the lines
are kept too, for layout. The layout survives (:func:`blocks_from_data`): a line is cut at gaps far wider
than a word space, or at narrower gaps that line up over the rows of a table (its gutters), so a form's label
and value, the cells of a table row and two columns are separate blocks, each drawn back in its own box;
wrapped lines are joined again, rows of a form or table are not, nor are the lines of a column of values (a
name, a street, a town, a phone number: :func:`_listed`); ruling lines are erased before Tesseract reads
(:func:`erase_rules`), since they make it skip cells.

Languages are Tesseract's traineddata codes (``eng``, ``chi_sim``; several joined with ``+``);
:func:`tesseract_language` maps FLORES-200 codes onto them and :func:`check_languages` says which Debian
package installs a missing one. Tesseract runs as a program with its own environment (:mod:`._tesseract`).
Nothing runs at import time: ``tesseract --list-langs`` is asked the first time OCR is needed, and again once
Tesseract or its tessdata directory changed (:func:`refresh` forces it); :func:`status` tells what is there.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import math
import re
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from dragoman.documents._ocr_words import bullet_words, read_empty_blocks, without_icons, word_text
from dragoman.documents._tesseract import apt_package as apt_package
from dragoman.documents._tesseract import image_to_data, installed
from dragoman.documents._tesseract import refresh as refresh
from dragoman.documents._tesseract import status as status
from dragoman.documents._tesseract import tesseract_environment as tesseract_environment
from dragoman.errors import OcrUnavailable
from dragoman.languages.catalogue import get, resolve

if TYPE_CHECKING:
    import numpy as np
    from PIL import Image

log = logging.getLogger("dragoman.documents.ocr")

#: Longest one Tesseract run may take (one image or page), in seconds.
OCR_TIMEOUT_SECONDS = 300
#: Most languages tried at once when the source language is not known (each one slows Tesseract down).
MAX_DEFAULT_LANGUAGES = 4

#: FLORES-200 code -> Tesseract traineddata code (tessdata 4/5 names; Debian ships each as
#: ``tesseract-ocr-<code with - for _>``). Arabic dialects read with the Standard Arabic model.
_TESSERACT: dict[str, str] = {
    "afr_Latn": "afr", "amh_Ethi": "amh", "arb_Arab": "ara", "acm_Arab": "ara", "acq_Arab": "ara",
    "aeb_Arab": "ara", "ajp_Arab": "ara", "apc_Arab": "ara", "ars_Arab": "ara", "ary_Arab": "ara",
    "arz_Arab": "ara", "asm_Beng": "asm", "azj_Latn": "aze", "bel_Cyrl": "bel", "ben_Beng": "ben",
    "bod_Tibt": "bod", "bos_Latn": "bos", "bul_Cyrl": "bul", "cat_Latn": "cat", "ceb_Latn": "ceb",
    "ces_Latn": "ces", "zho_Hans": "chi_sim", "zho_Hant": "chi_tra", "yue_Hant": "chi_tra",
    "cym_Latn": "cym", "dan_Latn": "dan", "deu_Latn": "deu", "dzo_Tibt": "dzo", "ell_Grek": "ell",
    "eng_Latn": "eng", "epo_Latn": "epo", "est_Latn": "est", "eus_Latn": "eus", "fao_Latn": "fao",
    "pes_Arab": "fas", "prs_Arab": "fas", "tgl_Latn": "fil", "fin_Latn": "fin", "fra_Latn": "fra",
    "gla_Latn": "gla", "gle_Latn": "gle", "glg_Latn": "glg", "guj_Gujr": "guj", "hat_Latn": "hat",
    "heb_Hebr": "heb", "hin_Deva": "hin", "hrv_Latn": "hrv", "hun_Latn": "hun", "hye_Armn": "hye",
    "ind_Latn": "ind", "isl_Latn": "isl", "ita_Latn": "ita", "jav_Latn": "jav", "jpn_Jpan": "jpn",
    "kan_Knda": "kan", "kat_Geor": "kat", "kaz_Cyrl": "kaz", "khm_Khmr": "khm", "kir_Cyrl": "kir",
    "kmr_Latn": "kmr", "kor_Hang": "kor", "lao_Laoo": "lao", "lvs_Latn": "lav", "lit_Latn": "lit",
    "ltz_Latn": "ltz", "mal_Mlym": "mal", "mar_Deva": "mar", "mkd_Cyrl": "mkd", "mlt_Latn": "mlt",
    "khk_Cyrl": "mon", "mri_Latn": "mri", "zsm_Latn": "msa", "mya_Mymr": "mya", "npi_Deva": "nep",
    "nld_Latn": "nld", "nob_Latn": "nor", "nno_Latn": "nor", "oci_Latn": "oci", "ory_Orya": "ori",
    "pan_Guru": "pan", "pol_Latn": "pol", "por_Latn": "por", "pbt_Arab": "pus", "quy_Latn": "que",
    "ron_Latn": "ron", "rus_Cyrl": "rus", "san_Deva": "san", "sin_Sinh": "sin", "slk_Latn": "slk",
    "slv_Latn": "slv", "snd_Arab": "snd", "spa_Latn": "spa", "als_Latn": "sqi", "srp_Cyrl": "srp",
    "sun_Latn": "sun", "swh_Latn": "swa", "swe_Latn": "swe", "tam_Taml": "tam", "tat_Cyrl": "tat",
    "tel_Telu": "tel", "tgk_Cyrl": "tgk", "tha_Thai": "tha", "tir_Ethi": "tir", "tur_Latn": "tur",
    "uig_Arab": "uig", "ukr_Cyrl": "ukr", "urd_Arab": "urd", "uzn_Latn": "uzb", "vie_Latn": "vie",
    "ydd_Hebr": "yid", "yor_Latn": "yor",
}  # fmt: skip

#: When the source is unknown, installed Latin-script languages are tried in this order of preference.
_DEFAULT_PREFERENCE = ("eng", "spa", "fra", "deu", "por", "ita", "nld", "cat", "pol", "tur", "ind", "vie")

#: A line is cut where two neighbouring words are further apart than this many word heights (about 1.5 em)
#: and :data:`SPLIT_SPACES` times the page's usual word space: a table cell, a form's label and value, or a
#: column boundary, never a space (even a justified one).
SPLIT_HEIGHTS = 2.0
SPLIT_SPACES = 3.0
#: The pieces of two lines one above the other (either line cut) are one paragraph only when at most this
#: many word heights apart, and when the lower one's first word would not have fitted at the end of the
#: upper one with FIT_SLACK word heights to spare (see :func:`_wraps`).
JOIN_HEIGHTS = 2.0
FIT_SLACK = 1.5
_ROW_LOOK = 8
#: A narrower gap still cuts a line when it is a table's gutter: at least GUTTER_HEIGHTS word heights and
#: GUTTER_SPACES word spaces wide, and lined up with such gaps in at least GUTTER_MIN_LINES lines and
#: GUTTER_SHARE of the lines of its paragraph (:func:`_gutters`). Prose never lines up gaps that wide.
GUTTER_HEIGHTS = 0.8
GUTTER_SPACES = 2.0
GUTTER_MIN_LINES = 3
GUTTER_SHARE = 0.6
#: A paragraph of at least this many lines is read as a column of values, one block per line, when every
#: line ends as an item does and the next one starts as an item does (:func:`_listed`).
LIST_MIN_LINES = 3
#: What a line that goes on into the next one ends with (a sentence's comma, a hyphen, a dash, a slash).
_CONTINUES = ",-\u2010\u2013\u2014/&+("
#: Punctuation stripped from a line's last word before its case is looked at (``lid.`` is ``lid``).
_CLOSING = ".:;!?\"')]\u201d\u2019\u00bb"

#: Ruling lines (:func:`erase_rules`): pixels darker than this (0-255) in a straight run at least
#: RULE_FRACTION of the image's side long (and MIN_RULE_PX) and at most MAX_RULE_PX thick. Images over
#: MAX_RULE_PIXELS are read as they are (the masks take a few bytes a pixel).
RULE_DARKNESS = 160
RULE_FRACTION = 0.06
MIN_RULE_PX = 100
MAX_RULE_PX = 8
MAX_RULE_PIXELS = 60_000_000
_RULE_STRIPE = 256

#: A word cut by a hyphen at a line's end (a lone ``-``, an empty table cell, is not).
_HYPHENATED = re.compile(r"[^\W\d_]-$")
#: The end of a sentence (closing quotes and brackets may follow).
_SENTENCE_END = re.compile(r"[.!?:;\u2026\u3002\uff01\uff1f\uff1a\uff1b][\"'\u201d\u2019\u00bb)\]]*$")


@dataclass(frozen=True)
class OcrBlock:
    """A paragraph Tesseract found: its text (lines joined with spaces), lines, box and confidence."""

    text: str
    bbox: tuple[int, int, int, int]  # x0, y0, x1, y1 in pixels
    confidence: float  # mean word confidence, 0-100
    lines: tuple[str, ...]
    line_height: float  # median height of its lines, in pixels
    words: int


def tesseract_language(flores: str) -> str:
    """The Tesseract traineddata code for a language (any code :func:`resolve` accepts)."""
    code = resolve(flores)
    found = _TESSERACT.get(code)
    if found is None:
        raise OcrUnavailable(
            f"Tesseract has no OCR model for {get(code).name} ({code}); extract the text another way and "
            "translate it with the translate tool, or pass a source language Tesseract reads"
        )
    return found


def flores_script(tesseract_code: str) -> str | None:
    """The ISO 15924 script a Tesseract language is written in, when it is one of the table's."""
    for flores, code in _TESSERACT.items():
        if code == tesseract_code:
            return flores.split("_", 1)[1]
    return None


def installed_languages() -> set[str]:
    """The Tesseract languages installed (``eng``, ``osd``, ...); asked again once Tesseract changed."""
    return set(installed().languages)


def check_languages(tesseract_lang: str) -> None:
    """Raise :class:`OcrUnavailable`, naming the packages to install, unless every language is there."""
    wanted = [code for code in tesseract_lang.split("+") if code]
    if not wanted:
        raise OcrUnavailable("no OCR language given; pass a source language or install tesseract-ocr-eng")
    installed = installed_languages()
    missing = [code for code in wanted if code not in installed]
    if missing:
        packages = " ".join(apt_package(code) for code in missing)
        have = ", ".join(sorted(installed - {"osd", "equ"})) or "none"
        raise OcrUnavailable(
            f"the Tesseract language {'+'.join(missing)} is not installed (installed: {have}); run "
            f"`apt-get install {packages}`, or pass a source language that is installed"
        )


def default_languages(installed: Iterable[str] | None = None) -> str:
    """The languages to read an image of unknown language with: English first, then other installed
    Latin-script languages (at most :data:`MAX_DEFAULT_LANGUAGES`), as ``eng+spa+fra+deu``."""
    have = set(installed_languages() if installed is None else installed) - {"osd", "equ"}
    if not have:
        raise OcrUnavailable("no Tesseract language is installed; run `apt-get install tesseract-ocr-eng`")
    latin = [code for code in _DEFAULT_PREFERENCE if code in have]
    latin += sorted(code for code in have if flores_script(code) == "Latn" and code not in latin)
    chosen = latin[:MAX_DEFAULT_LANGUAGES] or sorted(have)[:MAX_DEFAULT_LANGUAGES]
    return "+".join(chosen)


def prepare(image: Image.Image) -> Image.Image:
    """An image Tesseract reads well: transparency flattened onto white, exotic modes made RGB or L."""
    from PIL import Image as PILImage

    if image.mode in ("1", "L", "RGB"):
        return image
    if image.mode == "P":
        image = image.convert("RGBA" if "transparency" in image.info else "RGB")
    if image.mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        rgba = image.convert("RGBA")
        flat = PILImage.new("RGB", rgba.size, (255, 255, 255))
        flat.paste(rgba, mask=rgba.getchannel("A"))
        return flat
    if image.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        low, high = cast("tuple[float, float]", image.getextrema())
        scale = 255.0 / (high - low) if high != low else 1.0
        return image.point(lambda v: (v - low) * scale).convert("L")
    return image.convert("RGB")


def erase_rules(image: Image.Image) -> Image.Image:
    """A copy of ``image`` (mode ``1``, ``L`` or ``RGB``) without the ruling lines of tables and forms.

    Tesseract reads a ruled table badly: the lines around a cell make it take the cell for a picture and
    skip its text. Dark pixels in a thin straight run longer than :data:`RULE_FRACTION` of the image's
    side (at least :data:`MIN_RULE_PX`) are painted white: a horizontal run at most :data:`MAX_RULE_PX`
    thick, or a vertical one as thin. Letters are shorter, and filled areas (a dark header cell) are thick,
    so they stay. The boxes Tesseract then finds are in the same coordinates. Linear in the pixels.
    """
    import numpy as np
    from PIL import Image as PILImage

    if image.width * image.height > MAX_RULE_PIXELS:
        return image
    grey = np.array(image.convert("L"))
    height, width = grey.shape
    dark = grey < RULE_DARKNESS
    if not dark.any():
        return image
    across, down = (
        max(MIN_RULE_PX, round(width * RULE_FRACTION)),
        max(MIN_RULE_PX, round(height * RULE_FRACTION)),
    )
    long_down, thin_down = np.zeros_like(dark), np.zeros_like(dark)
    for x in range(0, width, _RULE_STRIPE):
        runs = _run_lengths(dark[:, x : x + _RULE_STRIPE].T).T
        long_down[:, x : x + _RULE_STRIPE] = runs >= down
        thin_down[:, x : x + _RULE_STRIPE] = runs <= MAX_RULE_PX
    erased = 0
    for y in range(0, height, _RULE_STRIPE):
        runs = _run_lengths(dark[y : y + _RULE_STRIPE])
        rows = slice(y, y + _RULE_STRIPE)
        rule = ((runs >= across) & thin_down[rows]) | (long_down[rows] & (runs <= MAX_RULE_PX))
        grey[rows][rule] = 255
        erased += int(rule.sum())
    if not erased:
        return image
    log.debug("erased %d pixels of ruling lines", erased)
    out = PILImage.fromarray(grey, mode="L")
    return out if image.mode != "1" else out.convert("1")


def _run_lengths(mask: np.ndarray) -> np.ndarray:
    """For each True cell of a 2-D boolean array, the length of the run of True cells along its row that
    it belongs to (0 for False cells)."""
    import numpy as np

    rows, cols = mask.shape
    padded = np.zeros((rows, cols + 1), dtype=bool)
    padded[:, :cols] = mask
    flat = padded.ravel()
    edges = np.diff(flat.astype(np.int8), prepend=np.int8(0))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    lengths = (ends - starts).astype(np.int32)
    out = np.zeros(flat.size, dtype=np.int32)
    out[flat] = np.repeat(lengths, lengths)
    return out.reshape(rows, cols + 1)[:, :cols]


def ocr_image(
    image: Image.Image, tesseract_lang: str, *, timeout: int = OCR_TIMEOUT_SECONDS
) -> list[OcrBlock]:
    """The paragraphs Tesseract reads in ``image`` with languages ``tesseract_lang`` (``eng+spa``).

    Raises :class:`OcrUnavailable` when Tesseract or a language is missing, :class:`EngineTimeout` when
    it takes longer than ``timeout`` seconds, :class:`DocumentFormatError` when it cannot read the image.
    """
    check_languages(tesseract_lang)
    deadline = time.monotonic() + timeout if timeout else math.inf
    prepared = erase_rules(prepare(image))
    data = image_to_data(prepared, tesseract_lang, timeout)
    if data:
        data = read_empty_blocks(prepared, data, tesseract_lang, deadline)
    blocks = blocks_from_data(data) if data else []
    log.debug("OCR (%s) found %d paragraphs in a %dx%d image", tesseract_lang, len(blocks), *image.size)
    return blocks


def blocks_from_data(data: Mapping[str, Sequence[Any]]) -> list[OcrBlock]:
    """Group the word rows of Tesseract's TSV (as columns, see :func:`._tesseract.image_to_data`) into
    paragraphs, in reading order (Tesseract's block, paragraph, line and word numbers).

    Tesseract reads a form's label and its value, the cells of a table row, or two columns of text as one
    line when they sit at the same height. A line is cut where the gap between two words is far wider than a
    word space (:data:`SPLIT_HEIGHTS`, :data:`SPLIT_SPACES`), or where a narrower gap lines up with gaps of
    most of the paragraph's other lines (a table's gutter, :func:`_gutters`): each piece (a cell, a label, a
    value, a column's line) becomes a paragraph of its own, and the pieces of consecutive lines that sit one
    above the other and read as wrapped text are joined again (:func:`_wraps`), so a column reads down before
    the next one starts while table cells and form fields stay apart. Last, a paragraph is cut between two
    lines that are rows of a form or table (:func:`_cut_rows`).

    Tesseract also splits paragraphs too eagerly where line lengths vary; a paragraph whose last line runs to
    the right edge of its block without ending a sentence is joined with the next one of the same block
    (a sentence cut in two translates badly). Linear in the words (plus sorting).
    """
    lines: dict[tuple[int, int, int], dict[int, list[int]]] = {}
    for i, text in enumerate(data["text"]):
        if int(data["level"][i]) != 5 or not str(text).strip() or float(data["conf"][i]) < 0:
            continue
        key = (int(data["page_num"][i]), int(data["block_num"][i]), int(data["par_num"][i]))
        lines.setdefault(key, {}).setdefault(int(data["line_num"][i]), []).append(i)
    left = [int(v) for v in data["left"]]
    top = [int(v) for v in data["top"]]
    right = [int(x) + int(w) for x, w in zip(data["left"], data["width"], strict=True)]
    bottom = [int(y) + int(h) for y, h in zip(data["top"], data["height"], strict=True)]
    for numbered in lines.values():
        for number, line in numbered.items():
            numbered[number] = without_icons(line, data["text"], left, top, right, bottom)
    bullets = bullet_words(lines, data)
    hyphens = frozenset(i for i, text in enumerate(data["text"]) if _HYPHENATED.search(str(text).strip()))
    words = [(i, str(text).strip()) for i, text in enumerate(data["text"]) if int(data["level"][i]) == 5]
    boxes = _Boxes(
        left,
        top,
        right,
        bottom,
        hyphens,
        item_starts=frozenset(i for i, text in words if _starts_item(text)),
        item_ends=frozenset(i for i, text in words if _ends_item(text)),
        bullets=bullets,
    )
    spaces = _word_spaces(lines, boxes)
    regions: dict[tuple[int, int], tuple[int, int]] = {}
    for (page, block, _), numbered in lines.items():
        for i in (i for line in numbered.values() for i in line):
            x0, x1 = regions.get((page, block), (left[i], right[i]))
            regions[(page, block)] = (min(x0, left[i]), max(x1, right[i]))
    paragraphs: list[tuple[tuple[int, int] | None, list[list[int]]]] = []
    for key in sorted(lines):
        space = spaces.get(key[0], 0.0)
        in_order = [lines[key][n] for n in sorted(lines[key])]
        gutters = _gutters(in_order, boxes, space)
        pieces = [_split_line(line, boxes, space, gutters) for line in in_order]
        region = key[:2]
        whole = all(len(line) == 1 for line in pieces)
        listed = whole and _listed([line[0] for line in pieces], boxes)
        if listed:  # a column of values: each line an item of its own
            chains = [[line[0]] for line in pieces]
        else:
            chains = [part for chain in _chains(pieces, boxes, space) for part in _unlisted(chain, boxes)]
        first = chains[0]
        if paragraphs and paragraphs[-1][0] == region and whole and not listed:
            last = paragraphs[-1][1][-1]
            x0, x1 = regions[region]
            ends = _SENTENCE_END.search(str(data["text"][last[-1]]).strip()) is not None
            if not ends and max(right[i] for i in last) >= x1 - 0.15 * (x1 - x0):
                paragraphs[-1][1].extend(first)
                chains = chains[1:]
        elif paragraphs and _goes_on(paragraphs[-1][1], first, data, boxes):
            paragraphs[-1] = (region if whole and not listed else None, paragraphs[-1][1] + first)
            chains = chains[1:]
        paragraphs.extend((None, chain) for chain in chains[:-1])
        if chains:
            paragraphs.append((region if whole and not listed else None, chains[-1]))
    chains = [chain for _, chain in paragraphs]
    pages = [int(data["page_num"][chain[0][0]]) for chain in chains]
    chains = _rows_in_order(_cut_rows(chains, pages, boxes), boxes)
    return [_block(data, chain, bullets) for chain in chains]


def _goes_on(
    upper: list[list[int]], lower: list[list[int]], data: Mapping[str, Sequence[Any]], boxes: _Boxes
) -> bool:
    """Whether the ``lower`` paragraph (the first of a Tesseract block) goes on with the sentence the
    ``upper`` one (the paragraph read just before, in another block) leaves open: Tesseract puts a list
    item's last line, or a column's next lines, in a block of its own. Then the upper paragraph's last line
    has three words or more and does not end a sentence; the lower one starts with a lower-case letter, or
    under the text of the list item the upper one is (after its bullet: a hanging indent); on the same page,
    at most :data:`JOIN_HEIGHTS` line heights below it, starting at most that far left or right of the upper
    paragraph's last line, the two lines overlapping."""
    last, first = upper[-1], lower[0]
    if len(last) < 3 or first[0] in boxes.bullets or data["page_num"][last[0]] != data["page_num"][first[0]]:
        return False
    if _SENTENCE_END.search(str(data["text"][last[-1]]).strip()):
        return False
    x0, _, x1, y1 = boxes.span(last)
    lx0, ly0, lx1, _ = boxes.span(first)
    height = boxes.height(last)
    item = upper[0]
    hanging = item[0] in boxes.bullets and abs(lx0 - boxes.left[item[1]]) <= 0.5 * height
    opening = next((c for c in str(data["text"][first[0]]) if c.isalpha()), "")
    if not (opening.islower() or hanging):
        return False
    return (
        0 <= ly0 - y1 <= JOIN_HEIGHTS * height
        and abs(lx0 - x0) <= JOIN_HEIGHTS * height
        and min(x1, lx1) > max(x0, lx0)
    )


@dataclass(frozen=True)
class _Boxes:
    """The word boxes of a TSV, by row: left, top, right and bottom edges in pixels."""

    left: list[int]
    top: list[int]
    right: list[int]
    bottom: list[int]
    hyphens: frozenset[int]  # the words cut by a hyphen (a letter, then ``-``)
    item_starts: frozenset[int] = frozenset()  # the words a line of a list of values may start with
    item_ends: frozenset[int] = frozenset()  # the words a line of a list of values may end with
    bullets: frozenset[int] = frozenset()  # the words that are a list item's bullet (start a line)

    def text_ends_hyphen(self, word: int) -> bool:
        return word in self.hyphens

    def gap(self, a: int, b: int) -> int:
        """The horizontal distance between words ``a`` and ``b`` (either order; 0 when they overlap)."""
        return max(0, self.left[b] - self.right[a], self.left[a] - self.right[b])

    def span(self, words: Sequence[int]) -> tuple[int, int, int, int]:
        return (
            min(self.left[i] for i in words),
            min(self.top[i] for i in words),
            max(self.right[i] for i in words),
            max(self.bottom[i] for i in words),
        )

    def height(self, words: Sequence[int]) -> float:
        """The median height of the words, in pixels."""
        return float(statistics.median(self.bottom[i] - self.top[i] for i in words))


def _starts_item(word: str) -> bool:
    """Whether a line starting with ``word`` may start an item of a list of values rather than go on with
    the line before: a capital or a digit first (after opening punctuation), or a value (``j@x.org``)."""
    first = next((c for c in word if c.isalnum()), "")
    return first.isdigit() or first.isupper() or any(c == "@" or c.isdigit() for c in word)


def _ends_item(word: str) -> bool:
    """Whether a line ending with ``word`` may end an item of a list of values: not a comma, hyphen or
    dash that goes on, and not a lower-case word (prose lines end with one almost always)."""
    if not word or word[-1] in _CONTINUES:
        return False
    bare = word.rstrip(_CLOSING)
    return not (bare.isalpha() and bare.islower())


def _listed(lines: Sequence[list[int]], boxes: _Boxes) -> bool:
    """Whether lines read as a column of values (``John Smith`` / ``12 Oak Street`` / ``Springfield``), not
    as wrapped prose: at least :data:`LIST_MIN_LINES` of them, and at every line break the upper line ends
    as an item does (:func:`_ends_item`) and the lower starts as one does (:func:`_starts_item`). Wrapped
    prose breaks after a lower-case word or before one nearly every time, so three lines of it almost never
    pass; Tesseract makes one paragraph of such a column when its lines are of similar length."""
    return len(lines) >= LIST_MIN_LINES and all(
        upper[-1] in boxes.item_ends and lower[0] in boxes.item_starts
        for upper, lower in itertools.pairwise(lines)
    )


def _unlisted(chain: list[list[int]], boxes: _Boxes) -> list[list[list[int]]]:
    """A paragraph as it is, or one paragraph per line when its lines are a column of values."""
    return [[line] for line in chain] if _listed(chain, boxes) else [chain]


def _word_spaces(
    lines: Mapping[tuple[int, int, int], Mapping[int, list[int]]], boxes: _Boxes
) -> dict[int, float]:
    """Each page's usual word space: the median gap between neighbouring words of a line, counting only
    gaps narrower than the line's word height (wider ones are cell or column boundaries, not spaces)."""
    gaps: dict[int, list[int]] = {}
    for (page, _, _), numbered in lines.items():
        for words in numbered.values():
            if len(words) < 2:
                continue
            height = boxes.height(words)
            found = gaps.setdefault(page, [])
            found.extend(g for a, b in itertools.pairwise(words) if (g := boxes.gap(a, b)) < height)
    return {page: float(statistics.median(found)) for page, found in gaps.items() if found}


def _between(a: int, b: int, boxes: _Boxes) -> tuple[int, int]:
    """The blank between neighbouring words ``a`` and ``b`` (either order), from left to right."""
    return min(boxes.right[a], boxes.right[b]), max(boxes.left[a], boxes.left[b])


def _gutter_gap(line: list[int], boxes: _Boxes, space: float) -> float:
    return max(GUTTER_HEIGHTS * boxes.height(line), GUTTER_SPACES * space)


def _gutters(lines: list[list[int]], boxes: _Boxes, space: float) -> list[tuple[int, int]]:
    """The x ranges, left to right, that a paragraph's lines leave blank in a gap at least
    :func:`_gutter_gap` wide in :data:`GUTTER_MIN_LINES` lines and :data:`GUTTER_SHARE` of them: the
    gutters between a table's columns, even where they are narrower than :data:`SPLIT_HEIGHTS` word heights.
    One sweep over the gaps' edges: linear plus sorting."""
    if len(lines) < GUTTER_MIN_LINES:
        return []
    events: list[tuple[int, int]] = []
    for line in lines:
        wide = _gutter_gap(line, boxes, space)
        for a, b in itertools.pairwise(line):
            if boxes.gap(a, b) >= wide:
                x0, x1 = _between(a, b, boxes)
                events += [(x0, 1), (x1, -1)]
    need = max(GUTTER_MIN_LINES, math.ceil(len(lines) * GUTTER_SHARE))
    events.sort()  # at one x, an end (-1) before a start: touching gaps do not add up
    found: list[tuple[int, int]] = []
    count, start = 0, 0
    for x, step in events:
        if count >= need and x > start:  # [start, x] lies in enough gaps
            if found and found[-1][1] == start:
                found[-1] = (found[-1][0], x)
            else:
                found.append((start, x))
        count += step
        start = x
    return found


def _split_line(
    words: list[int], boxes: _Boxes, space: float, gutters: Sequence[tuple[int, int]] = ()
) -> list[list[int]]:
    """A line's words (in Tesseract's reading order) cut into pieces where two neighbours are further apart
    than :data:`SPLIT_HEIGHTS` word heights and :data:`SPLIT_SPACES` word spaces, or where their gap is a
    table's gutter (one of ``gutters``, see :func:`_gutters`)."""
    limit = max(SPLIT_HEIGHTS * boxes.height(words), SPLIT_SPACES * space)
    wide = _gutter_gap(words, boxes, space)
    starts = [x0 for x0, _ in gutters]
    pieces = [[words[0]]]
    for before, word in itertools.pairwise(words):
        gap = boxes.gap(before, word)
        cut = gap > limit
        if not cut and gutters and gap >= wide:
            x0, x1 = _between(before, word, boxes)
            k = bisect.bisect_left(starts, x1) - 1  # the last gutter starting left of the gap's end
            cut = k >= 0 and gutters[k][1] > x0
        if cut:
            pieces.append([word])
        else:
            pieces[-1].append(word)
    return pieces


def _chains(pieces: list[list[list[int]]], boxes: _Boxes, space: float) -> list[list[list[int]]]:
    """The pieces of a paragraph's lines grouped into paragraphs: a piece continues the paragraph of the
    piece just above it on the previous line when :func:`_wraps` says so. In the order the paragraphs
    start: by line, then in Tesseract's order within a line (a column before the next one).

    Each line's pieces are matched with the previous line's by one sweep in ``x`` order: linear plus sorting.
    """
    chains: list[list[list[int]]] = []
    edges: list[tuple[int, int]] = []  # each chain's leftmost and rightmost edge so far
    above: list[tuple[tuple[int, int, int, int], int]] = []  # the previous line's pieces: box, chain
    for line in pieces:
        spans = [boxes.span(piece) for piece in line]
        order = sorted(range(len(line)), key=lambda k: spans[k][0])
        chain_of = [-1] * len(line)
        j = 0
        for k in order:
            while j < len(above) and above[j][0][2] < spans[k][0]:
                j += 1
            if j < len(above):
                box, chain = above[j]
                x0, x1 = edges[chain]
                column = (min(x0, spans[k][0]), max(x1, spans[k][2]))
                cut = len(line) > 1 or len(above) > 1  # Tesseract's line spacing is trusted only whole
                if _wraps(chains[chain][-1], box, line[k], spans[k], column, boxes, space, cut):
                    chain_of[k] = chain
                    j += 1  # one piece continues a paragraph
        for k, piece in enumerate(line):  # new paragraphs start in Tesseract's reading order
            if chain_of[k] < 0:
                chains.append([piece])
                edges.append((spans[k][0], spans[k][2]))
                chain_of[k] = len(chains) - 1
            else:
                chains[chain_of[k]].append(piece)
                x0, x1 = edges[chain_of[k]]
                edges[chain_of[k]] = (min(x0, spans[k][0]), max(x1, spans[k][2]))
        above = [(spans[k], chain_of[k]) for k in order]
    return chains


def _wraps(
    upper: list[int],
    upper_box: tuple[int, int, int, int],
    lower: list[int],
    lower_box: tuple[int, int, int, int],
    column: tuple[int, int],
    boxes: _Boxes,
    space: float,
    cut: bool,
) -> bool:
    """True when the ``lower`` piece (words in reading order) reads as the next line of the ``upper`` one.

    They must overlap across at least half the narrower one's width and, when either line was ``cut`` into
    pieces, be at most :data:`JOIN_HEIGHTS` word heights apart (whole lines are as far apart as Tesseract's
    paragraph has them: double spacing stays one paragraph). Then the upper piece must end with a hyphenated
    word, or have several words (a word over a word is a table's column or a form's labels) and have
    wrapped: the lower piece's first word would not have fitted after it inside ``column`` (the edges of the
    paragraph so far) with :data:`FIT_SLACK` word heights to spare. A list of short lines (an address, a
    form's values, cells) fails that, unless each line is about as long as the paragraph's widest: such a
    list reads like a narrow column of prose (:func:`_cut_rows` then cuts it when it sits beside labels).
    """
    if lower[0] in boxes.bullets:  # a list's next item
        return False
    overlap = min(upper_box[2], lower_box[2]) - max(upper_box[0], lower_box[0])
    narrower = min(upper_box[2] - upper_box[0], lower_box[2] - lower_box[0])
    height = boxes.height(lower)
    if overlap < 0.5 * narrower or (cut and lower_box[1] - upper_box[3] > JOIN_HEIGHTS * height):
        return False
    last_word = upper[-1]
    if boxes.text_ends_hyphen(last_word):
        return True
    if len(upper) < 2:
        return False
    first = lower[0]
    needed = max(space, 1.0) + boxes.right[first] - boxes.left[first] + FIT_SLACK * height
    if boxes.left[upper[0]] > boxes.left[upper[-1]]:  # right to left: a line ends at its left edge
        return upper_box[0] - needed < column[0]
    return upper_box[2] + needed > column[1]


def _cut_rows(chains: list[list[list[int]]], pages: list[int], boxes: _Boxes) -> list[list[list[int]]]:
    """The paragraphs cut between two lines that are rows of a form or a table.

    Two lines of a paragraph are rows (not wrapped text) when each has, on its own row and on the same side,
    a neighbour that is a one-line paragraph of its own, and the two neighbours differ: a form's values
    beside their labels, a table's column beside the next one. Tesseract often makes one paragraph of a
    column of values whose lines happen to look wrapped. Rows are found by bucketing pieces by height on
    the page and looking at a few neighbours in ``x`` order: linear in the pieces, plus sorting.
    """
    spans = {(c, n): boxes.span(piece) for c, chain in enumerate(chains) for n, piece in enumerate(chain)}
    if len(spans) < 4:
        return chains
    unit = max(1.0, float(statistics.median(b[3] - b[1] for b in spans.values())))
    buckets: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for key, (_, y0, _, y1) in spans.items():
        buckets.setdefault((pages[key[0]], int((y0 + y1) / 2 // unit)), []).append(key)
    sides: dict[tuple[int, int], tuple[int, int]] = {}  # piece -> (side, neighbour's paragraph)
    for (page, row), own in buckets.items():
        near = sorted(
            own + buckets.get((page, row - 1), []) + buckets.get((page, row + 1), []),
            key=lambda key: spans[key][0],
        )
        where = {key: i for i, key in enumerate(near)}
        for key in own:
            found = _row_neighbour(key, near, where[key], spans)
            if found is not None:
                sides[key] = found
    out: list[list[list[int]]] = []
    for c, chain in enumerate(chains):
        out.append([chain[0]])
        for n in range(1, len(chain)):
            upper, lower = sides.get((c, n - 1)), sides.get((c, n))
            if (
                upper is not None
                and lower is not None
                and upper[0] == lower[0]
                and upper[1] != lower[1]
                and len(chains[upper[1]]) == 1
                and len(chains[lower[1]]) == 1
            ):
                out.append([chain[n]])
            else:
                out[-1].append(chain[n])
    return out


def _rows_in_order(chains: list[list[list[int]]], boxes: _Boxes) -> list[list[list[int]]]:
    """The paragraphs with each run of one-line paragraphs that sits in rows (a form, a table) put in row
    order: row by row from the top, left to right in a row (right to left when the run's words read so).

    Tesseract often reads a form's labels as one block and its values as the next; the run then becomes
    ``Name:``, ``John Smith``, ``Address:``, ... A run is a stretch of consecutive one-line paragraphs; it is
    left as it is unless some row of it holds two or more of them. Linear plus sorting.
    """
    out: list[list[list[int]]] = []
    run: list[list[list[int]]] = []
    for chain in [*chains, []]:
        if len(chain) == 1:
            run.append(chain)
            continue
        out.extend(_in_rows(run, boxes) if len(run) > 1 else run)
        run = []
        if chain:
            out.append(chain)
    return out


def _in_rows(run: list[list[list[int]]], boxes: _Boxes) -> list[list[list[int]]]:
    spans = [boxes.span(chain[0]) for chain in run]
    centre = [(y0 + y1) / 2 for _, y0, _, y1 in spans]
    unit = float(statistics.median(y1 - y0 for _, y0, _, y1 in spans))
    rows: list[list[int]] = []
    for k in sorted(range(len(run)), key=lambda k: centre[k]):
        if rows and centre[k] - centre[rows[-1][0]] <= 0.5 * unit:
            rows[-1].append(k)
        else:
            rows.append([k])
    if all(len(row) == 1 for row in rows):
        return run
    backwards = sum(
        (boxes.left[line[0]] > boxes.left[line[-1]]) - (boxes.left[line[0]] < boxes.left[line[-1]])
        for chain in run
        for line in chain
    )
    return [run[k] for row in rows for k in sorted(row, key=lambda k: spans[k][0], reverse=backwards > 0)]


def _row_neighbour(
    key: tuple[int, int],
    near: list[tuple[int, int]],
    at: int,
    spans: Mapping[tuple[int, int], tuple[int, int, int, int]],
) -> tuple[int, int] | None:
    """The side (-1 left, 1 right) and paragraph of the nearest piece of another paragraph on the same row
    as ``key`` (their heights overlapping by half), looking at most :data:`_ROW_LOOK` pieces either way."""
    x0, y0, x1, y1 = spans[key]
    for side, steps in (
        (-1, range(at - 1, max(-1, at - 1 - _ROW_LOOK), -1)),
        (1, range(at + 1, min(len(near), at + 1 + _ROW_LOOK))),
    ):
        for i in steps:
            other = near[i]
            a0, b0, a1, b1 = spans[other]
            if other[0] == key[0] or min(y1, b1) - max(y0, b0) < 0.5 * min(y1 - y0, b1 - b0):
                continue
            if a1 <= x0 if side < 0 else a0 >= x1:
                return side, other[0]
    return None


def _block(
    data: Mapping[str, Sequence[Any]], lines: list[list[int]], bullets: frozenset[int] = frozenset()
) -> OcrBlock:
    rows = [i for line in lines for i in line]
    x0 = min(int(data["left"][i]) for i in rows)
    y0 = min(int(data["top"][i]) for i in rows)
    x1 = max(int(data["left"][i]) + int(data["width"][i]) for i in rows)
    y1 = max(int(data["top"][i]) + int(data["height"][i]) for i in rows)
    texts = tuple(" ".join(word_text(data, i, bullets) for i in line) for line in lines)
    heights = [
        max(int(data["top"][i]) + int(data["height"][i]) for i in line)
        - min(int(data["top"][i]) for i in line)
        for line in lines
    ]
    return OcrBlock(
        text=join_lines(texts),
        bbox=(x0, y0, x1, y1),
        confidence=statistics.fmean(float(data["conf"][i]) for i in rows),
        lines=texts,
        line_height=float(statistics.median(heights)),
        words=len(rows),
    )


def join_lines(lines: Sequence[str]) -> str:
    """The lines of a paragraph as one text: spaces between lines, and ``transla-`` + ``tion`` joined."""
    out = ""
    for line in lines:
        if not out:
            out = line
        elif out.endswith("-") and len(out) > 1 and out[-2].isalpha() and line[:1].islower():
            out = out[:-1] + line
        else:
            out += " " + line
    return out
