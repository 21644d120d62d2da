"""Hostile Kokoro models and texts (issue 14, voices as models): voices files that expand past the limit, hold
too many arrays or names that climb out of their folder, a server sending more than the limit; text that looks
like options or markup; and the tokenising and chunking stay linear in the text."""

from __future__ import annotations

import http.server
import io
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from growth import assert_linear

from dragoman.errors import PackIntegrityError
from dragoman.models import kokoro as store_mod
from dragoman.settings import Settings
from dragoman.speech.tts.engines import espeak
from dragoman.speech.tts.engines import kokoro as engine_mod
from dragoman.testing import kokoro as standin

MODEL_ID = "kokoro-standin-v1.0"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.build(packs_dir=tmp_path / "data" / "packs")


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return standin.write_standin_kokoro(tmp_path / "src", MODEL_ID)


def _npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array(out, array, allow_pickle=False)
    return out.getvalue()


def _refused(settings: Settings, model: Path, match: str) -> None:
    with pytest.raises(PackIntegrityError, match=match):
        store_mod.install(model.parent, settings)
    assert store_mod.KokoroStore(settings).ids() == []


def test_a_voices_file_expanding_past_the_limit_is_refused_unread(
    settings: Settings, model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deflated zeros: 24 voices of 4,096 rows are 96 MiB expanded and a few hundred KiB on disk."""
    monkeypatch.setattr(store_mod, "MAX_VOICES_BYTES", 64 * 1024**2)
    row = _npy(np.zeros((4096, 1, 256), dtype=np.float32))
    with zipfile.ZipFile(model.parent / "voices-v1.0.bin", "w", zipfile.ZIP_DEFLATED) as archive:
        for i in range(24):
            archive.writestr(f"af_v{i}.npy", row)
    assert (model.parent / "voices-v1.0.bin").stat().st_size < 2 * 1024**2
    begun = time.monotonic()
    _refused(settings, model, "expands to")
    assert time.monotonic() - begun < 30  # refused from the zip directory, nothing inflated (generous bound)


def test_too_many_voices_and_names_out_of_the_folder_are_refused(settings: Settings, model: Path) -> None:
    small = _npy(np.zeros((4, 1, 256), dtype=np.float32))
    voices = model.parent / "voices-v1.0.bin"
    with zipfile.ZipFile(voices, "w") as archive:
        for i in range(store_mod.MAX_VOICES + 1):
            archive.writestr(f"af_v{i}.npy", small)
    _refused(settings, model, "at most")
    for name in ("../af_x.npy", "af_x/../../y.npy", "/etc/af_x.npy", "af_x.pkl", "af_x.npy.npy"):
        with zipfile.ZipFile(voices, "w") as archive:
            archive.writestr("af_good.npy", small)
            archive.writestr(name, small)
        _refused(settings, model, "not a Kokoro voice")


@pytest.fixture
def big_vocab_server(model: Path) -> Iterator[str]:
    """A loopback server whose config.json is 64 KiB of JSON (and says so)."""
    body = b'{"vocab": {"a": 1}, "pad": "' + b"x" * 65536 + b'"}'

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/config.json"
    finally:
        server.shutdown()
        server.server_close()


def test_a_download_over_its_limit_is_refused(
    settings: Settings, model: Path, big_vocab_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_mod, "MAX_VOCAB_BYTES", 4096)
    with pytest.raises(PackIntegrityError, match="over 4096 bytes"):
        store_mod.install(str(model), settings, vocab=big_vocab_server)
    assert store_mod.KokoroStore(settings).ids() == []


@pytest.mark.skipif(not espeak.available(), reason="espeak-ng is not installed (make setup)")
@pytest.mark.parametrize(
    "text", ["--help", "-v fr-fr --voices", '<speak><prosody rate="x-slow">hello</prosody></speak>', "-"]
)
def test_text_that_looks_like_options_or_markup_is_spoken_as_text(
    settings: Settings, model: Path, text: str
) -> None:
    store_mod.install(str(model), settings)
    engine = engine_mod.KokoroEngine(settings, espeak.EspeakEngine())
    clauses = engine.phonemes(text, "en-us")
    out = engine.synthesize(text, f"{MODEL_ID}/af_standin").audio
    runs = engine_mod.chunk_tokens(clauses, standin.vocab())
    pauses = max(0, len(runs) - 1) * round(engine_mod.CHUNK_PAUSE_S * 24000)
    # what was rendered is exactly the text's phonemes (an option taken would change the voice or print help)
    assert len(out.samples) == sum(standin.expected_samples(len(r) + 2, 1.0) for r in runs) + pauses
    if text != "-":
        assert len(out.samples) > 0


def test_tokens_and_chunks_grow_linearly() -> None:
    vocab = standin.vocab()
    assert_linear(
        lambda text: engine_mod.chunk_tokens(text.split("|"), vocab),
        {
            "clauses": lambda n: ("ab cd,|" * n)[:n],
            "one long clause": lambda n: ("abcd " * n)[:n],
            "one long word": lambda n: "a" * n,
        },
        20_000,
    )
    assert_linear(
        lambda text: engine_mod.to_kokoro_phonemes(text, "fr-fr"),
        {"flags and ties": lambda n: ("(^e^n)a^ɪ t^ʃ- " * n)[:n]},
        20_000,
    )
