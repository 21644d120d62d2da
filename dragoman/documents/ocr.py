"""OCR with Tesseract: the core shared by the image handler and scanned PDF pages.

:func:`ocr_image` reads a Pillow image and groups Tesseract's word boxes (``image_to_data``) into
paragraphs (:class:`OcrBlock`): the words of a paragraph are joined with spaces across its lines (a word
hyphenated at a line end is joined back), because a paragraph translates far better as a whole than line by
line; the lines are kept too, for layout. Languages are Tesseract's traineddata codes (``eng``,
``chi_sim``; several joined with ``+``); :func:`tesseract_language` maps FLORES-200 codes onto them and
:func:`check_languages` says which Debian package installs a missing one. Tesseract runs as a program with
its own environment (:mod:`._tesseract`). Nothing runs at import time: ``tesseract --list-langs`` is asked
the first time OCR is needed, and again once Tesseract or its tessdata directory changed (:func:`refresh`
forces it); :func:`status` says what is installed.
"""

from __future__ import annotations

import logging
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from dragoman.documents._tesseract import apt_package as apt_package
from dragoman.documents._tesseract import image_to_data, installed
from dragoman.documents._tesseract import refresh as refresh
from dragoman.documents._tesseract import status as status
from dragoman.documents._tesseract import tesseract_environment as tesseract_environment
from dragoman.errors import OcrUnavailable
from dragoman.languages.catalogue import get, resolve

if TYPE_CHECKING:
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


def ocr_image(
    image: Image.Image, tesseract_lang: str, *, timeout: int = OCR_TIMEOUT_SECONDS
) -> list[OcrBlock]:
    """The paragraphs Tesseract reads in ``image`` with languages ``tesseract_lang`` (``eng+spa``).

    Raises :class:`OcrUnavailable` when Tesseract or a language is missing, :class:`EngineTimeout` when
    it takes longer than ``timeout`` seconds, :class:`DocumentFormatError` when it cannot read the image.
    """
    check_languages(tesseract_lang)
    data = image_to_data(prepare(image), tesseract_lang, timeout)
    blocks = blocks_from_data(data) if data else []
    log.debug("OCR (%s) found %d paragraphs in a %dx%d image", tesseract_lang, len(blocks), *image.size)
    return blocks


def blocks_from_data(data: Mapping[str, Sequence[Any]]) -> list[OcrBlock]:
    """Group the word rows of Tesseract's TSV (as columns, see :func:`._tesseract.image_to_data`) into
    paragraphs, in reading order (Tesseract's block, paragraph, line and word numbers).

    Tesseract splits paragraphs too eagerly where line lengths vary; a paragraph whose last line runs to
    the right edge of its block without ending a sentence is joined with the next one of the same block
    (a sentence cut in two translates badly).
    """
    words: dict[tuple[int, int, int], dict[int, list[int]]] = {}
    for i, text in enumerate(data["text"]):
        if int(data["level"][i]) != 5 or not str(text).strip() or float(data["conf"][i]) < 0:
            continue
        key = (int(data["page_num"][i]), int(data["block_num"][i]), int(data["par_num"][i]))
        words.setdefault(key, {}).setdefault(int(data["line_num"][i]), []).append(i)
    left = [int(v) for v in data["left"]]
    right = [int(x) + int(w) for x, w in zip(data["left"], data["width"], strict=True)]
    regions: dict[tuple[int, int], tuple[int, int]] = {}
    for (page, block, _), numbered in words.items():
        for i in (i for line in numbered.values() for i in line):
            x0, x1 = regions.get((page, block), (left[i], right[i]))
            regions[(page, block)] = (min(x0, left[i]), max(x1, right[i]))
    paragraphs: list[tuple[tuple[int, int], list[list[int]]]] = []
    for key in sorted(words):
        lines = [words[key][n] for n in sorted(words[key])]
        region = key[:2]
        if paragraphs and paragraphs[-1][0] == region:
            last = paragraphs[-1][1][-1]
            x0, x1 = regions[region]
            ends = _SENTENCE_END.search(str(data["text"][last[-1]]).strip()) is not None
            if not ends and max(right[i] for i in last) >= x1 - 0.15 * (x1 - x0):
                paragraphs[-1][1].extend(lines)
                continue
        paragraphs.append((region, lines))
    return [_block(data, lines) for _, lines in paragraphs]


def _block(data: Mapping[str, Sequence[Any]], lines: list[list[int]]) -> OcrBlock:
    rows = [i for line in lines for i in line]
    x0 = min(int(data["left"][i]) for i in rows)
    y0 = min(int(data["top"][i]) for i in rows)
    x1 = max(int(data["left"][i]) + int(data["width"][i]) for i in rows)
    y1 = max(int(data["top"][i]) + int(data["height"][i]) for i in rows)
    texts = tuple(" ".join(str(data["text"][i]).strip() for i in line) for line in lines)
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
