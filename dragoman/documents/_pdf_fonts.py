# mypy: disallow-untyped-calls=False
# (PyMuPDF's functions carry no annotations)
"""Font and style choice for text written into a PDF: the look of a span (size, colour, bold, italic, its
class: serif, sans or monospace, from :func:`classify`; the document's own font's name) turned into the HTML
and CSS that MuPDF's HTML layout uses, or into a base font (:mod:`dragoman.documents._pdf_text`).

MuPDF's HTML layout picks the base font from the CSS family (``sans-serif`` -> Nimbus Sans, ``Times`` ->
Nimbus Roman, ``monospace`` -> Nimbus Mono: Latin, Greek and Cyrillic, metrics of Helvetica, Times and
Courier) and falls back, glyph by
glyph, to the Noto fonts built into PyMuPDF (Arabic, Hebrew, the Indic scripts, Thai, Ethiopic, Georgian,
...) and Droid Sans Fallback (Chinese, Japanese, Korean); it shapes complex scripts with HarfBuzz and lays out
right-to-left paragraphs (``dir="rtl"``). Only the glyphs used are kept when the document is saved
(``Document.subset_fonts``). :func:`script_renderable` checks, once per script, that some font really has
the script's glyphs, so a build of MuPDF without its Noto fonts is reported instead of writing empty boxes.
"""

from __future__ import annotations

import functools
import html
import logging
from dataclasses import dataclass

import pymupdf

log = logging.getLogger("dragoman.documents.pdf")

#: Span flags of ``page.get_text("dict")``.
FLAG_ITALIC = 2
FLAG_SERIF = 4
FLAG_MONO = 8
FLAG_BOLD = 16
FLAG_SUPERSCRIPT = 1

_BOLD_NAMES = ("bold", "black", "heavy", "semibold", "demi")
_ITALIC_NAMES = ("italic", "oblique")

#: A few characters of each script (ISO 15924, as in FLORES codes) that a font must have to write it.
SCRIPT_SAMPLES: dict[str, str] = {
    "Latn": "aéŁ",
    "Cyrl": "жЯ",
    "Grek": "λΩ",
    "Arab": "بع",
    "Hebr": "שא",
    "Deva": "कम",
    "Beng": "কম",
    "Guru": "ਕਮ",
    "Gujr": "કમ",
    "Orya": "କମ",
    "Taml": "கம",
    "Telu": "కమ",
    "Knda": "ಕಮ",
    "Mlym": "കമ",
    "Sinh": "කම",
    "Thai": "กม",
    "Laoo": "ກມ",
    "Khmr": "កម",
    "Mymr": "ကမ",
    "Tibt": "ཀམ",
    "Geor": "ქა",
    "Armn": "բա",
    "Ethi": "ሰላ",
    "Hang": "한글",
    "Hans": "中文",
    "Hant": "中國",
    "Jpan": "日本かな",
    "Thaa": "ސލ",
    "Tfng": "ⴰⵣ",
    "Olck": "ᱥᱟ",
}


#: Font name fragments (lower case, subset prefix and punctuation removed) by class, checked in this
#: order: monospace first (``NimbusMonL``, ``CMTT``, ``DejaVuSansMono``), then sans (``NimbusSanL``,
#: ``CMSS``, ``LiberationSans``), then serif. A name none of them matches is classed by the font's flags.
MONO_NAMES = (
    "mono",
    "courier",
    "cmtt",
    "cmsltt",
    "cmitt",
    "cmtex",
    "lmmono",
    "typewriter",
    "consol",
    "menlo",
    "inconsolata",
    "lucidaconsole",
    "sourcecode",
    "fixed",
    "andale",
    "monaco",
    "cousine",
    "texgyrecursor",
    "nimbusmon",
    "computer modern typewriter",
    "letter gothic",
    "lettergothic",
    "ocra",
    "ocrb",
    "terminal",
    "fira code",
    "firacode",
)
SANS_NAMES = (
    "sans",
    "computer modern sans",
    "helvet",
    "arial",
    "cmss",
    "lmsans",
    "nimbussan",
    "urwgothic",
    "texgyreheros",
    "texgyreadventor",
    "verdana",
    "tahoma",
    "calibri",
    "segoe",
    "roboto",
    "opensans",
    "ubuntu",
    "trebuchet",
    "futura",
    "frutiger",
    "myriad",
    "avenir",
    "gillsans",
    "gothic",
    "franklin",
    "geneva",
    "lucidagrande",
    "carlito",
    "arimo",
    "source sans",
    "noto sans",
    "avantgarde",
    "optima",
    "univers",
    "candara",
    "corbel",
)
SERIF_NAMES = (
    "serif",
    "times",
    "roman",
    "cmr",
    "cmb",
    "cmti",
    "cmsl",
    "cmu",
    "cmmi",
    "cmsy",
    "cmex",
    "cmcsc",
    "cmdunh",
    "cmfib",
    "lmroman",
    "nimbusrom",
    "urwpalladio",
    "palladio",
    "palatino",
    "urwbookman",
    "bookman",
    "centuryschl",
    "schoolbook",
    "century",
    "texgyre",
    "georgia",
    "garamond",
    "cambria",
    "caslon",
    "baskerville",
    "charter",
    "utopia",
    "libertine",
    "minion",
    "bodoni",
    "didot",
    "constantia",
    "tinos",
    "caladea",
    "dejavuserif",
    "liberationserif",
    "stix",
    "computer modern",
    "cochineal",
    "plex serif",
    "book antiqua",
    "goudy",
    "cmbx",
)


def base_name(font: str) -> str:
    """A font's name without the subset prefix (``ABCDEF+``)."""
    head, plus, rest = font.partition("+")
    return rest if plus and len(head) == 6 and head.isupper() else font


def classify(font: str, flags: int = 0) -> str:
    """The CSS family class of a font: ``monospace``, ``sans-serif`` or ``Times`` (serif), from a broad
    table of names (Nimbus, Computer/Latin Modern, DejaVu, Liberation, URW, TeX Gyre, the usual system and
    office fonts) and, for a name the table does not know, the span's flags (mono, serif)."""
    name = base_name(font).lower()
    squeezed = name.replace("-", "").replace("_", "").replace(" ", "")
    if any(n in name or n.replace(" ", "") in squeezed for n in MONO_NAMES):
        return "monospace"
    if any(n in name or n.replace(" ", "") in squeezed for n in SANS_NAMES):
        return "sans-serif"
    if any(squeezed.startswith(n) or (len(n) > 4 and n.replace(" ", "") in squeezed) for n in SERIF_NAMES):
        return "Times"  # MuPDF's "serif" is Charis SIL, much wider than the usual Times
    if flags & FLAG_MONO:
        return "monospace"
    if flags & FLAG_SERIF:
        return "Times"
    return "sans-serif"


@dataclass(frozen=True)
class TextStyle:
    """How a block of text looked: what its translation is written in."""

    size: float = 11.0
    color: int = 0  # sRGB as 0xRRGGBB
    bold: bool = False
    italic: bool = False
    family: str = "sans-serif"  # sans-serif (Nimbus Sans), Times (Nimbus Roman) or monospace (Nimbus Mono)
    font: str = ""  # the document's font (name without subset prefix): kept where it has the glyphs needed
    #: An inline superscript or subscript (a footnote mark, an exponent): its size as a share of the
    #: block's, and how far its baseline is raised (lowered when negative), as a share of the block's size.
    ratio: float = 1.0
    rise: float = 0.0

    @property
    def code(self) -> bool:
        """Monospace text: code, commands, paths; never translated."""
        return self.family == "monospace"

    @property
    def math(self) -> bool:
        """Text in a mathematical font (TeX's math italic, symbols and extension fonts, ...): a formula's
        parts, never translated."""
        return is_math_font(self.font)


#: Name prefixes (lower case, subset prefix removed) of mathematical fonts.
MATH_NAMES = (
    "cmmi",
    "cmsy",
    "cmex",
    "cmbsy",
    "cmmib",
    "lmmath",
    "msam",
    "msbm",
    "eufm",
    "eusm",
    "eurm",
    "rsfs",
    "stixmath",
    "stixgeneral",
    "xits",
    "cambriamath",
    "latinmodernmath",
    "texgyre-math",
    "symbol",
    "mtsy",
    "mtex",
    "mt-extra",
    "mtextra",
    "esint",
    "wasy",
    "lasy",
    "stmary",
)


@functools.lru_cache(maxsize=1024)
def is_math_font(font: str) -> bool:
    """True for the name of a mathematical font (``CMMI10``, ``CMSY10``, ``MSBM10``, ``Symbol``...)."""
    name = base_name(font).lower().replace(" ", "")
    return name.startswith(MATH_NAMES) or "math" in name


def style_of(span: dict[str, object]) -> TextStyle:
    """The style of a ``get_text("dict")`` span."""
    flags = int(span.get("flags", 0))  # type: ignore[call-overload]
    size = float(span.get("size", 11.0))  # type: ignore[arg-type]
    color = int(span.get("color", 0))  # type: ignore[call-overload]
    return _style(str(span.get("font", "")), flags, size if size > 0 else 11.0, color & 0xFFFFFF)


@functools.lru_cache(maxsize=4096)
def _style(raw: str, flags: int, size: float, color: int) -> TextStyle:
    """A span's style from its font's name, flags, size and colour (a page has few different ones)."""
    font = base_name(raw).lower()
    weight = font.replace("-", " ").replace(",", " ")
    return TextStyle(
        size=size,
        color=color,
        bold=bool(flags & FLAG_BOLD) or any(n in weight for n in _BOLD_NAMES) or _cm_bold(font),
        italic=bool(flags & FLAG_ITALIC) or any(n in weight for n in _ITALIC_NAMES) or _cm_italic(font),
        family=classify(raw, flags),
        font=base_name(raw),
    )


def _cm_bold(font: str) -> bool:
    """Computer Modern bold (``CMBX10``, ``CMB10``, ``CMSSBX10``) and NimbusRomNo9L-Medi style names."""
    return font.startswith(("cmbx", "cmb1", "cmb9", "cmb8", "cmssbx", "cmttb")) or font.endswith(
        ("-medi", "-mediital", "-bold", "-bolditalic")
    )


def _cm_italic(font: str) -> bool:
    """Computer Modern italic and slanted faces (``CMTI10``, ``CMSL10``, ``CMSLTT10``), ``-ReguItal``."""
    return font.startswith(("cmti", "cmsl", "cmitt", "cmbxti", "cmbxsl", "cmssi")) or font.endswith("ital")


def css_for(style: TextStyle, *, line_height: float = 1.2, align: str | None = None) -> str:
    """The CSS for one block: no margins, the block's font size, colour, weight and family."""
    rules = [
        f"font-family:{style.family}",
        f"font-size:{style.size:.2f}px",
        f"line-height:{line_height:.3f}",
        f"color:#{style.color:06x}",
    ]
    if style.bold:
        rules.append("font-weight:bold")
    if style.italic:
        rules.append("font-style:italic")
    if align:
        rules.append(f"text-align:{align}")
    # "body" beats "*" in MuPDF's cascade, so its default margin is named to be removed.
    return "body,div{margin:0;padding:0} body{" + ";".join(rules) + "}"


def html_for(text: str, *, rtl: bool) -> str:
    """The HTML for one block's translation: escaped, line breaks kept, right-to-left when asked.

    MuPDF aligns a ``dir="rtl"`` paragraph to the right by default (its ``text-align:right`` means the
    paragraph's end there), so right-to-left blocks carry no alignment of their own.
    """
    body = "<br>".join(html.escape(line, quote=False) for line in text.split("\n"))
    return f'<div dir="rtl">{body}</div>' if rtl else f"<div>{body}</div>"


def html_for_runs(runs: list[tuple[str, TextStyle]], base: TextStyle, *, rtl: bool) -> str:
    """:func:`html_for` for a translation of runs of different looks: each run that differs from the
    block's look (bold, italic, monospace code) in a ``span`` of its own."""
    parts = []
    for text, style in runs:
        body = "<br>".join(html.escape(line, quote=False) for line in text.split("\n"))
        rules = []
        if style.family != base.family:
            rules.append(f"font-family:{style.family}")
        if style.bold != base.bold:
            rules.append(f"font-weight:{'bold' if style.bold else 'normal'}")
        if style.italic != base.italic:
            rules.append(f"font-style:{'italic' if style.italic else 'normal'}")
        if style.color != base.color:
            rules.append(f"color:#{style.color:06x}")
        if style.rise:
            rules.append(
                f"font-size:{style.ratio:.2f}em;vertical-align:{'super' if style.rise > 0 else 'sub'}"
            )
        parts.append(f'<span style="{";".join(rules)}">{body}</span>' if rules else body)
    body = "".join(parts)
    return f'<div dir="rtl">{body}</div>' if rtl else f"<div>{body}</div>"


@functools.cache
def script_renderable(script: str) -> bool:
    """True when the fonts MuPDF lays out HTML with have glyphs for ``script`` (checked once per script).

    Scripts without a sample are assumed renderable. The check writes the sample into a scratch page and
    asks each embedded font whether it has a glyph for every sample character.
    """
    sample = SCRIPT_SAMPLES.get(script)
    if sample is None:
        return True
    doc = pymupdf.open()
    try:
        page = doc.new_page(width=300, height=100)
        page.insert_htmlbox(
            pymupdf.Rect(5, 5, 295, 95), html.escape(sample), css="* {font-family:sans-serif}"
        )
        fonts = []
        for xref, *_ in page.get_fonts():
            buffer = doc.extract_font(xref)[3]
            if buffer:
                fonts.append(pymupdf.Font(fontbuffer=buffer))
        found = all(any(font.has_glyph(ord(ch)) for font in fonts) for ch in sample)
    except (RuntimeError, ValueError) as exc:  # MuPDF errors while probing: say no, with the reason logged
        log.warning("checking fonts for script %s failed: %s", script, exc)
        found = False
    finally:
        doc.close()
    if not found:
        log.warning("no built-in font has %s glyphs", script)
    return found
