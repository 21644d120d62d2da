"""Load heavy models once per process, keep them while they are used, unload them when they are not.

A :class:`ModelCache` maps a model id to a loaded model (anything with ``close()``: a translation backend,
later a speech recogniser or a voice). The first call for an id loads it under a lock of its own, so that
concurrent first calls load once while other ids load in parallel; later calls get the same object.

What is loaded can be unloaded:

* **memory budget** (``budget_bytes``, 0 for none): each entry carries an estimated size; before a model
  loads, the least recently used entries are closed until it fits. An entry that is in use (leased with
  :meth:`ModelCache.lease`) is never closed for room; when nothing more can go, the model loads anyway
  over budget, with a warning, rather than failing a request.
* **idle unloading** (``idle_seconds``, 0 for never): entries unused that long are closed by
  :meth:`ModelCache.evict_idle`, which a background thread calls (``reap_every`` seconds) and tests call
  with an injected clock.
* **forget** (:meth:`ModelCache.forget`, :meth:`ModelCache.forget_changed`): a model replaced or removed on
  disk is dropped, so the next call loads what is there now. Each entry remembers the identity it was
  loaded with (an install identity); a call asking for another identity reloads.

Closing waits for the last lease: an entry dropped while leased leaves the cache at once (new calls load
afresh) and is closed when its last user is done. Entries handed out by :meth:`ModelCache.get` are not
leased, so only a lease protects a model from the budget and the idle reaper.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

log = logging.getLogger("dragoman.models.cache")


class Closeable(Protocol):
    def close(self) -> None: ...


V = TypeVar("V", bound=Closeable)
#: A model's estimated size in bytes, or a function giving it when the model loads.
Size = int | Callable[[], int] | None


@dataclass(eq=False)
class _Slot(Generic[V]):
    value: V
    size: int
    identity: Hashable
    last_used: float
    leases: int = 0
    retired: bool = False  # dropped while leased: closed when the last lease ends


@dataclass(frozen=True)
class CacheEntry:
    """A loaded model as status shows it."""

    id: str
    size_bytes: int
    in_use: int
    idle_seconds: float


def _close(key: str, value: Closeable) -> None:
    try:
        value.close()
    except Exception:  # a close that fails must not break the call that made room
        log.exception("closing model %s failed", key)


class ModelCache(Generic[V]):
    """Models by id, loaded once, unloaded by budget, idle time or :meth:`forget`. Thread-safe."""

    def __init__(
        self,
        *,
        budget_bytes: int = 0,
        idle_seconds: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        reap_every: float | None = None,
        name: str = "models",
    ) -> None:
        self.budget_bytes = max(0, budget_bytes)
        self.idle_seconds = max(0.0, idle_seconds)
        self.name = name
        self._clock = clock
        self._reap_every = (
            reap_every if reap_every is not None else min(60.0, max(1.0, self.idle_seconds / 4))
        )
        self._lock = threading.Lock()
        self._load_locks: dict[str, threading.Lock] = {}
        self._slots: dict[str, _Slot[V]] = {}
        self._reaper: threading.Thread | None = None
        self._stop = threading.Event()

    # ----- getting models ------------------------------------------------------------------------
    def get(self, key: str, load: Callable[[], V], *, identity: Hashable = None, size: Size = None) -> V:
        """The model ``key``, loaded with ``load()`` if it is not loaded with this ``identity``.

        ``size`` is the model's estimated memory in bytes, or a function giving it, asked only when the
        model loads (before loading, so that room is made first).
        The model is not leased: use :meth:`lease` while calling it if budget or idle eviction may run.
        """
        return self._acquire(key, load, identity, size, lease=False).value

    @contextlib.contextmanager
    def lease(
        self, key: str, load: Callable[[], V], *, identity: Hashable = None, size: Size = None
    ) -> Iterator[V]:
        """As :meth:`get`, holding the model in use (never evicted, closing deferred) inside the block."""
        slot = self._acquire(key, load, identity, size, lease=True)
        try:
            yield slot.value
        finally:
            self._release(key, slot)

    def _hit(self, key: str, identity: Hashable, lease: bool) -> _Slot[V] | None:
        with self._lock:
            slot = self._slots.get(key)
            if slot is None or slot.identity != identity:
                return None
            slot.last_used = self._clock()
            if lease:
                slot.leases += 1
            return slot

    def _acquire(
        self, key: str, load: Callable[[], V], identity: Hashable, size: Size, lease: bool
    ) -> _Slot[V]:
        slot = self._hit(key, identity, lease)
        if slot is not None:
            return slot
        with self._lock:
            key_lock = self._load_locks.setdefault(key, threading.Lock())
        with key_lock:
            slot = self._hit(key, identity, lease)
            if slot is not None:
                return slot
            self.forget(key)  # loaded with another identity: replaced on disk
            estimate = max(0, (size() if callable(size) else size) or 0)
            self._make_room(key, estimate)
            value = load()
            with self._lock:
                slot = _Slot(value, estimate, identity, self._clock(), leases=1 if lease else 0)
                self._slots[key] = slot
        self._start_reaper()
        return slot

    def _release(self, key: str, slot: _Slot[V]) -> None:
        with self._lock:
            slot.leases -= 1
            slot.last_used = self._clock()
            closing = slot.retired and slot.leases == 0
        if closing:
            log.info("closing %s %s (dropped while in use)", self.name, key)
            _close(key, slot.value)

    # ----- unloading -----------------------------------------------------------------------------
    def _drop(self, keys: list[str]) -> list[tuple[str, V]]:
        """Take ``keys`` out of the cache (lock held); returns those to close now (not leased)."""
        closing: list[tuple[str, V]] = []
        for key in keys:
            slot = self._slots.pop(key, None)
            if slot is None:
                continue
            if slot.leases:
                slot.retired = True
            else:
                closing.append((key, slot.value))
        return closing

    def _make_room(self, key: str, needed: int) -> None:
        if not self.budget_bytes:
            return
        with self._lock:
            used = sum(s.size for k, s in self._slots.items() if k != key)
            victims: list[str] = []
            idle = sorted(
                (s.last_used, k) for k, s in self._slots.items() if k != key and not s.leases and s.size
            )
            for _, victim in idle:
                if used + needed <= self.budget_bytes:
                    break
                victims.append(victim)
                used -= self._slots[victim].size
            closing = self._drop(victims)
        if used + needed > self.budget_bytes:
            log.warning(
                "loading %s %s (%d bytes) goes over the memory budget (%d bytes; %d in use by models "
                "that are busy)",
                self.name,
                key,
                needed,
                self.budget_bytes,
                used,
            )
        for victim, value in closing:
            log.info("unloading %s %s to stay within the memory budget", self.name, victim)
            _close(victim, value)

    def forget(self, key: str) -> bool:
        """Drop ``key`` (closed now, or when its last lease ends); the next call loads it again."""
        with self._lock:
            present = key in self._slots
            closing = self._drop([key])
        for victim, value in closing:
            log.info("unloading %s %s", self.name, victim)
            _close(victim, value)
        return present

    def forget_changed(self, identities: Mapping[str, Hashable]) -> list[str]:
        """Drop every loaded model whose id is not in ``identities`` or was loaded with another identity.

        Call it with the identities of what is installed now: what was removed or replaced is unloaded.
        """
        with self._lock:
            stale = [k for k, s in self._slots.items() if k not in identities or identities[k] != s.identity]
            closing = self._drop(stale)
        for victim, value in closing:
            log.info("unloading %s %s: removed or replaced on disk", self.name, victim)
            _close(victim, value)
        return stale

    def evict_idle(self) -> list[str]:
        """Close the models unused (and not leased) for ``idle_seconds``; returns their ids."""
        if not self.idle_seconds:
            return []
        now = self._clock()
        with self._lock:
            stale = [
                k for k, s in self._slots.items() if not s.leases and now - s.last_used >= self.idle_seconds
            ]
            closing = self._drop(stale)
        for victim, value in closing:
            log.info("unloading %s %s: unused for %.0f s", self.name, victim, self.idle_seconds)
            _close(victim, value)
        return stale

    def close(self) -> None:
        """Close every model (leased ones too: the process is shutting down) and stop the reaper."""
        with self._lock:
            self._stop.set()
            slots = list(self._slots.items())
            self._slots.clear()
            reaper, self._reaper = self._reaper, None
        for key, slot in slots:
            _close(key, slot.value)
        if reaper is not None and reaper is not threading.current_thread():
            reaper.join(timeout=5)

    # ----- the reaper ----------------------------------------------------------------------------
    def _start_reaper(self) -> None:
        if not self.idle_seconds or self._reap_every <= 0:
            return
        with self._lock:
            if self._reaper is not None and self._reaper.is_alive():
                return
            self._stop = threading.Event()
            self._reaper = threading.Thread(
                target=_reap,
                args=(weakref.ref(self), self._stop, self._reap_every),
                name=f"dragoman-{self.name}-reaper",
                daemon=True,
            )
            self._reaper.start()

    # ----- looking -------------------------------------------------------------------------------
    def keys(self) -> set[str]:
        with self._lock:
            return set(self._slots)

    def peek(self, key: str) -> V | None:
        """The loaded model ``key`` or None; neither loads nor counts as a use."""
        with self._lock:
            slot = self._slots.get(key)
            return slot.value if slot is not None else None

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._slots

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return sum(s.size for s in self._slots.values())

    def entries(self) -> list[CacheEntry]:
        now = self._clock()
        with self._lock:
            return [
                CacheEntry(k, s.size, s.leases, round(max(0.0, now - s.last_used), 3))
                for k, s in sorted(self._slots.items())
            ]


def _reap(ref: weakref.ReferenceType[ModelCache[V]], stop: threading.Event, every: float) -> None:
    """The reaper thread: evict idle models every ``every`` seconds until stopped or the cache is gone."""
    while not stop.wait(every):
        cache = ref()
        if cache is None:
            return
        try:
            cache.evict_idle()
        except Exception:
            log.exception("unloading idle models failed")
        del cache
