from __future__ import annotations

import dataclasses
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sentencepiece as spm

from dragoman.errors import BackendError, PackIntegrityError, UnsupportedPair
from dragoman.models.manifest import read_manifest
from dragoman.translation.backends.base import spans_kept
from dragoman.translation.backends.ctranslate2_backend import CTranslate2Backend, DecodeOptions, cpu_support
from dragoman.translation.types import Pieces, Protected

EN, ES, FR, DE = "eng_Latn", "spa_Latn", "fra_Latn", "deu_Latn"
TEXTS = [
    "Hello world, this is a test.",
    "The meeting was moved to room 42.",
    "Where is the station?",
    "Le café est très bon.",
    "Keep calm and carry on; it will be fine.",
]


class Spy:
    """Wraps a ctranslate2.Translator and records every translate_batch call."""

    def __init__(self, translator: Any) -> None:
        self.translator = translator
        self.calls: list[tuple[list[list[str]], dict[str, Any]]] = []

    def translate_batch(self, source: list[list[str]], **kwargs: Any) -> Any:
        self.calls.append(([list(s) for s in source], kwargs))
        return self.translator.translate_batch(source, **kwargs)

    def unload_model(self) -> None:
        self.translator.unload_model()


def _load(path: Path, **kwargs: Any) -> CTranslate2Backend:
    return CTranslate2Backend.load(read_manifest(path), path, **kwargs)


def _spy(backend: CTranslate2Backend) -> Spy:
    spy = Spy(backend._translator)
    backend._translator = spy
    return spy


@pytest.fixture(scope="module")
def argos(tiny_argos_pack: Path) -> Iterator[CTranslate2Backend]:
    backend = _load(tiny_argos_pack)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def multi(tiny_multilingual_pack: Path) -> Iterator[CTranslate2Backend]:
    backend = _load(tiny_multilingual_pack)
    yield backend
    backend.close()


def test_translations_are_deterministic_and_non_empty(argos: CTranslate2Backend) -> None:
    first = argos.translate_batch([(t,) for t in TEXTS], EN, ES).texts
    second = argos.translate_batch([(t,) for t in TEXTS], EN, ES).texts
    assert first == second
    assert len(first) == len(TEXTS)
    assert all(out.strip() for out in first)
    assert len(set(first)) > 1  # the input matters
    assert "<unk>" not in "".join(first) and "\ufffd" not in "".join(first)


@pytest.mark.parametrize("fixture", ["argos", "multi"])
def test_batch_equals_one_by_one(fixture: str, request: pytest.FixtureRequest) -> None:
    backend: CTranslate2Backend = request.getfixturevalue(fixture)
    spy = _spy(backend)
    try:
        batch = list(backend.translate_batch([(t,) for t in TEXTS], EN, ES).texts)
        assert len(spy.calls) == 1  # one model call per batch
        singles = [backend.translate_batch([(t,)], EN, ES).texts[0] for t in TEXTS]
    finally:
        backend._translator = spy.translator
    assert batch == singles


def test_multilingual_tokens_follow_the_nllb_convention(multi: CTranslate2Backend) -> None:
    spy = _spy(multi)
    try:
        to_spanish = multi.translate_batch([(TEXTS[0],)], EN, ES).texts[0]
        to_french = multi.translate_batch([(TEXTS[0],)], EN, FR).texts[0]
    finally:
        multi._translator = spy.translator
    assert to_spanish != to_french
    (source_es,), kwargs_es = spy.calls[0]
    (source_fr,), kwargs_fr = spy.calls[1]
    assert source_es == source_fr
    assert source_es[0] == EN and source_es[-1] == "</s>"
    assert kwargs_es["target_prefix"] == [[ES]] and kwargs_fr["target_prefix"] == [[FR]]
    for token in (EN, ES, FR, DE):
        assert token not in to_spanish and token not in to_french


def test_source_language_token_changes_the_input(multi: CTranslate2Backend) -> None:
    assert (
        multi.translate_batch([(TEXTS[1],)], EN, DE).texts
        != multi.translate_batch([(TEXTS[1],)], FR, DE).texts
    )


def test_count_tokens_includes_special_tokens(
    argos: CTranslate2Backend, multi: CTranslate2Backend, tiny_argos_pack: Path
) -> None:
    processor = spm.SentencePieceProcessor(model_file=str(tiny_argos_pack / "sentencepiece.model"))
    pieces = len(processor.encode(TEXTS[0]))
    assert argos.count_tokens(TEXTS[0]) == pieces
    assert multi.count_tokens(TEXTS[0]) == pieces + 2  # language token and </s>


def test_protected_spans_survive(argos: CTranslate2Backend) -> None:
    segment: Pieces = (
        "Dear ",
        Protected("{name}", "{name}"),
        ", your order ",
        Protected("#1234", "#1234"),
        " uses the ",
        Protected("Widget", "Artilugio", "glossary"),
        " today.",
    )
    plain: Pieces = ("Nothing to protect here.",)
    spy = _spy(argos)
    try:
        out = argos.translate_batch([segment, plain], EN, ES).texts
    finally:
        argos._translator = spy.translator
    assert spans_kept(segment, out[0])
    assert "Artilugio" in out[0] and "Widget" not in out[0]
    # The tiny model mangles the spans, so the piecewise fallback ran: a second model call.
    assert len(spy.calls) == 2
    assert out[1] == argos.translate_batch([plain], EN, ES).texts[0]


def test_blank_segments_come_back_without_a_model_call(argos: CTranslate2Backend) -> None:
    spy = _spy(argos)
    try:
        blanks: list[Pieces] = [("",), ("  \n",), (), ("\u200b",), ("\ufeff ",)]
        assert argos.translate_batch(blanks, EN, ES).texts == ("", "  \n", "", "\u200b", "\ufeff ")
        assert spy.calls == []
        mixed = argos.translate_batch([(" ",), (TEXTS[2],)], EN, ES).texts
    finally:
        argos._translator = spy.translator
    assert mixed[0] == " " and mixed[1].strip()
    assert len(spy.calls) == 1 and len(spy.calls[0][0]) == 1


def test_outer_whitespace_is_kept(argos: CTranslate2Backend) -> None:
    inner = argos.translate_texts([TEXTS[2]], EN, ES)[0]
    assert argos.translate_texts([f"  {TEXTS[2]}\n"], EN, ES) == [f"  {inner}\n"]


@pytest.mark.parametrize(("fixture", "limit"), [("argos", 12), ("multi", 12), ("multi", 3)])
def test_long_segments_are_split_to_the_limit(
    fixture: str, limit: int, request: pytest.FixtureRequest, tiny_argos_pack: Path
) -> None:
    loaded: CTranslate2Backend = request.getfixturevalue(fixture)
    manifest = dataclasses.replace(loaded.manifest, max_input_tokens=limit)
    backend = CTranslate2Backend(
        manifest, loaded.directory, loaded._translator, loaded._source_sp, loaded._target_sp
    )
    spy = _spy(backend)
    long_text = "The quick brown fox jumps over the lazy dog, and then it runs away; nobody saw it again."
    out = backend.translate_batch([(long_text,)], EN, ES).texts
    assert len(spy.calls) == 1  # still one model call
    sources, kwargs = spy.calls[0]
    assert len(sources) > 2
    assert all(len(source) <= limit for source in sources)
    assert kwargs["max_decoding_length"] <= limit + (1 if fixture == "multi" else 0)
    # The pieces handed to the model cover the text, in order.
    processor = spm.SentencePieceProcessor(model_file=str(tiny_argos_pack / "sentencepiece.model"))
    specials = {EN, "</s>"}
    chunks = [processor.decode([t for t in source if t not in specials]) for source in sources]
    assert "".join(chunks).replace(" ", "") == long_text.replace(" ", "")
    assert out[0].strip()
    assert out[0].count(" ") >= len(sources) - 1  # the translated pieces are joined with spaces


def test_decoding_length_is_bounded(argos: CTranslate2Backend) -> None:
    spy = _spy(argos)
    try:
        argos.translate_batch([(t,) for t in TEXTS], EN, ES)
    finally:
        argos._translator = spy.translator
    sources, kwargs = spy.calls[0]
    longest = max(len(s) for s in sources)
    assert kwargs["max_decoding_length"] == min(argos.manifest.max_input_tokens, 2 * longest + 16)
    assert kwargs["beam_size"] == DecodeOptions().beam_size


def test_unsupported_pair_is_refused(
    argos: CTranslate2Backend, tiny_argos_pack_es_en: Path, multi: CTranslate2Backend
) -> None:
    with pytest.raises(UnsupportedPair, match="eng_Latn->spa_Latn"):
        argos.translate_batch([("Hola",)], ES, EN)
    with pytest.raises(UnsupportedPair):
        multi.translate_batch([("Hola",)], "ita_Latn", EN)
    reverse = _load(tiny_argos_pack_es_en)
    try:
        assert reverse.translate_batch([("Hola, ¿qué tal?",)], ES, EN).texts[0].strip()
    finally:
        reverse.close()


def test_concurrent_calls_match_sequential_ones(argos: CTranslate2Backend) -> None:
    expected = {t: argos.translate_batch([(t,)], EN, ES).texts[0] for t in TEXTS}
    results: dict[tuple[int, str], str] = {}
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for _ in range(5):
                for text in TEXTS[worker % len(TEXTS) :] + TEXTS[: worker % len(TEXTS)]:
                    results[(worker, text)] = argos.translate_batch([(text,)], EN, ES).texts[0]
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert all(out == expected[text] for (_, text), out in results.items())


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "zeros"])
def test_corrupt_model_raises_our_error(damage: str, tiny_argos_pack: Path, tmp_path: Path) -> None:
    pack = Path(shutil.copytree(tiny_argos_pack, tmp_path / "pack"))
    model = pack / "model" / "model.bin"
    data = model.read_bytes()
    model.write_bytes(
        {
            "garbage": bytes(range(256)) * 8,
            "truncated": data[: len(data) // 2],
            "empty": b"",
            "zeros": bytes(len(data)),
        }[damage]
    )
    with pytest.raises((BackendError, PackIntegrityError)) as info:
        _load(pack)
    assert "argos-en-es" in info.value.message
    assert "dragoman packs verify" in info.value.message


def test_corrupt_sentencepiece_raises_backend_error(tiny_argos_pack: Path, tmp_path: Path) -> None:
    pack = Path(shutil.copytree(tiny_argos_pack, tmp_path / "pack"))
    (pack / "sentencepiece.model").write_bytes(b"not a model")
    with pytest.raises(BackendError, match="sentencepiece.model"):
        _load(pack)


def test_unknown_compute_type_raises_backend_error(tiny_argos_pack: Path) -> None:
    with pytest.raises(BackendError, match="int3"):
        _load(tiny_argos_pack, compute_type="int3")


def test_close_unloads(tiny_argos_pack: Path) -> None:
    backend = _load(tiny_argos_pack)
    assert backend.loaded_bytes > (tiny_argos_pack / "model" / "model.bin").stat().st_size // 2
    assert backend.translate_batch([("Hi",)], EN, ES).texts[0]
    backend.close()
    with pytest.raises(BackendError):
        backend.translate_batch([("Hi",)], EN, ES)
    backend.close()  # twice is harmless


def test_greedy_option_is_used(tiny_argos_pack: Path) -> None:
    backend = _load(tiny_argos_pack, options=DecodeOptions(beam_size=1))
    spy = _spy(backend)
    try:
        assert backend.translate_batch([(TEXTS[0],)], EN, ES).texts[0]
    finally:
        backend.close()
    assert spy.calls[0][1]["beam_size"] == 1


def test_cpu_support() -> None:
    info = cpu_support()
    assert isinstance(info["ctranslate2"], str) and info["ctranslate2"]
    compute = info["compute_types_cpu"]
    assert isinstance(compute, list) and "float32" in compute
    assert isinstance(info["cuda_devices"], int)


def test_the_device_is_the_cpu_unless_ctranslate2_sees_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctranslate2

    from dragoman.errors import ConfigError
    from dragoman.translation.backends.ctranslate2_backend import compute_device

    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 0)
    assert compute_device("auto") == "cpu" and compute_device("cpu") == "cpu"
    with pytest.raises(ConfigError, match="DRAGOMAN_DEVICE=cuda"):
        compute_device("cuda")
    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 1)
    assert compute_device("auto") == "cuda" and compute_device("cuda") == "cuda"
    assert compute_device("cpu") == "cpu"
