"""What the local front doors (CLI, MCP server, daemon) keep for their user: the glossary file.

The engine is stateless about users; each front door owns its users' state. Locally there is one user and
one glossary file (``DRAGOMAN_GLOSSARY``). :class:`GlossaryStore` reads and writes it, and
:meth:`GlossaryStore.resolve` turns what a request carried into the entries handed to the engine: the
request's own glossary when it has one (``[]`` for none), else every entry of the file (the engine applies,
per language pair, those scoped to it).

The file is JSON: ``{"version": 1, "entries": [{"term", "translation", "caseSensitive", "source",
"target"}]}`` (``source``/``target`` are FLORES codes or null for "any"). It is only ever replaced whole and
atomically (a temporary file in the same directory, fsync, ``os.replace``), and every change is made under
an exclusive ``fcntl.flock`` on ``<file>.lock`` next to it plus a thread lock, so front doors in several
processes adding at once lose nothing. A symlinked file is written through the link (the file it points at
is replaced, and locked, there), so the link stays a link. The lock file is left in place on purpose
(deleting it would let two writers lock different files). A file that cannot be read or parsed raises
:class:`GlossaryFileError` naming it; it is never reset or overwritten. Reads are cached by (inode,
mtime_ns, size): an unchanged file is not parsed again, a change made by another process is seen on the
next call.

Limits: the file may hold more than :data:`MAX_GLOSSARY_ENTRIES` entries in total (scoped to different
pairs), but :meth:`GlossaryStore.add` refuses, with :class:`LimitExceeded`, to grow the set that applies to
any language pair past the limit. Should a hand-edited file still exceed it, the most specific entries apply
first (:func:`dragoman.translation.glossary.for_pair`) and a warning is logged.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from dragoman.documents import partials
from dragoman.errors import GlossaryFileError, LimitExceeded, UnknownLanguage
from dragoman.languages import catalogue as languages
from dragoman.limits import MAX_GLOSSARY_ENTRIES
from dragoman.translation.glossary import for_pair, merge_entries, scope_code, validate_entries
from dragoman.translation.types import GlossaryEntry

#: The file format written (and the only one read).
FILE_VERSION = 1

_FIX = "fix it by hand (or move it aside to start a new glossary), then retry; dragoman never overwrites it"


def _applicable_counts(
    entries: Sequence[GlossaryEntry], sources: set[str], targets: set[str]
) -> dict[tuple[str, str], int]:
    """How many entries apply to each pair of ``sources`` x ``targets`` (``*`` standing for a language no
    entry is scoped to); counted by scope so that a large file costs O(entries + pairs)."""
    unscoped = 0
    by_source: dict[str, int] = {}
    by_target: dict[str, int] = {}
    by_pair: dict[tuple[str, str], int] = {}
    for e in entries:
        if e.source is None and e.target is None:
            unscoped += 1
        elif e.target is None:
            by_source[e.source or ""] = by_source.get(e.source or "", 0) + 1
        elif e.source is None:
            by_target[e.target] = by_target.get(e.target, 0) + 1
        else:
            by_pair[(e.source, e.target)] = by_pair.get((e.source, e.target), 0) + 1
    return {
        (s, t): unscoped + by_source.get(s, 0) + by_target.get(t, 0) + by_pair.get((s, t), 0)
        for s in sources | {"*"}
        for t in targets | {"*"}
    }


def _check_limit(current: Sequence[GlossaryEntry], updated: Sequence[GlossaryEntry]) -> None:
    """Refuse an update that grows the set applying to some pair past the limit (a hand-edited file that
    already exceeds it may still shrink or change elsewhere)."""
    sources = {e.source for e in updated if e.source is not None}
    targets = {e.target for e in updated if e.target is not None}
    before = _applicable_counts(current, sources, targets)
    after = _applicable_counts(updated, sources, targets)
    over = [(n, pair) for pair, n in after.items() if n > MAX_GLOSSARY_ENTRIES and n > before[pair]]
    if over:
        count, (s, t) = max(over)
        pair = f"{s}->{t}".replace("*", "any language")
        raise LimitExceeded(
            f"adding these entries would make {count} glossary entries apply to {pair}; at most "
            f"{MAX_GLOSSARY_ENTRIES} may apply to one language pair. Remove some with glossary_remove, "
            "or scope the new ones to another language pair"
        )


def _to_json(entry: GlossaryEntry) -> dict[str, Any]:
    return {
        "term": entry.term,
        "translation": entry.translation,
        "caseSensitive": entry.case_sensitive,
        "source": entry.source,
        "target": entry.target,
    }


@contextlib.contextmanager
def _file_lock(lock_path: Path) -> Iterator[None]:
    """An exclusive lock between processes (POSIX ``flock``); on Windows only the thread lock applies."""
    if sys.platform == "win32":  # pragma: no cover
        yield
        return
    import fcntl

    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


class GlossaryStore:
    """The user's glossary file; thread- and process-safe. Language codes are FLORES codes."""

    def __init__(self, path: Path) -> None:
        self._path = Path(path)
        self._thread_lock = threading.Lock()
        self._cache_lock = threading.Lock()
        self._cache: tuple[tuple[int, int, int], tuple[GlossaryEntry, ...]] | None = None
        self.parse_count = 0  # how many times the file was parsed (tests check the cache)

    @property
    def path(self) -> Path:
        return self._path

    # ----- reading -------------------------------------------------------------------------------
    def load(self) -> tuple[GlossaryEntry, ...]:
        """Every entry of the file, in file order; empty when there is no file."""
        try:
            with open(self._path, "rb") as f:
                st = os.fstat(f.fileno())
                key = (st.st_ino, st.st_mtime_ns, st.st_size)
                with self._cache_lock:
                    if self._cache is not None and self._cache[0] == key:
                        return self._cache[1]
                data = f.read()
        except FileNotFoundError:
            return ()
        except OSError as exc:
            raise GlossaryFileError(
                f"cannot read the glossary file {self._path} ({exc.strerror or exc}); check that it is a "
                "readable file, or set DRAGOMAN_GLOSSARY to another path"
            ) from exc
        entries = self._parse(data)
        with self._cache_lock:
            self._cache = (key, entries)
        return entries

    def _parse(self, data: bytes) -> tuple[GlossaryEntry, ...]:
        self.parse_count += 1
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise GlossaryFileError(
                f"the glossary file {self._path} is not valid UTF-8 JSON ({exc}); {_FIX}"
            ) from exc
        if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
            raise self._shape_error('the top level must be an object {"version": 1, "entries": [...]}')
        if doc.get("version") != FILE_VERSION:
            raise self._shape_error(
                f"version is {doc.get('version')!r}, this dragoman reads version {FILE_VERSION} "
                "(a newer dragoman may have written it: upgrade dragoman)"
            )
        entries: list[GlossaryEntry] = []
        for i, item in enumerate(doc["entries"]):
            entries.append(self._parse_entry(i, item))
        return tuple(merge_entries(entries).values())

    def _parse_entry(self, i: int, item: object) -> GlossaryEntry:
        if not isinstance(item, dict):
            raise self._shape_error(f"entries[{i}] must be an object {{term, translation, caseSensitive}}")
        term, translation = item.get("term"), item.get("translation")
        case = item.get("caseSensitive", False)
        if not isinstance(term, str) or not term.strip():
            raise self._shape_error(f"entries[{i}].term must be a non-empty string")
        if not isinstance(translation, str) or not translation.strip():
            raise self._shape_error(f"entries[{i}].translation must be a non-empty string")
        if not isinstance(case, bool):
            raise self._shape_error(f"entries[{i}].caseSensitive must be true or false")
        scope: list[str | None] = []
        for field in ("source", "target"):
            code = item.get(field)
            if code is not None and not isinstance(code, str):
                raise self._shape_error(f"entries[{i}].{field} must be a FLORES code or null")
            try:
                scope.append(languages.resolve(code) if code is not None else None)
            except UnknownLanguage as exc:
                raise self._shape_error(f"entries[{i}].{field}: {exc.message}") from exc
        return GlossaryEntry(term, translation, case, scope[0], scope[1])

    def _shape_error(self, problem: str) -> GlossaryFileError:
        return GlossaryFileError(f"the glossary file {self._path} is malformed: {problem}; {_FIX}")

    def entries(self, source: str | None = None, target: str | None = None) -> tuple[GlossaryEntry, ...]:
        """Entries whose scope matches: all without arguments; with ``source`` and/or ``target``, the
        entries scoped to them plus the unscoped ones (what a translation between them would apply)."""
        return tuple(
            e
            for e in self.load()
            if (source is None or e.source is None or e.source == source)
            and (target is None or e.target is None or e.target == target)
        )

    def for_pair(self, source: str, target: str) -> tuple[GlossaryEntry, ...]:
        """The entries of the file a translation from ``source`` to ``target`` applies (at most 200, most
        specific first when a hand-edited file holds more)."""
        return for_pair(self.load(), source, target)

    def resolve(self, requested: Sequence[GlossaryEntry] | None) -> tuple[GlossaryEntry, ...]:
        """The entries a request hands the engine: its own glossary when it carries one (``[]``: none),
        else every entry of the file (the engine applies, per language pair, those scoped to it)."""
        return tuple(requested) if requested is not None else self.load()

    # ----- writing -------------------------------------------------------------------------------
    def add(
        self, entries: Sequence[GlossaryEntry], source: str | None = None, target: str | None = None
    ) -> tuple[GlossaryEntry, ...]:
        """Add or replace entries, scoped to ``source``/``target`` when given (overriding the entries' own
        scope); returns the whole new glossary. Raises LimitExceeded rather than let more than 200
        entries apply to one language pair."""
        source, target = scope_code(source, "source"), scope_code(target, "target")
        if source is not None or target is not None:
            entries = [
                dataclasses.replace(e, source=source or e.source, target=target or e.target) for e in entries
            ]
        new = validate_entries(entries)
        with self._locked():
            current = self.load()
            updated = tuple(merge_entries((*current, *new)).values())
            _check_limit(current, updated)
            if updated != current:
                self._write(updated)
            return updated

    def remove(self, terms: Iterable[str], source: str | None = None, target: str | None = None) -> int:
        """Remove the entries with these terms in exactly this scope (unscoped ones when none is given).
        A case-insensitive entry matches a term in any case; a case-sensitive one only exactly."""
        source, target = scope_code(source, "source"), scope_code(target, "target")
        if isinstance(terms, str):
            terms = [terms]
        exact = set(terms)
        folded = {t.casefold() for t in exact}

        def matches(e: GlossaryEntry) -> bool:
            if (e.source, e.target) != (source, target):
                return False
            return e.term in exact if e.case_sensitive else e.term.casefold() in folded

        with self._locked():
            current = self.load()
            kept = tuple(e for e in current if not matches(e))
            if len(kept) != len(current):
                self._write(kept)
            return len(current) - len(kept)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            target = self._target()
            target.parent.mkdir(parents=True, exist_ok=True)
            with self._thread_lock, _file_lock(target.with_name(target.name + ".lock")):
                yield
        except OSError as exc:
            raise GlossaryFileError(
                f"cannot lock or write the glossary file {self._path} ({exc.strerror or exc}); check the "
                "directory's permissions and free space, or set DRAGOMAN_GLOSSARY to another path"
            ) from exc

    def _target(self) -> Path:
        """The file actually written: the configured path with symlinks followed, so a linked glossary (kept
        in a dotfiles repository, say) is updated where it lives and the link stays a link."""
        return Path(os.path.realpath(self._path))

    def _write(self, entries: Sequence[GlossaryEntry]) -> None:
        """Replace the file atomically; on any failure the previous file stays as it was. A new file gets
        the umask's mode, an existing one keeps its mode; a temporary left by a killed process is removed
        by the next start (:mod:`dragoman.documents.partials`)."""
        doc = {"version": FILE_VERSION, "entries": [_to_json(e) for e in entries]}
        data = (json.dumps(doc, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
        target = self._target()
        tmp = partials.create(target)
        try:
            new_mode = partials.created_mode(tmp)
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, partials.mode_for(target, new_mode))
            os.replace(tmp, target)
        finally:
            partials.discard(tmp)
        _fsync_dir(target.parent)
        st = os.stat(target)
        with self._cache_lock:
            self._cache = ((st.st_ino, st.st_mtime_ns, st.st_size), tuple(entries))


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable; some file systems refuse to open directories, which is harmless."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
