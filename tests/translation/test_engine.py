"""The engine end to end: Apertium (real translations) and tiny CTranslate2 packs (real models)."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support import hold_first_call, needs_apertium, wait_until

from dragoman.errors import (
    Cancelled,
    EngineTimeout,
    InvalidRequest,
    LimitExceeded,
    UnknownLanguage,
    UnsupportedPair,
)
from dragoman.limits import MAX_BATCH_TEXTS, MAX_GLOSSARY_ENTRIES
from dragoman.progress import CancelToken, JobContext
from dragoman.server.local_store import GlossaryStore
from dragoman.settings import Settings
from dragoman.translation import engine as engine_module
from dragoman.translation.backends.ctranslate2_backend import CTranslate2Backend
from dragoman.translation.batcher import BATCH_SEGMENTS
from dragoman.translation.engine import Engine
from dragoman.translation.types import BatchOutput, GlossaryEntry, TranslateOptions


@pytest.fixture
def engine() -> Any:
    with Engine(Settings.from_env()) as eng:
        yield eng


@pytest.fixture
def pack_only_engine(packs_dir: Path, tiny_argos_pack: Path) -> Any:
    """An engine that sees the tiny en->es pack and no Apertium."""
    shutil.copytree(tiny_argos_pack, packs_dir / "translate-en_es")
    settings = Settings.from_env(
        {
            "DRAGOMAN_PACKS_DIR": str(packs_dir),
            "DRAGOMAN_APERTIUM": "0",
            "DRAGOMAN_GLOSSARY": str(packs_dir.parent / "glossary.json"),
        }
    )
    with Engine(settings) as eng:
        yield eng


class CallCounter:
    """Wraps a backend's translate_batch to count calls and record what it was handed."""

    def __init__(self, backend: Any) -> None:
        self.calls: list[int] = []
        self._inner = backend.translate_batch

        def wrapped(batch: Any, source: str, target: str) -> BatchOutput:
            self.calls.append(len(batch))
            return self._inner(batch, source, target)  # type: ignore[no-any-return]

        backend.translate_batch = wrapped


# ----- Apertium: the embedded default, real translations ----------------------------------------------------
@needs_apertium
def test_translates_with_apertium_and_stamps_provenance(engine: Engine) -> None:
    result = engine.translate("The house is red.", TranslateOptions("es", source="en"))
    assert "casa" in result.translation and "roja" in result.translation
    assert (result.source, result.target, result.provenance) == ("eng_Latn", "spa_Latn", "on-device")
    assert result.route == ("apertium-eng-spa:eng_Latn->spa_Latn",)
    assert result.seconds > 0 and result.warnings == ()


@needs_apertium
def test_bcp47_and_flores_inputs_give_flores_answers(engine: Engine) -> None:
    result = engine.translate("La casa es roja.", TranslateOptions("EN", source="spa_Latn"))
    assert (result.source, result.target) == ("spa_Latn", "eng_Latn")
    assert "house" in result.translation.lower()


@needs_apertium
def test_layout_whitespace_and_placeholders_kept(engine: Engine) -> None:
    text = "  The house is red.\n\nHello {name}, see https://example.com/a.b?x=1 now.  \n"
    out = engine.translate(text, TranslateOptions("es", source="en")).translation
    assert out.startswith("  ") and out.endswith("  \n") and "\n\n" in out
    assert "{name}" in out and "https://example.com/a.b?x=1" in out
    assert "casa" in out


@needs_apertium
def test_detects_each_text_of_a_mixed_batch(engine: Engine) -> None:
    texts = ["The weather is very nice today in the city.", "El tiempo es muy bueno hoy en la ciudad."]
    results = engine.translate_batch(texts, TranslateOptions("cat"))
    assert [r.source for r in results] == ["eng_Latn", "spa_Latn"]
    assert all(r.target == "cat_Latn" and r.translation for r in results)
    assert results[1].route == ("apertium-spa-cat:spa_Latn->cat_Latn",)


@needs_apertium
def test_uncertain_detection_falls_back_to_english_and_says_so(engine: Engine) -> None:
    result = engine.translate("ok", TranslateOptions("es"))
    assert result.source == "eng_Latn"
    assert any(w.startswith("source_uncertain") for w in result.warnings)


@needs_apertium
def test_request_glossary_terms_come_out_verbatim(engine: Engine) -> None:
    glossary = [GlossaryEntry("house", "CASONA"), GlossaryEntry("Red", "Rojo-X", case_sensitive=True)]
    out = engine.translate(
        "The house is red.", TranslateOptions("es", source="en", glossary=glossary)
    ).translation
    assert "CASONA" in out and "Rojo-X" not in out  # "Red" is case-sensitive, the text has "red"


@needs_apertium
def test_user_glossary_file_applies_only_through_the_local_store(engine: Engine) -> None:
    store = GlossaryStore(engine.settings.local.glossary_path)
    store.add([GlossaryEntry("garden", "VERGEL")], "eng_Latn", "spa_Latn")
    text = "The garden is big."

    def out(target: str, glossary: tuple[GlossaryEntry, ...]) -> str:
        return engine.translate(text, TranslateOptions(target, source="en", glossary=glossary)).translation

    assert "VERGEL" in out("es", store.resolve(None))  # a request with no glossary: the file's entries
    assert "VERGEL" not in out("es", store.resolve([]))  # [] means none
    assert "VERGEL" not in out("cat", store.resolve(None))  # other pair
    # the engine owns no glossary file: without entries it applies none
    assert "VERGEL" not in engine.translate(text, TranslateOptions("es", source="en")).translation


@needs_apertium
def test_batch_is_one_pass_deduplicated_in_input_order(engine: Engine) -> None:
    texts = [f"The house number {i} is red." for i in range(20)] + ["The house number 3 is red."] * 10
    backend = engine.pack_cache.backend("apertium-eng-spa")
    counter = CallCounter(backend)
    results = engine.translate_batch(texts, TranslateOptions("es", source="en"))
    assert counter.calls == [20]  # 30 texts, 20 unique sentences, one call
    singles = [engine.translate(t, TranslateOptions("es", source="en")).translation for t in texts[:5]]
    assert [r.translation for r in results[:5]] == singles
    assert all(" 3 " in r.translation for r in results[20:])


@needs_apertium
def test_route_chains_packs_of_different_kinds(packs_dir: Path, tiny_argos_pack_es_en: Path) -> None:
    # fra->eng: no single pack; Apertium fr-es then the tiny es->en CTranslate2 pack.
    if not Path("/usr/share/apertium/modes/fr-es.mode").is_file():
        pytest.skip("apertium-fr-es is not installed (apt-get install apertium-fr-es)")
    shutil.copytree(tiny_argos_pack_es_en, packs_dir / "translate-es_en")
    with Engine(Settings.from_env()) as eng:
        result = eng.translate("La maison est rouge.", TranslateOptions("en", source="fr"))
        # Apertium fr-es + spa-eng would do too; the CTranslate2 hop ranks higher (quality 3 > 2).
        assert [step.split(":")[0] for step in result.route] == ["apertium-fr-es", "argos-es-en"]
        assert result.translation.strip()


@needs_apertium
def test_fast_tier_guard_retries_on_best_route(packs_dir: Path, tiny_argos_pack: Path) -> None:
    shutil.copytree(tiny_argos_pack, packs_dir / "translate-en_es")
    with Engine(Settings.from_env()) as eng:
        fast = eng.route("eng_Latn", "spa_Latn", "fast")
        best = eng.route("eng_Latn", "spa_Latn", "best")
        assert fast.hops[0].kind == "apertium" and best.hops[0].kind == "argos"
        apertium = eng.pack_cache.backend("apertium-eng-spa")
        apertium.translate_batch = lambda batch, s, t: BatchOutput(tuple("" for _ in batch))  # type: ignore[method-assign,assignment]
        result = eng.translate("The house is red and big.", TranslateOptions("es", source="en", tier="fast"))
        assert result.translation.strip()  # the best route's answer, not the empty one
        assert any("guard: empty" in w for w in result.warnings)
        assert result.tier == "fast"


# ----- tiny CTranslate2 packs ---------------------------------------------------------------------------
def test_pack_loads_once_for_concurrent_first_calls(
    pack_only_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[str] = []
    real_load = CTranslate2Backend.load

    def counting_load(*args: Any, **kwargs: Any) -> CTranslate2Backend:
        loads.append("x")
        return real_load(*args, **kwargs)

    monkeypatch.setattr(CTranslate2Backend, "load", counting_load)
    barrier = threading.Barrier(6)
    outputs: list[str] = []

    def worker() -> None:
        barrier.wait()
        outputs.append(
            pack_only_engine.translate("Hello world.", TranslateOptions("es", source="en")).translation
        )

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert loads == ["x"] and len(set(outputs)) == 1
    assert pack_only_engine.pack_cache.loaded_ids() == {"argos-en-es"}


def test_tiny_pack_keeps_placeholders_and_glossary(pack_only_engine: Engine) -> None:
    glossary = [GlossaryEntry("world", "MUNDO")]
    out = pack_only_engine.translate(
        "Hello world, {name} has %d files at https://x.org/y.",
        TranslateOptions("es", source="en", glossary=glossary),
    ).translation
    for kept in ("MUNDO", "{name}", "%d", "https://x.org/y"):
        assert kept in out


def test_multilingual_pack_serves_every_pair(packs_dir: Path, tiny_multilingual_pack: Path) -> None:
    shutil.copytree(tiny_multilingual_pack, packs_dir / "tiny-nllb")
    settings = Settings.from_env({"DRAGOMAN_PACKS_DIR": str(packs_dir), "DRAGOMAN_APERTIUM": "0"})
    with Engine(settings) as eng:
        assert {("fra_Latn", "deu_Latn"), ("deu_Latn", "eng_Latn")} <= eng.installed_pairs()
        to_de = eng.translate("Bonjour le monde.", TranslateOptions("de", source="fr"))
        to_es = eng.translate("Bonjour le monde.", TranslateOptions("es", source="fr"))
        assert to_de.route == ("tiny-nllb:fra_Latn->deu_Latn",)
        assert to_de.translation != to_es.translation  # the target token steers the decoder
        assert {lang.flores for lang in eng.languages()} == {"eng_Latn", "spa_Latn", "fra_Latn", "deu_Latn"}


# ----- bad input -----------------------------------------------------------------------------------------
def test_unknown_language_is_typed(pack_only_engine: Engine) -> None:
    with pytest.raises(UnknownLanguage) as info:
        pack_only_engine.translate("Hello", TranslateOptions("klingon"))
    assert info.value.status == 400


def test_unsupported_pair_says_what_is_installed_and_how_to_install(pack_only_engine: Engine) -> None:
    with pytest.raises(UnsupportedPair) as info:
        pack_only_engine.translate("Hello", TranslateOptions("ja", source="en"))
    message = info.value.message
    assert "eng_Latn->jpn_Jpan" in message and "eng_Latn->spa_Latn" in message
    assert "dragoman packs install" in message and info.value.status == 400


def test_batch_limit_and_types(pack_only_engine: Engine) -> None:
    with pytest.raises(LimitExceeded, match=str(MAX_BATCH_TEXTS)):
        pack_only_engine.translate_batch(["a"] * (MAX_BATCH_TEXTS + 1), TranslateOptions("es", source="en"))
    with pytest.raises(InvalidRequest):
        pack_only_engine.translate_batch("not a list", TranslateOptions("es", source="en"))
    with pytest.raises(InvalidRequest, match="tier"):
        pack_only_engine.translate("Hello", TranslateOptions("es", source="en", tier="fastest"))  # type: ignore[arg-type]


def test_glossary_applies_at_most_200_entries_per_pair_most_specific_first(
    pack_only_engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    # The 200-per-request cap is the front doors' (wire models); the engine takes any number of entries of
    # any scope and applies at most 200 to one pair, the scoped ones first.
    unscoped = [GlossaryEntry(f"term{i}", f"t{i}") for i in range(MAX_GLOSSARY_ENTRIES)]
    scoped = GlossaryEntry("world", "MUNDO", source="en", target="es")
    elsewhere = [GlossaryEntry(f"x{i}", "y", source="fr", target="de") for i in range(300)]
    options = TranslateOptions("es", source="en", glossary=[*unscoped, scoped, *elsewhere])
    with caplog.at_level(logging.WARNING, logger="dragoman.translation.glossary"):
        result = pack_only_engine.translate("Hello world.", options)
    assert "MUNDO" in result.translation
    assert "201 glossary entries apply to eng_Latn->spa_Latn" in caplog.text
    assert len(result.options.glossary) == MAX_GLOSSARY_ENTRIES + 301  # all checked, echoed as taken


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t "])
def test_empty_input_comes_back_as_it_went_in_without_loading(pack_only_engine: Engine, text: str) -> None:
    result = pack_only_engine.translate(text, TranslateOptions("es", source="en"))
    assert result.translation == text and result.warnings == ()
    assert pack_only_engine.pack_cache.loaded_ids() == set()


def test_same_language_returns_text_with_a_warning(pack_only_engine: Engine) -> None:
    result = pack_only_engine.translate("Hello there.", TranslateOptions("en", source="eng_Latn"))
    assert result.translation == "Hello there." and result.warnings[0].startswith("same_language")


def test_progress_reports_reach_the_total(pack_only_engine: Engine) -> None:
    seen: list[tuple[int, int]] = []
    texts = [f"Sentence number {i}." for i in range(10)]
    pack_only_engine.translate_batch(
        texts, TranslateOptions("es", source="en"), context=JobContext.of(lambda d, t, m: seen.append((d, t)))
    )
    assert seen and seen[-1][0] == seen[-1][1] == 10


def test_reprotect_marks_outputs_for_the_next_hop() -> None:
    from dragoman.translation.types import Protected

    pieces = engine_module._reprotect(
        "Hola {name}, {name} y MUNDO.",
        [Protected("{name}", "{name}"), Protected("world", "MUNDO", "glossary")],
    )
    assert pieces == (
        "Hola ",
        Protected("{name}", "{name}"),
        ", ",
        Protected("{name}", "{name}"),
        " y ",
        Protected("MUNDO", "MUNDO"),
        ".",
    )


@needs_apertium
def test_apertium_unknown_words_are_reported(engine: Engine) -> None:
    result = engine.translate("The flibbertigibbet house is red.", TranslateOptions("es", source="en"))
    assert "flibbertigibbet" in result.translation and "*" not in result.translation
    assert result.warnings == (
        "unknown_words: apertium-eng-spa left 1 word(s) it does not know untranslated",
    )


@needs_apertium
def test_concurrent_apertium_callers_share_one_pipeline_call_each_with_its_own_warnings(
    engine: Engine,
) -> None:
    # Apertium's one warm pipeline serves one call at a time: callers that arrive while it is busy are
    # merged into its next call (one stream), and each gets its own translation and its own warnings,
    # split by segment, with no second call to learn whose unknown word it was.
    texts = [f"The house number {i} is red." for i in range(6)] + ["The flibbertigibbet house is red."]
    options = TranslateOptions("es", source="en")
    alone = [engine.translate(t, options) for t in texts]
    held = hold_first_call(engine.pack_cache.backend("apertium-eng-spa"))
    results: dict[int, Any] = {}

    def call(i: int) -> None:
        results[i] = engine.translate(texts[i], options)

    blocker = threading.Thread(target=engine.translate, args=("The dog is big.", options))
    blocker.start()
    assert held.entered.wait(10)
    before = engine.batcher.stats()
    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    wait_until(lambda: engine.batcher.stats()["waiting_callers"] >= len(texts))
    held.gate.set()
    for t in [blocker, *threads]:
        t.join(10)
    assert held.sizes == [1, len(texts)]  # the blocker's call, then one for all seven callers
    for i, single in enumerate(alone):
        assert results[i].translation == single.translation
        assert results[i].warnings == single.warnings
    assert results[6].warnings == (
        "unknown_words: apertium-eng-spa left 1 word(s) it does not know untranslated",
    )
    stats = engine.batcher.stats()
    assert stats["reruns"] == before["reruns"] and stats["merged_batches"] == before["merged_batches"] + 1


# ----- stateless about users: options in, options echoed ------------------------------------------------
def test_engines_take_only_the_entries_they_are_given(packs_dir: Path, tiny_argos_pack: Path) -> None:
    # A glossary file set for the process (DRAGOMAN_GLOSSARY) is a front door's, never the engine's: two
    # engines of one process (two tenants) apply only the entries each call carries.
    shutil.copytree(tiny_argos_pack, packs_dir / "translate-en_es")
    settings = Settings.from_env({"DRAGOMAN_PACKS_DIR": str(packs_dir), "DRAGOMAN_APERTIUM": "0"})
    GlossaryStore(settings.local.glossary_path).add([GlossaryEntry("world", "FILE-TERM")])
    text = "Hello world."
    with Engine(settings) as first, Engine(settings) as second:
        plain = first.translate(text, TranslateOptions("es", source="en")).translation
        mine = first.translate(
            text, TranslateOptions("es", source="en", glossary=[GlossaryEntry("world", "ALFA")])
        )
        theirs = second.translate(
            text, TranslateOptions("es", source="en", glossary=[GlossaryEntry("world", "BRAVO")])
        )
    assert "FILE-TERM" not in plain
    assert "ALFA" in mine.translation and "BRAVO" not in mine.translation
    assert "BRAVO" in theirs.translation and "ALFA" not in theirs.translation


def test_result_echoes_the_options_as_taken(pack_only_engine: Engine) -> None:
    asked = TranslateOptions("es", source="en", glossary=[GlossaryEntry("World", "MUNDO", source="en")])
    result = pack_only_engine.translate("Hello world.", asked)
    assert result.options == TranslateOptions(
        "spa_Latn", "eng_Latn", "best", (GlossaryEntry("World", "MUNDO", source="eng_Latn"),)
    )
    assert result.to_dict()["tier"] == "best" and "options" not in result.to_dict()  # the wire shape holds
    detected = pack_only_engine.translate("Hello world, how are you today?", TranslateOptions("es"))
    assert detected.options.source is None and detected.options.tier == "best"


def test_options_must_be_an_options_object(pack_only_engine: Engine) -> None:
    with pytest.raises(InvalidRequest, match="TranslateOptions"):
        pack_only_engine.translate("Hello", "es")  # type: ignore[arg-type]


# ----- backends report what they learned ---------------------------------------------------------------
def test_backend_notes_become_result_warnings_summed_per_hop(pack_only_engine: Engine) -> None:
    backend = pack_only_engine.pack_cache.backend("argos-en-es")
    inner = backend.translate_batch

    def noting(batch: Any, source: str, target: str) -> BatchOutput:
        out = inner(batch, source, target)
        return BatchOutput(out.texts, {"unknown_words": 2, "odd_thing": 1, "nothing": 0})

    backend.translate_batch = noting  # type: ignore[method-assign]
    texts = [f"Sentence number {i}." for i in range(engine_module.CHUNK_SEGMENTS + 10)]  # two chunks
    results = pack_only_engine.translate_many(texts, TranslateOptions("es", source="en"))
    # The batcher cuts each chunk into calls of at most BATCH_SEGMENTS: 256 segments in 4 calls, 10 in 1.
    calls = -(-engine_module.CHUNK_SEGMENTS // BATCH_SEGMENTS) + 1
    assert results[0].warnings == (
        f"unknown_words: argos-en-es left {2 * calls} word(s) it does not know untranslated",
        f"odd_thing: argos-en-es reported {calls}",
    )
    assert all(r.warnings == results[0].warnings for r in results)


# ----- progress, cancellation, deadline --------------------------------------------------------------
def test_cancel_stops_the_engine_at_the_next_chunk(pack_only_engine: Engine) -> None:
    counter = CallCounter(pack_only_engine.pack_cache.backend("argos-en-es"))
    token = CancelToken()
    seen: list[int] = []

    def progress(done: int, total: int, message: str) -> None:
        seen.append(done)
        token.cancel("the user gave up")  # as a client would, while the first chunk is reported

    context = JobContext(progress, token)
    texts = [f"Sentence number {i}." for i in range(3 * engine_module.CHUNK_SEGMENTS)]
    with pytest.raises(Cancelled, match="the user gave up"):
        pack_only_engine.translate_many(texts, TranslateOptions("es", source="en"), context=context)
    # One chunk done (in calls of at most the batcher's budget), then stopped.
    assert sum(counter.calls) == engine_module.CHUNK_SEGMENTS
    assert max(counter.calls) <= BATCH_SEGMENTS
    assert seen == [engine_module.CHUNK_SEGMENTS]


def test_cancelled_or_late_work_never_reaches_a_backend(pack_only_engine: Engine) -> None:
    counter = CallCounter(pack_only_engine.pack_cache.backend("argos-en-es"))
    cancelled = JobContext()
    cancelled.cancel.cancel()
    with pytest.raises(Cancelled):
        pack_only_engine.translate("Hello.", TranslateOptions("es", source="en"), context=cancelled)
    late = JobContext(deadline=time.monotonic() - 1)
    with pytest.raises(EngineTimeout):
        pack_only_engine.translate("Hello.", TranslateOptions("es", source="en"), context=late)
    assert counter.calls == []
