"""``dragoman hosted …`` end to end (issue 12, the admin CLI): migrate, accounts create/list/credit, keys
create/list/revoke/rotate, with --json and without, against a database under a temporary
DRAGOMAN_HOSTED_DIR; the key printed once authenticates, only its hash is stored."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dragoman.cli.main import main
from dragoman.errors import Unauthorized
from dragoman.service import accounts
from dragoman.service.db import Database


@pytest.fixture
def hosted_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "hosted"
    monkeypatch.setenv("DRAGOMAN_HOSTED_DIR", str(path))
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["hosted", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    status, out, err = run(capsys, *argv, "--json")
    assert status == 0, err
    return json.loads(out)


def _authenticate(hosted_dir: Path, key: str) -> accounts.KeyInfo:
    db = Database(f"sqlite:///{hosted_dir / 'hosted.sqlite3'}")
    try:
        return accounts.authenticate(db, f"Bearer {key}")
    finally:
        db.dispose()


def test_the_admin_commands_end_to_end(hosted_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    migrated = run_json(capsys, "migrate")
    assert migrated["from"] is None and migrated["to"] and (hosted_dir / "hosted.sqlite3").is_file()
    assert run_json(capsys, "migrate")["from"] == migrated["to"]  # again: nothing to do

    account = run_json(capsys, "accounts", "create", "--name", "Acme", "--credits", "500")
    assert account["plan"] == "pro" and account["balance"] == 500 and account["test_balance"] == 10_000
    acct = account["account_id"]
    credited = run_json(capsys, "accounts", "credit", acct, "250")
    assert credited["balance"] == 750
    assert run_json(capsys, "accounts", "credit", acct, "5", "--test")["balance"] == 10_005
    listed = run_json(capsys, "accounts", "list")
    assert [(a["account_id"], a["balance"], a["name"]) for a in listed] == [(acct, 750, "Acme")]

    created = run_json(
        capsys,
        "keys", "create", "--account", acct, "--name", "ci", "--webhook", "https://hooks.example.com/in",
        "--cap", "1000", "--daily-quota", "5000",
    )  # fmt: skip
    key = created["key"]
    assert key.startswith(f"svc_live_{created['key_id']}_") and created["webhook_secret"].startswith("whsec_")
    info = _authenticate(hosted_dir, key)
    assert (info.account_id, info.monthly_cap, info.daily_quota) == (acct, 1000, 5000)
    assert info.webhook_url == "https://hooks.example.com/in"
    assert info.webhook_secret == created["webhook_secret"]

    test_key = run_json(capsys, "keys", "create", "--account", acct, "--test")
    assert (
        test_key["key"].startswith("svc_test_") and _authenticate(hosted_dir, test_key["key"]).mode == "test"
    )

    keys = run_json(capsys, "keys", "list", "--account", acct)
    assert [k["key_id"] for k in keys] == [created["key_id"], test_key["key_id"]]
    shown = json.dumps(keys)
    assert key not in shown and created["webhook_secret"] not in shown
    assert hashlib.sha256(key.encode()).hexdigest() not in shown

    rotated = run_json(capsys, "keys", "rotate", created["key_id"])
    assert rotated["replaces"] == created["key_id"] and rotated["webhook_secret"] == created["webhook_secret"]
    with pytest.raises(Unauthorized):
        _authenticate(hosted_dir, key)
    assert _authenticate(hosted_dir, rotated["key"]).monthly_cap == 1000

    revoked = run_json(capsys, "keys", "revoke", rotated["key_id"])
    assert revoked["active"] is False and revoked["revoked_ms"] is not None
    with pytest.raises(Unauthorized):
        _authenticate(hosted_dir, rotated["key"])
    states = {k["key_id"]: k["active"] for k in run_json(capsys, "keys", "list")}
    assert states == {created["key_id"]: False, rotated["key_id"]: False, test_key["key_id"]: True}


def test_the_plain_output_shows_the_key_once_and_warns_on_stderr(
    hosted_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    acct = run_json(capsys, "accounts", "create")["account_id"]
    status, out, err = run(capsys, "keys", "create", "--account", acct)
    assert status == 0
    key = next(line.split()[-1] for line in out.splitlines() if line.startswith("key:"))
    assert out.count(key) == 1 and "whsec_" in out and "not shown again" in err
    assert _authenticate(hosted_dir, key).account_id == acct
    status, out, _ = run(capsys, "keys", "list")
    assert status == 0 and key not in out and "active" in out
    status, out, _ = run(capsys, "accounts", "list")
    assert status == 0 and acct in out
    status, out, _ = run(capsys, "migrate")
    assert status == 0 and "unchanged" in out


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["accounts", "create", "--plan", "gold"], "invalid_request"),
        (["accounts", "credit", "acct_nope", "5"], "invalid_request"),
        (["keys", "create", "--account", "acct_nope"], "invalid_request"),
        (["keys", "revoke", "0123456789ab"], "invalid_request"),
        (["keys", "rotate", "0123456789ab"], "invalid_request"),
    ],
)
def test_a_refused_command_exits_2_with_a_typed_error(
    hosted_dir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: str
) -> None:
    status, out, err = run(capsys, *argv, "--json")
    assert status == 2 and out == ""
    assert json.loads(err)["code"] == code


@pytest.mark.parametrize(
    "argv",
    [
        ["accounts", "credit", "acct_x", "0"],
        ["accounts", "credit", "acct_x", "ten"],
        ["accounts", "create", "--credits", "-5"],
        ["keys", "create", "--account", "a", "--cap", "-1"],
        ["keys", "create"],
        ["bogus"],
    ],
)
def test_bad_arguments_are_usage_errors(
    hosted_dir: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["hosted", *argv])
    assert exited.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_the_installed_command_runs_in_its_own_process(hosted_dir: Path) -> None:
    env = {**os.environ, "DRAGOMAN_HOSTED_DIR": str(hosted_dir)}
    done = subprocess.run(
        [sys.executable, "-m", "dragoman.cli", "hosted", "accounts", "create", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["account_id"].startswith("acct_")
