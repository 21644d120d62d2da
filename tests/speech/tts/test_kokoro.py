"""Kokoro ONNX voices as models (issue 14, "voices as models"): installed from a file, a directory, an archive
and URLs served by a loopback server through the shared model store; wrong files refused with typed errors
and nothing left behind; the engine phonemises with the espeak-ng program, maps IPA to Kokoro's tokens, picks
the style row by token count, and takes over the personas of its languages. The model is the stand-in of
:mod:`dragoman.testing.kokoro` (Kokoro's signature; a tone whose length and amplitude tell what it was
fed)."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dragoman.cli import main
from dragoman.errors import InvalidRequest, PackInstallError, PackIntegrityError, VoiceNotInstalled
from dragoman.models import kokoro as store_mod
from dragoman.models.store import read_record
from dragoman.settings import Settings
from dragoman.speech.tts.engines import espeak
from dragoman.speech.tts.engines import kokoro as engine_mod
from dragoman.speech.tts.engines.base import Prosody
from dragoman.speech.tts.synth import Synthesizer
from dragoman.speech.tts.types import SynthesisOptions
from dragoman.speech.tts.voices import resolve_voice
from dragoman.testing import kokoro as standin
from dragoman.testing.tts import standin_model_bytes as piper_model_bytes

MODEL_ID = "kokoro-standin-v1.0"
needs_espeak = pytest.mark.skipif(not espeak.available(), reason="espeak-ng is not installed (make setup)")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.build(packs_dir=tmp_path / "data" / "packs")


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return standin.write_standin_kokoro(tmp_path / "src", MODEL_ID)


def _store(settings: Settings) -> store_mod.KokoroStore:
    return store_mod.KokoroStore(settings)


def _nothing_installed(settings: Settings) -> None:
    store = _store(settings)
    assert store.ids() == [] and store.broken() == []
    if store.root.exists():
        assert [p.name for p in store.root.iterdir() if not p.name.startswith(".")] == []


# ----- installing --------------------------------------------------------------------------------------
def test_install_from_a_onnx_file_records_every_files_sha256(settings: Settings, model: Path) -> None:
    manifest = store_mod.install(str(model), settings)
    assert (manifest.id, manifest.version, manifest.sample_rate) == (MODEL_ID, "1.0", 24000)
    assert manifest.languages == ("en", "es", "fr") and set(manifest.voices) == set(standin.VOICES)
    assert manifest.style_rows == standin.ROWS
    store = _store(settings)
    assert store.ids() == [MODEL_ID] and store.root == settings.engine.packs_dir.parent / "kokoro"
    record = read_record(store.root / MODEL_ID)
    assert record is not None and record.kind == "kokoro"
    files = dict(record.files)
    for name in (model.name, "voices-v1.0.bin", "config.json"):
        assert files[name] == hashlib.sha256((model.parent / name).read_bytes()).hexdigest()
    assert store.verify(MODEL_ID).files_checked == 3
    with pytest.raises(PackInstallError, match="already installed"):
        store_mod.install(str(model), settings)
    assert store_mod.install(str(model), settings, replace=True) == manifest
    right = hashlib.sha256(model.read_bytes()).hexdigest()
    assert store_mod.install(str(model), settings, sha256=right, replace=True) == manifest


def test_install_from_a_directory_and_an_archive(settings: Settings, model: Path, tmp_path: Path) -> None:
    assert store_mod.install(model.parent, settings).id == MODEL_ID
    store_mod.remove(MODEL_ID, settings)
    _nothing_installed(settings)
    archive = tmp_path / "kokoro.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(model.parent, arcname="kokoro-model")
    assert store_mod.install(archive, settings).id == MODEL_ID


def test_install_with_files_named_elsewhere(settings: Settings, model: Path, tmp_path: Path) -> None:
    lone = tmp_path / "lone"
    lone.mkdir()
    onnx = lone / "kokoro-v1.0.int8.onnx"
    onnx.write_bytes(model.read_bytes())
    with pytest.raises(InvalidRequest, match="voices= and vocab="):
        store_mod.install(str(onnx), settings)
    manifest = store_mod.install(
        str(onnx), settings, voices=model.parent / "voices-v1.0.bin", vocab=model.parent / "config.json"
    )
    assert (manifest.id, manifest.version) == ("kokoro-v1.0.int8", "1.0")
    with pytest.raises(InvalidRequest, match="go with a .onnx source"):
        store_mod.install(model.parent, settings, vocab=model.parent / "config.json")


@pytest.fixture
def served(model: Path, tmp_path: Path) -> Iterator[str]:
    """A loopback server of the stand-in's folder (and an archive of it); answers its base URL."""
    folder = model.parent
    with tarfile.open(folder / "kokoro.tgz", "w:gz") as tar:
        for name in (model.name, "voices-v1.0.bin", "config.json"):
            tar.add(folder / name, arcname=f"kk/{name}")

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(folder), **kwargs)  # type: ignore[arg-type]

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_install_from_urls(settings: Settings, served: str, model: Path) -> None:
    url = f"{served}/{model.name}"
    with pytest.raises(InvalidRequest, match="needs voices="):
        store_mod.install(url, settings)
    with pytest.raises(PackIntegrityError, match="sha256"):
        store_mod.install(
            url,
            settings,
            voices=f"{served}/voices-v1.0.bin",
            vocab=f"{served}/config.json",
            sha256="0" * 64,
        )
    _nothing_installed(settings)
    with pytest.raises(PackInstallError, match="HTTP 404"):
        store_mod.install(url, settings, voices=f"{served}/nothing.bin", vocab=f"{served}/config.json")
    _nothing_installed(settings)
    manifest = store_mod.install(
        url, settings, voices=f"{served}/voices-v1.0.bin", vocab=f"{served}/config.json"
    )
    assert manifest.id == MODEL_ID and _store(settings).ids() == [MODEL_ID]
    record = read_record(_store(settings).root / MODEL_ID)
    assert record is not None
    assert dict(record.files)[model.name] == hashlib.sha256(model.read_bytes()).hexdigest()
    store_mod.remove(MODEL_ID, settings)
    assert store_mod.install(f"{served}/kokoro.tgz", settings).id == MODEL_ID


# ----- wrong files -------------------------------------------------------------------------------------
def _npz(arrays: dict[str, np.ndarray]) -> bytes:
    out = io.BytesIO()
    np.savez(out, **arrays)  # type: ignore[arg-type]
    return out.getvalue()


def _wrong(model: Path, what: str) -> None:
    folder = model.parent
    voices = folder / "voices-v1.0.bin"
    config = folder / "config.json"
    good = np.zeros((510, 1, 256), dtype=np.float32)
    if what == "piper signature":
        model.write_bytes(piper_model_bytes())
    elif what == "token input renamed":
        model.write_bytes(standin.standin_model_bytes(token_input="ids"))
    elif what == "style of 128":
        model.write_bytes(standin.standin_model_bytes(style_dim=128))
    elif what == "truncated onnx":
        model.write_bytes(model.read_bytes()[: len(model.read_bytes()) // 2])
    elif what == "not onnx":
        model.write_bytes(b"<html>not found</html>")
    elif what == "voices of shape [510, 256]":
        voices.write_bytes(_npz({"af_x": np.zeros((510, 256), dtype=np.float32)}))
    elif what == "voices of style 128":
        voices.write_bytes(_npz({"af_x": np.zeros((510, 1, 128), dtype=np.float32)}))
    elif what == "voices in float64":
        voices.write_bytes(_npz({"af_x": good.astype(np.float64)}))
    elif what == "voices of unequal rows":
        voices.write_bytes(_npz({"af_x": good, "am_y": good[:100]}))
    elif what == "voices of unknown languages":
        voices.write_bytes(_npz({"qf_x": good}))
    elif what == "voices truncated":
        voices.write_bytes(voices.read_bytes()[:-5000])
    elif what == "voices not a zip":
        voices.write_bytes(good.tobytes())
    elif what == "voices pickled":
        voices.write_bytes(_npz({"af_x": np.array([{"a": 1}], dtype=object)}))
    elif what == "vocab missing":
        config.unlink()
    elif what == "vocab without vocab":
        config.write_text(json.dumps({"n_token": 178}))
    elif what == "vocab of words":
        config.write_text(json.dumps({"vocab": {"ab": 1}}))
    elif what == "vocab not json":
        config.write_text("{")
    else:  # pragma: no cover
        raise AssertionError(what)


WRONG = [
    "piper signature",
    "token input renamed",
    "style of 128",
    "truncated onnx",
    "not onnx",
    "voices of shape [510, 256]",
    "voices of style 128",
    "voices in float64",
    "voices of unequal rows",
    "voices of unknown languages",
    "voices truncated",
    "voices not a zip",
    "voices pickled",
    "vocab missing",
    "vocab without vocab",
    "vocab of words",
    "vocab not json",
]


@pytest.mark.parametrize("what", WRONG)
def test_wrong_files_are_refused_and_nothing_is_installed(settings: Settings, model: Path, what: str) -> None:
    _wrong(model, what)
    with pytest.raises(PackIntegrityError):
        store_mod.install(model.parent, settings)
    _nothing_installed(settings)
    if what == "vocab missing":
        with pytest.raises(InvalidRequest, match="vocab="):
            store_mod.install(str(model), settings)
    else:
        with pytest.raises(PackIntegrityError):
            store_mod.install(str(model), settings)
    _nothing_installed(settings)


def test_size_limits(settings: Settings, model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_mod, "MAX_VOCAB_BYTES", 100)
    with pytest.raises(PackIntegrityError, match="limit"):
        store_mod.install(str(model), settings)
    with pytest.raises(PackIntegrityError, match="larger than"):
        store_mod.install(model.parent, settings)
    monkeypatch.undo()
    monkeypatch.setattr(store_mod, "MAX_VOICES_BYTES", 1000)
    with pytest.raises(PackIntegrityError, match="limit"):
        store_mod.install(str(model), settings)
    monkeypatch.undo()
    monkeypatch.setattr(store_mod, "MAX_KOKORO_BYTES", 1000)
    with pytest.raises(PackIntegrityError):
        store_mod.install(model.parent, settings)
    _nothing_installed(settings)


# ----- phonemes and tokens -----------------------------------------------------------------------------
def test_espeak_ipa_becomes_kokoros_phonemes() -> None:
    assert engine_mod.to_kokoro_phonemes("sɛ lə- (^e^n)wiːkˈɛnd(^f^r)", "fr-fr") == "sɛ lə wiːkˈɛnd"
    assert engine_mod.to_kokoro_phonemes("ma^ɪ t^ʃˈa^ɪld", "es") == "mI ʧˈIld"
    assert engine_mod.to_kokoro_phonemes("həlˈo^ʊ wˈɜːld", "en-us") == "həlˈO wˈɜɹld"
    assert engine_mod.to_kokoro_phonemes("d^ʒˈɔ^ɪ", "en-gb") == "ʤˈY"


def test_tokens_drop_unknown_symbols_and_runs_hold_at_most_510() -> None:
    vocab = standin.vocab()
    assert engine_mod.tokenize("a€b", vocab) == [vocab["a"], vocab["b"]]
    assert engine_mod.tokenize("ã", vocab) == [vocab["a"], vocab["\u0303"]]  # NFD: the nasal kept
    clause = "ab " * 100  # 300 tokens
    runs = engine_mod.chunk_tokens([clause.strip() + ",", clause.strip() + "."], vocab)
    assert [len(r) for r in runs] == [300, 300]  # two clauses of 300 do not fit one run: cut between them
    short = engine_mod.chunk_tokens(["ab,", "ab."], vocab)
    assert short == [[vocab["a"], vocab["b"], vocab[","], vocab[" "], vocab["a"], vocab["b"], vocab["."]]]
    long = engine_mod.chunk_tokens([("abc " * 300).strip()], vocab)  # one clause of 1199 tokens
    assert all(len(r) <= 510 for r in long) and len(long) == 3
    assert all(r[0] == vocab["a"] and r[-1] == vocab["c"] for r in long)  # cut between words
    word = engine_mod.chunk_tokens(["a" * 1200], vocab)
    assert [len(r) for r in word] == [510, 510, 180]


# ----- the engine --------------------------------------------------------------------------------------
@pytest.fixture
def installed(settings: Settings, model: Path) -> Settings:
    store_mod.install(str(model), settings)
    return settings


@pytest.fixture
def engine(installed: Settings) -> engine_mod.KokoroEngine:
    return engine_mod.KokoroEngine(installed, espeak.EspeakEngine())


def _peak(samples: np.ndarray) -> float:
    return float(np.abs(samples).max())


@needs_espeak
def test_engine_lists_voices_and_picks_the_style_row_by_token_count(engine: engine_mod.KokoroEngine) -> None:
    voices = {v.id: v for v in engine.voices()}
    af = voices[f"{MODEL_ID}/af_standin"]
    assert (af.engine, af.language, af.locale, af.gender, af.rate) == (
        "kokoro",
        "en",
        "en-US",
        "female",
        24000,
    )
    assert af.quality > 93  # above every Piper voice
    assert (
        voices[f"{MODEL_ID}/em_standin"].gender == "male"
        and voices[f"{MODEL_ID}/ff_standin"].language == "fr"
    )
    for text in ("Hello.", "Hello world, this is a somewhat longer sentence to speak."):
        clauses = engine.phonemes(text, "en-us")
        (tokens,) = engine_mod.chunk_tokens(clauses, standin.vocab())
        out = engine.synthesize(text, af.id)
        assert out.words is None  # aligned by the voices layer, as for Piper
        assert out.audio.rate == 24000 and out.audio.samples.dtype == np.float32
        assert len(out.audio.samples) == standin.expected_samples(len(tokens) + 2, 1.0)
        assert standin.row_of(_peak(out.audio.samples)) == len(tokens)


@needs_espeak
def test_engine_prosody(engine: engine_mod.KokoroEngine) -> None:
    voice = f"{MODEL_ID}/af_standin"
    text = "The quick brown fox jumps over the lazy dog."
    plain = engine.synthesize(text, voice).audio
    fast = engine.synthesize(text, voice, Prosody(rate=2.0)).audio
    assert abs(len(fast.samples) / len(plain.samples) - 0.5) < 0.01  # Kokoro's own speed input
    faster = engine.synthesize(text, voice, Prosody(rate=4.0)).audio  # speed 2, then time stretch
    assert abs(len(faster.samples) / len(plain.samples) - 0.25) < 0.03
    louder = engine.synthesize(text, voice, Prosody(volume=2.0)).audio
    assert abs(_peak(louder.samples) / _peak(plain.samples) - 2.0) < 0.05
    higher = engine.synthesize(text, voice, Prosody(pitch_st=12)).audio
    assert abs(len(higher.samples) - len(plain.samples)) < 0.02 * len(plain.samples)
    assert engine.synthesize("   ", voice).audio.duration == 0
    with pytest.raises(VoiceNotInstalled):
        engine.synthesize(text, f"{MODEL_ID}/af_nobody")
    with pytest.raises(VoiceNotInstalled):
        engine.synthesize(text, "kokoro-other/af_standin")


@needs_espeak
def test_newer_exports_with_input_ids_and_an_integer_speed(settings: Settings, model: Path) -> None:
    """Kokoro exports after v1.0 name the tokens ``input_ids`` and take ``speed`` as int32: speed 1 is fed and
    the rate reached by time stretch."""
    model.write_bytes(standin.standin_model_bytes(token_input="input_ids", int_speed=True))
    store_mod.install(str(model), settings)
    engine = engine_mod.KokoroEngine(settings, espeak.EspeakEngine())
    voice = f"{MODEL_ID}/af_standin"
    text = "The quick brown fox jumps over the lazy dog."
    (tokens,) = engine_mod.chunk_tokens(engine.phonemes(text, "en-us"), standin.vocab())
    plain = engine.synthesize(text, voice).audio
    assert len(plain.samples) == standin.expected_samples(len(tokens) + 2, 1.0)
    assert standin.row_of(_peak(plain.samples)) == len(tokens)
    fast = engine.synthesize(text, voice, Prosody(rate=2.0)).audio
    assert abs(len(fast.samples) / len(plain.samples) - 0.5) < 0.03


@needs_espeak
def test_a_long_text_runs_in_chunks_of_at_most_510_tokens(engine: engine_mod.KokoroEngine) -> None:
    sentence = "This sentence is one of many that make a text far longer than one run of Kokoro. "
    text = sentence * 30
    runs = engine_mod.chunk_tokens(engine.phonemes(text, "en-us"), standin.vocab())
    assert len(runs) > 3 and all(len(r) <= 510 for r in runs)
    out = engine.synthesize(text, f"{MODEL_ID}/af_standin").audio
    pauses = (len(runs) - 1) * round(engine_mod.CHUNK_PAUSE_S * 24000)
    assert len(out.samples) == sum(standin.expected_samples(len(r) + 2, 1.0) for r in runs) + pauses


@needs_espeak
def test_the_session_is_loaded_once_per_model(
    engine: engine_mod.KokoroEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[Path] = []
    real = store_mod.open_session

    def counting(path: Path, **kw: int) -> object:
        opened.append(path)
        return real(path, **kw)

    monkeypatch.setattr(engine_mod, "open_session", counting)
    threads = [
        threading.Thread(target=engine.synthesize, args=("Hello there.", f"{MODEL_ID}/{name}"))
        for name in ("af_standin", "am_standin", "bf_standin", "af_standin")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    engine.synthesize("Hola.", f"{MODEL_ID}/em_standin")
    assert len(opened) == 1


@needs_espeak
def test_a_model_installed_later_takes_over_without_a_restart(settings: Settings, model: Path) -> None:
    engine = engine_mod.KokoroEngine(settings, espeak.EspeakEngine())
    espeak_engine = espeak.EspeakEngine()
    assert engine.voices() == []
    before = resolve_voice("aria", "fr", [engine, espeak_engine], studio=True)
    assert before.voice.engine == "espeak"
    store_mod.install(str(model), settings)
    after = resolve_voice("aria", "fr", [engine, espeak_engine], studio=True)
    assert (after.voice.engine, after.voice.id) == ("kokoro", f"{MODEL_ID}/ff_standin")
    store_mod.remove(MODEL_ID, settings)
    assert engine.voices() == []


# ----- through the personas ----------------------------------------------------------------------------
@needs_espeak
def test_personas_render_with_kokoro(engine: engine_mod.KokoroEngine) -> None:
    synth = Synthesizer(engines=[engine, engine.espeak])
    text = "Hello there. How are you today?"
    result = synth.synthesize(text, SynthesisOptions("aria", "en", studio=True))
    assert (result.engine, result.engine_voice) == ("kokoro", f"{MODEL_ID}/af_standin")
    assert result.audio.rate == 48000 and result.audio.duration > 0.5
    assert result.words is not None and [w.word for w in result.words] == text.split()
    male = synth.synthesize("Hola, buenos días.", SynthesisOptions("marcus", "es", studio=True))
    assert (male.engine, male.engine_voice) == ("kokoro", f"{MODEL_ID}/em_standin")
    # a standard render keeps a faster engine of the persona's gender (Kokoro is slow, like Piper)
    assert synth.synthesize(text, SynthesisOptions("aria", "en")).engine == "espeak"
    voices: list[dict[str, Any]] = synth.catalogue()["voices"]  # type: ignore[assignment]
    aria = next(v for v in voices if v["name"] == "aria")
    assert aria["languages"]["fr"]["studio"]["engine"] == "kokoro"


# ----- the CLI -----------------------------------------------------------------------------------------
def test_cli_install_list_remove(
    tmp_path: Path, model: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DRAGOMAN_PACKS_DIR", str(tmp_path / "cli" / "packs"))
    assert main(["voices", "kokoro", "install", str(model), "--json"]) == 0
    installed = json.loads(capsys.readouterr().out)
    assert installed["installed"] == MODEL_ID and installed["languages"] == ["en", "es", "fr"]
    assert main(["voices", "kokoro", "list", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    (entry,) = listing["models"]
    assert entry["id"] == MODEL_ID and entry["voices"] == len(standin.VOICES) and listing["broken"] == []
    assert main(["voices", "kokoro", "list"]) == 0
    assert MODEL_ID in capsys.readouterr().out
    assert main(["voices", "kokoro", "install", str(model)]) != 0  # already installed
    assert "already installed" in capsys.readouterr().err
    assert main(["voices", "kokoro", "remove", MODEL_ID]) == 0
    capsys.readouterr()
    assert main(["voices", "kokoro", "list"]) == 0
    assert "no Kokoro models installed" in capsys.readouterr().out
