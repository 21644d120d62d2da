"""``dragoman eval`` (issue 17): translation quality of a pack or a route on a parallel test set.

``dragoman eval (--pack ID | --from SRC --to TGT) (--src FILE --ref FILE | --testset NAME) [--tier best|fast]
[--json] [--hypotheses FILE]`` translates each line of the source file (or of sacreBLEU's named test set,
fetched by sacreBLEU) and prints sacreBLEU's corpus chrF and BLEU with their signatures, the time per
sentence, and the tier and route used. ``--pack`` measures that pack alone (the pair is the pack's own when
it has one; ``--from``/``--to`` choose among a multilingual pack's). :func:`register` adds it to the
top-level parser; sacreBLEU and the engine are imported inside the command.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dragoman.errors import InvalidRequest

if TYPE_CHECKING:
    from dragoman.settings import Settings

_SubParsers = argparse._SubParsersAction  # the type of add_subparsers()' answer


def cmd_eval(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.pipelines.evaluate import evaluate, load_testset, pack_pair, read_parallel
    from dragoman.translation.engine import Engine

    if args.testset is None and (args.src is None or args.ref is None):
        raise InvalidRequest("give the test set: --src FILE and --ref FILE, or --testset NAME (sacreBLEU's)")
    if args.testset is not None and (args.src is not None or args.ref is not None):
        raise InvalidRequest("give either --src and --ref, or --testset, not both")
    if args.pack is None and (args.source is None or args.to is None):
        raise InvalidRequest("say what to measure: --pack ID, or a route with --from SRC and --to TGT")
    if args.hypotheses is not None and Path(args.hypotheses).exists() and not args.overwrite:
        raise InvalidRequest(f"{args.hypotheses} exists; pass --overwrite to replace it")
    data = read_parallel(args.src, args.ref) if args.testset is None else None
    with Engine(settings) as engine:
        source, target = args.source, args.to
        if args.pack is not None and (source is None or target is None):
            pair = pack_pair(engine, args.pack)
            source, target = source or pair[0], target or pair[1]
        if data is None:
            data = load_testset(args.testset, source, target)
        result = evaluate(engine, data, source=source, target=target, tier=args.tier, pack=args.pack)
    if args.hypotheses is not None:
        Path(args.hypotheses).write_text("".join(h.replace("\n", " ") + "\n" for h in result.hypotheses))
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
        return 0
    out = sys.stdout
    out.write(f"test set  {result.testset} ({result.sentences} sentences)\n")
    out.write(f"pair      {result.source} -> {result.target}, tier {result.tier}\n")
    out.write(f"route     {' | '.join(result.route) or '(none)'}\n")
    out.write(f"chrF      {result.scores.chrf:.2f}  {result.scores.chrf_signature}\n")
    out.write(f"BLEU      {result.scores.bleu:.2f}  {result.scores.bleu_signature}\n")
    out.write(
        f"time      {result.seconds_per_sentence * 1000:.2f} ms/sentence "
        f"({result.seconds:.3f} s in all; {result.warmup_seconds:.3f} s to warm up)\n"
    )
    for warning in result.warnings[:5]:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def register(sub: _SubParsers[argparse.ArgumentParser]) -> None:
    """Add ``dragoman eval`` to the top-level parser."""
    p = sub.add_parser("eval", help="translation quality (chrF, BLEU by sacreBLEU) on a parallel test set")
    p.add_argument("--json", action="store_true", help="answer in JSON")
    p.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log more (to stderr)"
    )
    p.add_argument("--pack", help="the pack to measure (alone); its pair unless --from/--to say")
    p.add_argument("--from", dest="source", help="source language (BCP-47 or FLORES-200)")
    p.add_argument("--to", help="target language (BCP-47 or FLORES-200)")
    p.add_argument("--src", help="source sentences, one a line (UTF-8)")
    p.add_argument("--ref", help="reference translations, aligned by line with --src")
    p.add_argument("--testset", help="a sacreBLEU test set (wmt13, wmt20, iwslt17...), fetched by sacreBLEU")
    p.add_argument("--tier", choices=["best", "fast"], help="best (default) or fast")
    p.add_argument("--hypotheses", help="also write the translations here, one a line")
    p.add_argument("--overwrite", action="store_true", help="replace the --hypotheses file if it exists")
    p.set_defaults(func=cmd_eval)
