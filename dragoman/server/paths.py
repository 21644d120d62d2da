"""Where a file tool may read and write.

The allowed directories are the client's roots (when it offers the roots capability) plus
``DRAGOMAN_ALLOWED_DIRS``, and nothing else: the server's working directory is never implied (hosts such as
Claude Desktop start servers in ``/``), so with neither every file tool refuses. Every path is resolved
(symlinks followed) before it is checked, so a link inside an allowed directory that points at ``~/.ssh`` is
refused like ``~/.ssh`` itself. Writing the translated file (atomically, never over the input or an
existing file unless asked) is the formats layer's job:
:func:`dragoman.pipelines.translate_file.translate_file`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from dragoman.errors import PathNotAllowed


def roots_from_uris(uris: Iterable[str]) -> list[Path]:
    """The local directories of ``file://`` root URIs (percent-decoded; host empty or ``localhost``).

    Other schemes and remote hosts name nothing this machine can check, so they allow nothing."""
    found: list[Path] = []
    for uri in uris:
        parsed = urlparse(str(uri))
        if parsed.scheme.lower() != "file" or parsed.netloc.lower() not in ("", "localhost"):
            continue
        local = Path(url2pathname(parsed.path))  # percent-decoded; drive letters on Windows
        if not local.is_absolute() or "\x00" in str(local):
            continue
        found.append(local)
    return found


def allowed_roots(client_roots: Sequence[Path] | None, configured: Sequence[Path]) -> tuple[Path, ...]:
    """Client roots plus the configured directories, resolved and without duplicates; maybe none.

    A relative directory would mean the server's working directory, which is never implied: it is skipped."""
    given = [p.expanduser() for p in [*(client_roots or ()), *configured]]
    return tuple(dict.fromkeys(p.resolve() for p in given if p.is_absolute()))


#: What a file tool answers when no directory is allowed at all.
NOTHING_ALLOWED = (
    "no directory is allowed for file tools, and none is allowed by default (not even the server's working "
    "directory). Allow one either way: let the client offer it as a root (MCP roots), or set "
    "DRAGOMAN_ALLOWED_DIRS=/path/to/folder in the server's environment (the \"env\" block of the host's MCP "
    "config; several folders separated by the OS path separator), then restart the server."
)


def _describe(roots: Sequence[Path]) -> str:
    return ", ".join(str(r) for r in roots) or "none"


def check_allowed(path: str | Path, roots: Sequence[Path]) -> Path:
    """``path`` resolved (relative paths against the first root), or :class:`PathNotAllowed`."""
    if not roots:
        raise PathNotAllowed(NOTHING_ALLOWED)
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
