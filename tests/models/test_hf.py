"""Installs from the Hugging Face Hub (issue 17, R2): ``hf:OWNER/REPO[@REVISION]`` for translation models,
faster-whisper models and Piper voices, through huggingface_hub against a loopback hub serving tiny models
built in the test."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    record = read_record(voices.VoiceStore(settings).get(voice.id)[1])  # the folder is part of the source
    assert record is not None and record.source == f"hf:{VOICE}/de@{hub.repos[VOICE].commit}"


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


# ----- licences of speech models (issue 17: shown wherever the models are listed) ---------------------------
NC_WHISPER = "cc-by-nc-4.0 (NON-COMMERCIAL use only; from the model card of someone/faster-whisper-tiny-test)"
NC_VOICE = "cc-by-nc-sa-4.0 (NON-COMMERCIAL use only; from the model card of someone/piper-standin)"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _hub_speech_models(hub: Hub, tmp_path: Path, settings: Settings) -> tuple[str, str]:
    """A faster-whisper model whose card says cc-by-nc-4.0 and a Piper voice whose card says cc-by-nc-sa-4.0,
    installed from the loopback hub; their ids."""
    whisper = build_tiny_whisper(tmp_path / "whisper-build")
    files = {p.name: p.read_bytes() for p in whisper.iterdir() if p.is_file()}
    hub.repos[WHISPER] = Repo(files | {"README.md": card("cc-by-nc-4.0")})
    onnx = write_standin_voice(tmp_path / "voice-build", "en_US-standin-x_low")
    files = {p.name: p.read_bytes() for p in onnx.parent.iterdir()}
    hub.repos[VOICE] = Repo(files | {"README.md": card("cc-by-nc-sa-4.0")})
    return asr.install(f"hf:{WHISPER}", settings).id, voices.install(f"hf:{VOICE}", settings).id


def _piper_only(settings: Settings) -> list[Any]:
    """The Piper engine over the test's voice store, without the embedded voice (a 63 MB copy)."""
    from dragoman.speech.tts.engines.espeak import EspeakEngine
    from dragoman.speech.tts.engines.piper import PiperEngine

    return [PiperEngine(settings, EspeakEngine(), install_embedded=False)]


def test_hub_licences_of_an_asr_model_and_a_voice_are_in_the_store_engine_status_and_catalogue(
    settings: Settings, tmp_path: Path, hub: Hub
) -> None:
    from dragoman.speech.tts.synth import Synthesizer
    from dragoman.status import engine_status

    model_id, voice_id = _hub_speech_models(hub, tmp_path, settings)
    [model] = asr.list_installed(settings)
    assert (model.id, model.license) == (model_id, NC_WHISPER)
    [voice] = voices.VoiceStore(settings).infos()
    assert (voice.id, voice.license) == (voice_id, NC_VOICE)
    with Engine(settings) as engine:
        status = engine_status(engine)
    assert status["asr"]["installed"] == [model_id]
    assert status["asr"]["models"] == [
        {
            "id": model_id,
            "version": hub.repos[WHISPER].commit[:12],
            "languages": model.languages,
            "license": NC_WHISPER,
        }
    ]
    catalogue = Synthesizer(settings, engines=_piper_only(settings)).catalogue()
    assert catalogue["models"] == [
        {
            "engine": "piper",
            "engine_voice": voice_id,
            "language": "en",
            "locale": "en-US",
            "license": NC_VOICE,
        }
    ]


def test_cli_lists_show_the_licences(
    settings: Settings,
    tmp_path: Path,
    hub: Hub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from dragoman.cli.main import main
    from dragoman.speech.tts.engines import registry

    monkeypatch.setenv("DRAGOMAN_PACKS_DIR", str(settings.engine.packs_dir))
    monkeypatch.setattr(registry, "installed_engines", _piper_only)
    model_id, voice_id = _hub_speech_models(hub, tmp_path, settings)
    assert main(["asr", "list", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert (row["id"], row["license"]) == (model_id, NC_WHISPER)
    assert main(["asr", "list"]) == 0
    assert f"licence: {NC_WHISPER}" in capsys.readouterr().out
    assert main(["voices", "list", "--json"]) == 0
    models = json.loads(capsys.readouterr().out)["models"]
    assert [(m["engine_voice"], m["license"]) for m in models] == [(voice_id, NC_VOICE)]
    assert main(["voices", "list"]) == 0
    assert f"piper:{voice_id}  {NC_VOICE}" in capsys.readouterr().out


@pytest.mark.anyio
async def test_mcp_engine_status_and_list_voices_show_the_licences(
    settings: Settings, tmp_path: Path, hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_support import in_process, structured

    from dragoman.speech.tts.engines import registry

    monkeypatch.setattr(registry, "installed_engines", _piper_only)
    model_id, voice_id = _hub_speech_models(hub, tmp_path, settings)
    env = dict(os.environ, DRAGOMAN_PACKS_DIR=str(settings.engine.packs_dir), DRAGOMAN_APERTIUM="0")
    async with in_process(env) as client:
        status_result = await client.call_tool("engine_status", {})
        voices_result = await client.call_tool("list_voices", {})
    status, listed = structured(status_result), structured(voices_result)
    assert [(m["id"], m["license"]) for m in status["asr"]["models"]] == [(model_id, NC_WHISPER)]
    assert f"{model_id} ({NC_WHISPER})" in status_result.content[0].text  # type: ignore[union-attr]
    assert [(m["engine_voice"], m["license"]) for m in listed["models"]] == [(voice_id, NC_VOICE)]
    assert f"{voice_id} ({NC_VOICE})" in voices_result.content[0].text  # type: ignore[union-attr]


def test_models_without_a_licence_file_show_it_unknown(settings: Settings, tmp_path: Path) -> None:
    """Installed from folders with no LICENSE (as models installed before licences were shown may be)."""
    from dragoman.status import engine_status

    asr.install(build_tiny_whisper(tmp_path / "whisper"), settings)
    voices.install(write_standin_voice(tmp_path / "voice", "en_US-plain-x_low").parent, settings)
    assert [i.license for i in asr.list_installed(settings)] == ["unknown (the model states none)"]
    assert [i.license for i in voices.VoiceStore(settings).infos()] == ["unknown (the voice states none)"]
    with Engine(settings) as engine:
        assert engine_status(engine)["asr"]["models"][0]["license"] == "unknown (the model states none)"
