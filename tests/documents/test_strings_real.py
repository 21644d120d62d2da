"""Real-world gettext and XLIFF files (not written by us) through the string handlers, then their validators.

gettext: ``msgfmt -c --check-format`` (GNU gettext) on the output, with the fuzzy flags our handler adds kept
and cleared (``msgattrib --clear-fuzzy``; msgfmt does not check fuzzy entries' formats otherwise), and msgids,
contexts, comments and references compared with polib. XLIFF: the OASIS XLIFF 1.1 XSD (what the files declare)
over source and output, and the units' ids, sources and inline codes compared. See the folders' README.md.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import polib  # type: ignore[import-untyped]
import pytest
from lxml import etree  # type: ignore[import-untyped]

from dragoman.documents.strings import PoHandler, XliffHandler
from dragoman.testing.fakes import UpperTranslator

REAL = Path(__file__).parents[1] / "data" / "real"
GETTEXT = sorted((REAL / "gettext").glob("*.po"))
XLIFF = sorted((REAL / "xliff").glob("*.xlf"))
XLIFF_NS = "urn:oasis:names:tc:xliff:document:1.1"

# What a real engine keeps as it is: inline-code placeholders and the printf/python/javascript formats.
PROTECTED = re.compile(r"<[^<>]*>|\{\{[^{}]*\}\}|\{[^{}]*\}|%\([^)]*\)[sdif]|%[sdif%]")


class Upper(UpperTranslator):
    protected = PROTECTED


needs_msgfmt = pytest.mark.skipif(
    shutil.which("msgfmt") is None or shutil.which("msgattrib") is None,
    reason="apt-get install gettext (make system-deps)",
)


def _msgfmt(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["msgfmt", "-c", "--check-format", "-o", "/dev/null", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _entry_key(entry: Any) -> tuple[Any, ...]:
    return (
        entry.msgctxt,
        entry.msgid,
        entry.msgid_plural,
        entry.comment,
        entry.tcomment,
        tuple(entry.occurrences),
        entry.obsolete,
        tuple(f for f in entry.flags if f != "fuzzy"),
    )


def test_the_gettext_corpus_is_there() -> None:
    assert len(GETTEXT) >= 3
    assert len(XLIFF) >= 2


@needs_msgfmt
@pytest.mark.parametrize("path", GETTEXT, ids=lambda p: p.name)
def test_real_po_passes_msgfmt_and_keeps_msgids(tmp_path: Path, path: Path) -> None:
    output = tmp_path / "out.po"
    report = PoHandler().translate(path, output, Upper(), None)
    assert report.segments > 0

    checked = _msgfmt(output)
    assert checked.returncode == 0, checked.stderr
    cleared = tmp_path / "cleared.po"
    subprocess.run(["msgattrib", "--clear-fuzzy", "-o", str(cleared), str(output)], check=True, timeout=60)
    checked = _msgfmt(cleared)
    assert checked.returncode == 0, checked.stderr

    source, result = polib.pofile(str(path)), polib.pofile(str(output))
    assert [_entry_key(e) for e in result] == [_entry_key(e) for e in source]
    assert result.metadata["Language"] == "es"
    for entry in (e for e in result if e.msgid and not e.obsolete):
        translated = list(entry.msgstr_plural.values()) if entry.msgid_plural else [entry.msgstr]
        assert all(translated), entry.msgid
        for text in translated:  # placeholders come back as they were (msgfmt checks their use too)
            assert set(PROTECTED.findall(text)) <= set(
                PROTECTED.findall(entry.msgid + (entry.msgid_plural or ""))
            )


def _schema() -> Any:
    xsd = etree.parse(str(REAL / "xliff" / "xliff-core-1.1.xsd"))
    # The XSD imports the W3C xml.xsd from the network; point it at the local copy.
    (imported,) = xsd.getroot().findall("{http://www.w3.org/2001/XMLSchema}import")
    imported.set("schemaLocation", (REAL / "xliff" / "xml_minimal.xsd").as_uri())
    return etree.XMLSchema(xsd)


def _units(tree: Any) -> list[tuple[str, bytes]]:
    return [
        (unit.get("id"), etree.tostring(unit.find(f"{{{XLIFF_NS}}}source"), with_tail=False))
        for unit in tree.iter(f"{{{XLIFF_NS}}}trans-unit")
    ]


def _codes(element: Any) -> list[tuple[str, str | None]]:
    return [(etree.QName(e).localname, e.get("id")) for e in element.iter() if e is not element]


@pytest.mark.parametrize("path", XLIFF, ids=lambda p: p.name)
def test_real_xliff_stays_valid_against_the_xsd(tmp_path: Path, path: Path) -> None:
    schema = _schema()
    assert schema.validate(etree.parse(str(path))), schema.error_log  # the file itself is valid
    output = tmp_path / "out.xlf"
    report = XliffHandler().translate(path, output, Upper(), None)
    assert report.segments > 0

    result = etree.parse(str(output))
    assert schema.validate(result), schema.error_log
    assert _units(result) == _units(etree.parse(str(path)))
    for unit in result.iter(f"{{{XLIFF_NS}}}trans-unit"):
        source = unit.find(f"{{{XLIFF_NS}}}source")
        target = unit.find(f"{{{XLIFF_NS}}}target")
        assert target is not None, unit.get("id")
        assert target.get("{http://www.w3.org/XML/1998/namespace}lang", "es").startswith("es")
        assert sorted(_codes(target)) == sorted(_codes(source)), unit.get("id")
        text = "".join(target.itertext())
        assert text == text.upper() and text.strip(), unit.get("id")
