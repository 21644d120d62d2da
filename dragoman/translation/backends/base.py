"""What every backend offers, and the protection logic shared by backends that cannot mark spans.

A backend translates a batch of segments, each a tuple of plain text and :class:`Protected` spans, from one
language to another, and guarantees that each protected span's ``output`` appears in its translation. It
answers a :class:`BatchOutput`: the translations and what it learned (Apertium's unknown words), so that
nothing about a call is left on the backend for the caller to read afterwards.
Apertium marks spans as superblanks, which its pipeline carries through untouched; neural backends use
:func:`translate_protected`: translate with the spans written in place (models copy ``{name}``, URLs and
foreign terms most of the time), check every span came through, and translate the segments where one did
not piece by piece around the spans, which cannot lose them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from dragoman.translation.types import BatchOutput, Pieces, Protected


class Backend(Protocol):
    """A loaded pack. Implementations are thread-safe: one instance serves every caller.

    A backend that gains from larger calls says so with a ``coalesces = True`` attribute (how many calls it
    runs at once with ``parallel_calls``, and the segments a call of its may hold, when not the batcher's
    setting, with ``batch_segments``): the engine's batcher then merges concurrent callers' segments into
    one call (:mod:`dragoman.translation.batcher`). Without it, each caller calls it alone.
    """

    pack_id: str

    def translate_batch(self, batch: Sequence[Pieces], source: str, target: str) -> BatchOutput:
        """Translate each segment: one string per segment, in order, and the notes of what the backend
        learned doing it (e.g. words it could not translate)."""
        ...

    def close(self) -> None:
        """Release processes and memory. Called once, at engine shutdown."""
        ...


def joined(pieces: Pieces) -> str:
    """The segment with each protected span written as its required output."""
    return "".join(p.output if isinstance(p, Protected) else p for p in pieces)


def spans_kept(pieces: Pieces, translation: str) -> bool:
    """True when each protected output occurs in ``translation`` at least as often as it must."""
    needed: dict[str, int] = {}
    for piece in pieces:
        if isinstance(piece, Protected):
            needed[piece.output] = needed.get(piece.output, 0) + 1
    return all(translation.count(text) >= count for text, count in needed.items())


def _split_around_spans(pieces: Pieces) -> list[str | Protected]:
    """Merge adjacent plain pieces so that text and spans alternate."""
    out: list[str | Protected] = []
    for piece in pieces:
        if isinstance(piece, str) and out and isinstance(out[-1], str):
            out[-1] = out[-1] + piece
        elif piece != "":
            out.append(piece)
    return out


def translate_protected(
    batch: Sequence[Pieces], translate_plain: Callable[[list[str]], list[str]]
) -> tuple[list[str], int]:
    """Translate ``batch`` with ``translate_plain`` (one call per pass) and keep every protected span.

    Returns the translations and how many segments needed the piecewise fallback.
    """
    first = translate_plain([joined(p) for p in batch]) if batch else []
    results = list(first)
    retry = [i for i, pieces in enumerate(batch) if not spans_kept(pieces, results[i])]
    if not retry:
        return results, 0
    # Piecewise: translate each run of text between spans on its own, keeping its outer whitespace.
    runs: list[str] = []
    plans: dict[int, list[str | Protected]] = {}
    for i in retry:
        plan = _split_around_spans(batch[i])
        plans[i] = plan
        runs.extend(p.strip() for p in plan if isinstance(p, str) and p.strip())
    unique = sorted(set(runs), key=len)
    translated = dict(zip(unique, translate_plain(unique), strict=True)) if unique else {}
    for i, plan in plans.items():
        parts: list[str] = []
        for piece in plan:
            if isinstance(piece, Protected):
                parts.append(piece.output)
            elif piece.strip():
                core = piece.strip()
                lead = piece[: len(piece) - len(piece.lstrip())]
                trail = piece[len(piece.rstrip()) :]
                parts.append(lead + translated[core] + trail)
            else:
                parts.append(piece)
        results[i] = "".join(parts)
    return results, len(retry)
