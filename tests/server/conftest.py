"""Fixtures of the MCP tool server's tests (test_mcp_*.py): an isolated environment with a tiny pack."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A directory for a test's files; allowed to file tools only when a test offers it (roots or env)."""
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def server_env(packs_dir: Path, tiny_argos_pack: Path, tmp_path: Path) -> dict[str, str]:
    """The test's isolated DRAGOMAN_* environment with the tiny en->es pack installed; Apertium off."""
    shutil.copytree(tiny_argos_pack, packs_dir / tiny_argos_pack.name)
    env = dict(os.environ)
    env.update(DRAGOMAN_APERTIUM="0", DRAGOMAN_PORT="9", PYTHONUNBUFFERED="1")
    return env


@pytest.fixture
def errlog(tmp_path: Path) -> Path:
    """Where a server subprocess's stderr goes."""
    return tmp_path / "server-stderr.log"
