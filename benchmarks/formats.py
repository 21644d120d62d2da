# mypy: disallow-untyped-calls=False
# (PyMuPDF's functions carry no annotations)
"""Document formats: pages per second end to end through the Apertium backend, next to the time the engine
alone spends on the same texts; the difference is the format layer's cost (target: under 25% of the
engine's time).

Each ``bench_*`` function builds its 50-page document in code, translates it once to warm up (imports,
the Apertium pipeline), then times :func:`dragoman.pipelines.translate_file.translate_file` (best of
:data:`ROUNDS`), and the engine alone on the texts the handler sends, in the same passes. ``main`` runs
every ``bench_*(engine, folder)`` function defined here; each builds its document in ``folder`` and calls
:func:`measure`.

Run: ``.venv/bin/python benchmarks/formats.py`` (about a minute; needs apertium and apertium-eng-spa).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from dragoman.pipelines import translate_file as files
from dragoman.settings import Settings
from dragoman.translation.engine import Engine
from dragoman.translation.types import TranslateOptions

PAGES = 50
ROUNDS = 3
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


def measure(name: str, engine: Engine, document: Path, pages: int) -> None:
    """Time ``translate_file`` on ``document`` against the engine alone, and print the comparison."""
    calls: list[list[str]] = []
    original_call = files.EngineTextTranslator.__call__

    def recording(self: files.EngineTextTranslator, texts: Sequence[str]) -> list[str]:
        calls.append(list(texts))
        return original_call(self, texts)

    ends, alones = [], []
    files.EngineTextTranslator.__call__ = recording  # type: ignore[method-assign]
    try:
        for round_ in range(ROUNDS + 1):  # round 0 warms up
            for path in document.parent.glob(f"{document.stem}.es.*"):
                path.unlink()
            calls.clear()
            start = time.perf_counter()
            files.translate_file(engine, document, "es", source="en")
            end = time.perf_counter() - start
            alone = engine_alone(engine, calls)
            if round_:
                ends.append(end)
                alones.append(alone)
    finally:
        files.EngineTextTranslator.__call__ = original_call  # type: ignore[method-assign]
    end, alone = min(ends), min(alones)
    overhead = (end - alone) / alone
    texts = [t for call in calls for t in call]
    characters = sum(map(len, texts))
    print(f"{name}: {pages} pages, {len(texts)} texts in {len(calls)} call(s), {characters} characters")
    print(f"  end to end (translate_file): {end:.3f} s = {pages / end:.1f} pages/s")
    print(f"  engine alone, same calls:     {alone:.3f} s = {pages / alone:.1f} pages/s")
    print(
        f"  format layer overhead: {end - alone:.3f} s = {overhead:.0%} of the engine's time (target < 25%)"
    )


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
    measure("PDF", engine, build_pdf(tmp / "report.pdf"), PAGES)


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
    measure("DOCX", engine, build_docx(tmp / "report.docx"), PAGES)


def main() -> None:
    if shutil.which("apertium") is None or not Path("/usr/share/apertium/modes/eng-spa.mode").is_file():
        sys.exit("needs Apertium eng-spa: sudo apt-get install apertium apertium-eng-spa")
    benches: list[Callable[[Engine, Path], None]] = [
        function
        for name, function in sorted(globals().items())
        if name.startswith("bench_") and callable(function)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DRAGOMAN_PACKS_DIR"] = str(Path(tmp) / "packs")  # the embedded Apertium backend only
        with Engine(Settings.from_env()) as engine:
            for bench in benches:
                folder = Path(tmp) / bench.__name__
                folder.mkdir()
                bench(engine, folder)


if __name__ == "__main__":
    main()
