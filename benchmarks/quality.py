"""Translation quality of every installed route (issue 17): chrF and BLEU on the project's own test set, and
a term-level check on the country and language names Debian's iso-codes translates.

Sentences: ``benchmarks/data/quality/`` holds 44 sentences written for this project (CC0; see its README)
in en, es, ca, fr, pt, it and gl, aligned by line. For every pair of those languages that the installed
packs reach (directly or through a pivot), ``dragoman.pipelines.evaluate`` translates the source file with
the engine (the route it picks for the tier) and scores it with sacreBLEU's corpus chrF and BLEU against
the reference file; the time per sentence is measured after one warm-up sentence.

Terms: Debian's ``iso-codes`` package (``apt-get install iso-codes``) translates the ISO 3166-1 country
names and ISO 639 language names into 158 locales (``/usr/share/locale/*/LC_MESSAGES/iso_3166-1.mo``,
``iso_639-3.mo``; the English names in ``/usr/share/iso-codes/json``). For each route, the names both
locales translate (English: the names themselves) are translated one a text, source locale to target
locale, and compared with the target locale's names: ``exact`` (the same string) and ``normalised`` (the
same after case folding, removing accents and punctuation, and collapsing spaces). Countries use the
common name where iso-codes gives one (``Bolivia``, not ``Bolivia, Plurinational State of``); languages are
the 184 with a two-letter code.

Every other pack direction (each installed pack's pairs where one of the two languages is not in the
test set: ``hr-en``, ``nb-nn``, ``pl-szl``...) gets the term check only, through that pack alone, in a second
table. A FLORES code's iso-codes locale is its BCP 47 language subtag (``hrv_Latn`` ``hr``, ``zsm_Latn``
``ms``, ``nob_Latn`` ``nb``, ``srd_Latn`` ``sc``; ``srp_Cyrl`` ``sr``, ``srp_Latn`` ``sr@latin``); where
iso-codes has no catalogue for a language (``szl``) the row says ``no reference`` rather than being left
out, and a locale that translates only one of the two lists (``frp``, ``an``: countries) says so. A term
the pack fails on (Debian's hbs-mkd answers nothing for some names, ukr-rus's tagger crashes on some)
counts as a miss and the row names it (see :func:`translate_terms`).

Time: after the scored run, each route translates the set in alternated rounds (``--rounds``), once as one
call (``set``: what a document or a batch costs per sentence) and once a sentence a call (``each``: the
latency of a single sentence); the medians per sentence are printed with their min-max.

Prints a Markdown table (``--json``: the rows). ``--quick``: the first 10 sentences and 40 terms of each
route, a smoke run whose figures are not worth quoting. ``--pairs en-es,es-ca`` measures only those.
"""

from __future__ import annotations

import argparse
import gettext
import json
import re
import sys
import time
import unicodedata
from pathlib import Path
from typing import Any

import _harness as harness

DATA = Path(__file__).resolve().parent / "data" / "quality"
ISO_JSON = Path("/usr/share/iso-codes/json")
LOCALE_DIR = Path("/usr/share/locale")
#: The test set's languages: file name (and iso-codes locale) to FLORES-200 code.
LANGUAGES = {
    "en": "eng_Latn",
    "es": "spa_Latn",
    "ca": "cat_Latn",
    "fr": "fra_Latn",
    "pt": "por_Latn",
    "it": "ita_Latn",
    "gl": "glg_Latn",
}
#: iso-codes locales that a language's BCP 47 language subtag does not name: script variants.
SCRIPT_LOCALES = {"srp_Latn": "sr@latin", "uzn_Cyrl": "uz@cyrillic", "bel_Latn": "be@latin"}
DOMAINS = {"iso_3166-1": "countries", "iso_639-3": "languages"}
QUICK_SENTENCES = 10
QUICK_TERMS = 40


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    made = harness.parser(
        __doc__,
        rounds=3,
        quick_rounds=1,
        rounds_help="timed rounds of each route, the whole set in one call and sentence by sentence "
        "alternated (default 3; 1 with --quick)",
    )
    made.add_argument("--tier", choices=["best", "fast"], default="best", help="the tier measured (best)")
    made.add_argument(
        "--pairs", help="only these pairs, e.g. en-es,es-ca,hr-en (default: every reachable one)"
    )
    made.add_argument("--no-terms", action="store_true", help="skip the iso-codes term check")
    made.add_argument("--json", action="store_true", help="print the rows as JSON")
    return made.parse_args(argv)


# ----- the iso-codes term check ---------------------------------------------------------------------------
def _catalog(locale: str, domain: str) -> dict[str, str] | None:
    path = LOCALE_DIR / locale / "LC_MESSAGES" / f"{domain}.mo"
    if not path.is_file():
        return None
    with path.open("rb") as handle:
        catalog = gettext.GNUTranslations(handle)._catalog  # type: ignore[attr-defined]
    return {k: v for k, v in catalog.items() if isinstance(k, str) and k and isinstance(v, str) and v}


def domains(locale: str) -> list[str]:
    """The iso-codes lists (``iso_3166-1``, ``iso_639-3``) translated into ``locale`` (English: both)."""
    if locale == "en":
        return list(DOMAINS)
    return [d for d in DOMAINS if (LOCALE_DIR / locale / "LC_MESSAGES" / f"{d}.mo").is_file()]


def iso_locale(flores: str) -> str | None:
    """The iso-codes locale of a FLORES-200 code (``hrv_Latn`` -> ``hr``), None where iso-codes translates
    neither list into that language (or the code is unknown)."""
    from dragoman.errors import UnknownLanguage
    from dragoman.languages.catalogue import get

    locale = SCRIPT_LOCALES.get(flores)
    if locale is None:
        try:
            locale = get(flores).bcp47.split("-")[0]
        except UnknownLanguage:
            return None
    return locale if domains(locale) else None


def reference_note(source: str | None, target: str | None) -> str:
    """Why a route's term check is missing or partial ("" when both lists are compared)."""
    missing = [loc for loc in (source, target) if loc is None]
    if missing:
        return "no reference"
    assert source is not None and target is not None
    shared = [d for d in domains(source) if d in domains(target)]
    if not shared:
        return "no reference"
    if len(shared) < len(DOMAINS):
        return " and ".join(DOMAINS[d] for d in shared) + " only"
    return ""


def english_names() -> dict[str, list[str]]:
    """The English names iso-codes translates: countries (common name first) and languages with a
    two-letter code."""
    countries = json.loads((ISO_JSON / "iso_3166-1.json").read_text(encoding="utf-8"))["3166-1"]
    languages = json.loads((ISO_JSON / "iso_639-3.json").read_text(encoding="utf-8"))["639-3"]
    return {
        "iso_3166-1": [str(e.get("common_name") or e["name"]) for e in countries],
        "iso_639-3": [str(e["name"]) for e in languages if "alpha_2" in e],
    }


def term_pairs(source: str, target: str, *, limit: int | None = None) -> list[tuple[str, str]]:
    """(source name, target name) for every name both locales translate (English: the name itself)."""
    found: list[tuple[str, str]] = []
    for domain, names in english_names().items():
        src = None if source == "en" else _catalog(source, domain)
        tgt = None if target == "en" else _catalog(target, domain)
        if (source != "en" and src is None) or (target != "en" and tgt is None):
            continue
        for name in names:
            a = name if src is None else src.get(name)
            b = name if tgt is None else tgt.get(name)
            if a and b:
                found.append((a, b))
    return found[:limit] if limit else found


_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)


def normalise(text: str) -> str:
    """Case folded, accents and punctuation removed, spaces collapsed."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    bare = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(_PUNCT.sub(" ", bare).split())


def term_scores(hypotheses: list[str], references: list[str]) -> tuple[float, float]:
    """The share (percent) of exact and of normalised matches."""
    exact = sum(h.strip() == r.strip() for h, r in zip(hypotheses, references, strict=True))
    loose = sum(normalise(h) == normalise(r) for h, r in zip(hypotheses, references, strict=True))
    return 100 * exact / len(references), 100 * loose / len(references)


# ----- the run ------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    rounds = harness.rounds_of(args)
    from dragoman.languages.catalogue import get
    from dragoman.pipelines.evaluate import ParallelSet, evaluate, read_parallel
    from dragoman.settings import Settings
    from dragoman.translation.engine import Engine
    from dragoman.translation.types import TranslateOptions

    have_terms = not args.no_terms and (ISO_JSON / "iso_3166-1.json").is_file()
    if not args.no_terms and not have_terms:
        print("iso-codes is not installed (apt-get install iso-codes): no term check", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    with Engine(Settings.from_env()) as engine:
        reachable = engine.installed_pairs()
        by_flores = {v: k for k, v in LANGUAGES.items()}
        pairs = sorted(
            (by_flores[s], by_flores[t]) for s, t in reachable if s in by_flores and t in by_flores and s != t
        )
        directions = _term_only_directions(engine, by_flores)
        if args.pairs:
            wanted = {tuple(p.strip().split("-", 1)) for p in args.pairs.split(",") if p.strip()}
            pairs = [p for p in pairs if p in wanted]
            directions = [d for d in directions if (d[0], d[1]) in wanted or (d[2], d[3]) in wanted]
        if not pairs and not directions:
            print("no installed route matches", file=sys.stderr)
            return 1
        for src, tgt in pairs:
            data = read_parallel(DATA / f"{src}.txt", DATA / f"{tgt}.txt")
            if args.quick:
                data = ParallelSet(
                    data.name, data.sources[:QUICK_SENTENCES], data.references[:QUICK_SENTENCES]
                )
            result = evaluate(engine, data, source=LANGUAGES[src], target=LANGUAGES[tgt], tier=args.tier)
            options = TranslateOptions(LANGUAGES[tgt], LANGUAGES[src], args.tier)
            sources = list(data.sources)
            timed = harness.alternate(
                {
                    "set": lambda sources=sources, options=options: engine.translate_many(sources, options),
                    "each": lambda sources=sources, options=options: [
                        engine.translate_many([s], options) for s in sources
                    ],
                },
                rounds,
            )
            per = 1000 / len(sources)
            row: dict[str, Any] = {
                "pair": f"{src}-{tgt}",
                "route": " > ".join(h.split(":")[0] for h in result.route),
                "hops": len(result.route),
                "tier": result.tier,
                "sentences": result.sentences,
                "chrf": round(result.scores.chrf, 1),
                "bleu": round(result.scores.bleu, 1),
                "ms_per_sentence_set": harness.Spread.of(timed.of("set")).scaled(per).text(".2g"),
                "ms_per_sentence_each": harness.Spread.of(timed.of("each")).scaled(per).text(".2g"),
                "chrf_signature": result.scores.chrf_signature,
                "bleu_signature": result.scores.bleu_signature,
            }
            if have_terms:
                terms = term_pairs(src, tgt, limit=QUICK_TERMS if args.quick else None)
                if terms:
                    started = time.perf_counter()
                    out = engine.translate_many([a for a, _ in terms], options)
                    row["term_seconds"] = round(time.perf_counter() - started, 3)
                    exact, loose = term_scores([r.translation for r in out], [b for _, b in terms])
                    row.update(
                        terms=len(terms), terms_exact=round(exact, 1), terms_normalised=round(loose, 1)
                    )
            rows.append(row)
            print(f"{row['pair']}: chrF {row['chrf']} BLEU {row['bleu']}", file=sys.stderr)
        term_rows = [
            _term_only_row(engine, direction, tier=args.tier, terms=have_terms, quick=args.quick)
            for direction in directions
        ]
        names = {code: get(flores).name for code, flores in LANGUAGES.items()}
    if args.json:
        print(json.dumps(rows + term_rows, ensure_ascii=False, indent=2))
        return 0
    if rows:
        _print_sentence_table(rows, tier=args.tier, names=names)
    if term_rows:
        if rows:
            print()
        print_term_table(term_rows, tier=args.tier)
    return 0


def _print_sentence_table(rows: list[dict[str, Any]], *, tier: str, names: dict[str, str]) -> None:
    print(
        f"tier {tier}; {rows[0]['sentences']} sentences a pair; languages: "
        + ", ".join(f"{c} {names[c]}" for c in LANGUAGES)
    )
    print()
    print(
        "| pair | route | chrF | BLEU | ms/sent. (set) | ms/sent. (each) | terms | exact % | normalised % |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row['pair']} | {row['route']} | {row['chrf']:.1f} | {row['bleu']:.1f} | "
            f"{row['ms_per_sentence_set']} | {row['ms_per_sentence_each']} | {row.get('terms', '-')} | "
            f"{row.get('terms_exact', '-')} | {row.get('terms_normalised', '-')} |"
        )
    print()
    print(f"chrF signature: {rows[0]['chrf_signature']}")
    print(f"BLEU signature: {rows[0]['bleu_signature']}")


# ----- pack directions outside the test set: the term check only -----------------------------------------
#: (source label, target label, source FLORES, target FLORES, pack id)
Direction = tuple[str, str, str, str, str]


def _label(flores: str) -> str:
    from dragoman.languages.catalogue import get

    return get(flores).bcp47


def _term_only_directions(engine: Any, by_flores: dict[str, str]) -> list[Direction]:
    """Every installed pack's directions whose two languages are not both in the test set."""
    found = {
        (_label(s), _label(t), s, t, pack.id)
        for pack in engine.packs()
        for s, t in pack.pairs
        if s != t and not (s in by_flores and t in by_flores)
    }
    return sorted(found)


def _term_only_row(
    engine: Any, direction: Direction, *, tier: str, terms: bool, quick: bool
) -> dict[str, Any]:
    from dragoman.errors import DragomanError
    from dragoman.translation.types import TranslateOptions

    src, tgt, source, target, pack = direction
    src_locale, tgt_locale = iso_locale(source), iso_locale(target)
    row: dict[str, Any] = {
        "table": "terms",
        "pair": f"{src}-{tgt}",
        "pack": pack,
        "locales": f"{src_locale or '-'} > {tgt_locale or '-'}",
        "note": reference_note(src_locale, tgt_locale) if terms else "no term check",
    }
    lacking = [label for label, loc in ((src, src_locale), (tgt, tgt_locale)) if loc is None]
    if terms and lacking:
        row["note"] = f"no reference: iso-codes has no {' or '.join(lacking)} locale"
    if not terms or src_locale is None or tgt_locale is None:
        return row
    found = term_pairs(src_locale, tgt_locale, limit=QUICK_TERMS if quick else None)
    if not found:
        return row
    options = TranslateOptions(target, source, tier)
    try:
        engine.translate_many([found[0][0]], options, pack=pack)  # warm-up
    except DragomanError:
        pass  # the term is tried again below, where a failure is counted
    started = time.perf_counter()
    out, failures = translate_terms(engine, [a for a, _ in found], options, pack)
    seconds = time.perf_counter() - started
    if failures:
        row["note"] = failure_note(failures)
    exact, loose = term_scores([t if t is not None else "" for t in out], [b for _, b in found])
    row.update(
        terms=len(found),
        terms_exact=round(exact, 1),
        terms_normalised=round(loose, 1),
        ms_per_term="-" if failures else f"{1000 * seconds / len(found):.2g}",
    )
    print(f"{row['pair']} ({pack}): terms {row['terms_exact']} / {row['terms_normalised']}", file=sys.stderr)
    return row


#: Terms a call when a route's whole list failed: a failing group is then retried a term a call.
RETRY_CHUNK = 32
#: Seconds an Apertium pack may take over a group of terms once it has failed the whole list (its own
#: limit, 30 s, would make each term it never answers cost half a minute; a group takes milliseconds).
RETRY_TIMEOUT = 3.0


def _shorten_timeout(engine: Any, pack: str) -> None:
    cache = getattr(engine, "pack_cache", None)
    backend = None if cache is None else cache.backend(pack)
    if backend is not None and isinstance(getattr(backend, "timeout", None), float):
        backend.timeout = min(backend.timeout, RETRY_TIMEOUT)


def translate_terms(
    engine: Any, texts: list[str], options: Any, pack: str
) -> tuple[list[str | None], list[tuple[str, str]]]:
    """``texts`` through ``pack``: the translations (None for a term that failed) and (term, error name)
    for each failed term. The list goes in one call; where that fails (an Apertium pair that answers
    nothing for one input, or whose tagger crashes on one), in groups of :data:`RETRY_CHUNK`, and a
    failing group a term a call, so one bad term costs that term and not the route's figure."""
    from dragoman.errors import DragomanError

    try:
        return [r.translation for r in engine.translate_many(texts, options, pack=pack)], []
    except DragomanError as error:
        first = error
    print(f"{pack}: {type(first).__name__} on the whole list; retrying in groups", file=sys.stderr)
    _shorten_timeout(engine, pack)
    out: list[str | None] = []
    failures: list[tuple[str, str]] = []
    for start in range(0, len(texts), RETRY_CHUNK):
        group = texts[start : start + RETRY_CHUNK]
        try:
            out.extend(r.translation for r in engine.translate_many(group, options, pack=pack))
            continue
        except DragomanError:
            pass
        for text in group:
            try:
                out.append(engine.translate_many([text], options, pack=pack)[0].translation)
            except DragomanError as error:
                out.append(None)
                failures.append((text, type(error).__name__))
                print(f"{pack}: {text!r} failed: {str(error).split(';')[0]}", file=sys.stderr)
    return out, failures


def failure_note(failures: list[tuple[str, str]]) -> str:
    """A route's note for the terms that failed: how many, the errors, the terms (at most three)."""
    kinds = ", ".join(sorted({kind for _, kind in failures}))
    shown = ", ".join(f"`{term}`" for term, _ in failures[:3])
    more = f" and {len(failures) - 3} more" if len(failures) > 3 else ""
    return f"{len(failures)} failed ({kinds}: {shown}{more}), counted as misses; time not comparable"


def print_term_table(rows: list[dict[str, Any]], *, tier: str) -> None:
    """The second table: pack directions with one language outside the test set, terms only."""
    print(
        f"Pack directions outside the test set (tier {tier}), iso-codes term check only, each through "
        "its own pack:"
    )
    print()
    print("| pair | pack | iso-codes | terms | exact % | normalised % | ms/term | note |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    for row in rows:
        print(
            f"| {row['pair']} | {row['pack']} | {row['locales']} | {row.get('terms', '-')} | "
            f"{row.get('terms_exact', '-')} | {row.get('terms_normalised', '-')} | "
            f"{row.get('ms_per_term', '-')} | {row['note'] or '-'} |"
        )


if __name__ == "__main__":
    sys.exit(main())
