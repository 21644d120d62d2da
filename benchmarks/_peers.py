"""Peers to compare with, run offline in their own virtualenv: argostranslate's ``translate()`` and a
LibreTranslate server, on the very pack dragoman loads.

Neither is a dependency of dragoman: :func:`ensure_venv` builds ``build/peers-venv`` (pip from the package
index: LibreTranslate, which brings argostranslate, ``rich`` below 13 for flask-limiter, and spaCy) once and
reuses it. Both peers run without a network: ``ARGOS_CHUNK_TYPE=SPACY`` with a ``spacy/`` folder inside the
Argos package holding a blank spaCy pipeline (``spacy.blank(lang).to_disk(...)``, no weights; argos adds
its rule-based sentencizer), packages in a temporary ``ARGOS_PACKAGES_DIR``, and a second installed
package (the reverse pair) so that LibreTranslate does not go and fetch the package index at start.

``settings`` is ``"default"`` (the peer's own thread settings) or ``"matched"`` (CTranslate2's
inter/intra threads set to dragoman's, ``ARGOS_INTER_THREADS`` / ``ARGOS_INTRA_THREADS``; LibreTranslate's
``--threads`` as well). Argos decodes with its own fixed options (beam 4, a batch of at most 32 sentences),
which no setting changes: the benchmarks print that beside the figures.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / "build" / "peers-venv"
REQUIREMENTS = ("libretranslate==1.9.6", "rich<13", "spacy")

#: The worker run in the peers' venv: one JSON request a line on stdin ({"texts": [...], "joined": bool}),
#: one answer a line on stdout ({"seconds": ..., "outputs": n}). ``joined`` sends the texts as one text of
#: several sentences (argos batches a text's sentences), otherwise one ``translate()`` call per text.
ARGOS_WORKER = r"""
import json, sys, time
import argostranslate.translate as argos
source, target = sys.argv[1], sys.argv[2]
argos.translate("Warm up.", source, target)
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    start = time.perf_counter()
    if request["joined"]:
        outputs = [argos.translate(" ".join(request["texts"]), source, target)]
    else:
        outputs = [argos.translate(text, source, target) for text in request["texts"]]
    print(json.dumps({"seconds": time.perf_counter() - start, "outputs": len(outputs)}), flush=True)
"""


def venv_python(venv: Path = VENV) -> Path:
    return venv / "bin" / "python"


def ensure_venv(venv: Path = VENV, *, quiet: bool = True) -> Path:
    """The peers' virtualenv, made and filled on first use (a few minutes); returns its python."""
    python = venv_python(venv)
    probe = [str(python), "-c", "import libretranslate, argostranslate, spacy"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(f"peers: installing {', '.join(REQUIREMENTS)} into {venv} (once)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", *(["--quiet"] if quiet else []), *REQUIREMENTS], check=True
    )
    subprocess.run(probe, check=True)
    return python


def add_blank_spacy(folders: Sequence[tuple[Path, str]], python: Path) -> None:
    """Write a blank spaCy pipeline for each ``(folder, lang)`` into ``folder / "spacy"`` (in an Argos
    package: what argos's spaCy chunking loads), with no weights to download; one process for all."""
    for folder, _ in folders:
        shutil.rmtree(folder / "spacy", ignore_errors=True)
    code = "import spacy, sys\nfor folder, lang in zip(sys.argv[1::2], sys.argv[2::2]):\n"
    code += "    spacy.blank(lang).to_disk(folder + '/spacy')\n"
    args = [str(x) for folder, lang in folders for x in (folder, lang)]
    subprocess.run([str(python), "-c", code, *args], check=True)


@dataclass(frozen=True)
class Peers:
    """What the peers run with: the venv's python, an Argos packages folder, a scratch home."""

    python: Path
    packages_dir: Path
    home: Path

    def env(self, settings: str, threads: tuple[int, int]) -> dict[str, str]:
        """The environment of a peer process: offline Argos on :attr:`packages_dir`, the scratch home, and
        with ``settings`` "matched" CTranslate2's (inter, intra) ``threads`` set to dragoman's."""
        if settings not in ("default", "matched"):
            raise ValueError(f"settings is 'default' or 'matched', not {settings!r}")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ARGOS_", "LT_", "DRAGOMAN_"))}
        env.update(
            HOME=str(self.home),
            XDG_DATA_HOME=str(self.home / "data"),
            XDG_CONFIG_HOME=str(self.home / "config"),
            XDG_CACHE_HOME=str(self.home / "cache"),
            ARGOS_PACKAGES_DIR=str(self.packages_dir),
            ARGOS_CHUNK_TYPE="SPACY",
            ARGOS_DEVICE_TYPE="cpu",
            PYTHONWARNINGS="ignore",  # requests' warning about its dependencies' versions, in every process
        )
        if settings == "matched":
            env.update(ARGOS_INTER_THREADS=str(threads[0]), ARGOS_INTRA_THREADS=str(threads[1]))
        return env


def prepare(root: Path, pack: Path, source: str, target: str) -> Peers:
    """Everything the peers need under ``root``: the venv (:func:`ensure_venv`), an Argos packages folder
    with ``pack`` (``source`` -> ``target``; a blank spaCy pipeline added in place, so that dragoman and the
    peers read the same files) linked in and a tiny reverse pack (LibreTranslate fetches the package index
    when fewer than two are installed), and a scratch home whose Argos cache already holds a spaCy
    pipeline (argos otherwise tries to download ``xx_sent_ud_sm`` when it is imported)."""
    from dragoman.testing.tinypack import build_argos_pack

    python = ensure_venv()
    packages_dir, home = root / "argos-packages", root / "peer-home"
    packages_dir.mkdir(parents=True, exist_ok=True)
    link = packages_dir / pack.name
    if not link.exists():
        link.symlink_to(pack.resolve(), target_is_directory=True)
    reverse = build_argos_pack(packages_dir / f"translate-{target}_{source}", target, source)
    cache = home / "cache" / "argos-translate"  # argos's spaCy cache is cache / "spacy"
    cache.mkdir(parents=True, exist_ok=True)
    add_blank_spacy([(pack, source), (reverse, target), (cache, "xx")], python)
    (cache / "spacy" / "senter" / "model").mkdir(parents=True, exist_ok=True)
    return Peers(python, packages_dir, home)


class ArgosWorker:
    """argostranslate's ``translate()`` in a process of the peers' venv, driven one request at a time (so
    that a benchmark can alternate it with dragoman round by round)."""

    def __init__(self, python: Path, env: Mapping[str, str], source: str, target: str) -> None:
        self.process = subprocess.Popen(
            [str(python), "-c", ARGOS_WORKER, source, target],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=dict(env),
            text=True,
        )
        if self._read().get("ready") is not True:
            raise RuntimeError("the argos worker did not start")

    def _read(self) -> dict[str, object]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the argos worker stopped (exit {self.process.wait()})")
        answer: dict[str, object] = json.loads(line)
        return answer

    def translate(self, texts: Sequence[str], *, joined: bool = False) -> float:
        """Translate ``texts`` (one call each, or ``joined`` as one text); the worker's own seconds."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"texts": list(texts), "joined": joined}) + "\n")
        self.process.stdin.flush()
        seconds = self._read()["seconds"]
        assert isinstance(seconds, float)
        return seconds

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def libretranslate(
    python: Path, env: Mapping[str, str], languages: Sequence[str], *, threads: int | None = None
) -> Iterator[str]:
    """A LibreTranslate server of the peers' venv on a free local port, its languages limited to
    ``languages`` (``--threads`` when given, else its default); yields its URL, stops it after."""
    port = _free_port()
    cmd = [
        str(python.parent / "libretranslate"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--load-only",
        ",".join(languages),
        "--disable-web-ui",
    ]
    if threads is not None:
        cmd += ["--threads", str(threads)]
    log = Path(env["HOME"]) / f"libretranslate-{port}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(cmd, env=dict(env), stdout=sink, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"LibreTranslate stopped (exit {process.returncode}); see {log}")
            try:
                with urllib.request.urlopen(f"{url}/languages", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"LibreTranslate did not answer in time; see {log}")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
