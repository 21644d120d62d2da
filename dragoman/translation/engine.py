"""The engine every front door shares: resolve, detect, segment, protect, route, translate, guard.

One :class:`Engine` per process. It loads each pack once (see ``pack_cache``), is safe to
call from many threads, and stamps every result with its provenance ('on-device' locally, 'server' when
hosted). A batch makes one pass per route over its deduplicated, length-sorted segments.

The engine is stateless about users: what a call needs comes in its :class:`TranslateOptions` (target,
source, tier, glossary entries) and its optional :class:`~dragoman.progress.JobContext` (progress,
cancellation, deadline), and each result echoes the options as they were taken. Two tenants of one process
share the engine, never each other's terms.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from dragoman.errors import InvalidRequest, LimitExceeded, UnsupportedPair
from dragoman.languages.catalogue import all_languages, get, known_languages, resolve
from dragoman.languages.detection import Detector
from dragoman.languages.types import Detection, Language
from dragoman.limits import MAX_BATCH_TEXTS, MAX_TEXT_CHARS, TIERS, Provenance, Tier
from dragoman.models.types import PackInfo
from dragoman.progress import JobContext
from dragoman.settings import Settings
from dragoman.translation import guards
from dragoman.translation.backends.apertium import apertium_status
from dragoman.translation.backends.ctranslate2_backend import cpu_support
from dragoman.translation.batcher import Batcher, BatchLimits
from dragoman.translation.case import match_first_case
from dragoman.translation.glossary import for_pair as glossary_for_pair
from dragoman.translation.glossary import validate_entries
from dragoman.translation.pack_cache import PackCache
from dragoman.translation.protection import protect
from dragoman.translation.routing import reachable_pairs
from dragoman.translation.segmentation import Segmented, segment, split_to_limit
from dragoman.translation.types import (
    GlossaryEntry,
    Pieces,
    Protected,
    Route,
    TranslateOptions,
    TranslationResult,
    add_notes,
)

log = logging.getLogger("dragoman.translation")

FALLBACK_SOURCE = "eng_Latn"
#: Segments per backend call: big enough to batch well, small enough for progress and cancellation.
CHUNK_SEGMENTS = 256
#: Characters per backend call (the segments of one call add up to at most this, but a single segment):
#: a backend call cannot be interrupted, so this bounds how long cancellation or a deadline waits.
CHUNK_CHARS = 16_000
#: A segment longer than this (a text with no sentence boundary) is cut, between its protected spans, into
#: parts of at most this many characters (a span longer than this stays whole), translated as segments of
#: their own and joined again: one 1 MB "sentence" is many small units of work, not one that cannot stop.
MAX_SEGMENT_CHARS = 4_000
#: Segments protected, guarded or re-marked between two checks of the context (each a few microseconds).
CHECK_EVERY = 256


def _check(context: JobContext | None) -> None:
    """Stop here (:class:`~dragoman.errors.Cancelled` or :class:`~dragoman.errors.EngineTimeout`) once the
    work is cancelled or past its deadline: called between every small unit of CPU work, not only between
    backend calls, so a 1 MB text stops within one unit (a text segmented, 256 segments protected)."""
    if context is not None:
        context.check()


@dataclass
class _Group:
    """The texts of one batch that share a source language, on their way through one route."""

    source: str
    indexes: list[int] = field(default_factory=list)
    layouts: list[list[Segmented]] = field(default_factory=list)
    warnings: dict[int, list[str]] = field(default_factory=dict)


def _note(pack_id: str, code: str, count: int) -> str:
    """A result warning for what a backend noted while translating one hop."""
    if code == "unknown_words":
        return f"unknown_words: {pack_id} left {count} word(s) it does not know untranslated"
    if code == "untranslated_segments":
        return (
            f"untranslated_segments: {pack_id} broke on {count} segment(s) (a stage crashed or answered "
            "nothing); they are left as written"
        )
    return f"{code}: {pack_id} reported {count}"


def _pieces_len(pieces: Pieces) -> int:
    return sum(len(p.source) if isinstance(p, Protected) else len(p) for p in pieces)


def _split_long(pieces: Pieces, limit: int = MAX_SEGMENT_CHARS) -> list[Pieces]:
    """``pieces`` cut into parts of at most ``limit`` characters, never inside a protected span; the plain
    text is cut where :func:`split_to_limit` prefers (punctuation, then whitespace). One part when short."""
    if _pieces_len(pieces) <= limit:
        return [pieces]
    parts: list[Pieces] = []
    current: list[str | Protected] = []
    size = 0
    units: list[str | Protected] = []
    for piece in pieces:
        units.extend(split_to_limit(piece, len, limit) if isinstance(piece, str) else [piece])
    for unit in units:
        n = len(unit.source) if isinstance(unit, Protected) else len(unit)
        if current and size + n > limit:
            parts.append(tuple(current))
            current, size = [], 0
        current.append(unit)
        size += n
    if current:
        parts.append(tuple(current))
    return parts


def _join_parts(translations: Sequence[str]) -> str:
    """The translations of one segment's parts as one text (a space between parts that have none)."""
    out = ""
    for text in translations:
        if out and text and not out[-1].isspace() and not text[0].isspace():
            out += " "
        out += text
    return out


def _chunks(batch: Sequence[Pieces]) -> list[slice]:
    """``batch`` in slices of at most ``CHUNK_SEGMENTS`` segments and ``CHUNK_CHARS`` characters (but one
    segment), in order: the units of work between which cancellation and the deadline are checked."""
    out: list[slice] = []
    start = chars = 0
    for i, pieces in enumerate(batch):
        n = _pieces_len(pieces)
        if i > start and (i - start >= CHUNK_SEGMENTS or chars + n > CHUNK_CHARS):
            out.append(slice(start, i))
            start, chars = i, 0
        chars += n
    if start < len(batch):
        out.append(slice(start, len(batch)))
    return out


def _reprotect(text: str, spans: Sequence[Protected]) -> Pieces:
    """Mark the required outputs of ``spans`` in an intermediate translation, for the next hop."""
    outputs = sorted({s.output for s in spans if s.output}, key=len, reverse=True)
    pieces: list[str | Protected] = []
    rest = text
    while rest:
        hits = [(rest.find(o), o) for o in outputs if o in rest]
        if not hits:
            pieces.append(rest)
            break
        at, out = min(hits, key=lambda h: (h[0], -len(h[1])))
        if at:
            pieces.append(rest[:at])
        pieces.append(Protected(out, out))
        rest = rest[at + len(out) :]
    return tuple(pieces)


class Engine:
    """Translation on this device. Thread-safe; create one per process and share it."""

    def __init__(self, settings: Settings | None = None, *, provenance: Provenance = "on-device") -> None:
        self.settings = settings or Settings.from_env()
        self.provenance: Provenance = provenance
        self.pack_cache = PackCache(self.settings)
        self.detector = Detector(self.settings.engine.detection_model)
        self.started = time.time()
        #: Merges concurrent callers' segments per route into one backend call (see ``batcher``).
        engine = self.settings.engine
        self.batcher = Batcher(BatchLimits.of(engine), enabled=engine.batching)

    # ----- languages -----------------------------------------------------------------------------
    def installed_pairs(self) -> set[tuple[str, str]]:
        return reachable_pairs(self.pack_cache.edges())

    def languages(self, *, installed_only: bool = True) -> list[Language]:
        """Languages the installed packs reach (as source or target), or the whole catalogue."""
        if not installed_only:
            return list(all_languages())
        codes = {code for pair in self.installed_pairs() for code in pair}
        return [lang for lang in known_languages() if lang.flores in codes]

    def detect(self, text: str) -> Detection:
        return self.detector.detect(text)

    # ----- packs and status ----------------------------------------------------------------------
    def packs(self) -> list[PackInfo]:
        """Every usable pack (installed packs and Apertium pairs) by id, each saying whether it is loaded."""
        return self.pack_cache.infos()

    def pack_ids(self) -> list[str]:
        """The ids of the usable packs, sorted (cheap: no pack is read)."""
        return sorted(self.pack_cache.entries())

    def loaded_packs(self) -> list[str]:
        """The ids of the packs loaded in this process, sorted."""
        return sorted(self.pack_cache.loaded_ids())

    def status(self) -> dict[str, Any]:
        """What translation can do here, as ``dragoman status`` shows it: provenance, CTranslate2's support
        on this CPU, the packs (loaded or not) and broken pack directories, the detection model, Apertium,
        and the engine's uptime. Cheap: nothing is loaded, binaries' versions are kept until they change."""
        engine = self.settings.engine
        return {
            "provenance": self.provenance,
            "ctranslate2": cpu_support(),
            "packs_dir": str(engine.packs_dir),
            "packs": [asdict(info) for info in self.packs()],
            "broken_packs": [{"path": str(p), "error": why} for p, why in self.pack_cache.store.broken()],
            "detection": self.detector.status(),
            "apertium": apertium_status(
                self.pack_cache.apertium_modes(), engine.apertium_modes_dirs, engine.apertium_enabled
            ),
            "batching": self.batcher.stats(),
            "uptime_seconds": round(time.time() - self.started, 3),
        }

    def batching_status(self) -> dict[str, Any]:
        """The dynamic batcher's counters: batches formed, mean batch size, queue depth (cheap)."""
        return self.batcher.stats()

    # ----- translation ---------------------------------------------------------------------------
    def translate(
        self, text: str, options: TranslateOptions, *, context: JobContext | None = None
    ) -> TranslationResult:
        """Translate one text; see :meth:`translate_batch`."""
        return self.translate_batch([text], options, context=context)[0]

    def translate_batch(
        self, texts: Sequence[str], options: TranslateOptions, *, context: JobContext | None = None
    ) -> list[TranslationResult]:
        """Translate up to ``MAX_BATCH_TEXTS`` texts; results come back in input order.

        Without ``options.source`` each text is detected on its own (a batch may mix languages). Of
        ``options.glossary`` each language pair applies the entries scoped to it (at most 200, the most
        specific first); the engine has no glossary of its own. With a ``context``, progress is reported
        and cancellation and the deadline are checked between chunks of segments.
        """
        if (
            not isinstance(texts, str) and len(texts) > MAX_BATCH_TEXTS
        ):  # the type is checked by translate_many
            raise LimitExceeded(f"a batch holds at most {MAX_BATCH_TEXTS} texts; got {len(texts)}: split it")
        return self.translate_many(texts, options, context=context)

    def translate_many(
        self,
        texts: Sequence[str],
        options: TranslateOptions,
        *,
        context: JobContext | None = None,
        pack: str | None = None,
    ) -> list[TranslationResult]:
        """:meth:`translate_batch` without the batch cap, for documents: still one pass per route.

        ``pack`` restricts routing to that pack's own routes (every hop through it), as ``dragoman eval
        --pack`` measures one pack; None routes as usual."""
        started = time.perf_counter()
        if not isinstance(options, TranslateOptions):
            raise InvalidRequest(
                "options must be TranslateOptions(target, source=..., tier=..., glossary=...); "
                f"got {type(options).__name__}"
            )
        chosen_tier = self._tier(options.tier)
        self._check_texts(texts)
        target_code = resolve(options.target)
        source_code = resolve(options.source) if options.source is not None else None
        entries = validate_entries(options.glossary, limit=None)
        taken = TranslateOptions(target_code, source_code, chosen_tier, entries)
        _check(context)
        groups, detections = self._group_by_source(texts, source_code)
        _check(context)
        outputs: list[str] = list(texts)
        warnings: dict[int, list[str]] = {i: [] for i in range(len(texts))}
        routes: dict[int, Route | None] = {}
        for group in groups.values():
            for i, note in group.warnings.items():
                warnings[i].extend(note)
            applied = glossary_for_pair(entries, group.source, target_code)
            route, group_warnings = self._translate_group(
                group, texts, target_code, chosen_tier, applied, outputs, context, pack
            )
            for i in group.indexes:
                warnings[i].extend(group_warnings.get(i, []))
                routes[i] = route
        seconds = time.perf_counter() - started
        sources = {i: g.source for g in groups.values() for i in g.indexes}
        results = []
        for i in range(len(texts)):
            src = sources[i]
            route = routes.get(i)
            results.append(
                TranslationResult(
                    translation=outputs[i],
                    source=src,
                    target=target_code,
                    provenance=self.provenance,
                    seconds=seconds,
                    warnings=tuple(dict.fromkeys(warnings[i])),
                    route=tuple(route.describe()) if route else (),
                    tier=chosen_tier,
                    detected=detections.get(i),
                    options=taken,
                )
            )
        return results

    # ----- steps ---------------------------------------------------------------------------------
    def _tier(self, tier: str | None) -> Tier:
        chosen = tier or self.settings.engine.default_tier
        if chosen == "best":
            return "best"
        if chosen == "fast":
            return "fast"
        raise InvalidRequest(f"tier must be one of {', '.join(TIERS)}, got {chosen!r}")

    @staticmethod
    def _check_texts(texts: Sequence[str]) -> None:
        if isinstance(texts, str):
            raise InvalidRequest("texts must be a list of strings, not one string")
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise InvalidRequest(f"texts[{i}] must be a string, got {type(text).__name__}")
            if len(text) > MAX_TEXT_CHARS:
                raise LimitExceeded(
                    f"texts[{i}] has {len(text)} characters; at most {MAX_TEXT_CHARS} per text: split it"
                )

    def _group_by_source(
        self, texts: Sequence[str], source: str | None
    ) -> tuple[dict[str, _Group], dict[int, Detection]]:
        groups: dict[str, _Group] = {}
        detections: dict[int, Detection] = {}
        if source is not None:
            groups[source] = _Group(source, list(range(len(texts))))
            return groups, detections
        need = [i for i, t in enumerate(texts) if t.strip()]
        found = self.detector.detect_many([texts[i] for i in need]) if need else []
        detections.update(zip(need, found, strict=True))
        for i in range(len(texts)):
            detection = detections.get(i)
            code = detection.flores if detection is not None else None
            group = groups.setdefault(code or FALLBACK_SOURCE, _Group(code or FALLBACK_SOURCE))
            group.indexes.append(i)
            if code is None and texts[i].strip():
                reason = detection.reason if detection is not None else "empty"
                group.warnings.setdefault(i, []).append(
                    f"source_uncertain: language detection was uncertain ({reason}); "
                    f"assumed {FALLBACK_SOURCE}. "
                    "Pass source to be sure."
                )
        return groups, detections

    def route(self, source: str, target: str, tier: Tier = "best", *, pack: str | None = None) -> Route:
        """The best route from ``source`` to ``target``; with ``pack``, the best whose hops all use it."""
        routes = self.pack_cache.routes(source, target, tier)
        if pack is not None:
            routes = tuple(r for r in routes if all(h.pack_id == pack for h in r.hops))
            if not routes:
                raise UnsupportedPair(
                    f"pack {pack!r} does not translate {source}->{target}; "
                    "`dragoman packs list` shows each pack's pairs"
                )
        if routes:
            return routes[0]
        pairs = sorted(self.installed_pairs())
        shown = ", ".join(f"{s}->{t}" for s, t in pairs[:30]) or "none"
        more = f" (and {len(pairs) - 30} more)" if len(pairs) > 30 else ""
        raise UnsupportedPair(
            f"no installed pack translates {source}->{target}, directly or through a pivot; "
            f"installed pairs: {shown}{more}. Install one with `dragoman packs install "
            f"{get(source).bcp47}:{get(target).bcp47}` (Argos index), or a multilingual pack "
            "(NLLB-200) with `dragoman packs install PATH_OR_URL`; "
            "`dragoman packs available` lists the index."
        )

    def _translate_group(
        self,
        group: _Group,
        texts: Sequence[str],
        target: str,
        tier: Tier,
        glossary: tuple[GlossaryEntry, ...],
        outputs: list[str],
        context: JobContext | None,
        pack: str | None = None,
    ) -> tuple[Route | None, dict[int, list[str]]]:
        notes: dict[int, list[str]] = {}
        if group.source == target:
            for i in group.indexes:
                if texts[i].strip():
                    notes[i] = [
                        f"same_language: source and target are both {target}; text returned unchanged"
                    ]
            return None, notes
        layouts: dict[int, Segmented] = {}
        for i in group.indexes:
            layouts[i] = segment(texts[i])
            _check(context)
        if not any(layout.sentences for layout in layouts.values()):
            return None, notes  # nothing but whitespace: returned as it came
        route = self.route(group.source, target, tier, pack=pack)
        # Each sentence of each text: its parts (one, unless the sentence is over MAX_SEGMENT_CHARS).
        protected: dict[int, list[list[Pieces]]] = {}
        count = 0
        for i, layout in layouts.items():
            protected[i] = []
            for sentence in layout.sentences:
                protected[i].append(_split_long(protect(sentence, glossary)))
                count += 1
                if count % CHECK_EVERY == 0:
                    _check(context)
        _check(context)
        unique = dict.fromkeys(
            part for segments in protected.values() for parts in segments for part in parts
        )
        ordered = sorted(unique, key=_pieces_len)
        translated, run_notes = self._run_route(route, ordered, context)
        if tier == "fast":
            translated, guard_notes = self._guard(route, ordered, translated, group.source, target, context)
            run_notes.extend(guard_notes)
        # A segment whose source starts in lower case gets no forced capital (issue 11, item 3).
        translated = [
            match_first_case(pieces, text, target) for pieces, text in zip(ordered, translated, strict=True)
        ]
        by_pieces = dict(zip(ordered, translated, strict=True))
        for i, layout in layouts.items():
            _check(context)
            outputs[i] = layout.rebuild(
                [_join_parts([by_pieces[p] for p in parts]) for parts in protected[i]]
            )
            notes[i] = list(run_notes)
        return route, notes

    def _run_route(
        self, route: Route, batch: list[Pieces], context: JobContext | None, *, report: bool = True
    ) -> tuple[list[str], list[str]]:
        """Send ``batch`` through every hop of ``route``; spans are re-marked between hops.

        With a ``context``, work stops between chunks once it is cancelled or past its deadline, and
        (``report``) each chunk done is reported. The backends' notes become warnings, summed per hop.
        """
        notes: list[str] = []
        current: list[Pieces] = batch
        total = len(batch) * len(route.hops)
        done = 0
        out: list[str] = []
        for number, hop in enumerate(route.hops, start=1):
            out = []
            counts: dict[str, int] = {}
            # Held in use for the whole hop: the memory budget or idle unloading never closes it mid-batch.
            with self.pack_cache.use(hop.pack_id) as backend:
                for part in _chunks(current):
                    _check(context)
                    chunk = current[part]
                    answer = self.batcher.translate(backend, chunk, hop.source, hop.target, context)
                    out.extend(answer.texts)
                    add_notes(counts, answer.notes)
                    done += len(chunk)
                    if context is not None and report:
                        context.report(done, total, f"{hop.pack_id}: {hop.source}->{hop.target}")
            notes.extend(_note(hop.pack_id, code, count) for code, count in counts.items() if count)
            if number == len(route.hops):
                break  # the last hop's output is the answer: nothing to re-mark
            current = []
            for n, (text, pieces) in enumerate(zip(out, batch, strict=True), start=1):
                spans = [p for p in pieces if isinstance(p, Protected)]
                current.append(_reprotect(text, spans) if spans else (text,))
                if n % CHECK_EVERY == 0:
                    _check(context)
        return out, notes

    def _guard(
        self,
        route: Route,
        batch: list[Pieces],
        translated: list[str],
        source: str,
        target: str,
        context: JobContext | None,
    ) -> tuple[list[str], list[str]]:
        """Check each segment; send those that trip a guard through the best route."""
        tripped: dict[int, list[str]] = {}
        for i, (pieces, output) in enumerate(zip(batch, translated, strict=True)):
            if i % CHECK_EVERY == 0:
                _check(context)
            names = guards.check(pieces, output, target=target, detect=self.detector.detect)
            if names:
                tripped[i] = names
        if not tripped:
            return translated, []
        names = sorted({n for found in tripped.values() for n in found})
        best = self.route(source, target, "best")
        if best == route:
            return translated, [
                f"guard: {', '.join(names)} tripped on {len(tripped)} segment(s); "
                "no better route is installed, result kept"
            ]
        retried, _ = self._run_route(best, [batch[i] for i in tripped], context, report=False)
        fixed = list(translated)
        for i, text in zip(tripped, retried, strict=True):
            fixed[i] = text
        return fixed, [
            f"guard: {', '.join(names)} tripped on {len(tripped)} segment(s); retried on the best route "
            f"({' > '.join(best.describe())})"
        ]

    # ----- lifecycle -----------------------------------------------------------------------------
    def close(self) -> None:
        self.pack_cache.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
