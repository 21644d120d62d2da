"""Inline formatting that moves with its words through Apertium.

Document formats send a formatted run as numbered tags around text (``The <1>big</1> dog``). As
superblanks, the tags stay where they stood while Apertium reorders words, so the bold lands on the wrong
word ("El <1>perro</1> grande"). Apertium 3.8 has *word-bound blanks*: ``[[t:b:1]]big[[/]]`` travels with
its word through every stage. :func:`bind_words` rewrites each tag pair that holds only plain text into
word-bound blanks on each of its words; :func:`unbind_words` turns them back into tags after
:func:`~dragoman.translation.backends.apertium.reformat`, merging neighbouring words of one span. When a span
comes back split or lost, :func:`spans_whole` says so and the caller translates that segment again the
plain way (tags as superblanks), which cannot lose them.
"""

from __future__ import annotations

import re

# A numbered tag pair as the deformatter writes it: superblanks [\<n\>] ... [\<\/n\>] around escaped text
# that holds no superblank of its own.
_PAIR = re.compile(r"\[\\<(\d{1,3})\\>\]((?:[^\[\]\\]|\\.)*?)\[\\<\\/\1\\>\]")
# A word as Apertium sees one; escapes (\x) are not part of it.
_WORD = re.compile(r"(?:[\w'’·-]|\\[^\s])+")
_OPEN = re.compile(r"\[\[t:b:(\d{1,3})\]\]")
_CLOSE = "[[/]]"
_MERGE = re.compile(r"</(\d{1,3})>(\s*)<\1>")


def bind_words(body: str) -> tuple[str, tuple[str, ...]]:
    """``body`` with each simple tag pair turned into word-bound blanks, and the ids so bound."""
    bound: list[str] = []

    def one(m: re.Match[str]) -> str:
        inner = m.group(2)
        if not _WORD.search(inner):
            return m.group(0)
        bound.append(m.group(1))
        return _WORD.sub(lambda w: f"[[t:b:{m.group(1)}]]{w.group(0)}{_CLOSE}", inner)

    return _PAIR.sub(one, body), tuple(bound)


def unbind_words(raw: str) -> str:
    """Word-bound blanks back into superblanks holding the tags (before reformatting)."""
    opened = _OPEN.sub(lambda m: f"[\\<{m.group(1)}\\>]", raw)
    return opened.replace(_CLOSE, "[\\<\\/#\\>]")


def close_tags(text: str) -> str:
    """Give each ``</#>`` the number of the tag it closes, then merge words of one span."""
    out: list[str] = []
    opened: list[str] = []
    for piece in re.split(r"(<\d{1,3}>|</#>)", text):
        if piece.startswith("<") and piece.endswith(">") and piece[1:-1].isdigit():
            opened.append(piece[1:-1])
            out.append(piece)
        elif piece == "</#>":
            out.append(f"</{opened.pop()}>" if opened else "")
        else:
            out.append(piece)
    return _MERGE.sub(r"\2", "".join(out))


def spans_whole(text: str, ids: tuple[str, ...]) -> bool:
    """True when each bound span came back once, opened before it closes."""
    for n in ids:
        opened, closed = text.count(f"<{n}>"), text.count(f"</{n}>")
        if opened != 1 or closed != 1 or text.index(f"<{n}>") > text.index(f"</{n}>"):
            return False
    return True
