from __future__ import annotations

import hashlib
import json
import time
import zipfile
from pathlib import Path

import ctranslate2
import pytest
import sentencepiece as spm

from dragoman.engine import tinypack
from dragoman.engine.packs.manifest import read_manifest


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


def test_building_is_fast_and_deterministic(tmp_path: Path) -> None:
    tinypack.sentencepiece_model()  # trained once per process; count it apart
    start = time.perf_counter()
    first = tinypack.build_argos_pack(tmp_path / "a", "en", "fr", seed=7)
    elapsed = time.perf_counter() - start
    assert elapsed < 5.0
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
