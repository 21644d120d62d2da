"""Tiny but real translation packs, built in well under a second, for tests, benchmarks and examples.

Each pack holds a genuine CTranslate2 Transformer (2 layers, d_model 64, 4 heads, FFN 128, float32) with
seeded random weights, and a genuine SentencePiece model trained on a few dozen lines of mixed-language
text with ``byte_fallback`` (so no input is ever unknown: unseen characters become byte pieces). Loading,
tokenizing, batching, decoding and every error path run exactly as with a downloaded pack; only the
translations are deterministic gibberish.

To keep that gibberish short, ``</s>`` becomes likely after about a dozen tokens: one channel of the
decoder's position encodings is a ramp (the step times ``EOS_RAMP``) that no layer writes into, and the
``</s>`` row of the output projection reads only that channel (``EOS_WEIGHT``, with bias ``EOS_BIAS``).
Outputs are 10-14 tokens whatever the input (about 20-30 at the base size, whose ramp is gentler); the
backend also bounds decoding length (``max_decoding_length``), which would cap any longer one. ``<unk>``,
``<s>``, byte pieces and language tokens get a large negative bias so they are never produced (the output
is always valid UTF-8 text).

``size="base"`` builds the shape of a real Argos / OPUS-MT pack instead, for benchmarks: 6+6 layers,
d_model 512, 8 heads, FFN 2048, a 32,000-token vocabulary (padded with filler tokens that are never
produced), int8 weights (about 100 MB like a real pack; a few seconds to build), and a SentencePiece
model trained on :func:`sample_sentences` too, so that common English words are single pieces as with a
real model. The tiny pack costs so little per token that batching hardly pays; the base size costs what a
real one does. Any other shape is a :class:`ModelSize`.

Each SentencePiece model is trained once per process (``lru_cache``); later packs reuse its bytes.
"""

from __future__ import annotations

import functools
import io
import json
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dragoman.languages.catalogue import get, resolve
from dragoman.models.manifest import ARGOS_METADATA, MANIFEST_NAME, PackManifest, TokenStyle

D_MODEL = 64
NUM_HEADS = 4
FFN = 128
NUM_LAYERS = 2
SP_VOCAB_SIZE = 512
#: The word-piece SentencePiece model of the base size: a vocabulary limit the corpus never reaches.
WORD_SP_VOCAB_SIZE = 4000
SP_FILE = "sentencepiece.model"
MODEL_DIR = "model"
MAX_POSITIONS = 2048
#: The decoder channel that carries the decoding step, and how ``</s>`` reads it.
LENGTH_CHANNEL = 0
EOS_RAMP = 0.5
EOS_BIAS = -4.0
EOS_WEIGHT = 3.0
_SUPPRESS = -1e4
FILLER = "<filler_{:05d}>"


@dataclass(frozen=True)
class ModelSize:
    """The shape of a tiny pack's Transformer, and how its vocabulary and weights are built.

    ``vocab`` pads the model vocabulary with filler tokens (never produced) up to that many entries, so
    the output projection costs what a real pack's does (0: the SentencePiece pieces only).
    ``quantization`` is passed to ``ModelSpec.optimize`` (``"int8"`` as Argos packs ship; None: float32).
    ``word_pieces`` trains the SentencePiece model on :func:`sample_sentences` as well, so that common
    words are single pieces; ``eos_ramp`` sets how fast ``</s>`` becomes likely (smaller: longer outputs).
    """

    d_model: int
    layers: int
    heads: int
    ffn: int
    vocab: int = 0
    quantization: str | None = None
    word_pieces: bool = False
    eos_ramp: float = EOS_RAMP

    def __post_init__(self) -> None:
        if min(self.d_model, self.layers, self.heads, self.ffn) < 1 or self.vocab < 0:
            raise ValueError(f"model dimensions must be positive, got {self}")
        if self.d_model % self.heads or self.d_model % 2:
            raise ValueError(f"d_model must be even and a multiple of heads, got {self}")
        if self.eos_ramp <= 0:
            raise ValueError(f"eos_ramp must be positive, got {self.eos_ramp}")


#: ``tiny``: built in well under a second, for tests. ``base``: the shape of an Argos / OPUS-MT pack.
SIZES: dict[str, ModelSize] = {
    "tiny": ModelSize(D_MODEL, NUM_LAYERS, NUM_HEADS, FFN),
    "base": ModelSize(512, 6, 8, 2048, vocab=32000, quantization="int8", word_pieces=True, eos_ramp=0.35),
}


def model_size(size: str | ModelSize) -> ModelSize:
    """The :class:`ModelSize` a name of :data:`SIZES` stands for (a ModelSize is returned as it is)."""
    if isinstance(size, ModelSize):
        return size
    try:
        return SIZES[size]
    except KeyError:
        raise ValueError(f"size must be one of {', '.join(SIZES)} or a ModelSize, got {size!r}") from None


# A few dozen lines: Latin with accents, digits, punctuation, Cyrillic, Arabic, Greek.
_CORPUS = (
    "Hello world, this is a small test of the translation engine.",
    "The quick brown fox jumps over the lazy dog.",
    "Please send the report by Friday, 3 May 2024, at 10:30.",
    "Where is the nearest train station? It is two kilometres away.",
    "Our price is $19.99 (tax included); call +1-555-0100 for details!",
    "I would like a cup of coffee with milk and no sugar, please.",
    "The meeting was moved to room 42 on the fourth floor.",
    "Read the manual at https://example.com/docs before you start.",
    "¿Dónde está la biblioteca? Está cerca de la estación.",
    "El niño comió una manzana y bebió un vaso de agua fría.",
    "Mañana vamos a la playa si hace buen tiempo, ¡qué bien!",
    "La reunión empieza a las nueve y termina al mediodía.",
    "Señor Núñez, su pedido número 1234 ya está en camino.",
    "Le café est très bon, mais le thé est meilleur.",
    "Où se trouve la gare ? Elle est à deux kilomètres d'ici.",
    "Nous avons reçu votre lettre du 12 février ; merci beaucoup.",
    "C'était une journée ensoleillée, l'été dernier, à Noël ou à Pâques.",
    "Grüße aus München: Die Straße ist 1,5 km lang.",
    "Wir möchten das Frühstück um acht Uhr, bitte.",
    "Die Prüfung war schwierig, aber die Ergebnisse sind gut.",
    "Über die Brücke fährt täglich ein Zug nach Köln.",
    "Il ragazzo legge un libro in biblioteca ogni giorno.",
    "A criança está feliz porque ganhou um presente; não é?",
    "Привет, как дела? Всё хорошо, спасибо.",
    "Москва — столица России, там живёт много людей.",
    "Я читаю книгу и пью чай с лимоном.",
    "مرحبا بالعالم، هذا اختبار صغير.",
    "أين المحطة؟ إنها قريبة من هنا.",
    "Καλημέρα, τι κάνεις σήμερα;",
    "Numbers: 0 1 2 3 4 5 6 7 8 9, 10%, 3.14, 1/2, #7, @home.",
    "Symbols & marks: \"quotes\", 'apostrophes', [brackets], {braces}, <angle>, a*b=c, x_y, ~tilde.",
    "Keep {name} and {count} unchanged; also %s, %d and $HOME.",
    "Naïve façade, coöperate, résumé, jalapeño, smörgåsbord, crème brûlée.",
    "ÀÁÂÃÄÅ ÇÈÉÊË ÌÍÎÏ ÑÒÓÔÕÖ ÙÚÛÜ Ý àáâãäå çèéêë ìíîï ñòóôõö ùúûü ýÿ ß æ ø œ.",
    "Email: someone@example.org, path: /usr/local/bin, version 2.0.1.",
    "One, two, three; four: five! Six? Seven... eight - nine.",
)

# Common English words for sample_sentences (and the base size's word pieces).
_WORDS = """
the a an this that these my your our their some every no one two three four five many few all other
house garden river city morning people small green quickly table window letter travel music evening
friend water market answer book school street car train station road bridge door room kitchen family
child children woman man doctor teacher student company office meeting report price order work day
week month year time night moment way world country town village sea mountain forest tree flower rain
sun weather coffee tea bread milk food dinner lunch breakfast money question problem idea story news
paper phone computer email picture song game party holiday plan team name place hand eye head heart
big old new good great long little young short high warm cold early late last next important different
easy hard happy busy quiet beautiful open free full ready
is was are were will would can could should must has had have do does did goes comes makes takes
gives finds knows thinks says tells asks needs wants likes loves sees hears reads writes buys sells
opens closes starts finishes helps brings carries keeps leaves meets moves pays plays runs sits stands
walks waits watches learns changes believes remembers forgets
and or but because if when while after before since until so then also only very too still again
often always never soon today tomorrow yesterday here there together already almost really
in on at to from with without for of by about over under near between through into across behind
""".split()


def sample_sentences(count: int, *, seed: int = 0) -> list[str]:
    """``count`` deterministic English-like sentences of 8-24 common words, some with a number.

    Their tokens per sentence (and per word, with the base size's SentencePiece model) are close to what
    real text gives a real pack, which is what a benchmark needs.
    """
    rng = np.random.default_rng(seed)
    sentences: list[str] = []
    for _ in range(count):
        words = [str(w) for w in rng.choice(_WORDS, size=int(rng.integers(8, 25)))]
        if rng.random() < 0.3:
            words.insert(int(rng.integers(1, len(words))), str(int(rng.integers(1, 2025))))
        if rng.random() < 0.3:
            words[int(rng.integers(1, len(words) - 1))] += ","
        sentences.append(" ".join(words).capitalize() + str(rng.choice([".", ".", ".", "?", "!"])))
    return sentences


@functools.lru_cache(maxsize=2)
def sentencepiece_model(word_pieces: bool = False) -> bytes:
    """The serialized SentencePiece model shared by every tiny pack (trained once per process).

    ``word_pieces`` (the base size) trains on 2,000 :func:`sample_sentences` as well, so that common
    words become single pieces.
    """
    import sentencepiece as spm

    corpus = _CORPUS * 4 + (tuple(sample_sentences(2000, seed=12345)) if word_pieces else ())
    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus),
        model_writer=writer,
        vocab_size=WORD_SP_VOCAB_SIZE if word_pieces else SP_VOCAB_SIZE,
        hard_vocab_limit=False,
        model_type="unigram",
        character_coverage=1.0,
        byte_fallback=True,
        split_digits=True,
        num_threads=1,
        minloglevel=2,
    )
    return writer.getvalue()


@functools.lru_cache(maxsize=2)
def _pieces(word_pieces: bool = False) -> tuple[str, ...]:
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_proto=sentencepiece_model(word_pieces))
    return tuple(processor.id_to_piece(i) for i in range(processor.get_piece_size()))


Array = npt.NDArray[np.float32]


def _linear(rng: np.random.Generator, out_dim: int, in_dim: int) -> dict[str, Array]:
    return {
        "weight": rng.normal(0.0, 1.0 / np.sqrt(in_dim), (out_dim, in_dim)).astype(np.float32),
        "bias": rng.normal(0.0, 0.02, (out_dim,)).astype(np.float32),
    }


def _set_linear(spec: Any, values: dict[str, Array]) -> None:
    spec.weight = values["weight"]
    if "bias" in values:
        spec.bias = values["bias"]


def _set_norm(spec: Any, d_model: int) -> None:
    spec.gamma = np.ones(d_model, dtype=np.float32)
    spec.beta = np.zeros(d_model, dtype=np.float32)


def _set_ffn(spec: Any, rng: np.random.Generator, shape: ModelSize) -> None:
    _set_norm(spec.layer_norm, shape.d_model)
    _set_linear(spec.linear_0, _linear(rng, shape.ffn, shape.d_model))
    _set_linear(spec.linear_1, _linear(rng, shape.d_model, shape.ffn))


def _set_attention(spec: Any, rng: np.random.Generator, d_model: int, self_attention: bool) -> None:
    _set_norm(spec.layer_norm, d_model)
    if self_attention:
        _set_linear(spec.linear[0], _linear(rng, 3 * d_model, d_model))  # fused query, keys, values
        _set_linear(spec.linear[1], _linear(rng, d_model, d_model))
    else:
        _set_linear(spec.linear[0], _linear(rng, d_model, d_model))  # query
        _set_linear(spec.linear[1], _linear(rng, 2 * d_model, d_model))  # fused keys, values
        _set_linear(spec.linear[2], _linear(rng, d_model, d_model))


def _embeddings(rng: np.random.Generator, size: int, d_model: int) -> Array:
    # Scaled by sqrt(d_model) at run time, so entries end up near unit size like the position encodings.
    return rng.normal(0.0, 1.0 / np.sqrt(d_model), (size, d_model)).astype(np.float32)


def _decoder_positions(d_model: int, eos_ramp: float) -> Array:
    """Sinusoidal position encodings whose channel ``LENGTH_CHANNEL`` is a ramp: position * ``eos_ramp``.

    Nothing else writes into that channel of the decoder's residual stream, so the final hidden state
    carries the decoding step, and the ``</s>`` row of the output projection reads it.
    """
    half = d_model // 2
    positions = np.arange(MAX_POSITIONS, dtype=np.float64)[:, None]
    inverse = np.exp(-np.log(10000.0) * np.arange(half) / (half - 1))[None, :]
    table = np.concatenate([np.sin(positions * inverse), np.cos(positions * inverse)], axis=1)
    table[:, LENGTH_CHANNEL] = positions[:, 0] * eos_ramp
    return table.astype(np.float32)


def _keep_channel_clear(layer: Any) -> None:
    """Zero what a decoder layer adds to ``LENGTH_CHANNEL`` of the residual stream."""
    for linear in (layer.self_attention.linear[-1], layer.attention.linear[-1], layer.ffn.linear_1):
        linear.weight[LENGTH_CHANNEL] = 0.0
        linear.bias[LENGTH_CHANNEL] = 0.0


def _build_spec(
    vocabulary: Sequence[str], suppressed: Sequence[str], seed: int, shape: ModelSize = SIZES["tiny"]
) -> Any:
    import ctranslate2

    d_model = shape.d_model
    spec = ctranslate2.specs.TransformerSpec.from_config(shape.layers, shape.heads)
    rng = np.random.default_rng(seed)
    size = len(vocabulary)
    spec.encoder.embeddings[0].weight = _embeddings(rng, size, d_model)
    target_embeddings = _embeddings(rng, size, d_model)
    target_embeddings[:, LENGTH_CHANNEL] = 0.0
    spec.decoder.embeddings.weight = target_embeddings
    spec.decoder.position_encodings.encodings = _decoder_positions(d_model, shape.eos_ramp)
    _set_norm(spec.encoder.layer_norm, d_model)
    _set_norm(spec.decoder.layer_norm, d_model)
    for layer in spec.encoder.layer:
        _set_attention(layer.self_attention, rng, d_model, self_attention=True)
        _set_ffn(layer.ffn, rng, shape)
    for layer in spec.decoder.layer:
        _set_attention(layer.self_attention, rng, d_model, self_attention=True)
        _set_attention(layer.attention, rng, d_model, self_attention=False)
        _set_ffn(layer.ffn, rng, shape)
        _keep_channel_clear(layer)
    projection = _linear(rng, size, d_model)
    index = {token: i for i, token in enumerate(vocabulary)}
    eos = index["</s>"]
    projection["bias"][eos] = EOS_BIAS
    projection["weight"][eos] = 0.0
    projection["weight"][eos, LENGTH_CHANNEL] = EOS_WEIGHT
    projection["bias"][[index[token] for token in suppressed]] = _SUPPRESS
    _set_linear(spec.decoder.projection, projection)
    spec.register_source_vocabulary(list(vocabulary))
    spec.register_target_vocabulary(list(vocabulary))
    return spec


def build_model(
    dest: Path, extra_tokens: Sequence[str] = (), *, seed: int = 0, size: str | ModelSize = "tiny"
) -> Path:
    """Write a CTranslate2 model over the shared SentencePiece vocabulary plus ``extra_tokens`` to ``dest``.

    For multilingual packs, the decoder starts from ``</s>`` and the language tokens are appended to the
    vocabulary, as in the NLLB and M2M-100 conversions. ``size`` is a name of :data:`SIZES` or a
    :class:`ModelSize`; filler tokens (to ``ModelSize.vocab``) come between the pieces and ``extra_tokens``.
    """
    shape = model_size(size)
    pieces = _pieces(shape.word_pieces)
    extra = [t for t in extra_tokens if t not in pieces]
    fillers = [FILLER.format(i) for i in range(shape.vocab - len(pieces) - len(extra))]
    vocabulary = [*pieces, *fillers, *extra]
    # Byte pieces are suppressed too, so the gibberish is valid UTF-8 text.
    bytes_ = [p for p in pieces if len(p) == 6 and p.startswith("<0x") and p.endswith(">")]
    suppressed = ["<unk>", "<s>", *bytes_, *fillers, *extra_tokens]
    spec = _build_spec(vocabulary, suppressed, seed, shape)
    if extra_tokens:
        spec.config.decoder_start_token = "</s>"
    spec.validate()  # also converts the numpy values into the variables save() writes
    spec.optimize(quantization=shape.quantization)
    dest.mkdir(parents=True, exist_ok=True)
    spec.save(str(dest))
    return dest


def _fresh_dir(dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)


def _label(size: str | ModelSize) -> str:
    return size if isinstance(size, str) else "custom-size"


def build_argos_pack(
    dest: Path,
    source: str = "en",
    target: str = "es",
    *,
    seed: int = 0,
    version: str = "1.0",
    size: str | ModelSize = "tiny",
) -> Path:
    """Build an Argos Translate pair pack in ``dest``: ``metadata.json``, ``model/``, ``sentencepiece.model``.

    ``source`` and ``target`` are the codes written to ``metadata.json`` (Argos uses ISO 639-1 codes).
    ``size`` is ``"tiny"`` (tests), ``"base"`` (the shape of a real pack, for benchmarks) or a
    :class:`ModelSize`. ``dest`` is replaced if it exists. Returns ``dest``.
    """
    shape = model_size(size)
    _fresh_dir(dest)
    build_model(dest / MODEL_DIR, seed=seed, size=shape)
    (dest / SP_FILE).write_bytes(sentencepiece_model(shape.word_pieces))
    metadata = {
        "package_version": version,
        "argos_version": "1.9.0",
        "from_code": source,
        "from_name": get(resolve(source)).name,
        "to_code": target,
        "to_name": get(resolve(target)).name,
        "type": "translate",
        "languages": [source, target],
        "description": (
            f"dragoman {_label(size)} test pack {source}->{target} (random weights, gibberish output)"
        ),
    }
    (dest / ARGOS_METADATA).write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
    return dest


def build_multilingual_pack(
    dest: Path,
    languages: Sequence[str],
    *,
    pack_id: str = "tiny-nllb",
    token_style: TokenStyle = "flores",
    license: str = "CC-BY-NC-4.0",
    seed: int = 0,
    max_input_tokens: int = 512,
    size: str | ModelSize = "tiny",
) -> Path:
    """Build a multilingual pack (``dragoman-pack.json``, ``model/``, ``sentencepiece.model``) in ``dest``.

    ``languages`` are FLORES-200 codes; ``token_style`` is ``"flores"`` (NLLB's ``eng_Latn``) or ``"m2m"``
    (``__en__``); ``size`` as for :func:`build_argos_pack`. ``dest`` is replaced if it exists. Returns
    ``dest``.
    """
    shape = model_size(size)
    if token_style not in ("flores", "m2m"):
        raise ValueError(f"token_style must be 'flores' or 'm2m', got {token_style!r}")
    probe = PackManifest(
        id=pack_id,
        kind="multilingual",
        version="1.0",
        license=license,
        languages=tuple(languages),
        pairs=(),
        quality=4,
        speed=1,
        token_style=token_style,
    )
    tokens = [probe.token_for(code) for code in languages]
    _fresh_dir(dest)
    build_model(dest / MODEL_DIR, tokens, seed=seed, size=shape)
    (dest / SP_FILE).write_bytes(sentencepiece_model(shape.word_pieces))
    manifest = {
        "id": pack_id,
        "kind": "multilingual",
        "version": "1.0",
        "license": license,
        "languages": list(languages),
        "token_style": token_style,
        "sentencepiece": SP_FILE,
        "model": MODEL_DIR,
        "max_input_tokens": max_input_tokens,
        "description": f"dragoman {_label(size)} multilingual test pack (random weights, gibberish output)",
    }
    (dest / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return dest


def build_argos_archive(
    dest_file: Path,
    source: str = "en",
    target: str = "es",
    *,
    seed: int = 0,
    version: str = "1.0",
    size: str | ModelSize = "tiny",
) -> Path:
    """Build an ``.argosmodel`` zip: one top-level directory holding an Argos pack, as Argos ships them."""
    top = f"translate-{source}_{target}-{version.replace('.', '_')}"
    with tempfile.TemporaryDirectory(prefix="dragoman-tinypack-") as tmp:
        pack = build_argos_pack(Path(tmp) / top, source, target, seed=seed, version=version, size=size)
        dest_file.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(dest_file, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            archive.writestr(f"{top}/", "")
            for path in sorted(pack.rglob("*")):
                name = f"{top}/{path.relative_to(pack).as_posix()}"
                if path.is_dir():
                    archive.writestr(f"{name}/", "")
                else:
                    archive.write(path, name)
    return dest_file
