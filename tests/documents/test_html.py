"""HTML: block texts translated as sentences with their inline elements; code, scripts, attributes kept."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import html5lib  # type: ignore[import-untyped]
import lxml.html  # type: ignore[import-untyped]
import pytest
from lxml import etree
from support import needs_apertium

from dragoman.documents import handlers
from dragoman.documents.html import HtmlHandler
from dragoman.errors import DocumentFormatError, DocumentTooLarge
from dragoman.pipelines import translate_file as files
from dragoman.settings import Settings
from dragoman.testing.fakes import UpperTranslator
from dragoman.translation.engine import Engine

PROTECTED = re.compile(r"<[^<>]*>|&\w+;")


class Upper(UpperTranslator):
    protected = PROTECTED


class MovesFirstPair(Upper):
    """Moves the first placeholder pair (with its text) to the end, as word order changes do."""

    def one(self, text: str) -> str:
        m = re.search(r"<(\d+)>[^<]*</\1>", text)
        if m is not None:
            text = text[: m.start()] + text[m.end() :].rstrip(".") + " " + m.group() + "."
        return super().one(text)


class DropsTags(Upper):
    def one(self, text: str) -> str:
        return super().one(re.sub(r"</?\d+/?>", "", text))


PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>The house page</title>
  <style>p { color: red; }</style>
</head>
<body>
  <h1 class="big">Welcome to the <em>red</em> house</h1>
  <p>Click <a href="/about.html" title="About us">here</a> to read
     more about <b>the <i>big</i> garden</b> &amp; the dogs.<br>New line<img src="x.png" alt="A red door"></p>
  <div>Loose text <p>inner para</p> tail text <span>span</span></div>
  <pre>keep   this</pre>
  <p>Run <code>make install</code> now. <span translate="no">BrandName</span></p>
  <input placeholder="Your name" value="keep" aria-label="Name field">
  <script>var s = "<b>do not touch</b>";</script>
  <!-- a comment -->
</body>
</html>
"""


def run(
    tmp_path: Path, text: str | bytes, translator: Upper, name: str = "page.html"
) -> tuple[bytes, list[str]]:
    source = tmp_path / name
    source.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    output = tmp_path / f"out{source.suffix}"
    report = HtmlHandler().translate(source, output, translator, None)
    return output.read_bytes(), report.warnings


def tags(markup: str) -> Counter[str]:
    root = lxml.html.document_fromstring(markup)
    return Counter(str(e.tag) for e in root.iter() if isinstance(e.tag, str))


def test_structure_and_untouched_parts(tmp_path: Path) -> None:
    data, warnings = run(tmp_path, PAGE, Upper())
    out = data.decode("utf-8")
    assert warnings == []
    assert out.startswith('<!DOCTYPE html>\n<html lang="es">')
    assert tags(out) == tags(PAGE)
    for kept in (
        '<meta charset="utf-8">',
        "<style>p { color: red; }</style>",
        "<pre>keep   this</pre>",
        "<code>make install</code>",
        '<span translate="no">BrandName</span>',
        '<script>var s = "<b>do not touch</b>";</script>',
        "<!-- a comment -->",
        'href="/about.html"',
        'src="x.png"',
        'value="keep"',
        'class="big"',
    ):
        assert kept in out, kept
    assert out.endswith("</html>\n")


def test_texts_and_chosen_attributes_translated(tmp_path: Path) -> None:
    data, _ = run(tmp_path, PAGE, Upper())
    out = data.decode("utf-8")
    assert "<title>THE HOUSE PAGE</title>" in out
    assert '<h1 class="big">WELCOME TO THE <em>RED</em> HOUSE</h1>' in out
    assert (
        '<p>CLICK <a href="/about.html" title="ABOUT US">HERE</a> TO READ MORE ABOUT '
        '<b>THE <i>BIG</i> GARDEN</b> &amp; THE DOGS.<br>NEW LINE<img src="x.png" alt="A RED DOOR"></p>'
    ) in out
    assert "<div>LOOSE TEXT <p>INNER PARA</p> TAIL TEXT <span>SPAN</span></div>" in out
    assert "<p>RUN <code>make install</code> NOW. " in out
    assert 'placeholder="YOUR NAME"' in out and 'aria-label="NAME FIELD"' in out


def test_one_call_with_whole_sentences(tmp_path: Path) -> None:
    fake = Upper()
    run(tmp_path, PAGE, fake)
    assert len(fake.calls) == 1
    sentence = next(t for t in fake.calls[0] if t.startswith("Click"))
    assert re.fullmatch(
        r"Click <(\d+)>here</\1> to read more about <(\d+)>the <(\d+)>big</\3> garden</\2> &amp; the dogs\."
        r"<\d+/>New line<\d+/>",
        sentence,
    ), sentence
    assert not any("do not touch" in t or "make install" in t or "BrandName" in t for t in fake.calls[0])


def test_inline_elements_follow_the_translation_order(tmp_path: Path) -> None:
    data, warnings = run(tmp_path, "<p>The <b>red</b> car is <i>fast</i>.</p>", MovesFirstPair())
    assert data.decode("utf-8") == "<p>THE  CAR IS <i>FAST</i> <b>RED</b>.</p>"
    assert warnings == []


def test_lost_inline_elements_are_put_back(tmp_path: Path) -> None:
    data, warnings = run(tmp_path, '<p>Go <a href="/x">home</a> now<br>please.</p>\n', DropsTags())
    out = data.decode("utf-8")
    assert out.count('<a href="/x">home</a>') == 1 and out.count("<br>") == 1
    assert out.startswith("<p>GO HOME NOWPLEASE.") and "markup_moved" in warnings[0]


def test_right_to_left_target_sets_dir(tmp_path: Path) -> None:
    data, _ = run(tmp_path, '<html lang="en" dir="ltr"><body><p>Hello</p></body></html>', Upper("arb_Arab"))
    root = lxml.html.document_fromstring(data.decode("utf-8"))
    assert (root.get("lang"), root.get("dir")) == ("ar", "rtl")
    assert not data.startswith(b"<!DOCTYPE")  # no doctype is invented


def test_fragment_stays_a_fragment(tmp_path: Path) -> None:
    data, _ = run(tmp_path, "<p>Hello <b>you</b></p>\n<ul><li>One</li></ul>", Upper(), name="part.htm")
    assert data.decode("utf-8") == "<p>HELLO <b>YOU</b></p>\n<ul><li>ONE</li></ul>"


def test_declared_encoding_is_kept(tmp_path: Path) -> None:
    page = '<html><head><meta charset="iso-8859-1"></head><body><p>Café au lait</p></body></html>'
    data, _ = run(tmp_path, page.encode("iso-8859-1"), Upper())
    assert "<p>CAFÉ AU LAIT</p>" in data.decode("iso-8859-1")
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")


def test_charset_declaration_survives(tmp_path: Path) -> None:
    # <meta http-equiv="Content-Type"> was dropped on writing: a Latin-1 file then decoded as mojibake.
    page = (
        '<!DOCTYPE html>\n<html><head><meta http-equiv="Content-Type" '
        'content="text/html; charset=iso-8859-1"><title>Café</title></head>'
        "<body><p>Crème brûlée</p></body></html>"
    )
    data, _ = run(tmp_path, page.encode("iso-8859-1"), Upper())
    assert b'<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1">' in data
    # An HTML5 parser given only the bytes finds the encoding and reads the text right.
    document = html5(data)
    assert document.find(".//p").text == "CRÈME BRÛLÉE"
    data, _ = run(tmp_path, page.replace("iso-8859-1", "utf-8"), Upper())
    assert b'charset=utf-8">' in data and "CRÈME BRÛLÉE" in data.decode("utf-8")


XHTML = """<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">
<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en" lang="en">
<head><meta http-equiv="Content-Type" content="text/html; charset=utf-8" /><title>The page</title>
<script type="text/javascript" src="a.js"></script>
<script type="text/javascript">//<![CDATA[
if (a < b && c) { go("<p>"); }
//]]></script></head>
<body><p>A&nbsp;red house &amp; a <b>big</b> dog.<br/>Next line<img src="x.png" alt="A door"/></p>
<p>Unknown &foo; stays.</p><svg xmlns="http://www.w3.org/2000/svg"><text>Label</text></svg></body></html>
"""


#: An XML parser that reads XHTML without its DTD (entities it defines stay references).
XML_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)


def html5(data: bytes) -> Any:
    """The document as an HTML5 parser reads the bytes (encoding from the BOM or <meta>, else UTF-8)."""
    return html5lib.parse(data, namespaceHTMLElements=False, useChardet=False)


def test_xhtml_stays_well_formed_xml(tmp_path: Path) -> None:
    data, _ = run(tmp_path, XHTML, Upper(), name="page.xhtml")
    text = data.decode("utf-8")
    assert text.startswith('<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html PUBLIC')
    root = etree.fromstring(data, XML_PARSER)
    assert root.tag == "{http://www.w3.org/1999/xhtml}html"
    assert (root.get("lang"), root.get("{http://www.w3.org/XML/1998/namespace}lang")) == ("es", "es")
    assert "<br />" in text and 'alt="A DOOR"' in text
    assert '<script type="text/javascript" src="a.js"></script>' in text  # not <script/>
    assert '//<![CDATA[\nif (a < b && c) { go("<p>"); }\n//]]>' in text  # CDATA kept as written
    assert "A\xa0RED HOUSE &amp; A <b>BIG</b> DOG." in text  # &nbsp; is a character, not a word break
    assert "&foo;" in text and "<text>Label</text>" in text
    html5(data)  # and it still reads as HTML
    # The same file named .html (an XML declaration, the XHTML namespace) is written back as XML too.
    etree.fromstring(run(tmp_path, XHTML, Upper())[0], XML_PARSER)


def test_xhtml_encoding_from_its_xml_declaration(tmp_path: Path) -> None:
    page = '<?xml version="1.0" encoding="ISO-8859-1"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><body><p>Café</p></body></html>'
    data, _ = run(tmp_path, page.encode("iso-8859-1"), Upper(), name="page.xhtml")
    assert etree.fromstring(data, XML_PARSER).findtext(".//{*}p") == "CAFÉ"


def test_xhtml_not_well_formed(tmp_path: Path) -> None:
    broken = XHTML.replace("<br/>", "<br>")
    data, _ = run(tmp_path, broken, Upper())  # .html: read as HTML, as browsers read text/html
    assert b"A\xc2\xa0RED HOUSE" in data
    with pytest.raises(DocumentFormatError, match="well-formed"):
        run(tmp_path, broken, Upper(), name="page.xhtml")


def test_inner_lang_of_the_source_becomes_the_target(tmp_path: Path) -> None:
    page = (
        '<html lang="en-GB"><body><p lang="en">Hello <span lang="EN-us">there</span></p>'
        '<p>He said <q lang="fr">déjà vu</q></p><pre lang="en">keep</pre></body></html>'
    )
    data, _ = run(tmp_path, page, Upper())
    root = lxml.html.document_fromstring(data.decode("utf-8"))
    assert [e.get("lang") for e in root.iter() if e.get("lang")] == ["es", "es", "es", "fr", "en"]
    fragment = '<p lang="en" xml:lang="en">Hello</p>'
    no_source = Upper()
    no_source.source = None  # detected from the text: the fake says English
    data, _ = run(tmp_path, fragment, no_source, name="part.html")
    assert data.decode("utf-8") == '<p lang="es" xml:lang="es">HELLO</p>'


REAL_HTML = Path(__file__).parents[1] / "data" / "real" / "html"


def _elements(root: object) -> Counter[str]:
    return Counter(
        str(e.tag).rsplit("}", 1)[-1].lower()
        for e in root.iter()  # type: ignore[attr-defined]
        if isinstance(e.tag, str)
    )


@pytest.mark.parametrize("name", sorted(p.name for p in REAL_HTML.glob("*.html")))
def test_real_files_keep_encoding_elements_and_well_formedness(tmp_path: Path, name: str) -> None:
    source = (REAL_HTML / name).read_bytes()
    data, _ = run(tmp_path, source, Upper(), name=name)
    before, after = html5(source), html5(data)
    assert _elements(after) == _elements(before)  # an HTML5 parser sees the same elements
    charset = re.search(rb"<meta[^>]*charset=[^>]*>", source, re.I)
    if charset is not None:
        assert charset.group() in data  # the declaration is kept, and holds
        declared = re.search(rb"charset=([\w-]+)", charset.group())
        assert declared is not None
        data.decode(declared.group(1).decode())
    xml = XML_PARSER
    try:
        etree.fromstring(source, xml)
    except etree.XMLSyntaxError:
        return
    translated = etree.fromstring(data, xml)  # well-formed in, well-formed out
    assert _elements(translated) == _elements(etree.fromstring(source, xml))
    assert data.count(b"<![CDATA[") == source.count(b"<![CDATA[")


def test_wrong_content_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "page.html"
    fake.write_bytes(b"\x00\x01\x02" * 100)
    with pytest.raises(DocumentFormatError):
        handlers.find_handler(fake)


@needs_apertium
def test_end_to_end_through_apertium(tmp_path: Path) -> None:
    source = tmp_path / "index.html"
    source.write_text(
        '<!DOCTYPE html>\n<html lang="en"><head><title>Home</title></head><body>\n'
        '<p>The house is <b>red</b>. <img src="a.png" alt="The big dog"></p>\n'
        "<script>const house = 1;</script>\n</body></html>\n",
        encoding="utf-8",
    )
    with Engine(Settings.from_env()) as engine:
        result = files.translate_file(engine, source, "es")
    out = result.output_path.read_text(encoding="utf-8")
    assert result.output_path.name == "index.es.html" and result.format == "html"
    assert "casa" in out and '<html lang="es">' in out and "<b>" in out
    assert "<script>const house = 1;</script>" in out and 'src="a.png"' in out
    assert "perro" in out  # the alt text


@pytest.mark.parametrize("fragment", [False, True])
def test_deep_nesting_is_read_whole_or_refused_never_cut(tmp_path: Path, fragment: bool) -> None:
    """libxml2 stops at 256 levels and drops the rest of the file without a word: 200 levels are read whole
    (the paragraph after them too); past the parser's limit the file is refused with a 413."""
    head, tail = ("", "") if fragment else ("<!DOCTYPE html><html><body>", "</body></html>")

    def nested(depth: int) -> str:
        return f"{head}{'<div>' * depth}deep words{'</div>' * depth}<p>after words</p>{tail}"

    out, _ = run(tmp_path, nested(200), Upper())
    assert b"DEEP WORDS" in out and b"AFTER WORDS" in out
    with pytest.raises(DocumentTooLarge, match="nested") as refused:
        run(tmp_path, nested(300), Upper())
    assert refused.value.status == 413
