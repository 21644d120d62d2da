"""Tesseract run as a program, against a stand-in ``tesseract`` on PATH: what each run is given (its own
environment, the image as PNM on standard input), how its TSV and failures come back, and what is installed
seen afresh when the tessdata directory changes while the process runs."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image

from dragoman.documents import _tesseract, ocr
from dragoman.errors import DocumentFormatError, EngineTimeout, OcrUnavailable

pytestmark = pytest.mark.skipif(shutil.which("sh") is None, reason="the stand-in Tesseract is a shell script")

HEADER = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext"
ROWS = (
    "1\t1\t0\t0\t0\t0\t0\t0\t200\t60\t-1\t",
    "5\t1\t1\t1\t1\t1\t10\t10\t50\t20\t96.7\tHello",
    "5\t1\t1\t1\t1\t2\t70\t12\t60\t18\t91.2\tworld.",
)
SCRIPT = """#!/bin/sh
case "$1" in
  --list-langs)
    echo run >> "{log}.lists"
    echo "List of available languages in \\"{tessdata}/\\" (n):"
    for f in "{tessdata}"/*.traineddata; do [ -e "$f" ] && basename "$f" .traineddata; done
    ;;
  --version)
    echo "tesseract 9.9.9-stand-in"
    echo " leptonica-0"
    ;;
  stdin)
    cat > "{log}.image"
    echo "OMP_THREAD_LIMIT=$OMP_THREAD_LIMIT" > "{log}"
    echo "$@" >> "{log}"
    case "$STAND_IN" in
      nolang)
        echo "Failed loading language 'jpn'" >&2
        echo "Tesseract couldn't load any languages!" >&2
        exit 1 ;;
      broken) echo "Error in pixReadMem: Unknown format" >&2; echo "Image cannot be read!" >&2; exit 1 ;;
      slow) exec sleep 30 ;;
    esac
    printf '%s\\n' {rows}
    ;;
esac
"""


@dataclass
class StandIn:
    binary: Path
    tessdata: Path
    log: Path

    def lists(self) -> int:
        """How many times ``--list-langs`` ran."""
        path = Path(f"{self.log}.lists")
        return len(path.read_text().splitlines()) if path.exists() else 0

    def install(self, language: str, mtime_ns: int) -> None:
        (self.tessdata / f"{language}.traineddata").write_bytes(b"")
        os.utime(self.tessdata, ns=(mtime_ns, mtime_ns))  # a new mtime whatever the file system's resolution


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIn]:
    bin_dir, tessdata = tmp_path / "bin", tmp_path / "tessdata"
    bin_dir.mkdir()
    tessdata.mkdir()
    (tessdata / "eng.traineddata").write_bytes(b"")
    os.utime(tessdata, ns=(10**18, 10**18))
    log = tmp_path / "run.log"
    rows = " ".join(f"'{row}'" for row in (HEADER, *ROWS))
    binary = bin_dir / "tesseract"
    binary.write_text(SCRIPT.format(log=log, tessdata=tessdata, rows=rows))
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("OMP_THREAD_LIMIT", raising=False)
    monkeypatch.delenv("TESSDATA_PREFIX", raising=False)
    yield StandIn(binary, tessdata, log)
    ocr.refresh()


def test_status_and_languages_come_from_the_binary_on_path(stand_in: StandIn) -> None:
    assert ocr.status() == {
        "binary": str(stand_in.binary),
        "version": "tesseract 9.9.9-stand-in",
        "languages": ["eng"],
    }
    assert ocr.installed_languages() == {"eng"}
    assert _tesseract.installed().tessdata == f"{stand_in.tessdata}/"


def test_what_is_installed_is_asked_once_while_nothing_changes(stand_in: StandIn) -> None:
    for _ in range(5):
        ocr.installed_languages()
        ocr.status()
    assert stand_in.lists() == 1


def test_a_language_installed_while_running_is_seen_without_a_restart(stand_in: StandIn) -> None:
    assert ocr.installed_languages() == {"eng"}
    with pytest.raises(OcrUnavailable, match="tesseract-ocr-jpn"):
        ocr.check_languages("jpn")
    stand_in.install("jpn", 2 * 10**18)  # apt-get install tesseract-ocr-jpn, from another shell
    assert ocr.installed_languages() == {"eng", "jpn"}
    ocr.check_languages("eng+jpn")
    assert stand_in.lists() == 2


def test_refresh_asks_again(stand_in: StandIn) -> None:
    ocr.installed_languages()
    ocr.refresh()
    ocr.installed_languages()
    assert stand_in.lists() == 2


def test_a_run_gets_its_own_environment_and_the_image_as_pnm(stand_in: StandIn) -> None:
    image = Image.new("L", (30, 20), 255)
    image.putpixel((3, 4), 0)
    blocks = ocr.ocr_image(image, "eng")
    assert [b.text for b in blocks] == ["Hello world."]
    assert blocks[0].bbox == (10, 10, 130, 30)
    assert blocks[0].confidence == (96 + 91) / 2  # confidences truncated, as pytesseract gave them
    env_line, args = stand_in.log.read_text().splitlines()
    assert env_line == "OMP_THREAD_LIMIT=1" and "OMP_THREAD_LIMIT" not in os.environ
    assert args == "stdin stdout -l eng -c tessedit_create_tsv=1"
    with Image.open(f"{stand_in.log}.image") as sent:
        assert sent.format == "PPM" and sent.mode == "L" and sent.tobytes() == image.tobytes()


def test_the_users_thread_limit_is_kept(stand_in: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_THREAD_LIMIT", "3")
    ocr.ocr_image(Image.new("RGB", (10, 10), "white"), "eng")
    assert stand_in.log.read_text().splitlines()[0] == "OMP_THREAD_LIMIT=3"


def test_a_language_tesseract_cannot_load_names_its_package(
    stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in.install("jpn", 2 * 10**18)
    monkeypatch.setenv("STAND_IN", "nolang")
    with pytest.raises(
        OcrUnavailable, match=r"could not load eng\+jpn: run `apt-get install tesseract-ocr-eng "
    ):
        ocr.ocr_image(Image.new("L", (10, 10), 255), "eng+jpn")
    assert stand_in.lists() == 1
    ocr.installed_languages()
    assert stand_in.lists() == 2  # the failure made it ask again


def test_an_image_tesseract_cannot_read_is_a_format_error(
    stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STAND_IN", "broken")
    with pytest.raises(DocumentFormatError, match="Unknown format Image cannot be read!"):
        ocr.ocr_image(Image.new("L", (10, 10), 255), "eng")


def test_a_run_past_its_timeout_is_killed(stand_in: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN", "slow")
    with pytest.raises(EngineTimeout, match="longer than 0.2 s"):
        _tesseract.image_to_data(Image.new("L", (10, 10), 255), "eng", 0.2)


def test_no_tesseract_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert ocr.status() == {
        "binary": None,
        "version": None,
        "languages": [],
        "install": "apt-get install tesseract-ocr",
    }
    with pytest.raises(OcrUnavailable, match="Tesseract is not installed"):
        _tesseract.image_to_data(Image.new("L", (10, 10), 255), "eng", 10)


def test_tsv_columns_as_pytesseract_gave_them() -> None:
    tsv = "\n".join((HEADER, *ROWS)) + "\n"
    columns = _tesseract._columns(tsv)
    assert columns["text"] == ["", "Hello", "world."]
    assert columns["conf"] == [-1, 96, 91] and columns["left"] == [0, 10, 70]
    assert _tesseract._columns(HEADER + "\n") == {}
