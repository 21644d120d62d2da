"""Kokoro ONNX voices run with onnxruntime directly; phonemes from the ``espeak-ng`` program (issue 14).

A Kokoro model (:mod:`dragoman.models.kokoro`, kind ``kokoro``) holds one ``.onnx``, a voices ``.npz`` and the
vocabulary. Each voice of each installed model is an engine voice ``MODEL/VOICE`` (``kokoro-v1.0/af_heart``),
its language from the voice name's first letter (``a`` en-US, ``b`` en-GB, ``e`` es, ``f`` fr, ``h`` hi,
``i`` it, ``j`` ja, ``p`` pt-BR, ``z`` zh), its gender from the second (``f``/``m``).

Rendering follows Kokoro's own pipeline for espeak-ng phonemes (misaki's ``EspeakG2P`` and, for English, its
``EspeakFallback``), with the espeak-ng *program*, never libespeak-ng (GPL-3 stays out of our process):
``espeak-ng -q --ipa --tie=^ -v VOICE`` gives IPA one clause a line; language-switch flags (``(en)``) are
dropped, the clause's punctuation is put back, tied multi-letter phonemes become Kokoro's single symbols
(``a^ɪ`` → ``I``, ``t^ʃ`` → ``ʧ``, …), the rest of the ties and hyphens go; the phonemes (NFD code points)
become token ids through the vocabulary, unknown symbols dropped. Runs hold at most
:data:`~dragoman.models.kokoro.MAX_TOKENS` tokens (510), cut at clause boundaries, a longer clause at word
boundaries; each run is ``[0, *tokens, 0]`` with the voice's style row for its token count
(``style[min(n, rows − 1)]``, as kokoro-onnx picks it) and the speed. The session and the voices of a model
are loaded once per process (again only when the model is reinstalled); the voice list is read again when the
store changes, so a model installed meanwhile takes over without a restart.

Prosody: rate is Kokoro's ``speed`` within 0.5–2 (beyond, or for exports with an integer ``speed``, the rest
by time stretch); pitch is shifted after synthesis; volume scales the samples. Word timings: None — the voices
layer aligns the render against the known text, as for Piper. A run past its timeout is stopped through
onnxruntime's ``RunOptions.terminate``.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from threading import Timer
from typing import Any

import numpy as np

from dragoman.errors import EngineTimeout, PackIntegrityError, SpeechEngineError, VoiceNotInstalled
from dragoman.media.audio import Audio, pitch_shift, time_stretch
from dragoman.models.kokoro import (
    KOKORO,
    MAX_TOKENS,
    SAMPLE_RATE,
    STYLE_DIM,
    KokoroManifest,
    KokoroStore,
    Signature,
    open_session,
    read_kokoro,
    read_vocab,
    signature,
    voice_gender,
    voice_language,
)
from dragoman.models.store import install_identity
from dragoman.settings import Settings
from dragoman.speech.tts.engines.base import (
    NEUTRAL,
    EngineOutput,
    EngineVoice,
    Gender,
    Prosody,
    apply_volume,
    clean_text,
    run_program,
    timeout_for,
)
from dragoman.speech.tts.engines.espeak import EspeakEngine
from dragoman.speech.tts.engines.piper import with_punctuation

log = logging.getLogger("dragoman.speech.tts.kokoro")

#: Kokoro's rank: above Piper's voices (90, "high" 93); the voices' own grades move it a little.
QUALITY_KOKORO = 95
#: The overall grades of Kokoro-82M's VOICES.md, as a bonus on the rank (A +4 … F −3; unlisted 0), so a
#: persona takes a language's best-graded voice of its gender.
GRADE_BONUS: dict[str, int] = {
    "af_heart": 4,
    "af_bella": 3,
    "af_nicole": 2,
    "af_aoede": 1,
    "af_kore": 1,
    "af_sarah": 1,
    "af_sky": -1,
    "af_jessica": -2,
    "af_river": -2,
    "am_fenrir": 1,
    "am_michael": 1,
    "am_puck": 1,
    "am_echo": -2,
    "am_eric": -2,
    "am_liam": -2,
    "am_onyx": -2,
    "am_santa": -2,
    "am_adam": -3,
    "bf_emma": 2,
    "bf_alice": -2,
    "bf_lily": -2,
    "bm_daniel": -2,
    "bm_lewis": -2,
    "ff_siwis": 2,
    "em_santa": -2,
    "pm_santa": -2,
}
SPEED_MIN, SPEED_MAX = 0.5, 2.0
CHUNK_PAUSE_S = 0.1
#: Leading and trailing silence (below this level under the peak) is trimmed from each run, keeping a margin.
TRIM_DB = 50.0
TRIM_MARGIN_S = 0.02
_FLAGS = re.compile(r"\([^()\s]{1,20}\)")
#: misaki's EspeakG2P: tied espeak-ng phonemes → Kokoro's single symbols (all languages).
_E2M_COMMON = {
    "a^ɪ": "I",
    "a^ʊ": "W",
    "d^z": "ʣ",
    "d^ʒ": "ʤ",
    "e^ɪ": "A",
    "o^ʊ": "O",
    "ə^ʊ": "Q",
    "s^s": "S",
    "t^s": "ʦ",
    "t^ʃ": "ʧ",
    "ɔ^ɪ": "Y",
}
#: misaki's EspeakFallback for English (longest first).
_E2M_ENGLISH = sorted(
    {
        "ʔˌn\u0329": "ʔn",
        "ʔn\u0329": "ʔn",
        "a^ɪ": "I",
        "a^ʊ": "W",
        "d^ʒ": "ʤ",
        "e^ɪ": "A",
        "e": "A",
        "t^ʃ": "ʧ",
        "ɔ^ɪ": "Y",
        "ə^l": "ᵊl",
        "ʲo": "jo",
        "ʲə": "jə",
        "ʲ": "",
        "ɚ": "əɹ",
        "r": "ɹ",
        "x": "k",
        "ç": "k",
        "ɐ": "ə",
        "ɬ": "l",
        "\u0303": "",
    }.items(),
    key=lambda kv: -len(kv[0]),
)


def available() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def to_kokoro_phonemes(ipa: str, espeak_voice: str) -> str:
    """espeak-ng's IPA (``--tie=^``) of one clause as Kokoro's phonemes (misaki's mappings)."""
    ps = _FLAGS.sub("", ipa).strip()
    if espeak_voice in ("en-us", "en-gb"):
        for old, new in _E2M_ENGLISH:
            ps = ps.replace(old, new)
        ps = re.sub(r"(\S)\u0329", r"ᵊ\1", ps).replace("\u0329", "")
        if espeak_voice == "en-gb":
            ps = ps.replace("e^ə", "ɛː").replace("iə", "ɪə").replace("ə^ʊ", "Q")
        else:
            ps = ps.replace("o^ʊ", "O").replace("ɜːɹ", "ɜɹ").replace("ɜː", "ɜɹ").replace("ɪə", "iə")
            ps = ps.replace("ː", "")
        ps = ps.replace("o", "ɔ").replace("ɾ", "T").replace("ʔ", "t")
    else:
        for old, new in _E2M_COMMON.items():
            ps = ps.replace(old, new)
        ps = ps.replace("-", "")
    return ps.replace("^", "")


def tokenize(phonemes: str, vocab: dict[str, int]) -> list[int]:
    """Token ids of ``phonemes`` (NFD code points); symbols the vocabulary lacks are dropped."""
    return [vocab[ch] for ch in unicodedata.normalize("NFD", phonemes) if ch in vocab]


def chunk_tokens(clauses: list[str], vocab: dict[str, int], limit: int = MAX_TOKENS) -> list[list[int]]:
    """The clauses' tokens in runs of at most ``limit``: whole clauses (joined by a space) while they fit; a
    clause longer than a run is cut at spaces (words), a word longer than a run where the limit falls."""
    space = tokenize(" ", vocab)
    runs: list[list[int]] = []
    current: list[int] = []

    def add(piece: list[int]) -> None:
        nonlocal current
        joined = current + space + piece if current else piece
        if len(joined) <= limit:
            current = joined
            return
        if current:
            runs.append(current)
        current = []
        while len(piece) > limit:
            runs.append(piece[:limit])
            piece = piece[limit:]
        current = piece

    for clause in clauses:
        tokens = tokenize(clause, vocab)
        if not tokens:
            continue
        if len(tokens) <= limit:
            add(tokens)
            continue
        for word in clause.split():
            add(tokenize(word, vocab))
    if current:
        runs.append(current)
    return [r for r in runs if r]


@dataclass
class _Loaded:
    manifest: KokoroManifest
    identity: tuple[int, ...]
    session: Any
    signature: Signature
    vocab: dict[str, int]
    styles: dict[str, np.ndarray[Any, np.dtype[np.float32]]]


class KokoroEngine:
    """The voices of the Kokoro models installed in the model store."""

    name = "kokoro"

    def __init__(self, settings: Settings, espeak: EspeakEngine) -> None:
        self.settings = settings
        self.espeak = espeak
        self.store = KokoroStore(settings)
        self._voices: list[EngineVoice] | None = None
        self._seen: tuple[int, ...] | None = None
        self._models: dict[str, tuple[KokoroManifest, Path]] = {}
        self._loaded: dict[str, _Loaded] = {}
        self._lock = threading.Lock()
        self._load_lock = threading.Lock()

    def _root_identity(self) -> tuple[int, ...]:
        try:
            st = self.store.root.stat()
        except OSError:
            return ()
        return (st.st_ino, st.st_mtime_ns)

    def refresh(self) -> None:
        """Read the store again on the next call (an install or removal changes the root, which is noticed
        anyway; this is for tests and callers that know)."""
        with self._lock:
            self._voices = None

    def voices(self) -> list[EngineVoice]:
        with self._lock:
            seen = self._root_identity()
            if self._voices is None or seen != self._seen:
                voices: list[EngineVoice] = []
                models: dict[str, tuple[KokoroManifest, Path]] = {}
                for manifest, path in self.store.installed() if seen else []:
                    models[manifest.id] = (manifest, path)
                    for name in manifest.voices:
                        lang = voice_language(name)
                        if lang is None:
                            continue
                        g = voice_gender(name)
                        gender: Gender = "female" if g == "female" else "male" if g == "male" else "neutral"
                        voices.append(
                            EngineVoice(
                                "kokoro",
                                f"{manifest.id}/{name}",
                                lang[0],
                                gender,
                                QUALITY_KOKORO + GRADE_BONUS.get(name, 0),
                                manifest.sample_rate,
                                lang[1],
                                f"Kokoro {name} ({manifest.id})",
                                manifest.license,
                            )
                        )
                self._voices, self._models, self._seen = voices, models, seen
            return list(self._voices)

    def _load(self, model_id: str) -> _Loaded:
        self.voices()
        with self._load_lock:
            with self._lock:
                found = self._models.get(model_id)
            if found is None:
                raise VoiceNotInstalled(
                    f"no Kokoro model {model_id!r} is installed; installed: "
                    f"{', '.join(self._models) or 'none'}; {KOKORO.hint()}"
                )
            path = found[1]
            identity = install_identity(path)
            loaded = self._loaded.get(model_id)
            if loaded is not None and loaded.identity == identity:
                return loaded
            loaded = _open(path, identity, self.settings.engine.intra_threads)
            self._loaded[model_id] = loaded
            return loaded

    def synthesize(self, text: str, voice_id: str, prosody: Prosody = NEUTRAL) -> EngineOutput:
        clean = clean_text(text)
        model_id, _, name = voice_id.partition("/")
        lang = voice_language(name)
        if lang is None:
            raise VoiceNotInstalled(
                f"{voice_id!r} is not a Kokoro voice (MODEL/VOICE, such as kokoro-v1.0/af_heart)"
            )
        model = self._load(model_id)
        style = model.styles.get(name)
        if style is None:
            raise VoiceNotInstalled(
                f"Kokoro model {model_id} has no voice {name!r}; it has {', '.join(sorted(model.styles))}"
            )
        if not clean.strip():
            return EngineOutput(Audio(np.zeros(0, dtype=np.float32), SAMPLE_RATE), None)
        deadline = timeout_for(clean)
        clauses = self.phonemes(clean, lang[2], timeout=deadline)
        speed = 1.0 if model.signature.speed_is_int else min(SPEED_MAX, max(SPEED_MIN, prosody.rate))
        parts: list[np.ndarray[Any, np.dtype[np.float32]]] = []
        for tokens in chunk_tokens(clauses, model.vocab):
            row = style[min(len(tokens), len(style) - 1)].reshape(1, STYLE_DIM)
            parts.append(_trim(_run(model, tokens, row, speed, deadline)))
            parts.append(np.zeros(round(CHUNK_PAUSE_S * SAMPLE_RATE), dtype=np.float32))
        samples = np.concatenate(parts[:-1]) if parts else np.zeros(0, dtype=np.float32)
        audio = Audio(np.clip(samples, -1.0, 1.0).astype(np.float32), SAMPLE_RATE)
        if abs(speed / prosody.rate - 1.0) > 1e-3:
            audio = time_stretch(audio, speed / prosody.rate)
        audio = pitch_shift(audio, prosody.pitch_st)
        return EngineOutput(apply_volume(audio, prosody.volume), None)

    def phonemes(self, text: str, espeak_voice: str, *, timeout: float | None = None) -> list[str]:
        """Kokoro phonemes of ``text``, one string per clause, punctuation put back (module docstring)."""
        clean = clean_text(text)
        argv = [self.espeak.program, "-q", "--ipa", "--tie=^", "--stdin", "-v", espeak_voice]
        out = run_program(
            argv, stdin=clean.encode("utf-8"), timeout=timeout or timeout_for(clean), what="phonemizing"
        )
        lines = [line.strip() for line in out.decode("utf-8", "replace").splitlines() if line.strip()]
        clauses = [to_kokoro_phonemes(line, espeak_voice) for line in lines]
        return with_punctuation(clean, [c for c in clauses if c] or [])


def _trim(samples: np.ndarray[Any, np.dtype[np.float32]]) -> np.ndarray[Any, np.dtype[np.float32]]:
    """``samples`` without leading and trailing silence (kokoro-onnx trims each run too), a margin kept."""
    if len(samples) == 0:
        return samples
    level = np.abs(samples)
    peak = float(level.max())
    if peak <= 0:
        return samples[:0]
    loud = np.flatnonzero(level > peak * 10 ** (-TRIM_DB / 20))
    margin = round(TRIM_MARGIN_S * SAMPLE_RATE)
    return samples[max(0, int(loud[0]) - margin) : min(len(samples), int(loud[-1]) + 1 + margin)]


def _open(path: Path, identity: tuple[int, ...], threads: int) -> _Loaded:
    try:
        manifest = read_kokoro(path)
        vocab = read_vocab(path / manifest.vocab_file)
        session = open_session(path / manifest.onnx, threads=threads)
        sig = signature(session, manifest.onnx)
        with np.load(path / manifest.voices_file, allow_pickle=False) as voices:
            styles = {name: np.asarray(voices[name], dtype=np.float32) for name in manifest.voices}
    except PackIntegrityError as exc:
        raise VoiceNotInstalled(f"Kokoro model at {path} is damaged: {exc.message}") from exc
    except (OSError, ValueError) as exc:
        raise SpeechEngineError(f"Kokoro model at {path} would not load: {exc}") from exc
    log.info("loaded Kokoro model %s (%d voices) from %s", manifest.id, len(styles), path)
    return _Loaded(manifest, identity, session, sig, vocab, styles)


def _run(
    model: _Loaded,
    tokens: list[int],
    style: np.ndarray[Any, np.dtype[np.float32]],
    speed: float,
    timeout: float,
) -> np.ndarray[Any, np.dtype[np.float32]]:
    import onnxruntime as ort

    sig = model.signature
    feeds: dict[str, np.ndarray[Any, Any]] = {
        sig.tokens: np.array([[0, *tokens, 0]], dtype=np.int64),
        "style": np.ascontiguousarray(style, dtype=np.float32),
        "speed": np.array([1], dtype=np.int32) if sig.speed_is_int else np.array([speed], dtype=np.float32),
    }
    run_options = ort.RunOptions()
    timer = Timer(timeout, lambda: setattr(run_options, "terminate", True))
    timer.daemon = True
    timer.start()
    try:
        out = model.session.run([sig.output], feeds, run_options)[0]
    except Exception as exc:
        if run_options.terminate:
            raise EngineTimeout(f"Kokoro model {model.manifest.id} took longer than {timeout:.3g} s") from exc
        raise SpeechEngineError(f"Kokoro model {model.manifest.id} failed: {exc}") from exc
    finally:
        timer.cancel()
    return np.asarray(out, dtype=np.float32).reshape(-1)
