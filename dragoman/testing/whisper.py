"""A tiny but real faster-whisper model, built in about a second, for tests (issue 15).

:func:`build_tiny_whisper` writes a genuine CTranslate2 Whisper (``ctranslate2.specs.WhisperSpec``: 1+1
layers, d_model 64, 2 heads, seeded random weights) with a Whisper-shaped vocabulary (51,865 tokens: id 50256
is the empty string, as CTranslate2 needs to treat a model as multilingual; 99 language tokens in Whisper's
order; the task, timestamp and special tokens where Whisper has them) and a byte-level BPE ``tokenizer.json``
(faster-whisper falls back to the model hub without one). Loading, language detection, decoding, word
timestamps and every error path run exactly as with Whisper base; only the words are gibberish
(pronounceable pseudo-words such as ``" bakito"``).

Random weights end a transcript at once unless told otherwise: :data:`TINY_DECODE` are the decoding overrides
(``Recognizer(settings, decode_overrides=TINY_DECODE)``) that make it emit words: ``<|endoftext|>``
suppressed, a few new tokens per window, one temperature, the fallback thresholds off.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

#: Whisper's 99 languages in the order of its language tokens (``<|en|>`` is 50259).
WHISPER_LANGUAGES = (
    "en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no th ur hr "
    "bg lt la mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw gl mr pa si km sn "
    "yo so af oc ka be tg sd gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl mg as tt haw ln ha ba jw su"
).split()

EOT = 50257
SOT = 50258
VOCAB_SIZE = 51865
D_MODEL = 64
HEADS = 2
FFN = 128
MEL_BINS = 80
ENCODER_POSITIONS = 1500
DECODER_POSITIONS = 448

#: Decoding overrides under which the random model emits words (pass as ``decode_overrides``).
TINY_DECODE: dict[str, Any] = {
    "suppress_tokens": [EOT],
    "max_new_tokens": 8,
    "temperature": 0.0,
    "compression_ratio_threshold": None,
    "log_prob_threshold": None,
    "no_speech_threshold": None,
    "condition_on_previous_text": False,
}

_ONSETS = "b d f g k l m n p r s t v z".split()
_VOWELS = "a e i o u".split()


def _pseudo_word(i: int) -> str:
    """A pronounceable word for token ``i`` (distinct for distinct ``i``)."""
    syllables = []
    n = i
    while True:
        n, r = divmod(n, len(_ONSETS) * len(_VOWELS))
        syllables.append(_ONSETS[r // len(_VOWELS)] + _VOWELS[r % len(_VOWELS)])
        if n == 0:
            break
    return "".join(syllables)


def _byte_alphabet() -> list[str]:
    """GPT-2's byte-to-unicode table (what a byte-level BPE vocabulary starts with)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs, strict=True))
    return [chr(table[b]) for b in range(256)]


def vocabulary() -> list[str]:
    """The tiny model's tokens, id by id (Whisper's layout; words are ``Ġ`` + a pseudo-word)."""
    tokens = _byte_alphabet()
    punctuation = [".", ",", "?", "!"]
    tokens += punctuation
    seen = set(tokens)
    i = 0
    while len(tokens) < 50256:
        word = "Ġ" + _pseudo_word(i)
        i += 1
        if word not in seen:
            seen.add(word)
            tokens.append(word)
    tokens.append("")  # 50256: empty, as in Whisper's multilingual vocabulary
    tokens += ["<|endoftext|>", "<|startoftranscript|>"]
    tokens += [f"<|{code}|>" for code in WHISPER_LANGUAGES]
    tokens += ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>"]
    tokens += ["<|notimestamps|>"]
    tokens += [f"<|{i * 0.02:.2f}|>" for i in range(1501)]
    assert len(tokens) == VOCAB_SIZE, len(tokens)
    return tokens


def _tokenizer_json(tokens: list[str]) -> dict[str, Any]:
    """A byte-level BPE tokenizer.json over ``tokens`` (no merges: text encodes to byte tokens, and every
    word token decodes to its word with a leading space)."""
    vocab = {tok: i for i, tok in enumerate(tokens) if i != 50256}
    added = [
        {
            "id": i,
            "content": tok,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, tok in enumerate(tokens)
        if i >= EOT
    ]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": None,
        "decoder": {**byte_level, "add_prefix_space": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "vocab": vocab,
            "merges": [],
        },
    }


def _spec(seed: int) -> Any:
    from ctranslate2.specs import whisper_spec

    rng = np.random.default_rng(seed)

    def rand(*shape: int, scale: float = 0.2) -> np.ndarray[Any, np.dtype[np.float32]]:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def ones(n: int) -> np.ndarray[Any, np.dtype[np.float32]]:
        return np.ones(n, dtype=np.float32)

    def zeros(n: int) -> np.ndarray[Any, np.dtype[np.float32]]:
        return np.zeros(n, dtype=np.float32)

    def norm(layer: Any) -> None:
        layer.gamma = ones(D_MODEL)
        layer.beta = zeros(D_MODEL)

    def linear(layer: Any, out: int, inp: int) -> None:
        layer.weight = rand(out, inp)
        layer.bias = rand(out, scale=0.05)

    def ffn(layer: Any) -> None:
        norm(layer.layer_norm)
        linear(layer.linear_0, FFN, D_MODEL)
        linear(layer.linear_1, D_MODEL, FFN)

    spec = whisper_spec.WhisperSpec(1, HEADS, 1, HEADS)
    enc = spec.encoder
    enc.conv1.weight = rand(D_MODEL, MEL_BINS, 3)
    enc.conv1.bias = zeros(D_MODEL)
    enc.conv2.weight = rand(D_MODEL, D_MODEL, 3)
    enc.conv2.bias = zeros(D_MODEL)
    enc.position_encodings.encodings = rand(ENCODER_POSITIONS, D_MODEL)
    norm(enc.layer_norm)
    for layer in enc.layer:
        norm(layer.self_attention.layer_norm)
        linear(layer.self_attention.linear[0], 3 * D_MODEL, D_MODEL)
        linear(layer.self_attention.linear[1], D_MODEL, D_MODEL)
        ffn(layer.ffn)
    dec = spec.decoder
    dec.embeddings.weight = rand(VOCAB_SIZE, D_MODEL, scale=1.0)
    dec.position_encodings.encodings = rand(DECODER_POSITIONS, D_MODEL)
    norm(dec.layer_norm)
    dec.projection.weight = dec.embeddings.weight
    for layer in dec.layer:
        norm(layer.self_attention.layer_norm)
        linear(layer.self_attention.linear[0], 3 * D_MODEL, D_MODEL)
        linear(layer.self_attention.linear[1], D_MODEL, D_MODEL)
        norm(layer.attention.layer_norm)
        linear(layer.attention.linear[0], D_MODEL, D_MODEL)
        linear(layer.attention.linear[1], 2 * D_MODEL, D_MODEL)
        linear(layer.attention.linear[2], D_MODEL, D_MODEL)
        ffn(layer.ffn)
    return spec


def build_tiny_whisper(directory: str | Path, *, seed: int = 0) -> Path:
    """Write a tiny random Whisper model (``model.bin``, ``config.json``, ``vocabulary.json``,
    ``tokenizer.json``) into ``directory`` (created; files there are replaced) and return it."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    tokens = vocabulary()
    spec = _spec(seed)
    spec.config.suppress_ids = [220, EOT]
    spec.config.suppress_ids_begin = [220, EOT]
    spec.config.lang_ids = list(range(SOT + 1, SOT + 1 + len(WHISPER_LANGUAGES)))
    spec.config.alignment_heads = [(0, h) for h in range(HEADS)]
    spec.register_vocabulary(tokens)
    spec.validate()
    spec.optimize(quantization="float16")  # half the bytes; loaded as int8 on the CPU all the same
    spec.save(str(target))
    (target / "tokenizer.json").write_text(json.dumps(_tokenizer_json(tokens)), encoding="utf-8")
    return target
