"""The daemon's PID/port file, and whether a daemon answers: what ``dragoman status`` and clients read.

:func:`dragoman.server.daemon.app.serve` writes ``{pid, port, host, started}`` to :func:`daemon_file`
atomically once it listens, and removes it when it stops (only if it is still its own: another daemon may
have started since). :func:`daemon_status` reads it (else falls back to the configured port) and asks the
daemon's ``/health``. Light on purpose: it imports neither Starlette nor uvicorn.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from dragoman.documents import partials

if TYPE_CHECKING:
    from dragoman.settings import Settings

DAEMON_FILE = "daemon.json"
#: How long :func:`daemon_status` waits for ``/health``, in seconds.
HEALTH_TIMEOUT_SECONDS = 0.5


def daemon_file(settings: Settings) -> Path:
    """Where the daemon of these settings records its PID and port."""
    return settings.local.state_dir / DAEMON_FILE


def write_daemon_file(path: Path, *, host: str, port: int) -> None:
    """Atomically write ``{pid, port, host, started}`` for ``dragoman status`` and ``engine_status``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"pid": os.getpid(), "port": port, "host": host, "started": time.time()}
    # A temporary of dragoman's naming: one left by a kill -9 is swept on the next start (partials).
    tmp = partials.create(path)
    try:
        with tmp.open("w", encoding="utf-8") as handle:
            json.dump(data, handle)
        os.replace(tmp, path)
        partials.release(tmp)
    except BaseException:
        partials.discard(tmp)
        raise


def remove_daemon_file(path: Path) -> None:
    """Remove the file if it is still ours (another daemon may have started since)."""
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def read_daemon_file(path: Path) -> dict[str, Any] | None:
    """``{pid, port, host}`` as a daemon recorded them, or None when there is no readable file."""
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
        return {
            "port": int(recorded["port"]),
            "pid": int(recorded["pid"]),
            "host": str(recorded.get("host", "127.0.0.1")),
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def daemon_status(settings: Settings, timeout: float = HEALTH_TIMEOUT_SECONDS) -> dict[str, Any]:
    """Whether a local daemon answers: from its port file, else on the configured port.

    ``{"alive", "port", "pid", "url"}`` (and ``host`` when the file names it); ``url`` is set when the
    daemon answered. A daemon that wants a token answers 401 without one: it is alive all the same.
    """
    info: dict[str, Any] = {"alive": False, "port": settings.daemon.port, "pid": None, "url": None}
    recorded = read_daemon_file(daemon_file(settings))
    if recorded is not None:
        info.update(recorded)
    host = info.get("host", "127.0.0.1")
    url = f"http://{'[' + host + ']' if ':' in host else host}:{info['port']}"
    headers = {}
    token = settings.daemon.token
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        response = httpx.get(f"{url}/health", timeout=timeout, headers=headers)
        info["alive"] = response.status_code in (200, 401)
        info["url"] = url
    except httpx.HTTPError:
        info["alive"] = False
    return info
