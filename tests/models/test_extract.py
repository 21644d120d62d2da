"""Safe extraction: zip-slip, links, devices, bombs, lying headers, truncation, archives without a pack."""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import struct
import tarfile
import zipfile
from pathlib import Path

import pytest

from dragoman.errors import PackIntegrityError
from dragoman.models.extract import _Budget, extract_archive, safe_parts
from dragoman.models.packs import PackStore, install
from dragoman.settings import Settings

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


def zip_with(path: Path, entries: dict[str, bytes], *, compression: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression=compression) as zf:
        for name, data in entries.items():
            zf.writestr(zipfile.ZipInfo(name), data, compress_type=compression)
    return path


def pack_entries(top: str = "pack") -> dict[str, bytes]:
    meta = json.dumps({"from_code": "en", "to_code": "es", "package_version": "1.0"}).encode()
    return {
        f"{top}/metadata.json": meta,
        f"{top}/model/model.bin": b"weights",
        f"{top}/sentencepiece.model": b"sp",
    }


def test_a_hand_built_zip_installs(tmp_path: Path) -> None:
    """The control for the refusals below: the same entries without the bad one install."""
    archive = zip_with(tmp_path / "ok.zip", pack_entries())
    settings = make_settings(tmp_path)
    assert install(archive, settings).id == "argos-en-es"


@pytest.mark.parametrize(
    "bad", ["../evil", "pack/../../evil", "/abs/evil", "C:/evil", "..\\evil", "C:\\evil"]
)
def test_zip_slip_refused(tmp_path: Path, bad: str) -> None:
    archive = zip_with(tmp_path / "bad.zip", {**pack_entries(), bad: b"owned"})
    settings = make_settings(tmp_path)
    with pytest.raises(PackIntegrityError, match="refused"):
        install(archive, settings)
    assert not (tmp_path / "evil").exists() and not Path("/abs/evil").exists()
    assert leftovers(settings) == []


def test_safe_parts() -> None:
    assert safe_parts("./pack//model/model.bin") == ("pack", "model", "model.bin")
    assert safe_parts("pack/") == ("pack",)
    for bad in ("../x", "a/../../x", "/x", "\\x", "D:x", "a\0b"):
        with pytest.raises(PackIntegrityError):
            safe_parts(bad)


def test_symlink_in_zip_refused(tmp_path: Path) -> None:
    archive = tmp_path / "link.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name, data in pack_entries().items():
            zf.writestr(name, data)
        info = zipfile.ZipInfo("pack/link")
        info.create_system = 3
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(PackIntegrityError, match="symbolic link"):
        install(archive, make_settings(tmp_path))


def tar_with(path: Path, entries: dict[str, bytes], extra: list[tarfile.TarInfo]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        for info in extra:
            tf.addfile(info)
    return path


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        (tarfile.SYMTYPE, "is a link"),
        (tarfile.LNKTYPE, "is a link"),
        (tarfile.CHRTYPE, "device"),
        (tarfile.FIFOTYPE, "device"),
    ],
)
def test_tar_links_and_devices_refused(tmp_path: Path, kind: bytes, message: str) -> None:
    info = tarfile.TarInfo("pack/model/extra")
    info.type = kind
    info.linkname = "/etc/passwd"
    archive = tar_with(tmp_path / "bad.tar.gz", pack_entries(), [info])
    settings = make_settings(tmp_path)
    with pytest.raises(PackIntegrityError, match=message):
        install(archive, settings)
    assert leftovers(settings) == []


def test_tar_absolute_path_refused(tmp_path: Path) -> None:
    archive = tar_with(tmp_path / "abs.tgz", {**pack_entries(), "/tmp/dragoman-evil": b"x"}, [])
    with pytest.raises(PackIntegrityError, match="absolute"):
        install(archive, make_settings(tmp_path))
    assert not Path("/tmp/dragoman-evil").exists()


def test_zip_bomb_by_ratio(tmp_path: Path) -> None:
    archive = zip_with(tmp_path / "bomb.zip", {**pack_entries(), "pack/zeros.bin": bytes(20 * MiB)})
    assert archive.stat().st_size < MiB
    settings = make_settings(tmp_path)  # the default limit (8 GiB) is far away: the ratio trips
    with pytest.raises(PackIntegrityError, match="compression bomb"):
        install(archive, settings)
    assert leftovers(settings) == []


def test_large_payload_over_a_small_limit(tmp_path: Path) -> None:
    payload = os.urandom(2 * MiB)  # incompressible: no ratio alarm, only the size limit
    archive = zip_with(tmp_path / "big.zip", {**pack_entries(), "pack/blob.bin": payload})
    with pytest.raises(PackIntegrityError, match="max_pack_bytes"):
        install(archive, make_settings(tmp_path, max_pack_bytes=MiB))
    assert install(archive, make_settings(tmp_path / "roomy", max_pack_bytes=4 * MiB)).id == "argos-en-es"


def test_tar_bomb_refused(tmp_path: Path) -> None:
    archive = tar_with(tmp_path / "bomb.tar.gz", {**pack_entries(), "pack/zeros.bin": bytes(20 * MiB)}, [])
    with pytest.raises(PackIntegrityError, match="compression bomb"):
        install(archive, make_settings(tmp_path))
    with pytest.raises(PackIntegrityError, match="max_pack_bytes"):
        install(archive, make_settings(tmp_path, max_pack_bytes=MiB))


def _patch_declared_size(archive: Path, name: str, size: int) -> None:
    """Rewrite the central directory's uncompressed size of ``name`` (a lying header)."""
    data = bytearray(archive.read_bytes())
    pos = 0
    while (pos := data.find(b"PK\x01\x02", pos)) != -1:
        name_len = struct.unpack_from("<H", data, pos + 28)[0]
        if data[pos + 46 : pos + 46 + name_len] == name.encode():
            struct.pack_into("<I", data, pos + 24, size)
            archive.write_bytes(bytes(data))
            return
        pos += 4
    raise AssertionError(f"{name} not found")


def test_entry_declaring_a_huge_size_refused(tmp_path: Path) -> None:
    archive = zip_with(tmp_path / "liar.zip", {**pack_entries(), "pack/x.bin": b"small"})
    _patch_declared_size(archive, "pack/x.bin", 3_000_000_000)
    settings = make_settings(tmp_path, max_pack_bytes=100 * MiB)
    with pytest.raises(PackIntegrityError, match="max_pack_bytes"):
        install(archive, settings)
    assert leftovers(settings) == []


def test_entry_lying_small_is_caught_while_extracting(tmp_path: Path) -> None:
    archive = zip_with(tmp_path / "liar.zip", {**pack_entries(), "pack/x.bin": b"0123456789" * 100})
    _patch_declared_size(archive, "pack/x.bin", 10)
    settings = make_settings(tmp_path)
    with pytest.raises(PackIntegrityError):
        install(archive, settings)
    assert leftovers(settings) == []


def test_budget_counts_actual_bytes(tmp_path: Path) -> None:
    stream = io.BytesIO(b"x" * 5000)
    budget = _Budget(limit=10_000, declared=100, report=lambda d, t, m: None)
    with pytest.raises(PackIntegrityError, match="more than the 100 bytes"):
        budget.copy(stream.read, tmp_path / "a", "a", cap=100)
    budget = _Budget(limit=4000, declared=100, report=lambda d, t, m: None)
    with pytest.raises(PackIntegrityError, match="max_pack_bytes"):
        budget.copy(io.BytesIO(b"x" * 5000).read, tmp_path / "b", "b", cap=None)


@pytest.mark.parametrize("name", ["pack.argosmodel", "pack.tar.gz"])
def test_truncated_archive_refused(tmp_path: Path, name: str) -> None:
    entries = {**pack_entries(), "pack/model/weights.bin": os.urandom(200_000)}
    whole = tmp_path / f"whole-{name}"
    if name.endswith(".tar.gz"):
        tar_with(whole, entries, [])
    else:
        zip_with(whole, entries)
    extract_archive(whole, tmp_path / "control", 10**9)  # the whole archive is fine
    data = whole.read_bytes()
    truncated = tmp_path / name
    truncated.write_bytes(data[: len(data) // 2])
    settings = make_settings(tmp_path)
    with pytest.raises(PackIntegrityError, match="truncated"):
        install(truncated, settings)
    assert leftovers(settings) == []


def test_not_an_archive(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(os.urandom(1000))
    with pytest.raises(PackIntegrityError, match="neither a zip nor a tar"):
        install(junk, make_settings(tmp_path))


def test_archive_without_a_pack_refused(tmp_path: Path) -> None:
    archive = zip_with(tmp_path / "empty.zip", {"stuff/README.md": b"hello", "stuff/other.txt": b"x"})
    settings = make_settings(tmp_path)
    with pytest.raises(PackIntegrityError, match="holds no usable pack"):
        install(archive, settings)
    assert leftovers(settings) == []


def test_pack_at_the_archive_root(tmp_path: Path) -> None:
    entries = {name.removeprefix("pack/"): data for name, data in pack_entries().items()}
    archive = zip_with(tmp_path / "flat.zip", {**entries, "__MACOSX/._x": b""})
    assert install(archive, make_settings(tmp_path)).id == "argos-en-es"


def test_unsafe_pack_id_refused(tmp_path: Path) -> None:
    entries = pack_entries()
    entries["pack/dragoman-pack.json"] = json.dumps({"id": "../../escape"}).encode()
    archive = zip_with(tmp_path / "id.zip", entries)
    with pytest.raises(PackIntegrityError, match="safe directory name"):
        install(archive, make_settings(tmp_path))


def test_extract_archive_hashes_match_files(tmp_path: Path) -> None:
    archive = tar_with(tmp_path / "p.tgz", {**pack_entries(), "pack/model/w.bin": os.urandom(5000)}, [])
    dest = tmp_path / "out"
    hashes = extract_archive(archive, dest, 10**9)
    assert hashes
    for rel, digest in hashes.items():
        assert sha(dest / rel) == digest
    assert {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()} == set(hashes)
