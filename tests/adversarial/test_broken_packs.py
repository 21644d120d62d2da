"""Packs: one broken pack never takes down a front door, pack contents never reach outside the pack, downloads
and the index are bounded, and a killed install leaves nothing behind (issue 9, items 3, 6 and 7).

* Broken packs (item 6): every way of breaking a hand-copied pack below (bad manifest fields, malformed or
  huge or endlessly nested JSON, missing model files, FIFOs that would block a reader, links out of the pack,
  absolute or ``..`` paths in the manifest, unsafe ids) is listed as broken with its reason, skipped for
  routing, and refused by ``packs install`` with a typed error, while the good pack beside it keeps working
  through every front door: the CLI, the daemon's ``/health`` and ``/translate``, MCP ``engine_status`` and
  ``translate``.
* Downloads (item 3): a server trickling bytes (in the body or in the headers) is cut off at the overall
  deadline or by the minimum pace, and an index over its bound is refused, all with typed errors; the
  servers are loopback HTTP servers started here.
* Staging (item 7): an install killed with SIGKILL leaves a staging folder that the next start removes; a live
  install's folder is never removed; the store is intact.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from mcp_support import in_process, structured

from dragoman.cli import main as cli_main
from dragoman.errors import (
    DownloadTimedOut,
    IndexTooLarge,
    PackInstallError,
    PackIntegrityError,
    PackUnsafe,
)
from dragoman.models import index as index_mod
from dragoman.models import install as install_mod
from dragoman.models import store as store_mod
from dragoman.models.manifest import MANIFEST_NAME, read_manifest
from dragoman.models.packs import PackStore, install
from dragoman.models.store import STAGING_DIR
from dragoman.server.daemon.app import create_app
from dragoman.settings import Settings
from dragoman.testing.daemon import BackgroundDaemon
from dragoman.testing.tinypack import build_multilingual_pack
from dragoman.translation.engine import Engine

SECRET = "TOP-SECRET-TOKEN-d41d8cd98f00"

# ----- ways to break a pack ------------------------------------------------------------------------------


def _json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data), encoding="utf-8")


def _extra(pack: Path, **fields: object) -> None:
    _json(pack / MANIFEST_NAME, fields)


def _meta(pack: Path, **fields: object) -> None:
    meta = json.loads((pack / "metadata.json").read_text(encoding="utf-8"))
    meta.update(fields)
    _json(pack / "metadata.json", meta)


def _secret(outside: Path) -> Path:
    secret = outside / "secret.txt"
    secret.write_text(SECRET + "\n", encoding="utf-8")
    return secret


def _multilingual(pack: Path, outside: Path, **fields: object) -> None:
    """Turn the pack into a multilingual one whose manifest says ``fields``."""
    manifest: dict[str, object] = {
        "kind": "multilingual",
        "id": "multi-x",
        "languages": ["eng_Latn", "spa_Latn"],
    }
    _extra(pack, **{**manifest, **fields})


def _swap(path: Path, make: Callable[[Path], object]) -> None:
    """Replace a file of the pack by something else (a folder, a FIFO)."""
    path.unlink()
    make(path)


def _model_links_out(pack: Path, outside: Path) -> None:
    shutil.move(str(pack / "model"), str(outside / "model"))
    (pack / "model").symlink_to(outside / "model", target_is_directory=True)


def _sp_out(pack: Path, outside: Path, absolute: bool) -> None:
    shutil.copy(pack / "sentencepiece.model", outside / "sp.model")
    _extra(pack, sentencepiece=str(outside / "sp.model") if absolute else f"../{outside.name}/sp.model")


def _model_out(pack: Path, outside: Path, absolute: bool) -> None:
    shutil.copytree(pack / "model", outside / "model2")
    _multilingual(pack, outside, model=str(outside / "model2") if absolute else f"../{outside.name}/model2")


BREAKERS: dict[str, Callable[[Path, Path], object]] = {
    # manifest fields of the wrong type or out of range
    "max_input_tokens not a number": lambda p, o: _extra(p, max_input_tokens="lots"),
    "max_input_tokens negative": lambda p, o: _extra(p, max_input_tokens=-5),
    "max_input_tokens a boolean": lambda p, o: _extra(p, max_input_tokens=True),
    "max_input_tokens huge": lambda p, o: _extra(p, max_input_tokens=10**30),
    "quality out of range": lambda p, o: _extra(p, quality=9),
    "version an object": lambda p, o: _meta(p, package_version={"major": 1}),
    "from_code a number": lambda p, o: _meta(p, from_code=123),
    "to_code unknown": lambda p, o: _meta(p, to_code="xx-klingon"),
    "sentencepiece a list": lambda p, o: _extra(p, sentencepiece=["a"]),
    "sentencepiece with a NUL": lambda p, o: _extra(p, sentencepiece="sp\0.model"),
    "id with a slash": lambda p, o: _extra(p, id="../../etc"),
    "id an object": lambda p, o: _extra(p, id={"a": 1}),
    "languages hold an object": lambda p, o: _multilingual(p, o, languages=["eng_Latn", {"x": 1}]),
    "lang_tokens not strings": lambda p, o: _multilingual(p, o, lang_tokens={"eng_Latn": 5}),
    # malformed manifests
    "metadata a list": lambda p, o: _json(p / "metadata.json", [1, 2]),
    "metadata not utf-8": lambda p, o: (p / "metadata.json").write_bytes(b"\xff\xfe{\x00"),
    "metadata endlessly nested": lambda p, o: (p / "metadata.json").write_text("[" * 200_000),
    "metadata over a megabyte": lambda p, o: _meta(p, description="x" * 1_100_000),
    "metadata a folder": lambda p, o: _swap(p / "metadata.json", Path.mkdir),
    "manifest a FIFO": lambda p, o: os.mkfifo(p / MANIFEST_NAME),
    "metadata a FIFO": lambda p, o: _swap(p / "metadata.json", os.mkfifo),
    "LICENSE a FIFO": lambda p, o: os.mkfifo(p / "LICENSE"),
    # missing model files
    "model.bin missing": lambda p, o: (p / "model" / "model.bin").unlink(),
    "sentencepiece missing": lambda p, o: (p / "sentencepiece.model").unlink(),
    "dangling link": lambda p, o: (p / "notes.txt").symlink_to(p / "nowhere"),
    "link loop": lambda p, o: (p / "loop").symlink_to(p / "loop"),
    # contents reaching outside the pack
    "LICENSE links outside": lambda p, o: (p / "LICENSE").symlink_to(_secret(o)),
    "model folder links outside": _model_links_out,
    "sentencepiece absolute": lambda p, o: _sp_out(p, o, absolute=True),
    "sentencepiece climbs out": lambda p, o: _sp_out(p, o, absolute=False),
    "model path absolute": lambda p, o: _model_out(p, o, absolute=True),
    "model path climbs out": lambda p, o: _model_out(p, o, absolute=False),
}
UNSAFE = {
    "LICENSE links outside",
    "model folder links outside",
    "sentencepiece absolute",
    "sentencepiece climbs out",
    "model path absolute",
    "model path climbs out",
    "manifest a FIFO",
    "metadata a FIFO",
    "LICENSE a FIFO",
    "sentencepiece with a NUL",
}


def broken_pack(base: Path, good: Path, how: str) -> Path:
    """A copy of ``good`` named after ``how`` in ``base``, broken that way (outside files in a sibling)."""
    name = "broken-" + "".join(c if c.isalnum() else "-" for c in how)
    pack = base / name
    shutil.copytree(good, pack)
    outside = base.parent / f"outside-{name}"
    outside.mkdir(parents=True, exist_ok=True)
    BREAKERS[how](pack, outside)
    return pack


@pytest.fixture
def good_env(packs_dir: Path, tiny_argos_pack: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The packs directory holding the good tiny en->es pack, Apertium off."""
    monkeypatch.setenv("DRAGOMAN_APERTIUM", "0")
    shutil.copytree(tiny_argos_pack, packs_dir / "translate-en_es")
    return packs_dir


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ----- item 6: a broken pack is listed, skipped and refused; the rest keeps working -------------------------


@pytest.mark.parametrize("how", sorted(BREAKERS))
def test_a_broken_pack_is_listed_skipped_and_refused(
    how: str, good_env: Path, tiny_argos_pack: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = broken_pack(good_env, tiny_argos_pack, how)
    settings = Settings.from_env()
    store = PackStore(settings)

    # read: typed, never another exception, never blocking on a FIFO
    with pytest.raises(PackIntegrityError) as caught:
        read_manifest(pack)
    if how in UNSAFE:
        assert isinstance(caught.value, PackUnsafe), caught.value.message
    assert SECRET not in caught.value.message

    # listed as broken with the reason; the good pack is listed and used
    assert [m.id for m, _ in store.installed()] == ["argos-en-es"]
    assert [(p.name, why) for p, why in store.broken()] == [(pack.name, caught.value.message)]

    # the CLI front door: every command works, lists the broken pack, never shows the secret
    code, out, _ = cli(capsys, "packs", "list", "--json")
    listed = json.loads(out)
    assert code == 0 and [p["id"] for p in listed if not p["broken"]] == ["argos-en-es"]
    assert [(p["id"], p["error"]) for p in listed if p["broken"]] == [(pack.name, caught.value.message)]
    code, out, _ = cli(capsys, "status", "--json")
    status = json.loads(out)
    assert code == 0 and [p["id"] for p in status["packs"]] == ["argos-en-es"]
    assert [Path(b["path"]).name for b in status["broken_packs"]] == [pack.name]
    assert SECRET not in out
    code, out, _ = cli(capsys, "languages", "--json")
    assert code == 0 and [r["flores"] for r in json.loads(out)] == ["eng_Latn", "spa_Latn"]
    code, out, err = cli(capsys, "translate", "Hello world.", "--from", "en", "--to", "es", "--json")
    assert code == 0, err
    assert json.loads(out)["route"] == ["argos-en-es:eng_Latn->spa_Latn"]

    # install refuses it with a typed error and changes nothing
    before = sorted(p.name for p in good_env.iterdir())
    other = Settings.from_env({"DRAGOMAN_PACKS_DIR": str(tmp_path / "other-store")})
    with pytest.raises(PackIntegrityError) as refused:
        install(pack, other)
    if how in UNSAFE and how not in {"manifest a FIFO", "metadata a FIFO", "LICENSE a FIFO"}:
        assert isinstance(refused.value, PackUnsafe), refused.value.message
    assert SECRET not in refused.value.message
    assert PackStore(other).installed() == [] and not (tmp_path / "other-store" / STAGING_DIR).exists()
    code, _, err = cli(capsys, "packs", "install", str(pack), "--json")
    assert code == 2 and json.loads(err)["code"] in ("pack_integrity", "pack_unsafe")
    assert sorted(p.name for p in good_env.iterdir()) == before


@pytest.fixture
def many_broken(good_env: Path, tiny_argos_pack: Path) -> list[Path]:
    """Every broken pack of :data:`BREAKERS` at once, beside the good one."""
    return [broken_pack(good_env, tiny_argos_pack, how) for how in sorted(BREAKERS)]


def test_the_daemon_answers_health_and_translate_with_broken_packs(many_broken: list[Path]) -> None:
    settings = Settings.from_env()
    with Engine(settings) as engine:
        app = create_app(engine, settings, max_workers=2, queue_limit=8, request_timeout=60)
        with BackgroundDaemon(app) as daemon:
            health = httpx.get(daemon.url + "/health", timeout=30)
            done = httpx.post(
                daemon.url + "/translate",
                json={"text": "Hello world.", "target": "es", "source": "en"},
                timeout=60,
            )
            refused = httpx.post(
                daemon.url + "/translate", json={"text": "Hello.", "target": "spa_Latn", "source": "fra_Latn"}
            )
    assert health.status_code == 200, health.text
    assert health.json()["ok"] is True and SECRET not in health.text
    assert done.status_code == 200, done.text
    assert done.json()["translation"] and done.json()["target"] == "spa_Latn"
    assert refused.status_code == 400 and refused.json()["code"] == "unsupported_pair"


@pytest.mark.anyio
async def test_mcp_engine_status_and_translate_with_broken_packs(
    many_broken: list[Path], workdir: Path
) -> None:
    env = dict(os.environ)
    async with in_process(env, roots=[workdir]) as client:
        status = structured(await client.call_tool("engine_status", {}))
        done = structured(
            await client.call_tool("translate", {"text": "Hello world.", "target": "es", "source": "en"})
        )
    assert [p["id"] for p in status["packs"]] == ["argos-en-es"]
    assert sorted(Path(b["path"]).name for b in status["broken_packs"]) == sorted(p.name for p in many_broken)
    assert all(b["error"] for b in status["broken_packs"])
    assert SECRET not in json.dumps(status)
    assert done["translation"] and done["target"] == "spa_Latn"


def test_broken_packs_can_be_verified_and_removed_by_name(
    many_broken: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    for pack in many_broken:
        code, _, err = cli(capsys, "packs", "verify", pack.name, "--json")
        assert code == 2 and json.loads(err)["code"] in ("pack_integrity", "pack_unsafe"), err
        assert SECRET not in err
    code, out, _ = cli(capsys, "packs", "verify", "--json")  # every usable pack: the good one
    assert code == 0 and [r["pack_id"] for r in json.loads(out)] == ["argos-en-es"]
    for pack in many_broken:
        code, _, err = cli(capsys, "packs", "remove", pack.name)
        assert code == 0, err
    assert sorted(os.listdir(many_broken[0].parent)) == ["translate-en_es"]
    assert all(p.is_file() for p in many_broken[0].parent.parent.glob("outside-*/secret.txt"))


def test_a_pack_broken_while_the_daemon_runs_changes_nothing_else(
    good_env: Path, tiny_argos_pack: Path
) -> None:
    settings = Settings.from_env()
    with Engine(settings) as engine:
        app = create_app(engine, settings, max_workers=2, queue_limit=8, request_timeout=60)
        with BackgroundDaemon(app) as daemon:
            body = {"text": "Hello world.", "target": "es", "source": "en"}
            assert httpx.post(daemon.url + "/translate", json=body, timeout=60).status_code == 200
            # copied in by hand while the daemon runs; the good pack itself then gets a bad manifest
            broken_pack(good_env, tiny_argos_pack, "max_input_tokens not a number")
            health = httpx.get(daemon.url + "/health", timeout=30)
            languages = httpx.get(daemon.url + "/languages", timeout=30)
            done = httpx.post(daemon.url + "/translate", json=body, timeout=60)
            _extra(good_env / "translate-en_es", max_input_tokens="lots")
            os.utime(good_env)  # as a copy would: the packs directory changed
            gone = httpx.post(daemon.url + "/translate", json=body, timeout=60)
            after = httpx.get(daemon.url + "/health", timeout=30)
    assert health.status_code == 200 and health.json()["ok"] is True
    assert languages.status_code == 200
    assert [r["flores"] for r in languages.json()] == ["eng_Latn", "spa_Latn"]
    assert done.status_code == 200, done.text
    assert gone.status_code == 400 and gone.json()["code"] == "unsupported_pair", gone.text
    assert after.status_code == 200 and after.json()["ok"] is True


def test_a_broken_pack_never_routes_and_the_good_one_does(many_broken: list[Path]) -> None:
    with Engine(Settings.from_env()) as engine:
        assert sorted(engine.installed_pairs()) == [("eng_Latn", "spa_Latn")]
        assert [p.id for p in engine.packs()] == ["argos-en-es"]


def test_an_unreadable_folder_makes_its_pack_broken_not_the_store(
    good_env: Path, tiny_argos_pack: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pack = good_env / "translate-en_fr"
    shutil.copytree(tiny_argos_pack, pack)
    locked = pack / "model"
    real_scandir = os.scandir

    def scandir(
        path: object = ".",
    ) -> object:  # as a folder without read permission answers (tests run as root)
        if Path(str(path)) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "scandir", scandir)
    store = PackStore(Settings.from_env())
    assert [m.id for m, _ in store.installed()] == ["argos-en-es"]
    assert [(p.name, "Permission denied" in why) for p, why in store.broken()] == [("translate-en_fr", True)]


def test_links_inside_a_pack_are_fine(good_env: Path) -> None:
    pack = good_env / "translate-en_es"
    (pack / "LICENSE.txt").write_text("MIT\n")
    (pack / "LICENSE").symlink_to(pack / "LICENSE.txt")
    assert read_manifest(pack).license == "MIT"


# ----- item 6: install refuses content reaching outside ---------------------------------------------------


def test_install_from_a_directory_refuses_a_link_outside_it(tmp_path: Path, tiny_argos_pack: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(tiny_argos_pack, src)
    (src / "LICENSE").symlink_to(_secret(tmp_path))
    settings = Settings.from_env({"DRAGOMAN_PACKS_DIR": str(tmp_path / "packs")})
    with pytest.raises(PackUnsafe, match="outside"):
        install(src, settings)
    assert PackStore(settings).installed() == []
    # a link inside the source directory is followed (the copy holds the file itself)
    (src / "LICENSE").unlink()
    (src / "COPYING").write_text("CC-BY-4.0\n")
    (src / "LICENSE").symlink_to(src / "COPYING")
    assert install(src, settings).license == "CC-BY-4.0"
    assert not (settings.engine.packs_dir / "argos-en-es" / "LICENSE").is_symlink()


@pytest.mark.parametrize("rel", ["/etc/hostname", "../../outside.txt", "model/../../../x", "C:/x"])
def test_verify_never_reads_outside_the_pack_an_install_record_names(
    rel: str, tmp_path: Path, tiny_argos_pack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings.from_env({"DRAGOMAN_PACKS_DIR": str(tmp_path / "packs")})
    install(tiny_argos_pack, settings)
    record = settings.engine.packs_dir / "argos-en-es" / store_mod.INSTALL_RECORD
    data = json.loads(record.read_text())
    data["files"][rel] = "0" * 64
    record.write_text(json.dumps(data))
    with pytest.raises(PackUnsafe, match="outside the model"):
        PackStore(settings).verify("argos-en-es")


def _tar_with(dest: Path, pack: Path, extra: Callable[[tarfile.TarFile], None]) -> Path:
    with tarfile.open(dest, "w:gz") as tf:
        tf.add(pack, arcname="pack")
        extra(tf)
    return dest


def _link_member(name: str, target: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


@pytest.mark.parametrize(
    ("label", "member"),
    [
        ("symlink out", _link_member("pack/LICENSE", "/etc/passwd", tarfile.SYMTYPE)),
        ("relative symlink out", _link_member("pack/LICENSE", "../../../etc/passwd", tarfile.SYMTYPE)),
        ("hard link out", _link_member("pack/LICENSE", "/etc/passwd", tarfile.LNKTYPE)),
        ("fifo", _link_member("pack/LICENSE", "", tarfile.FIFOTYPE)),
    ],
)
def test_archives_with_links_or_fifos_are_refused_as_unsafe(
    label: str, member: tarfile.TarInfo, tmp_path: Path, tiny_argos_pack: Path
) -> None:
    archive = _tar_with(tmp_path / "p.tar.gz", tiny_argos_pack, lambda tf: tf.addfile(member))
    settings = Settings.from_env({"DRAGOMAN_PACKS_DIR": str(tmp_path / "packs")})
    with pytest.raises(PackUnsafe):
        install(archive, settings)
    assert PackStore(settings).installed() == [] and not (tmp_path / "packs" / STAGING_DIR).exists()


def test_an_archive_whose_manifest_points_outside_is_refused(tmp_path: Path) -> None:
    multi = build_multilingual_pack(tmp_path / "multi", ["eng_Latn", "fra_Latn"], pack_id="multi")
    shutil.copytree(multi / "model", tmp_path / "elsewhere")
    manifest = json.loads((multi / MANIFEST_NAME).read_text())
    settings = Settings.from_env({"DRAGOMAN_PACKS_DIR": str(tmp_path / "packs")})
    for model in (str(tmp_path / "elsewhere"), "../../elsewhere", "model/../../elsewhere"):
        manifest["model"] = model
        (multi / MANIFEST_NAME).write_text(json.dumps(manifest))
        archive = _tar_with(tmp_path / "multi.tar.gz", multi, lambda tf: None)
        with pytest.raises(PackUnsafe, match="outside the pack"):
            install(archive, settings)
    assert PackStore(settings).installed() == []


# ----- item 3: downloads and the index are bounded --------------------------------------------------------


@dataclass
class Hostile:
    """A loopback HTTP server misbehaving as a route says; ``stop`` lets its handlers go."""

    base: str
    routes: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)


def _handle(state: Hostile, conn: socket.socket) -> None:
    try:
        request = b""
        while b"\r\n\r\n" not in request:
            chunk = conn.recv(4096)
            if not chunk:
                return
            request += chunk
        path = request.split(b" ", 2)[1].decode()
        mode, body = state.routes.get(path, ("missing", b""))
        if mode == "missing":
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        elif mode == "trickle-body":  # declares the full length, then sends a byte every 20 ms
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode())
            for byte in body:
                if state.stop.wait(0.02):
                    return
                conn.sendall(bytes([byte]))
        elif mode == "trickle-headers":  # never finishes its headers
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            n = 0
            while not state.stop.wait(0.02):
                conn.sendall(b"X" if n % 40 else b"\r\nX-Pad: ")
                n += 1
        elif mode == "endless":  # no length, sends until the client goes away
            conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
            while not state.stop.is_set():
                conn.sendall(body)
        elif mode == "ok":
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    except OSError:
        pass
    finally:
        conn.close()


@pytest.fixture
def hostile() -> Iterator[Hostile]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.1)
    state = Hostile(base=f"http://127.0.0.1:{listener.getsockname()[1]}")

    def accept() -> None:
        while not state.stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=_handle, args=(state, conn), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.stop.set()
        thread.join(5)
        listener.close()


def _timed(call: Callable[[], object]) -> tuple[BaseException, float]:
    started = time.monotonic()
    try:
        call()
    except BaseException as exc:
        return exc, time.monotonic() - started
    raise AssertionError("no error")


def test_a_trickling_download_is_cut_off_by_the_minimum_pace(
    hostile: Hostile, argos_archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(install_mod, "DOWNLOAD_GRACE_SECONDS", 0.5)
    monkeypatch.setattr(install_mod, "DOWNLOAD_MIN_BYTES_PER_SECOND", 4096.0)
    hostile.routes["/p.argosmodel"] = ("trickle-body", argos_archive.read_bytes())
    settings = Settings.from_env({"DRAGOMAN_PACKS_DIR": str(tmp_path / "packs")})
    exc, took = _timed(lambda: install(hostile.base + "/p.argosmodel", settings))
    assert isinstance(exc, DownloadTimedOut) and "crawling" in exc.message, exc
    assert took < 10 and exc.status == 504 and exc.code == "download_timeout"
    assert sorted(os.listdir(settings.engine.packs_dir)) == []


@pytest.mark.parametrize("mode", ["trickle-body", "trickle-headers"])
def test_a_trickling_download_is_cut_off_at_the_overall_deadline(
    mode: str, hostile: Hostile, argos_archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(install_mod, "DOWNLOAD_DEADLINE_SECONDS", 1.0)
    monkeypatch.setattr(install_mod, "DOWNLOAD_MIN_BYTES_PER_SECOND", 0.0)  # the deadline alone
    hostile.routes["/p.argosmodel"] = (mode, argos_archive.read_bytes())
    settings = Settings.from_env({"DRAGOMAN_PACKS_DIR": str(tmp_path / "packs")})
    exc, took = _timed(lambda: install(hostile.base + "/p.argosmodel", settings))
    assert isinstance(exc, DownloadTimedOut) and "in all" in exc.message, exc
    assert 0.9 < took < 8  # per-read timeouts (60 s) never fired: bytes kept coming
    assert sorted(os.listdir(settings.engine.packs_dir)) == []


def test_the_deadline_stops_the_worker_too(
    hostile: Hostile, argos_archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(install_mod, "DOWNLOAD_DEADLINE_SECONDS", 0.5)
    monkeypatch.setattr(install_mod, "DOWNLOAD_MIN_BYTES_PER_SECOND", 0.0)
    hostile.routes["/p.argosmodel"] = ("trickle-body", argos_archive.read_bytes())
    settings = Settings.from_env({"DRAGOMAN_PACKS_DIR": str(tmp_path / "packs")})
    with pytest.raises(DownloadTimedOut):
        install(hostile.base + "/p.argosmodel", settings)
    deadline = time.monotonic() + 5
    while any(t.name == "dragoman-fetch" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(t.name == "dragoman-fetch" for t in threading.enumerate())


@pytest.mark.parametrize("mode", ["ok", "endless"])
def test_an_index_over_its_bound_is_refused(
    mode: str, hostile: Hostile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_mod, "MAX_INDEX_BYTES", 64 * 1024)
    body = b"[" + b'{"from_code": "en", "to_code": "es", "links": ["x"]},' * 2000 + b"{}]"
    hostile.routes["/index.json"] = (mode, body)
    settings = Settings.from_env(
        {
            "DRAGOMAN_PACKS_DIR": str(tmp_path / "packs"),
            "DRAGOMAN_ARGOS_INDEX_URL": hostile.base + "/index.json",
        }
    )
    exc, took = _timed(lambda: install("en->es", settings))
    assert isinstance(exc, IndexTooLarge) and exc.code == "index_too_large", exc
    assert took < 10
    local = tmp_path / "index.json"
    local.write_bytes(body)
    with pytest.raises(IndexTooLarge):
        index_mod.fetch_index(settings.replace(argos_index_url=str(local)))


def test_a_trickling_index_is_cut_off(
    hostile: Hostile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_mod, "INDEX_DEADLINE_SECONDS", 1.0)
    hostile.routes["/index.json"] = ("trickle-body", b"[" + b" " * 10_000 + b"]")
    settings = Settings.from_env({"DRAGOMAN_ARGOS_INDEX_URL": hostile.base + "/index.json"})
    exc, took = _timed(lambda: index_mod.fetch_index(settings))
    assert isinstance(exc, DownloadTimedOut), exc
    assert took < 8


def test_a_broken_connection_is_still_an_install_error(hostile: Hostile, tmp_path: Path) -> None:
    settings = Settings.from_env({"DRAGOMAN_PACKS_DIR": str(tmp_path / "packs")})
    with pytest.raises(PackInstallError, match="HTTP 404"):
        install(hostile.base + "/missing.argosmodel", settings)


# ----- item 7: a killed install leaves nothing behind after the next start ----------------------------------

_INSTALL = """
import sys
from dragoman.models.packs import install
from dragoman.settings import Settings
install(sys.argv[1], Settings.from_env())
"""


def _staging(packs: Path) -> list[Path]:
    staging = packs / STAGING_DIR
    return sorted(staging.iterdir()) if staging.is_dir() else []


def _start_stalled_install(hostile: Hostile, argos_archive: Path) -> subprocess.Popen[bytes]:
    """An install in a subprocess, downloading from a server that sends a byte every 20 ms."""
    body = argos_archive.read_bytes()
    hostile.routes["/stall.argosmodel"] = ("trickle-body", body)
    return subprocess.Popen(
        [sys.executable, "-c", _INSTALL, hostile.base + "/stall.argosmodel"],
        env={**os.environ, "DRAGOMAN_APERTIUM": "0"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _wait_for_download(packs: Path, proc: subprocess.Popen[bytes]) -> Path:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the install ended early"
        for work in _staging(packs):
            if any(p.name.startswith("download-") for p in work.iterdir()):
                return work
        time.sleep(0.05)
    raise AssertionError("the install never started downloading")


def test_kill_9_mid_install_leaves_nothing_after_the_next_start(
    good_env: Path, hostile: Hostile, argos_archive: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = PackStore(Settings.from_env()).verify("argos-en-es")
    proc = _start_stalled_install(hostile, argos_archive)
    try:
        work = _wait_for_download(good_env, proc)
        # while the install runs, a start (here: an engine, then a sweep) leaves its folder alone
        with Engine(Settings.from_env()):
            pass
        assert store_mod.sweep_stale(good_env) == [] and work.is_dir()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert work.is_dir()  # left behind by the kill
    (good_env / ".trash-argos-en-xx-1234").mkdir()  # as an interrupted remove leaves
    (good_env / ".trash-argos-en-xx-1234" / "model.bin").write_bytes(b"x" * 1000)
    code, out, _ = cli(capsys, "packs", "list", "--json")  # the next start
    assert code == 0 and [p["id"] for p in json.loads(out)] == ["argos-en-es"]
    assert sorted(os.listdir(good_env)) == ["translate-en_es"]
    after = PackStore(Settings.from_env()).verify("argos-en-es")
    assert (after.files_checked, after.bytes_checked) == (before.files_checked, before.bytes_checked)


def test_the_next_install_sweeps_a_killed_one(
    tmp_path: Path, argos_archive: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings.from_env({"DRAGOMAN_PACKS_DIR": str(tmp_path / "packs")})
    staging = tmp_path / "packs" / STAGING_DIR
    staging.mkdir(parents=True)
    dead = staging / "install-abc123"  # our naming, nobody holds its lock: a killed install's
    (dead / "model").mkdir(parents=True)
    (dead / "download-1-p.argosmodel").write_bytes(b"x" * 10_000)
    fresh_new = staging / "new-young"  # the instant before a live install locks it: kept
    fresh_new.mkdir()
    old_new = staging / "new-old"
    old_new.mkdir()
    old = time.time() - store_mod.STALE_UNLOCKED_SECONDS - 60
    os.utime(old_new, (old, old))
    foreign = staging / "not-ours"
    foreign.mkdir()
    install(argos_archive, settings)
    assert sorted(p.name for p in staging.iterdir()) == ["new-young", "not-ours"]
    assert [m.id for m, _ in PackStore(settings).installed()] == ["argos-en-es"]


def test_a_live_install_in_this_process_is_never_swept(tmp_path: Path) -> None:
    root = tmp_path / "packs"
    root.mkdir()
    with store_mod.staging_dir(root) as work:
        assert work.name.startswith("install-")
        assert store_mod.sweep_stale(root) == [] and work.is_dir()
    assert not (root / STAGING_DIR).exists()
