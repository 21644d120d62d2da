"""Tesseract run as a program: what is installed (kept fresh), one OCR run with its own environment, status.

We run ``tesseract`` ourselves (the image on its standard input, its TSV on its standard output) rather than
through ``pytesseract``, whose only way to give Tesseract an environment is a module global shared by the
whole process. Each run gets :func:`tesseract_environment`; nothing else in the process changes.

What is installed (binary, version, languages, tessdata directory) is asked once and kept by a
:class:`~dragoman.probes.Refreshing` stamped with the binary's path and mtime, ``TESSDATA_PREFIX`` and the
tessdata directory's mtime: ``apt-get install tesseract-ocr-jpn`` while a server runs is seen on its next
call, at the cost of a few ``stat`` calls. :func:`refresh` forgets it explicitly.
"""

from __future__ import annotations

import io
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dragoman.errors import DocumentFormatError, EngineTimeout, OcrUnavailable
from dragoman.probes import Refreshing, mtime, run_program

if TYPE_CHECKING:
    from PIL import Image

log = logging.getLogger("dragoman.documents.ocr")

#: The program run, looked up on ``PATH`` at each call.
TESSERACT = "tesseract"
INSTALL_TESSERACT = "apt-get install tesseract-ocr"
#: How long what is installed is trusted when no stamp changed, in seconds.
PROBE_TTL_SECONDS = 300.0
#: Longest ``tesseract --list-langs`` may take, in seconds.
LIST_TIMEOUT_SECONDS = 30.0
_LISTED_DIR = re.compile(r'"([^"]+)"')
_LANGUAGE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$")


def tesseract_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a Tesseract process is given: ``os.environ`` as it stands (or ``base``), plus
    ``OMP_THREAD_LIMIT=1`` unless the user set it.

    Tesseract's OpenMP threads make it several times slower on machines with few cores (measured here: a
    300 dpi A4 page in 10 s with them, 2.9 s without), and Tesseract's own documentation advises turning
    them off. Only the Tesseract processes see this: the rest of the process (CTranslate2 uses OpenMP too)
    is left alone.
    """
    env = dict(os.environ if base is None else base)
    env.setdefault("OMP_THREAD_LIMIT", "1")
    return env


@dataclass(frozen=True)
class TesseractInfo:
    """An installed Tesseract: its binary, version line, languages (as listed) and tessdata directory."""

    binary: str
    version: str | None
    languages: tuple[str, ...]
    tessdata: str | None


def apt_package(code: str) -> str:
    """The Debian package holding a Tesseract language: ``chi_sim`` -> ``tesseract-ocr-chi-sim``."""
    return "tesseract-ocr-" + code.lower().replace("_", "-")


def _not_installed() -> OcrUnavailable:
    return OcrUnavailable(
        f"Tesseract is not installed (no {TESSERACT!r} on PATH): run `{INSTALL_TESSERACT}` "
        "(plus `apt-get install tesseract-ocr-<lang>` for each language to read)"
    )


def _first_line(done: subprocess.CompletedProcess[str] | None) -> str | None:
    if done is None:
        return None
    out = (done.stdout or done.stderr).strip()
    return out.splitlines()[0] if out else None


def _probe() -> TesseractInfo:
    binary = shutil.which(TESSERACT)
    if binary is None:
        raise _not_installed()
    env = tesseract_environment()
    try:
        listed = subprocess.run(
            [binary, "--list-langs"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=LIST_TIMEOUT_SECONDS,
            env=env,
            check=False,
        )
    except FileNotFoundError as exc:
        raise _not_installed() from exc
    except (OSError, subprocess.SubprocessError) as exc:
        raise OcrUnavailable(
            f"Tesseract cannot list its languages ({exc}); reinstall it: `{INSTALL_TESSERACT}`"
        ) from exc
    if listed.returncode not in (0, 1):  # Tesseract 3 answered --list-langs with 1
        problem = " ".join(listed.stderr.split()) or f"exit status {listed.returncode}"
        raise OcrUnavailable(
            f"Tesseract cannot list its languages ({problem}); reinstall it: `{INSTALL_TESSERACT}`"
        )
    lines = listed.stdout.splitlines()
    header = next((line for line in lines if line.startswith("List of available languages")), "")
    found = _LISTED_DIR.search(header)
    tessdata = found.group(1) if found else os.environ.get("TESSDATA_PREFIX")
    languages = tuple(name for name in (line.strip() for line in lines) if _LANGUAGE.match(name))
    version = _first_line(run_program(binary, "--version", env=env))
    log.debug("Tesseract %s at %s: %d languages in %s", version, binary, len(languages), tessdata)
    return TesseractInfo(binary, version, languages, tessdata)


def _stamp(info: TesseractInfo) -> Hashable:
    binary = shutil.which(TESSERACT)
    return (binary, mtime(binary), os.environ.get("TESSDATA_PREFIX"), mtime(info.tessdata))


_INSTALLED: Refreshing[TesseractInfo] = Refreshing(_probe, stamp=_stamp, ttl=PROBE_TTL_SECONDS)


def installed() -> TesseractInfo:
    """The installed Tesseract, asked again when its binary or tessdata changed; :class:`OcrUnavailable`
    when there is none or it cannot list its languages."""
    return _INSTALLED.get()


def refresh() -> None:
    """Forget what is installed: the next call asks Tesseract again."""
    _INSTALLED.refresh()


def status() -> dict[str, Any]:
    """Tesseract as ``dragoman status`` shows it: binary, version, languages, or how to install it."""
    binary = shutil.which(TESSERACT)
    if binary is None:
        return {"binary": None, "version": None, "languages": [], "install": INSTALL_TESSERACT}
    try:
        info = installed()
    except OcrUnavailable:
        version = _first_line(run_program(binary, "--version", env=tesseract_environment()))
        return {"binary": binary, "version": version, "languages": []}
    return {"binary": info.binary, "version": info.version, "languages": list(info.languages)}


def _columns(tsv: str) -> dict[str, list[Any]]:
    """Tesseract's TSV as columns: numbers as ints (the confidence truncated), the text (last) as strings.

    The same shape and values as ``pytesseract.image_to_data(..., output_type=Output.DICT)``.
    """
    rows = [row.split("\t") for row in tsv.strip().split("\n")]
    if len(rows) < 2:
        return {}
    header = rows.pop(0)
    if len(rows[-1]) < len(header):  # the last word's empty text loses its cell to strip()
        rows[-1].append("")
    text = len(header) - 1
    columns: dict[str, list[Any]] = {}
    for i, head in enumerate(header):
        values: list[Any] = []
        for row in rows:
            if len(row) <= i:
                continue
            if i == text:
                values.append(row[i])
                continue
            try:
                values.append(int(float(row[i])))
            except ValueError:
                values.append(row[i])
        columns[head] = values
    return columns


def image_to_data(
    image: Image.Image, lang: str, timeout: float, *, psm: int | None = None
) -> dict[str, list[Any]]:
    """Tesseract's word boxes for ``image`` (modes ``1``, ``L`` or ``RGB``) read in ``lang``, as columns
    (``psm``: Tesseract's page segmentation mode, when not its default).

    The image goes to Tesseract's standard input as PNM (lossless, no compression to pay for); nothing is
    written to disk. Raises :class:`OcrUnavailable` (Tesseract or a language missing), :class:`EngineTimeout`
    past ``timeout`` seconds (the process is killed), :class:`DocumentFormatError` for any other failure.
    """
    binary = shutil.which(TESSERACT)
    if binary is None:
        refresh()
        raise OcrUnavailable(f"Tesseract is not installed: run `{INSTALL_TESSERACT}`")
    pnm = io.BytesIO()
    image.save(pnm, format="PPM")
    cmd = [binary, "stdin", "stdout", "-l", lang, "-c", "tessedit_create_tsv=1"]
    if psm is not None:
        cmd += ["--psm", str(psm)]
    log.debug("%r", cmd)
    try:
        done = subprocess.run(
            cmd,
            input=pnm.getvalue(),
            capture_output=True,
            timeout=timeout or None,
            env=tesseract_environment(),
            check=False,
        )
    except FileNotFoundError as exc:
        refresh()
        raise OcrUnavailable(f"Tesseract is not installed: run `{INSTALL_TESSERACT}`") from exc
    except subprocess.TimeoutExpired as exc:  # subprocess.run has killed it
        raise EngineTimeout(
            f"OCR took longer than {timeout:g} s; split the image or scan it at a lower resolution"
        ) from exc
    except OSError as exc:
        raise OcrUnavailable(f"Tesseract cannot be run ({exc}); reinstall it: `{INSTALL_TESSERACT}`") from exc
    if done.returncode:
        message = " ".join(done.stderr.decode("utf-8", "replace").splitlines()).strip()
        if "load" in message and "language" in message:
            refresh()
            packages = " ".join(apt_package(code) for code in lang.split("+"))
            raise OcrUnavailable(
                f"Tesseract could not load {lang}: run `apt-get install {packages}` ({message})"
            )
        raise DocumentFormatError(f"Tesseract could not read the image: {message}")
    return _columns(done.stdout.decode("utf-8", "replace"))
