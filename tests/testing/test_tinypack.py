from __future__ import annotations

import hashlib
import json
import time
import zipfile
from pathlib import Path
from typing import Any

import ctranslate2
import pytest
import sentencepiece as spm

from dragoman.models.manifest import read_manifest
from dragoman.testing import tinypack


def _vocabulary(model_dir: Path) -> list[str]:
    path = model_dir / "shared_vocabulary.json"
    if path.is_file():
        tokens: list[str] = json.loads(path.read_text(encoding="utf-8"))
        return tokens
    return (model_dir / "shared_vocabulary.txt").read_text(encoding="utf-8").splitlines()


def _translate(model_dir: Path, sp_path: Path, text: str, **kwargs: object) -> list[str]:
    translator = ctranslate2.Translator(str(model_dir), device="cpu")
    processor = spm.SentencePieceProcessor(model_file=str(sp_path))
    result = translator.translate_batch([processor.encode(text, out_type=str)], **kwargs)
    return list(result[0].hypotheses[0])


def test_argos_pack_layout_and_manifest(tiny_argos_pack: Path) -> None:
    meta = json.loads((tiny_argos_pack / "metadata.json").read_text(encoding="utf-8"))
    assert meta["from_code"] == "en" and meta["to_code"] == "es"
    assert meta["type"] == "translate"
    assert meta["from_name"] == "English" and meta["to_name"] == "Spanish"
    assert {"package_version", "argos_version"} <= meta.keys()
    manifest = read_manifest(tiny_argos_pack)
    assert manifest.kind == "argos"
    assert manifest.pairs == (("eng_Latn", "spa_Latn"),)
    assert manifest.version == "1.0"
    vocabulary = _vocabulary(tiny_argos_pack / "model")
    assert vocabulary[:3] == ["<unk>", "<s>", "</s>"]


def test_argos_pack_loads_in_ctranslate2_and_translates(tiny_argos_pack: Path) -> None:
    tokens = _translate(
        tiny_argos_pack / "model",
        tiny_argos_pack / "sentencepiece.model",
        "Hello world",
        max_decoding_length=400,
    )
    assert tokens
    # </s> becomes likely after a dozen steps: decoding ends long before the bound.
    assert len(tokens) < 60
    assert not {"<unk>", "<s>"} & set(tokens)
    assert not [t for t in tokens if t.startswith("<0x")]  # byte pieces are suppressed


def test_multilingual_pack_layout(tiny_multilingual_pack: Path) -> None:
    data = json.loads((tiny_multilingual_pack / "dragoman-pack.json").read_text(encoding="utf-8"))
    assert data["kind"] == "multilingual" and data["license"] == "CC-BY-NC-4.0"
    manifest = read_manifest(tiny_multilingual_pack)
    assert manifest.languages == ("eng_Latn", "spa_Latn", "fra_Latn", "deu_Latn")
    assert len(manifest.pairs) == 12
    assert manifest.token_style == "flores"
    vocabulary = _vocabulary(tiny_multilingual_pack / "model")
    assert vocabulary[-4:] == ["eng_Latn", "spa_Latn", "fra_Latn", "deu_Latn"]
    config = json.loads((tiny_multilingual_pack / "model" / "config.json").read_text(encoding="utf-8"))
    assert config["decoder_start_token"] == "</s>"  # as NLLB and M2M-100 conversions


def test_multilingual_pack_target_prefix_is_accepted(tiny_multilingual_pack: Path) -> None:
    processor = spm.SentencePieceProcessor(model_file=str(tiny_multilingual_pack / "sentencepiece.model"))
    translator = ctranslate2.Translator(str(tiny_multilingual_pack / "model"))
    source = ["eng_Latn", *processor.encode("Good morning", out_type=str), "</s>"]
    result = translator.translate_batch([source], target_prefix=[["fra_Latn"]], max_decoding_length=100)
    tokens = result[0].hypotheses[0]
    assert tokens[0] == "fra_Latn"
    assert len(tokens) > 1
    assert not {"eng_Latn", "spa_Latn", "deu_Latn"} & set(tokens[1:])


def test_m2m_token_style(tmp_path: Path) -> None:
    pack = tinypack.build_multilingual_pack(
        tmp_path / "m2m", ["eng_Latn", "spa_Latn"], pack_id="tiny-m2m", token_style="m2m", license="MIT"
    )
    manifest = read_manifest(pack)
    assert manifest.token_for("spa_Latn") == "__es__"
    assert manifest.license == "MIT"
    assert _vocabulary(pack / "model")[-2:] == ["__en__", "__es__"]


def test_unknown_token_style_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="token_style"):
        tinypack.build_multilingual_pack(tmp_path / "x", ["eng_Latn", "spa_Latn"], token_style="none")


def test_building_trains_the_tokenizer_once_and_is_deterministic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tinypack.sentencepiece_model()  # trained once per process: what makes every later pack cheap to build

    def train_again(*args: object, **kwargs: object) -> None:
        raise AssertionError("a pack retrained the SentencePiece model instead of reusing it")

    monkeypatch.setattr(spm.SentencePieceTrainer, "train", train_again)
    first = tinypack.build_argos_pack(tmp_path / "a", "en", "fr", seed=7)
    second = tinypack.build_argos_pack(tmp_path / "b", "en", "fr", seed=7)
    other = tinypack.build_argos_pack(tmp_path / "c", "en", "fr", seed=8)

    def digest(pack: Path) -> str:
        return hashlib.sha256((pack / "model" / "model.bin").read_bytes()).hexdigest()

    assert digest(first) == digest(second)
    assert digest(first) != digest(other)


def test_build_replaces_an_existing_directory(tmp_path: Path) -> None:
    dest = tmp_path / "pack"
    dest.mkdir()
    (dest / "stale.txt").write_text("old", encoding="utf-8")
    tinypack.build_argos_pack(dest)
    assert not (dest / "stale.txt").exists()
    assert read_manifest(dest).kind == "argos"


@pytest.mark.parametrize(
    "text",
    ["Hello, world!", "Привет мир", "مرحبا", "中文测试 😀", "naïve café 3.14 {name}", "  spaced  out  "],
)
def test_sentencepiece_covers_any_input(text: str) -> None:
    processor = spm.SentencePieceProcessor(model_proto=tinypack.sentencepiece_model())
    ids = processor.encode(text)
    assert processor.unk_id() not in ids  # byte fallback: nothing is unknown
    assert processor.decode(ids) == " ".join(text.split())


def test_argos_archive_has_one_top_level_directory(argos_archive: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(argos_archive) as archive:
        names = archive.namelist()
        tops = {name.split("/", 1)[0] for name in names}
        assert tops == {"translate-en_es-1_0"}
        top = next(iter(tops))
        assert f"{top}/metadata.json" in names
        assert f"{top}/sentencepiece.model" in names
        assert f"{top}/model/model.bin" in names
        archive.extractall(tmp_path)
    manifest = read_manifest(tmp_path / top)
    assert manifest.pairs == (("eng_Latn", "spa_Latn"),)


# ----- sizes -------------------------------------------------------------------------------------------


def _model_digest(pack: Path) -> str:
    return hashlib.sha256((pack / "model" / "model.bin").read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def base_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The base-size pack (the shape of a real Argos pack): a few seconds to build, about 100 MB."""
    return tinypack.build_argos_pack(tmp_path_factory.mktemp("packs") / "base-en_es", size="base")


def test_tiny_is_the_default_size(tmp_path: Path) -> None:
    default = tinypack.build_argos_pack(tmp_path / "default", seed=3)
    named = tinypack.build_argos_pack(tmp_path / "named", seed=3, size="tiny")
    explicit = tinypack.build_argos_pack(
        tmp_path / "explicit", seed=3, size=tinypack.ModelSize(d_model=64, layers=2, heads=4, ffn=128)
    )
    assert _model_digest(default) == _model_digest(named) == _model_digest(explicit)
    assert (default / "sentencepiece.model").read_bytes() == tinypack.sentencepiece_model()


def test_custom_size_pads_the_vocabulary_with_fillers_never_produced(tmp_path: Path) -> None:
    shape = tinypack.ModelSize(d_model=32, layers=1, heads=2, ffn=64, vocab=1000)
    pack = tinypack.build_argos_pack(tmp_path / "custom", size=shape)
    vocabulary = _vocabulary(pack / "model")
    assert len(vocabulary) == 1000
    assert vocabulary[-1] == tinypack.FILLER.format(1000 - len(tinypack._pieces()) - 1)
    assert "custom-size" in json.loads((pack / "metadata.json").read_text(encoding="utf-8"))["description"]
    tokens = _translate(pack / "model", pack / "sentencepiece.model", "Hello world", max_decoding_length=200)
    assert tokens and not [t for t in tokens if t.startswith("<filler_")]


def test_multilingual_pack_puts_language_tokens_after_the_fillers(tmp_path: Path) -> None:
    shape = tinypack.ModelSize(d_model=32, layers=1, heads=2, ffn=64, vocab=700)
    pack = tinypack.build_multilingual_pack(tmp_path / "m", ["eng_Latn", "spa_Latn"], size=shape)
    vocabulary = _vocabulary(pack / "model")
    assert len(vocabulary) == 700
    assert vocabulary[-2:] == ["eng_Latn", "spa_Latn"]


def test_unknown_size_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="size must be one of tiny, base"):
        tinypack.build_argos_pack(tmp_path / "x", size="huge")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "dims",
    [
        {"d_model": 30, "layers": 1, "heads": 4, "ffn": 8},  # heads do not divide d_model
        {"d_model": 5, "layers": 1, "heads": 5, "ffn": 8},  # odd d_model: no sinusoid pairs
        {"d_model": 32, "layers": 0, "heads": 4, "ffn": 8},
        {"d_model": 32, "layers": 1, "heads": 4, "ffn": 8, "eos_ramp": 0.0},
    ],
)
def test_impossible_shapes_are_refused(dims: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        tinypack.ModelSize(**dims)


def test_sample_sentences_are_deterministic_and_seeded() -> None:
    first = tinypack.sample_sentences(20, seed=4)
    assert first == tinypack.sample_sentences(20, seed=4)
    assert first != tinypack.sample_sentences(20, seed=5)
    assert len(set(first)) == 20
    assert all(8 <= len(s.split()) <= 25 and s[-1] in ".?!" and s[0].isupper() for s in first)


@pytest.mark.slow  # builds a 100 MB pack
def test_base_pack_has_the_shape_of_a_real_pack(base_pack: Path) -> None:
    assert len(_vocabulary(base_pack / "model")) == 32000
    size = sum(p.stat().st_size for p in base_pack.rglob("*") if p.is_file())
    assert 60e6 < size < 140e6  # int8: a float32 model of this shape would be about 400 MB
    translator = ctranslate2.Translator(str(base_pack / "model"), device="cpu")
    assert translator.compute_type.startswith("int8")
    # Common words are single pieces, as with a real SentencePiece model (the tiny one is near bytes).
    processor = spm.SentencePieceProcessor(model_file=str(base_pack / "sentencepiece.model"))
    tiny = spm.SentencePieceProcessor(model_proto=tinypack.sentencepiece_model())
    texts = tinypack.sample_sentences(50, seed=99)
    words = sum(len(t.split()) for t in texts)
    assert sum(len(processor.encode(t)) for t in texts) / words < 1.5
    assert sum(len(tiny.encode(t)) for t in texts) / words > 3


@pytest.mark.slow  # builds a 100 MB pack
def test_base_pack_outputs_end_within_a_bounded_length(base_pack: Path) -> None:
    processor = spm.SentencePieceProcessor(model_file=str(base_pack / "sentencepiece.model"))
    translator = ctranslate2.Translator(str(base_pack / "model"), device="cpu", intra_threads=1)
    texts = [*tinypack.sample_sentences(12, seed=7), "x", "Привет мир, как дела?", "中文 😀", "a " * 150]
    results = translator.translate_batch(
        [processor.encode(t, out_type=str) for t in texts], beam_size=2, max_decoding_length=500
    )
    lengths = [len(r.hypotheses[0]) for r in results]
    # The gentler ramp gives sentence-like lengths, far below the bound, whatever the input.
    assert all(15 <= n <= 45 for n in lengths), lengths
    produced = {t for r in results for t in r.hypotheses[0]}
    assert not [t for t in produced if t.startswith(("<filler_", "<0x")) or t in ("<unk>", "<s>")]


# ----- a tiny pack built while an engine runs ------------------------------------------------------------


def test_engine_routes_to_a_pack_built_after_it_started(tmp_path: Path) -> None:
    """Routes are cached per state of the packs directory: a new pack there is found, then reused."""
    from dragoman.errors import UnsupportedPair
    from dragoman.settings import Settings
    from dragoman.translation.engine import Engine
    from dragoman.translation.types import TranslateOptions

    packs = tmp_path / "packs"
    packs.mkdir()
    settings = Settings.from_env(
        {
            "DRAGOMAN_PACKS_DIR": str(packs),
            "DRAGOMAN_APERTIUM": "0",
            "DRAGOMAN_GLOSSARY": str(tmp_path / "glossary.json"),
        }
    )
    with Engine(settings) as engine:
        with pytest.raises(UnsupportedPair):
            engine.translate("Hello world.", TranslateOptions("es", source="en"))
        time.sleep(0.05)  # past the file system's timestamp granularity, as a later install would be
        tinypack.build_argos_pack(packs / "translate-en_es", "en", "es")
        result = engine.translate("Hello world.", TranslateOptions("es", source="en"))
        assert result.route == ("argos-en-es:eng_Latn->spa_Latn",)
        assert engine.pack_cache.routes("eng_Latn", "spa_Latn") is engine.pack_cache.routes(
            "eng_Latn", "spa_Latn"
        )
        with pytest.raises(UnsupportedPair):
            engine.translate("Hello world.", TranslateOptions("fr", source="en"))
