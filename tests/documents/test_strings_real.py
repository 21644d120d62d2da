"""Real-world gettext and XLIFF files (not written by us) through the string handlers, then their validators.

gettext: ``msgfmt -c --check-format`` (GNU gettext) on the output, with the fuzzy flags our handler adds kept
and cleared (``msgattrib --clear-fuzzy``; msgfmt does not check fuzzy entries' formats otherwise), and msgids,
contexts, comments and references compared with polib. XLIFF: the OASIS XSD of the version each file declares
(1.1, 1.2 strict, 2.0) over source and output; everything but the targets compared with the source
(ids, sources, notes, groups, inline codes); every translatable unit or segment has a target with the source's
inline codes and a machine-translation state, the others keep theirs; CRLF files stay CRLF.
See the folders' README.md.
"""

from __future__ import annotations

import copy
import functools
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
XSD = {
    "urn:oasis:names:tc:xliff:document:1.1": "xliff-core-1.1.xsd",
    "urn:oasis:names:tc:xliff:document:1.2": "xliff-core-1.2-strict.xsd",
    "urn:oasis:names:tc:xliff:document:2.0": "xliff-core-2.0.xsd",
}
XML_NS = "http://www.w3.org/XML/1998/namespace"

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
    versions = [etree.parse(str(p)).getroot().get("version") for p in XLIFF]
    assert {v: versions.count(v) >= 2 for v in ("1.1", "1.2", "2.0")} == {
        "1.1": True,
        "1.2": True,
        "2.0": True,
    }


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


@functools.cache
def _schema(namespace: str) -> Any:
    xsd = etree.parse(str(REAL / "xliff" / XSD[namespace]))
    # The XSDs import the W3C xml.xsd from the network or a relative folder; point them at the local copy.
    (imported,) = xsd.getroot().findall("{http://www.w3.org/2001/XMLSchema}import")
    imported.set("schemaLocation", (REAL / "xliff" / "xml_minimal.xsd").as_uri())
    return etree.XMLSchema(xsd)


def _local(element: Any) -> str:
    return str(etree.QName(element).localname)


def _codes(element: Any) -> list[tuple[str, str | None]]:
    return [(_local(e), e.get("id")) for e in element.iter() if e is not element and isinstance(e.tag, str)]


def _containers(root: Any) -> list[Any]:
    """What holds a source and its target: <trans-unit> (1.x) or <segment> (2.0)."""
    return [e for e in root.iter() if isinstance(e.tag, str) and _local(e) in ("trans-unit", "segment")]


def _child(element: Any, name: str) -> Any:
    return next((c for c in element if isinstance(c.tag, str) and _local(c) == name), None)


def _source(container: Any) -> Any:
    seg_source = _child(container, "seg-source")
    return seg_source if seg_source is not None else _child(container, "source")


def _has_content(element: Any) -> bool:
    return element is not None and bool((element.text or "").strip() or len(element))


def _declared(container: Any) -> str:
    """The target language the file declared: 1.x ``<file target-language>``, 2.0 ``trgLang``."""
    for node in container.iterancestors():
        if _local(node) in ("file", "xliff") and (node.get("target-language") or node.get("trgLang")):
            return str(node.get("target-language") or node.get("trgLang"))
    return ""


def _to_translate(container: Any) -> bool:
    """Whether the handler should give this unit (1.x) or segment (2.0) a machine translation: it has a
    source, is not ``translate="no"`` (the nearest ancestor that says decides), and has no target yet unless
    the file declared another target language than Spanish."""
    if not _has_content(_source(container)):
        return False
    for node in [container, *container.iterancestors()]:
        if node.get("translate") in ("yes", "no"):
            if node.get("translate") == "no":
                return False
            break
    declared = _declared(container)
    other = bool(declared) and declared.split("-")[0].split("_")[0].lower() != "es"
    return other or not _has_content(_child(container, "target"))


def _skeleton(tree: Any) -> bytes:
    """The document less the targets of its units and what translating changes (target language, states),
    whitespace between elements ignored: what must come back exactly as it was."""
    root = copy.deepcopy(tree.getroot())
    for container in _containers(root):
        target = _child(container, "target")
        if target is not None:
            container.remove(target)
    for element in root.iter():
        if not isinstance(element.tag, str):
            continue
        for name in ("target-language", "trgLang", "state", "subState", "approved"):
            element.attrib.pop(name, None)
        if element.text is not None and not element.text.strip() and len(element):
            element.text = None
        if element.tail is not None and not element.tail.strip():
            element.tail = None
    return bytes(etree.tostring(root, method="c14n"))


def _letters(text: str) -> str:
    return PROTECTED.sub("", text)


@pytest.mark.parametrize("path", XLIFF, ids=lambda p: p.name)
def test_real_xliff_stays_valid_against_the_xsd(tmp_path: Path, path: Path) -> None:
    source_tree = etree.parse(str(path))
    namespace = etree.QName(source_tree.getroot()).namespace
    version2 = namespace.endswith(":2.0")
    schema = _schema(namespace)
    assert schema.validate(source_tree), schema.error_log  # the file itself is valid
    output = tmp_path / "out.xlf"
    report = XliffHandler().translate(path, output, Upper(), None)
    assert report.segments > 0

    result = etree.parse(str(output))
    assert schema.validate(result), schema.error_log
    assert _skeleton(result) == _skeleton(source_tree)  # ids, sources, notes, groups, inline codes kept
    root = result.getroot()
    if version2:
        assert root.get("trgLang") == "es"
    else:
        assert {f.get("target-language") for f in root.iter(f"{{{namespace}}}file")} == {"es"}
    translated = 0
    for container, original in zip(_containers(root), _containers(source_tree.getroot()), strict=True):
        name = container.get("id") or container.getparent().get("id")
        target = _child(container, "target")
        if not _to_translate(original):  # nothing to translate: left exactly as it was
            kept = _child(original, "target")
            assert (target is None) == (kept is None), name
            assert target is None or etree.tostring(target) == etree.tostring(kept), name
            continue
        translated += 1
        assert target is not None, name
        if version2:
            assert container.get("state") == "translated", name
        else:
            assert target.get("state") == "needs-review-translation", name
            assert target.get("state-qualifier") == "mt-suggestion", name
            assert target.get(f"{{{XML_NS}}}lang", "es").startswith("es"), name
        source = _source(container)
        assert sorted(_codes(target)) == sorted(_codes(source)), name
        text, source_text = "".join(target.itertext()), "".join(source.itertext())
        assert _letters(text) == _letters(text).upper(), name
        assert bool(text.strip()) == bool(source_text.strip()), name
    assert translated == report.segments
    retranslated = [w for w in report.warnings if w.startswith("retranslated")]
    others = {_declared(c) for c in _containers(source_tree.getroot())} - {""}
    assert len(retranslated) == (1 if others else 0), report.warnings  # once, however many <file>s
    assert all("not 'es'" in w for w in retranslated), retranslated
    data = output.read_bytes()
    if b"\r\n" in path.read_bytes():  # CRLF files stay CRLF
        assert b"\n" not in data.replace(b"\r\n", b""), "a bare LF in a CRLF file"


#: XLIFF 1.1 as odf2xliff writes it (written here, in our own words): ``xml:space="preserve"`` on each unit, a
#: source whose text ends in indented nested ``<g>`` codes, and an empty ``<g/>`` inside a word's run. The
#: two real 1.1 files (genrb's) have neither; translate-toolkit's odf2xliff references, which had both, are
#: GPL and no longer kept.
ODF2XLIFF_LIKE = """<?xml version="1.0" encoding="UTF-8"?>
<xliff xmlns="urn:oasis:names:tc:xliff:document:1.1" version="1.1">
  <file original="report.odt" source-language="en" datatype="plaintext">
    <body>
      <trans-unit xml:space="preserve" id="content/body/text/text:p[0]">
        <source>The work of the year is listed below, starting with the new direction of the project
                <g id="0">
                    <g id="1"> that the second table describes in full:</g>
                </g>
            </source>
      </trans-unit>
      <trans-unit xml:space="preserve" id="content/body/text/text:p[1]">
        <source>Starting <g id="2"/>from the state of the project in January, phase six begins. </source>
      </trans-unit>
      <trans-unit xml:space="preserve" id="content/body/text/text:h[0]">
        <source>New direction of the project</source>
      </trans-unit>
    </body>
  </file>
</xliff>
"""


def test_odf2xliff_shaped_11_file_with_nested_codes_stays_valid(tmp_path: Path) -> None:
    source = tmp_path / "odf2xliff-like.xlf"
    source.write_text(ODF2XLIFF_LIKE, encoding="utf-8")
    (tmp_path / "out").mkdir()
    test_real_xliff_stays_valid_against_the_xsd(tmp_path / "out", source)
    result = (tmp_path / "out" / "out.xlf").read_text(encoding="utf-8")
    assert re.search(
        r'<target [^>]*>THE WORK OF THE YEAR .*<g id="0">\s*<g id="1"> THAT THE', result, re.DOTALL
    )
    assert '<g id="2"/>FROM THE STATE' in result
