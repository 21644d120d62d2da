"""The real command line, in a subprocess, against a hostile file system and hostile arguments.

Every case must end with exit status 2, a one-line ``dragoman: ...`` message (or argparse's usage error) that
says what to do, and never a traceback; with ``--json`` the error is the ``{"error", "code"}`` object.
Issue 9, item 8 (16 cases ended in a traceback and exit 1) and item 9 (``--timeout -1`` was accepted).

Conditions a test cannot make for real as root (a read-only folder, a full disk, an unreadable file) are
made by an audit hook in the CLI's process (``sys.addaudithook``): it refuses ``open`` (and ``mkdir``,
``rename``, ``link``) under one folder with the errno the real condition gives, so the CLI meets the same
``OSError`` at the same call. A file size limit (``ulimit -f``) is real: writes past it fail with EFBIG.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

#: Runs the CLI after installing the audit hook that DENY_DIR / DENY_ERRNO / DENY_WHAT describe.
HOOKED = textwrap.dedent(
    """
    import os, sys
    DENY_DIR = os.environ.get("DENY_DIR")
    DENY_ERRNO = int(os.environ.get("DENY_ERRNO", "13"))
    WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT
    PATH_EVENTS = {"os.mkdir": 0, "os.rename": 0, "os.link": 1, "os.remove": 0, "os.chmod": 0}

    def inside(path):
        if not isinstance(path, (str, bytes, os.PathLike)):
            return False  # a descriptor
        full = os.path.abspath(os.fsdecode(path))
        return full == DENY_DIR or full.startswith(DENY_DIR + os.sep)

    def deny(event, args):
        if event == "open":
            path, mode, flags = args
            writing = bool(flags and flags & WRITING) or bool(mode and set(mode) & set("wax+"))
            if inside(path) and (writing or os.environ.get("DENY_WHAT") == "read"):
                raise OSError(DENY_ERRNO, os.strerror(DENY_ERRNO), os.fsdecode(path))
        elif event in PATH_EVENTS and inside(args[PATH_EVENTS[event]]):
            raise OSError(DENY_ERRNO, os.strerror(DENY_ERRNO), os.fsdecode(args[PATH_EVENTS[event]]))

    if DENY_DIR:
        sys.addaudithook(deny)
    from dragoman.cli.main import main
    sys.exit(main(sys.argv[1:]))
    """
)


@dataclass
class Case:
    """One command line: its arguments ({w} is the work folder), the error it must end in."""

    argv: list[str]
    needle: str  # in the message
    codes: tuple[str, ...] = ("invalid_request",)  # the --json code (any of them); () for a usage error
    env: dict[str, str] = field(default_factory=dict)  # {w} is the work folder
    stdin: bytes = b""
    fsize: int | None = None  # RLIMIT_FSIZE in bytes


def _file(work: Path) -> None:
    (work / "in.txt").write_text("Hello world. The house is red.\n" * 50, encoding="utf-8")
    (work / "outdir").mkdir()
    (work / "locked").mkdir()
    os.mkfifo(work / "pipe")
    (work / "deep.json").write_text('{"a": ' * 5000 + '"x"' + "}" * 5000, encoding="utf-8")
    (work / "deep-list.json").write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    (work / "glossary-folder").mkdir()
    (work / "a-file").write_text("not a folder\n", encoding="utf-8")


TRANSLATE_FILE = ["translate-file", "{w}/in.txt", "--to", "es", "--from", "en"]
FS = ("file_access",)
CASES: dict[str, Case] = {
    # outputs
    "a folder as output": Case([*TRANSLATE_FILE, "-o", "{w}/outdir"], "is a folder"),
    "a folder as output, --overwrite": Case(
        [*TRANSLATE_FILE, "-o", "{w}/outdir", "--overwrite"], "is a folder"
    ),
    "a pipe as output, --overwrite": Case(
        [*TRANSLATE_FILE, "-o", "{w}/pipe", "--overwrite"], "not a regular file"
    ),
    "an output under a file": Case([*TRANSLATE_FILE, "-o", "{w}/in.txt/out.txt"], "check the path", FS),
    "an output name too long": Case([*TRANSLATE_FILE, "-o", "{w}/" + "x" * 300 + ".txt"], "too long", FS),
    "a read-only folder": Case(
        [*TRANSLATE_FILE, "-o", "{w}/locked/out.txt"],
        "permission denied",
        FS,
        env={"DENY_DIR": "{w}/locked", "DENY_ERRNO": str(errno.EACCES)},
    ),
    "a read-only file system": Case(
        [*TRANSLATE_FILE, "-o", "{w}/locked/out.txt"],
        "read-only file system",
        FS,
        env={"DENY_DIR": "{w}/locked", "DENY_ERRNO": str(errno.EROFS)},
    ),
    "a full disk": Case(
        [*TRANSLATE_FILE, "-o", "{w}/locked/out.txt"],
        "no space left",
        FS,
        env={"DENY_DIR": "{w}/locked", "DENY_ERRNO": str(errno.ENOSPC)},
    ),
    "a file size limit (ulimit -f)": Case(
        [*TRANSLATE_FILE, "-o", "{w}/out.txt"], "write elsewhere", FS, fsize=64
    ),
    # inputs
    "a missing input": Case(["translate-file", "{w}/missing.txt", "--to", "es"], "does not exist"),
    "a folder as input": Case(["translate-file", "{w}/outdir", "--to", "es"], "not a regular file"),
    "an unreadable input": Case(
        [*TRANSLATE_FILE],
        "permission denied",
        FS,
        env={"DENY_DIR": "{w}/in.txt", "DENY_ERRNO": str(errno.EACCES), "DENY_WHAT": "read"},
    ),
    "deeply nested JSON objects": Case(
        ["translate-file", "{w}/deep.json", "--to", "es", "--from", "en"],
        "deep",
        ("invalid_request", "unsupported_document", "limit_exceeded", "file_too_large"),
    ),
    "deeply nested JSON arrays": Case(
        ["translate-file", "{w}/deep-list.json", "--to", "es", "--from", "en"],
        "deep",
        ("invalid_request", "unsupported_document", "limit_exceeded", "file_too_large"),
    ),
    "stdin that is not UTF-8": Case(
        ["translate", "--to", "es", "--from", "en"], "UTF-8", stdin=b"caf\xe9 \xff\n"
    ),
    "a missing image": Case(["ocr", "{w}/missing.png", "--to", "es"], "does not exist"),
    "a missing pack source": Case(["packs", "install", "{w}/missing.argosmodel"], "not an existing file"),
    "a folder as the glossary file": Case(
        ["translate", "Hello.", "--to", "es", "--from", "en"],
        "glossary",
        ("glossary_file", "file_access"),
        env={"DRAGOMAN_GLOSSARY": "{w}/glossary-folder"},
    ),
    "an unreadable glossary": Case(
        ["translate", "Hello.", "--to", "es", "--from", "en"],
        "permission denied",
        ("glossary_file", "file_access"),
        env={
            "DRAGOMAN_GLOSSARY": "{w}/locked/glossary.json",
            "DENY_DIR": "{w}/locked",
            "DENY_ERRNO": str(errno.EACCES),
            "DENY_WHAT": "read",
        },
    ),
    # options out of range: argparse's usage error, exit 2, before anything runs
    "a port over 65535": Case(["serve", "--port", "70000"], "0 to 65535", ()),
    "a negative port": Case(["serve", "--port", "-1"], "0 to 65535", ()),
    "a port that is no number": Case(["serve", "--port", "http"], "0 to 65535", ()),
    "a negative timeout": Case(["serve", "--timeout", "-1"], "above 0", ()),
    "a zero timeout": Case(["serve", "--timeout", "0"], "above 0", ()),
    "a NaN timeout": Case(["serve", "--timeout", "nan"], "above 0", ()),
    "an infinite timeout": Case(["serve", "--timeout", "inf"], "above 0", ()),
    "zero workers": Case(["serve", "--workers", "0"], "at least 1", ()),
}


def _fill(text: str, work: Path) -> str:
    return text.replace("{w}", str(work))


def _run(case: Case, work: Path, *, json_errors: bool) -> subprocess.CompletedProcess[bytes]:
    argv = [_fill(a, work) for a in case.argv]
    if json_errors and case.codes:
        argv.insert(1 if argv[0] != "packs" else 2, "--json")
    env = {**os.environ, "DRAGOMAN_APERTIUM": "0", **{k: _fill(v, work) for k, v in case.env.items()}}
    limit = case.fsize

    def preexec() -> None:
        if limit is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, as a process that ignores it sees
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [sys.executable, "-c", HOOKED, *argv],
        input=case.stdin,
        capture_output=True,
        env=env,
        cwd=work,
        timeout=120,
        check=False,
        preexec_fn=preexec if limit is not None else None,  # noqa: PLW1509 - only sets a limit and a signal
    )


@pytest.fixture
def work(tmp_path: Path, packs_dir: Path, tiny_argos_pack: Path) -> Path:
    shutil.copytree(tiny_argos_pack, packs_dir / tiny_argos_pack.name)
    folder = tmp_path / "work"
    folder.mkdir()
    _file(folder)
    return folder


@pytest.mark.parametrize("name", list(CASES))
def test_every_failure_is_typed_with_exit_2_and_no_traceback(name: str, work: Path) -> None:
    case = CASES[name]
    done = _run(case, work, json_errors=False)
    err = done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, (name, err[-2000:])
    assert done.returncode == 2, (name, done.returncode, err[-1000:])
    assert case.needle.lower() in err.lower(), (name, err)
    lines = [line for line in err.splitlines() if line.strip()]
    if case.codes:
        assert lines[-1].startswith("dragoman: "), (name, err)
    else:
        assert "error: argument" in lines[-1], (name, err)
    assert not list(work.glob(".*.part")) and not list(work.glob("**/*.dragoman-*")), "a temporary was left"


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.codes])
def test_with_json_the_error_is_the_error_object(name: str, work: Path) -> None:
    case = CASES[name]
    done = _run(case, work, json_errors=True)
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2 and "Traceback" not in err, (name, err[-2000:])
    error = json.loads(err.strip().splitlines()[-1])
    assert set(error) == {"error", "code"} and error["code"] in case.codes, (name, error)


def test_no_output_was_written_over_a_device(work: Path) -> None:
    """A pipe (as /dev/full would be) is never replaced by a regular file, even with --overwrite."""
    _run(CASES["a pipe as output, --overwrite"], work, json_errors=False)
    assert (work / "pipe").is_fifo()
