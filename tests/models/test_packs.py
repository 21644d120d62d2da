"""The pack store (list, broken, get, remove, verify) and the Argos index parser."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from dragoman.errors import InvalidRequest, PackInstallError, PackIntegrityError, PackNotInstalled
from dragoman.models import index as index_mod
from dragoman.models.index import IndexEntry, is_index_name, newest, parse_index, pick, version_key
from dragoman.models.packs import PackStore, install
from dragoman.models.store import INSTALL_RECORD, read_record, store_lock
from dragoman.settings import Settings
from dragoman.testing.tinypack import build_argos_pack, build_multilingual_pack


def make_settings(tmp_path: Path, **kw: object) -> Settings:
    return Settings.build(packs_dir=tmp_path / "packs", glossary_path=tmp_path / "glossary.json", **kw)


@pytest.fixture(scope="module")
def en_es(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_argos_pack(tmp_path_factory.mktemp("src") / "en_es", "en", "es")


@pytest.fixture(scope="module")
def multi(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_multilingual_pack(
        tmp_path_factory.mktemp("src") / "multi", ["eng_Latn", "fra_Latn", "deu_Latn"]
    )


# --- store -------------------------------------------------------------------------------------------


def test_empty_store_lists_nothing(tmp_path: Path) -> None:
    store = PackStore(make_settings(tmp_path))
    assert store.installed() == []
    assert store.broken() == []
    with pytest.raises(PackNotInstalled) as info:
        store.get("argos-en-es")
    assert "installed: none" in info.value.message
    assert "dragoman packs install" in info.value.message


def test_list_get_and_broken(tmp_path: Path, en_es: Path, multi: Path) -> None:
    settings = make_settings(tmp_path)
    install(en_es, settings)
    install(multi, settings)
    (settings.engine.packs_dir / "junk").mkdir()
    (settings.engine.packs_dir / "junk" / "notes.txt").write_text("not a pack")
    (settings.engine.packs_dir / ".staging").mkdir()  # working space, neither a pack nor broken
    (settings.engine.packs_dir / "stray-file.txt").write_text("x")
    store = PackStore(settings)
    listed = {m.id: p for m, p in store.installed()}
    assert listed == {
        "argos-en-es": settings.engine.packs_dir / "argos-en-es",
        "tiny-nllb": settings.engine.packs_dir / "tiny-nllb",
    }
    broken = store.broken()
    assert [p.name for p, _ in broken] == ["junk"]
    assert "is not a pack" in broken[0][1]
    manifest, path = store.get("tiny-nllb")
    assert manifest.kind == "multilingual" and path == settings.engine.packs_dir / "tiny-nllb"
    with pytest.raises(PackNotInstalled) as info:
        store.get("argos-en-fr")
    assert "argos-en-es, tiny-nllb" in info.value.message


def test_get_finds_a_pack_copied_by_hand_under_another_name(tmp_path: Path, en_es: Path) -> None:
    settings = make_settings(tmp_path)
    settings.engine.packs_dir.mkdir(parents=True)
    import shutil

    shutil.copytree(en_es, settings.engine.packs_dir / "translate-en_es-1_0")
    manifest, path = PackStore(settings).get("argos-en-es")
    assert path.name == "translate-en_es-1_0" and manifest.pairs == (("eng_Latn", "spa_Latn"),)


def test_duplicate_ids_are_reported_broken(tmp_path: Path, en_es: Path) -> None:
    settings = make_settings(tmp_path)
    install(en_es, settings)
    import shutil

    shutil.copytree(en_es, settings.engine.packs_dir / "zz-copy")
    store = PackStore(settings)
    assert [m.id for m, _ in store.installed()] == ["argos-en-es"]
    assert [(p.name, "already provided" in why) for p, why in store.broken()] == [("zz-copy", True)]


def test_remove(tmp_path: Path, en_es: Path) -> None:
    settings = make_settings(tmp_path)
    install(en_es, settings)
    store = PackStore(settings)
    removed = store.remove("argos-en-es")
    assert removed == settings.engine.packs_dir / "argos-en-es"
    assert not removed.exists()
    assert sorted(p.name for p in settings.engine.packs_dir.iterdir()) == []
    with pytest.raises(PackNotInstalled):
        store.remove("argos-en-es")


def test_remove_a_broken_directory_by_name(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    (settings.engine.packs_dir / "junk").mkdir(parents=True)
    PackStore(settings).remove("junk")
    assert not (settings.engine.packs_dir / "junk").exists()


@pytest.mark.parametrize("name", ["..", ".staging", "../packs", "a/b", ""])
def test_remove_refuses_names_outside_the_store(tmp_path: Path, name: str) -> None:
    settings = make_settings(tmp_path)
    (settings.engine.packs_dir / ".staging").mkdir(parents=True)
    with pytest.raises(PackNotInstalled):
        PackStore(settings).remove(name)
    assert settings.engine.packs_dir.is_dir() and (settings.engine.packs_dir / ".staging").is_dir()


def test_install_record_and_verify(tmp_path: Path, en_es: Path) -> None:
    settings = make_settings(tmp_path)
    install(en_es, settings)
    path = settings.engine.packs_dir / "argos-en-es"
    record = read_record(path)
    assert record is not None
    files = dict(record.files)
    assert set(files) == {p.relative_to(en_es).as_posix() for p in en_es.rglob("*") if p.is_file()}
    assert {"metadata.json", "sentencepiece.model", "model/model.bin"} <= set(files)
    import hashlib

    assert (
        files["model/model.bin"] == hashlib.sha256((en_es / "model" / "model.bin").read_bytes()).hexdigest()
    )
    assert record.source_kind == "directory" and record.source == str(en_es.resolve())
    calls: list[tuple[int, int]] = []
    report = PackStore(settings).verify("argos-en-es", progress=lambda d, t, m: calls.append((d, t)))
    assert report.files_checked == len(files)
    assert report.bytes_checked == sum(p.stat().st_size for p in en_es.rglob("*") if p.is_file())
    assert report.warnings == ()
    assert calls[-1] == (len(files), len(files))


def test_verify_detects_a_modified_model(tmp_path: Path, en_es: Path) -> None:
    settings = make_settings(tmp_path)
    install(en_es, settings)
    model = settings.engine.packs_dir / "argos-en-es" / "model" / "model.bin"
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF
    model.write_bytes(bytes(data))
    with pytest.raises(PackIntegrityError) as info:
        PackStore(settings).verify("argos-en-es")
    assert "model/model.bin" in info.value.message
    assert "--replace" in info.value.message


def test_verify_detects_a_missing_file_and_reports_extra_ones(tmp_path: Path, en_es: Path) -> None:
    settings = make_settings(tmp_path)
    install(en_es, settings)
    pack = settings.engine.packs_dir / "argos-en-es"
    (pack / "notes.txt").write_text("added later")
    assert PackStore(settings).verify("argos-en-es").warnings == ("notes.txt is not in the install record",)
    (pack / "model" / "config.json").unlink()
    with pytest.raises(PackIntegrityError, match="model/config.json is missing"):
        PackStore(settings).verify("argos-en-es")


def test_verify_structure_only_without_record(tmp_path: Path, en_es: Path) -> None:
    settings = make_settings(tmp_path)
    install(en_es, settings)
    (settings.engine.packs_dir / "argos-en-es" / INSTALL_RECORD).unlink()
    report = PackStore(settings).verify("argos-en-es")
    assert not report.has_record and report.files_checked == 0
    assert "only its structure" in report.warnings[0]
    (settings.engine.packs_dir / "argos-en-es" / "model" / "model.bin").unlink()
    with pytest.raises(PackIntegrityError, match="model.bin is missing"):
        PackStore(settings).verify("argos-en-es")


def test_packs_lock_excludes_a_second_holder(tmp_path: Path) -> None:
    packs = tmp_path / "packs"
    entered = threading.Event()
    release = threading.Event()
    order: list[str] = []

    def hold() -> None:
        with store_lock(packs):
            order.append("first in")
            entered.set()
            release.wait(5)
            order.append("first out")

    thread = threading.Thread(target=hold)
    thread.start()
    assert entered.wait(5)
    with pytest.raises(PackInstallError, match="held the lock"):
        with store_lock(packs, timeout=0.2):
            pass
    release.set()
    with store_lock(packs, timeout=5):
        order.append("second in")
    thread.join()
    assert order == ["first in", "first out", "second in"]
    assert list(packs.iterdir()) == []  # no lock file left behind


# --- the Argos index ----------------------------------------------------------------------------------

REAL_STYLE_INDEX = [
    {
        "code": "translate-en_es",
        "type": "translate",
        "package_version": "1.0",
        "argos_version": "1.0",
        "from_code": "en",
        "from_name": "English",
        "to_code": "es",
        "to_name": "Spanish",
        "links": ["https://example.invalid/translate-en_es-1_0.argosmodel"],
    },
    {
        "code": "translate-en_es",
        "type": "translate",
        "package_version": "1.10",
        "argos_version": "1.9",
        "from_code": "en",
        "from_name": "English",
        "to_code": "es",
        "to_name": "Spanish",
        "links": ["https://example.invalid/translate-en_es-1_10.argosmodel"],
        "checksum": "sha256:" + "AB" * 32,
    },
    {
        "code": "translate-en_es",
        "package_version": "1.9",
        "from_code": "en",
        "to_code": "es",
        "links": ["https://example.invalid/translate-en_es-1_9.argosmodel"],
    },
    # An old entry without code: the code is derived.
    {
        "package_version": "1.0",
        "from_code": "de",
        "to_code": "en",
        "links": ["https://example.invalid/de_en"],
    },
    # Unusable entries are skipped.
    {"package_version": "1.0", "from_code": "fr", "to_code": "en"},
    {"package_version": "1.0", "from_code": "fr", "to_code": "en", "links": []},
    {"code": "sbd-en", "type": "sbd", "from_code": "en", "to_code": "en", "links": ["https://x.invalid/s"]},
    "not an object",
]


def test_parse_index_real_format() -> None:
    entries = parse_index(REAL_STYLE_INDEX)
    assert [(e.code, e.version) for e in entries] == [
        ("translate-en_es", "1.0"),
        ("translate-en_es", "1.10"),
        ("translate-en_es", "1.9"),
        ("translate-de_en", "1.0"),
        ("sbd-en", "0"),
    ]
    assert entries[1].sha256 == "ab" * 32
    assert entries[0].sha256 is None
    assert entries[1].from_name == "English" and entries[1].links[0].endswith("1_10.argosmodel")


def test_parse_index_rejects_a_non_list() -> None:
    with pytest.raises(PackInstallError, match="not an Argos package index"):
        parse_index({"hello": 1})


def test_version_key_orders_numerically() -> None:
    assert version_key("1.10") > version_key("1.9") > version_key("1.0") > version_key("0.9.9")
    assert version_key("2") > version_key("1.99")


def test_newest_and_pick() -> None:
    entries = parse_index(REAL_STYLE_INDEX)
    assert [(e.code, e.version) for e in newest([e for e in entries if e.type == "translate"])] == [
        ("translate-de_en", "1.0"),
        ("translate-en_es", "1.10"),
    ]
    assert pick(entries, "translate-en_es").version == "1.10"
    assert pick(entries, "en:es").version == "1.10"  # the spelling messages suggest: safe in a shell
    assert pick(entries, "en-US:es").version == "1.10"  # a BCP-47 side keeps its "-"
    assert pick(entries, "en->es").version == "1.10"  # the old spelling, quoted, still works
    assert pick(entries, "en → es").version == "1.10"
    assert pick(entries, "eng_Latn->spa_Latn").version == "1.10"  # FLORES codes resolve to the index's
    assert pick(entries, "de->en").code == "translate-de_en"
    with pytest.raises(InvalidRequest) as info:
        pick(entries, "en->ja")
    assert "packages from en: en:es" in info.value.message and "xx:yy" in info.value.message
    with pytest.raises(InvalidRequest):
        pick(entries, "en->en")  # the sbd package is not a translation package


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("translate-en_es", True),
        ("en:es", True),
        ("eng_Latn:spa_Latn", True),
        ("en->es", True),
        ("en→es", True),
        ("en-es", False),  # ambiguous: BCP-47 tags hold '-'
        ("C:\\packs\\x.zip", False),
        ("pack.argosmodel", False),
        ("/tmp/x.tar.gz", False),
        ("https://example.com/a.zip", False),
        ("translate-en_es.argosmodel", False),
    ],
)
def test_is_index_name(text: str, expected: bool) -> None:
    assert is_index_name(text) is expected


def test_fetch_index_from_a_local_file(tmp_path: Path) -> None:
    path = tmp_path / "index.json"
    path.write_text(json.dumps(REAL_STYLE_INDEX))
    settings = make_settings(tmp_path, argos_index_url=str(path))
    got = index_mod.available(settings)
    assert [e.code for e in got] == ["translate-de_en", "translate-en_es"]
    assert isinstance(got[0], IndexEntry)
    settings = make_settings(tmp_path, argos_index_url=path.as_uri())
    assert len(index_mod.fetch_index(settings)) == 5
    path.write_text("{not json")
    with pytest.raises(PackInstallError, match="not valid JSON"):
        index_mod.fetch_index(settings)
