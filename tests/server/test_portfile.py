"""The daemon's PID/port file and liveness, as ``dragoman status`` and clients read them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from dragoman.documents import partials
from dragoman.server.daemon.portfile import (
    daemon_file,
    daemon_status,
    read_daemon_file,
    remove_daemon_file,
    write_daemon_file,
)
from dragoman.settings import Settings
from dragoman.testing.daemon import BackgroundDaemon


def test_written_read_and_removed_by_its_own_process(tmp_path: Path) -> None:
    path = tmp_path / "state" / "daemon.json"
    write_daemon_file(path, host="::1", port=9999)
    assert read_daemon_file(path) == {"port": 9999, "pid": os.getpid(), "host": "::1"}
    assert json.loads(path.read_text())["started"] > 0
    assert [p.name for p in path.parent.iterdir()] == ["daemon.json"]  # no temporary file left


def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state" / "daemon.json"
    write_daemon_file(path, host="::1", port=9999)
    seen: list[str] = []

    def failing_dump(data: object, handle: Any) -> None:
        seen.append(Path(handle.name).name)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("dragoman.server.daemon.portfile.json.dump", failing_dump)
    with pytest.raises(OSError, match="No space"):
        write_daemon_file(path, host="::1", port=1234)
    assert read_daemon_file(path) == {"port": 9999, "pid": os.getpid(), "host": "::1"}
    assert [p.name for p in path.parent.iterdir()] == ["daemon.json"]
    assert partials.is_partial(seen[0])  # a kill -9 at that moment leaves what the next start sweeps
    remove_daemon_file(path)
    assert not path.exists()


def test_another_daemons_file_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "daemon.json"
    path.write_text(json.dumps({"pid": os.getpid() + 1, "port": 1, "host": "127.0.0.1"}))
    remove_daemon_file(path)
    assert path.exists()
    path.write_text("{not json")
    assert read_daemon_file(path) is None
    remove_daemon_file(path)
    assert path.exists()
    assert read_daemon_file(tmp_path / "missing.json") is None


def test_no_daemon_is_reported_on_the_configured_port(tmp_path: Path) -> None:
    settings = Settings.from_env({"DRAGOMAN_STATE_DIR": str(tmp_path), "DRAGOMAN_PORT": "1"})
    assert daemon_file(settings) == tmp_path / "daemon.json"
    assert daemon_status(settings) == {"alive": False, "port": 1, "pid": None, "url": None}


def test_a_daemon_that_answers_is_alive(tmp_path: Path) -> None:
    seen: list[str | None] = []

    async def health(request: Request) -> Response:
        seen.append(request.headers.get("authorization"))
        return JSONResponse({"ok": True})

    app = Starlette(routes=[Route("/health", health)])
    env = {"DRAGOMAN_STATE_DIR": str(tmp_path), "SERVICE_SERVE_TOKEN": "tok"}
    settings = Settings.from_env(env)
    with BackgroundDaemon(app) as daemon:
        write_daemon_file(daemon_file(settings), host="127.0.0.1", port=daemon.port)
        status = daemon_status(settings)
    assert status == {
        "alive": True,
        "port": daemon.port,
        "pid": os.getpid(),
        "url": f"http://127.0.0.1:{daemon.port}",
        "host": "127.0.0.1",
    }
    assert seen == ["Bearer tok"]
