"""What a kind of model (MT packs now; speech models and voices later) supplies to the generic store.

The store (:mod:`dragoman.models.store`), the installer (:mod:`dragoman.models.install`) and safe
extraction (:mod:`dragoman.models.extract`) know nothing of any kind's files: a :class:`ModelKind` says how to
read and check one installed model (its structural check, raising ``PackIntegrityError``), how to show it
(its info), which files mark a model's top directory inside an archive, and how to name it in messages.
Every kind then installs from a file, a directory, a URL or its index, is hashed into an install record,
verified and removed the same way. MT packs are :data:`dragoman.models.packs.MT`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar


class Manifest(Protocol):
    """What the store needs of any kind's manifest: the model's id (its directory name) and version."""

    @property
    def id(self) -> str: ...

    @property
    def version(self) -> str: ...


M = TypeVar("M", bound=Manifest)
I = TypeVar("I")  # noqa: E741 - the kind's info type, as M is its manifest type


@dataclass(frozen=True)
class ModelKind(Generic[M, I]):
    """One kind of installable model.

    ``read`` checks a directory's structure without loading the model and returns its manifest, raising
    ``PackIntegrityError`` when the directory is not a model of this kind. ``info`` is the status view of an
    installed model. ``markers`` are file names found at a model's top: an archive whose root holds none of
    them but a single directory is taken to hold the model in that directory. ``noun`` and ``command``
    word the messages (``pack``, ``dragoman packs``).
    """

    name: str
    noun: str
    read: Callable[[Path], M]
    info: Callable[[M, Path], I]
    markers: tuple[str, ...]
    command: str
    install_hint: str = ""

    def hint(self) -> str:
        """How to install one, for 'not installed' messages."""
        return self.install_hint or f"install one with `{self.command} install PATH_OR_URL`"
