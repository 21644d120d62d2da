"""The packs an engine can use, and the backends it has loaded: each pack loads once per process.

Installed CTranslate2 packs come from the pack store (the user data directory); Apertium pairs come from the
system's ``.mode`` files. A backend is loaded on first use, under a per-pack lock so that concurrent first
calls load it once, and kept for the life of the engine. The list of packs is re-read when the packs
directory changes (an install from another process), without unloading what is loaded; the route edges and
the routes found between languages are kept with it, so that a call costs one ``stat`` of the directory.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

from dragoman.errors import PackNotInstalled
from dragoman.limits import Tier
from dragoman.models.manifest import DEFAULT_RANKS, PackManifest
from dragoman.models.store import PackStore, pack_info
from dragoman.models.types import PackInfo
from dragoman.settings import Settings
from dragoman.translation.backends.apertium import ApertiumBackend, ApertiumMode, discover_modes
from dragoman.translation.backends.base import Backend
from dragoman.translation.backends.ctranslate2_backend import CTranslate2Backend
from dragoman.translation.routing import find_routes
from dragoman.translation.types import Hop, Route

log = logging.getLogger("dragoman.translation")


@dataclass(frozen=True)
class _Entry:
    """One usable pack: a CTranslate2 pack on disk or an Apertium mode."""

    id: str
    manifest: PackManifest | None
    path: Path
    mode: ApertiumMode | None = None


@dataclass(frozen=True)
class _Snapshot:
    """The usable packs as of one state of the packs directory, their route edges, and routes found."""

    entries: dict[str, _Entry]
    edges: tuple[Hop, ...]
    routes: dict[tuple[str, str, Tier], tuple[Route, ...]] = field(default_factory=dict)


def _edges(entries: dict[str, _Entry]) -> tuple[Hop, ...]:
    hops: list[Hop] = []
    for entry in entries.values():
        if entry.mode is not None:
            quality, speed = DEFAULT_RANKS["apertium"]
            hops.append(Hop(entry.id, "apertium", entry.mode.source, entry.mode.target, quality, speed))
        elif entry.manifest is not None:
            m = entry.manifest
            hops.extend(Hop(m.id, m.kind, s, t, m.quality, m.speed) for s, t in m.pairs)
    return tuple(hops)


class PackRegistry:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._store = PackStore(settings)
        self._lock = threading.Lock()
        self._load_locks: dict[str, threading.Lock] = {}
        self._backends: dict[str, Backend] = {}
        self._snapshot = _Snapshot({}, ())
        self._stamp: tuple[int, ...] | None = None
        self._modes: list[ApertiumMode] | None = None

    @property
    def store(self) -> PackStore:
        return self._store

    def _packs_stamp(self) -> tuple[int, ...]:
        root = self._settings.packs_dir
        try:
            return (root.stat().st_mtime_ns,)
        except FileNotFoundError:
            return (0,)

    def apertium_modes(self) -> list[ApertiumMode]:
        if not self._settings.apertium_enabled:
            return []
        if self._modes is None:
            self._modes = discover_modes(self._settings.apertium_modes_dirs)
        return self._modes

    def _current(self) -> _Snapshot:
        """The snapshot of the packs directory as it is now, re-read when the directory has changed."""
        stamp = self._packs_stamp()
        with self._lock:
            if stamp != self._stamp:
                entries: dict[str, _Entry] = {}
                for mode in self.apertium_modes():
                    if mode.variant is None:
                        entries[mode.pack_id] = _Entry(mode.pack_id, None, mode.path, mode)
                for manifest, path in self._store.list():
                    entries[manifest.id] = _Entry(manifest.id, manifest, path)
                self._snapshot = _Snapshot(entries, _edges(entries))
                self._stamp = stamp
            return self._snapshot

    def entries(self) -> dict[str, _Entry]:
        """Every usable pack by id, re-read when the packs directory has changed."""
        return self._current().entries

    def refresh(self) -> None:
        with self._lock:
            self._stamp = None

    def edges(self) -> list[Hop]:
        return list(self._current().edges)

    def routes(self, source: str, target: str, tier: Tier = "best") -> tuple[Route, ...]:
        """:func:`find_routes` over the installed packs, best first; cached until the packs change."""
        snapshot = self._current()
        key = (source, target, tier)
        found = snapshot.routes.get(key)
        if found is None:  # two threads may both search; they find the same routes
            found = tuple(find_routes(snapshot.edges, source, target, tier))
            snapshot.routes[key] = found
        return found

    def backend(self, pack_id: str) -> Backend:
        """The loaded backend of a pack, loading it on first use (once, whoever asks first)."""
        loaded = self._backends.get(pack_id)
        if loaded is not None:
            return loaded
        with self._lock:
            lock = self._load_locks.setdefault(pack_id, threading.Lock())
        with lock:
            loaded = self._backends.get(pack_id)
            if loaded is not None:
                return loaded
            entry = self.entries().get(pack_id)
            if entry is None:
                raise PackNotInstalled(
                    f"pack {pack_id!r} is not installed; "
                    f"installed: {', '.join(sorted(self.entries())) or 'none'}"
                )
            backend: Backend
            if entry.mode is not None:
                log.info("starting Apertium pipeline %s", pack_id)
                backend = ApertiumBackend(entry.mode)
            else:
                assert entry.manifest is not None
                log.info("loading pack %s from %s", pack_id, entry.path)
                backend = CTranslate2Backend.load(
                    entry.manifest,
                    entry.path,
                    inter_threads=self._settings.inter_threads,
                    intra_threads=self._settings.intra_threads,
                )
            self._backends[pack_id] = backend
            return backend

    def loaded_ids(self) -> set[str]:
        return set(self._backends)

    def infos(self) -> list[PackInfo]:
        loaded = self.loaded_ids()
        infos: list[PackInfo] = []
        for entry in sorted(self.entries().values(), key=lambda e: e.id):
            if entry.mode is not None:
                mode = entry.mode
                quality, speed = DEFAULT_RANKS["apertium"]
                infos.append(
                    PackInfo(
                        id=entry.id,
                        kind="apertium",
                        languages=(mode.source, mode.target),
                        pairs=((mode.source, mode.target),),
                        path=str(mode.path),
                        size_bytes=0,
                        version="system",
                        license="GPL-2.0 (Apertium language data)",
                        quality=quality,
                        speed=speed,
                        loaded=entry.id in loaded,
                    )
                )
                continue
            assert entry.manifest is not None
            info = pack_info(entry.manifest, entry.path, loaded=entry.id in loaded)
            # A multilingual pack's pairs are every ordered pair of its languages: its languages say it all.
            infos.append(replace(info, pairs=()) if entry.manifest.kind == "multilingual" else info)
        return infos

    def forget(self, pack_id: str) -> None:
        """Unload a pack (after it was removed or replaced on disk)."""
        with self._lock:
            backend = self._backends.pop(pack_id, None)
            self._stamp = None
        if backend is not None:
            backend.close()

    def close(self) -> None:
        with self._lock:
            backends = list(self._backends.values())
            self._backends.clear()
        for backend in backends:
            backend.close()
