"""The model store is generic: a toy kind, defined here, installs, verifies and is removed through the same
code as MT packs (copy or safe extraction, hashes, install record, lock, staging and atomic move)."""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from dragoman.errors import InvalidRequest, PackInstallError, PackIntegrityError, PackNotInstalled
from dragoman.models.install import Download, ModelIndex, install_model
from dragoman.models.kind import ModelKind
from dragoman.models.store import INSTALL_RECORD, ModelStore, read_record

VOICE_FILE = "voice.json"


@dataclass(frozen=True)
class Voice:
    id: str
    version: str
    speaker: str


def read_voice(directory: Path) -> Voice:
    """The toy kind's structural check: a ``voice.json`` naming the voice, and its ``weights.bin``."""
    try:
        data = json.loads((directory / VOICE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PackIntegrityError(f"{directory} has no readable {VOICE_FILE}") from exc
    if not (directory / "weights.bin").is_file():
        raise PackIntegrityError(f"voice {data.get('id')}: weights.bin is missing")
    return Voice(str(data["id"]), str(data.get("version", "0")), str(data.get("speaker", "")))


def voice_info(voice: Voice, path: Path) -> dict[str, str]:
    return {"id": voice.id, "speaker": voice.speaker, "path": str(path)}


TOY: ModelKind[Voice, dict[str, str]] = ModelKind(
    name="toy-tts",
    noun="voice",
    read=read_voice,
    info=voice_info,
    markers=(VOICE_FILE,),
    command="dragoman voices",
)


def make_voice(
    directory: Path, voice_id: str = "ada", version: str = "1", weights: bytes = b"w" * 64
) -> Path:
    directory.mkdir(parents=True)
    (directory / VOICE_FILE).write_text(json.dumps({"id": voice_id, "version": version, "speaker": "Ada"}))
    (directory / "weights.bin").write_bytes(weights)
    (directory / "samples").mkdir()
    (directory / "samples" / "hello.txt").write_text("hello")
    return directory


def zip_dir(directory: Path, dest: Path, *, top: str | None = None) -> Path:
    with zipfile.ZipFile(dest, "w") as zf:
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                rel = path.relative_to(directory).as_posix()
                zf.write(path, f"{top}/{rel}" if top else rel)
    return dest


@pytest.fixture
def store(tmp_path: Path) -> ModelStore[Voice, dict[str, str]]:
    return ModelStore(TOY, tmp_path / "voices")


def test_a_toy_kind_installs_verifies_and_is_removed(
    tmp_path: Path, store: ModelStore[Voice, dict[str, str]]
) -> None:
    source = make_voice(tmp_path / "src")
    voice = install_model(store, source, max_bytes=10**6)
    assert voice == Voice("ada", "1", "Ada")
    path = store.root / "ada"
    record = read_record(path)
    assert record is not None and record.kind == "toy-tts" and record.model_id == "ada"
    assert set(dict(record.files)) == {VOICE_FILE, "weights.bin", "samples/hello.txt"}
    assert store.installed() == [(voice, path)] and store.ids() == ["ada"]
    assert store.infos() == [{"id": "ada", "speaker": "Ada", "path": str(path)}]
    assert store.verify("ada").files_checked == 3
    assert sorted(p.name for p in store.root.iterdir()) == ["ada"]  # no staging or trash left

    (path / "weights.bin").write_bytes(b"tampered")
    with pytest.raises(PackIntegrityError, match="voice ada at .* is damaged: weights.bin") as info:
        store.verify("ada")
    assert "`dragoman voices install" in info.value.message

    assert store.remove("ada") == path
    assert not path.exists() and store.installed() == []
    with pytest.raises(PackNotInstalled, match="voice 'ada' is not installed") as missing:
        store.get("ada")
    assert "dragoman voices install" in missing.value.message


def test_a_toy_archive_installs_from_its_top_directory_and_replaces(
    tmp_path: Path, store: ModelStore[Voice, dict[str, str]]
) -> None:
    v1 = zip_dir(make_voice(tmp_path / "v1"), tmp_path / "ada-1.zip", top="ada-voice")
    v2 = zip_dir(make_voice(tmp_path / "v2", version="2", weights=b"x" * 64), tmp_path / "ada-2.zip")
    assert install_model(store, v1, max_bytes=10**6).version == "1"
    with pytest.raises(PackInstallError, match="voice ada is already installed") as info:
        install_model(store, v2, max_bytes=10**6)
    assert "dragoman voices install ... --replace" in info.value.message
    assert install_model(store, v2, max_bytes=10**6, replace=True).version == "2"
    record = read_record(store.root / "ada")
    assert record is not None and record.source_kind == "file" and record.archive_sha256
    assert (store.root / "ada" / "weights.bin").read_bytes() == b"x" * 64
    assert sorted(p.name for p in store.root.iterdir()) == ["ada"]


def test_the_toy_kinds_structural_check_and_safe_extraction_apply(
    tmp_path: Path, store: ModelStore[Voice, dict[str, str]]
) -> None:
    no_weights = make_voice(tmp_path / "broken")
    (no_weights / "weights.bin").unlink()
    with pytest.raises(PackIntegrityError, match="holds no usable voice: .*weights.bin is missing"):
        install_model(store, no_weights, max_bytes=10**6)
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr(VOICE_FILE, json.dumps({"id": "ada"}))
        zf.writestr("../escape.txt", "x")
    with pytest.raises(PackIntegrityError, match="climbs out"):
        install_model(store, evil, max_bytes=10**6)
    with pytest.raises(PackIntegrityError, match="max_pack_bytes"):
        install_model(store, make_voice(tmp_path / "big", weights=b"w" * 2000), max_bytes=1000)
    assert not (tmp_path / "escape.txt").exists()
    assert store.installed() == [] and sorted(p.name for p in store.root.iterdir()) == []


def test_a_toy_index_resolves_names(tmp_path: Path, store: ModelStore[Voice, dict[str, str]]) -> None:
    archive = zip_dir(make_voice(tmp_path / "src"), tmp_path / "ada.zip")
    # A kind's index may list local files as well as URLs; an unknown name is the index's own error.
    seen: list[str] = []

    def resolve(name: str) -> Download:
        seen.append(name)
        raise InvalidRequest(f"no voice {name!r} in the toy index")

    index = ModelIndex(
        names="a voice name (voice:ada)",
        listing="dragoman voices available",
        matches=lambda name: name.startswith("voice:"),
        resolve=resolve,
    )
    with pytest.raises(InvalidRequest, match="no voice 'voice:bob'"):
        install_model(store, "voice:bob", max_bytes=10**6, index=index)
    with pytest.raises(
        InvalidRequest, match="a voice name .voice:ada.; check the path, or run `dragoman voices"
    ):
        install_model(store, "nonsense", max_bytes=10**6, index=index)
    with pytest.raises(InvalidRequest, match="is not an existing file or directory or an http"):
        install_model(store, "nonsense", max_bytes=10**6)
    assert seen == ["voice:bob"]
    assert install_model(store, str(archive), max_bytes=10**6, index=index).id == "ada"
    assert (store.root / "ada" / INSTALL_RECORD).is_file()
