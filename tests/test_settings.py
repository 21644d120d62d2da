"""Settings in sections, read from ``DRAGOMAN_*`` variables by the fields themselves."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import platformdirs
import pytest

from dragoman.errors import ConfigError
from dragoman.settings import (
    DEFAULT_ARGOS_INDEX_URL,
    DaemonSettings,
    EngineSettings,
    HostedSettings,
    LocalSettings,
    Settings,
)

SECTIONS: dict[str, type[Any]] = {
    "engine": EngineSettings,
    "local": LocalSettings,
    "daemon": DaemonSettings,
    "hosted": HostedSettings,
}
HOME = Path("~").expanduser()
SEP = os.pathsep

#: (variable, value, section, field, what the field becomes): one row or more for every variable.
CASTS: list[tuple[str, str, str, str, object]] = [
    ("DRAGOMAN_PACKS_DIR", "~/packs", "engine", "packs_dir", HOME / "packs"),
    ("DRAGOMAN_TIER", "fast", "engine", "default_tier", "fast"),
    ("DRAGOMAN_ARGOS_INDEX_URL", "file:///tmp/index.json", "engine", "argos_index_url", "file:///tmp/index.json"),
    ("DRAGOMAN_APERTIUM", "0", "engine", "apertium_enabled", False),
    ("DRAGOMAN_APERTIUM", "Off", "engine", "apertium_enabled", False),
    ("DRAGOMAN_APERTIUM", "false", "engine", "apertium_enabled", False),
    ("DRAGOMAN_APERTIUM", "yes", "engine", "apertium_enabled", True),
    ("DRAGOMAN_APERTIUM_MODES", f"/a{SEP}~/m", "engine", "apertium_modes_dirs", (Path("/a"), HOME / "m")),
    ("DRAGOMAN_DETECTION_MODEL", "/m/lid.176.ftz", "engine", "detection_model", Path("/m/lid.176.ftz")),
    ("DRAGOMAN_MAX_PACK_BYTES", "1048576", "engine", "max_pack_bytes", 1048576),
    ("DRAGOMAN_INTER_THREADS", "3", "engine", "inter_threads", 3),
    ("DRAGOMAN_INTRA_THREADS", "0", "engine", "intra_threads", 0),
    ("DRAGOMAN_MODEL_MEMORY_BUDGET", "2000000000", "engine", "model_memory_budget", 2_000_000_000),
    ("DRAGOMAN_MODEL_IDLE_SECONDS", "1.5", "engine", "model_idle_seconds", 1.5),
    ("DRAGOMAN_APERTIUM_MAX_PIPELINES", "2", "engine", "apertium_max_pipelines", 2),
    ("DRAGOMAN_APERTIUM_IDLE_SECONDS", "0", "engine", "apertium_idle_seconds", 0.0),
    ("DRAGOMAN_BATCHING", "0", "engine", "batching", False),
    ("DRAGOMAN_DEVICE", "cpu", "engine", "device", "cpu"),
    ("DRAGOMAN_BATCH_WINDOW_MS", "0.5", "engine", "batch_window_ms", 0.5),
    ("DRAGOMAN_BATCH_WINDOW_MS", "1000", "engine", "batch_window_ms", 1000.0),
    ("DRAGOMAN_BATCH_MAX_SEGMENTS", "16", "engine", "batch_max_segments", 16),
    ("DRAGOMAN_BATCH_MAX_SEGMENTS", "4096", "engine", "batch_max_segments", 4096),
    ("DRAGOMAN_BATCH_MAX_CHARS", "2000", "engine", "batch_max_chars", 2000),
    ("DRAGOMAN_BATCH_MAX_QUEUED", "1", "engine", "batch_max_queued", 1),
    ("DRAGOMAN_GLOSSARY", "/g/glossary.json", "local", "glossary_path", Path("/g/glossary.json")),
    ("DRAGOMAN_ALLOWED_DIRS", f"/x{SEP} {SEP}/y", "local", "allowed_dirs", (Path("/x"), Path("/y"))),
    ("DRAGOMAN_MCP_ALLOW_INSTALLS", "yes", "local", "mcp_allow_installs", True),
    ("DRAGOMAN_STATE_DIR", "/run/state", "local", "state_dir", Path("/run/state")),
    ("DRAGOMAN_PORT", "0", "daemon", "port", 0),
    ("DRAGOMAN_PORT", " 9000 ", "daemon", "port", 9000),
    ("DRAGOMAN_SERVE_WORKERS", "2", "daemon", "workers", 2),
    ("DRAGOMAN_SERVE_QUEUE", "0", "daemon", "queue", 0),
    ("DRAGOMAN_SERVE_TIMEOUT", "2.5", "daemon", "timeout", 2.5),
    ("DRAGOMAN_SERVE_MAX_CONNECTIONS", "20", "daemon", "max_connections", 20),
    ("DRAGOMAN_SERVE_HEADER_TIMEOUT", "2.5", "daemon", "header_timeout", 2.5),
    ("DRAGOMAN_SERVE_KEEP_ALIVE", "1", "daemon", "keep_alive", 1.0),
    ("DRAGOMAN_HOSTED_DIR", "~/hosted", "hosted", "data_dir", HOME / "hosted"),
    ("DRAGOMAN_DB_URL", "sqlite:////srv/h.db", "hosted", "db_url", "sqlite:////srv/h.db"),
    ("DRAGOMAN_DB_POOL_SIZE", "3", "hosted", "db_pool_size", 3),
    ("DRAGOMAN_DB_MAX_OVERFLOW", "0", "hosted", "db_max_overflow", 0),
    ("DRAGOMAN_DB_POOL_TIMEOUT", "2.5", "hosted", "db_pool_timeout", 2.5),
    ("DRAGOMAN_DISPATCH", "inprocess", "hosted", "dispatch", "inprocess"),
    ("DRAGOMAN_RATELIMIT_URI", "memory://", "hosted", "ratelimit_uri", "memory://"),
    ("DRAGOMAN_STORE_URL", "file:///srv/files", "hosted", "store_url", "file:///srv/files"),
    ("DRAGOMAN_S3_ENDPOINT", "http://127.0.0.1:9000", "hosted", "s3_endpoint", "http://127.0.0.1:9000"),
    ("DRAGOMAN_S3_REGION", "eu-west-1", "hosted", "s3_region", "eu-west-1"),
    ("DRAGOMAN_HOSTED_HOST", "0.0.0.0", "hosted", "hosted_host", "0.0.0.0"),
    ("DRAGOMAN_HOSTED_PORT", "9100", "hosted", "hosted_port", 9100),
    ("DRAGOMAN_BASE_URL", "https://api.example.com", "hosted", "base_url", "https://api.example.com"),
    ("DRAGOMAN_RUNNER_WORKERS", "4", "hosted", "runner_workers", 4),
    ("DRAGOMAN_LEASE_SECONDS", "2.5", "hosted", "lease_seconds", 2.5),
    ("DRAGOMAN_JOB_ATTEMPTS", "1", "hosted", "job_attempts", 1),
    ("DRAGOMAN_WEBHOOKS_ALLOW_PRIVATE", "1", "hosted", "webhooks_allow_private", True),
    ("DRAGOMAN_RESULTS_RETENTION_DAYS", "0.5", "hosted", "results_retention_days", 0.5),
    ("DRAGOMAN_UPLOADS_RETENTION_DAYS", "1", "hosted", "uploads_retention_days", 1.0),
    ("DRAGOMAN_ALLOWED_ORIGINS", "http://a, http://b", "daemon", "allowed_origins", ("http://a", "http://b")),
    ("SERVICE_SERVE_TOKEN", " s3cret ", "daemon", "token", "s3cret"),
]  # fmt: skip


def _variables() -> dict[str, tuple[str, str]]:
    """variable -> (section, field) for every field read from the environment."""
    return {
        f.metadata["env"]: (name, f.name)
        for name, section in SECTIONS.items()
        for f in dataclasses.fields(section)
        if "env" in f.metadata
    }


def test_defaults_are_written_once_and_read_when_nothing_is_set() -> None:
    settings = Settings.from_env({})
    assert settings == Settings() == Settings.build()
    engine, local, daemon = settings.engine, settings.local, settings.daemon
    assert engine.packs_dir == Path(platformdirs.user_data_dir("dragoman")) / "packs"
    assert engine.default_tier == "best" and engine.argos_index_url == DEFAULT_ARGOS_INDEX_URL
    assert engine.apertium_enabled and engine.apertium_modes_dirs[0] == Path("/usr/share/apertium/modes")
    assert engine.detection_model is None and engine.max_pack_bytes == 8 * 1024**3
    assert engine.inter_threads == max(1, min(4, os.cpu_count() or 1)) and engine.intra_threads == 1
    assert engine.model_memory_budget == 0 and engine.model_idle_seconds == 0.0
    assert local.glossary_path == Path(platformdirs.user_config_dir("dragoman")) / "glossary.json"
    assert local.allowed_dirs == () and local.state_dir == Path(platformdirs.user_state_dir("dragoman"))
    assert (daemon.port, daemon.queue, daemon.timeout) == (8787, 64, 60.0)
    assert daemon.workers == engine.inter_threads and daemon.allowed_origins == () and daemon.token is None


def test_every_variable_has_a_cast_case() -> None:
    assert {row[0] for row in CASTS} == set(_variables())
    assert all(_variables()[row[0]] == (row[2], row[3]) for row in CASTS)


@pytest.mark.parametrize(("variable", "value", "section", "name", "expected"), CASTS)
def test_each_variable_is_cast(variable: str, value: str, section: str, name: str, expected: object) -> None:
    settings = Settings.from_env({variable: value})
    assert getattr(getattr(settings, section), name) == expected
    untouched = Settings.from_env({})
    for other in SECTIONS:
        if other != section:
            assert getattr(settings, other) == getattr(untouched, other)


@pytest.mark.parametrize("variable", sorted(_variables()))
def test_a_blank_variable_keeps_the_default(variable: str) -> None:
    assert Settings.from_env({variable: "  "}) == Settings.from_env({})


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("DRAGOMAN_TIER", "bogus", "must be one of best, fast, got 'bogus'"),
        ("DRAGOMAN_TIER", "BEST", "must be one of"),
        ("DRAGOMAN_PORT", "abc", "must be an integer, got 'abc'"),
        ("DRAGOMAN_PORT", "70000", "from 0 to 65535"),
        ("DRAGOMAN_PORT", "-1", "from 0 to 65535"),
        ("DRAGOMAN_SERVE_WORKERS", "0", "at least 1"),
        ("DRAGOMAN_SERVE_QUEUE", "-1", "at least 0"),
        ("DRAGOMAN_SERVE_TIMEOUT", "0", "more than 0"),
        ("DRAGOMAN_SERVE_TIMEOUT", "soon", "must be a number"),
        ("DRAGOMAN_SERVE_TIMEOUT", "nan", "finite"),
        ("DRAGOMAN_MAX_PACK_BYTES", "1.5", "must be an integer"),
        ("DRAGOMAN_MAX_PACK_BYTES", "0", "at least 1"),
        ("DRAGOMAN_INTER_THREADS", "0", "at least 1"),
        ("DRAGOMAN_INTRA_THREADS", "-2", "at least 0"),
        ("DRAGOMAN_MODEL_IDLE_SECONDS", "-1", "at least 0"),
        ("DRAGOMAN_APERTIUM", "maybe", "must be 1 or 0"),
        ("DRAGOMAN_APERTIUM_MAX_PIPELINES", "0", "at least 1"),
        ("DRAGOMAN_SERVE_MAX_CONNECTIONS", "0", "at least 1"),
        ("DRAGOMAN_SERVE_HEADER_TIMEOUT", "0", "more than 0"),
        ("DRAGOMAN_BATCHING", "sometimes", "must be 1 or 0"),
        ("DRAGOMAN_BATCH_WINDOW_MS", "-1", "at least 0"),
        ("DRAGOMAN_BATCH_WINDOW_MS", "1000.5", "at most 1000, got '1000.5'"),
        ("DRAGOMAN_BATCH_WINDOW_MS", "inf", "finite"),
        ("DRAGOMAN_BATCH_WINDOW_MS", "soon", "must be a number, got 'soon'"),
        ("DRAGOMAN_BATCH_MAX_SEGMENTS", "0", "from 1 to 4096, got '0'"),
        ("DRAGOMAN_BATCH_MAX_SEGMENTS", "-5", "from 1 to 4096"),
        ("DRAGOMAN_BATCH_MAX_SEGMENTS", "4097", "from 1 to 4096"),
        ("DRAGOMAN_BATCH_MAX_SEGMENTS", "many", "must be an integer, got 'many'"),
        ("DRAGOMAN_BATCH_MAX_SEGMENTS", "8.5", "must be an integer"),
        ("DRAGOMAN_BATCH_MAX_CHARS", "0", "from 1 to 1000000"),
        ("DRAGOMAN_BATCH_MAX_CHARS", "10000000000", "from 1 to 1000000"),
        ("DRAGOMAN_BATCH_MAX_CHARS", "lots", "must be an integer"),
        ("DRAGOMAN_BATCH_MAX_QUEUED", "-1", "from 1 to 1000000"),
        ("DRAGOMAN_BATCH_MAX_QUEUED", "99999999", "from 1 to 1000000"),
        ("DRAGOMAN_BATCH_MAX_QUEUED", "x", "must be an integer"),
        ("DRAGOMAN_DB_POOL_SIZE", "0", "at least 1"),
        ("DRAGOMAN_DB_MAX_OVERFLOW", "-1", "at least 0"),
        ("DRAGOMAN_DB_POOL_TIMEOUT", "0", "more than 0"),
    ],
)
def test_a_bad_value_is_a_config_error_naming_the_variable(variable: str, value: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({variable: value})
    assert caught.value.message.startswith(f"{variable} ") and says in caught.value.message
    assert (caught.value.status, caught.value.code) == (500, "config_error")


def test_from_env_reads_the_process_environment_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAGOMAN_TIER", "fast")
    monkeypatch.setenv("DRAGOMAN_SERVE_QUEUE", "5")
    settings = Settings.from_env()
    assert settings.engine.default_tier == "fast" and settings.daemon.queue == 5


def test_build_and_replace_take_field_names_whatever_section_holds_them(tmp_path: Path) -> None:
    settings = Settings.build(packs_dir=tmp_path / "packs", glossary_path=tmp_path / "g.json", port=0)
    assert settings.engine.packs_dir == tmp_path / "packs"
    assert settings.local.glossary_path == tmp_path / "g.json" and settings.daemon.port == 0
    changed = settings.replace(default_tier="fast", token="t")
    assert changed.engine.default_tier == "fast" and changed.daemon.token == "t"
    assert changed.engine.packs_dir == tmp_path / "packs" and settings.engine.default_tier == "best"
    assert changed.local is settings.local  # untouched sections are shared, not copied
    with pytest.raises(TypeError, match="no field tier"):
        settings.replace(tier="fast")
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.engine.packs_dir = tmp_path  # type: ignore[misc]


def test_sections_can_be_built_directly(tmp_path: Path) -> None:
    settings = Settings(engine=EngineSettings(packs_dir=tmp_path), daemon=DaemonSettings(queue=1))
    assert settings.engine.packs_dir == tmp_path and settings.daemon.queue == 1
    assert settings.local == LocalSettings()


def test_field_names_are_unique_across_sections() -> None:
    names = [f.name for section in SECTIONS.values() for f in dataclasses.fields(section)]
    assert len(names) == len(set(names))
    assert [f.name for f in dataclasses.fields(Settings)] == list(SECTIONS)
