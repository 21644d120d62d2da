"""XLSX: string cells (shared, inline, rich) and comments translated; numbers, formulas, sheet names,
styles and Excel table headers kept."""

from __future__ import annotations

import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openpyxl  # type: ignore[import-untyped]
import pytest
from lxml import etree  # type: ignore[import-untyped]
from openpyxl.cell.rich_text import CellRichText, TextBlock  # type: ignore[import-untyped]
from openpyxl.cell.text import InlineFont  # type: ignore[import-untyped]
from openpyxl.comments import Comment  # type: ignore[import-untyped]
from openpyxl.styles import Font, PatternFill  # type: ignore[import-untyped]
from openpyxl.worksheet.table import Table  # type: ignore[import-untyped]
from support import needs_apertium

from dragoman.documents import _zipcheck
from dragoman.documents.xlsx import XlsxHandler
from dragoman.errors import DocumentFormatError
from dragoman.pipelines import translate_file as files
from dragoman.settings import Settings
from dragoman.testing.fakes import FakeTranslator
from dragoman.translation.engine import Engine
from dragoman.translation.protection import protect
from dragoman.translation.types import Protected

S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
SST_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"
SST_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings"


def shout(text: str) -> str:
    return "".join(p.output if isinstance(p, Protected) else p.upper() for p in protect(text))


class Fake(FakeTranslator):
    def __init__(self, rewrite: Callable[[str], str] = shout) -> None:
        super().__init__(rewrite)


def to_shared_strings(path: Path, keep_inline: set[str]) -> None:
    """Rewrite openpyxl's inline strings as shared strings, as Excel writes them (except ``keep_inline``
    cells), deduplicating equal plain strings."""
    with zipfile.ZipFile(path) as z:
        entries = {i.filename: z.read(i) for i in z.infolist()}
    sst = etree.Element(S + "sst", nsmap={None: S[1:-1]})
    index: dict[bytes, int] = {}
    for name in [n for n in entries if n.startswith("xl/worksheets/sheet")]:
        root = etree.fromstring(entries[name])
        for cell in root.iter(S + "c"):
            holder = cell.find(S + "is")
            if cell.get("t") != "inlineStr" or holder is None or cell.get("r") in keep_inline:
                continue
            holder.tag = S + "si"
            key = etree.tostring(holder)
            if key not in index:
                index[key] = len(sst)
                sst.append(holder)
            else:
                cell.remove(holder)
            cell.set("t", "s")
            etree.SubElement(cell, S + "v").text = str(index[key])
        entries[name] = etree.tostring(root, xml_declaration=True, encoding="UTF-8")
    entries["xl/sharedStrings.xml"] = etree.tostring(sst, xml_declaration=True, encoding="UTF-8")
    entries["[Content_Types].xml"] = entries["[Content_Types].xml"].replace(
        b"</Types>", f'<Override PartName="/xl/sharedStrings.xml" ContentType="{SST_TYPE}"/></Types>'.encode()
    )
    entries["xl/_rels/workbook.xml.rels"] = entries["xl/_rels/workbook.xml.rels"].replace(
        b"</Relationships>",
        f'<Relationship Id="rIdSst" Type="{SST_REL}" Target="sharedStrings.xml"/></Relationships>'.encode(),
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries.items():
            z.writestr(name, data)


def build_workbook(path: Path) -> Path:
    wb = openpyxl.Workbook()
    ws = wb.active
    assert ws is not None
    ws.title = "House data"
    ws["A1"] = "The house is red."
    ws["A1"].font = Font(bold=True, color="FFC00000")
    ws["A1"].fill = PatternFill("solid", fgColor="FFFFFF00")
    ws["B1"] = CellRichText("The ", TextBlock(InlineFont(b=True), "big"), " dog is here.")
    ws["C1"] = "The house is red."  # the same shared string as A1
    ws["A2"] = 42
    ws["B2"] = "2024-01-31"
    ws["A3"] = '=CONCATENATE("The ", "house")'
    ws["A4"] = "The garden is green."  # stays an inline string
    ws["A1"].comment = Comment("The comment is long.", "Ann")
    pets = wb.create_sheet("Pets")
    pets.append(["Name", "Price"])
    pets.append(["The dog", 5])
    pets.append(["The cat", 7])
    pets.add_table(Table(displayName="Pets", ref="A1:B3"))
    pets["D1"] = "Name"  # the header's text outside the table: kept with it (one shared string)
    wb.save(str(path))
    to_shared_strings(path, keep_inline={"A4"})
    return path


@pytest.fixture
def workbook(tmp_path: Path) -> Path:
    return build_workbook(tmp_path / "book.xlsx")


def test_string_cells_translated_the_rest_kept(workbook: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.xlsx"
    fake = Fake()
    report = XlsxHandler().translate(workbook, out, fake, None)
    assert len(fake.calls) == 1
    sent = fake.calls[0]
    assert sent.count("The house is red.") == 1  # one shared string, however many cells show it
    assert "The <1>big</1> dog is here." in sent
    assert "Name" not in sent and "Price" not in sent and "2024-01-31" not in sent
    wb = openpyxl.load_workbook(str(out), rich_text=True)
    assert wb.sheetnames == ["House data", "Pets"]
    ws = wb["House data"]
    assert ws["A1"].value == ws["C1"].value == "THE HOUSE IS RED."
    assert (
        ws["A1"].font.b and ws["A1"].font.color.rgb == "FFC00000" and ws["A1"].fill.fgColor.rgb == "FFFFFF00"
    )
    rich = ws["B1"].value
    assert isinstance(rich, CellRichText) and str(rich) == "THE BIG DOG IS HERE."
    bold = [b for b in rich if isinstance(b, TextBlock) and b.font.b]
    assert [b.text for b in bold] == ["BIG"]
    assert ws["A2"].value == 42 and ws["B2"].value == "2024-01-31"
    assert ws["A3"].value == '=CONCATENATE("The ", "house")'
    assert ws["A4"].value == "THE GARDEN IS GREEN."
    assert ws["A1"].comment is not None and ws["A1"].comment.text == "THE COMMENT IS LONG."
    pets = wb["Pets"]
    assert [c.value for c in pets[1]][:2] == ["Name", "Price"]  # the table's header row
    assert pets["A2"].value == "THE DOG" and pets["B3"].value == 7 and pets["D1"].value == "Name"
    assert pets.tables["Pets"].ref == "A1:B3"
    assert report.counts["sheets"] == 2 and report.counts["tables"] == 1 and report.counts["comments"] == 1
    assert any(w.startswith("table_headers_kept") for w in report.warnings)


def test_untouched_entries_are_copied_byte_for_byte(workbook: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.xlsx"
    XlsxHandler().translate(workbook, out, Fake(), None)
    with zipfile.ZipFile(workbook) as before, zipfile.ZipFile(out) as after:
        assert before.namelist() == after.namelist()
        changed = {n for n in before.namelist() if before.read(n) != after.read(n)}
    assert changed == {
        "xl/sharedStrings.xml",
        "xl/worksheets/sheet1.xml",  # the inline string
        "xl/comments/comment1.xml",
    }


@pytest.fixture
def engine() -> Any:
    with Engine(Settings.from_env()) as eng:
        yield eng


@needs_apertium
def test_apertium_end_to_end(engine: Engine, workbook: Path) -> None:
    result = files.translate_file(engine, workbook, "es")
    assert result.output_path.name == "book.es.xlsx" and result.format == "xlsx"
    ws = openpyxl.load_workbook(str(result.output_path))["House data"]
    assert "casa" in str(ws["A1"].value).lower() and "jardín" in str(ws["A4"].value).lower()
    assert ws["A2"].value == 42


def test_bad_files_are_refused(engine: Engine, tmp_path: Path, workbook: Path) -> None:
    ole = tmp_path / "locked.xlsx"
    ole.write_bytes(_zipcheck.OLE_MAGIC + b"\x00" * 1000)
    with pytest.raises(DocumentFormatError, match="encrypted"):
        files.translate_file(engine, ole, "es", source="en")
    renamed = tmp_path / "book-as.docx"
    shutil.copy(workbook, renamed)
    with pytest.raises(DocumentFormatError, match="named like docx but its content is xlsx"):
        files.translate_file(engine, renamed, "es", source="en")
    assert not (tmp_path / "book-as.es.docx").exists()
