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
    made.add_argument("--pairs", help="only these pairs, e.g. en-es,es-ca (default: every reachable one)")
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
        if args.pairs:
            wanted = {tuple(p.strip().split("-", 1)) for p in args.pairs.split(",") if p.strip()}
            pairs = [p for p in pairs if p in wanted]
        if not pairs:
            print("no installed route joins two of the test set's languages", file=sys.stderr)
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
        names = {code: get(flores).name for code, flores in LANGUAGES.items()}
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return 0
    print(
        f"tier {args.tier}; {rows[0]['sentences']} sentences a pair; languages: "
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
