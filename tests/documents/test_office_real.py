"""Real Office files, not written by us, through the DOCX and PPTX handlers, checked by LibreOffice.

The files are the templates of Debian's LibreOffice packages (``libreoffice-common``: a business letter
with its address block and fields, an agenda, a fax cover; the Debian presentation), converted to
DOCX and PPTX by LibreOffice itself in the test's set-up. The translation must open in LibreOffice
with the same elements (paragraphs, frames, table cells, pages) as the source.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest
from office_support import SOFFICE, libreoffice_odf_elements, needs_libreoffice

from dragoman.documents.base import FormatHandler
from dragoman.documents.docx import DocxHandler
from dragoman.documents.pptx import PptxHandler
from dragoman.testing.fakes import FakeTranslator

TEMPLATES = Path("/usr/lib/libreoffice/share/template")
REAL = {
    "Modern_business_letter_serif.ott": (
        TEMPLATES / "common/officorr/Modern_business_letter_serif.ott",
        "docx",
    ),
    "3modern.ott": (TEMPLATES / "common/wizard/agenda/3modern.ott", "docx"),
    "bus-classic_f.ott": (TEMPLATES / "common/wizard/fax/bus-classic_f.ott", "docx"),
    "debian-presentation.otp": (TEMPLATES / "en-US/presnt/debian-presentation.otp", "pptx"),
}
HANDLERS: dict[str, tuple[FormatHandler, str]] = {
    "docx": (DocxHandler(), "odt"),
    "pptx": (PptxHandler(), "odp"),
}

pytestmark = [needs_libreoffice, pytest.mark.slow]


def convert(path: Path, to: str, outdir: Path) -> Path:
    """``path`` converted by LibreOffice to ``to`` (``docx``, ``pptx``) in ``outdir``."""
    assert SOFFICE is not None
    with tempfile.TemporaryDirectory(prefix="dragoman-lo-") as profile:
        done = subprocess.run(
            [SOFFICE, f"-env:UserInstallation=file://{profile}", "--headless", "--norestore",
             "--convert-to", to, "--outdir", str(outdir), str(path)],
            capture_output=True, text=True, timeout=240, check=False,
        )  # fmt: skip
    converted = outdir / f"{path.stem}.{to}"
    assert done.returncode == 0 and converted.is_file(), done.stderr
    return converted


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_template_translates_and_opens_with_the_same_elements(tmp_path: Path, name: str) -> None:
    template, kind = REAL[name]
    if not template.is_file():
        pytest.skip(f"{template} is missing: sudo apt-get install libreoffice-common")
    source = convert(template, kind, tmp_path)
    handler, odf = HANDLERS[kind]
    out = tmp_path / f"translated.{kind}"
    fake = FakeTranslator(str.upper)
    report = handler.translate(source, out, fake, None)
    assert report.segments > 0
    before = libreoffice_odf_elements(source, odf)
    assert before["p"] > 0
    assert libreoffice_odf_elements(out, odf) == before
