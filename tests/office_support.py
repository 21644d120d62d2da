"""LibreOffice as the external validator of Office outputs: does the file open, and does LibreOffice see
the same elements in it as in the source (paragraphs, tables, cells, images, slides)?

Each file is converted headless to HTML (a fresh user profile per call, so parallel runs never share one)
and the elements of the HTML are counted. Tests that use it skip, saying why, where ``soffice`` is missing
(``make test`` installs ``libreoffice-writer-nogui`` and ``libreoffice-impress-nogui`` on Debian).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import zipfile
from collections import Counter
from pathlib import Path

import lxml.html  # type: ignore[import-untyped]
import pytest
from lxml import etree

SOFFICE = shutil.which("soffice") or shutil.which("libreoffice")
needs_libreoffice = pytest.mark.skipif(
    SOFFICE is None,
    reason="LibreOffice is missing: sudo apt-get install libreoffice-writer-nogui libreoffice-impress-nogui",
)
#: The elements compared between source and output.
COUNTED = ("p", "h1", "h2", "h3", "table", "tr", "td", "img", "a", "li")


def _convert(path: Path, convert_to: str, work: str) -> subprocess.CompletedProcess[str]:
    """LibreOffice, headless with a throwaway profile, converting ``path`` into the folder ``work``."""
    assert SOFFICE is not None
    profile = Path(work) / "profile"
    return subprocess.run(
        [
            SOFFICE,
            f"-env:UserInstallation=file://{profile}",
            "--headless",
            "--norestore",
            "--convert-to",
            convert_to,
            "--outdir",
            work,
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def libreoffice_elements(path: Path, convert_to: str = "html") -> Counter[str]:
    """The elements LibreOffice writes for ``path`` converted to HTML; fails when it cannot open it."""
    with tempfile.TemporaryDirectory(prefix="dragoman-lo-") as work:
        done = _convert(path, convert_to, work)
        converted = sorted(Path(work).glob(f"{path.stem}.*htm*"))
        assert done.returncode == 0 and converted, f"LibreOffice cannot open {path.name}: {done.stderr}"
        root = lxml.html.document_fromstring(converted[0].read_bytes())
        found = Counter(str(e.tag).lower() for e in root.iter() if isinstance(e.tag, str))
        return Counter({tag: found[tag] for tag in COUNTED if found[tag]})


#: The ODF elements compared between source and output (by local name).
ODF_COUNTED = ("page", "frame", "p", "table-cell", "object", "g", "custom-shape")


def libreoffice_odf_elements(path: Path, convert_to: str) -> Counter[str]:
    """The elements of the OpenDocument file LibreOffice makes of ``path`` (``odp``, ``odt``, ``ods``),
    counted in its ``content.xml``; fails when LibreOffice cannot open ``path``."""
    with tempfile.TemporaryDirectory(prefix="dragoman-lo-") as work:
        done = _convert(path, convert_to, work)
        converted = Path(work) / f"{path.stem}.{convert_to}"
        assert done.returncode == 0 and converted.is_file(), (
            f"LibreOffice cannot open {path.name}: {done.stderr}"
        )
        with zipfile.ZipFile(converted) as odf:
            root = etree.fromstring(odf.read("content.xml"))
        found = Counter(etree.QName(e).localname for e in root.iter() if isinstance(e.tag, str))
        return Counter({tag: found[tag] for tag in ODF_COUNTED if found[tag]})
