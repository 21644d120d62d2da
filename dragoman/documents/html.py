"""HTML (``.html``, ``.htm``): text translated a block at a time, tags, scripts and attributes untouched.

The document is parsed with lxml's HTML parser and written back with its doctype, XML declaration and
encoding. Each run of text of a block element (``<p>``, ``<li>``, ``<td>``, ``<h1>``, ``<title>``...),
with the inline elements inside it (``<b>``, ``<a href>``, ``<span>``...), is translated as one text: the
inline elements become numbered placeholders (``<3>bold</3>``, ``<4/>`` for ``<br>``, ``<img>`` and
untouched spans like ``<code>``; see :mod:`dragoman.documents._inline`), so the engine sees whole sentences
and may move them ("the <1>red</1> car" -> "el coche <1>rojo</1>"); the elements are then put back, with
their attributes, where the translation placed them. Source line breaks inside a run are whitespace in
HTML and are sent as spaces.

Untouched: ``script``, ``style``, ``code``, ``pre``, ``kbd``, ``samp``, ``var``, ``noscript``, ``template``,
``textarea``, ``svg``, ``math``, comments, and any element marked ``translate="no"`` or
``class="notranslate"``; every attribute except ``alt``, ``title``, ``placeholder`` and ``aria-label``,
which are translated. ``<html lang>`` is set to the target's BCP-47 tag and ``dir="rtl"`` for
right-to-left targets. A file without ``<html>``, ``<head>``, ``<body>`` or a doctype is a fragment and is
written back as a fragment.
"""

from __future__ import annotations

import codecs
import html
import html.entities
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lxml.html  # type: ignore[import-untyped]
from lxml import etree

from dragoman.documents import _bounds, _inline
from dragoman.documents.base import DocumentReport, TextTranslator
from dragoman.documents.plaintext import text_encoding
from dragoman.errors import DocumentFormatError, DocumentTooLarge
from dragoman.languages.catalogue import get
from dragoman.progress import ProgressCallback

Element = Any  # lxml.html.HtmlElement (lxml ships no type information)

INLINE = frozenset(
    "a abbr acronym b bdi bdo big br button cite code data del dfn em font i img input ins kbd label mark "
    "math meter output progress q rp rt ruby s samp small span strike strong sub sup svg textarea time tt "
    "u var wbr script style noscript template".split()
)
#: Elements whose content (and attributes) are never translated.
UNTOUCHED = frozenset("script style code pre kbd samp var noscript template textarea svg math".split())
VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())
TRANSLATED_ATTRIBUTES = ("alt", "title", "placeholder", "aria-label")
XHTML_NAMESPACE = "http://www.w3.org/1999/xhtml"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
#: ``lang``, and ``xml:lang`` as the HTML parser (a plain name) and the XML parser (namespaced) read it.
LANG_ATTRIBUTES = ("lang", "xml:lang", XML_LANG)
#: Deepest nesting of elements read: libxml2's limit without ``huge_tree``, which stops there and drops the
#: rest of the file without raising; dragoman sees that in the parser's log and refuses the file (413) rather
#: than translate part of it. (Browsers nest deeper; the handler's tree walks are recursive, which this keeps
#: well inside Python's recursion limit.)
MAX_HTML_DEPTH = 256

_DOCUMENT = re.compile(rb"<(?:!doctype|html|head|body)[\s>]", re.I)
_XML_DECLARATION = re.compile(r"\A\s*<\?xml[^>]*\?>\s*")
#: The encoding an XML declaration names (XHTML): anchored at the start of the file, attributes bounded.
_XML_ENCODING = re.compile(
    rb"\A(?:\xef\xbb\xbf)?\s{0,64}<\?xml\s[^>]{0,200}?\bencoding\s*=\s*[\"']([A-Za-z0-9_.:-]{1,40})"
)
_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([A-Za-z0-9_.:-]+)", re.I)
#: A run of whitespace holding a line break. Matched only from the start of a run (the look-behind), and
#: possessive up to the break: trying every position of a long run without one was quadratic.
_SOURCE_LINE_BREAK = re.compile(r"(?<![ \t\r\n])[ \t\r]*+\n[ \t\r\n]*")
_LETTER = re.compile(r"[^\W\d_]")


def _tag(element: Element) -> str | None:
    """The element's local name in lower case (``p``, also for XHTML's ``{namespace}p``); None for a
    comment, a processing instruction or an entity reference."""
    tag = element.tag
    return tag.rsplit("}", 1)[-1].lower() if isinstance(tag, str) else None


def _untouched(element: Element) -> bool:
    tag = _tag(element)
    if tag is None or tag in UNTOUCHED:
        return True
    return element.get("translate", "").lower() == "no" or "notranslate" in element.get("class", "").split()


def _is_block(element: Element) -> bool:
    """True for an element that starts its own texts: not inline, or inline around a block."""
    tag = _tag(element)
    if tag is None or _untouched(element):
        return False
    if tag not in INLINE:
        return True
    return any(_is_block(child) for child in element)


def _escape(text: str | None) -> str:
    return (text or "").replace("&", "&amp;").replace("<", "&lt;")


@dataclass
class _Run:
    """Text of ``parent`` between two block children: the text before the first inline element (owned by
    ``parent.text`` or by the previous block child's tail), the inline elements, and their tails."""

    parent: Element
    owner: Element | None  # the block child whose tail opens the run; None: parent.text
    children: list[Element]
    following: Element | None  # the block child that ends the run; None: the run ends the parent
    elements: dict[int, Element] = field(default_factory=dict)
    masked: str = ""

    def mask(self, ids: Iterator[int]) -> None:
        parts = [_escape(self.parent.text if self.owner is None else self.owner.tail)]
        for child in self.children:
            parts.append(self._serialise(child, ids))
            parts.append(_escape(child.tail))
        text = "".join(parts)
        core = text.strip(" \t\r\n")
        start = text.find(core) if core else 0
        self.masked = text[:start] + _SOURCE_LINE_BREAK.sub(" ", core) + text[start + len(core) :]

    def _serialise(self, element: Element, ids: Iterator[int]) -> str:
        number = next(ids)
        self.elements[number] = element
        if _untouched(element) or _tag(element) in VOID:
            return f"<{number}/>"
        inner = [_escape(element.text)]
        for child in element:
            inner.append(self._serialise(child, ids))
            inner.append(_escape(child.tail))
        return f"<{number}>{''.join(inner)}</{number}>"

    def has_text(self) -> bool:
        return bool(_LETTER.search(_inline.unescape_markup(_inline.TAG.sub("", self.masked))))

    def pairs(self) -> dict[int, bool]:
        return {n: not (_untouched(e) or _tag(e) in VOID) for n, e in self.elements.items()}

    def rebuild(self, translated: str) -> bool:
        """Put the translation in place; False when a placeholder was lost (its element is appended)."""
        nodes, missing = _inline.parse(translated, self.pairs())
        if missing:
            nodes, trailing = _inline.split_trailing_space(nodes)
            nodes.extend(_inline.Tag(n, single=True) for n in missing)
            nodes.append(trailing)
        for child in self.children:
            self.parent.remove(child)
        lead, built = self._build(nodes)
        if self.owner is None:
            self.parent.text = lead or None
        else:
            self.owner.tail = lead or None
        index = len(self.parent) if self.following is None else self.parent.index(self.following)
        for offset, element in enumerate(built):
            self.parent.insert(index + offset, element)
        return not missing

    def _build(self, nodes: list[_inline.Node]) -> tuple[str, list[Element]]:
        def element_for(node: _inline.Tag) -> Element:
            element = self.elements[node.id]
            if not node.single:
                for child in list(element):
                    element.remove(child)
            return element

        return _inline.rebuild(nodes, element_for)


@dataclass
class _Collected:
    runs: list[_Run] = field(default_factory=list)
    attributes: list[tuple[Element, str]] = field(default_factory=list)
    #: Translated elements that declare their language (``lang``, ``xml:lang``): it becomes the target's.
    languages: list[Element] = field(default_factory=list)

    def visit(self, element: Element) -> None:
        if _untouched(element):
            return
        self.attribute(element)
        owner: Element | None = None
        children: list[Element] = []
        for child in element:
            if _is_block(child):
                self.runs.append(_Run(element, owner, children, child))
                self.visit(child)
                owner, children = child, []
            else:
                children.append(child)
                self.inline_attributes(child)
        self.runs.append(_Run(element, owner, children, None))

    def attribute(self, element: Element) -> None:
        if any(element.get(name) is not None for name in LANG_ATTRIBUTES):
            self.languages.append(element)
        for name in TRANSLATED_ATTRIBUTES:
            value = element.get(name)
            if value and _LETTER.search(value):
                self.attributes.append((element, name))

    def inline_attributes(self, element: Element) -> None:
        if _untouched(element):
            return
        self.attribute(element)
        for child in element:
            self.inline_attributes(child)


def _encoding(data: bytes) -> tuple[str, bool]:
    """The encoding of an HTML file and whether it was declared (BOM, XML declaration, ``<meta charset>``)."""
    for bom, name in (
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if data.startswith(bom):
            return name, True
    m = _XML_ENCODING.match(data) or _META_CHARSET.search(data[:8192])
    if m is not None:
        try:
            return codecs.lookup(m.group(1).decode("ascii")).name, True
        except LookupError:
            pass
    return "utf-8", False


def _decode(data: bytes, name: str) -> tuple[str, str]:
    encoding, declared = _encoding(data)
    try:
        return data.decode(encoding), encoding
    except UnicodeDecodeError as exc:
        if declared:
            raise DocumentFormatError(
                f"{name} declares {encoding} but is not valid {encoding} (byte {exc.start}); fix its "
                "<meta charset> or convert it to UTF-8"
            ) from exc
        return data.decode("cp1252", errors="replace"), "cp1252"


def _set_language(root: Element, flores: str, *, always: bool = True) -> None:
    """Declare ``flores`` on ``root`` (``lang`` always when ``always``; ``xml:lang`` where present) and set
    ``dir`` to its direction where it differs."""
    language = get(flores)
    if always or root.get("lang") is not None:
        root.set("lang", language.bcp47)
    for name in LANG_ATTRIBUTES[1:]:
        if name in root.attrib:
            root.set(name, language.bcp47)
    if language.rtl:
        root.set("dir", "rtl")
    elif root.get("dir", "").lower() == "rtl":
        root.set("dir", "ltr")


def _primary(tag: str | None) -> str:
    return (tag or "").strip().split("-")[0].split("_")[0].lower()


def _declared_language(element: Element) -> str:
    return next((str(v) for name in LANG_ATTRIBUTES if (v := element.get(name)) is not None), "")


def _relabel_languages(
    elements: list[Element], root: Element, translate: TextTranslator, sample: str
) -> None:
    """Give the target's language to translated elements that declared the source's: an inner
    ``lang="en"`` left on text now in Spanish misleads screen readers, spell checkers and hyphenation.
    Elements that declare another language (a quotation in French) keep theirs. The source language is
    the translator's, else the one the document declared, else detected from the text."""
    inner = [e for e in elements if e is not root]
    if not inner:
        return
    if translate.source:
        source = _primary(get(translate.source).bcp47)
    elif _declared_language(root):
        source = _primary(_declared_language(root))
    else:
        detected = translate.detect_language(sample)
        source = _primary(get(detected).bcp47) if detected else ""
    for element in inner:
        declared = _primary(_declared_language(element))
        if declared and (declared == source or not source):
            _set_language(element, translate.target, always=False)


def _refuse_if_cut(parser: etree.HTMLParser, name: str) -> None:
    """A typed error when the parser stopped early: what it built is only part of the file."""
    fatal = [e for e in parser.error_log if e.level_name == "FATAL"]
    if not fatal:
        return
    if any("depth" in e.message for e in fatal):
        raise DocumentTooLarge(
            f"{name}: elements are nested more than {MAX_HTML_DEPTH} deep, past what the HTML parser reads; "
            "refused rather than translated in part. Flatten the markup"
        )
    raise DocumentFormatError(f"{name} cannot be read whole as HTML ({fatal[0].message.strip()})")


_HTML_TAG = re.compile(rb"<html[\s>]", re.I)
_XHTML_XMLNS = re.compile(rb"\sxmlns\s*=\s*[\"']http://www\.w3\.org/1999/xhtml[\"']", re.I)


def _looks_xhtml(source: Path, declaration: str, data: bytes) -> bool:
    """An ``.xhtml`` file, or one that opens with an XML declaration or has the XHTML namespace: read as
    XML when it is well-formed, so that it is written back as XML (``<br/>``, CDATA, namespaces)."""
    if source.suffix.lower() == ".xhtml" or declaration:
        return True
    head = data[:65536]
    tag = _HTML_TAG.search(head)  # the first <html ...>, then its attributes up to the first '>'
    end = head.find(b">", tag.start()) + 1 if tag is not None else 0
    return tag is not None and bool(_XHTML_XMLNS.search(head, tag.start(), end or len(head)))


def _xhtml_root(body: str, source: Path) -> Element | None:
    """The root of ``body`` read as XML (no DTD, no network, entities kept as references, CDATA kept);
    None when it is not well-formed XML (then it is read as HTML, as browsers read text/html). An
    ``.xhtml`` file that is not well-formed is refused: XML consumers would reject what it was."""
    parser = etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False, strip_cdata=False
    )
    try:
        root = etree.fromstring(body, parser=parser)
    except etree.XMLSyntaxError as exc:
        if source.suffix.lower() == ".xhtml":
            if "depth" in str(exc).lower() or "nest" in str(exc).lower():
                raise DocumentTooLarge(
                    f"{source.name}: elements are nested more than {MAX_HTML_DEPTH} deep; refused rather "
                    "than translated in part. Flatten the markup"
                ) from exc
            raise DocumentFormatError(f"{source.name} is not well-formed XHTML: {exc}") from exc
        return None
    except ValueError:
        return None
    if _tag(root) != "html" and source.suffix.lower() != ".xhtml":
        return None
    _inline_entities(root)
    return root


def _inline_entities(root: Element) -> None:
    """HTML named entities (``&nbsp;``, ``&copy;``), which XML without the DTD keeps as references, become
    their characters, so that they do not split words for the engine. Unknown ones stay references."""
    for entity in list(root.iter(etree.Entity)):
        char = html.entities.html5.get(entity.text.strip("&;") + ";")
        parent = entity.getparent()
        if char is None or parent is None:
            continue
        text = char + (entity.tail or "")
        previous = entity.getprevious()
        if previous is None:
            parent.text = (parent.text or "") + text
        else:
            previous.tail = (previous.tail or "") + text
        parent.remove(entity)


def _xhtml_serialise(root: Element) -> str:
    """XML, with the doctype; empty non-void XHTML elements keep an end tag (``<script src=x></script>``,
    not ``<script/>``, which HTML parsers read as an unclosed element)."""
    for element in root.iter():
        tag = element.tag
        if (
            isinstance(tag, str)
            and tag.startswith("{" + XHTML_NAMESPACE + "}")
            and _tag(element) not in VOID
            and element.text is None
            and len(element) == 0
        ):
            element.text = ""
    return str(etree.tostring(root.getroottree(), encoding="unicode"))


class HtmlHandler:
    name = "html"
    suffixes: tuple[str, ...] = (".html", ".htm", ".xhtml")

    def sniff(self, head: bytes, path: Path) -> bool:
        if path.suffix.lower() not in self.suffixes or b"<" not in head:
            return False
        return text_encoding(head) is not None or _encoding(head)[1]

    def translate(
        self, source: Path, output: Path, translate: TextTranslator, progress: ProgressCallback | None
    ) -> DocumentReport:
        data = source.read_bytes()
        _bounds.check_markup(data, source.name)
        text, encoding = _decode(data, source.name)
        declaration = m.group() if (m := _XML_DECLARATION.match(text)) else ""
        body = text[len(declaration) :]
        document = bool(_DOCUMENT.search(data[:65536]))
        xml_root = _xhtml_root(body, source) if _looks_xhtml(source, declaration, data) else None
        if xml_root is not None:
            root = xml_root
        else:
            # libxml2 stops at MAX_HTML_DEPTH levels of nesting and silently drops the rest of the file: the
            # parser's log tells, and the file is refused (never translated in part).
            parser = lxml.html.HTMLParser()
            try:
                if document:
                    root = lxml.html.document_fromstring(body, parser=parser)
                else:
                    root = lxml.html.fragment_fromstring(body, create_parent="div", parser=parser)
            except (etree.ParserError, ValueError) as exc:
                raise DocumentFormatError(f"{source.name} cannot be read as HTML: {exc}") from exc
            _refuse_if_cut(parser, source.name)

        collected = _Collected()
        collected.visit(root)
        ids = _inline.numbering(text)
        runs = []
        for run in collected.runs:
            run.mask(ids)
            if run.has_text():
                runs.append(run)
        texts = [r.masked for r in runs] + [str(e.get(a)) for e, a in collected.attributes]
        translations = translate(texts) if texts else []
        lost = sum(not run.rebuild(t) for run, t in zip(runs, translations[: len(runs)], strict=True))
        for (element, attribute), value in zip(collected.attributes, translations[len(runs) :], strict=True):
            element.set(attribute, value)
        sample = " ".join(_inline.TAG.sub("", r.masked) for r in runs[:20])[:2000]
        _relabel_languages(collected.languages, root, translate, sample)

        if xml_root is not None:
            _set_language(root, translate.target)
            result = _xhtml_serialise(root)
        elif document:
            _set_language(root, translate.target)
            tree = root.getroottree()
            doctype = tree.docinfo.doctype if re.search(r"<!doctype", body[:4096], re.I) else ""
            # etree.tostring, not lxml.html.tostring: the latter drops <meta http-equiv="Content-Type">,
            # and a file in Latin-1 written back without its charset declaration decodes as mojibake.
            result = etree.tostring(tree, method="html", encoding="unicode", doctype=doctype)
            if not doctype:
                result = result.removeprefix("\n")
        else:
            result = lxml.html.tostring(root, encoding="unicode")[len("<div>") : -len("</div>")]
        if text.endswith("\n") and not result.endswith("\n"):
            result += "\n"
        result = declaration + result
        output.write_bytes(result.encode(encoding, errors="xmlcharrefreplace"))

        report = DocumentReport(segments=len(texts), characters=sum(len(t) for t in texts))
        if lost:
            report.warnings.append(
                f"markup_moved: in {lost} text(s) the translation lost an inline element (a link, bold, "
                "an image); it was put back at the end of its text. Check those places."
            )
        report.extracted_text = "\n".join(html.unescape(_inline.TAG.sub("", r.masked)) for r in runs)
        return report
