"""Where a file tool may read and write, and how it reads text and writes results safely.

The allowed directories are the client's roots when it offers them, else the server's working directory,
plus ``DRAGOMAN_ALLOWED_DIRS``. Every path is resolved (symlinks followed) before it is checked, so a link
inside an allowed directory that points at ``~/.ssh`` is refused like ``~/.ssh`` itself. Output files are
written atomically (a temporary file in the same directory, then a rename) and never replace the input or,
unless asked, an existing file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from dragoman.engine.errors import (
    DocumentFormatError,
    FileTooLarge,
    InvalidRequest,
    PathNotAllowed,
)
from dragoman.engine.types import ProgressCallback
from dragoman.server._mcp_models import MAX_FILE_BYTES, FileOutput

if TYPE_CHECKING:
    from dragoman.engine.engine import Engine

#: Suffixes translate_file handles until ``dragoman.formats`` lands.
TEXT_SUFFIXES = (".txt", ".md")
#: How much of a file is sniffed for NUL bytes before it is taken for text.
SNIFF_BYTES = 8192


def roots_from_uris(uris: Iterable[str]) -> list[Path]:
    """The local directories of ``file://`` root URIs; other schemes name nothing we can check."""
    found: list[Path] = []
    for uri in uris:
        parsed = urlparse(str(uri))
        if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
            continue
        found.append(Path(unquote(parsed.path)))
    return found


def allowed_roots(
    client_roots: Sequence[Path] | None, configured: Sequence[Path], cwd: Path
) -> tuple[Path, ...]:
    """Client roots (else ``cwd``) plus the configured directories, resolved and without duplicates."""
    base = list(client_roots) if client_roots else [cwd]
    resolved = [p.expanduser().resolve() for p in [*base, *configured]]
    return tuple(dict.fromkeys(resolved))


def _describe(roots: Sequence[Path]) -> str:
    return ", ".join(str(r) for r in roots) or "none"


def check_allowed(path: str | Path, roots: Sequence[Path]) -> Path:
    """``path`` resolved (relative paths against the first root), or :class:`PathNotAllowed`."""
    if not roots:
        raise PathNotAllowed(
            "no directory is allowed for file tools; add one to DRAGOMAN_ALLOWED_DIRS or offer roots "
            "from the client"
        )
    raw = Path(path).expanduser()
    if not raw.is_absolute():
        raw = roots[0] / raw
    resolved = raw.resolve()
    if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
        raise PathNotAllowed(
            f"{path} (resolved to {resolved}) is outside the allowed directories: {_describe(roots)}. "
            "Copy the file into one of them, or add a directory to DRAGOMAN_ALLOWED_DIRS (or to the "
            "client's roots)."
        )
    return resolved


def read_text_file(path: Path, max_bytes: int) -> tuple[str, bool]:
    """The text of a UTF-8 ``.txt``/``.md`` file and whether it began with a byte-order mark."""
    suffix = path.suffix.lower()
    if suffix not in TEXT_SUFFIXES:
        shown = suffix or "(no extension)"
        raise DocumentFormatError(
            f"format {shown} not supported yet; supported: {', '.join(TEXT_SUFFIXES)}. Extract the text and "
            "call translate, or save it as a .txt file."
        )
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise InvalidRequest(f"{path} is not a regular file")
        if size > max_bytes:
            raise FileTooLarge(
                f"{path} has {size} bytes; at most {max_bytes} bytes per file: split it into smaller files"
            )
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise InvalidRequest(
            f"no such file: {path}; check the path (relative paths start at the first allowed directory)"
        ) from exc
    except IsADirectoryError as exc:
        raise InvalidRequest(f"{path} is a directory, not a file") from exc
    except PermissionError as exc:
        raise PathNotAllowed(f"permission denied reading {path}") from exc
    if b"\x00" in data[:SNIFF_BYTES]:
        raise DocumentFormatError(
            f"{path} looks binary (it holds NUL bytes), not {suffix} text; only UTF-8 text is read"
        )
    bom = data.startswith(b"\xef\xbb\xbf")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DocumentFormatError(
            f"{path} is not UTF-8 text (invalid byte at offset {exc.start}); convert it to UTF-8 first"
        ) from exc
    return text, bom


def default_output(path: Path, target_bcp47: str) -> Path:
    """``NAME.<target>.EXT`` next to ``path``."""
    return path.with_name(f"{path.stem}.{target_bcp47}{path.suffix}")


def plan_output(
    input_path: Path,
    output_path: str | Path | None,
    target_bcp47: str,
    roots: Sequence[Path],
    overwrite: bool,
) -> Path:
    """Where the translation goes: checked against the roots, never the input, never an existing file
    unless ``overwrite``."""
    out = check_allowed(output_path, roots) if output_path else default_output(input_path, target_bcp47)
    if out == input_path:
        raise InvalidRequest(
            f"output path {out} is the input file; translate_file never overwrites its input: "
            "choose another output_path"
        )
    if out.exists() and not overwrite:
        raise InvalidRequest(
            f"{out} already exists; pass overwrite=true to replace it, or choose another output_path"
        )
    if out.exists() and not out.is_file():
        raise InvalidRequest(f"{out} exists and is not a regular file")
    if not out.parent.is_dir():
        raise InvalidRequest(
            f"the directory of {out} does not exist; create it or choose another output_path"
        )
    return out


def write_atomic(path: Path, data: bytes, overwrite: bool) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory.

    Without ``overwrite`` the final step is a hard link, which fails if ``path`` appeared meanwhile, so an
    existing file is never replaced even in a race.
    """
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if overwrite:
            os.replace(tmp, path)
            return
        try:
            os.link(tmp, path)
        except FileExistsError as exc:
            raise InvalidRequest(f"{path} already exists; pass overwrite=true to replace it") from exc
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
            if path.exists():  # no hard links here (FAT, some mounts): check, then rename
                raise InvalidRequest(f"{path} already exists; pass overwrite=true to replace it") from exc
            os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def translate_text_file(
    engine: Engine,
    path: str,
    target: str,
    roots: Sequence[Path],
    *,
    source: str | None = None,
    output_path: str | None = None,
    overwrite: bool = False,
    tier: str | None = None,
    progress: ProgressCallback | None = None,
) -> FileOutput:
    """Translate a UTF-8 .txt/.md file inside ``roots`` into ``NAME.<target>.EXT`` (or ``output_path``)."""
    from dragoman.engine.languages import get, resolve

    started = time.perf_counter()
    input_path = check_allowed(path, roots)
    text, bom = read_text_file(input_path, MAX_FILE_BYTES)
    target_code = resolve(target)
    out_path = plan_output(input_path, output_path, get(target_code).bcp47, roots, overwrite)
    result = engine.translate(text, target_code, source, tier, None, progress)
    data = (b"\xef\xbb\xbf" if bom else b"") + result.translation.encode("utf-8")
    try:
        write_atomic(out_path, data, overwrite)
    except PermissionError as exc:
        raise PathNotAllowed(f"permission denied writing {out_path}; choose another output_path") from exc
    except OSError as exc:
        raise InvalidRequest(f"cannot write {out_path}: {exc.strerror or exc}") from exc
    return FileOutput(
        input_path=str(input_path),
        output_path=str(out_path),
        format=input_path.suffix.lstrip(".").lower(),
        source=result.source,
        target=result.target,
        characters=len(text),
        provenance=result.provenance,
        seconds=round(time.perf_counter() - started, 6),
        warnings=list(result.warnings),
    )
