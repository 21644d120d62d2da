"""Where a file tool may read and write.

The allowed directories are the client's roots when it offers them, else the server's working directory,
plus ``DRAGOMAN_ALLOWED_DIRS``. Every path is resolved (symlinks followed) before it is checked, so a link
inside an allowed directory that points at ``~/.ssh`` is refused like ``~/.ssh`` itself. Writing the
translated file (atomically, never over the input or an existing file unless asked) is the formats
layer's job: :func:`dragoman.pipelines.translate_file.translate_file`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

from dragoman.errors import PathNotAllowed


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
