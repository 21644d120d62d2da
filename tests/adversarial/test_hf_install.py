"""Adversarial Hugging Face installs (issue 17, R2): a hub that lies about sizes or hashes, a download cut
short and resumed, a revision that does not exist, file names reaching outside the repo, offline mode with
and without a cached copy (and a damaged cache), non-commercial licences shown as such. Nothing half-done
is ever installed."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dragoman.errors import InvalidRequest, PackInstallError, PackIntegrityError, PackUnsafe
from dragoman.models import hf, packs, voices
from dragoman.models.store import read_record
from dragoman.settings import Settings
from dragoman.testing.hfhub import Hub, Repo, card, opus_files, serve_hub
from dragoman.testing.tts import write_standin_voice

OPUS = "someone/opus-mt-en-es-ct2"
VOICE = "someone/piper-big"


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    return Settings.build(packs_dir=tmp_path / "data" / "packs")


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    with serve_hub(Hub({OPUS: Repo(opus_files(tmp_path))})) as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        yield served


def _nothing_installed(settings: Settings) -> None:
    root = settings.engine.packs_dir
    left = [p.name for p in root.iterdir() if p.name != ".staging"] if root.is_dir() else []
    assert left == [], left
    staging = root / ".staging"
    assert not staging.is_dir() or not any(staging.iterdir())


def _downloads(hub: Hub) -> list[str]:
    return [path for method, path, _r in hub.requests if method == "GET" and "/resolve/" in path]


def test_declared_size_over_the_limit_is_refused_before_any_download(settings: Settings, hub: Hub) -> None:
    hub.repos[OPUS].declared_sizes["model.bin"] = settings.engine.max_pack_bytes + 1
    with pytest.raises(PackIntegrityError, match="refused before downloading"):
        packs.install(f"hf:{OPUS}", settings)
    assert _downloads(hub) == []
    _nothing_installed(settings)


def test_hub_lying_about_a_size_is_caught(settings: Settings, hub: Hub) -> None:
    repo = hub.repos[OPUS]
    repo.declared_sizes["model.bin"] = len(repo.files["model.bin"]) // 2  # the API says less than is sent
    with pytest.raises(PackIntegrityError, match=r"model\.bin is not the file the hub published.*bytes"):
        packs.install(f"hf:{OPUS}", settings)
    _nothing_installed(settings)


def test_hub_lying_about_a_hash_is_caught(settings: Settings, hub: Hub) -> None:
    hub.repos[OPUS].declared_sha256["model.bin"] = "0" * 64
    with pytest.raises(PackIntegrityError, match="sha256"):
        packs.install(f"hf:{OPUS}", settings)
    _nothing_installed(settings)


def test_files_larger_than_the_kind_allows_are_refused_whatever_the_hub_says(
    settings: Settings, hub: Hub
) -> None:
    small = settings.replace(max_pack_bytes=64 * 1024)
    with pytest.raises(PackIntegrityError, match="limit"):
        packs.install(f"hf:{OPUS}", small)
    _nothing_installed(small)


def test_a_download_cut_short_resumes_and_installs_the_published_bytes(
    settings: Settings, tmp_path: Path, hub: Hub
) -> None:
    # huggingface_hub hands bytes over in 10 MB chunks: a body cut after 12 MB has one chunk to resume after.
    onnx = write_standin_voice(tmp_path / "voice", "de_DE-big-x_low", language="de_DE", espeak_voice="de")
    big = onnx.read_bytes() + os.urandom(24 * 1024 * 1024)
    repo = Repo({onnx.name: big, onnx.name + ".json": onnx.with_name(onnx.name + ".json").read_bytes()})
    repo.truncate_once.add(onnx.name)
    hub.repos[VOICE] = repo
    voice = voices.install(f"hf:{VOICE}", settings)
    ranges = [r for _m, path, r in hub.requests if path.endswith(onnx.name) and r]
    assert ranges and int(ranges[0].removeprefix("bytes=").split("-")[0]) > 0, hub.requests
    path = voices.VoiceStore(settings).get(voice.id)[1]
    assert hashlib.sha256((path / onnx.name).read_bytes()).digest() == hashlib.sha256(big).digest()


def test_a_revision_that_does_not_exist(settings: Settings, hub: Hub) -> None:
    with pytest.raises(InvalidRequest, match="no revision 'v9.9'"):
        packs.install(f"hf:{OPUS}@v9.9", settings)
    with pytest.raises(InvalidRequest, match="no such model repo"):
        packs.install("hf:nobody/nothing", settings)
    _nothing_installed(settings)


@pytest.mark.parametrize(
    "name",
    ["../../escaped.txt", "model/../../../escaped.txt", "/etc/escaped", "..\\escaped", "a/\x00b", "x/../y"],
)
def test_path_traversal_names_refuse_the_repo_before_anything_is_fetched(
    settings: Settings, tmp_path: Path, hub: Hub, name: str
) -> None:
    hub.repos[OPUS].files[name] = b"owned\n"
    with pytest.raises(PackUnsafe, match="not a plain relative path"):
        packs.install(f"hf:{OPUS}", settings)
    assert _downloads(hub) == []
    assert not list(tmp_path.rglob("escaped*"))
    _nothing_installed(settings)


def test_offline_uses_the_cached_copy_and_says_so_without_one(
    settings: Settings, tmp_path: Path, hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = packs.install(f"hf:{OPUS}", settings)
    packs.PackStore(settings).remove(first.id)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: any request would fail
    before = len(hub.requests)
    again = packs.install(f"hf:{OPUS}", settings)
    assert again == first
    assert len(hub.requests) == before
    record = read_record(packs.PackStore(settings).get(again.id)[1])
    assert record is not None and record.source == f"hf:{OPUS}@{hub.repos[OPUS].commit}"
    packs.PackStore(settings).remove(again.id)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(PackInstallError, match="offline .* no copy of it is in the Hugging Face cache"):
        packs.install(f"hf:{OPUS}", settings)
    _nothing_installed(settings)


def test_offline_refuses_a_damaged_cache(
    settings: Settings, tmp_path: Path, hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = packs.install(f"hf:{OPUS}", settings)
    packs.PackStore(settings).remove(first.id)
    sha = hashlib.sha256(hub.repos[OPUS].files["model.bin"]).hexdigest()
    blob = next((tmp_path / "hf-cache").rglob(f"blobs/{sha}"))
    blob.write_bytes(b"tampered" + blob.read_bytes()[8:])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(PackIntegrityError, match="damaged cache"):
        packs.install(f"hf:{OPUS}", settings)
    _nothing_installed(settings)


@pytest.mark.parametrize(
    ("front", "non_commercial"),
    [
        ({"license": "cc-by-nc-4.0"}, True),
        ({"license": "cc-by-nc-sa-4.0"}, True),
        ({"license": ["apache-2.0", "cc-by-nc-nd-4.0"]}, True),
        ({"license": "other", "license_name": "fair-noncommercial-research-license"}, True),
        ({"license": "apache-2.0"}, False),
        ({"license": "mit"}, False),
        ({"license": "cc-by-4.0"}, False),
        ({}, False),
    ],
)
def test_licences(front: dict[str, object], non_commercial: bool) -> None:
    text = hf.licence(front, "x/y")
    assert ("NON-COMMERCIAL" in text) is non_commercial
    if not front:
        assert text.startswith("unknown")


def test_a_non_commercial_card_is_shown_on_the_installed_pack(settings: Settings, hub: Hub) -> None:
    hub.repos[OPUS].files["README.md"] = card("cc-by-nc-4.0", "en", "es")
    manifest = packs.install(f"hf:{OPUS}", settings)
    info = packs.PackStore(settings).infos()
    assert [i.license for i in info if i.id == manifest.id][0].startswith("cc-by-nc-4.0 (NON-COMMERCIAL")


def test_a_card_with_broken_front_matter_installs_with_an_unknown_licence(
    settings: Settings, hub: Hub
) -> None:
    hub.repos[OPUS].files["README.md"] = b"---\nlicense: [unclosed\nlanguage: {\n---\n"
    manifest = packs.install(f"hf:{OPUS}", settings)
    assert manifest.license.startswith("unknown")
