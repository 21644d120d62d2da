# mypy: disallow-untyped-calls=False
# (PyMuPDF's functions carry no annotations)
"""Issue 9, item 7: nothing half-written is left behind, and nothing left behind survives the next start.

Every writer (a translated document, a PDF's DOCX export, the glossary file) is killed in the middle of its
write, in a subprocess: with ``kill -9`` the destination must hold the previous file, untouched, and the
temporary it leaves must be recognised and removed by the next start; with SIGTERM or SIGINT (hosts send
SIGTERM two seconds after closing an MCP server's stdin) nothing must be left at all. A failed PDF run
leaves no DOCX export (both are placed together, or neither), and stale temporaries are told apart from
live ones and from the user's own files.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pymupdf
import pytest

from dragoman.documents import partials
from dragoman.documents.base import atomic_output
from dragoman.documents.pdf import PdfHandler
from dragoman.errors import InvalidRequest
from dragoman.testing.fakes import FakeTranslator

PREVIOUS = b"the previous file, which must survive\n"

# A fake engine for translate_file: the first pass pauses until killed (the output's temporary exists).
_PRELUDE = """
import os, sys, time, json
from pathlib import Path
from types import SimpleNamespace
from dragoman.documents import partials
READY, STATE, WHERE = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
partials.startup(STATE)  # as every front door does

def ready():
    READY.write_text("ready")

def pause_forever():
    ready()
    time.sleep(600)

class FakeEngine:
    provenance = "on-device"
    def detect(self, text):
        return SimpleNamespace(flores="eng_Latn", reason="")
    def translate_many(self, texts, options, context=None):
        return [SimpleNamespace(translation=t.upper(), warnings=()) for t in texts]

def write_half_then_pause(path, data):
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])
        f.flush()
        os.fsync(f.fileno())
    pause_forever()
"""

WRITERS: dict[str, str] = {
    # translate_file on a .txt: the handler's write is cut in the middle
    "document": """
import pathlib
pathlib.Path.write_bytes = lambda self, data: write_half_then_pause(self, data)
from dragoman.pipelines.translate_file import translate_file
translate_file(FakeEngine(), WHERE / "in.txt", "spa_Latn", output=WHERE / "out.txt", overwrite=True)
""",
    # a PDF translated, then its DOCX export cut in the middle: neither may appear
    "export": """
import dragoman.documents.docx as docx
def export(paragraphs, output, *, rtl):
    write_half_then_pause(output, b"PK half a docx")
docx.write_docx_export = export
from dragoman.pipelines.translate_file import translate_file
translate_file(FakeEngine(), WHERE / "in.pdf", "spa_Latn", output=WHERE / "out.pdf", overwrite=True)
""",
    # the glossary file: written, not yet renamed
    "glossary": """
real_fsync = os.fsync
def fsync(fd):
    real_fsync(fd)
    pause_forever()
os.fsync = fsync
from dragoman.server.local_store import GlossaryStore
from dragoman.translation.types import GlossaryEntry
GlossaryStore(WHERE / "glossary.json").add([GlossaryEntry("new", "nuevo")])
""",
}

# Where each writer's destination is, and the file the test gives it beforehand.
DESTINATIONS = {"document": ["out.txt"], "export": ["out.pdf", "out.es.docx"], "glossary": ["glossary.json"]}


def _pdf(path: Path) -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Hello world, this is a test page.", fontsize=12)
    doc.save(path)
    doc.close()


def _prepare(kind: str, where: Path) -> dict[str, bytes]:
    where.mkdir(parents=True, exist_ok=True)
    (where / "in.txt").write_text("Hello.\n\n" * 2000, encoding="utf-8")
    _pdf(where / "in.pdf")
    previous: dict[str, bytes] = {}
    for name in DESTINATIONS[kind]:
        if name == "glossary.json":
            data = json.dumps({"version": 1, "entries": [{"term": "old", "translation": "viejo"}]}).encode()
        elif name == "out.es.docx":
            continue  # the export is never written over a file: it must not appear at all
        else:
            data = PREVIOUS
        (where / name).write_bytes(data)
        previous[name] = data
    return previous


def _start(kind: str, tmp_path: Path, *, handlers: bool = False) -> tuple[subprocess.Popen[bytes], Path]:
    where, state, ready = tmp_path / "out", tmp_path / "state", tmp_path / "ready"
    body = WRITERS[kind]
    if handlers:  # as the CLI and the MCP stdio server run: SIGTERM/SIGINT handlers installed
        body = "with partials.handle_signals():\n" + textwrap.indent(body, "    ")
    script = _PRELUDE + body
    errors = tmp_path / "writer.log"
    with errors.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", script, str(ready), str(state), str(where)],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    deadline = time.monotonic() + 120
    while not ready.exists():
        if proc.poll() is not None:
            raise AssertionError(errors.read_text(errors="replace")[-3000:])
        assert time.monotonic() < deadline, "the writer never reached its write"
        time.sleep(0.02)
    return proc, where


def _ours(where: Path) -> list[Path]:
    return sorted(p for p in where.iterdir() if partials.is_partial(p.name))


def _check_destinations(kind: str, where: Path, previous: dict[str, bytes]) -> None:
    for name, data in previous.items():
        assert (where / name).read_bytes() == data, f"{name} was changed"
    if kind == "export":
        assert not (where / "out.es.docx").exists(), "a DOCX export without its PDF"
    expected = {"in.txt", "in.pdf", "glossary.json.lock", *DESTINATIONS[kind]} - {"out.es.docx"}
    strays = {p.name for p in where.iterdir()} - expected
    assert all(partials.is_partial(n) for n in strays), strays


def _next_start(tmp_path: Path) -> None:
    """A front door starting: ``dragoman mcp`` with its stdin closed at once (it serves nothing, exits)."""
    env = {**os.environ, "DRAGOMAN_STATE_DIR": str(tmp_path / "state")}
    env["DRAGOMAN_GLOSSARY"] = str(tmp_path / "elsewhere" / "glossary.json")
    env["DRAGOMAN_PACKS_DIR"] = str(tmp_path / "packs")
    done = subprocess.run(
        [sys.executable, "-m", "dragoman.cli", "mcp"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_kill_9_mid_write_leaves_the_previous_file_and_the_next_start_cleans_up(
    kind: str, tmp_path: Path
) -> None:
    previous = _prepare(kind, tmp_path / "out")
    proc, where = _start(kind, tmp_path)
    left = _ours(where)
    assert left, "the writer should hold a temporary while it writes"
    proc.kill()
    proc.wait(timeout=30)
    _check_destinations(kind, where, previous)
    assert _ours(where) == left  # kill -9 runs no clean-up: the temporary is left...
    _next_start(tmp_path)
    assert _ours(where) == []  # ...and the next start of any front door removes it
    _check_destinations(kind, where, previous)
    assert not list((tmp_path / "state" / "partials").glob(f"*-{proc.pid}-*.dirs"))  # its journal too


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(WRITERS))
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_sigint_mid_write_leave_nothing(kind: str, signum: int, tmp_path: Path) -> None:
    previous = _prepare(kind, tmp_path / "out")
    proc, where = _start(kind, tmp_path, handlers=True)
    assert _ours(where)
    proc.send_signal(signum)
    code = proc.wait(timeout=30)
    if signum == signal.SIGTERM:
        assert code == -signal.SIGTERM  # the signal still ends the process, as it did before
    else:
        assert code != 0  # KeyboardInterrupt
    assert _ours(where) == []  # no next start needed
    _check_destinations(kind, where, previous)


def _mcp_env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "DRAGOMAN_STATE_DIR": str(tmp_path / "state")}
    env["DRAGOMAN_GLOSSARY"] = str(tmp_path / "out" / "glossary.json")
    env["DRAGOMAN_PACKS_DIR"] = str(tmp_path / "packs")
    return env


def _rpc(method: str, params: dict[str, Any], id_: int | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if id_ is not None:
        message["id"] = id_
    return (json.dumps(message) + "\n").encode()


@pytest.mark.slow
def test_mcp_server_closed_then_sigtermed_mid_glossary_write_leaves_nothing(tmp_path: Path) -> None:
    """What hosts do: close the server's stdin, send SIGTERM two seconds later. The glossary write in flight
    is paused on purpose, so the server cannot finish it: the SIGTERM must remove its temporary."""
    previous = _prepare("glossary", tmp_path / "out")
    ready = tmp_path / "ready"
    script = textwrap.dedent(
        f"""
        import os, sys, time
        from pathlib import Path
        real_fsync = os.fsync
        def fsync(fd):
            real_fsync(fd)
            Path({str(ready)!r}).write_text("ready")
            time.sleep(600)
        os.fsync = fsync
        from dragoman.cli.main import main
        sys.exit(main(["mcp"]))
        """
    )
    requests = b"".join(
        [
            _rpc(
                "initialize",
                {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
                1,
            ),
            _rpc("notifications/initialized", {}),
            _rpc(
                "tools/call",
                {"name": "glossary_add", "arguments": {"entries": [{"term": "a", "translation": "b"}]}},
                2,
            ),
        ]
    )
    with subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_mcp_env(tmp_path),
    ) as proc:
        assert proc.stdin is not None
        proc.stdin.write(requests)
        proc.stdin.flush()
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        where = tmp_path / "out"
        assert _ours(where)
        proc.stdin.close()
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    assert code == -signal.SIGTERM
    assert _ours(where) == []
    _check_destinations("glossary", where, previous)


# ----- both or neither: the DOCX export of a failed PDF run ---------------------------------------------
def test_a_failed_pdf_run_leaves_no_docx_export(tmp_path: Path) -> None:
    """The PDF's own output cannot be placed (its name was taken while translating): the export, written
    inside the same run, is not placed either."""
    source = tmp_path / "in.pdf"
    _pdf(source)
    output = tmp_path / "out.pdf"

    def rewrite(text: str) -> str:
        output.write_bytes(b"someone else's file")  # appears while translating
        return text.upper()

    translator = FakeTranslator(rewrite, target="spa_Latn")
    with pytest.raises(InvalidRequest, match="appeared"), atomic_output(output) as partial:
        PdfHandler().translate(source, partial, translator, None)
    assert output.read_bytes() == b"someone else's file"
    assert not (tmp_path / "out.es.docx").exists()
    assert _ours(tmp_path) == [] and partials.live() == ()


def test_an_export_that_cannot_be_placed_takes_the_main_output_back_out(tmp_path: Path) -> None:
    """The other order: the export's name is taken meanwhile, so the run fails and its new output is not
    left behind either (an output that did not exist before is removed again)."""
    main, export = tmp_path / "doc.txt", tmp_path / "doc.export.txt"
    with pytest.raises(InvalidRequest), atomic_output(main) as partial:
        partial.write_text("main")
        with atomic_output(export) as inner:
            inner.write_text("export")
        export.write_text("taken")
    assert not main.exists() and export.read_text() == "taken"
    assert _ours(tmp_path) == []


def test_nested_outputs_are_placed_together(tmp_path: Path) -> None:
    main, export = tmp_path / "doc.txt", tmp_path / "doc.export.txt"
    with atomic_output(main) as partial:
        partial.write_text("main")
        with atomic_output(export) as inner:
            inner.write_text("export")
        assert not export.exists()  # not before the main output
    assert main.read_text() == "main" and export.read_text() == "export"
    assert _ours(tmp_path) == [] and partials.live() == ()


# ----- what counts as stale ---------------------------------------------------------------------------
def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _name(stem: str, pid: int, suffix: str = ".txt") -> str:
    return partials.partial_name(Path(f"{stem}{suffix}")).replace(f"-{os.getpid()}-", f"-{pid}-")


def test_sweep_removes_only_stale_temporaries_of_our_naming(tmp_path: Path) -> None:
    old = time.time() - partials.STALE_AFTER_SECONDS - 60
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as alive:
        files = {
            "dead": _name("a", _dead_pid()),
            "alive": _name("b", alive.pid),
            "legacy_old": ".c.k3j_9x2a.part.txt",
            "legacy_young": ".d.k3j_9x2a.part.txt",
            "glossary_legacy_old": ".glossary.json.ab12cd34.tmp",
            "user_old": ".notes.part.txt",
            "user_plain_old": "report.part.txt",
            "other_host_young": _name("e", _dead_pid()).replace(partials._HOST, "0" * 8),
            "other_host_old": _name("f", _dead_pid()).replace(partials._HOST, "1" * 8),
        }
        for key, name in files.items():
            (tmp_path / name).write_text(key)
            if key.endswith("_old"):
                os.utime(tmp_path / name, (old, old))
        try:
            removed = {p.name for p in partials.sweep(tmp_path)}
        finally:
            alive.kill()
    gone = {files[k] for k in ("dead", "legacy_old", "glossary_legacy_old", "other_host_old")}
    assert removed == gone
    assert {p.name for p in tmp_path.iterdir()} == set(files.values()) - gone


def test_a_temporary_named_with_this_pid_but_not_held_is_stale(tmp_path: Path) -> None:
    """In a container the server is often pid 1 every time: a leftover with our pid is not ours to keep."""
    leftover = tmp_path / partials.partial_name(tmp_path / "x.txt")
    leftover.write_text("left by an earlier process with the same pid")
    assert partials.is_stale(leftover)
    held = partials.create(tmp_path / "y.txt")  # the first temporary here sweeps the directory
    try:
        assert not leftover.exists()
        assert not partials.is_stale(held)
        assert partials.sweep(tmp_path) == [] and held.exists()
    finally:
        partials.discard(held)


def test_the_first_write_into_a_directory_sweeps_it(tmp_path: Path) -> None:
    leftover = tmp_path / _name("old", _dead_pid())
    leftover.write_text("half")
    with atomic_output(tmp_path / "new.txt") as partial:
        partial.write_text("done")
    assert not leftover.exists()
    assert (tmp_path / "new.txt").read_text() == "done"


def test_a_long_name_still_gets_a_temporary(tmp_path: Path) -> None:
    destination = tmp_path / ("n" * 240 + ".txt")
    with atomic_output(destination) as partial:
        assert partials.is_partial(partial.name)
        partial.write_text("ok")
    assert destination.read_text() == "ok"
