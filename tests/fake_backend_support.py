"""Fake translation backends for the engine's tests (issue 11): they do what models do to a segment. ``shout``
upper-cases every word it is free to change (so code the engine did not protect shows up); ``capitalise``
capitalises the first word of each segment and changes nothing else (so a capital the engine let through
shows up). ``fake_engine`` runs one in the tiny Argos pack's place; ``RUNNING_CODE`` is code written in
running text, and ``assert_code_kept`` checks that a translation holds each piece as written."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from dragoman.settings import Settings
from dragoman.translation.engine import Engine
from dragoman.translation.types import BatchOutput, Pieces, Protected

Backend = Callable[[Sequence[Pieces], str, str], BatchOutput]


def shout(batch: Sequence[Pieces], source: str, target: str) -> BatchOutput:
    """Every word the backend is free to change, upper-cased; protected spans as they are."""
    return BatchOutput(
        tuple(
            "".join(p.output if isinstance(p, Protected) else p.upper() for p in pieces) for pieces in batch
        )
    )


def capitalise(batch: Sequence[Pieces], source: str, target: str) -> BatchOutput:
    """Each segment as it came, but its first letter outside the protected spans capitalised."""
    out = []
    for pieces in batch:
        parts, done = [], False
        for piece in pieces:
            if isinstance(piece, Protected):
                parts.append(piece.output)
                continue
            i = next((n for n, c in enumerate(piece) if c.isalpha()), None)
            if not done and i is not None:
                piece, done = piece[:i] + piece[i].upper() + piece[i + 1 :], True
            parts.append(piece)
        out.append("".join(parts))
    return BatchOutput(tuple(out))


@contextmanager
def fake_engine(packs_dir: Path, tiny_argos_pack: Path, backend: Backend) -> Iterator[Engine]:
    """An engine over the tiny English→Spanish Argos pack (copied into ``packs_dir``, no Apertium) whose
    backend translates with ``backend``."""
    shutil.copytree(tiny_argos_pack, packs_dir / "translate-en_es", dirs_exist_ok=True)
    settings = Settings.from_env({"DRAGOMAN_PACKS_DIR": str(packs_dir), "DRAGOMAN_APERTIUM": "0"})
    with Engine(settings) as engine:
        engine.pack_cache.backend("argos-en-es").translate_batch = backend  # type: ignore[method-assign, assignment]
        yield engine


RUNNING_CODE = (
    "c.setFillColor(blue)",
    "dpkg --get-selections > file",
    "/usr/share/doc/",
    "ASN1_SUCCESS",
    "make install",
    "os.path.join",
    "std::vector",
)
"""Code in running text (identifiers, commands, paths, constants) that must come back as written."""


def assert_code_kept(out: str, codes: Iterable[str], *, where: object = None) -> None:
    """Each of ``codes`` stands in ``out`` as written (``where`` goes into the failure's message)."""
    for code in codes:
        assert code in out, (where, code, out)
