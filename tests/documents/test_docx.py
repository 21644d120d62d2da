"""DOCX: paragraphs, tables, headers, notes, comments, text boxes and hyperlinks translated with their
formatting; bad containers refused. The run mapping itself is tested in test_runs.py."""

from __future__ import annotations

import re
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docx
import pytest
from docx.opc.constants import RELATIONSHIP_TYPE as RT
from docx.opc.packuri import PackURI
from docx.opc.part import Part
from docx.oxml import parse_xml
from docx.oxml.ns import nsdecls
from docx.shared import RGBColor
from docx.text.paragraph import Paragraph
from lxml import etree  # type: ignore[import-untyped]
from office_support import libreoffice_elements, needs_libreoffice
from support import needs_apertium

from dragoman.documents import _zipcheck
from dragoman.documents.docx import DocxHandler, write_docx_export
from dragoman.errors import DocumentFormatError, DocumentTooLarge
from dragoman.pipelines import translate_file as files
from dragoman.settings import Settings
from dragoman.testing.fakes import FakeTranslator
from dragoman.translation.engine import Engine
from dragoman.translation.protection import protect
from dragoman.translation.types import Protected

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
FOOTNOTES_CT = "application/vnd.openxmlformats-officedocument.wordprocessingml.footnotes+xml"


def shout(text: str) -> str:
    """Upper-case what the engine would translate; protected spans (tags, placeholders, URLs) kept."""
    return "".join(p.output if isinstance(p, Protected) else p.upper() for p in protect(text))


class Fake(FakeTranslator):
    """A deterministic translator: ``rewrite`` each text (default :func:`shout`); records its calls."""

    def __init__(self, rewrite: Callable[[str], str] = shout, target: str = "spa_Latn") -> None:
        super().__init__(rewrite, target=target)


# --- building documents ---------------------------------------------------------------------------------


def add_hyperlink(paragraph: Paragraph, url: str, text: str) -> None:
    r_id = paragraph.part.relate_to(url, RT.HYPERLINK, is_external=True)
    paragraph._p.append(
        parse_xml(
            f'<w:hyperlink {nsdecls("w", "r")} r:id="{r_id}"><w:r><w:rPr><w:rStyle w:val="Hyperlink"/>'
            f'<w:color w:val="0563C1"/><w:u w:val="single"/></w:rPr><w:t>{text}</w:t></w:r></w:hyperlink>'
        )
    )


def add_field(paragraph: Paragraph, instr: str, shown: str) -> None:
    for xml in (
        '<w:r {ns}><w:fldChar w:fldCharType="begin"/></w:r>',
        '<w:r {ns}><w:instrText xml:space="preserve"> {instr} </w:instrText></w:r>',
        '<w:r {ns}><w:fldChar w:fldCharType="separate"/></w:r>',
        "<w:r {ns}><w:t>{shown}</w:t></w:r>",
        '<w:r {ns}><w:fldChar w:fldCharType="end"/></w:r>',
    ):
        paragraph._p.append(parse_xml(xml.format(ns=nsdecls("w"), instr=instr, shown=shown)))


TEXT_BOX = """<w:r {ns}><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><wp:inline>
<wp:extent cx="1828800" cy="457200"/><wp:docPr id="7" name="Text Box 7"/>
<a:graphic><a:graphicData uri="http://schemas.microsoft.com/office/word/2010/wordprocessingShape">
<wps:wsp><wps:spPr/><wps:txbx><w:txbxContent><w:p><w:r><w:rPr><w:i/></w:rPr><w:t>The garden is green.</w:t>
</w:r></w:p></w:txbxContent></wps:txbx><wps:bodyPr/></wps:wsp></a:graphicData></a:graphic></wp:inline>
</w:drawing></mc:Choice><mc:Fallback><w:pict><v:shape style="width:144pt;height:36pt"><v:textbox>
<w:txbxContent><w:p><w:r><w:rPr><w:i/></w:rPr><w:t>The garden is green.</w:t></w:r></w:p></w:txbxContent>
</v:textbox></v:shape></w:pict></mc:Fallback></mc:AlternateContent></w:r>"""

FOOTNOTES = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:footnotes {ns}>
<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>
<w:footnote w:type="continuationSeparator" w:id="0"><w:p><w:r><w:continuationSeparator/></w:r></w:p>
</w:footnote>
<w:footnote w:id="1"><w:p><w:r><w:rPr><w:vertAlign w:val="superscript"/></w:rPr><w:footnoteRef/></w:r>
<w:r><w:t xml:space="preserve"> The source is the city archive.</w:t></w:r></w:p></w:footnote>
</w:footnotes>"""


def build_document(path: Path) -> Path:
    """A document with every kind of place that holds text."""
    d = docx.Document()
    d.add_heading("Annual report", level=1)
    p = d.add_paragraph("The ")
    p.add_run("big").bold = True
    p.add_run(" house is ")
    red = p.add_run("red")
    red.italic = True
    red.font.color.rgb = RGBColor(0xC0, 0x00, 0x00)
    p.add_run(". Write to {name} at https://example.com/a?b=1 today.")
    d.add_comment(red, text="The red colour is important.", author="Ann", initials="A")
    p = d.add_paragraph()
    run = p.add_run("Name:\tThe dog")  # python-docx writes the tab as w:tab
    run.add_break()
    run.add_text("The cat is small.")
    p = d.add_paragraph("Visit ")
    add_hyperlink(p, "https://example.org/house", "our website")
    p.add_run(" for the house.")
    p = d.add_paragraph("Page ")
    add_field(p, "PAGE", "1")
    p.add_run(" of the report.")
    p = d.add_paragraph("The tree is tall")
    p._p.append(
        parse_xml(
            f'<w:r {nsdecls("w")}><w:rPr><w:vertAlign w:val="superscript"/></w:rPr>'
            '<w:footnoteReference w:id="1"/></w:r>'
        )
    )
    p.add_run(".")
    ns = nsdecls("w", "wp", "a") + (
        ' xmlns:v="urn:schemas-microsoft-com:vml"'
        ' xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"'
        ' xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"'
    )
    d.add_paragraph("A box follows: ")._p.append(parse_xml(TEXT_BOX.format(ns=ns)))
    p = d.add_paragraph()
    p.add_run("Important").bold = True
    p.add_run(" notice about the house.")
    table = d.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "The first cell"
    table.cell(0, 1).paragraphs[0].add_run("A bold cell").bold = True
    table.cell(1, 0).text = "42"
    nested = table.cell(1, 1).add_table(rows=1, cols=2)
    nested.cell(0, 0).text = "A nested cell"
    nested.cell(0, 1).text = "Another nested cell"
    section = d.sections[0]
    section.different_first_page_header_footer = True
    d.settings.odd_and_even_pages_header_footer = True
    section.header.paragraphs[0].text = "The default header"
    section.first_page_header.paragraphs[0].text = "The first page header"
    section.even_page_header.paragraphs[0].text = "The even page header"
    section.footer.paragraphs[0].text = "The default footer"
    section.first_page_footer.paragraphs[0].text = "The first page footer"
    section.even_page_footer.paragraphs[0].text = "The even page footer"
    footnotes = Part(
        PackURI("/word/footnotes.xml"),
        FOOTNOTES_CT,
        FOOTNOTES.format(ns=nsdecls("w")).encode(),
        d.part.package,
    )
    d.part.relate_to(footnotes, RT.FOOTNOTES)
    d.save(str(path))
    return path


def parts(path: Path) -> dict[str, Any]:
    """Every translated kind of XML part of a DOCX, parsed."""
    with zipfile.ZipFile(path) as z:
        return {
            n: etree.fromstring(z.read(n))
            for n in z.namelist()
            if re.fullmatch(r"word/(document|header\d+|footer\d+|footnotes|comments)\.xml", n)
        }


def census(path: Path) -> dict[str, int]:
    """Counts of the structure a translation must keep."""
    tags = (
        "p",
        "tbl",
        "tc",
        "tab",
        "br",
        "fldChar",
        "hyperlink",
        "drawing",
        "footnoteReference",
        "txbxContent",
        "commentReference",
        "commentRangeStart",
        "sectPr",
    )
    counts = dict.fromkeys(tags, 0)
    for root in parts(path).values():
        for tag in tags:
            counts[tag] += sum(1 for _ in root.iter(W + tag))
    return counts


def texts(path: Path) -> dict[str, list[str]]:
    """Each part's paragraph texts (w:t only), in order."""
    return {
        name: ["".join(t.text or "" for t in p.iter(W + "t")) for p in root.iter(W + "p")]
        for name, root in parts(path).items()
    }


@pytest.fixture
def document(tmp_path: Path) -> Path:
    return build_document(tmp_path / "report.docx")


# --- round trip with a fake translator ------------------------------------------------------------------


def test_every_place_is_translated_and_structure_kept(document: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.docx"
    fake = Fake()
    report = DocxHandler().translate(document, out, fake, None)
    assert len(fake.calls) == 1  # one call for the whole document
    assert census(out) == census(document)
    before, after = texts(document), texts(out)
    assert before.keys() == after.keys()
    for name in before:
        for old, new in zip(before[name], after[name], strict=True):
            expected = old if old == "1" else shout(old)  # the PAGE field's shown text is kept
            # "dog" and "The" are apart in the document (a tab between them): joined here without it,
            # they would read as one camelCase name that protection keeps
            expected = expected.replace("dogThe", "DOGTHE")
            assert new == expected, name
    joined = "\n".join(t for ts in after.values() for t in ts)
    for phrase in (
        "THE DEFAULT HEADER",
        "THE FIRST PAGE HEADER",
        "THE EVEN PAGE HEADER",
        "THE EVEN PAGE FOOTER",
        "THE SOURCE IS THE CITY ARCHIVE.",
        "THE RED COLOUR IS IMPORTANT.",
        "ANOTHER NESTED CELL",
        "THE GARDEN IS GREEN.",
        "{name}",
        "https://example.com/a?b=1",
    ):
        assert phrase in joined
    boxes = [
        t for root in parts(out).values() for t in root.iter(W + "t") if t.text == "THE GARDEN IS GREEN."
    ]
    assert len(boxes) == 2  # the text box and its VML fallback
    assert report.counts["tables"] == 2 and report.counts["cells"] == 6
    assert report.counts["headers"] == 3 and report.counts["footers"] == 3
    assert report.counts["text_boxes"] == 1 and report.counts["hyperlinks"] == 1
    assert report.segments == len(fake.calls[0]) and report.warnings == []
    assert "42" not in fake.calls[0]  # nothing to translate in numbers


def test_inline_formatting_hyperlinks_and_fields(document: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.docx"
    fake = Fake()
    DocxHandler().translate(document, out, fake, None)
    sent = fake.calls[0]
    assert (
        "The <1>big</1> house is <2>red</2><3/>. Write to {name} at https://example.com/a?b=1 today." in sent
    )
    # A line break ends a text: the lines are translated apart, no word moves between them (issue 11).
    assert "Name:<1/>The dog" in sent and "The cat is small." in sent
    assert "Visit <1>our website</1> for the house." in sent
    assert "Page <1/> of the report." in sent
    d = docx.Document(str(out))
    runs = [(r.text, r.bold, r.italic, r.font.color.rgb) for r in d.paragraphs[1].runs]
    assert ("BIG", True, None, None) in runs
    assert ("RED", None, True, RGBColor(0xC0, 0x00, 0x00)) in runs
    assert d.paragraphs[0].style is not None and d.paragraphs[0].style.name == "Heading 1"
    assert d.paragraphs[0].text == "ANNUAL REPORT"
    [link] = d.paragraphs[3].hyperlinks
    assert (link.text, link.url) == ("OUR WEBSITE", "https://example.org/house")
    assert d.paragraphs[3].text == "VISIT OUR WEBSITE FOR THE HOUSE."
    field = d.paragraphs[4]._p
    assert [t.text for t in field.iter(W + "instrText")] == [" PAGE "]
    assert d.paragraphs[4].text == "PAGE 1 OF THE REPORT."
    assert [c.text for c in d.comments] == ["THE RED COLOUR IS IMPORTANT."]
    assert d.tables[0].cell(0, 1).paragraphs[0].runs[0].bold is True
    assert d.tables[0].cell(1, 1).tables[0].cell(0, 0).text == "A NESTED CELL"
    assert d.paragraphs[2].runs[0].text == "NAME:\tTHE DOG\nTHE CAT IS SMALL."  # tab and break in place
    with zipfile.ZipFile(out) as z:
        styles = etree.fromstring(z.read("word/styles.xml"))
    lang = styles.find(f"{W}docDefaults/{W}rPrDefault/{W}rPr/{W}lang")
    assert (lang.get(W + "val"), lang.get(W + "bidi")) == ("es", "ar-SA")  # the spelling language


def test_reordered_tags_rebuild_the_runs(document: Path, tmp_path: Path) -> None:
    def adjective_after_noun(text: str) -> str:
        return shout(re.sub(r"<(\d+)>([^<]*)</\1> (\w+)", r"\3 <\1>\2</\1>", text))

    out = tmp_path / "out.docx"
    DocxHandler().translate(document, out, Fake(adjective_after_noun), None)
    d = docx.Document(str(out))
    assert [(r.text, r.bold) for r in d.paragraphs[7].runs] == [
        ("NOTICE ", None),
        ("IMPORTANT", True),
        (" ABOUT THE HOUSE.", None),
    ]
    runs = d.paragraphs[1].runs
    assert d.paragraphs[1].text.startswith("THE HOUSE BIG IS RED.")
    assert [r.text for r in runs if r.bold] == ["BIG"] and [r.text for r in runs if r.italic] == ["RED"]
    assert census(out) == census(document)


def test_lost_tags_fall_back_and_warn(document: Path, tmp_path: Path) -> None:
    def drop_tags(text: str) -> str:
        return shout(re.sub(r"</?\d+/?>", "", text))

    out = tmp_path / "out.docx"
    report = DocxHandler().translate(document, out, Fake(drop_tags), None)
    assert any(w.startswith("formatting_approximate") for w in report.warnings)
    d = docx.Document(str(out))
    assert d.paragraphs[7].text == "IMPORTANT NOTICE ABOUT THE HOUSE."
    assert d.paragraphs[2].runs[0].text.count("\t") == 1  # barriers are never lost, only text moves
    assert census(out) == census(document)


def test_right_to_left_target_marks_paragraphs_and_runs(document: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.docx"
    DocxHandler().translate(document, out, Fake(target="arb_Arab"), None)
    body = parts(out)["word/document.xml"]
    paragraphs = list(body.iter(W + "p"))
    assert paragraphs[1].find(f"{W}pPr/{W}bidi") is not None
    bold = [r for r in paragraphs[1].iter(W + "r") if r.find(f"{W}rPr/{W}b") is not None]
    assert bold and all(
        r.find(f"{W}rPr/{W}bCs") is not None and r.find(f"{W}rPr/{W}rtl") is not None for r in bold
    )
    rpr_tags = [c.tag for c in bold[0].find(W + "rPr")]
    assert rpr_tags.index(W + "b") < rpr_tags.index(W + "bCs") < rpr_tags.index(W + "rtl")
    with zipfile.ZipFile(out) as z:
        styles = etree.fromstring(z.read("word/styles.xml"))
    lang = styles.find(f"{W}docDefaults/{W}rPrDefault/{W}rPr/{W}lang")
    assert (lang.get(W + "val"), lang.get(W + "bidi")) == ("en-US", "ar")  # complex scripts: w:bidi
    docx.Document(str(out))  # still opens


def test_docx_export(tmp_path: Path) -> None:
    out = tmp_path / "export.docx"
    write_docx_export(["مرحبا بالعالم", "Line one\nline two", "bad \x01 char"], out, rtl=True)
    d = docx.Document(str(out))
    assert [p.text for p in d.paragraphs] == ["مرحبا بالعالم", "Line one\nline two", "bad  char"]
    assert all(p._p.find(f"{W}pPr/{W}bidi") is not None for p in d.paragraphs)
    write_docx_export(["plain"], tmp_path / "ltr.docx", rtl=False)
    assert docx.Document(str(tmp_path / "ltr.docx")).paragraphs[0]._p.find(f"{W}pPr/{W}bidi") is None


# --- through the engine ---------------------------------------------------------------------------------


@pytest.fixture
def engine() -> Any:
    with Engine(Settings.from_env()) as eng:
        yield eng


@needs_apertium
def test_apertium_end_to_end_through_translate_file(engine: Engine, tmp_path: Path) -> None:
    source = tmp_path / "house.docx"
    d = docx.Document()
    d.add_paragraph("The house is red.")
    p = d.add_paragraph("The ")
    p.add_run("big").bold = True
    p.add_run(" dog is in the house.")
    d.add_table(rows=1, cols=1).cell(0, 0).text = "The garden is green."
    d.sections[0].header.paragraphs[0].text = "The house"
    d.save(str(source))
    before = source.read_bytes()
    result = files.translate_file(engine, source, "es")
    assert result.output_path == tmp_path / "house.es.docx" and result.format == "docx"
    assert source.read_bytes() == before
    out = docx.Document(str(result.output_path))
    assert "casa" in out.paragraphs[0].text.lower()
    assert "perro" in out.paragraphs[1].text.lower()
    # Apertium keeps a tag where the word stood: the bold goes to the word in that place
    assert [r.text.strip() for r in out.paragraphs[1].runs if r.bold] in (["grande"], ["perro"])
    assert "grande" in out.paragraphs[1].text
    assert "jardín" in out.tables[0].cell(0, 0).text.lower()
    assert "casa" in out.sections[0].header.paragraphs[0].text.lower()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["house.docx", "house.es.docx"]


# --- bad containers -------------------------------------------------------------------------------------


def test_encrypted_or_legacy_files_are_refused(engine: Engine, tmp_path: Path) -> None:
    for name in ("secret.docx", "old.doc"):
        path = tmp_path / name
        path.write_bytes(_zipcheck.OLE_MAGIC + b"\x00" * 4000)
        with pytest.raises(DocumentFormatError, match="encrypted .*legacy") as info:
            files.translate_file(engine, path, "es", source="en")
        assert info.value.status == 415
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.doc", "secret.docx"]


def test_corrupt_and_foreign_zips_are_refused(engine: Engine, tmp_path: Path) -> None:
    broken = tmp_path / "broken.docx"
    broken.write_bytes(b"PK\x03\x04" + b"\x00garbage" * 100)
    with pytest.raises(DocumentFormatError, match="corrupt"):
        files.translate_file(engine, broken, "es", source="en")
    with pytest.raises(DocumentFormatError, match="corrupt"):
        DocxHandler().translate(broken, tmp_path / "x.docx", Fake(), None)
    plain_zip = tmp_path / "plain.docx"
    with zipfile.ZipFile(plain_zip, "w") as z:
        z.writestr("hello.txt", "hi")
    with pytest.raises(DocumentFormatError):
        files.translate_file(engine, plain_zip, "es", source="en")
    with pytest.raises(DocumentFormatError, match="Content_Types"):
        DocxHandler().translate(plain_zip, tmp_path / "y.docx", Fake(), None)


def test_zip_bombs_are_refused_before_reading(
    document: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bomb = tmp_path / "bomb.docx"
    shutil.copy(document, bomb)
    with zipfile.ZipFile(bomb, "a", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/media/zeros.bin", b"\x00" * (4 << 20))
    with pytest.raises(DocumentTooLarge, match="zip bomb") as bomb_error:
        DocxHandler().translate(bomb, tmp_path / "out.docx", Fake(), None)
    assert (bomb_error.value.status, bomb_error.value.code) == (413, "document_too_large")
    monkeypatch.setattr(_zipcheck, "MAX_ENTRIES", 5)
    with pytest.raises(DocumentTooLarge, match="entries"):
        DocxHandler().translate(document, tmp_path / "out2.docx", Fake(), None)
    monkeypatch.setattr(_zipcheck, "MAX_ENTRIES", 20_000)
    monkeypatch.setattr(_zipcheck, "MAX_TOTAL_UNCOMPRESSED", 1000)
    with pytest.raises(DocumentTooLarge, match="expands"):
        DocxHandler().translate(document, tmp_path / "out3.docx", Fake(), None)


def rewritten(document: Path, target: Path, change: Callable[[bytes], bytes]) -> Path:
    """A copy of ``document`` with its main part changed."""
    with zipfile.ZipFile(document) as src, zipfile.ZipFile(target, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            dst.writestr(item, change(data) if item.filename == "word/document.xml" else data)
    return target


def test_dtds_and_strict_open_xml_are_refused(document: Path, tmp_path: Path) -> None:
    evil = rewritten(
        document,
        tmp_path / "evil.docx",
        lambda d: d.replace(b"?>", b'?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>', 1),
    )
    with pytest.raises(DocumentFormatError, match="DTD"):
        DocxHandler().translate(evil, tmp_path / "out.docx", Fake(), None)
    strict = rewritten(
        document,
        tmp_path / "strict.docx",
        lambda d: d.replace(
            b"http://schemas.openxmlformats.org/wordprocessingml/2006/main",
            b"http://purl.oclc.org/ooxml/wordprocessingml/main",
        ),
    )
    with pytest.raises(DocumentFormatError, match="Strict Open XML"):
        DocxHandler().translate(strict, tmp_path / "out2.docx", Fake(), None)
    assert not (tmp_path / "out.docx").exists()


# --- code: monospace runs and code styles are kept (issue 11, item 1) -------------------------------------


def build_code_document(path: Path) -> Path:
    from docx.enum.style import WD_STYLE_TYPE

    d = docx.Document()
    html_code = d.styles.add_style("HTML Code", WD_STYLE_TYPE.CHARACTER)
    source_code = d.styles.add_style("Listing Block", WD_STYLE_TYPE.PARAGRAPH)
    source_code.font.name = "Consolas"  # a paragraph style in a monospace font
    based = d.styles.add_style("My Block", WD_STYLE_TYPE.PARAGRAPH)
    based.base_style = source_code  # based on a code style: code too
    p = d.add_paragraph("Call ")
    p.add_run("set the colour blue").font.name = "Courier New"
    p.add_run(" to paint it.")
    p = d.add_paragraph("Type ")
    p.add_run("make install", style=html_code)
    p.add_run(" as root, then ")
    p.add_run("print hello", style=html_code).bold = True
    p.add_run(" again.")
    p = d.add_paragraph("Mono ")
    for family in ("DejaVu Sans Mono", "Liberation Mono", "Menlo", "Source Code Pro"):
        p.add_run(f"keep {family} ").font.name = family
    p.add_run("and translate the rest.")
    d.add_paragraph("for item in the list: print item", style=source_code)
    d.add_paragraph("while the sun is up: wait", style=based)
    d.add_paragraph("An ordinary paragraph in Times.").runs[0].font.name = "Times New Roman"
    d.save(str(path))
    return path


def test_monospace_runs_and_code_styles_are_kept(tmp_path: Path) -> None:
    source = build_code_document(tmp_path / "code.docx")
    out = tmp_path / "out.docx"
    fake = FakeTranslator(str.upper)  # no protection at all: only the handler can keep the code
    DocxHandler().translate(source, out, fake, None)
    sent = "\n".join(fake.calls[0])
    for code in ("set the colour", "make install", "print hello", "keep", "for item", "while the sun"):
        assert code not in sent
    d = docx.Document(str(out))
    paragraphs = [p.text for p in d.paragraphs]
    assert paragraphs[0] == "CALL set the colour blue TO PAINT IT."
    assert paragraphs[1] == "TYPE make install AS ROOT, THEN print hello AGAIN."
    assert paragraphs[2].startswith("MONO keep DejaVu Sans Mono keep Liberation Mono keep Menlo keep Source")
    assert paragraphs[2].endswith("AND TRANSLATE THE REST.")
    assert paragraphs[3:] == [
        "for item in the list: print item",
        "while the sun is up: wait",
        "AN ORDINARY PARAGRAPH IN TIMES.",
    ]
    # the layout is kept: the code runs keep their font, style and bold
    runs = d.paragraphs[1].runs
    assert [(r.text, r.style.name, r.bold) for r in runs if r.style.name == "HTML Code"] == [
        ("make install", "HTML Code", None),
        ("print hello", "HTML Code", True),
    ]
    assert [r.font.name for r in d.paragraphs[0].runs if r.text == "set the colour blue"] == ["Courier New"]


def build_letter(path: Path) -> Path:
    """A mail-merge letter: an address block of MERGEFIELDs and line breaks, fields inside sentences."""
    d = docx.Document()
    p = d.add_paragraph()
    add_field(p, "MERGEFIELD Title", "«Title»")
    p.add_run(" ")
    add_field(p, "MERGEFIELD LastName", "«LastName»")
    p.add_run().add_break()
    p.add_run("Old Mill Road ")
    add_field(p, "MERGEFIELD Number", "«Number»")
    p.add_run().add_break()
    add_field(p, "MERGEFIELD City", "«City»")
    p.add_run(", ")
    add_field(p, "MERGEFIELD Zip", "«Zip»")
    p.add_run().add_break()
    p.add_run("United Kingdom")
    p = d.add_paragraph("Dear ")
    add_field(p, "MERGEFIELD FirstName", "«FirstName»")
    p.add_run(", your order of ")
    add_field(p, "MERGEFIELD Quantity", "«Quantity»")
    p.add_run(" red chairs is ready.")
    p = d.add_paragraph("This sentence was broken")
    p.add_run().add_break()
    p.add_run("by hand in the middle.")
    d.save(str(path))
    return path


def drop_and_move_tags(text: str) -> str:
    """A translation that loses every numbered tag and puts words in another order: what forces the
    text onto the paragraph's places by proportion, where words migrated between fields and lines."""
    words = re.sub(r"</?\d+/?>", " ", text).split()
    return " ".join(reversed(words)).upper()


def test_fields_and_line_breaks_keep_their_text(tmp_path: Path) -> None:
    source = build_letter(tmp_path / "letter.docx")
    out = tmp_path / "out.docx"
    fake = Fake(drop_and_move_tags)
    DocxHandler().translate(source, out, fake, None)
    sent = fake.calls[0]
    # Each line of the address block is its own text; stretches with no letter (" ", ", ") are not sent.
    assert sent[:2] == ["Old Mill Road ", "United Kingdom"]
    assert "Dear <1/>, your order of <2/> red chairs is ready." in sent  # a field inside a sentence stays
    assert "This sentence was broken<1/>by hand in the middle." in sent  # a sentence broken by hand
    d = docx.Document(str(out))
    address = d.paragraphs[0]._p
    lines = "".join(
        "\n" if e.tag == W + "br" else (e.text or "") for e in address.iter(W + "t", W + "br")
    ).split("\n")
    assert lines == ["«Title» «LastName»", "ROAD MILL OLD«Number»", "«City», «Zip»", "KINGDOM UNITED"]
    assert [t.text for t in address.iter(W + "instrText")] == [
        f" MERGEFIELD {n} " for n in ("Title", "LastName", "Number", "City", "Zip")
    ]
    assert "«FirstName»" in d.paragraphs[1].text and "«Quantity»" in d.paragraphs[1].text


@needs_libreoffice
@pytest.mark.slow
def test_libreoffice_opens_the_output_with_the_same_elements(document: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.docx"
    DocxHandler().translate(document, out, Fake(), None)
    letter = build_letter(tmp_path / "letter.docx")
    DocxHandler().translate(letter, tmp_path / "letter-out.docx", Fake(drop_and_move_tags), None)
    for source, output in ((document, out), (letter, tmp_path / "letter-out.docx")):
        before = libreoffice_elements(source)
        assert before["p"] > 0
        assert libreoffice_elements(output) == before
