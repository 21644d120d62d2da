"""The packs an engine can use, and the backends it has loaded: each pack loads once per process.

Installed CTranslate2 packs come from the pack store (the user data directory); Apertium pairs come from the
system's ``.mode`` files. Backends live in a :class:`dragoman.models.cache.ModelCache`: loaded on first use,
under a per-pack lock so that concurrent first calls load once, unloaded when the memory budget needs room
(``DRAGOMAN_MODEL_MEMORY_BUDGET``) or after ``DRAGOMAN_MODEL_IDLE_SECONDS`` unused, and never while a call
holds one with :meth:`PackCache.use`.

The list of packs is re-read when the packs directory or an Apertium modes directory changes (an install,
``--replace`` or remove from another process, an ``apt-get install`` of a pair); the route edges and the
routes found between languages are kept with it, so that a call costs a few ``stat`` calls. Each pack carries
an install identity (its directory's inode and times, its install record's, its manifest): a backend whose
pack was replaced or removed is closed and dropped at the next call, which then loads what is on disk now,
or finds the pack gone (UnsupportedPair from routing, PackNotInstalled from :meth:`PackCache.backend`).
A pack directory that cannot be read is not a usable pack: the store lists it as broken, routing skips it.
Creating a cache (an engine's start) sweeps what killed installs left in the packs directory.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from dragoman.errors import BackendError, PackNotInstalled
from dragoman.limits import Tier
from dragoman.models.cache import CacheEntry, ModelCache
from dragoman.models.manifest import DEFAULT_RANKS, PackManifest
from dragoman.models.packs import PackStore, pack_info
from dragoman.models.store import dir_size, install_identity, sweep_stale
from dragoman.models.types import PackInfo
from dragoman.settings import Settings
from dragoman.translation.backends._apertium_pipeline import PipelinePool
from dragoman.translation.backends.apertium import ApertiumBackend, ApertiumMode, discover_modes
from dragoman.translation.backends.base import Backend
from dragoman.translation.backends.ctranslate2_backend import CTranslate2Backend, compute_device
from dragoman.translation.routing import find_routes
from dragoman.translation.types import Hop, Route

log = logging.getLogger("dragoman.translation")


@dataclass(frozen=True)
class _Entry:
    """One usable pack: a CTranslate2 pack on disk or an Apertium mode, and what identifies its install."""

    id: str
    manifest: PackManifest | None
    path: Path
    mode: ApertiumMode | None = None
    identity: Hashable = ()


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


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _mode_identity(mode: ApertiumMode) -> Hashable:
    try:
        st = mode.path.stat()
    except OSError:
        return (mode,)
    return (mode, st.st_ino, st.st_mtime_ns, st.st_size)


class PackCache:
    """Usable packs and loaded backends for one engine. Thread-safe."""

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Callable[[], float] = time.monotonic,
        reap_every: float | None = None,
    ) -> None:
        self._settings = settings
        #: Set once a GPU chosen by DRAGOMAN_DEVICE=auto failed to run a pack: later packs go to the CPU.
        self._cuda_unusable = False
        self._store = PackStore(settings)
        sweep_stale(self._store.root)  # staging folders of installs killed earlier; never raises or waits
        self._lock = threading.Lock()
        self._backends: ModelCache[Backend] = ModelCache(
            budget_bytes=settings.engine.model_memory_budget,
            idle_seconds=settings.engine.model_idle_seconds,
            clock=clock,
            reap_every=reap_every,
            name="pack",
        )
        # Apertium pipelines: at most this many running, idle ones closed (issue 9, item 4)
        self._pipelines = PipelinePool(
            settings.engine.apertium_max_pipelines, settings.engine.apertium_idle_seconds
        )
        self._snapshot = _Snapshot({}, ())
        self._stamp: tuple[int, ...] | None = None
        self._modes: list[ApertiumMode] | None = None
        self._modes_stamp: tuple[int, ...] | None = None

    @property
    def store(self) -> PackStore:
        return self._store

    @property
    def backends(self) -> ModelCache[Backend]:
        """The loaded backends (budget, idle time, what is loaded)."""
        return self._backends

    def _modes_dirs_stamp(self) -> tuple[int, ...]:
        if not self._settings.engine.apertium_enabled:
            return ()
        return tuple(_mtime(d) for d in self._settings.engine.apertium_modes_dirs)

    def _packs_stamp(self) -> tuple[int, ...]:
        return (_mtime(self._settings.engine.packs_dir), *self._modes_dirs_stamp())

    def apertium_modes(self) -> list[ApertiumMode]:
        """The Apertium modes installed on the system, found again when a modes directory changes."""
        if not self._settings.engine.apertium_enabled:
            return []
        stamp = self._modes_dirs_stamp()
        if self._modes is None or stamp != self._modes_stamp:
            self._modes = discover_modes(self._settings.engine.apertium_modes_dirs)
            self._modes_stamp = stamp
        return self._modes

    def _read(self) -> dict[str, _Entry]:
        entries: dict[str, _Entry] = {}
        for mode in self.apertium_modes():
            if mode.is_pack:
                entries[mode.pack_id] = _Entry(mode.pack_id, None, mode.path, mode, _mode_identity(mode))
        for manifest, path in self._store.installed():
            entries[manifest.id] = _Entry(
                manifest.id, manifest, path, None, (manifest, install_identity(path))
            )
        return entries

    def _current(self) -> _Snapshot:
        """The snapshot of the packs as they are now, re-read when a directory has changed.

        A re-read also unloads the backends of packs that were removed or replaced since they loaded.
        """
        stamp = self._packs_stamp()
        with self._lock:
            if stamp == self._stamp:
                return self._snapshot
            entries = self._read()
            self._snapshot = _Snapshot(entries, _edges(entries))
            self._stamp = stamp
            snapshot = self._snapshot
        self._backends.forget_changed({key: entry.identity for key, entry in entries.items()})
        return snapshot

    def entries(self) -> dict[str, _Entry]:
        """Every usable pack by id, re-read when the packs directory has changed."""
        return self._current().entries

    def refresh(self) -> None:
        """Read the packs and Apertium modes afresh at the next call, whatever the directories' times say."""
        with self._lock:
            self._stamp = None
            self._modes = None

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

    def _entry(self, pack_id: str) -> _Entry:
        entries = self.entries()
        entry = entries.get(pack_id)
        if entry is None:
            raise PackNotInstalled(
                f"pack {pack_id!r} is not installed; installed: {', '.join(sorted(entries)) or 'none'}"
            )
        return entry

    def _load(self, entry: _Entry) -> Backend:
        if entry.mode is not None:
            log.info("starting Apertium pipeline %s", entry.id)
            return ApertiumBackend(entry.mode, pool=self._pipelines)
        assert entry.manifest is not None
        log.info("loading pack %s from %s", entry.id, entry.path)
        engine = self._settings.engine
        device = "cpu" if self._cuda_unusable else compute_device(engine.device)
        backend = CTranslate2Backend.load(
            entry.manifest,
            entry.path,
            device=device,
            # On a GPU one replica per device: parallel calls would only queue on it, batches fill it.
            inter_threads=1 if device == "cuda" else engine.inter_threads,
            intra_threads=engine.intra_threads,
        )
        if device == "cuda":
            try:
                backend.smoke_test()
            except BackendError as exc:
                backend.close()
                if engine.device == "cuda":  # asked for by name: say so rather than run elsewhere
                    raise
                log.warning("the GPU cannot run packs (%s); packs run on the CPU", exc.message)
                self._cuda_unusable = True
                return self._load(entry)
        return backend

    @staticmethod
    def _size(entry: _Entry) -> Callable[[], int]:
        """A backend's memory estimate: a CTranslate2 pack's files (its weights load whole); Apertium
        pipelines run as separate processes and are not counted against the budget."""
        return lambda: 0 if entry.mode is not None else dir_size(entry.path)

    def backend(self, pack_id: str) -> Backend:
        """The loaded backend of a pack, loading it on first use (once, whoever asks first).

        Not held in use: a call that may run while the budget or idle time unloads should use :meth:`use`.
        """
        entry = self._entry(pack_id)
        return self._backends.get(
            pack_id, lambda: self._load(entry), identity=entry.identity, size=self._size(entry)
        )

    @contextlib.contextmanager
    def use(self, pack_id: str) -> Iterator[Backend]:
        """The loaded backend of a pack, held in use inside the block (not unloaded until it ends)."""
        entry = self._entry(pack_id)
        with self._backends.lease(
            pack_id, lambda: self._load(entry), identity=entry.identity, size=self._size(entry)
        ) as backend:
            yield backend

    def loaded_ids(self) -> set[str]:
        return self._backends.keys()

    def loaded(self) -> list[CacheEntry]:
        """The loaded backends with their estimated sizes, users and idle time."""
        return self._backends.entries()

    def evict_idle(self) -> list[str]:
        """Unload the backends unused for ``DRAGOMAN_MODEL_IDLE_SECONDS`` (a background thread also does)."""
        return self._backends.evict_idle()

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
        """Unload a pack now (closed when its last user is done) and read the packs afresh next call."""
        with self._lock:
            self._stamp = None
        self._backends.forget(pack_id)

    def close(self) -> None:
        self._backends.close()
        self._pipelines.close()
