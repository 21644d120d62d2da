"""The local front doors' glossary file (``dragoman.server.local_store``): format, scopes, locking, limits."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import threading
from pathlib import Path

import pytest

from dragoman.errors import GlossaryFileError, LimitExceeded
from dragoman.limits import MAX_GLOSSARY_ENTRIES
from dragoman.server.local_store import GlossaryStore
from dragoman.translation.types import GlossaryEntry as E

EN, FR, DE = "eng_Latn", "fra_Latn", "deu_Latn"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "config" / "glossary.json"


@pytest.fixture
def store(path: Path) -> GlossaryStore:
    return GlossaryStore(path)


def _terms(entries: tuple[E, ...]) -> list[str]:
    return [e.term for e in entries]


def _leftovers(path: Path) -> list[str]:
    """Anything in the glossary's folder besides the file and its lock (a temporary left behind)."""
    return sorted(p.name for p in path.parent.iterdir() if p.name not in (path.name, path.name + ".lock"))


# ----- the store ----------------------------------------------------------------------------------
def test_missing_file_is_empty_and_not_created(store: GlossaryStore, path: Path) -> None:
    assert store.load() == () and store.for_pair(EN, FR) == ()
    assert not path.exists()


def test_round_trip_and_file_format(store: GlossaryStore, path: Path) -> None:
    store.add([E("Dragoman", "Dragoman"), E("GPU", "GPU", case_sensitive=True)])
    store.add([E("cloud", "nuage")], source=EN, target=FR)
    doc = json.loads(path.read_text("utf-8"))
    assert doc["version"] == 1
    assert doc["entries"][1] == {
        "term": "GPU",
        "translation": "GPU",
        "caseSensitive": True,
        "source": None,
        "target": None,
    }
    assert doc["entries"][2]["source"] == EN and doc["entries"][2]["target"] == FR
    again = GlossaryStore(path).load()
    assert again == store.load()
    assert again == (
        E("Dragoman", "Dragoman"),
        E("GPU", "GPU", case_sensitive=True),
        E("cloud", "nuage", source=EN, target=FR),
    )
    assert _leftovers(path) == []


def test_scoping(store: GlossaryStore) -> None:
    store.add([E("everywhere", "everywhere")])
    store.add([E("cloud", "nuage")], source="en", target="fr")  # codes are normalized
    store.add([E("cloud", "Wolke")], source=EN, target=DE)
    store.add([E("from-english", "x")], source=EN)
    assert _terms(store.for_pair(EN, FR)) == ["everywhere", "cloud", "from-english"]
    assert [e.translation for e in store.for_pair(EN, DE) if e.term == "cloud"] == ["Wolke"]
    assert _terms(store.for_pair(FR, EN)) == ["everywhere"]
    assert store.entries(source=EN, target=FR) == store.for_pair(EN, FR)
    assert len(store.entries()) == 4
    assert _terms(store.entries(target=DE)) == ["everywhere", "cloud", "from-english"]
    # an entry's own scope is kept when the call gives none
    store.add([E("own", "scope", source=DE, target=FR)])
    assert "own" in _terms(store.for_pair(DE, FR)) and "own" not in _terms(store.for_pair(EN, FR))


def test_replace_and_remove_follow_case_rules(store: GlossaryStore, path: Path) -> None:
    store.add([E("api", "api-a"), E("API", "API-exact", case_sensitive=True)])
    new = store.add([E("Api", "api-b")])  # replaces the case-insensitive one in place
    assert [(e.term, e.translation) for e in new] == [("Api", "api-b"), ("API", "API-exact")]
    store.add([E("cloud", "nuage")], source=EN, target=FR)
    assert store.remove(["cloud"]) == 0  # unscoped removal leaves the scoped entry
    assert store.remove(["api"]) == 1  # matches the insensitive entry only
    assert [(e.term, e.case_sensitive) for e in store.load()] == [("API", True), ("cloud", False)]
    before = path.stat().st_mtime_ns
    assert store.remove(["absent"]) == 0
    assert path.stat().st_mtime_ns == before  # nothing removed: not rewritten
    assert store.remove(["API", "CLOUD"], source=EN, target=FR) == 1
    assert store.remove(["API"]) == 1
    assert store.load() == ()


def test_failed_replace_keeps_old_file(
    store: GlossaryStore, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.add([E("keep", "me")])
    original = path.read_bytes()

    def crash(src: object, dst: object) -> None:
        raise OSError(5, "simulated crash during rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(GlossaryFileError) as err:
        store.add([E("lost", "write")])
    assert str(path) in err.value.message
    monkeypatch.undo()
    assert path.read_bytes() == original
    assert _leftovers(path) == []
    assert GlossaryStore(path).load() == (E("keep", "me"),)
    assert store.load() == (E("keep", "me"),)


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe garbage",
        b'[{"term": "a", "translation": "b"}]',
        b'{"version": 2, "entries": []}',
        b'{"version": 1, "entries": {}}',
        b'{"version": 1, "entries": [{"term": "a"}]}',
        b'{"version": 1, "entries": [{"term": "a", "translation": "b", "caseSensitive": "yes"}]}',
        b'{"version": 1, "entries": [{"term": "a", "translation": "b", "source": "klingonish-xx"}]}',
    ],
)
def test_corrupt_file_is_reported_and_never_touched(store: GlossaryStore, path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    for attempt in (
        store.load,
        lambda: store.for_pair(EN, FR),
        lambda: store.add([E("new", "entry")]),
        lambda: store.remove(["a"]),
    ):
        with pytest.raises(GlossaryFileError) as err:
            attempt()
        assert str(path) in err.value.message
        assert "fix it by hand" in err.value.message
    assert path.read_bytes() == content


def test_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "glossary.json").mkdir()
    with pytest.raises(GlossaryFileError, match="cannot read") as err:
        GlossaryStore(tmp_path / "glossary.json").load()
    assert "DRAGOMAN_GLOSSARY" in err.value.message


def test_concurrent_thread_adds_all_land(path: Path) -> None:
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        own = GlossaryStore(path)  # every thread its own store, like separate front doors
        barrier.wait()
        try:
            for i in range(10):
                own.add([E(f"thread{n}-term{i}", f"T{n}.{i}")])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    terms = set(_terms(GlossaryStore(path).load()))
    assert terms == {f"thread{n}-term{i}" for n in range(8) for i in range(10)}


def _process_adds(path: str, n: int, count: int) -> None:
    store = GlossaryStore(Path(path))
    for i in range(count):
        store.add([E(f"proc{n}-term{i}", f"P{n}.{i}")])


def test_concurrent_process_adds_all_land(path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_process_adds, args=(str(path), n, 25)) for n in range(2)]
    for p in procs:
        p.start()
    _process_adds(str(path), 9, 25)  # and this process at the same time
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    terms = set(_terms(GlossaryStore(path).load()))
    assert terms == {f"proc{n}-term{i}" for n in (0, 1, 9) for i in range(25)}


def test_applicable_limit_per_pair(store: GlossaryStore, path: Path) -> None:
    store.add([E(f"fr{i}", "x") for i in range(150)], source=EN, target=FR)
    store.add([E(f"de{i}", "x") for i in range(150)], source=EN, target=DE)
    assert len(store.load()) == 300  # the file may hold more than 200 in total
    content = path.read_bytes()
    with pytest.raises(LimitExceeded) as err:
        store.add([E(f"all{i}", "x") for i in range(60)])  # 210 would apply to eng->fra and eng->deu
    assert "210" in err.value.message and "200" in err.value.message
    assert path.read_bytes() == content
    store.add([E(f"all{i}", "x") for i in range(50)])  # exactly 200: allowed
    assert len(store.for_pair(EN, FR)) == MAX_GLOSSARY_ENTRIES
    with pytest.raises(LimitExceeded):
        store.add([E("one-more", "x")], source=EN, target=FR)
    store.add([E("fr0", "replaced")], source=EN, target=FR)  # replacing does not grow the set
    assert [e.translation for e in store.for_pair(EN, FR) if e.term == "fr0"] == ["replaced"]


def test_hand_edited_file_over_limit(
    store: GlossaryStore, path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    entries = [{"term": f"u{i}", "translation": "x"} for i in range(190)]
    entries += [{"term": f"s{i}", "translation": "y", "source": EN, "target": FR} for i in range(60)]
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": 1, "entries": entries}), "utf-8")
    with caplog.at_level(logging.WARNING, logger="dragoman.translation.glossary"):
        applied = store.for_pair(EN, FR)
    assert len(applied) == MAX_GLOSSARY_ENTRIES
    assert sum(1 for e in applied if e.source == EN) == 60  # the specific ones are all kept
    assert "250" in caplog.text
    store.add([E("elsewhere", "z")], source=DE, target=FR)  # does not grow eng->fra: allowed
    with pytest.raises(LimitExceeded):
        store.add([E("more", "z")], source=EN, target=FR)


def test_cache_and_external_edits(store: GlossaryStore, path: Path) -> None:
    store.add([E("one", "1")])
    parsed = store.parse_count
    first = store.load()
    assert store.load() is first and store.for_pair(EN, FR) == first
    assert store.parse_count == parsed  # unchanged file: not parsed again
    GlossaryStore(path).add([E("two", "2")])  # another front door
    assert _terms(store.load()) == ["one", "two"]
    # an external edit of the same size is seen too (a new file replaces the old one)
    doc = json.loads(path.read_text("utf-8"))
    doc["entries"][0]["translation"] = "9"
    tmp = path.with_name("edit.json")
    tmp.write_text(json.dumps(doc, ensure_ascii=False, indent=2) + "\n", "utf-8")
    os.replace(tmp, path)
    assert [e.translation for e in store.load()] == ["9", "2"]
    path.unlink()
    assert store.load() == ()


def test_resolve_gives_the_request_its_own_glossary_or_the_file(store: GlossaryStore) -> None:
    store.add([E("cloud", "nuage")], source=EN, target=FR)
    store.add([E("everywhere", "x")])
    assert store.resolve(None) == store.load()  # omitted: every entry of the file (the engine picks per pair)
    assert store.resolve([]) == ()  # []: no glossary at all
    own = [E("mine", "only")]
    assert store.resolve(own) == tuple(own)


# ----- a symlinked glossary file (issue 9, item 9) -------------------------------------------------
def test_a_symlinked_file_is_written_through_the_link(tmp_path: Path) -> None:
    """A glossary kept elsewhere (a dotfiles repository) and linked in: every write replaces the file the
    link points at, atomically, and the link stays a link (it used to become a plain file)."""
    target = tmp_path / "dotfiles" / "glossary.json"
    target.parent.mkdir()
    GlossaryStore(target).add([E("old", "viejo")])
    link = tmp_path / "config" / "glossary.json"
    link.parent.mkdir()
    link.symlink_to(Path("..") / "dotfiles" / "glossary.json")  # relative, as dotfile managers make them
    store = GlossaryStore(link)
    store.add([E("new", "nuevo")])
    assert store.remove(["old"]) == 1
    store.add([E("third", "tercero")], source=EN, target=FR)
    assert link.is_symlink() and link.resolve() == target.resolve()
    assert _terms(GlossaryStore(target).load()) == ["new", "third"]
    assert _terms(store.load()) == ["new", "third"]
    assert _leftovers(target) == [] and sorted(p.name for p in link.parent.iterdir()) == ["glossary.json"]


def test_a_dangling_symlink_creates_its_target(tmp_path: Path) -> None:
    target = tmp_path / "dotfiles" / "glossary.json"
    target.parent.mkdir()
    link = tmp_path / "glossary.json"
    link.symlink_to(target)
    GlossaryStore(link).add([E("a", "b")])
    assert link.is_symlink() and _terms(GlossaryStore(target).load()) == ["a"]


def test_writers_through_the_link_and_to_the_target_share_one_lock(tmp_path: Path) -> None:
    """One process names the link, another the file itself: both lock beside the real file, so neither
    loses the other's entries."""
    target = tmp_path / "dotfiles" / "glossary.json"
    target.parent.mkdir()
    link = tmp_path / "glossary.json"
    link.symlink_to(target)
    stores = [GlossaryStore(link), GlossaryStore(target)]

    def add(i: int) -> None:
        stores[i % 2].add([E(f"term{i}", f"t{i}")])

    threads = [threading.Thread(target=add, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(_terms(GlossaryStore(target).load())) == sorted(f"term{i}" for i in range(20))
    assert link.is_symlink()
