"""Exports of a translation: the formatted DOCX and the PDF that hosted document jobs offer (spec 2.1,
``export_docx`` and ``export_pdf``).

- A DOCX becomes a PDF through LibreOffice (``soffice --headless --convert-to pdf``) when it is installed:
  each conversion gets a private, throwaway user profile (two conversions never share one), runs in a
  process group of its own and is killed, group and all, after :data:`LIBREOFFICE_TIMEOUT_S`. Without
  LibreOffice, or when it fails, the PDF is laid out with PyMuPDF's ``Story`` (MuPDF's HTML engine, which
  shapes text and falls back to its built-in Noto fonts for other scripts) from the DOCX's body read with
  python-docx: headings stay headings, tables stay tables, paragraphs keep their line breaks.
- Plain translated text (OCR of an image, a PDF's text) becomes a PDF the same way, one paragraph each, and
  a DOCX through :func:`dragoman.documents.docx.write_docx_export` (the format layer's export writer).

Right-to-left targets are set right-to-left in both. MuPDF is not thread-safe: the ``Story`` layout holds
the same process-wide lock as the PDF handler.
"""

from __future__ import annotations

import html
import logging
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from dragoman.errors import DocumentFormatError

log = logging.getLogger("dragoman.exports")

#: Seconds one LibreOffice conversion may take before it is killed (and the PyMuPDF layout used instead).
LIBREOFFICE_TIMEOUT_S = 180
#: The page of a ``Story`` PDF (A4, in points) and its margin.
PAGE_SIZE = "a4"
PAGE_MARGIN = 56.0
#: Pages a ``Story`` PDF may have: a bound on a layout that would not end.
MAX_STORY_PAGES = 20_000
#: The look of a ``Story`` PDF.
STORY_CSS = (
    "body{font-family:sans-serif;font-size:11pt;line-height:1.35}"
    "p{margin:0 0 6pt 0} h1{font-size:20pt} h2{font-size:16pt} h3{font-size:13pt}"
    "h4,h5,h6{font-size:11pt} h1,h2,h3,h4,h5,h6{margin:10pt 0 6pt 0;font-weight:bold}"
    "table{border-collapse:collapse;margin:0 0 8pt 0} td{border:0.5pt solid #777;padding:2pt 4pt;"
    "vertical-align:top}"
)

PdfMethod = Literal["libreoffice", "story"]


def soffice() -> str | None:
    """The LibreOffice binary, or None when it is not installed."""
    return shutil.which("soffice") or shutil.which("libreoffice")


# ----- LibreOffice ---------------------------------------------------------------------------------------
def libreoffice_convert(
    source: Path,
    output: Path,
    *,
    binary: str | None = None,
    convert_to: str = "pdf",
    timeout: float = LIBREOFFICE_TIMEOUT_S,
) -> bool:
    """Convert ``source`` with headless LibreOffice and write the result at ``output``; True when it did.

    False (logged) when LibreOffice is missing, fails, writes nothing or runs past ``timeout`` (then its
    whole process group is killed). The conversion runs in a temporary folder with its own user profile.
    """
    binary = binary or soffice()
    if binary is None:
        return False
    with tempfile.TemporaryDirectory(prefix="dragoman-lo-") as work:
        folder = Path(work)
        profile = folder / "profile"
        outdir = folder / "out"
        outdir.mkdir()
        command = [
            binary,
            f"-env:UserInstallation={profile.as_uri()}",
            "--headless",
            "--norestore",
            "--nologo",
            "--nolockcheck",
            "--convert-to",
            convert_to,
            "--outdir",
            str(outdir),
            str(source),
        ]
        env = dict(os.environ, HOME=str(folder))  # nothing of LibreOffice's lands in the service's home
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group: a timeout kills soffice.bin too
                env=env,
            )
        except OSError as exc:
            log.warning("LibreOffice could not start (%s); the PDF is laid out without it", exc)
            return False
        try:
            _, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            log.warning("LibreOffice ran past %.0f s converting %s; killed", timeout, source.name)
            return False
        finally:
            if process.poll() is None:  # interrupted (a signal, an exception): never leave it running
                _kill_group(process)
        made = sorted(outdir.glob(f"*.{convert_to}"))
        if process.returncode != 0 or not made or made[0].stat().st_size == 0:
            log.warning(
                "LibreOffice could not convert %s (exit %s): %s",
                source.name,
                process.returncode,
                err.decode("utf-8", "replace")[-500:],
            )
            return False
        shutil.move(str(made[0]), output)
    return True


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    process.communicate()


# ----- HTML of a translation -------------------------------------------------------------------------------
def _text_html(text: str) -> str:
    return "<br>".join(html.escape(line, quote=False) for line in text.split("\n"))


def paragraphs_html(paragraphs: Sequence[str], *, rtl: bool = False) -> str:
    """HTML of plain paragraphs (blank ones dropped), line breaks kept."""
    direction = ' dir="rtl"' if rtl else ""
    body = "".join(f"<p{direction}>{_text_html(p)}</p>" for p in paragraphs if p.strip())
    return f"<body{direction}>{body}</body>"


def _heading_level(style_name: str) -> int | None:
    name = style_name.strip().lower()
    if name == "title":
        return 1
    if name.startswith("heading "):
        rest = name.removeprefix("heading ").strip()
        if rest.isdigit():
            return min(max(int(rest), 1), 6)
    return None


def _paragraph_html(paragraph: Any, direction: str) -> str:
    text = paragraph.text
    style = paragraph.style.name if paragraph.style is not None else ""
    level = _heading_level(style or "")
    if level is not None:
        return f"<h{level}{direction}>{_text_html(text)}</h{level}>"
    return f"<p{direction}>{_text_html(text)}</p>" if text.strip() else ""


def _table_html(table: Any, direction: str) -> str:
    rows = []
    for row in table.rows:
        cells = []
        seen: set[int] = set()
        for cell in row.cells:
            if id(cell._tc) in seen:  # a merged cell is listed once per grid column it spans
                continue
            seen.add(id(cell._tc))
            inner = "<br>".join(_text_html(p.text) for p in cell.paragraphs)
            span = int(cell._tc.grid_span)
            colspan = f' colspan="{span}"' if span > 1 else ""
            cells.append(f"<td{colspan}{direction}>{inner}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table>{''.join(rows)}</table>"


def docx_html(path: Path, *, rtl: bool = False) -> str:
    """The body of a DOCX as HTML, in document order: headings (Title, Heading 1-6), paragraphs, tables."""
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(str(path))
    except Exception as exc:  # python-docx raises KeyError, ValueError, BadZipFile… on a damaged file
        raise DocumentFormatError(f"{path.name} cannot be read as DOCX: {exc}") from exc
    direction = ' dir="rtl"' if rtl else ""
    parts = []
    body = document.element.body
    for child in body.iterchildren():
        tag = child.tag.rsplit("}", 1)[-1]
        if tag == "p":
            parts.append(_paragraph_html(Paragraph(child, document), direction))
        elif tag == "tbl":
            parts.append(_table_html(Table(child, document), direction))
    return f"<body{direction}>{''.join(parts)}</body>"


# ----- PDF with PyMuPDF's Story ----------------------------------------------------------------------------
def story_pdf(markup: str, output: Path) -> None:
    """Lay ``markup`` (HTML) out on A4 pages with MuPDF's ``Story`` and write the PDF at ``output``."""
    import pymupdf as _pymupdf

    from dragoman.documents._pdf_pipeline import MUPDF_LOCK

    pymupdf: Any = _pymupdf  # Story and DocumentWriter are not annotated

    with MUPDF_LOCK:
        mediabox = pymupdf.paper_rect(PAGE_SIZE)
        where = mediabox + (PAGE_MARGIN, PAGE_MARGIN, -PAGE_MARGIN, -PAGE_MARGIN)
        story = pymupdf.Story(html=markup, user_css=STORY_CSS)
        writer = pymupdf.DocumentWriter(str(output))
        try:
            more = True
            pages = 0
            while more:
                device = writer.begin_page(mediabox)
                more, filled = story.place(where)
                story.draw(device)
                writer.end_page()
                pages += 1
                if more and (filled.is_empty or pages >= MAX_STORY_PAGES):
                    raise DocumentFormatError(
                        "the translation could not be laid out as PDF (an element taller than a page)"
                    )
        finally:
            writer.close()


def text_pdf(paragraphs: Sequence[str], output: Path, *, rtl: bool = False) -> None:
    """Plain translated paragraphs as a PDF at ``output``."""
    story_pdf(paragraphs_html(paragraphs, rtl=rtl), output)


def docx_pdf(source: Path, output: Path, *, rtl: bool = False, use_libreoffice: bool = True) -> PdfMethod:
    """A PDF of the DOCX ``source`` at ``output``: LibreOffice's when it is installed and converts it, else
    laid out with ``Story`` from the DOCX's headings, paragraphs and tables. Says which made it."""
    if use_libreoffice and soffice() is not None and libreoffice_convert(source, output):
        return "libreoffice"
    story_pdf(docx_html(source, rtl=rtl), output)
    return "story"


def text_docx(paragraphs: Sequence[str], output: Path, *, rtl: bool = False) -> None:
    """Plain translated paragraphs as a DOCX at ``output`` (the format layer's export writer)."""
    from dragoman.documents.docx import write_docx_export

    write_docx_export([p for p in paragraphs if p.strip()], output, rtl=rtl)
