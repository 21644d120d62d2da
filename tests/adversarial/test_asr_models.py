"""Adversarial: speech recognition models and the recogniser (issue 15).

Archives that are truncated, lie about what they are, climb out of the store or hold no usable model; a
download whose body is shorter than it said; unsafe ids; the embedded model's parts swapped; two first loads
at once (one load); a transcription cancelled or timed out half way (it stops between segments and says so).
Each refusal leaves nothing installed and nothing written outside the store.
"""

from __future__ import annotations

import http.server
import io
import shutil
import socket
import struct
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asr_support import noise

from dragoman.errors import (
    AsrModelNotInstalled,
    Cancelled,
    EngineTimeout,
    PackInstallError,
    PackIntegrityError,
    PackUnsafe,
)
from dragoman.models import asr
from dragoman.progress import JobContext
from dragoman.settings import Settings
from dragoman.speech.asr import Recognizer, TranscribeOptions
from dragoman.testing.whisper import TINY_DECODE, build_tiny_whisper


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_whisper(tmp_path_factory.mktemp("adv-asr") / "tiny")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.build(packs_dir=tmp_path / "data" / "packs", device="cpu")


def _nothing_installed(settings: Settings) -> None:
    store = asr.AsrStore(settings)
    assert store.ids() == [] and store.broken() == []
    staging = store.root / ".staging"
    assert not staging.exists() or not any(
        p for p in staging.rglob("*") if p.is_file() and p.suffix != ".lock"
    )


def _tar_of(model: Path, dest: Path, *, extra: list[tarfile.TarInfo] | None = None, skip: str = "") -> Path:
    with tarfile.open(dest, "w:gz") as tar:
        for path in sorted(model.iterdir()):
            if path.name != skip:
                tar.add(path, arcname=f"m/{path.name}")
        for info in extra or []:
            tar.addfile(info, io.BytesIO(b"x" * info.size) if info.isfile() else None)
    return dest


def test_a_truncated_archive_installs_nothing(settings: Settings, tiny_model: Path, tmp_path: Path) -> None:
    whole = _tar_of(tiny_model, tmp_path / "whole.tar.gz")
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(PackIntegrityError, match="truncated"):
        asr.install(cut, settings)
    _nothing_installed(settings)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("model.tar.gz", b"\x89PNG\r\n\x1a\n" + b"\0" * 200),
        ("model.zip", b"PK\x03\x04 this is not really a zip"),
        ("model.tgz", b"just some text, not an archive\n" * 20),
    ],
)
def test_an_archive_that_lies_about_its_type_installs_nothing(
    settings: Settings, tmp_path: Path, name: str, content: bytes
) -> None:
    fake = tmp_path / name
    fake.write_bytes(content)
    with pytest.raises(PackIntegrityError):
        asr.install(fake, settings)
    _nothing_installed(settings)


def test_a_model_bin_that_is_not_whisper_is_refused(
    settings: Settings, tiny_model: Path, tmp_path: Path
) -> None:
    other = tmp_path / "translator"
    shutil.copytree(tiny_model, other)
    (other / "model.bin").write_bytes(struct.pack("<IH", 6, 16) + b"TransformerSpec\0" + b"\0" * 64)
    with pytest.raises(PackIntegrityError, match="not a CTranslate2 Whisper model"):
        asr.install(other, settings)
    (other / "model.bin").write_bytes(b"\x00")
    with pytest.raises(PackIntegrityError, match="too short"):
        asr.install(other, settings)
    _nothing_installed(settings)


def test_a_model_without_tokenizer_json_is_refused(
    settings: Settings, tiny_model: Path, tmp_path: Path
) -> None:
    archive = _tar_of(tiny_model, tmp_path / "no-tokenizer.tar.gz", skip="tokenizer.json")
    with pytest.raises(PackIntegrityError, match="tokenizer.json"):
        asr.install(archive, settings)
    folder = tmp_path / "folder"
    shutil.copytree(tiny_model, folder)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(PackIntegrityError, match="has no tokenizer.json"):
        asr.install(folder, settings)
    _nothing_installed(settings)


def test_an_installed_model_that_loses_its_tokenizer_is_broken_not_loaded(
    settings: Settings, tiny_model: Path
) -> None:
    asr.install(tiny_model, settings)
    (asr.model_dir(settings, "tiny") / "tokenizer.json").unlink()
    [(path, why)] = asr.AsrStore(settings).broken()
    assert path.name == "tiny" and "tokenizer.json" in why
    with pytest.raises(AsrModelNotInstalled):
        Recognizer(settings).transcribe(noise(1.0), TranscribeOptions(model="tiny"))


def test_archive_entries_that_climb_out_are_refused(
    settings: Settings, tiny_model: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "data" / "escape.txt"
    climb = tarfile.TarInfo("m/../../escape.txt")
    climb.size = 4
    archive = _tar_of(tiny_model, tmp_path / "climb.tar.gz", extra=[climb])
    with pytest.raises(PackUnsafe):
        asr.install(archive, settings)
    link = tarfile.TarInfo("m/vocabulary.txt")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    with pytest.raises(PackUnsafe):
        asr.install(_tar_of(tiny_model, tmp_path / "link.tar.gz", extra=[link]), settings)
    absolute = tmp_path / "absolute.zip"
    with zipfile.ZipFile(absolute, "w") as zf:
        for path in sorted(tiny_model.iterdir()):
            zf.write(path, path.name)
        zf.writestr(str(tmp_path / "abs-escape.txt"), b"x")
    with pytest.raises(PackUnsafe):
        asr.install(absolute, settings)
    assert not outside.exists() and not (tmp_path / "abs-escape.txt").exists()
    _nothing_installed(settings)


def test_a_directory_with_a_link_out_of_it_is_refused(
    settings: Settings, tiny_model: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "linked"
    shutil.copytree(tiny_model, folder)
    secret = tmp_path / "secret.json"
    secret.write_text("{}", encoding="utf-8")
    (folder / "tokenizer.json").unlink()
    (folder / "tokenizer.json").symlink_to(secret)
    with pytest.raises(PackUnsafe):
        asr.install(folder, settings)
    _nothing_installed(settings)


@pytest.mark.parametrize("model_id", ["../evil", "a/b", ".hidden", "x" * 200, "sp ace"])
def test_unsafe_ids_are_refused(settings: Settings, tiny_model: Path, model_id: str) -> None:
    with pytest.raises(PackIntegrityError, match="not a safe directory name"):
        asr.install(tiny_model, settings, model_id=model_id)
    assert not (settings.engine.packs_dir.parent / "evil").exists()
    _nothing_installed(settings)


@pytest.fixture
def short_body_server() -> Iterator[str]:
    """Answers every GET with a Content-Length of 5 MB and 1 KB of body, then hangs up."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(5 * 1024 * 1024))
            self.end_headers()
            self.wfile.write(b"\x1f\x8b" + b"\0" * 1022)
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/model.tar.gz"
    finally:
        server.shutdown()
        server.server_close()


def test_a_download_shorter_than_it_said_installs_nothing(settings: Settings, short_body_server: str) -> None:
    with pytest.raises((PackInstallError, PackIntegrityError)):
        asr.install(short_body_server, settings)
    _nothing_installed(settings)


def test_embedded_parts_swapped_or_cut_install_nothing(settings: Settings, tmp_path: Path) -> None:
    real = asr.embedded_files()
    assert real is not None
    swapped = dict(real)
    swapped["model.bin.part1"], swapped["model.bin.part2"] = real["model.bin.part2"], real["model.bin.part1"]
    with pytest.raises(PackIntegrityError, match="model.bin"):
        asr.install_embedded(settings, files=swapped)
    cut = tmp_path / "part2"
    with real["model.bin.part2"].open("rb") as handle:
        cut.write_bytes(handle.read(1024 * 1024))
    with pytest.raises(PackIntegrityError, match="published sha256"):
        asr.install_embedded(settings, files={**real, "model.bin.part2": cut})
    _nothing_installed(settings)


def test_two_embedded_installs_at_once_install_one_model(settings: Settings) -> None:
    answers: list[Any] = []

    def run() -> None:
        answers.append(asr.install_embedded(settings))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert [a.id for a in answers] == ["whisper-base", "whisper-base"]
    assert asr.AsrStore(settings).ids() == ["whisper-base"]
    assert asr.AsrStore(settings).verify("whisper-base").files_checked == 6


def test_concurrent_first_loads_load_once(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import faster_whisper

    asr.install(build_tiny_whisper(tmp_path / "first-load", seed=11), settings)
    made: list[str] = []
    real = faster_whisper.WhisperModel

    def slow_counting(path: str, **kwargs: Any) -> Any:
        made.append(path)
        return real(path, **kwargs)

    monkeypatch.setattr(faster_whisper, "WhisperModel", slow_counting)
    barrier = threading.Barrier(6)
    texts: list[str] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            recognizer = Recognizer(settings, decode_overrides=TINY_DECODE)  # one per thread
            barrier.wait(30)
            texts.append(
                recognizer.transcribe(noise(2.0), TranscribeOptions(model="first-load", vad=False)).text
            )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert len(made) == 1, made
    assert len(texts) == 6 and len(set(texts)) == 1


def _mid_way(stop: str, settings: Settings, tiny_model: Path) -> tuple[Exception, list[int], int]:
    asr.install(tiny_model, settings)
    recognizer = Recognizer(settings, decode_overrides=TINY_DECODE)
    audio = noise(150.0)  # five 30 s windows: several segments
    done: list[int] = []
    context = JobContext.of()

    def progress(d: int, t: int, message: str) -> None:
        done.append(d)
        if d > 0 and len(done) == 2:  # after the first segment
            if stop == "cancel":
                context.cancel.cancel("the user cancelled")
            else:
                object.__setattr__(context, "deadline", 0.0)  # long past (a frozen value: as if it ran late)

    context = JobContext(progress, context.cancel, None)
    with pytest.raises((Cancelled, EngineTimeout)) as caught:
        recognizer.transcribe(audio, TranscribeOptions(model="tiny", vad=False, beam_size=1), context)
    return caught.value, done, int(audio.duration * 1000)


@pytest.mark.parametrize("stop", ["cancel", "deadline"])
def test_a_transcription_stopped_half_way_stops_between_segments(
    settings: Settings, tiny_model: Path, stop: str
) -> None:
    error, done, total = _mid_way(stop, settings, tiny_model)
    assert isinstance(error, Cancelled if stop == "cancel" else EngineTimeout)
    assert len(done) == 2  # nothing reported after the stop: no further segment was decoded
    assert 0 < done[-1] < total
