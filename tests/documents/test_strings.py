"""String files: gettext, XLIFF 1.2/2.0 and JSON; keys, ids and placeholders untouched."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import polib  # type: ignore[import-untyped]
import pytest
from lxml import etree  # type: ignore[import-untyped]
from support import needs_apertium

from dragoman.documents.base import FormatHandler
from dragoman.documents.strings import JsonHandler, PoHandler, XliffHandler
from dragoman.errors import DocumentFormatError
from dragoman.pipelines import translate_file as files
from dragoman.settings import Settings
from dragoman.testing.fakes import UpperTranslator
from dragoman.translation.engine import Engine

PROTECTED = re.compile(r"<[^<>]*>|\{\{[^{}]*\}\}|\{[^{}]*\}|%\([^)]*\)[sd]|%[sd]|&\w+;")


class Upper(UpperTranslator):
    protected = PROTECTED


def run(
    tmp_path: Path, handler: FormatHandler, name: str, content: str, fake: Upper
) -> tuple[str, list[str]]:
    source = tmp_path / name
    source.write_text(content, encoding="utf-8")
    output = tmp_path / f"out{source.suffix}"
    report = handler.translate(source, output, fake, None)
    return output.read_text(encoding="utf-8"), report.warnings


# --- gettext ----------------------------------------------------------------------------------------------

POT = r"""msgid ""
msgstr ""
"Project-Id-Version: demo\n"
"Language: \n"
"Content-Type: text/plain; charset=CHARSET\n"
"Plural-Forms: nplurals=INTEGER; plural=EXPRESSION;\n"

#. A comment for translators
#: app.py:10
#, python-format
msgid "The house of %(name)s is red."
msgstr ""

msgctxt "animal"
msgid "The dog"
msgstr "El perro de siempre"

msgid "One red house"
msgid_plural "%d red houses"
msgstr[0] ""
msgstr[1] ""

#~ msgid "Old text"
#~ msgstr ""
"""


def test_po_fills_msgstr_flags_fuzzy_and_sets_the_header(tmp_path: Path) -> None:
    fake = Upper("rus_Cyrl")
    text, warnings = run(tmp_path, PoHandler(), "app.pot", POT, fake)
    po = polib.pofile(text)
    assert po.metadata["Language"] == "ru"
    assert po.metadata["Plural-Forms"].startswith("nplurals=3;")
    assert po.metadata["Content-Type"] == "text/plain; charset=UTF-8"
    first, dog, plural = [e for e in po if not e.obsolete]
    assert (first.msgid, first.msgstr) == ("The house of %(name)s is red.", "THE HOUSE OF %(name)s IS RED.")
    assert first.flags == ["fuzzy", "python-format"] and first.comment == "A comment for translators"
    assert first.occurrences == [("app.py", "10")]
    assert (dog.msgctxt, dog.msgstr, dog.flags) == ("animal", "El perro de siempre", [])  # kept
    assert plural.msgstr_plural == {0: "ONE RED HOUSE", 1: "%d RED HOUSES", 2: "%d RED HOUSES"}
    assert [e.msgid for e in po.obsolete_entries()] == ["Old text"]
    assert fake.calls == [["The house of %(name)s is red.", "One red house", "%d red houses"]]
    assert any("fuzzy" in w for w in warnings)
    assert text.startswith('msgid ""')


def test_po_single_plural_form_language_takes_the_plural(tmp_path: Path) -> None:
    text, _ = run(tmp_path, PoHandler(), "app.po", POT, Upper("jpn_Jpan"))
    plural = list(polib.pofile(text))[2]
    assert plural.msgstr_plural == {0: "%d RED HOUSES"}
    assert polib.pofile(text).metadata["Plural-Forms"] == "nplurals=1; plural=0;"


def test_po_for_another_language_is_translated_again(tmp_path: Path) -> None:
    french = POT.replace('"Language: \\n"', '"Language: fr\\n"').replace(
        'msgstr "El perro de siempre"', 'msgstr "Le chien"'
    )
    text, warnings = run(tmp_path, PoHandler(), "fr.po", french, Upper())
    dog = list(polib.pofile(text))[1]
    assert dog.msgstr == "THE DOG" and "fuzzy" in dog.flags
    assert any(w.startswith("retranslated") for w in warnings)


# --- XLIFF ------------------------------------------------------------------------------------------------

XLIFF12 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file source-language="en" datatype="plaintext" original="app">
    <body>
      <trans-unit id="a">
        <source>The house is <g id="1" ctype="bold">red</g>.<x id="2"/> Price: <ph id="3">%s</ph></source>
        <note>Shown on the home page</note>
      </trans-unit>
      <trans-unit id="b" translate="no">
        <source>BrandName</source>
      </trans-unit>
      <trans-unit id="c">
        <source>The dog</source>
        <target state="translated">El perro</target>
      </trans-unit>
    </body>
  </file>
</xliff>
"""
NS12 = {"x": "urn:oasis:names:tc:xliff:document:1.2"}


def test_xliff12_targets_filled_with_inline_codes(tmp_path: Path) -> None:
    fake = Upper()
    text, _ = run(tmp_path, XliffHandler(), "app.xlf", XLIFF12, fake)
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<xliff')
    root = etree.fromstring(text.encode())
    assert root.find("x:file", NS12).get("target-language") == "es"
    unit_a, unit_b, unit_c = root.findall(".//x:trans-unit", NS12)
    target = unit_a.find("x:target", NS12)
    assert target.get("state") == "needs-review-translation"
    assert target.get("state-qualifier") == "mt-suggestion"
    assert etree.tostring(target, encoding="unicode", with_tail=False).endswith(
        'THE HOUSE IS <g id="1" ctype="bold">RED</g>.<x id="2"/> PRICE: <ph id="3">%s</ph></target>'
    )
    assert [etree.QName(c).localname for c in unit_a] == ["source", "target", "note"]
    assert "        <target" in text  # indented like the source
    assert unit_b.find("x:target", NS12) is None
    assert unit_c.find("x:target", NS12).text == "El perro"
    [[sent]] = fake.calls
    assert re.fullmatch(r"The house is <(\d+)>red</\1>\.<\d+/> Price: <\d+/>", sent)


XLIFF20 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="en">
  <file id="f1">
    <unit id="u1">
      <segment>
        <source>The <pc id="1">big</pc> house is red.<ph id="2"/></source>
      </segment>
      <ignorable><source> </source></ignorable>
    </unit>
  </file>
</xliff>
"""


def test_xliff20_targets_and_state(tmp_path: Path) -> None:
    text, _ = run(tmp_path, XliffHandler(), "app.xliff", XLIFF20, Upper())
    ns = {"x": "urn:oasis:names:tc:xliff:document:2.0"}
    root = etree.fromstring(text.encode())
    assert root.get("trgLang") == "es" and root.get("srcLang") == "en"
    segment = root.find(".//x:segment", ns)
    assert segment.get("state") == "translated"
    target = segment.find("x:target", ns)
    assert etree.tostring(target, encoding="unicode", with_tail=False).endswith(
        'THE <pc id="1">BIG</pc> HOUSE IS RED.<ph id="2"/></target>'
    )
    assert root.find(".//x:ignorable/x:target", ns) is None


XLIFF12_PROTECTED = """<?xml version="1.0" encoding="UTF-8"?>\r
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">\r
  <file source-language="en" target-language="de" datatype="plaintext" original="app">\r
    <body>\r
      <trans-unit id="a" approved="yes">\r
        <source>Open <mrk mtype="protected">Settings</mrk> and <mrk mtype="term">save</mrk>.</source>\r
        <target state="final">Öffnen Sie <mrk mtype="protected">Settings</mrk>.</target>\r
      </trans-unit>\r
      <trans-unit id="empty">\r
        <source/>\r
        <target state="final"/>\r
      </trans-unit>\r
      <group id="brand" translate="no">\r
        <trans-unit id="b">\r
          <source>Acme Cloud</source>\r
        </trans-unit>\r
        <trans-unit id="c" translate="yes">\r
          <source>The dog</source>\r
        </trans-unit>\r
      </group>\r
    </body>\r
  </file>\r
</xliff>\r
"""


def test_xliff12_protected_markers_inherited_translate_and_crlf(tmp_path: Path) -> None:
    fake = Upper()
    source = tmp_path / "app.xlf"
    source.write_bytes(XLIFF12_PROTECTED.encode())
    output = tmp_path / "out.xlf"
    XliffHandler().translate(source, output, fake, None)
    data = output.read_bytes()
    assert b"\n" not in data.replace(b"\r\n", b"")  # every line break is CRLF, as in the source
    assert data.count(b"\r\n") == XLIFF12_PROTECTED.count("\r\n") + 1  # one <target> line added
    root = etree.fromstring(data)
    a, empty, b, c = root.findall(".//x:trans-unit", NS12)
    assert etree.tostring(a.find("x:target", NS12), encoding="unicode", with_tail=False).endswith(
        'OPEN <mrk mtype="protected">Settings</mrk> AND <mrk mtype="term">SAVE</mrk>.</target>'
    )
    assert a.get("approved") == "no"  # the approved German target was replaced
    assert empty.find("x:target", NS12).get("state") == "final"  # nothing to translate: left as it was
    assert b.find("x:target", NS12) is None  # translate="no" inherited from the group
    assert c.find("x:target", NS12).text == "THE DOG"  # the unit's own translate="yes" wins
    [sent] = fake.calls
    assert [re.sub(r"\d+", "N", t) for t in sent] == ["Open <N/> and <N>save</N>.", "The dog"]


XLIFF20_PROTECTED = """<?xml version="1.0" encoding="UTF-8"?>
<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="en" trgLang="fr">
  <file id="f1">
    <unit id="u1">
      <segment id="s1" state="final" subState="acme:signed-off">
        <source>Press <mrk id="m1" translate="no">Ctrl</mrk> to <mrk id="m2" type="term">copy</mrk>.</source>
        <target>Appuyez sur <mrk id="m1" translate="no">Ctrl</mrk>.</target>
      </segment>
      <segment id="s2">
        <source>Then paste.</source>
      </segment>
    </unit>
    <group id="g1" translate="no">
      <unit id="u2">
        <segment><source>Acme Cloud</source></segment>
      </unit>
      <unit id="u3" translate="yes">
        <segment><source>The dog</source></segment>
      </unit>
    </group>
  </file>
  <file id="f2" translate="no">
    <unit id="u4"><segment><source>Not this</source></segment></unit>
  </file>
</xliff>
"""


def test_xliff20_segments_protected_markers_and_inherited_translate(tmp_path: Path) -> None:
    fake = Upper()
    text, _ = run(tmp_path, XliffHandler(), "app.xlf", XLIFF20_PROTECTED, fake)
    ns = {"x": "urn:oasis:names:tc:xliff:document:2.0"}
    root = etree.fromstring(text.encode())
    s1, s2, u2, u3, u4 = root.findall(".//x:segment", ns)
    assert etree.tostring(s1.find("x:target", ns), encoding="unicode", with_tail=False).endswith(
        'PRESS <mrk id="m1" translate="no">Ctrl</mrk> TO <mrk id="m2" type="term">COPY</mrk>.</target>'
    )
    assert s1.get("state") == "translated" and s1.get("subState") is None
    assert s2.find("x:target", ns).text == "THEN PASTE." and s2.get("state") == "translated"
    assert u2.find("x:target", ns) is None and u4.find("x:target", ns) is None
    assert u3.find("x:target", ns).text == "THE DOG"
    [sent] = fake.calls
    assert [re.sub(r"\d+", "N", t) for t in sent] == ["Press <N/> to <N>copy</N>.", "Then paste.", "The dog"]


_BOLD = '<bpt id="1">&lt;b&gt;</bpt>big<ept id="1">&lt;/b&gt;</ept>'
XLIFF12_SEGMENTED = f"""<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file source-language="en" datatype="html" original="page.html">
    <body>
      <trans-unit id="p1">
        <source>It rains. Take a {_BOLD} coat.</source>
        <seg-source><mrk mtype="seg" mid="1">It rains.</mrk> <mrk mtype="seg" mid="2">\
Take a {_BOLD} coat.</mrk></seg-source>
        <note>Two sentences</note>
      </trans-unit>
    </body>
  </file>
</xliff>
"""


def _xliff_schema(name: str) -> Any:
    folder = (Path(__file__).parents[1] / "data" / "real" / "xliff").resolve()
    xsd = etree.parse(str(folder / name))
    (imported,) = xsd.getroot().findall("{http://www.w3.org/2001/XMLSchema}import")
    imported.set("schemaLocation", (folder / "xml_minimal.xsd").as_uri())
    return etree.XMLSchema(xsd)


def test_xliff12_seg_source_segments_and_paired_codes(tmp_path: Path) -> None:
    """The target follows <seg-source> (the 1.2 strict XSD's order) and keeps its <mrk mtype="seg" mid>s and
    the <bpt>/<ept> codes with their content."""
    text, _ = run(tmp_path, XliffHandler(), "page.xlf", XLIFF12_SEGMENTED, Upper())
    root = etree.fromstring(text.encode())
    schema = _xliff_schema("xliff-core-1.2-strict.xsd")
    assert schema.validate(root.getroottree()), schema.error_log
    (unit,) = root.findall(".//x:trans-unit", NS12)
    assert [etree.QName(c).localname for c in unit] == ["source", "seg-source", "target", "note"]
    assert etree.tostring(unit.find("x:target", NS12), encoding="unicode", with_tail=False).endswith(
        '<mrk mtype="seg" mid="1">IT RAINS.</mrk> <mrk mtype="seg" mid="2">TAKE A <bpt id="1">&lt;b&gt;</bpt>'
        'BIG<ept id="1">&lt;/b&gt;</ept> COAT.</mrk></target>'
    )


@pytest.mark.parametrize(
    ("sample", "xsd"),
    [
        (XLIFF12, "xliff-core-1.2-strict.xsd"),
        (XLIFF12_PROTECTED, "xliff-core-1.2-strict.xsd"),
        (XLIFF20, "xliff-core-2.0.xsd"),
        (XLIFF20_PROTECTED, "xliff-core-2.0.xsd"),
    ],
    ids=["1.2", "1.2-protected", "2.0", "2.0-protected"],
)
def test_xliff_samples_stay_valid_against_the_xsd(tmp_path: Path, sample: str, xsd: str) -> None:
    schema = _xliff_schema(xsd)
    assert schema.validate(etree.fromstring(sample.encode()).getroottree()), schema.error_log
    text, _ = run(tmp_path, XliffHandler(), "app.xlf", sample, Upper())
    assert schema.validate(etree.fromstring(text.encode()).getroottree()), schema.error_log


def test_xliff12_other_language_warned_once_in_bcp47(tmp_path: Path) -> None:
    unit = '<file source-language="en" target-language="de" datatype="plaintext" original="{0}"><body>'
    unit += '<trans-unit id="{0}"><source>Dog</source><target>Hund</target></trans-unit></body></file>'
    sample = f'<xliff version="1.2" xmlns="{NS12["x"]}">{unit.format("a")}{unit.format("b")}</xliff>'
    text, warnings = run(tmp_path, XliffHandler(), "two.xlf", sample, Upper())
    assert [w for w in warnings if w.startswith("retranslated")] == [
        "retranslated: the file was for 'de', not 'es'; every string was machine-translated again (existing "
        "translations in the other language were replaced)"
    ]
    assert text.count(">DOG</target>") == 2


def test_xliff_errors(tmp_path: Path) -> None:
    with pytest.raises(DocumentFormatError, match=r"line \d+, column \d+"):
        run(tmp_path, XliffHandler(), "bad.xlf", '<xliff version="1.2"><file>', Upper())
    with pytest.raises(DocumentFormatError, match="not <xliff>"):
        run(tmp_path, XliffHandler(), "bad2.xlf", "<root><xliff/></root>", Upper())


# --- JSON -------------------------------------------------------------------------------------------------

I18N = """{
  "title": "The house is red",
  "nested": {"count": "You have {count, plural, one {# red house} other {# red houses}}", "n": 3, "ok": true},
  "list": ["The dog", "{{name}} is big", ""],
  "url": "https://example.com/",
  "zeta": null,
  "alpha": "Hello, {user}!"
}
"""


def test_json_values_translated_keys_and_order_kept(tmp_path: Path) -> None:
    fake = Upper()
    text, _ = run(tmp_path, JsonHandler(), "en.json", I18N, fake)
    data = json.loads(text)
    assert list(data) == ["title", "nested", "list", "url", "zeta", "alpha"]
    assert data["title"] == "THE HOUSE IS RED"
    assert data["nested"] == {
        "count": "YOU HAVE {count, plural, one {# RED HOUSE} other {# RED HOUSES}}",
        "n": 3,
        "ok": True,
    }
    assert data["list"] == ["THE DOG", "{{name}} IS BIG", ""]
    assert data["url"] == "HTTPS://EXAMPLE.COM/"  # the fake has no URL rule: the engine protects URLs
    assert data["zeta"] is None and data["alpha"] == "HELLO, {user}!"
    assert text.startswith('{\n  "title"') and text.endswith("}\n")
    [texts] = fake.calls
    assert "# red house" in texts and "# red houses" in texts  # ICU branches one by one


def test_json_layout_follows_the_input(tmp_path: Path) -> None:
    tabbed, _ = run(tmp_path, JsonHandler(), "t.json", '{\n\t"a": "Hi",\n\t"b": [1]\n}', Upper())
    assert tabbed == '{\n\t"a": "HI",\n\t"b": [\n\t\t1\n\t]\n}'
    compact, _ = run(tmp_path, JsonHandler(), "c.json", '{"a":"Hi","b":"Café"}\n', Upper())
    assert compact == '{"a":"HI","b":"CAFÉ"}\n'
    escaped, _ = run(tmp_path, JsonHandler(), "e.json", '{"a": "Caf\\u00e9"}', Upper())
    assert escaped == '{"a": "CAF\\u00c9"}'


def test_json_arb_and_chrome_messages(tmp_path: Path) -> None:
    arb = '{"@@locale": "en", "hello": "Hello", "@hello": {"description": "A greeting"}}'
    text, _ = run(tmp_path, JsonHandler(), "app_en.arb", arb, Upper())
    assert json.loads(text) == {"@@locale": "es", "hello": "HELLO", "@hello": {"description": "A greeting"}}
    chrome = '{"title": {"message": "The title", "description": "Extension name"}}'
    text, _ = run(tmp_path, JsonHandler(), "messages.json", chrome, Upper())
    assert json.loads(text) == {"title": {"message": "THE TITLE", "description": "Extension name"}}


def test_json_notes_for_translators_are_not_translated(tmp_path: Path) -> None:
    source: dict[str, Any] = {
        "_comment": "Strings of the settings page",
        "title": "Settings",
        "title___DESCRIPTION": "Heading of the settings page",
        "save__comment": "Button label",
        "product_description": "A red house",
        "transifex": {"string": "Save file", "developer_comment": "Toolbar button", "context": "verb"},
        "formatjs": {"id": "app.open", "defaultMessage": "Open", "description": "Menu entry"},
        "chrome": {"message": "Close tab", "description": "Tab menu", "placeholders": {}},
        "plain": {"string": "A string", "label": "A label"},
        "notes": {"developer_comment": "Applies everywhere"},
        "@title": {"description": "ARB metadata"},
    }
    text, _ = run(tmp_path, JsonHandler(), "en.json", json.dumps(source, indent=2), Upper())
    assert json.loads(text) == {
        **source,
        "title": "SETTINGS",
        "product_description": "A RED HOUSE",  # a string whose key ends in _description, not a note
        "transifex": {**source["transifex"], "string": "SAVE FILE"},
        "formatjs": {**source["formatjs"], "defaultMessage": "OPEN"},
        "chrome": {**source["chrome"], "message": "CLOSE TAB"},
        "plain": {"string": "A STRING", "label": "A LABEL"},  # not a message with notes: both translated
    }


def test_json_chrome_messages_with_placeholders_examples_kept(tmp_path: Path) -> None:
    chrome = {
        "greeting": {
            "message": "Hello, $USER$! You have $COUNT$ new mails",
            "description": "Greeting shown in the popup",
            "placeholders": {
                "user": {"content": "$1", "example": "Cira"},
                "count": {"content": "$2", "example": "three"},
            },
        }
    }
    text, _ = run(tmp_path, JsonHandler(), "messages.json", json.dumps(chrome), Upper())
    out = json.loads(text)
    assert out["greeting"]["description"] == "Greeting shown in the popup"
    assert out["greeting"]["placeholders"] == chrome["greeting"]["placeholders"]
    assert out["greeting"]["message"].startswith("HELLO")


def _icu_parses(text: str) -> bool:
    parser = pytest.importorskip("pyicumessageformat", reason="pip install pyicumessageformat").Parser()
    try:
        parser.parse(text)
    except SyntaxError:
        return False
    return True


def _leaves(value: object, path: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        return {k2: v2 for k, v in value.items() for k2, v2 in _leaves(v, f"{path}/{k}").items()}
    return {path: value}


REAL_JSON = Path(__file__).parents[1] / "data" / "real" / "json"


@pytest.mark.parametrize("name", sorted(p.name for p in REAL_JSON.glob("*.json")))
def test_real_json_keeps_keys_and_stays_valid_icu(tmp_path: Path, name: str) -> None:
    content = (REAL_JSON / name).read_text(encoding="utf-8")
    text, _ = run(tmp_path, JsonHandler(), name, content, Upper())
    before, after = _leaves(json.loads(content)), _leaves(json.loads(text))
    assert list(before) == list(after)  # every key, in order
    for key, value in before.items():
        if isinstance(value, str):
            assert str(after[key]).count("%s") == value.count("%s"), key
            if _icu_parses(value):  # the ICU MessageFormat parser reads what it read before
                assert _icu_parses(str(after[key])), (key, after[key])


def test_invalid_json_names_the_position(tmp_path: Path) -> None:
    with pytest.raises(DocumentFormatError, match=r"Expecting value at line 2, column 8") as info:
        run(tmp_path, JsonHandler(), "bad.json", '{"a": 1,\n  "b": ,}', Upper())
    assert info.value.status == 415
    with Engine(Settings.from_env()) as engine, pytest.raises(DocumentFormatError, match="line 2"):
        files.translate_file(engine, tmp_path / "bad.json", "es")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]  # nothing written, no temp file


@needs_apertium
def test_end_to_end_through_apertium(tmp_path: Path) -> None:
    (tmp_path / "en.json").write_text(
        '{"a": "The house is red.", "b": {"c": "Hello {name}"}}\n', encoding="utf-8"
    )
    (tmp_path / "app.po").write_text(POT, encoding="utf-8")
    (tmp_path / "app.xlf").write_text(XLIFF12, encoding="utf-8")
    with Engine(Settings.from_env()) as engine:
        as_json = files.translate_file(engine, tmp_path / "en.json", "es")
        as_po = files.translate_file(engine, tmp_path / "app.po", "es")
        as_xliff = files.translate_file(engine, tmp_path / "app.xlf", "es")
    data = json.loads(as_json.output_path.read_text(encoding="utf-8"))
    assert as_json.output_path.name == "en.es.json" and "casa" in data["a"] and "{name}" in data["b"]["c"]
    po = polib.pofile(str(as_po.output_path))
    assert "casa" in po[0].msgstr and "%(name)s" in po[0].msgstr and po.metadata["Language"] == "es"
    xliff = as_xliff.output_path.read_text(encoding="utf-8")
    assert "casa" in xliff and '<g id="1" ctype="bold">' in xliff and as_xliff.format == "xliff"
