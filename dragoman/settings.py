"""Settings read from ``DRAGOMAN_*`` environment variables, with typed casts; nothing happens at import.

Directories are created when first needed (by the code that writes into them), never here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

from dragoman.errors import InvalidRequest
from dragoman.limits import TIERS

APP_NAME = "dragoman"
DEFAULT_ARGOS_INDEX_URL = "https://raw.githubusercontent.com/argosopentech/argospm-index/main/index.json"
DEFAULT_PORT = 8787


def _path(env: Mapping[str, str], name: str, default: Path) -> Path:
    value = env.get(name, "").strip()
    return Path(value).expanduser() if value else default


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    value = env.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise InvalidRequest(f"{name} must be an integer, got {value!r}") from exc


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    value = env.get(name, "").strip()
    if not value:
        return default
    try:
        return float(value)
    except ValueError as exc:
        raise InvalidRequest(f"{name} must be a number, got {value!r}") from exc


def _paths(env: Mapping[str, str], name: str) -> tuple[Path, ...]:
    value = env.get(name, "").strip()
    return tuple(Path(p).expanduser() for p in value.split(os.pathsep) if p.strip())


@dataclass(frozen=True)
class Settings:
    """Where dragoman keeps its data and how it behaves; build with :meth:`from_env`."""

    packs_dir: Path
    glossary_path: Path
    default_tier: str = "best"
    port: int = DEFAULT_PORT
    argos_index_url: str = DEFAULT_ARGOS_INDEX_URL
    apertium_modes_dirs: tuple[Path, ...] = (
        Path("/usr/share/apertium/modes"),
        Path("/usr/local/share/apertium/modes"),
    )
    apertium_enabled: bool = True
    detection_model: Path | None = None
    allowed_dirs: tuple[Path, ...] = ()
    state_dir: Path = field(default_factory=lambda: Path(platformdirs.user_state_dir(APP_NAME)))
    # Largest archive a pack may expand to (bytes); NLLB-200 3.3B in int8 is about 3.5 GB.
    max_pack_bytes: int = 8 * 1024**3
    # CTranslate2 threads: requests translated in parallel (inter) and threads per request (intra).
    # One thread per request measured fastest on a shared 2-core machine (OpenMP spinning costs more than
    # it gains on small batches); parallel requests then use the other cores.
    inter_threads: int = field(default_factory=lambda: max(1, min(4, os.cpu_count() or 1)))
    intra_threads: int = 1
    # The local daemon: engine threads, waiting places before 503, seconds per request before 504,
    # browser origins CORS lets in, and the bearer token (spec 5.5: SERVICE_SERVE_TOKEN).
    serve_workers: int = field(default_factory=lambda: max(1, min(4, os.cpu_count() or 1)))
    serve_queue: int = 64
    serve_timeout: float = 60.0
    allowed_origins: tuple[str, ...] = ()
    serve_token: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        tier = env.get("DRAGOMAN_TIER", "best").strip() or "best"
        if tier not in TIERS:
            raise InvalidRequest(f"DRAGOMAN_TIER must be one of {', '.join(TIERS)}, got {tier!r}")
        modes = _paths(env, "DRAGOMAN_APERTIUM_MODES")
        detection = env.get("DRAGOMAN_DETECTION_MODEL", "").strip()
        return cls(
            packs_dir=_path(env, "DRAGOMAN_PACKS_DIR", Path(platformdirs.user_data_dir(APP_NAME)) / "packs"),
            glossary_path=_path(
                env, "DRAGOMAN_GLOSSARY", Path(platformdirs.user_config_dir(APP_NAME)) / "glossary.json"
            ),
            default_tier=tier,
            port=_int(env, "DRAGOMAN_PORT", DEFAULT_PORT),
            argos_index_url=env.get("DRAGOMAN_ARGOS_INDEX_URL", "").strip() or DEFAULT_ARGOS_INDEX_URL,
            apertium_modes_dirs=modes or cls.apertium_modes_dirs,
            apertium_enabled=env.get("DRAGOMAN_APERTIUM", "1").strip().lower()
            not in ("0", "false", "no", "off"),
            detection_model=Path(detection).expanduser() if detection else None,
            allowed_dirs=_paths(env, "DRAGOMAN_ALLOWED_DIRS"),
            state_dir=_path(env, "DRAGOMAN_STATE_DIR", Path(platformdirs.user_state_dir(APP_NAME))),
            max_pack_bytes=_int(env, "DRAGOMAN_MAX_PACK_BYTES", 8 * 1024**3),
            inter_threads=_int(env, "DRAGOMAN_INTER_THREADS", max(1, min(4, os.cpu_count() or 1))),
            intra_threads=_int(env, "DRAGOMAN_INTRA_THREADS", 1),
            serve_workers=_int(env, "DRAGOMAN_SERVE_WORKERS", max(1, min(4, os.cpu_count() or 1))),
            serve_queue=_int(env, "DRAGOMAN_SERVE_QUEUE", 64),
            serve_timeout=_float(env, "DRAGOMAN_SERVE_TIMEOUT", 60.0),
            allowed_origins=tuple(
                o for o in env.get("DRAGOMAN_ALLOWED_ORIGINS", "").replace(" ", ",").split(",") if o
            ),
            serve_token=env.get("SERVICE_SERVE_TOKEN") or None,
        )
