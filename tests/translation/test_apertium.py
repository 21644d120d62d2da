"""The Apertium backend: mode discovery, the stream (de)formatting, and real warm pipelines.

Tests marked ``apertium`` run the system's eng-spa/spa-eng pairs. The pipeline machinery (restarts,
timeouts, failures, finalizer) is also tested with fake ``.mode`` files whose one stage is GNU ``sed -z``,
which passes NUL-terminated blocks through like an Apertium stage.
"""

from __future__ import annotations

import gc
import os
import shutil
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from growth import assert_linear
from hypothesis import given
from hypothesis import strategies as st

from dragoman.errors import BackendError, EngineTimeout, UnsupportedPair
from dragoman.translation.backends.apertium import (
    ApertiumBackend,
    ApertiumMode,
    _prepare,
    apertium_version,
    discover_modes,
    mode_commands,
    parse_mode_name,
    reformat,
)
from dragoman.translation.types import Pieces, Protected

MODES_DIR = Path("/usr/share/apertium/modes")
HAVE_APERTIUM = (
    shutil.which("lt-proc") is not None
    and (MODES_DIR / "eng-spa.mode").is_file()
    and (MODES_DIR / "spa-eng.mode").is_file()
)
needs_apertium = pytest.mark.skipif(
    not HAVE_APERTIUM, reason="Apertium eng<->spa is missing: sudo apt-get install apertium apertium-eng-spa"
)
needs_sed = pytest.mark.skipif(shutil.which("sed") is None, reason="GNU sed is needed for fake pipelines")
EN, ES = "eng_Latn", "spa_Latn"


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def fake_mode(tmp_path: Path, pipeline: str, name: str = "eng-spa") -> ApertiumMode:
    path = tmp_path / f"{name}.mode"
    path.write_text(pipeline + "\n", encoding="utf-8")
    return ApertiumMode(name, EN, ES, None, path)


@pytest.fixture(scope="module")
def eng_spa() -> Iterator[ApertiumBackend]:
    if not HAVE_APERTIUM:
        pytest.skip("Apertium eng-spa is missing: sudo apt-get install apertium apertium-eng-spa")
    modes = {m.name: m for m in discover_modes([MODES_DIR])}
    backend = ApertiumBackend(modes["eng-spa"])
    yield backend
    backend.close()


def test_parse_mode_name() -> None:
    assert parse_mode_name("eng-spa") == (EN, ES, None)
    assert parse_mode_name("es-pt_BR") == (ES, "por_Latn", "BR")
    assert parse_mode_name("eng-cat_valencia_uni") == (EN, "cat_Latn", "valencia_uni")
    for bad in ("eco-es-fr", "eng", "eng-", "xqz-qqq", "eng-eng", "spa-eng-tagger"):
        assert parse_mode_name(bad) is None, bad


def test_discover_modes_in_fake_dirs(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    for name in ("eng-spa", "es-pt_BR", "eco-es-fr", "xqz-qqq", "spa-eng"):
        (first / f"{name}.mode").write_text("lt-proc x.bin\n")
    (first / "README").write_text("not a mode")
    (second / "eng-spa.mode").write_text("shadowed\n")
    (second / "fr-es.mode").write_text("lt-proc y.bin\n")
    modes = discover_modes([first, second, tmp_path / "missing"])
    assert [m.name for m in modes] == ["eng-spa", "fr-es", "spa-eng", "es-pt_BR"]
    by_name = {m.name: m for m in modes}
    assert by_name["eng-spa"].path == first / "eng-spa.mode"
    assert by_name["eng-spa"].pack_id == "apertium-eng-spa"
    assert (by_name["es-pt_BR"].source, by_name["es-pt_BR"].target, by_name["es-pt_BR"].variant) == (
        ES,
        "por_Latn",
        "BR",
    )


def test_mode_commands_add_null_flush(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "eng-spa.mode"
    path.write_text(
        "lt-proc '/d ir/a.bin' | apertium-tagger -g $2 '/p.prob' | vislcg3 -g x.rlx | lt-proc $1 'g.bin'"
    )
    monkeypatch.setattr(shutil, "which", lambda name: None)  # an Apertium before 3.8
    assert mode_commands(path) == [
        ["lt-proc", "-z", "/d ir/a.bin"],
        ["apertium-tagger", "-z", "-g", "/p.prob"],
        ["vislcg3", "-g", "x.rlx"],
        ["lt-proc", "-z", "-g", "g.bin"],
    ]
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    # With the word-bound blank tools: attach after the analyser, detach before the generator.
    assert mode_commands(path) == [
        ["lt-proc", "-z", "/d ir/a.bin"],
        ["apertium-wblank-attach"],
        ["apertium-tagger", "-z", "-g", "/p.prob"],
        ["vislcg3", "-g", "x.rlx"],
        ["apertium-wblank-detach"],
        ["lt-proc", "-z", "-g", "g.bin"],
    ]
    path.write_text("lt-proc x | | y")
    with pytest.raises(BackendError, match="empty pipeline stage"):
        mode_commands(path)
    path.write_text("lt-proc 'unbalanced")
    with pytest.raises(BackendError, match="reinstall"):
        mode_commands(path)


def test_reformat_strips_marks_and_counts_unknown_words() -> None:
    out = reformat(r" Vi el *blorft y #comer @zorp, \[a\] \* [{name}][ ~ ]fin.[]")
    assert out.text == "Vi el blorft y comer zorp, [a] * {name} ~ fin."
    assert out.unknown_words == ("blorft", "comer", "zorp")
    assert reformat("[\n]Hola  que[]  ", collapse_spaces=True).text == "\nHola que"
    assert reformat("Hola  que", collapse_spaces=False).text == "Hola  que"


plain_text = st.text(st.characters(codec="utf-8", blacklist_characters="\0"), max_size=40)


@given(st.lists(st.one_of(plain_text, plain_text.map(lambda s: Protected(s, s))), max_size=6))
def test_deformat_then_reformat_is_identity(pieces: list[str | Protected]) -> None:
    prep = _prepare(tuple(pieces))
    if prep.block is not None:
        assert b"\0" not in prep.block
        assert reformat(prep.block.decode("utf-8")).text == prep.fixed
    joined = "".join(p.output if isinstance(p, Protected) else p for p in pieces)
    assert prep.lead + prep.fixed + prep.trail == joined


def test_reformat_drops_leaked_analysis_tags() -> None:
    # lt-proc -g writes an ungeneratable lexical unit with an empty lemma as its tags: `#\<prn\>`.
    out = reformat(r"Es #\<prn\>\<obj\>\<p3\> que lo vi #\<prn\>, y #\<vblex\>\<pri\> [\<1\/\>] fin")
    assert out.text == "Es que lo vi, y <1/> fin"
    assert "<" not in reformat(r"@\<n\>\<sg\> hola *\<adj\>").text
    # Tags the source holds are escaped text with no mark before them, and are kept.
    assert reformat(r"usa \<n\> aqu\í #\<prn\> \@\<b\>").text == "usa <n> aquí @<b>"


def test_leaked_tag_guard_is_linear() -> None:
    inputs = {
        "blanks before marks": lambda n: " " * n + "#x",
        "marks": lambda n: "#" * n,
        "marked word, no tag": lambda n: "#" + "a" * n,
        "mark and tags": lambda n: "#" + "\\<n\\>" * (n // 5),
        "escaped openers": lambda n: "#a\\<" * (n // 4),
    }
    assert_linear(reformat, inputs, 4_000)


@needs_sed
def test_leaked_tags_never_reach_the_output(tmp_path: Path) -> None:
    # A stage that answers as the generator does for a dropped pronoun (empty lemma): its tags in the stream.
    backend = ApertiumBackend(fake_mode(tmp_path, r"sed -u 's/him/#\\<prn\\>\\<obj\\>/g'"))
    try:
        out = backend.translate_batch([("I saw him today",), ("Keep <b> and him.",)], EN, ES).texts
        assert out == ("I saw today", "Keep <b> and.")
    finally:
        backend.close()


@needs_sed
def test_fake_pipeline_round_trip_and_restart(tmp_path: Path) -> None:
    backend = ApertiumBackend(fake_mode(tmp_path, "sed -u 's/cat/dog/g'"))
    try:
        text = "The cat [x] ^y$ a/b @c <d> {e} \\f * g # h ~ i\nnext line"
        assert backend.translate_batch([(text,), ("",), (" cat ",)], EN, ES).texts == (
            text.replace("cat", "dog"),
            "",
            " dog ",
        )
        pids = backend.pids
        os.kill(pids[0], signal.SIGKILL)
        assert backend.translate_batch([("a cat",)], EN, ES).texts == ("a dog",)
        assert backend.pids != pids and not alive(pids[0])
    finally:
        backend.close()


@needs_sed
def test_stuck_pipeline_times_out_and_restarts(tmp_path: Path) -> None:
    backend = ApertiumBackend(fake_mode(tmp_path, "sed 's/a/b/'"), timeout=0.5)  # buffered: never answers
    try:
        pids = backend.pids
        with pytest.raises(EngineTimeout, match="restarts on the next call"):
            backend.translate_batch([("a",)], EN, ES)
        assert backend.pids == () and not any(alive(p) for p in pids)
    finally:
        backend.close()


@needs_sed
def test_failing_stage_raises_backend_error_with_its_stderr(tmp_path: Path) -> None:
    backend = ApertiumBackend(fake_mode(tmp_path, "sed -u s/a/b/ | ls /nonexistent-dragoman"))
    try:
        with pytest.raises(BackendError, match="failed twice.*ls -z /nonexistent-dragoman.*ended with 2"):
            backend.translate_batch([("a",)], EN, ES)
    finally:
        backend.close()
    with pytest.raises(BackendError, match="cannot start"):
        ApertiumBackend(fake_mode(tmp_path, "no-such-apertium-tool-xyz"))


@needs_sed
def test_finalizer_kills_forgotten_pipeline(tmp_path: Path) -> None:
    backend = ApertiumBackend(fake_mode(tmp_path, "sed -u s/a/b/"))
    pids = backend.pids
    assert all(alive(p) for p in pids)
    del backend
    gc.collect()
    assert not any(alive(p) for p in pids)


@needs_apertium
@pytest.mark.apertium
def test_discover_system_modes() -> None:
    modes = discover_modes([MODES_DIR])
    pairs = {(m.source, m.target) for m in modes if m.variant is None}
    assert {(EN, ES), (ES, EN)} <= pairs
    names = {m.name: m for m in modes}
    assert names["eng-spa"].pack_id == "apertium-eng-spa"
    assert all(m.variant for m in modes if "_" in m.name)
    assert "eco-es-fr" not in names
    assert apertium_version()


@pytest.mark.apertium
def test_real_translation_both_ways(eng_spa: ApertiumBackend) -> None:
    (out,) = eng_spa.translate_batch([("The house is red.",)], EN, ES).texts
    assert "casa" in out and "roja" in out
    modes = {m.name: m for m in discover_modes([MODES_DIR])}
    spa_eng = ApertiumBackend(modes["spa-eng"])
    try:
        (back,) = spa_eng.translate_batch([("La casa es roja.",)], ES, EN).texts
    finally:
        spa_eng.close()
    assert "house" in back and "red" in back
    with pytest.raises(UnsupportedPair):
        eng_spa.translate_batch([("x",)], ES, EN)


@pytest.mark.apertium
def test_batch_of_200_in_order(eng_spa: ApertiumBackend) -> None:
    nouns = ["house", "dog", "car", "book", "tree", "city", "river", "window"]
    colours = ["red", "green", "big", "small", "old"]
    batch: list[Pieces] = [(f"The {nouns[i % 8]} number {i} is {colours[i % 5]}.",) for i in range(200)]
    outs = eng_spa.translate_batch(batch, EN, ES).texts
    assert len(outs) == 200
    for i, out in enumerate(outs):
        assert f" {i} " in out, (i, out)
    for i in (0, 57, 199):
        assert eng_spa.translate_batch([batch[i]], EN, ES).texts == (outs[i],)


@pytest.mark.apertium
def test_protected_spans_verbatim_and_in_place(eng_spa: ApertiumBackend) -> None:
    spans = [
        Protected("{name}", "{name}"),
        Protected("https://example.com/x", "https://example.com/x"),
        Protected("%s", "%s"),
        Protected("Widget", "Artilugio", "glossary"),
    ]
    pieces = ("Hello ", spans[0], ", open ", spans[1], " and print ", spans[2], ". The ", spans[3], " works.")
    (out,) = eng_spa.translate_batch([pieces], EN, ES).texts
    positions = [out.find(s.output) for s in spans]
    assert all(p >= 0 for p in positions), out
    assert positions == sorted(positions), out
    assert "Widget" not in out and "Hola" in out


@pytest.mark.apertium
def test_special_characters_newlines_and_empty(eng_spa: ApertiumBackend) -> None:
    text = "Use [brackets], ^carets$, a/b, @home, <tag>, {braces}, back\\slash, 5 * 3, #tag, ~tilde."
    (out,) = eng_spa.translate_batch([(text,)], EN, ES).texts
    for ch in "[]^$/@<>{}\\*#~":
        assert out.count(ch) == text.count(ch), (ch, out)
    lines = eng_spa.translate_batch([("The house is red.\n\n  The dog is big.\n",)], EN, ES).texts[0]
    assert lines.count("\n") == 3 and lines.endswith("\n") and "\n\n  " in lines, lines
    assert eng_spa.translate_batch([("",), ("  ",), (Protected("{x}", "{x}"),)], EN, ES).texts == (
        "",
        "  ",
        "{x}",
    )


@pytest.mark.apertium
def test_unknown_words_stripped_and_counted(eng_spa: ApertiumBackend) -> None:
    (detail,) = eng_spa.translate_batch_detailed([("I saw the blorft and the zibbit yesterday.",)], EN, ES)
    assert "*" not in detail.text and "blorft" in detail.text and "zibbit" in detail.text
    assert detail.unknown_words == ("blorft", "zibbit")
    # the batch answer carries the count with the texts (nothing is left on the backend to read after)
    answer = eng_spa.translate_batch([("I saw the blorft.",), ("And the zibbit yesterday.",)], EN, ES)
    assert answer.notes == {"unknown_words": 2} and "blorft" in answer.texts[0]
    assert eng_spa.translate_batch([("The house is red.",)], EN, ES).notes == {}


@pytest.mark.apertium
def test_pipeline_stays_warm_and_survives_a_killed_stage(eng_spa: ApertiumBackend) -> None:
    eng_spa.translate_batch([("One.",)], EN, ES)
    pids = eng_spa.pids
    assert len(pids) == len(mode_commands(eng_spa.mode.path)) and all(alive(p) for p in pids)
    eng_spa.translate_batch([("Two.",)], EN, ES)
    assert eng_spa.pids == pids
    os.kill(pids[len(pids) // 2], signal.SIGKILL)
    (out,) = eng_spa.translate_batch([("The house is red.",)], EN, ES).texts
    assert "casa" in out
    assert eng_spa.pids != pids and not any(alive(p) for p in pids)


@pytest.mark.apertium
def test_concurrent_callers_get_their_own_results(eng_spa: ApertiumBackend) -> None:
    sentences = [f"The dog number {i} is red." for i in range(40)]
    expected = eng_spa.translate_batch([(s,) for s in sentences], EN, ES).texts
    errors: list[str] = []

    def worker(offset: int) -> None:
        for i in range(offset, 40, 4):
            for _ in range(3):
                got = eng_spa.translate_batch([(sentences[i],), (sentences[(i + 1) % 40],)], EN, ES).texts
                if got != (expected[i], expected[(i + 1) % 40]):
                    errors.append(f"{i}: {got}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.apertium
@needs_apertium
def test_close_leaves_no_child_processes() -> None:
    modes = {m.name: m for m in discover_modes([MODES_DIR])}
    backend = ApertiumBackend(modes["eng-spa"])
    backend.translate_batch([("The house is red.",)], EN, ES)
    pids = backend.pids
    backend.close()
    backend.close()
    assert not any(alive(p) for p in pids)
    with pytest.raises(BackendError, match="closed"):
        backend.translate_batch([("Hello.",)], EN, ES)


@needs_apertium
@pytest.mark.skipif(
    shutil.which("apertium-wblank-attach") is None, reason="needs Apertium 3.8 word-bound blanks"
)
def test_formatted_words_keep_their_formatting_when_reordered(eng_spa: ApertiumBackend) -> None:
    bold = ("The ", Protected("<1>", "<1>"), "big", Protected("</1>", "</1>"), " dog is in the house.")
    split = ("I have ", Protected("<2>", "<2>"), "three red", Protected("</2>", "</2>"), " cars.")
    moved, kept = eng_spa.translate_batch([bold, split], EN, ES).texts
    assert moved == "El perro <1>grande</1> es en la casa."  # the bold moved with "big"
    # "three red" comes back split around "coches": translated again with the tags where they stood.
    assert kept.count("<2>") == 1 and kept.count("</2>") == 1 and "tres" in kept and "rojos" in kept
