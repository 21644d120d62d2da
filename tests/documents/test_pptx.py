"""PPTX: shapes, groups, tables and notes translated with their run formatting; fields and breaks kept."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from lxml import etree  # type: ignore[import-untyped]
from office_support import libreoffice_odf_elements, needs_libreoffice
from pptx import Presentation
from pptx.chart.data import CategoryChartData
from pptx.dml.color import RGBColor
from pptx.enum.chart import XL_CHART_TYPE
from pptx.oxml import parse_xml
from pptx.util import Inches
from support import needs_apertium

from dragoman.documents import _zipcheck
from dragoman.documents.pptx import PptxHandler
from dragoman.errors import DocumentFormatError
from dragoman.pipelines import translate_file as files
from dragoman.settings import Settings
from dragoman.translation.engine import Engine
from dragoman.translation.protection import protect
from dragoman.translation.types import Protected

A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
RED = RGBColor(0xC0, 0, 0)  # type: ignore[no-untyped-call]
A_DECL = 'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'


def shout(text: str) -> str:
    """Upper-case what the engine would translate; protected spans (tags, placeholders, URLs) kept."""
    return "".join(p.output if isinstance(p, Protected) else p.upper() for p in protect(text))


class Fake:
    def __init__(self, rewrite: Callable[[str], str] = shout, target: str = "spa_Latn") -> None:
        self.source: str | None = "eng_Latn"
        self.target = target
        self.rewrite = rewrite
        self.calls: list[list[str]] = []

    def __call__(self, texts: Sequence[str], *, done: int = 0, total: int | None = None) -> list[str]:
        self.calls.append(list(texts))
        return [self.rewrite(t) for t in texts]

    def detect_language(self, text: str) -> str | None:
        return None


def build_deck(path: Path) -> Path:
    deck = Presentation()
    title = deck.slides.add_slide(deck.slide_layouts[0])
    title.shapes.title.text = "The house is red"
    title.placeholders[1].text_frame.text = "A report about the garden"
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Details"
    box = slide.shapes.add_textbox(Inches(1), Inches(1.5), Inches(6), Inches(2)).text_frame
    para = box.paragraphs[0]
    for text, bold, colour, link in (
        ("The ", False, None, None),
        ("big", True, None, None),
        (" house is ", False, None, None),
        ("red", False, RED, None),
        (". See ", False, None, None),
        ("our website", False, None, "https://example.org/house"),
        (" for {name}.", False, None, None),
    ):
        run = para.add_run()
        run.text = text
        run.font.bold = bold or None
        if colour is not None:
            run.font.color.rgb = colour
        if link is not None:
            run.hyperlink.address = link
    box.add_paragraph().text = "Line one\vline two"  # python-pptx writes a:br
    para = box.add_paragraph()
    para._p.append(parse_xml(f'<a:r {A_DECL}><a:rPr lang="en-US" dirty="0"/><a:t>Slide </a:t></a:r>'))
    para._p.append(
        parse_xml(
            f'<a:fld {A_DECL} id="{{B6F15528-21DE-4FAA-801E-634DDDAF4B2B}}" type="slidenum">'
            '<a:rPr lang="en-US"/><a:t>2</a:t></a:fld>'
        )
    )
    para._p.append(parse_xml(f'<a:r {A_DECL}><a:rPr lang="en-US"/><a:t> of the deck</a:t></a:r>'))
    group = slide.shapes.add_group_shape()
    group.shapes.add_textbox(
        Inches(1), Inches(4), Inches(3), Inches(1)
    ).text_frame.text = "The dog in a group"
    inner = group.shapes.add_group_shape()
    inner.shapes.add_textbox(Inches(4), Inches(4), Inches(3), Inches(1)).text_frame.text = "A nested group"
    table = slide.shapes.add_table(2, 2, Inches(1), Inches(5), Inches(6), Inches(1)).table
    table.cell(0, 0).text = "The first cell"
    table.cell(0, 1).text = "2024"
    table.cell(1, 0).text = "The cat is small"
    table.cell(1, 1).text = "The tree is tall"
    slide.notes_slide.notes_text_frame.text = "Speaker notes about the house."
    deck.save(str(path))
    return path


def slide_parts(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as z:
        return {
            n: etree.fromstring(z.read(n))
            for n in z.namelist()
            if re.fullmatch(r"ppt/(slides/slide|notesSlides/notesSlide|slideLayouts/slideLayout)\d+\.xml", n)
        }


def census(path: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for root in slide_parts(path).values():
        for tag in (A + "p", A + "r", A + "br", A + "fld", A + "tbl", A + "tc", P + "sp", P + "grpSp"):
            counts[tag] = counts.get(tag, 0) + sum(1 for _ in root.iter(tag))
    return counts


def paragraph_texts(path: Path) -> dict[str, list[str]]:
    return {
        name: ["".join(t.text or "" for t in p.iter(A + "t")) for p in root.iter(A + "p")]
        for name, root in slide_parts(path).items()
    }


@pytest.fixture
def deck(tmp_path: Path) -> Path:
    return build_deck(tmp_path / "deck.pptx")


def test_every_text_is_translated_and_structure_kept(deck: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.pptx"
    fake = Fake()
    report = PptxHandler().translate(deck, out, fake, None)
    assert len(fake.calls) == 1
    assert census(out) == census(deck)
    before, after = paragraph_texts(deck), paragraph_texts(out)
    for name in before:
        if "slideLayout" in name:
            assert after[name] == before[name]  # layouts are not translated
            continue
        for old, new in zip(before[name], after[name], strict=True):
            assert new == (
                old.replace("Slide ", "SLIDE ").replace(" of the deck", " OF THE DECK")
                if "Slide" in old
                else shout(old)
            )
    flat = [t for ts in after.values() for t in ts]
    for expected in (
        "THE DOG IN A GROUP",
        "A NESTED GROUP",
        "THE TREE IS TALL",
        "2024",
        "SPEAKER NOTES ABOUT THE HOUSE.",
        "SLIDE 2 OF THE DECK",
    ):
        assert expected in flat
    assert report.pages == 2 and report.counts["slides"] == 2 and report.counts["notes"] == 1
    assert report.counts["tables"] == 1 and report.counts["cells"] == 4 and report.counts["groups"] == 2
    assert report.warnings == []


def test_run_formatting_hyperlinks_breaks_and_fields(deck: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.pptx"
    fake = Fake()
    PptxHandler().translate(deck, out, fake, None)
    assert "The <1>big</1> house is <2>red</2>. See <3>our website</3> for {name}." in fake.calls[0]
    assert "Line one<1/>line two" in fake.calls[0] and "Slide <1/> of the deck" in fake.calls[0]
    shapes = Presentation(str(out)).slides[1].shapes
    box = next(s for s in shapes if s.has_text_frame and "BIG" in s.text_frame.text)
    runs = box.text_frame.paragraphs[0].runs
    assert [r.text for r in runs if r.font.bold] == ["BIG"]
    red = next(r for r in runs if r.text == "RED")
    assert red.font.color.rgb == RED
    link = next(r for r in runs if r.hyperlink.address)
    assert (link.text, link.hyperlink.address) == ("OUR WEBSITE", "https://example.org/house")
    assert box.text_frame.paragraphs[1].text == "LINE ONE\vLINE TWO"
    field = box.text_frame.paragraphs[2]._p
    assert [f.findtext(A + "t") for f in field.iter(A + "fld")] == ["2"]
    langs = {r.get("lang") for r in field.iter(A + "rPr")}
    assert langs == {"es", "en-US"}  # translated runs say Spanish; the field's run is left alone
    notes = Presentation(str(out)).slides[1].notes_slide.notes_text_frame.text
    assert notes == "SPEAKER NOTES ABOUT THE HOUSE."


def test_reordered_and_lost_tags(deck: Path, tmp_path: Path) -> None:
    def swap_spans(text: str) -> str:
        return shout(re.sub(r"<1>big</1>(.*)<2>red</2>", r"<2>red</2>\1<1>big</1>", text))

    out = tmp_path / "out.pptx"
    PptxHandler().translate(deck, out, Fake(swap_spans), None)
    para = Presentation(str(out)).slides[1].shapes[1].text_frame.paragraphs[0]
    runs = [(r.text, r.font.bold, r.font.color.rgb if r.font.color.type else None) for r in para.runs]
    assert runs[:4] == [
        ("THE ", None, None),
        ("RED", None, RED),
        (" HOUSE IS ", None, None),
        ("BIG", True, None),
    ]
    assert para.runs[5].hyperlink.address == "https://example.org/house"  # runs rebuilt, link kept
    out2 = tmp_path / "out2.pptx"
    report = PptxHandler().translate(deck, out2, Fake(lambda t: shout(re.sub(r"</?\d+/?>", "", t))), None)
    assert any(w.startswith("formatting_approximate") for w in report.warnings)
    assert census(out2) == census(deck)


def test_right_to_left_target_sets_rtl_paragraphs(deck: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.pptx"
    PptxHandler().translate(deck, out, Fake(target="heb_Hebr"), None)
    slide = slide_parts(out)["ppt/slides/slide1.xml"]
    ppr = [p.find(A + "pPr") for p in slide.iter(A + "p")]
    assert ppr and all(x is not None and x.get("rtl") == "1" for x in ppr)
    Presentation(str(out))


def build_chart_deck(path: Path) -> Path:
    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    data = CategoryChartData()  # type: ignore[no-untyped-call]
    data.categories = ["East", "West"]
    data.add_series("Sales", (1.5, 2.5))  # type: ignore[no-untyped-call]
    chart = slide.shapes.add_chart(
        XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), Inches(1), Inches(6), Inches(4), data
    ).chart
    chart.has_title = True
    chart.chart_title.text_frame.text = "Sales of the house"
    deck.save(str(path))
    return path


def test_chart_titles_categories_and_series_are_translated(tmp_path: Path) -> None:
    build_chart_deck(tmp_path / "chart.pptx")
    out = tmp_path / "out.pptx"
    report = PptxHandler().translate(tmp_path / "chart.pptx", out, Fake(), None)
    chart = next(s for s in Presentation(str(out)).slides[0].shapes if s.has_chart).chart
    assert chart.chart_title.text_frame.text == "SALES OF THE HOUSE"
    # The category labels and series names the chart shows are translated (issue 11); numbers are not.
    assert list(chart.plots[0].categories) == ["EAST", "WEST"]
    assert [s.name for s in chart.plots[0].series] == ["SALES"]
    assert list(chart.plots[0].series[0].values) == [1.5, 2.5]
    assert report.counts["charts"] == 1
    # and so does the embedded workbook the chart's data comes from ("Edit data" in PowerPoint)
    blob = chart.part.chart_workbook.xlsx_part.blob
    with zipfile.ZipFile(io.BytesIO(blob)) as workbook:
        strings = etree.fromstring(workbook.read("xl/sharedStrings.xml"))
    assert sorted(t.text for t in strings.iter(f"{{{strings.nsmap[None]}}}t")) == ["EAST", "SALES", "WEST"]


@needs_libreoffice
@pytest.mark.slow
def test_libreoffice_opens_the_output_with_the_same_elements(tmp_path: Path) -> None:
    for source in (build_deck(tmp_path / "deck.pptx"), build_chart_deck(tmp_path / "chart.pptx")):
        out = tmp_path / f"out-{source.name}"
        PptxHandler().translate(source, out, Fake(), None)
        before = libreoffice_odf_elements(source, "odp")
        assert before["page"] > 0 and (before["p"] > 0 or before["object"] > 0)
        assert libreoffice_odf_elements(out, "odp") == before


@pytest.fixture
def engine() -> Any:
    with Engine(Settings.from_env()) as eng:
        yield eng


@needs_apertium
def test_apertium_end_to_end(engine: Engine, tmp_path: Path) -> None:
    source = build_deck(tmp_path / "deck.pptx")
    result = files.translate_file(engine, source, "es")
    assert result.output_path == tmp_path / "deck.es.pptx" and result.format == "pptx"
    deck = Presentation(str(result.output_path))
    assert "casa" in deck.slides[0].shapes.title.text.lower()
    assert "casa" in deck.slides[1].notes_slide.notes_text_frame.text.lower()
    assert len(deck.slides) == 2


def test_bad_files_are_refused(engine: Engine, tmp_path: Path) -> None:
    ole = tmp_path / "locked.pptx"
    ole.write_bytes(_zipcheck.OLE_MAGIC + b"\x00" * 1000)
    with pytest.raises(DocumentFormatError, match="encrypted"):
        files.translate_file(engine, ole, "es", source="en")
    legacy = tmp_path / "old.ppt"
    legacy.write_bytes(_zipcheck.OLE_MAGIC + b"\x00" * 1000)
    with pytest.raises(DocumentFormatError, match=r"legacy \.ppt"):
        files.translate_file(engine, legacy, "es", source="en")
    broken = tmp_path / "broken.pptx"
    broken.write_bytes(b"PK\x03\x04not really a zip")
    with pytest.raises(DocumentFormatError, match="corrupt"):
        PptxHandler().translate(broken, tmp_path / "x.pptx", Fake(), None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.pptx", "locked.pptx", "old.ppt"]
