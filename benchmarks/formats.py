# mypy: disallow-untyped-calls=False
# (PyMuPDF's functions carry no annotations)
"""Document formats: pages per second end to end through the Apertium backend, next to the time the engine
alone spends on the same texts; the difference is the format layer's cost (target: under 25% of the
engine's time).

Each ``bench_*`` function builds its 50-page document in code and calls :func:`measure`, which runs three
sides alternately, round after round (a first round warms up: imports, the Apertium pipeline):
:func:`dragoman.pipelines.translate_file.translate_file` end to end, the engine alone on the texts the
handler sent (in the same passes), and the format layer alone (below). The overhead is the median of the
rounds' own ratios (each end to end against the engine alone beside it, so that a change of load on a
shared machine between rounds cancels out), with their range; pages per second are medians with their
min-max. ``main`` runs every ``bench_*(engine, folder)`` function defined here (or those named with
``--only``); each builds its document in ``folder``.

The format layer's work is also timed alone, its translations replayed without the engine: the cost the
overhead would be if none of it overlapped the engine's (the PDF handler lays out one group of pages while
the next is translated). It moves less with the load of a shared machine than the overhead does.
``--profile`` prints where that time goes (cProfile of every thread the handler runs, the functions with
the most time of their own).

Run: ``.venv/bin/python benchmarks/formats.py`` (about a minute; needs apertium and apertium-eng-spa);
``--quick`` is a smoke run (10 pages, 2 rounds); ``--help`` for the options.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import _harness as harness

from dragoman.documents import handlers
from dragoman.pipelines import translate_file as files
from dragoman.settings import Settings
from dragoman.translation.engine import Engine
from dragoman.translation.types import TranslateOptions

PAGES = 50
ROUNDS = 5
#: Functions ``--profile`` prints (0: no profile).
PROFILE_LINES = 0
SUBJECTS = ("The old man", "My sister", "The children", "Our neighbours", "The teacher", "A young woman")
VERBS = ("bought", "found", "painted", "wanted", "sold", "cleaned", "visited", "opened")
OBJECTS = ("a red car", "the small house", "three green apples", "the new school", "a letter", "the window")
TAILS = ("yesterday.", "in the morning.", "because it was cheap.", "before the rain started.", "with care.")


def sentence(i: int) -> str:
    return f"{SUBJECTS[i % 6]} {VERBS[(i // 6) % 8]} {OBJECTS[(i // 3) % 6]} {TAILS[(i // 5) % 5]}"


def paragraph(start: int, sentences: int = 4) -> str:
    return " ".join(sentence(start + k) for k in range(sentences))


def engine_alone(engine: Engine, calls: Sequence[Sequence[str]]) -> float:
    """Seconds the engine takes on the texts of each translator call, in the passes
    :class:`~dragoman.pipelines.translate_file.EngineTextTranslator` makes."""
    start = time.perf_counter()
    for texts in calls:
        for first in range(0, len(texts), files.TEXTS_PER_PASS):
            engine.translate_many(
                texts[first : first + files.TEXTS_PER_PASS], TranslateOptions("spa_Latn", source="eng_Latn")
            )
    return time.perf_counter() - start


class Replay:
    """A translator that answers with translations recorded earlier: the format layer without the engine."""

    def __init__(self, translations: dict[str, str]) -> None:
        self.translations = translations
        self.source: str | None = "eng_Latn"
        self.target = "spa_Latn"

    def __call__(self, texts: Sequence[str], *, done: int = 0, total: int | None = None) -> list[str]:
        return [self.translations.get(text, text) for text in texts]

    def detect_language(self, text: str) -> str | None:
        return self.source


def format_alone(document: Path, translations: dict[str, str]) -> float:
    """Seconds the document's handler takes with the translations replayed (its outputs removed first)."""
    output = document.with_name(f"{document.stem}.replayed{document.suffix}")
    for path in [output, *document.parent.glob(f"{document.stem}.es.*")]:
        path.unlink(missing_ok=True)
    output.touch()
    start = time.perf_counter()
    handlers.find_handler(document).translate(document, output, Replay(translations), None)
    return time.perf_counter() - start


def measure(name: str, engine: Engine, document: Path, pages: int) -> None:
    """Time ``translate_file`` on ``document`` against the engine alone and the format layer alone, and
    print the comparison."""
    calls: list[list[str]] = []
    translations: dict[str, str] = {}
    original_call = files.EngineTextTranslator.__call__

    def recording(self: files.EngineTextTranslator, texts: Sequence[str], **counts: int | None) -> list[str]:
        calls.append(list(texts))
        out = original_call(self, texts, **counts)  # type: ignore[arg-type]
        translations.update(zip(texts, out, strict=True))
        return out

    def end_to_end() -> float:
        for path in document.parent.glob(f"{document.stem}.es.*"):
            path.unlink()
        calls.clear()
        start = time.perf_counter()
        files.translate_file(engine, document, "es", source="en")
        return time.perf_counter() - start

    files.EngineTextTranslator.__call__ = recording  # type: ignore[method-assign]
    try:
        times = harness.alternate_measured(
            {
                "end to end": end_to_end,
                "engine alone": lambda: engine_alone(engine, calls),
                "format alone": lambda: format_alone(document, translations),
            },
            ROUNDS,
            warmup=1,
        )
    finally:
        files.EngineTextTranslator.__call__ = original_call  # type: ignore[method-assign]
    overhead = times.paired("end to end", "engine alone", lambda e, a: (e - a) / a)
    replayed = times.ratio("format alone", "engine alone")
    texts = [t for call in calls for t in call]
    characters = sum(map(len, texts))
    print(
        f"{name}: {pages} pages, {len(texts)} texts in {len(calls)} call(s), {characters} characters; "
        f"{ROUNDS} alternated rounds, median (min-max)"
    )
    print(
        f"  end to end (translate_file): {times.spread('end to end').inverse(pages).text('.1f', ' pages/s')}"
    )
    print(
        f"  engine alone, same calls: {times.spread('engine alone').inverse(pages).text('.1f', ' pages/s')}"
    )
    print(
        f"  format layer overhead: {harness.ratio_text(overhead, percent=True)} of the engine's time "
        "(target < 25%)"
    )
    print(
        f"  format layer alone, translations replayed: {harness.ratio_text(replayed, percent=True)} of the "
        "engine's time (if none of it overlapped)"
    )
    if PROFILE_LINES:
        print(
            f"  where the format layer's time goes ({name} replayed; cProfile of every thread, by own time):"
        )
        profiled(format_alone, document, translations).sort_stats("tottime").print_stats(PROFILE_LINES)


def profiled(function: Callable[..., object], *args: object) -> pstats.Stats:
    """``function(*args)`` under cProfile, with every thread it starts profiled too (the PDF handler does
    its MuPDF work on a worker thread); a thread waiting for another shows as a lock's ``acquire``."""
    profiles = [cProfile.Profile()]
    original_run = threading.Thread.run

    def run(thread: threading.Thread) -> None:
        profiles.append(cProfile.Profile())
        profiles[-1].runcall(original_run, thread)

    threading.Thread.run = run  # type: ignore[method-assign, assignment]
    try:
        profiles[0].runcall(function, *args)
    finally:
        threading.Thread.run = original_run  # type: ignore[method-assign]
    stats = pstats.Stats(profiles[0], stream=sys.stdout)
    for profile in profiles[1:]:
        stats.add(profile)
    return stats


def build_pdf(path: Path, pages: int = PAGES) -> Path:
    """A report: per page a bold heading, four paragraphs, a caption under a drawn figure with an image,
    and a footer with the page number and a link."""
    import io

    import pymupdf
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (80, 50), (30, 120, 200)).save(buffer, "PNG")
    doc = pymupdf.open()
    for number in range(pages):
        page = doc.new_page(width=595, height=842)
        page.insert_text(
            (72, 72), f"Chapter {number + 1}: {sentence(number)[:-1]}", fontsize=16, fontname="hebo"
        )
        y = 95.0
        for k in range(4):
            page.insert_textbox(
                pymupdf.Rect(72, y, 523, y + 90), paragraph(number * 16 + k * 4), fontsize=10.5
            )
            y += 100
        page.draw_rect(pymupdf.Rect(72, 500, 523, 640), color=(0.2, 0.2, 0.2), fill=(0.95, 0.95, 0.9))
        page.insert_image(pymupdf.Rect(250, 510, 345, 600), stream=buffer.getvalue())
        page.insert_text(
            (90, 625), f"Figure {number + 1}. {sentence(number + 7)}", fontsize=9, fontname="tiit"
        )
        page.insert_text((72, 800), f"Page {number + 1}. See our website for more.", fontsize=8)
        page.insert_link(
            {"kind": pymupdf.LINK_URI, "from": pymupdf.Rect(72, 790, 300, 804), "uri": "https://x.org"}
        )
    doc.save(path)
    doc.close()
    return path


def bench_pdf(engine: Engine, tmp: Path) -> None:
    measure("PDF", engine, build_pdf(tmp / "report.pdf", PAGES), PAGES)


def build_docx(path: Path, pages: int = PAGES) -> Path:
    """About a page each: a heading, four paragraphs with a bold and an italic run, and a 3x3 table;
    a header and a footer."""
    import docx
    from docx.enum.text import WD_BREAK

    document = docx.Document()
    section = document.sections[0]
    section.header.paragraphs[0].text = "Quarterly report of the small house company"
    section.footer.paragraphs[0].text = "Confidential. Do not share outside the company."
    for number in range(pages):
        document.add_heading(f"Chapter {number + 1}: {sentence(number)[:-1]}", level=1)
        for k in range(4):
            para = document.add_paragraph(paragraph(number * 16 + k * 4, 3) + " ")
            para.add_run(sentence(number + k)).bold = True
            para.add_run(" " + sentence(number + k + 1)).italic = True
        table = document.add_table(rows=3, cols=3)
        for r, row in enumerate(table.rows):
            for c, cell in enumerate(row.cells):
                cell.text = sentence(number + r * 3 + c)
        document.paragraphs[-1].add_run().add_break(WD_BREAK.PAGE)
    document.save(str(path))
    return path


def bench_docx(engine: Engine, tmp: Path) -> None:
    measure("DOCX", engine, build_docx(tmp / "report.docx", PAGES), PAGES)


def main(argv: Sequence[str] | None = None) -> None:
    global ROUNDS, PROFILE_LINES, PAGES
    benches: dict[str, Callable[[Engine, Path], None]] = {
        name.removeprefix("bench_"): function
        for name, function in sorted(globals().items())
        if name.startswith("bench_") and callable(function)
    }
    parser = harness.parser(__doc__, rounds=ROUNDS, quick_rounds=2)
    parser.add_argument("--only", nargs="+", choices=sorted(benches), help="the formats to measure (all)")
    parser.add_argument(
        "--pages", type=int, default=None, help=f"pages per document ({PAGES}; 10 with --quick)"
    )
    parser.add_argument(
        "--profile",
        type=int,
        nargs="?",
        const=25,
        default=0,
        metavar="LINES",
        help="print where the format layer's time goes (cProfile; 25 functions unless LINES is given)",
    )
    args = parser.parse_args(argv)
    ROUNDS, PROFILE_LINES = harness.rounds_of(args), args.profile
    PAGES = args.pages or (10 if args.quick else PAGES)
    if shutil.which("apertium") is None or not Path("/usr/share/apertium/modes/eng-spa.mode").is_file():
        sys.exit("needs Apertium eng-spa: sudo apt-get install apertium apertium-eng-spa")
    chosen = [benches[name] for name in args.only] if args.only else list(benches.values())
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DRAGOMAN_PACKS_DIR"] = str(Path(tmp) / "packs")  # the embedded Apertium backend only
        with Engine(Settings.from_env()) as engine:
            for bench in chosen:
                folder = Path(tmp) / bench.__name__
                folder.mkdir()
                bench(engine, folder)


if __name__ == "__main__":
    main()
