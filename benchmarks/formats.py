# mypy: disallow-untyped-calls=False
# (PyMuPDF's functions carry no annotations)
"""Document formats: pages per second end to end through the Apertium backend, next to the time the engine
alone spends on the same texts; the difference is the format layer's cost (target: under 25% of the
engine's time).

Each ``bench_*`` function builds its 50-page document in code and calls :func:`measure`, which runs three
sides alternately, round after round (a first round warms up: imports, the Apertium pipeline):
:func:`dragoman.pipelines.translate_file.translate_file` end to end, the engine alone on the texts the
handler sent (in the same passes), and the format layer alone (below). Each side is timed twice: by the
wall clock, and in CPU seconds of this process and of its child processes (Apertium's pipeline stages,
each read from its own CPU clock). The overhead is the median of the rounds' own ratios (each end to end
against the engine alone beside it, so that a change of load on a shared machine between rounds cancels
out), with their range; pages per second are medians with their min-max. The CPU figure (end to end minus
the engine alone, against the engine alone, both in CPU seconds) holds better on a busy machine: other
work there moves wall times by several times over, and the wall figure with them, far more than the CPU
seconds spent on the same work (the format layer alone against the engine alone, in CPU seconds, is the
steadiest). It counts the format layer's work as if none of it overlapped the engine's, and the engine's
own work as all of its stages' CPU (Apertium's stages run side by side). ``main`` runs every
``bench_*(engine, folder)`` function defined here (or those named with ``--only``); each builds its
document in ``folder``.

The format layer's work is also timed alone, its translations replayed without the engine: the cost the
overhead would be if none of it overlapped the engine's (the PDF handler lays out one group of pages while
the next is translated). ``--profile`` prints where that time goes: cProfile of every thread the handler
runs, each on its own thread's CPU clock (a wall clock would count the time a thread waits for the other,
for a lock or for a core of a busy machine), the functions with the most time of their own.

Run: ``.venv/bin/python benchmarks/formats.py`` (about a minute; needs apertium and apertium-eng-spa);
``--quick`` is a smoke run (10 pages, 2 rounds); ``--help`` for the options.
"""

from __future__ import annotations

import cProfile
import ctypes
import ctypes.util
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


#: Seconds and CPU seconds (this process and its children) that something took.
Clocked = tuple[float, float]
#: The C library, for another process's CPU clock (``clock_getcpuclockid``).
_LIBC = ctypes.CDLL(ctypes.util.find_library("c")) if ctypes.util.find_library("c") else None


def _children(pid: int) -> list[int]:
    """The process ids of ``pid``'s live children (every thread's), from ``/proc``."""
    out: list[int] = []
    for listing in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            out += [int(child) for child in listing.read_text().split()]
        except (OSError, ValueError):
            continue
    return out


def _process_cpu(pid: int) -> float:
    """CPU seconds of a process (its CPU clock, to the nanosecond; ``/proc``'s clock ticks, 10 ms, where
    that clock cannot be read) and of its children that it waited for, or 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        waited = (int(fields[13]) + int(fields[14])) / tick
        own = (int(fields[11]) + int(fields[12])) / tick
    except (OSError, ValueError, IndexError):
        return 0.0
    clock = ctypes.c_int()
    if _LIBC is not None and _LIBC.clock_getcpuclockid(pid, ctypes.byref(clock)) == 0:
        try:
            own = time.clock_gettime(clock.value)
        except OSError:  # (it ended meanwhile)
            pass
    return own + waited


def cpu_seconds() -> float:
    """CPU seconds so far of this process (every thread), of its live descendants (the Apertium pipeline's
    stages, which translate in other processes) and of the children it waited for."""
    total = time.process_time()
    ended = os.times()
    total += ended.children_user + ended.children_system
    pending = _children(os.getpid())
    while pending:
        pid = pending.pop()
        total += _process_cpu(pid)
        pending += _children(pid)
    return total


def clocked(function: Callable[[], object]) -> Clocked:
    """``function()``'s wall seconds and CPU seconds (:func:`cpu_seconds`)."""
    cpu, wall = cpu_seconds(), time.perf_counter()
    function()
    return time.perf_counter() - wall, cpu_seconds() - cpu


def engine_alone(engine: Engine, calls: Sequence[Sequence[str]]) -> Clocked:
    """The time the engine takes on the texts of each translator call, in the passes
    :class:`~dragoman.pipelines.translate_file.EngineTextTranslator` makes."""

    def run() -> None:
        for texts in calls:
            for first in range(0, len(texts), files.TEXTS_PER_PASS):
                engine.translate_many(
                    texts[first : first + files.TEXTS_PER_PASS],
                    TranslateOptions("spa_Latn", source="eng_Latn"),
                )

    return clocked(run)


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


def format_alone(document: Path, translations: dict[str, str]) -> Clocked:
    """The time the document's handler takes with the translations replayed (its outputs removed first)."""
    output = document.with_name(f"{document.stem}.replayed{document.suffix}")
    for path in [output, *document.parent.glob(f"{document.stem}.es.*")]:
        path.unlink(missing_ok=True)
    output.touch()
    return clocked(
        lambda: handlers.find_handler(document).translate(document, output, Replay(translations), None)
    )


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

    def end_to_end() -> Clocked:
        for path in document.parent.glob(f"{document.stem}.es.*"):
            path.unlink()
        calls.clear()
        return clocked(lambda: files.translate_file(engine, document, "es", source="en"))

    sides: dict[str, Callable[[], Clocked]] = {
        "end to end": end_to_end,
        "engine alone": lambda: engine_alone(engine, calls),
        "format alone": lambda: format_alone(document, translations),
    }
    cpus: dict[str, list[float]] = {name: [] for name in sides}

    def wall_of(name: str) -> Callable[[], float]:
        def run() -> float:
            wall, cpu = sides[name]()
            cpus[name].append(cpu)
            return wall

        return run

    files.EngineTextTranslator.__call__ = recording  # type: ignore[method-assign]
    try:
        times = harness.alternate_measured({name: wall_of(name) for name in sides}, ROUNDS, warmup=1)
    finally:
        files.EngineTextTranslator.__call__ = original_call  # type: ignore[method-assign]
    kept = tuple(zip(*(cpus[name][1:] for name in times.names), strict=True))
    cpu = harness.Rounds(times.names, kept, times.order)
    overhead = cpu.paired("end to end", "engine alone", lambda e, a: (e - a) / a)
    wall_overhead = times.paired("end to end", "engine alone", lambda e, a: (e - a) / a)
    replayed = cpu.ratio("format alone", "engine alone")
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
        f"  CPU seconds (this process and Apertium's): end to end {cpu.spread('end to end').text('.2f')}, "
        f"engine alone {cpu.spread('engine alone').text('.2f')}, "
        f"format layer alone {cpu.spread('format alone').text('.2f')}"
    )
    print(
        f"  format layer overhead: {harness.ratio_text(overhead, percent=True)} of the engine's CPU time "
        "(end to end minus engine alone; target < 25%)"
    )
    print(
        f"  the same by the wall clock: {harness.ratio_text(wall_overhead, percent=True)} of the engine's "
        "wall time (moves with the machine's load)"
    )
    print(
        f"  format layer alone, translations replayed: {harness.ratio_text(replayed, percent=True)} of the "
        "engine's CPU time"
    )
    if PROFILE_LINES:
        print(
            f"  where the format layer's time goes ({name} replayed; cProfile of every thread, by own CPU "
            "time):"
        )
        profiled(format_alone, document, translations).sort_stats("tottime").print_stats(PROFILE_LINES)


def profiled(function: Callable[..., object], *args: object) -> pstats.Stats:
    """``function(*args)`` under cProfile, with every thread it starts profiled too (the PDF handler does
    its MuPDF work on a worker thread), each on its own CPU clock: a thread waiting for another, or for a
    core of a busy machine, spends none."""
    profiles = [cProfile.Profile(time.thread_time)]
    original_run = threading.Thread.run

    def run(thread: threading.Thread) -> None:
        profiles.append(cProfile.Profile(time.thread_time))
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
