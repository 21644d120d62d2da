"""Inline markup as numbered placeholders the engine keeps, and the tolerant reading of them afterwards.

The text formats (Markdown, HTML, XLIFF) send a paragraph to the engine as one text, with each inline
element written as a numbered tag: ``<3>`` ... ``</3>`` around text that is translated (emphasis, link
text), ``<4/>`` for a span that must come back unchanged (inline code, an image, a ``<ph/>``). The engine
protects numbered tags, so the translation carries them, possibly moved ("the <1>red</1> car" -> "el coche
<1>rojo</1>"). :func:`parse` reads them back into a tree; it never fails: a tag the translation lost is
reported as missing (the caller puts the element back at the end), a repeated or stray one is dropped, an
unclosed one is closed at the end. Numbers start above any numbered tag already in the source text, so a
literal ``<1>`` of the document stays literal.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

TAG = re.compile(r"<(/?)(\d{1,5})(/?)>")


@dataclass
class Tag:
    """A numbered placeholder found in a translation: a pair with its children, or a single."""

    id: int
    single: bool
    children: list[Node] = field(default_factory=list)


Node = str | Tag


def first_free_id(*texts: str) -> int:
    """The first placeholder number above every numbered tag already present in ``texts``."""
    used = [int(m.group(2)) for text in texts for m in TAG.finditer(text)]
    return max(used, default=0) + 1


def numbering(*texts: str) -> Iterator[int]:
    """Placeholder numbers that cannot clash with numbered tags already in ``texts``."""
    return itertools.count(first_free_id(*texts))


def parse(translated: str, ours: Mapping[int, bool]) -> tuple[list[Node], list[int]]:
    """Read ``translated`` into a tree of text and :class:`Tag` nodes, and the ids it lacks.

    ``ours`` maps each placeholder id handed out to True for a pair, False for a single. Numbered tags
    that are not ours stay literal text. Each id is used once: repeats and closers without an opener are
    dropped; a pair written as ``<n/>`` becomes an empty pair; a single written as ``<n>`` is a single.
    """
    root: list[Node] = []
    stack: list[Tag] = []
    seen: set[int] = set()

    def add(node: Node) -> None:
        target = stack[-1].children if stack else root
        if isinstance(node, str) and target and isinstance(target[-1], str):
            target[-1] += node
        elif node != "":
            target.append(node)

    pos = 0
    for m in TAG.finditer(translated):
        add(translated[pos : m.start()])
        pos = m.end()
        closing, number, self_closing = m.group(1) == "/", int(m.group(2)), m.group(3) == "/"
        if number not in ours:
            add(m.group())
            continue
        if closing:
            if any(t.id == number for t in stack):
                while stack and stack.pop().id != number:
                    pass
            continue
        if number in seen:
            continue
        seen.add(number)
        is_pair = ours[number]
        tag = Tag(number, single=not is_pair)
        add(tag)
        if is_pair and not self_closing:
            stack.append(tag)
    add(translated[pos:])
    missing = [number for number in ours if number not in seen]
    return root, missing


def plain(nodes: list[Node]) -> str:
    """The text of a tree without its placeholders."""
    return "".join(n if isinstance(n, str) else plain(n.children) for n in nodes)


def split_trailing_space(nodes: list[Node]) -> tuple[list[Node], str]:
    """``nodes`` without the whitespace that ends them, and that whitespace (to append missing tags before
    it, keeping the text's outer whitespace in place)."""
    if nodes and isinstance(nodes[-1], str):
        stripped = nodes[-1].rstrip()
        trailing = nodes[-1][len(stripped) :]
        return ([*nodes[:-1], stripped] if stripped else nodes[:-1]), trailing
    return nodes, ""


def unescape_markup(text: str) -> str:
    """Undo the escaping of ``<`` and ``&`` in text that travelled between markup placeholders."""
    return text.replace("&lt;", "<").replace("&amp;", "&")


def rebuild(nodes: list[Node], element_for: Callable[[Tag], Any]) -> tuple[str, list[Any]]:
    """Lxml elements from parsed nodes: the text before the first element, and the elements in order.

    ``element_for(node)`` gives the element of a tag: complete for a single tag (``<3/>``), and without
    children for a pair, whose text and children are rebuilt here from the translation.
    """
    lead = ""
    built: list[Any] = []
    for node in nodes:
        if isinstance(node, str):
            if built:
                built[-1].tail = (built[-1].tail or "") + unescape_markup(node)
            else:
                lead += unescape_markup(node)
            continue
        element = element_for(node)
        if not node.single:
            text, children = rebuild(node.children, element_for)
            element.text = text or None
            element.extend(children)
        element.tail = None
        built.append(element)
    return lead, built
