"""Glossaries (spec 2.7): checking the entries a caller gives, and choosing those one language pair applies.

The engine owns no glossary: every translation receives its entries explicitly (:class:`TranslateOptions`),
of any scope. :func:`validate_entries` checks them (non-empty strings of at most
:data:`~dragoman.limits.MAX_TERM_CHARS` characters, known language scopes normalized to FLORES codes);
:func:`for_pair` picks those a translation from one language to another applies: at most
:data:`MAX_GLOSSARY_ENTRIES`, the most specific first (scoped to both languages, then to one, then
unscoped), with a logged warning when more would apply. The user's glossary file, which the local front
doors read and write, lives outside the engine (:mod:`dragoman.server.local_store`).

Two entries are the same entry when they have the same term (compared case-insensitively unless
case-sensitive), the same case rule and the same scope; the later one wins.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Sequence

from dragoman.errors import InvalidRequest, LimitExceeded, UnknownLanguage
from dragoman.languages import catalogue as languages
from dragoman.limits import MAX_GLOSSARY_ENTRIES, MAX_TERM_CHARS
from dragoman.translation.types import GlossaryEntry

__all__ = [
    "MAX_GLOSSARY_ENTRIES",
    "EntryKey",
    "entry_key",
    "for_pair",
    "merge_entries",
    "scope_code",
    "specificity",
    "validate_entries",
]

log = logging.getLogger("dragoman.translation.glossary")

EntryKey = tuple[str, bool, str | None, str | None]


def entry_key(entry: GlossaryEntry) -> EntryKey:
    """What makes two entries the same: term under its case rule, the case rule, the scope."""
    term = entry.term if entry.case_sensitive else entry.term.casefold()
    return (term, entry.case_sensitive, entry.source, entry.target)


def merge_entries(entries: Iterable[GlossaryEntry]) -> dict[EntryKey, GlossaryEntry]:
    """Entries by key, in order of first appearance, the last of duplicates winning."""
    merged: dict[EntryKey, GlossaryEntry] = {}
    for entry in entries:
        merged[entry_key(entry)] = entry
    return merged


def scope_code(code: str | None, what: str) -> str | None:
    """A scope's FLORES code (None stays None: any language); unknown codes name the field."""
    if code is None:
        return None
    try:
        return languages.resolve(code)
    except UnknownLanguage as exc:
        raise UnknownLanguage(
            f"glossary {what}: {exc.message}", given=exc.given, suggestions=exc.suggestions
        ) from exc


def validate_entries(
    entries: Sequence[GlossaryEntry], *, limit: int | None = MAX_GLOSSARY_ENTRIES
) -> tuple[GlossaryEntry, ...]:
    """Check a glossary: non-empty strings of at most 1000 characters, known language scopes (normalized
    to FLORES codes), and at most ``limit`` entries counted as given (a request's cap; None: any number, as
    the engine takes them). Duplicates collapse, the last one winning."""
    if isinstance(entries, str | bytes):
        raise InvalidRequest("glossary must be a list of entries {term, translation, caseSensitive}")
    if limit is not None and len(entries) > limit:
        raise LimitExceeded(
            f"a glossary holds at most {limit} entries per request; got {len(entries)}: "
            "send fewer terms, or store them with glossary_add scoped to language pairs"
        )
    checked: list[GlossaryEntry] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, GlossaryEntry):
            raise InvalidRequest(f"glossary[{i}] must be an entry {{term, translation, caseSensitive}}")
        for field in ("term", "translation"):
            value = getattr(entry, field)
            if not isinstance(value, str) or not value.strip():
                raise InvalidRequest(f"glossary[{i}].{field} must be a non-empty string; got {value!r}")
            if len(value) > MAX_TERM_CHARS:
                raise LimitExceeded(
                    f"glossary[{i}].{field} has {len(value)} characters; at most {MAX_TERM_CHARS}: shorten it"
                )
        if not isinstance(entry.case_sensitive, bool):
            raise InvalidRequest(f"glossary[{i}].caseSensitive must be true or false")
        source = scope_code(entry.source, f"[{i}].source")
        target = scope_code(entry.target, f"[{i}].target")
        if (source, target) != (entry.source, entry.target):
            entry = dataclasses.replace(entry, source=source, target=target)
        checked.append(entry)
    return tuple(merge_entries(checked).values())


def specificity(entry: GlossaryEntry) -> int:
    """2 when scoped to both languages, 1 to one of them, 0 unscoped."""
    return (entry.source is not None) + (entry.target is not None)


def for_pair(
    entries: Sequence[GlossaryEntry], source: str, target: str, *, limit: int = MAX_GLOSSARY_ENTRIES
) -> tuple[GlossaryEntry, ...]:
    """The entries a translation from ``source`` to ``target`` applies, in their order: at most ``limit``,
    the most specific kept first when more apply (a warning is logged then)."""
    applicable = tuple(e for e in entries if e.applies_to(source, target))
    if len(applicable) <= limit:
        return applicable
    log.warning(
        "%d glossary entries apply to %s->%s; only the %d most specific are used",
        len(applicable),
        source,
        target,
        limit,
    )
    ranked = sorted(applicable, key=specificity, reverse=True)[:limit]
    kept = set(map(id, ranked))
    return tuple(e for e in applicable if id(e) in kept)
