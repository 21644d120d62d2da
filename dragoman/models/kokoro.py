"""Kokoro ONNX voices as a model kind (``kokoro``): installed, verified and removed through the generic store
(issue 14, "voices as models").

A Kokoro model is a directory holding the three files the kokoro-onnx project uses:

- one ``.onnx`` model (``kokoro-v1.0.onnx`` or its quantised sibling) with Kokoro's signature: inputs
  ``tokens`` (int64 ``[1, n]``; newer exports call it ``input_ids``), ``style`` (float32 ``[1, 256]``) and
  ``speed`` (float32 ``[1]``; int32 in newer exports), first output the audio (float32, 24 kHz);
- the voices (``voices-v1.0.bin``): a NumPy ``.npz`` of voice name → float32 style array of shape
  ``[rows, 1, 256]`` (510 rows: row *k* is the style for *k* tokens); the name's first letter is the language
  (``a`` en-US, ``b`` en-GB, ``e`` es, ``f`` fr, ``h`` hi, ``i`` it, ``j`` ja, ``p`` pt-BR, ``z`` zh), its
  second the gender (``f``/``m``);
- the vocabulary: Kokoro-82M's ``config.json`` (or any ``.json``) whose ``"vocab"`` maps IPA symbols to
  token ids.

Its id is the ``.onnx`` file's stem (``kokoro-v1.0``); the store's root is ``kokoro/`` beside the packs
directory (``settings.engine.packs_dir.parent / "kokoro"``).

Install (:func:`install`) from a directory, an archive (.tar.gz, .zip) holding one, an http(s) URL of such an
archive, or a ``.onnx`` file or URL with ``voices=`` and ``vocab=`` naming the other two (files or URLs; for a
``.onnx`` file they default to the voices file and the ``config.json`` beside it). Every file is bounded
(:data:`MAX_KOKORO_BYTES` in all, :data:`MAX_VOICES_BYTES`, :data:`MAX_VOCAB_BYTES`); the install record holds
each file's sha256, like every model's; the model is placed atomically by
:func:`dragoman.models.install.install_model`. Listing (:func:`read_kokoro`) checks structure cheaply — the
vocabulary, the voices' array headers (never their data, never pickles) and the ``.onnx``'s first bytes —
while an install also loads the ``.onnx`` with onnxruntime, checks its inputs and outputs and runs it once on
two tokens (:func:`check_model`): a wrong, truncated or foreign model is a :class:`PackIntegrityError` and
nothing is installed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from dragoman.errors import InvalidRequest, PackInstallError, PackIntegrityError
from dragoman.models._fetch import Pace, Transfer, fetch
from dragoman.models.install import install_model
from dragoman.models.kind import ModelKind
from dragoman.models.manifest import UNKNOWN_LICENSE, read_license
from dragoman.models.store import ModelStore, dir_size
from dragoman.progress import ProgressCallback
from dragoman.settings import Settings

log = logging.getLogger("dragoman.models.kokoro")

#: The whole model (kokoro-v1.0.onnx is 310 MB, its voices 27 MB).
MAX_KOKORO_BYTES = 1024**3
#: The voices file (54 voices of 510 × 256 float32 are 27 MB; Kokoro v1.1-zh's 103 voices 54 MB).
MAX_VOICES_BYTES = 256 * 1024**2
MAX_VOCAB_BYTES = 4 * 1024**2
MAX_VOICES = 1024
MAX_STYLE_ROWS = 4096
STYLE_DIM = 256
MAX_TOKEN_ID = 65535
SAMPLE_RATE = 24000
#: Kokoro's context: at most this many tokens a run, besides the two pad tokens (0) around them.
MAX_TOKENS = 510

#: A voice name's first letter: (language, locale, espeak-ng voice that phonemises it).
LANGUAGE_OF_PREFIX: dict[str, tuple[str, str, str]] = {
    "a": ("en", "en-US", "en-us"),
    "b": ("en", "en-GB", "en-gb"),
    "e": ("es", "es-ES", "es"),
    "f": ("fr", "fr-FR", "fr-fr"),
    "h": ("hi", "hi-IN", "hi"),
    "i": ("it", "it-IT", "it"),
    "j": ("ja", "ja-JP", "ja"),
    "p": ("pt", "pt-BR", "pt-br"),
    "z": ("zh", "zh-CN", "cmn"),
}
_VOICE_NAME = re.compile(r"^[a-z][a-z]_[A-Za-z0-9_-]{1,60}$")
_VOICES_SUFFIXES = (".bin", ".npz")
_VERSION = re.compile(r"v(\d+(?:\.\d+)*)")
_TOKEN_INPUTS = ("tokens", "input_ids")


@dataclass(frozen=True)
class KokoroManifest:
    """An installed Kokoro model: its files (names inside its directory), voices and languages."""

    id: str
    version: str
    onnx: str
    voices_file: str
    vocab_file: str
    voices: tuple[str, ...]
    languages: tuple[str, ...]  # two-letter, of the voices whose prefix is known
    style_rows: int
    sample_rate: int = SAMPLE_RATE
    license: str = f"{UNKNOWN_LICENSE} (the model states none)"


@dataclass(frozen=True)
class KokoroInfo:
    id: str
    version: str
    languages: tuple[str, ...]
    voices: int
    path: str
    size_bytes: int
    license: str


def voice_language(name: str) -> tuple[str, str, str] | None:
    """``(language, locale, espeak voice)`` of a Kokoro voice name (``af_heart`` → en, en-US, en-us)."""
    return LANGUAGE_OF_PREFIX.get(name[:1]) if _VOICE_NAME.match(name) else None


def voice_gender(name: str) -> str:
    return {"f": "female", "m": "male"}.get(name[1:2], "neutral")


# ----- reading a model directory ------------------------------------------------------------------------
def _one(path: Path, files: list[Path], what: str) -> Path:
    if len(files) != 1:
        names = ", ".join(sorted(p.name for p in files)) or "none"
        raise PackIntegrityError(f"a Kokoro model holds exactly one {what}; {path} holds {names}")
    return files[0]


def _plain_files(path: Path) -> list[Path]:
    return [p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")]


def read_vocab(path: Path) -> dict[str, int]:
    """The ``"vocab"`` of a Kokoro config: IPA symbol (one code point) → token id (1..65535)."""
    if path.stat().st_size > MAX_VOCAB_BYTES:
        raise PackIntegrityError(f"{path.name} is larger than {MAX_VOCAB_BYTES} bytes")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PackIntegrityError(f"{path.name} is not JSON: {exc}") from exc
    vocab = data.get("vocab") if isinstance(data, dict) else None
    if not isinstance(vocab, dict) or not vocab:
        raise PackIntegrityError(f'{path.name} has no "vocab" (Kokoro\'s IPA symbol -> token id map)')
    for symbol, token in vocab.items():
        if len(symbol) != 1 or not isinstance(token, int) or isinstance(token, bool):
            raise PackIntegrityError(
                f"{path.name}: vocab entry {symbol!r}: {token!r} is not one symbol mapped to an integer id"
            )
        if not 1 <= token <= MAX_TOKEN_ID:
            raise PackIntegrityError(f"{path.name}: token id {token} is outside 1..{MAX_TOKEN_ID}")
    return dict(vocab)


def _vocab_file(path: Path, files: list[Path]) -> Path:
    jsons = [p for p in files if p.suffix == ".json"]
    preferred = [p for p in jsons if p.name in ("config.json", "vocab.json")]
    if len(preferred) == 1:
        return preferred[0]
    if not jsons:
        raise PackIntegrityError(
            f'{path} holds no vocabulary: Kokoro-82M\'s config.json (its "vocab") must be beside the model'
        )
    return _one(path, jsons, "vocabulary (.json)")


def read_voices_header(path: Path) -> tuple[tuple[str, ...], int]:
    """The voice names of a voices ``.npz`` and their style rows, from the arrays' headers (the data is not
    read, pickles are refused): every array float32 of shape ``[rows, 1, 256]``, all of one ``rows``; the file
    and what it expands to at most :data:`MAX_VOICES_BYTES`."""
    import numpy as np

    size = path.stat().st_size
    if size > MAX_VOICES_BYTES:
        raise PackIntegrityError(f"{path.name} is {size} bytes, over the {MAX_VOICES_BYTES}-byte limit")
    names: list[str] = []
    rows_seen: set[int] = set()
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            if len(members) > MAX_VOICES:
                raise PackIntegrityError(f"{path.name} holds {len(members)} arrays; at most {MAX_VOICES}")
            expanded = sum(m.file_size for m in members)
            if expanded > MAX_VOICES_BYTES:  # a compressed .npz is loaded whole: bound what it expands to
                raise PackIntegrityError(
                    f"{path.name} expands to {expanded} bytes, over the {MAX_VOICES_BYTES}-byte limit"
                )
            for member in members:
                name = member.filename.removesuffix(".npy")
                if not member.filename.endswith(".npy") or not _VOICE_NAME.match(name):
                    raise PackIntegrityError(
                        f"{path.name}: {member.filename!r} is not a Kokoro voice (af_heart.npy, ...)"
                    )
                with archive.open(member) as handle:
                    version = np.lib.format.read_magic(handle)
                    if version == (1, 0):
                        shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)
                    elif version == (2, 0):
                        shape, fortran, dtype = np.lib.format.read_array_header_2_0(handle)
                    else:
                        raise ValueError(f"unsupported .npy version {version}")
                    header = handle.tell()
                if dtype != np.dtype("<f4") or fortran:
                    raise PackIntegrityError(f"{path.name}: voice {name} is {dtype}, not float32")
                if len(shape) != 3 or shape[1:] != (1, STYLE_DIM) or not 1 <= shape[0] <= MAX_STYLE_ROWS:
                    raise PackIntegrityError(
                        f"{path.name}: voice {name} has shape {list(shape)}, not [rows, 1, {STYLE_DIM}]"
                    )
                if member.file_size != header + shape[0] * STYLE_DIM * 4:
                    raise PackIntegrityError(f"{path.name}: voice {name} is truncated")
                names.append(name)
                rows_seen.add(int(shape[0]))
    except PackIntegrityError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise PackIntegrityError(f"{path.name} is not a NumPy .npz of voices: {exc}") from exc
    if not names:
        raise PackIntegrityError(f"{path.name} holds no voices")
    if len(rows_seen) != 1:
        raise PackIntegrityError(
            f"{path.name}: voices have different numbers of style rows {sorted(rows_seen)}"
        )
    return tuple(sorted(names)), rows_seen.pop()


def read_kokoro(path: Path) -> KokoroManifest:
    """Check a Kokoro model directory cheaply (module docstring); raises PackIntegrityError otherwise."""
    files = _plain_files(path)
    model = _one(path, [p for p in files if p.suffix == ".onnx"], ".onnx model")
    voices_file = _one(path, [p for p in files if p.suffix in _VOICES_SUFFIXES], "voices file (.bin or .npz)")
    vocab_file = _vocab_file(path, files)
    read_vocab(vocab_file)
    with model.open("rb") as handle:
        head = handle.read(2)
    if len(head) < 2 or head[0] != 0x08:  # an ONNX ModelProto starts with field 1 (ir_version), a varint
        raise PackIntegrityError(f"{model.name} is not an ONNX model")
    names, rows = read_voices_header(voices_file)
    languages = sorted({lang[0] for n in names if (lang := voice_language(n)) is not None})
    if not languages:
        raise PackIntegrityError(
            f"{voices_file.name}: no voice name starts with a known language letter "
            f"({', '.join(LANGUAGE_OF_PREFIX)}); the names are {', '.join(names[:10])}"
        )
    found = _VERSION.search(model.stem)
    return KokoroManifest(
        id=model.stem,
        version=found.group(1) if found else "1",
        onnx=model.name,
        voices_file=voices_file.name,
        vocab_file=vocab_file.name,
        voices=names,
        languages=tuple(languages),
        style_rows=rows,
        license=read_license(path, noun="model"),
    )


# ----- the deep check of an install ---------------------------------------------------------------------
@dataclass(frozen=True)
class Signature:
    """How a Kokoro ``.onnx`` is fed: the token input's name, whether ``speed`` is an integer, the output."""

    tokens: str
    speed_is_int: bool
    output: str


def signature(session: Any, where: str) -> Signature:
    """The Kokoro signature of an onnxruntime session, or PackIntegrityError saying what differs."""
    inputs = {i.name: i for i in session.get_inputs()}
    token_names = [n for n in _TOKEN_INPUTS if n in inputs]
    expected = "tokens int64 [1, n], style float32 [1, 256], speed float32 [1]"
    if len(token_names) != 1 or set(inputs) != {token_names[0], "style", "speed"}:
        raise PackIntegrityError(f"{where}: inputs {sorted(inputs)} are not Kokoro's ({expected})")
    tokens, style, speed = inputs[token_names[0]], inputs["style"], inputs["speed"]
    wrong = []
    if tokens.type != "tensor(int64)" or len(tokens.shape) != 2:
        wrong.append(f"{tokens.name} {tokens.type} {tokens.shape}")
    style_dim = style.shape[-1] if style.shape else 0
    if (
        style.type != "tensor(float)"
        or len(style.shape) != 2
        or not (style_dim == STYLE_DIM or not isinstance(style_dim, int))
    ):
        wrong.append(f"style {style.type} {style.shape}")
    if speed.type not in ("tensor(float)", "tensor(int32)") or len(speed.shape) != 1:
        wrong.append(f"speed {speed.type} {speed.shape}")
    outputs = session.get_outputs()
    if not outputs or outputs[0].type != "tensor(float)":
        wrong.append("first output " + (f"{outputs[0].type}" if outputs else "missing") + " (audio float32)")
    if wrong:
        raise PackIntegrityError(f"{where}: {'; '.join(wrong)} differ from Kokoro's signature ({expected})")
    return Signature(tokens.name, speed.type == "tensor(int32)", outputs[0].name)


def open_session(model: Path, *, threads: int = 1) -> Any:
    """An onnxruntime session of ``model`` (CPU); PackIntegrityError when it does not load."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = max(1, threads)
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph/InvalidProtobuf classes
        raise PackIntegrityError(f"{model.name} is not a loadable ONNX model: {exc}") from exc


def check_model(path: Path) -> KokoroManifest:
    """:func:`read_kokoro`, then the ``.onnx`` loaded, its signature checked and one run on two tokens (the
    first voice's style): its audio must be float32, finite and not empty."""
    import numpy as np

    manifest = read_kokoro(path)
    session = open_session(path / manifest.onnx)
    sig = signature(session, manifest.onnx)
    vocab = read_vocab(path / manifest.vocab_file)
    with np.load(path / manifest.voices_file, allow_pickle=False) as voices:
        style = np.asarray(voices[manifest.voices[0]][min(2, manifest.style_rows - 1)], dtype=np.float32)
    token = vocab.get("a", next(iter(vocab.values())))
    feeds = {
        sig.tokens: np.array([[0, token, token, 0]], dtype=np.int64),
        "style": style.reshape(1, STYLE_DIM),
        "speed": np.array([1], dtype=np.int32) if sig.speed_is_int else np.ones(1, dtype=np.float32),
    }
    try:
        audio = np.asarray(session.run([sig.output], feeds)[0])
    except Exception as exc:
        raise PackIntegrityError(f"{manifest.onnx} failed on a two-token test run: {exc}") from exc
    if audio.dtype != np.float32 or audio.size == 0 or not np.all(np.isfinite(audio)):
        raise PackIntegrityError(
            f"{manifest.onnx}: a test run gave {audio.size} samples of {audio.dtype}, not float32 audio"
        )
    return manifest


def _info(manifest: KokoroManifest, path: Path) -> KokoroInfo:
    return KokoroInfo(
        id=manifest.id,
        version=manifest.version,
        languages=manifest.languages,
        voices=len(manifest.voices),
        path=str(path),
        size_bytes=dir_size(path),
        license=manifest.license,
    )


KOKORO: ModelKind[KokoroManifest, KokoroInfo] = ModelKind(
    name="kokoro",
    noun="Kokoro model",
    read=read_kokoro,
    info=_info,
    markers=(),
    command="dragoman voices kokoro",
    install_hint=(
        "install one with `dragoman voices kokoro install kokoro-v1.0.onnx --voices voices-v1.0.bin "
        "--vocab config.json` (files or URLs)"
    ),
)
#: The same kind, reading with the deep check: what an install places has loaded and run.
_KOKORO_INSTALL = dataclasses.replace(KOKORO, read=check_model)


def kokoro_root(settings: Settings) -> Path:
    return settings.engine.packs_dir.parent / "kokoro"


class KokoroStore(ModelStore[KokoroManifest, KokoroInfo]):
    def __init__(self, settings: Settings, *, deep: bool = False) -> None:
        super().__init__(_KOKORO_INSTALL if deep else KOKORO, kokoro_root(settings))
        self.settings = settings


# ----- installing ---------------------------------------------------------------------------------------
def _is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def _url_name(url: str) -> str:
    name = Path(unquote(urlparse(url).path)).name
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "download"


def install(
    source: str | Path,
    settings: Settings,
    *,
    voices: str | Path | None = None,
    vocab: str | Path | None = None,
    sha256: str | None = None,
    progress: ProgressCallback | None = None,
    replace: bool = False,
) -> KokoroManifest:
    """Install a Kokoro model (module docstring); ``sha256`` checks the archive or the ``.onnx``."""
    store = KokoroStore(settings, deep=True)
    text = str(source)
    if text.split("?")[0].endswith(".onnx"):
        with tempfile.TemporaryDirectory(prefix="dragoman-kokoro-") as tmp:
            folder = Path(tmp) / "model"
            folder.mkdir()
            _stage(text, voices, vocab, sha256, folder)
            return install_model(
                store, folder, max_bytes=MAX_KOKORO_BYTES, progress=progress, replace=replace
            )
    if voices is not None or vocab is not None:
        raise InvalidRequest(
            "voices= and vocab= go with a .onnx source; a directory or archive holds all three files"
        )
    return install_model(
        store, source, max_bytes=MAX_KOKORO_BYTES, sha256=sha256, progress=progress, replace=replace
    )


def _stage(
    model: str, voices: str | Path | None, vocab: str | Path | None, sha256: str | None, folder: Path
) -> None:
    """The three files of a ``.onnx`` source copied or downloaded into ``folder``."""
    if _is_url(model):
        if voices is None or vocab is None:
            raise InvalidRequest(
                "a .onnx URL needs voices= (voices-v1.0.bin) and vocab= (Kokoro-82M's config.json), "
                "each a file or a URL"
            )
        onnx_name = _url_name(model.split("?")[0])
    else:
        path = Path(model).expanduser()
        if not path.is_file():
            raise InvalidRequest(f"{model!r} is not an existing .onnx file or an http(s) URL")
        beside = [p for p in path.parent.iterdir() if p.suffix in _VOICES_SUFFIXES and p.is_file()]
        if voices is None and len(beside) == 1:
            voices = beside[0]
        if vocab is None and (path.parent / "config.json").is_file():
            vocab = path.parent / "config.json"
        if voices is None or vocab is None:
            missing = " and ".join(
                what for what, given in (("voices=", voices), ("vocab=", vocab)) if given is None
            )
            raise InvalidRequest(
                f"{path.name} needs {missing}: no single voices .bin/.npz or config.json is beside it"
            )
        onnx_name = path.name
    digest = _get(model, folder / onnx_name, MAX_KOKORO_BYTES)
    expected = sha256.strip().lower().removeprefix("sha256:") if sha256 is not None else None
    if expected is not None and digest != expected:
        raise PackIntegrityError(f"{model} has sha256 {digest}, expected {expected}; nothing was installed")
    voices_text = str(voices)
    voices_name = _url_name(voices_text) if _is_url(voices_text) else Path(voices_text).name
    if Path(voices_name).suffix not in _VOICES_SUFFIXES:
        voices_name += ".bin"
    _get(voices_text, folder / voices_name, MAX_VOICES_BYTES)
    _get(str(vocab), folder / "config.json", MAX_VOCAB_BYTES)


def _get(source: str, dest: Path, limit: int) -> str:
    """``source`` (a file or an http(s) URL) copied to ``dest``, at most ``limit`` bytes; its sha256."""
    digest = hashlib.sha256()
    if not _is_url(source):
        path = Path(source).expanduser()
        if not path.is_file():
            raise InvalidRequest(f"{source!r} is not an existing file or an http(s) URL")
        size = path.stat().st_size
        if size > limit:
            raise PackIntegrityError(f"{path.name} is {size} bytes, over the {limit}-byte limit; refused")
        with path.open("rb") as src, dest.open("wb") as out:
            while chunk := src.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
        return digest.hexdigest()

    def check(response: Any, state: Transfer) -> None:
        if response.status_code != 200:
            raise PackInstallError(
                f"downloading {source} failed: HTTP {response.status_code}; nothing installed"
            )

    def too_big(size: int) -> PackIntegrityError:
        return PackIntegrityError(f"{source} is over {limit} bytes ({size}); refused")

    with dest.open("wb") as out:

        def sink(chunk: bytes, state: Transfer) -> None:
            out.write(chunk)
            digest.update(chunk)

        got = fetch(
            source,
            pace=Pace(deadline=3600.0, read_timeout=60.0, min_rate=10_000.0, grace=30.0),
            limit=limit,
            sink=sink,
            too_big=too_big,
            check=check,
        )
    if got.total and got.raw != got.total:
        raise PackInstallError(f"downloading {source} was interrupted: got {got.raw} of {got.total} bytes")
    return digest.hexdigest()


def remove(model_id: str, settings: Settings) -> Path:
    return KokoroStore(settings).remove(model_id)
