"""``engine_status``: what this device can do, where everything lives, what is loaded, whether a daemon runs.

Everything here is cheap: version probes of system binaries run once per process and are cached.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from dragoman import __version__
from dragoman.translation.backends.ctranslate2_backend import cpu_support

if TYPE_CHECKING:
    from dragoman.settings import Settings
    from dragoman.translation.engine import Engine

DAEMON_FILE = "daemon.json"


@functools.lru_cache(maxsize=8)
def _run(*cmd: str) -> str | None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout or done.stderr).strip()


def apertium_status(engine: Engine) -> dict[str, Any]:
    binary = shutil.which("lt-proc")
    version = None
    out = _run("dpkg-query", "-W", "-f=${Version}", "apertium")
    if out and "no packages" not in out:
        version = out
    modes = engine.registry.apertium_modes()
    return {
        "binary": binary,
        "version": version,
        "modes_dirs": [str(p) for p in engine.settings.apertium_modes_dirs],
        "pairs": sorted(f"{m.source}->{m.target}" for m in modes if m.variant is None),
        "variants": sorted(m.path.stem for m in modes if m.variant is not None),
        "enabled": engine.settings.apertium_enabled,
    }


def tesseract_status() -> dict[str, Any]:
    binary = shutil.which("tesseract")
    if binary is None:
        return {"binary": None, "version": None, "languages": [], "install": "apt-get install tesseract-ocr"}
    version_out = _run(binary, "--version") or ""
    langs_out = _run(binary, "--list-langs") or ""
    languages = [line.strip() for line in langs_out.splitlines()[1:] if line.strip()]
    return {
        "binary": binary,
        "version": version_out.splitlines()[0] if version_out else None,
        "languages": languages,
    }


def daemon_file(settings: Settings) -> Path:
    return settings.state_dir / DAEMON_FILE


def daemon_status(settings: Settings, timeout: float = 0.5) -> dict[str, Any]:
    """Whether a local daemon answers: from its port file, else on the configured port."""
    info: dict[str, Any] = {"alive": False, "port": settings.port, "pid": None, "url": None}
    path = daemon_file(settings)
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
        info.update(
            port=int(recorded["port"]), pid=int(recorded["pid"]), host=str(recorded.get("host", "127.0.0.1"))
        )
    except (OSError, ValueError, KeyError, TypeError):
        pass
    host = info.get("host", "127.0.0.1")
    url = f"http://{'[' + host + ']' if ':' in host else host}:{info['port']}"
    headers = {}
    token = settings.serve_token
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        response = httpx.get(f"{url}/health", timeout=timeout, headers=headers)
        info["alive"] = response.status_code in (200, 401)
        info["url"] = url
    except httpx.HTTPError:
        info["alive"] = False
    return info


def engine_status(engine: Engine, *, check_daemon: bool = True) -> dict[str, Any]:
    settings = engine.settings
    store = engine.registry.store
    return {
        "version": __version__,
        "provenance": engine.provenance,
        "platform": {
            "system": platform.system(),
            "machine": platform.machine(),
            "python": sys.version.split()[0],
            "cpu_count": os.cpu_count(),
            **cpu_support(),
        },
        "packs_dir": str(settings.packs_dir),
        "packs": [asdict(info) for info in engine.registry.infos()],
        "broken_packs": [{"path": str(p), "error": why} for p, why in store.broken()],
        "detection": {"model": str(engine.detector.model_path), "loaded": engine.detector.loaded},
        "glossary": {"path": str(settings.glossary_path)},
        "apertium": apertium_status(engine),
        "tesseract": tesseract_status(),
        "daemon": daemon_status(settings) if check_daemon else None,
        "uptime_seconds": round(_uptime(engine), 3),
    }


def _uptime(engine: Engine) -> float:
    import time

    return time.time() - engine.started
