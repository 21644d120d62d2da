"""Installing packs: directories, archives, a loopback HTTP server, the Argos index, unsafe archives."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from dragoman.errors import InvalidRequest, PackInstallError, PackIntegrityError
from dragoman.models import install as install_mod
from dragoman.models.manifest import read_manifest
from dragoman.models.packs import PackStore, install
from dragoman.models.store import read_record
from dragoman.settings import Settings
from dragoman.testing.tinypack import build_argos_archive, build_argos_pack, build_multilingual_pack

MiB = 1024 * 1024


def make_settings(tmp_path: Path, **kw: object) -> Settings:
    return Settings.build(packs_dir=tmp_path / "packs", glossary_path=tmp_path / "glossary.json", **kw)


def leftovers(settings: Settings) -> list[str]:
    """Everything in the packs dir that is not an installed pack."""
    if not settings.engine.packs_dir.exists():
        return []
    installed = {p.name for _, p in PackStore(settings).installed()}
    return sorted(p.name for p in settings.engine.packs_dir.iterdir() if p.name not in installed)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("archives")
    v10 = build_argos_archive(base / "translate-en_es-1_0.argosmodel", "en", "es", version="1.0")
    v11 = build_argos_archive(base / "translate-en_es-1_1.argosmodel", "en", "es", version="1.1", seed=1)
    multi = build_multilingual_pack(base / "nllb-tiny", ["eng_Latn", "fra_Latn"], pack_id="nllb-tiny")
    tgz = base / "nllb-tiny.tar.gz"
    with tarfile.open(tgz, "w:gz") as tf:
        tf.add(multi, arcname="nllb-tiny")
    return {"v10": v10, "v11": v11, "tgz": tgz, "multi_dir": multi}


# --- a loopback HTTP server ----------------------------------------------------------------------------


@dataclass
class Route:
    body: bytes
    status: int = 200
    mode: str = "ok"  # "ok", "short" (declares more than it sends, then closes), "slow" (stalls)


@dataclass
class Server:
    base: str
    routes: dict[str, Route] = field(default_factory=dict)
    hits: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def serve(self, path: str, body: bytes, **kw: object) -> str:
        self.routes[path] = Route(body, **kw)  # type: ignore[arg-type]
        return self.base + path


@pytest.fixture()
def server() -> Iterator[Server]:
    state: Server | None = None

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            assert state is not None
            state.hits.append(self.path)
            route = state.routes.get(self.path)
            try:
                if route is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "9")
                    self.end_headers()
                    self.wfile.write(b"not found")
                    return
                self.send_response(route.status)
                self.send_header("Content-Type", "application/octet-stream")
                if route.mode == "short":
                    self.send_header("Content-Length", str(len(route.body) * 2))
                    self.end_headers()
                    self.wfile.write(route.body)
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.send_header("Content-Length", str(len(route.body)))
                self.end_headers()
                if route.mode == "slow":
                    self.wfile.write(route.body[: len(route.body) // 2])
                    self.wfile.flush()
                    state.stop.wait(10)
                    return
                self.wfile.write(route.body)
            except (BrokenPipeError, ConnectionResetError):
                pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    state = Server(base=f"http://127.0.0.1:{httpd.server_address[1]}")
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.stop.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


# --- local sources -------------------------------------------------------------------------------------


def test_install_from_directory(tmp_path: Path) -> None:
    src = build_argos_pack(tmp_path / "src" / "en_es", "en", "es")
    settings = make_settings(tmp_path)
    manifest = install(src, settings)
    assert manifest.id == "argos-en-es" and manifest.pairs == (("eng_Latn", "spa_Latn"),)
    installed = settings.engine.packs_dir / "argos-en-es"
    assert sha(installed / "model" / "model.bin") == sha(src / "model" / "model.bin")
    assert read_manifest(installed) == manifest
    assert leftovers(settings) == []
    assert src.is_dir()  # the source is copied, not moved


def test_install_directory_refuses_sha256(tmp_path: Path) -> None:
    src = build_argos_pack(tmp_path / "src", "en", "es")
    with pytest.raises(InvalidRequest, match="sha256"):
        install(src, make_settings(tmp_path), sha256="0" * 64)


def test_install_from_argosmodel_file(tmp_path: Path, archives: dict[str, Path]) -> None:
    settings = make_settings(tmp_path)
    calls: list[tuple[int, int, str]] = []
    manifest = install(str(archives["v10"]), settings, progress=lambda d, t, m: calls.append((d, t, m)))
    assert (manifest.id, manifest.version) == ("argos-en-es", "1.0")
    record = read_record(settings.engine.packs_dir / "argos-en-es")
    assert record is not None
    assert record.archive_sha256 == sha(archives["v10"]) and record.source_kind == "file"
    assert "model/model.bin" in dict(record.files)  # re-keyed relative to the pack, not the archive
    assert any(m == "extracting" for _, _, m in calls)
    extracting = [(d, t) for d, t, m in calls if m == "extracting"]
    assert extracting[-1][0] == extracting[-1][1] > 0  # all declared bytes were written
    assert leftovers(settings) == []
    assert PackStore(settings).verify("argos-en-es").files_checked == len(record.files)


def test_tqdm_progress_draws_on_stderr(
    tmp_path: Path, archives: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    with install_mod.tqdm_progress("install") as progress:
        install(archives["v10"], make_settings(tmp_path), progress=progress)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "install: extracting" in captured.err


def test_install_from_tar_gz(tmp_path: Path, archives: dict[str, Path]) -> None:
    settings = make_settings(tmp_path)
    manifest = install(archives["tgz"], settings, sha256=sha(archives["tgz"]))
    assert manifest.id == "nllb-tiny" and manifest.kind == "multilingual"
    assert sha(settings.engine.packs_dir / "nllb-tiny" / "model" / "model.bin") == sha(
        archives["multi_dir"] / "model" / "model.bin"
    )
    assert leftovers(settings) == []


def test_install_from_file_with_wrong_sha256(tmp_path: Path, archives: dict[str, Path]) -> None:
    settings = make_settings(tmp_path)
    with pytest.raises(PackIntegrityError, match="expected"):
        install(archives["v10"], settings, sha256="sha256:" + "0" * 64)
    assert leftovers(settings) == [] and PackStore(settings).installed() == []


def test_bad_sha256_argument(tmp_path: Path, archives: dict[str, Path]) -> None:
    with pytest.raises(InvalidRequest, match="64 hexadecimal"):
        install(archives["v10"], make_settings(tmp_path), sha256="abc")


def test_unknown_source(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="not an existing file"):
        install(tmp_path / "nope.argosmodel", make_settings(tmp_path))


def test_replace_false_keeps_the_old_pack_and_true_swaps(tmp_path: Path, archives: dict[str, Path]) -> None:
    settings = make_settings(tmp_path)
    install(archives["v10"], settings)
    before = sha(settings.engine.packs_dir / "argos-en-es" / "model" / "model.bin")
    with pytest.raises(PackInstallError, match="already installed") as info:
        install(archives["v11"], settings)
    assert "--replace" in info.value.message
    assert read_manifest(settings.engine.packs_dir / "argos-en-es").version == "1.0"
    assert sha(settings.engine.packs_dir / "argos-en-es" / "model" / "model.bin") == before
    assert leftovers(settings) == []
    manifest = install(archives["v11"], settings, replace=True)
    assert manifest.version == "1.1"
    assert read_manifest(settings.engine.packs_dir / "argos-en-es").version == "1.1"
    assert sha(settings.engine.packs_dir / "argos-en-es" / "model" / "model.bin") != before
    assert leftovers(settings) == []
    PackStore(settings).verify("argos-en-es")


def test_concurrent_installs_of_one_pack(tmp_path: Path, archives: dict[str, Path]) -> None:
    settings = make_settings(tmp_path)
    results: list[str] = []

    def run(replace: bool) -> None:
        try:
            results.append(install(archives["v10"], settings, replace=replace).version)
        except PackInstallError as exc:
            results.append("refused" if "already installed" in exc.message else exc.message)

    threads = [threading.Thread(target=run, args=(False,)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["1.0", "refused", "refused"]
    results.clear()
    threads = [threading.Thread(target=run, args=(True,)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["1.0"] * 3
    assert PackStore(settings).verify("argos-en-es").files_checked > 0
    assert leftovers(settings) == []


# --- HTTP ----------------------------------------------------------------------------------------------


def test_install_over_http_with_progress_and_sha256(
    tmp_path: Path, server: Server, archives: dict[str, Path]
) -> None:
    body = archives["v10"].read_bytes()
    url = server.serve("/packs/translate-en_es-1_0.argosmodel", body)
    settings = make_settings(tmp_path)
    calls: list[tuple[int, int, str]] = []
    manifest = install(url, settings, sha256=sha(archives["v10"]), progress=lambda *a: calls.append(a))
    assert manifest.id == "argos-en-es"
    downloads = [(d, t) for d, t, m in calls if m.startswith("downloading")]
    assert downloads and downloads[-1] == (len(body), len(body))
    assert all(t == len(body) for _, t in downloads)
    assert [d for d, _ in downloads] == sorted(d for d, _ in downloads)
    record = read_record(settings.engine.packs_dir / "argos-en-es")
    assert record is not None and record.source == url and record.archive_sha256 == sha(archives["v10"])
    assert leftovers(settings) == []


def test_http_wrong_sha256_leaves_nothing(tmp_path: Path, server: Server, archives: dict[str, Path]) -> None:
    url = server.serve("/a.argosmodel", archives["v10"].read_bytes())
    settings = make_settings(tmp_path)
    with pytest.raises(PackIntegrityError, match="nothing was installed"):
        install(url, settings, sha256="f" * 64)
    assert leftovers(settings) == [] and PackStore(settings).installed() == []


def test_interrupted_download_leaves_nothing(
    tmp_path: Path, server: Server, archives: dict[str, Path]
) -> None:
    url = server.serve("/short.argosmodel", archives["v10"].read_bytes(), mode="short")
    settings = make_settings(tmp_path)
    with pytest.raises(PackInstallError, match="interrupted"):
        install(url, settings)
    assert leftovers(settings) == []
    assert not (settings.engine.packs_dir / "argos-en-es").exists()


def test_http_404(tmp_path: Path, server: Server) -> None:
    settings = make_settings(tmp_path)
    with pytest.raises(PackInstallError, match="HTTP 404"):
        install(server.base + "/missing.argosmodel", settings)
    assert leftovers(settings) == []


def test_http_stall_times_out(
    tmp_path: Path, server: Server, archives: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(install_mod, "DOWNLOAD_TIMEOUT_SECONDS", 0.3)
    url = server.serve("/slow.argosmodel", archives["v10"].read_bytes(), mode="slow")
    settings = make_settings(tmp_path)
    with pytest.raises(PackInstallError, match="interrupted") as caught:
        install(url, settings)
    # The client gave up by its own read timeout; the server still holds the stalled connection open (it lets
    # go only after 10 s, which would end in a short body, not a timeout).
    assert isinstance(caught.value.__cause__, httpx.ReadTimeout), repr(caught.value.__cause__)
    assert leftovers(settings) == []


def test_http_body_larger_than_the_limit(tmp_path: Path, server: Server, archives: dict[str, Path]) -> None:
    body = archives["v10"].read_bytes()
    url = server.serve("/big.argosmodel", body)
    settings = make_settings(tmp_path, max_pack_bytes=len(body) - 1)
    with pytest.raises(PackIntegrityError, match="max_pack_bytes"):
        install(url, settings)
    assert leftovers(settings) == []


# --- the Argos index -----------------------------------------------------------------------------------


def index_entry(
    code: str, from_code: str, to_code: str, version: str, link: str, **extra: str
) -> dict[str, object]:
    names = {"en": "English", "es": "Spanish", "fr": "French"}
    return {
        "package_version": version,
        "argos_version": "1.9",
        "from_code": from_code,
        "from_name": names[from_code],
        "to_code": to_code,
        "to_name": names[to_code],
        "links": [link],
        "code": code,
        "type": "translate",
        **extra,
    }


def test_install_through_the_argos_index(tmp_path: Path, server: Server, archives: dict[str, Path]) -> None:
    v10 = server.serve("/v1/translate-en_es-1_0.argosmodel", archives["v10"].read_bytes())
    v11 = server.serve("/v1/translate-en_es-1_1.argosmodel", archives["v11"].read_bytes())
    index = [
        index_entry("translate-en_es", "en", "es", "1.0", v10),
        index_entry("translate-en_es", "en", "es", "1.1", v11, sha256=sha(archives["v11"])),
        index_entry("translate-en_fr", "en", "fr", "1.0", server.base + "/v1/missing.argosmodel"),
    ]
    index_url = server.serve("/index.json", json.dumps(index).encode())
    settings = make_settings(tmp_path, argos_index_url=index_url)
    from dragoman.models.index import available

    assert [(e.code, e.version) for e in available(settings)] == [
        ("translate-en_es", "1.1"),
        ("translate-en_fr", "1.0"),
    ]
    manifest = install("en->es", settings)
    assert (manifest.id, manifest.version) == ("argos-en-es", "1.1")
    assert "/v1/translate-en_es-1_1.argosmodel" in server.hits
    assert "/v1/translate-en_es-1_0.argosmodel" not in server.hits
    record = read_record(settings.engine.packs_dir / "argos-en-es")
    assert record is not None and record.source_kind == "index" and record.source == v11
    PackStore(settings).remove("argos-en-es")
    assert install("translate-en_es", settings).version == "1.1"
    with pytest.raises(InvalidRequest, match="packages from en"):
        install("en->de", settings)
    with pytest.raises(PackInstallError, match="HTTP 404"):
        install("translate-en_fr", settings)
    assert leftovers(settings) == []


def test_index_checksum_mismatch(tmp_path: Path, server: Server, archives: dict[str, Path]) -> None:
    link = server.serve("/p.argosmodel", archives["v10"].read_bytes())
    index = [index_entry("translate-en_es", "en", "es", "1.0", link, checksum="sha256:" + "1" * 64)]
    settings = make_settings(
        tmp_path, argos_index_url=server.serve("/index.json", json.dumps(index).encode())
    )
    with pytest.raises(PackIntegrityError):
        install("en->es", settings)
    assert leftovers(settings) == []


def test_index_unreachable(tmp_path: Path, server: Server) -> None:
    settings = make_settings(tmp_path, argos_index_url=server.base + "/no-index.json")
    with pytest.raises(PackInstallError, match="HTTP 404"):
        install("en->es", settings)


def test_disk_full_maps_to_install_error(
    tmp_path: Path, archives: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    def full(*args: object, **kw: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    settings = make_settings(tmp_path)
    with pytest.raises(PackInstallError, match="no space left"):
        install(archives["v10"], settings)
    monkeypatch.undo()
    assert leftovers(settings) == []
