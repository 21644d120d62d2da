"""Installs from the Hugging Face Hub (issue 17, R2): ``hf:OWNER/REPO[@REVISION]`` for translation models,
faster-whisper models and Piper voices, through huggingface_hub against a loopback hub serving tiny models
built in the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dragoman.errors import InvalidRequest
from dragoman.models import asr, hf, packs, voices
from dragoman.models.store import read_record
from dragoman.settings import Settings
from dragoman.testing.hfhub import Hub, Repo, card, opus_files, serve_hub
from dragoman.testing.tinypack import build_multilingual_pack
from dragoman.testing.tts import write_standin_voice
from dragoman.testing.whisper import build_tiny_whisper
from dragoman.translation.engine import Engine
from dragoman.translation.types import TranslateOptions

OPUS = "someone/opus-mt-en-es-ct2"
NLLB = "someone/nllb-tiny-ct2"
WHISPER = "someone/faster-whisper-tiny-test"
VOICE = "someone/piper-standin"


def nllb_files(tmp: Path) -> dict[str, bytes]:
    pack = build_multilingual_pack(tmp / "nllb-build", ["eng_Latn", "spa_Latn", "fra_Latn"])
    files = {p.name: p.read_bytes() for p in (pack / "model").iterdir()}
    files["sentencepiece.bpe.model"] = (pack / "sentencepiece.model").read_bytes()
    files["README.md"] = card("cc-by-nc-4.0", "en", "es", "fr")
    return files


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    return Settings.build(packs_dir=tmp_path / "data" / "packs")


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    repos = {OPUS: Repo(opus_files(tmp_path)), NLLB: Repo(nllb_files(tmp_path))}
    with serve_hub(Hub(repos)) as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        yield served


def test_parse_sources() -> None:
    assert hf.parse("hf:a/b") == hf.HubSource("a/b", None)
    assert hf.parse("hf:a/b@v1.0") == hf.HubSource("a/b", "v1.0")
    assert hf.parse("hf:rhasspy/piper-voices/en/en_US/joe/medium@main") == hf.HubSource(
        "rhasspy/piper-voices", "main", "en/en_US/joe/medium"
    )
    for bad in ("hf:", "hf:onlyowner", "hf:a/../b", "hf:a/b@", "hf:a/b/../../x", "hf:a/b@../x", "hf:/a/b"):
        if bad.endswith("@"):
            assert hf.parse(bad).revision is None
            continue
        with pytest.raises(InvalidRequest):
            hf.parse(bad)


def test_opus_mt_pair_installs_translates_and_records_its_source(settings: Settings, hub: Hub) -> None:
    manifest = packs.install(f"hf:{OPUS}", settings)
    assert manifest.kind == "argos"
    assert manifest.pairs == (("eng_Latn", "spa_Latn"),)
    assert manifest.target_sentencepiece == "target.spm"
    assert manifest.license.startswith("cc-by-4.0")
    assert "NON-COMMERCIAL" not in manifest.license
    store = packs.PackStore(settings)
    _, path = store.get(manifest.id)
    record = read_record(path)
    assert record is not None
    assert record.source == f"hf:{OPUS}@{hub.repos[OPUS].commit}"
    assert record.source_kind == "hf"
    assert manifest.version == hub.repos[OPUS].commit[:12]
    store.verify(manifest.id)  # raises on any mismatch with the install record
    with Engine(settings) as engine:
        result = engine.translate("Hello world.", TranslateOptions("es", source="en"))
    assert result.translation.strip()
    assert any(manifest.id in step for step in result.route), result.route


def test_nllb_conversion_is_multilingual_and_flagged_non_commercial(settings: Settings, hub: Hub) -> None:
    manifest = packs.install(f"hf:{NLLB}@main", settings)
    assert manifest.kind == "multilingual"
    assert set(manifest.languages) == {"eng_Latn", "spa_Latn", "fra_Latn"}
    assert manifest.token_style == "flores"
    assert "NON-COMMERCIAL" in manifest.license and "cc-by-nc-4.0" in manifest.license
    with Engine(settings) as engine:
        shown = {p["id"]: p["license"] for p in engine.status()["packs"]}
    assert "NON-COMMERCIAL" in shown[manifest.id]


def test_revision_pinning_by_commit(settings: Settings, hub: Hub) -> None:
    commit = hub.repos[OPUS].commit
    manifest = packs.install(f"hf:{OPUS}@{commit}", settings)
    assert manifest.version == commit[:12]
    assert any(f"/revision/{commit}" in path for _m, path, _r in hub.requests)


def test_asr_and_voice_install_from_the_hub(settings: Settings, tmp_path: Path, hub: Hub) -> None:
    whisper = build_tiny_whisper(tmp_path / "whisper-build")
    hub.repos[WHISPER] = Repo({p.name: p.read_bytes() for p in whisper.iterdir() if p.is_file()})
    hub.repos[WHISPER].files["README.md"] = card("mit")
    model = asr.install(f"hf:{WHISPER}", settings)
    assert model.id == "faster-whisper-tiny-test"
    assert asr.model_dir(settings, model.id).joinpath("LICENSE").read_text().startswith("mit")
    onnx = write_standin_voice(
        tmp_path / "voice-build", "de_DE-standin-x_low", language="de_DE", espeak_voice="de"
    )
    files = {p.name: p.read_bytes() for p in onnx.parent.iterdir()}
    hub.repos[VOICE] = Repo(
        {f"de/{name}": data for name, data in files.items()} | {"README.md": card("cc0-1.0")}
    )
    voice = voices.install(f"hf:{VOICE}/de", settings)
    assert voice.id == "de_DE-standin-x_low"
    assert voice.license.startswith("cc0-1.0 (from the model card of someone/piper-standin")


def test_cli_packs_install_takes_hf_sources(
    settings: Settings, hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dragoman.cli.main import main

    monkeypatch.setenv("DRAGOMAN_PACKS_DIR", str(settings.engine.packs_dir))
    assert main(["packs", "install", f"hf:{OPUS}", "--json"]) == 0
    assert (settings.engine.packs_dir / "hf-someone--opus-mt-en-es-ct2" / "dragoman-pack.json").is_file()


def test_cli_voices_and_asr_install_take_hf_sources(
    settings: Settings,
    tmp_path: Path,
    hub: Hub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from dragoman.cli.main import main

    monkeypatch.setenv("DRAGOMAN_PACKS_DIR", str(settings.engine.packs_dir))
    onnx = write_standin_voice(tmp_path / "voice-build", "en_US-standin-x_low")
    hub.repos[VOICE] = Repo(
        {p.name: p.read_bytes() for p in onnx.parent.iterdir()} | {"README.md": card("mit")}
    )
    assert main(["voices", "install", f"hf:{VOICE}@main", "--json"]) == 0
    assert '"installed": "en_US-standin-x_low"' in capsys.readouterr().out
    whisper = build_tiny_whisper(tmp_path / "whisper-build")
    hub.repos[WHISPER] = Repo({p.name: p.read_bytes() for p in whisper.iterdir() if p.is_file()})
    assert main(["asr", "install", f"hf:{WHISPER}", "--json"]) == 0
    assert asr.model_dir(settings, "faster-whisper-tiny-test").is_dir()
