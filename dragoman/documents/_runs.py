"""A paragraph's translation mapped back onto its runs (DOCX, PPTX and rich XLSX strings share this).

A paragraph is translated as a whole: translating run by run cuts sentences apart and ruins the
translation. A format walks its paragraph and hands over :class:`Piece` s in reading order: each text
slot (a ``w:t`` / ``a:t`` element) with the *key* of its run's formatting, and *barriers*: things inside
the paragraph that are not text and must keep their place between the words (tabs, line breaks,
drawings, fields, footnote references).

:func:`encode` builds the text to translate:

- consecutive slots with the same key are one *chunk*; the key with the most letters is the paragraph's
  *dominant* formatting, and its chunks are written as plain text;
- every other chunk is wrapped in numbered tags, ``<4>bold words</4>``, and every barrier between texts
  becomes ``<5/>`` (barriers before the first or after the last text are left out). The engine's
  placeholder protection keeps numbered tags (``</?\\d{1,3}/?>``) through translation, and Apertium keeps
  them in place as superblanks. Numbers start above any numbered tag the text itself contains;
- chunks of whitespace only in another formatting are written as plain text and emptied (their
  formatting, e.g. an underlined space, is the one thing given up);
- a stretch between barriers with no letter (``, `` between two mail-merge fields, ``1.`` before a tab)
  is left out: it keeps its text, and translated words cannot migrate into it.

:func:`decode` splits the translation back. The barriers cut it into *regions*, one per stretch of text
between barriers. Inside a region, each tagged span goes to its chunk and plain text to the region's
dominant chunks in order; a region whose chunks come back in their original order is written *in
place* (each chunk's first slot gets its text, other slots are emptied, nothing else in the XML moves).
When the translation reorders spans (an adjective moving after its noun), the region is *rebuilt*: its
runs are replaced by new runs, cloned from the chunk whose text each one carries, in the translation's
order; a format that cannot rebuild a region (runs in different containers, runs holding more than
text) gets each text put into its own chunk instead.

When the tags come back broken (a tag lost, doubled or unbalanced) the spans' formatting is given up:
with the barriers intact, each region's text (tags stripped) goes into its first dominant chunk; with
barriers lost too, the whole text is spread over the regions in proportion to their original lengths,
cut at spaces. :attr:`Decoded.exact` says which happened, so handlers can report approximations.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

#: The numbered tags the engine's placeholder protection keeps.
_TAG = re.compile(r"<(/?)(\d{1,3})(/?)>")
MAX_TAG = 999

Role = Literal["plain", "span", "blank"]


@dataclass(frozen=True)
class Piece:
    """A text slot (``key`` is its formatting identity, any hashable) or a barrier (``key`` is None)."""

    key: Hashable | None
    text: str = ""

    @property
    def is_barrier(self) -> bool:
        return self.key is None


BARRIER = Piece(None)


@dataclass(frozen=True)
class Chunk:
    """Consecutive slots of one formatting between two barriers."""

    slots: tuple[int, ...]  # indices into the pieces
    key: Hashable
    text: str
    role: Role
    tag: int = 0  # for spans


@dataclass(frozen=True)
class Encoded:
    """A paragraph ready for translation: ``text`` (with tags) and how to map a translation back."""

    text: str
    source: str  # the paragraph's text without tags
    regions: tuple[tuple[Chunk, ...], ...]
    barrier_tags: tuple[int, ...]  # in order, one between each two regions
    span_tags: frozenset[int]
    dominant_slot: int  # the first slot of the dominant formatting (exemplar for plain text)
    markup: bool  # False: tags could not be numbered, the text carries none

    @property
    def translatable(self) -> bool:
        """Whether the paragraph has letters to translate (digits, symbols and blanks are kept)."""
        return any(c.isalpha() for c in self.source)


@dataclass(frozen=True)
class RegionPlacement:
    """What one region's slots receive: ``runs`` are (exemplar slot, text) in output order."""

    slots: tuple[int, ...]  # every slot of the region, in document order
    runs: tuple[tuple[int, str], ...]
    in_place: bool  # runs name distinct slots of this region in document order


@dataclass(frozen=True)
class Decoded:
    regions: tuple[RegionPlacement, ...]
    exact: bool  # every tag came back: inline formatting placed as translated
    text: str  # the translation without tags


class RunWriter(Protocol):
    """What a format provides to write a decoded paragraph back."""

    def set_text(self, slot: int, text: str) -> None:
        """Replace the text of one slot (its run and everything else in it stay)."""
        ...

    def rebuild(self, slots: Sequence[int], runs: Sequence[tuple[int, str]]) -> bool:
        """Replace the runs of ``slots`` by new runs, each formatted like the run of its exemplar slot;
        False (and nothing changed) when these runs cannot be replaced."""
        ...


def _chunks(pieces: Sequence[Piece]) -> list[list[tuple[Hashable, list[int]]]]:
    """Regions of (key, slot indices); empty slots dropped, barriers collapsed and trimmed."""
    regions: list[list[tuple[Hashable, list[int]]]] = [[]]
    pending_barrier = False
    for index, piece in enumerate(pieces):
        if piece.key is None:
            pending_barrier = True
            continue
        if piece.text == "":
            continue
        if pending_barrier and regions[-1]:
            regions.append([])
        pending_barrier = False
        region = regions[-1]
        if region and region[-1][0] == piece.key:
            region[-1][1].append(index)
        else:
            region.append((piece.key, [index]))
    # A stretch between barriers with no letter (the space or comma between two mail-merge fields, a
    # list number before a tab) is not sent: it keeps its text, and no translated word can move into it.
    kept = [
        r for r in regions if r and any(c.isalpha() for _, slots in r for i in slots for c in pieces[i].text)
    ]
    return kept


def _join(texts: Sequence[str]) -> str:
    """Texts of regions as one text, a space where a barrier stood between two words."""
    out = texts[0] if texts else ""
    for text in texts[1:]:
        gap = "" if out[-1:].isspace() or text[:1].isspace() or not out or not text else " "
        out += gap + text
    return out


def encode(pieces: Sequence[Piece]) -> Encoded:
    """The text to translate for a paragraph made of ``pieces`` (see the module docstring)."""
    raw = _chunks(pieces)
    weights: dict[Hashable, int] = {}
    for region in raw:
        for key, slots in region:
            weights[key] = weights.get(key, 0) + sum(len(pieces[i].text.strip()) for i in slots)
    if not raw:
        return Encoded("", "", (), (), frozenset(), -1, False)
    dominant = max(weights, key=lambda k: weights[k])  # first of the heaviest keys (dicts keep order)
    source = _join(["".join(pieces[i].text for _, slots in region for i in slots) for region in raw])
    literal = [int(m.group(2)) for m in _TAG.finditer(source)]
    next_tag = max(literal, default=0) + 1
    needed = sum(len(r) for r in raw) + len(raw) - 1
    markup = next_tag + needed - 1 <= MAX_TAG
    regions: list[tuple[Chunk, ...]] = []
    barrier_tags: list[int] = []
    span_tags: set[int] = set()
    parts: list[str] = []
    dominant_slot = -1
    for number, region in enumerate(raw):
        if number:
            if markup:
                barrier_tags.append(next_tag)
                parts.append(f"<{next_tag}/>")
                next_tag += 1
            elif parts and not parts[-1][-1:].isspace():
                parts.append(" ")
        chunks: list[Chunk] = []
        for key, slots in region:
            text = "".join(pieces[i].text for i in slots)
            if key == dominant:
                chunks.append(Chunk(tuple(slots), key, text, "plain"))
                dominant_slot = slots[0] if dominant_slot < 0 else dominant_slot
                parts.append(text)
            elif not text.strip() or not markup:
                chunks.append(Chunk(tuple(slots), key, text, "blank" if markup else "plain"))
                parts.append(text)
            else:
                chunks.append(Chunk(tuple(slots), key, text, "span", next_tag))
                span_tags.add(next_tag)
                parts.append(f"<{next_tag}>{text}</{next_tag}>")
                next_tag += 1
        regions.append(tuple(chunks))
    return Encoded(
        "".join(parts),
        source,
        tuple(regions),
        tuple(barrier_tags),
        frozenset(span_tags),
        dominant_slot,
        markup,
    )


_Token = tuple[Literal["text", "open", "close", "barrier"], str, int]


def _tokens(text: str, encoded: Encoded) -> list[_Token]:
    """The translation as text and our tags; numbered tags that are not ours stay text."""
    out: list[_Token] = []
    pos = 0
    for m in _TAG.finditer(text):
        closing, number, selfclosing = m.group(1), int(m.group(2)), m.group(3)
        kind: Literal["open", "close", "barrier"] | None = None
        if number in encoded.span_tags and not selfclosing:
            kind = "close" if closing else "open"
        elif number in encoded.barrier_tags and selfclosing and not closing:
            kind = "barrier"
        if kind is None:
            continue
        if m.start() > pos:
            out.append(("text", text[pos : m.start()], 0))
        out.append((kind, "", number))
        pos = m.end()
    if pos < len(text):
        out.append(("text", text[pos:], 0))
    return out


def _strip(tokens: Sequence[_Token]) -> str:
    return "".join(t[1] for t in tokens if t[0] == "text")


def _split_regions(tokens: list[_Token]) -> list[list[_Token]]:
    regions: list[list[_Token]] = [[]]
    for token in tokens:
        if token[0] == "barrier":
            regions.append([])
        else:
            regions[-1].append(token)
    return regions


def _spans_ok(regions: Sequence[Sequence[_Token]], encoded: Encoded) -> bool:
    """Every span tag opened and closed once, not nested, in the region it came from."""
    seen: set[int] = set()
    for tokens, chunks in zip(regions, encoded.regions, strict=True):
        own = {c.tag for c in chunks if c.role == "span"}
        open_tag = 0
        for kind, _, number in tokens:
            if kind == "open":
                if open_tag or number in seen or number not in own:
                    return False
                open_tag = number
                seen.add(number)
            elif kind == "close":
                if number != open_tag:
                    return False
                open_tag = 0
        if open_tag:
            return False
    return seen == encoded.span_tags


def _region_slots(chunks: Sequence[Chunk]) -> tuple[int, ...]:
    return tuple(i for c in chunks for i in c.slots)


def _first_plain(chunks: Sequence[Chunk]) -> int:
    for chunk in chunks:
        if chunk.role == "plain":
            return chunk.slots[0]
    return chunks[0].slots[0]


def _align(chunks: Sequence[Chunk], tokens: Sequence[_Token], dominant_slot: int) -> RegionPlacement:
    """Place a region's spans on their chunks and plain text on dominant chunks, in order if possible."""
    items: list[tuple[Chunk | None, str]] = []
    by_tag = {c.tag: c for c in chunks if c.role == "span"}
    current: Chunk | None = None
    for kind, text, number in tokens:
        if kind == "open":
            current = by_tag[number]
            items.append((current, ""))
        elif kind == "close":
            current = None
        elif current is not None:
            items[-1] = (current, items[-1][1] + text)
        elif items and items[-1][0] is None:
            items[-1] = (None, items[-1][1] + text)
        else:
            items.append((None, text))
    runs: list[tuple[int, str]] = []
    in_order = True
    pointer = 0
    prefix = ""
    for chunk, text in items:
        text, prefix = prefix + text, ""
        if chunk is not None:
            index = chunks.index(chunk)
            if index >= pointer:
                pointer = index + 1
            else:
                in_order = False
            runs.append((chunk.slots[0], text))
            continue
        found = next((j for j in range(pointer, len(chunks)) if chunks[j].role == "plain"), None)
        if found is not None and not text.strip() and any(c.role == "span" for c in chunks[pointer:found]):
            found = None  # blanks do not jump over a span: they go with their neighbour
        if found is not None:
            pointer = found + 1
            runs.append((chunks[found].slots[0], text))
        elif not text.strip():
            if runs:
                runs[-1] = (runs[-1][0], runs[-1][1] + text)
            else:
                prefix = text
        else:
            in_order = False
            runs.append((dominant_slot, text))
    if prefix:
        runs.append((_first_plain(chunks), prefix))
    slots = _region_slots(chunks)
    if in_order and any(slot not in slots for slot, _ in runs):
        in_order = False
    return RegionPlacement(slots, tuple(runs), in_order)


def _cut_points(text: str, weights: Sequence[int]) -> list[int]:
    """Where to cut ``text`` into len(weights) parts of about those proportions, at spaces if any."""
    total = sum(weights) or 1
    spaces = [m.end() for m in re.finditer(r"\s+", text)]
    cuts: list[int] = []
    acc = 0
    for weight in weights[:-1]:
        acc += weight
        target = round(len(text) * acc / total)
        best = min(spaces, key=lambda s: abs(s - target)) if spaces else target
        cuts.append(max(best, cuts[-1] if cuts else 0))
    return cuts


def decode(encoded: Encoded, translation: str) -> Decoded:
    """Map the translation of ``encoded.text`` back onto the paragraph's regions and slots."""
    if not encoded.regions:
        return Decoded((), True, translation)
    tokens: list[_Token] = _tokens(translation, encoded) if encoded.markup else [("text", translation, 0)]
    plain = _strip(tokens)
    barriers = [t[2] for t in tokens if t[0] == "barrier"]
    if encoded.markup and barriers == list(encoded.barrier_tags):
        regions = _split_regions(tokens)
        if _spans_ok(regions, encoded):
            placed = tuple(
                _align(chunks, region, encoded.dominant_slot)
                for chunks, region in zip(encoded.regions, regions, strict=True)
            )
            return Decoded(placed, True, _join([_strip(r) for r in regions]))
        placed = tuple(
            RegionPlacement(_region_slots(chunks), ((_first_plain(chunks), _strip(region)),), True)
            for chunks, region in zip(encoded.regions, regions, strict=True)
        )
        return Decoded(placed, False, _join([_strip(r) for r in regions]))
    weights = [sum(len(c.text) for c in chunks) for chunks in encoded.regions]
    cuts = [0, *_cut_points(plain, weights), len(plain)]
    placed = tuple(
        RegionPlacement(_region_slots(chunks), ((_first_plain(chunks), plain[cuts[i] : cuts[i + 1]]),), True)
        for i, chunks in enumerate(encoded.regions)
    )
    return Decoded(placed, False, plain)


def apply(decoded: Decoded, writer: RunWriter) -> None:
    """Write a decoded paragraph through ``writer``."""
    for region in decoded.regions:
        if not region.in_place and writer.rebuild(region.slots, region.runs):
            continue
        texts: dict[int, str] = {}
        last = region.slots[0]
        for slot, text in region.runs:
            if slot in region.slots:
                last = slot
            texts[last] = texts.get(last, "") + text
        for slot in region.slots:
            writer.set_text(slot, texts.get(slot, ""))


_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def xml_safe(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot hold (a translation never needs them)."""
    return _XML_INVALID.sub("", text)


@dataclass
class Paragraph:
    """A paragraph of a document: its encoded text and where to write the translation."""

    encoded: Encoded
    writer: RunWriter


@dataclass
class ParagraphStats:
    segments: int = 0
    characters: int = 0
    approximate: int = 0  # paragraphs whose tags came back broken
    sources: tuple[str, ...] = ()
    translations: tuple[str, ...] = ()


def translate_paragraphs(
    paragraphs: Sequence[Paragraph], translate: Callable[[Sequence[str]], list[str]]
) -> ParagraphStats:
    """Translate every paragraph that has letters in one call, and write the translations back."""
    todo = [p for p in paragraphs if p.encoded.translatable]
    translated = translate([p.encoded.text for p in todo]) if todo else []
    stats = ParagraphStats(segments=len(todo), characters=sum(len(p.encoded.source) for p in todo))
    outputs: list[str] = []
    for paragraph, text in zip(todo, translated, strict=True):
        decoded = decode(paragraph.encoded, text)
        apply(decoded, paragraph.writer)
        stats.approximate += not decoded.exact
        outputs.append(decoded.text)
    stats.sources = tuple(p.encoded.source for p in todo)
    stats.translations = tuple(outputs)
    return stats
