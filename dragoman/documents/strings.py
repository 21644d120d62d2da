"""The string files of software localisation: gettext (``.po``, ``.pot``), XLIFF 1.2 and 2.0, JSON.

Common rules: only the translatable strings change (keys, ids, contexts, comments, notes and metadata stay
as written); placeholders (``%s``, ``%(name)s``, ``{name}``, ``{{x}}``, tags) are protected by the engine;
a string already translated is kept unless the file declares another target language than the one asked
for (then every string is translated again, and a warning says so). What a format's tools expect of
machine translation:

* gettext: ``msgstr`` filled (plural forms: ``msgstr[0]`` from ``msgid``, the others from
  ``msgid_plural``; a language with one form gets the plural), the entry flagged ``fuzzy`` so translators
  review it and ``msgfmt`` does not ship it unreviewed; the header's ``Language`` set (gettext spelling,
  ``pt_BR``) and ``Plural-Forms`` set for the target unless the file already targets that language with
  its own; ``charset=CHARSET`` of a template becomes UTF-8.
* XLIFF 1.2: ``<target state="needs-review-translation" state-qualifier="mt-suggestion">`` after each
  ``<source>`` (or ``<seg-source>``), ``target-language`` set on each ``<file>``. XLIFF 2.0: ``<target>``
  in each ``<segment>``, the segment's ``state="translated"``, ``trgLang`` set. Inline codes (``<g>``,
  ``<x/>``, ``<ph>``, ``<bpt>``, ``<pc>``, ``<mrk>``...) are kept: the engine sees them as numbered
  placeholders and the target gets copies of them where the translation put them; a marker whose content
  is not for translation (1.2 ``<mrk mtype="protected">``, 2.0 ``<mrk translate="no">``) is kept whole.
  ``translate="no"`` units are skipped, also when they inherit it from their ``<group>`` or ``<file>``;
  so are empty sources. CRLF line breaks are kept.
* JSON: keys untouched, objects and arrays walked, only string values with letters translated, key order
  and the input's indentation kept; ICU plural/select blocks are translated branch by branch; ARB metadata
  (``@key``) is skipped and ``@@locale`` set; Chrome ``messages.json`` translates only ``message``.
  Notes for translators are never translated: ``developer_comment``, ``_comment``, ``key___DESCRIPTION``
  style companions, and ``description``/``context``/``meaning`` beside a ``message``, ``defaultMessage``
  or ``string`` (Chrome, FormatJS, Transifex structured JSON).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polib  # type: ignore[import-untyped]
from lxml import etree  # type: ignore[import-untyped]

from dragoman.documents import _bounds, _i18n, _inline
from dragoman.documents.base import DocumentReport, TextTranslator
from dragoman.documents.plaintext import read_text, text_encoding
from dragoman.errors import DocumentFormatError, UnknownLanguage
from dragoman.languages.catalogue import get, resolve
from dragoman.progress import ProgressCallback

_LETTER = re.compile(r"[^\W\d_]")


def _has_letters(text: str) -> bool:
    return bool(_LETTER.search(_inline.TAG.sub("", text)))


def _same_language(declared: str, target: str) -> bool:
    """Whether a language code found in a file (``es``, ``pt_BR``, ``sr@latin``) names ``target``."""
    try:
        return resolve(declared.split("@")[0].replace("_", "-")) == target
    except UnknownLanguage:
        return False


def _translate_all(translate: TextTranslator, texts: list[str]) -> list[str]:
    """One engine call for the texts with letters; the others come back as they are."""
    wanted = [i for i, t in enumerate(texts) if _has_letters(t)]
    results = list(texts)
    if wanted:
        for i, translated in zip(wanted, translate([texts[i] for i in wanted]), strict=True):
            results[i] = translated
    return results


def _other_language_warning(declared: str, target: str) -> str:
    return (
        f"retranslated: the file was for '{declared}', not '{get(target).bcp47}'; every string was "
        "machine-translated again (existing translations in the other language were replaced)"
    )


# --- gettext ----------------------------------------------------------------------------------------------


class PoHandler:
    name = "po"
    suffixes: tuple[str, ...] = (".po", ".pot")

    def sniff(self, head: bytes, path: Path) -> bool:
        return path.suffix.lower() in self.suffixes and text_encoding(head) is not None and b"msgid" in head

    def translate(
        self, source: Path, output: Path, translate: TextTranslator, progress: ProgressCallback | None
    ) -> DocumentReport:
        try:
            po = polib.pofile(str(source))
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise DocumentFormatError(f"{source.name} is not a readable gettext file: {exc}") from exc
        report = DocumentReport()
        # The source language is the msgids'; the target is known only after the first call when the
        # translator detects it, so the header is set from what was asked (always known).
        target = translate.target
        declared = str(po.metadata.get("Language", "")).strip()
        same = not declared or _same_language(declared, target)
        if not same:
            report.warnings.append(_other_language_warning(declared, target))
        self._set_header(po, target, declared, same, report)
        forms = _i18n.nplurals(str(po.metadata.get("Plural-Forms", ""))) or 2

        entries = [
            e
            for e in po
            if not e.obsolete
            and e.msgid
            and (not same or (not any(e.msgstr_plural.values()) if e.msgid_plural else not e.msgstr))
        ]
        texts: list[str] = []
        for entry in entries:
            texts.append(entry.msgid)
            if entry.msgid_plural:
                texts.append(entry.msgid_plural)
        translations = iter(_translate_all(translate, texts))
        for entry in entries:
            singular = next(translations)
            if entry.msgid_plural:
                plural = next(translations)
                first = plural if forms == 1 else singular
                entry.msgstr_plural = {0: first, **dict.fromkeys(range(1, forms), plural)}
            else:
                entry.msgstr = singular
            if "fuzzy" not in entry.flags:
                entry.flags.insert(0, "fuzzy")
        written = str(po)
        if not po.header:
            written = written.removeprefix("#\n")  # polib writes an empty header comment as "#"
        output.write_bytes((written.rstrip("\n") + "\n").encode(po.encoding))
        report.segments = len(texts)
        report.characters = sum(len(t) for t in texts)
        if entries:
            report.warnings.append(
                f"fuzzy: {len(entries)} entries were machine-translated and flagged fuzzy for review"
            )
        return report

    @staticmethod
    def _set_header(po: Any, target: str, declared: str, same: bool, report: DocumentReport) -> None:
        bcp47 = get(target).bcp47
        po.metadata["Language"] = _i18n.gettext_language(bcp47)
        current = str(po.metadata.get("Plural-Forms", ""))
        if not (same and declared and _i18n.nplurals(current)):
            forms = _i18n.PLURAL_FORMS.get(bcp47.split("-")[0])
            if forms is None:
                forms = current if _i18n.nplurals(current) else _i18n.DEFAULT_PLURAL_FORMS
                report.warnings.append(
                    f"plural_forms: dragoman does not know the plural rule of {bcp47}; Plural-Forms is "
                    f"'{forms}': check it"
                )
            po.metadata["Plural-Forms"] = forms
        content_type = str(po.metadata.get("Content-Type", ""))
        if "charset=CHARSET" in content_type or not content_type:
            po.metadata["Content-Type"] = "text/plain; charset=UTF-8"
            po.encoding = "utf-8"


# --- XLIFF -------------------------------------------------------------------------------------------------

_XML_DECLARATION = re.compile(rb"\A(?:\xef\xbb\xbf)?\s*<\?xml[^>]*\?>\s*")
XLIFF_PAIRS = frozenset({"g", "mrk", "pc"})  # inline elements whose content is text to translate


def _local(element: Any) -> str:
    tag = element.tag
    return str(etree.QName(tag).localname) if isinstance(tag, str) else ""


def _escape(text: str | None) -> str:
    return (text or "").replace("&", "&amp;").replace("<", "&lt;")


def _pair(element: Any) -> bool:
    """An inline element whose content is text to translate: ``<g>``, ``<pc>``, ``<mrk>``, except a marker
    that says its content is not for translation (1.2 ``mtype="protected"``, 2.0 ``translate="no"``), which
    is kept whole like ``<ph>``."""
    return _local(element) in XLIFF_PAIRS and not (
        element.get("mtype") == "protected" or element.get("translate") == "no"
    )


def _translatable(element: Any) -> bool:
    """``translate`` is inherited: the nearest ``<trans-unit>``, ``<unit>``, ``<group>`` or ``<file>`` that
    says yes or no decides (yes when none does)."""
    for node in itertools.chain((element,), element.iterancestors()):
        value = node.get("translate")
        if value in ("yes", "no"):
            return bool(value == "yes")
    return True


def _crlf_back(source: bytes, result: bytes) -> bytes:
    """An XML parser reads CRLF line breaks as LF (a CR in text is written back as ``&#13;``); a file written
    with CRLF gets them back. Only for ASCII-compatible encodings (a UTF-16 file keeps LF)."""
    if b"\r\n" in source and b"\x00" not in result:
        return result.replace(b"\n", b"\r\n")
    return result


@dataclass
class _Segment:
    """A source to translate and where its target goes."""

    container: Any  # <trans-unit> (1.2) or <segment> (2.0)
    source: Any  # <source> or <seg-source>
    inline: dict[int, Any] = field(default_factory=dict)
    masked: str = ""

    def mask(self, ids: Iterator[int]) -> None:
        self.masked = self._serialise(self.source, ids, top=True)

    def _serialise(self, element: Any, ids: Iterator[int], top: bool = False) -> str:
        parts = [_escape(element.text)]
        for child in element:
            if not isinstance(child.tag, str):  # comments and processing instructions
                parts.append(_escape(child.tail))
                continue
            number = next(ids)
            self.inline[number] = child
            if _pair(child):
                parts.append(f"<{number}>{self._serialise(child, ids)}</{number}>")
            else:
                parts.append(f"<{number}/>")
            parts.append(_escape(child.tail))
        return "".join(parts)

    def fill(self, target: Any, translated: str) -> bool:
        """Write the translation into ``target`` with copies of the inline codes; False when one was lost
        (it is then appended)."""
        nodes, missing = _inline.parse(translated, {n: _pair(e) for n, e in self.inline.items()})
        if missing:
            nodes, trailing = _inline.split_trailing_space(nodes)
            nodes.extend(_inline.Tag(n, single=True) for n in missing)
            nodes.append(trailing)
        for child in list(target):
            target.remove(child)
        text, children = self._build(nodes)
        target.text = text or None
        target.extend(children)
        return not missing

    def _build(self, nodes: list[_inline.Node]) -> tuple[str, list[Any]]:
        def element_for(node: _inline.Tag) -> Any:
            original = self.inline[node.id]
            if node.single:
                return etree.fromstring(etree.tostring(original, with_tail=False))
            return original.makeelement(original.tag, dict(original.attrib))

        return _inline.rebuild(nodes, element_for)


def _has_content(element: Any) -> bool:
    return element is not None and (bool((element.text or "").strip()) or len(element) > 0)


def _child(element: Any, name: str) -> Any:
    return next((c for c in element if _local(c) == name), None)


class XliffHandler:
    name = "xliff"
    suffixes: tuple[str, ...] = (".xlf", ".xliff")

    def sniff(self, head: bytes, path: Path) -> bool:
        return path.suffix.lower() in self.suffixes and text_encoding(head) is not None and b"<xliff" in head

    def translate(
        self, source: Path, output: Path, translate: TextTranslator, progress: ProgressCallback | None
    ) -> DocumentReport:
        _bounds.check_markup_file(source)
        parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
        try:
            tree = etree.parse(str(source), parser)
        except etree.XMLSyntaxError as exc:
            line, column = exc.position
            raise DocumentFormatError(
                f"{source.name} is not well-formed XML: {exc.msg} (line {line}, column {column}); fix it "
                "and try again"
            ) from exc
        root = tree.getroot()
        if _local(root) != "xliff":
            raise DocumentFormatError(f"{source.name}: the root element is <{_local(root)}>, not <xliff>")
        report = DocumentReport()
        bcp47 = get(translate.target).bcp47
        version2 = str(root.get("version", "1.2")).startswith("2")
        segments = (
            self._segments_v2(root, bcp47, translate.target, report)
            if version2
            else self._segments_v1(root, bcp47, translate.target, report)
        )
        ids = _inline.numbering(etree.tostring(root, encoding="unicode"))
        for segment in segments:
            segment.mask(ids)
        translations = _translate_all(translate, [s.masked for s in segments])
        lost = 0
        for segment, translated in zip(segments, translations, strict=True):
            lost += not segment.fill(self._target(segment, version2), translated)
        if lost:
            report.warnings.append(
                f"markup_moved: in {lost} segment(s) the translation lost an inline code; it was put back at "
                "the end of the target. Check those segments."
            )
        report.segments = len(segments)
        report.characters = sum(len(s.masked) for s in segments)
        data = source.read_bytes()
        encoding = tree.docinfo.encoding or "UTF-8"
        declaration = m.group() if (m := _XML_DECLARATION.match(data)) else b""
        result = etree.tostring(tree, encoding=encoding, xml_declaration=False)
        if data.endswith(b"\n") and not result.endswith(b"\n"):
            result += b"\n"
        output.write_bytes(declaration + _crlf_back(data, result))
        return report

    @staticmethod
    def _segments_v1(root: Any, bcp47: str, target: str, report: DocumentReport) -> list[_Segment]:
        segments: list[_Segment] = []
        for file in (e for e in root.iter() if _local(e) == "file"):
            declared = str(file.get("target-language", "")).strip()
            same = not declared or _same_language(declared, target)
            if not same and (warning := _other_language_warning(declared, target)) not in report.warnings:
                report.warnings.append(warning)  # once, however many <file>s say so
            file.set("target-language", bcp47)
            for unit in (e for e in file.iter() if _local(e) == "trans-unit"):
                source = _child(unit, "seg-source")
                source = source if source is not None else _child(unit, "source")
                if source is None or not _has_content(source) or not _translatable(unit):
                    continue
                if same and _has_content(_child(unit, "target")):
                    continue
                segments.append(_Segment(unit, source))
        return segments

    @staticmethod
    def _segments_v2(root: Any, bcp47: str, target: str, report: DocumentReport) -> list[_Segment]:
        declared = str(root.get("trgLang", "")).strip()
        same = not declared or _same_language(declared, target)
        if not same:
            report.warnings.append(_other_language_warning(declared, target))
        root.set("trgLang", bcp47)
        segments: list[_Segment] = []
        for unit in (e for e in root.iter() if _local(e) == "unit"):
            if not _translatable(unit):
                continue
            for segment in (c for c in unit if _local(c) == "segment"):
                source = _child(segment, "source")
                if not _has_content(source) or (same and _has_content(_child(segment, "target"))):
                    continue
                segments.append(_Segment(segment, source))
        return segments

    @staticmethod
    def _target(segment: _Segment, version2: bool) -> Any:
        container = segment.container
        target = _child(container, "target")
        if target is None:
            target = container.makeelement(etree.QName(etree.QName(segment.source).namespace, "target"), {})
            source = segment.source
            tail = source.tail
            before = source.getprevious()
            indent = container.text if before is None else before.tail
            source.addnext(target)
            if indent is not None and not indent.strip():  # the target indented like the source
                source.tail = indent
            target.tail = tail
        if version2:
            container.set("state", "translated")
            container.attrib.pop("subState", None)  # it qualified the state the segment had before
        else:
            target.set("state", "needs-review-translation")
            target.set("state-qualifier", "mt-suggestion")
            if container.get("approved") == "yes":  # approved was the translation now replaced
                container.set("approved", "no")
        return target


# --- JSON ------------------------------------------------------------------------------------------------


#: Keys that hold a note for translators wherever they are: Transifex's ``developer_comment``, the
#: ``_comment`` of i18next and hand-written files, and a key's companion note written ``key___DESCRIPTION``,
#: ``key__comment`` (two or more underscores before ``description``, ``comment`` or ``note``).
_NOTES = frozenset({"comment", "description", "note", "notes", "context"})
_NOTE_SUFFIXES = ("__description", "__comment", "__note")


def _translator_note(key: str) -> bool:
    """Whether ``key`` names a note for translators (string tests, no pattern: keys may be long)."""
    folded = key.lower()
    bare = folded.lstrip("_")
    if folded == "developer_comment" or (bare != folded and bare in _NOTES):
        return True
    return any(folded.endswith(end) and folded[: -len(end)].strip("_") for end in _NOTE_SUFFIXES)


#: The message of an object that carries a message and notes about it: Chrome's ``messages.json``
#: (``message``, ``description``), FormatJS (``defaultMessage``, ``description``), Transifex structured
#: JSON (``string``, ``developer_comment``, ``context``).
_MESSAGE_KEYS = frozenset({"message", "defaultMessage", "string"})
#: Beside a message key, these are notes for translators; in such an object only the message is translated.
_MESSAGE_NOTES = frozenset(
    {"description", "developer_comment", "comment", "context", "meaning", "note", "notes", "example"}
)


#: What else such an object may hold (Chrome's ``placeholders``, FormatJS's ``id``, Transifex's limits).
_MESSAGE_METADATA = frozenset({"placeholders", "id", "character_limit", "tags", "maxlength", "max_length"})


def _is_message(value: dict[str, Any]) -> bool:
    """An object holding one message and notes about it, nothing else (a plain object that happens to have
    a ``string`` key among other strings is not one)."""
    keys = {k.lower() for k in value}
    return (
        any(isinstance(value.get(k), str) for k in _MESSAGE_KEYS)
        and bool(keys & _MESSAGE_NOTES)
        and keys <= {k.lower() for k in _MESSAGE_KEYS} | _MESSAGE_NOTES | _MESSAGE_METADATA
    )


@dataclass
class _JsonStrings:
    """The translatable strings of a JSON document, in document order. ICU blocks are numbered from one
    counter; :meth:`rebuild` walks the same way with a counter from the same start, so numbers match."""

    chrome: bool = False
    texts: list[str] = field(default_factory=list)

    def _walked(self, key: str, value: Any, message: bool = False) -> bool:
        if key.startswith("@") or _translator_note(key):
            return False
        if message:  # only the message: notes, ids and placeholders' examples are for translators
            return key in _MESSAGE_KEYS
        return not self.chrome or key == "message" or isinstance(value, dict)

    def collect(self, value: Any, ids: Iterator[int]) -> None:
        if isinstance(value, dict):
            message = _is_message(value)
            for k, v in value.items():
                if self._walked(k, v, message):
                    self.collect(v, ids)
        elif isinstance(value, list):
            for item in value:
                self.collect(item, ids)
        elif isinstance(value, str) and _has_letters(value):
            self.texts.extend(text for text, _ in _i18n.message_texts(_i18n.parse_message(value), ids))

    def rebuild(self, value: Any, ids: Iterator[int], translations: Iterator[str]) -> Any:
        if isinstance(value, dict):
            message = _is_message(value)
            return {
                k: self.rebuild(v, ids, translations) if self._walked(k, v, message) else v
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [self.rebuild(item, ids, translations) for item in value]
        if isinstance(value, str) and _has_letters(value):
            return _i18n.render_message(_i18n.parse_message(value), ids, translations)
        return value


#: Deepest nesting of objects and arrays in a JSON string file (i18n files nest a few levels); deeper ones
#: are refused, not walked into a RecursionError.
MAX_JSON_DEPTH = 100


def _depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` nests objects and arrays more than ``limit`` deep (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def _too_deep(name: str) -> DocumentFormatError:
    return DocumentFormatError(
        f"{name} nests objects and arrays more than {MAX_JSON_DEPTH} deep, which no string file does; "
        "check the file"
    )


def _json_layout(text: str) -> dict[str, Any]:
    """json.dumps arguments that write a document laid out like ``text``."""
    m = re.search(r"[\[{][ \t]*\r?\n([ \t]+)\S", text)
    ascii_only = text.isascii() and "\\u" in text
    if m is not None:
        return {"indent": m.group(1), "ensure_ascii": ascii_only, "separators": (",", ": ")}
    if "\n" in text.strip():
        return {"indent": 0, "ensure_ascii": ascii_only, "separators": (",", ": ")}
    compact = not re.search(r"\":\s", text)
    return {"ensure_ascii": ascii_only, "separators": (",", ":") if compact else (", ", ": ")}


class JsonHandler:
    name = "json"
    suffixes: tuple[str, ...] = (".json", ".arb")

    def sniff(self, head: bytes, path: Path) -> bool:
        return path.suffix.lower() in self.suffixes and text_encoding(head) is not None

    def translate(
        self, source: Path, output: Path, translate: TextTranslator, progress: ProgressCallback | None
    ) -> DocumentReport:
        text, encoding = read_text(source)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DocumentFormatError(
                f"{source.name} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno} "
                f"(character {exc.pos}); fix it and try again"
            ) from exc
        except RecursionError as exc:
            raise _too_deep(source.name) from exc
        chrome = (
            isinstance(data, dict)
            and bool(data)
            and all(isinstance(v, dict) and "message" in v for v in data.values())
        )
        strings = _JsonStrings(chrome=chrome)
        start = _inline.first_free_id(text)
        if _depth_over(data, MAX_JSON_DEPTH):
            raise _too_deep(source.name)
        strings.collect(data, itertools.count(start))
        translations = _translate_all(translate, strings.texts)
        result = strings.rebuild(data, itertools.count(start), iter(translations))
        if isinstance(result, dict) and "@@locale" in result:
            result["@@locale"] = get(translate.target).bcp47.replace("-", "_")
        written = json.dumps(result, **_json_layout(text))
        if text.endswith("\n"):
            written += "\n"
        if "\r\n" in text:
            written = written.replace("\n", "\r\n")
        output.write_bytes(written.encode(encoding))
        return DocumentReport(
            segments=sum(1 for t in strings.texts if _has_letters(t)),
            characters=sum(len(t) for t in strings.texts),
        )
