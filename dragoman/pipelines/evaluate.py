"""Translation quality on a parallel test set (issue 17): chrF and BLEU by sacreBLEU, time per sentence.

:func:`read_parallel` reads a source file and a reference file aligned by line (UTF-8, the same number of
lines, not empty, each line within the engine's text limit); :func:`load_testset` asks sacreBLEU for one of
its named test sets (it downloads them into ``$SACREBLEU``, ``~/.sacrebleu`` by default, so it needs the
internet once). :func:`evaluate` translates each source line as one text through the engine (the route the
engine picks for the pair and tier, or only ``pack``'s) and scores the hypotheses against the references
with sacreBLEU's corpus chrF and BLEU, whose signatures say exactly how they were computed. The first line
is translated once before the clock starts, so loading a pack is not counted in the time per sentence.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dragoman.errors import (
    FileTooLarge,
    InvalidRequest,
    LimitExceeded,
    PackNotInstalled,
    file_error,
)
from dragoman.languages.catalogue import get, resolve
from dragoman.limits import MAX_TEXT_CHARS, Tier
from dragoman.translation.types import TranslateOptions

if TYPE_CHECKING:
    from dragoman.progress import JobContext
    from dragoman.translation.engine import Engine

#: The most lines a test set may hold: WMT test sets have 1,000-3,000, FLORES devtest 1,012.
MAX_EVAL_LINES = 20_000
#: The most bytes each file of a test set may hold (20,000 lines of 800 bytes).
MAX_EVAL_FILE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class ParallelSet:
    """Source lines and their reference translations, aligned by position."""

    name: str
    sources: tuple[str, ...]
    references: tuple[str, ...]


@dataclass(frozen=True)
class Scores:
    """sacreBLEU's corpus chrF and BLEU (0-100) with the signatures that say how they were computed."""

    chrf: float
    bleu: float
    chrf_signature: str
    bleu_signature: str


@dataclass(frozen=True)
class EvalResult:
    """What ``dragoman eval`` reports: the scores, the route and tier used, and the time per sentence."""

    testset: str
    source: str
    target: str
    tier: str
    route: tuple[str, ...]
    pack: str | None
    sentences: int
    scores: Scores
    seconds: float
    seconds_per_sentence: float
    warmup_seconds: float
    hypotheses: tuple[str, ...]
    warnings: tuple[str, ...] = ()

    def to_dict(self, *, hypotheses: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "testset": self.testset,
            "source": self.source,
            "target": self.target,
            "tier": self.tier,
            "route": list(self.route),
            "pack": self.pack,
            "sentences": self.sentences,
            "chrf": round(self.scores.chrf, 2),
            "bleu": round(self.scores.bleu, 2),
            "chrf_signature": self.scores.chrf_signature,
            "bleu_signature": self.scores.bleu_signature,
            "seconds": round(self.seconds, 4),
            "seconds_per_sentence": round(self.seconds_per_sentence, 6),
            "warmup_seconds": round(self.warmup_seconds, 4),
            "warnings": list(self.warnings),
        }
        if hypotheses:
            data["hypotheses"] = list(self.hypotheses)
        return data


def _read_lines(path: Path, role: str) -> list[str]:
    try:
        size = path.stat().st_size
        if size > MAX_EVAL_FILE_BYTES:
            raise FileTooLarge(
                f"the {role} file {path} has {size} bytes; a test set file may hold at most "
                f"{MAX_EVAL_FILE_BYTES} bytes: take a sample of its lines"
            )
        data = path.read_bytes()
    except OSError as exc:
        raise file_error(exc, f"reading the {role} file {path}", hint="check the path") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequest(
            f"the {role} file {path} is not UTF-8 text (an undecodable byte at offset {exc.start}); convert "
            "it to UTF-8, for example with iconv -f latin1 -t utf-8"
        ) from None
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise InvalidRequest(f"the {role} file {path} is empty: give one sentence a line")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline ends the last line; it does not start another
    lines = [line.removesuffix("\r") for line in lines]
    if len(lines) > MAX_EVAL_LINES:
        raise LimitExceeded(
            f"the {role} file {path} has {len(lines)} lines; a test set may hold at most {MAX_EVAL_LINES}: "
            "take a sample"
        )
    for number, line in enumerate(lines, start=1):
        if len(line) > MAX_TEXT_CHARS:
            raise LimitExceeded(
                f"line {number} of the {role} file {path} has {len(line)} characters; at most "
                f"{MAX_TEXT_CHARS} per line: a test set holds one sentence a line"
            )
    return lines


def read_parallel(source: str | Path, reference: str | Path) -> ParallelSet:
    """The lines of ``source`` and ``reference``, checked: UTF-8, aligned, not empty, within the limits."""
    src_path, ref_path = Path(source), Path(reference)
    sources = _read_lines(src_path, "source")
    references = _read_lines(ref_path, "reference")
    if len(sources) != len(references):
        raise InvalidRequest(
            f"the source file {src_path} has {len(sources)} lines and the reference file {ref_path} has "
            f"{len(references)}: they must be aligned, one sentence a line"
        )
    return ParallelSet(src_path.name, tuple(sources), tuple(references))


def load_testset(name: str, source: str, target: str) -> ParallelSet:
    """One of sacreBLEU's named test sets (``wmt13``, ``wmt20``, ``iwslt17``, ``mtedx/test``...), for the
    pair, through sacreBLEU (downloaded on first use into ``$SACREBLEU``; the first reference when it has
    several)."""
    from sacrebleu import utils
    from sacrebleu.dataset import DATASETS

    if name not in DATASETS:
        raise InvalidRequest(
            f"sacreBLEU knows no test set {name!r}; `sacrebleu --list` names them "
            "(wmt13, wmt20, iwslt17, mtedx/test, ...)"
        )
    src, tgt = get(resolve(source)), get(resolve(target))
    pairs = utils.get_langpairs_for_testset(name)
    wanted = [f"{src.bcp47}-{tgt.bcp47}", f"{src.flores}-{tgt.flores}"]
    langpair = next((p for p in wanted if p in pairs), None)
    if langpair is None:
        raise InvalidRequest(
            f"sacreBLEU's test set {name!r} has no pair {wanted[0]}; it has: {', '.join(sorted(pairs)[:40])}"
        )
    try:
        src_file = utils.get_source_file(name, langpair)
        ref_files = utils.get_reference_files(name, langpair)
    except Exception as exc:  # sacreBLEU raises or exits (SystemExit) when the download fails
        raise InvalidRequest(
            f"sacreBLEU could not fetch the test set {name!r} ({type(exc).__name__}: {exc}); it needs the "
            "internet once, or give the files with --src and --ref"
        ) from None
    except SystemExit:
        raise InvalidRequest(
            f"sacreBLEU could not fetch the test set {name!r}; it needs the internet once, or give the files "
            "with --src and --ref"
        ) from None
    data = read_parallel(src_file, ref_files[0])
    return ParallelSet(f"{name}:{langpair}", data.sources, data.references)


def score(hypotheses: Sequence[str], references: Sequence[str], target: str) -> Scores:
    """sacreBLEU's corpus chrF (defaults: character 6-grams, beta 2) and BLEU (13a tokenisation; the
    language's own tokeniser for Chinese, Japanese and Korean targets)."""
    from sacrebleu.metrics.bleu import BLEU
    from sacrebleu.metrics.chrf import CHRF

    if len(hypotheses) != len(references):
        raise InvalidRequest(f"{len(hypotheses)} hypotheses for {len(references)} references")
    lang = get(resolve(target)).bcp47.split("-")[0]
    chrf = CHRF()
    bleu = BLEU(trg_lang=lang)
    refs = [list(references)]
    chrf_score = chrf.corpus_score(list(hypotheses), refs)
    bleu_score = bleu.corpus_score(list(hypotheses), refs)
    return Scores(chrf_score.score, bleu_score.score, str(chrf.get_signature()), str(bleu.get_signature()))


def pack_pair(engine: Engine, pack: str) -> tuple[str, str]:
    """The one pair a pack translates (an error naming them when it has several)."""
    infos = {info.id: info for info in engine.packs()}
    info = infos.get(pack)
    if info is None:
        raise PackNotInstalled(
            f"pack {pack!r} is not installed; installed: {', '.join(sorted(infos)) or 'none'}"
        )
    if len(info.pairs) != 1:
        shown = ", ".join(f"{s}->{t}" for s, t in info.pairs[:20])
        raise InvalidRequest(
            f"pack {pack!r} translates {len(info.pairs)} pairs ({shown}...): say which with --from and --to"
        )
    return info.pairs[0]


def evaluate(
    engine: Engine,
    data: ParallelSet,
    *,
    source: str,
    target: str,
    tier: Tier | None = None,
    pack: str | None = None,
    context: JobContext | None = None,
) -> EvalResult:
    """Translate ``data``'s source lines from ``source`` into ``target`` and score them (see the module)."""
    options = TranslateOptions(target, source, tier)
    started = time.perf_counter()
    engine.translate_many([data.sources[0]], options, pack=pack)
    warmup = time.perf_counter() - started
    started = time.perf_counter()
    results = engine.translate_many(list(data.sources), options, context=context, pack=pack)
    seconds = time.perf_counter() - started
    hypotheses = tuple(r.translation for r in results)
    taken = results[0].options
    route = next((r.route for r in results if r.route), ())
    warnings = tuple(dict.fromkeys(w for r in results for w in r.warnings))
    return EvalResult(
        testset=data.name,
        source=str(taken.source),
        target=taken.target,
        tier=results[0].tier,
        route=route,
        pack=pack,
        sentences=len(hypotheses),
        scores=score(hypotheses, data.references, taken.target),
        seconds=seconds,
        seconds_per_sentence=seconds / len(hypotheses),
        warmup_seconds=warmup,
        hypotheses=hypotheses,
        warnings=warnings,
    )
