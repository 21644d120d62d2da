"""Pack manifests: what a pack directory holds, read and checked without loading the model.

Two on-disk layouts are packs:

* **Argos Translate pair packs**, installed unchanged: ``metadata.json`` (``from_code``, ``to_code``,
  ``package_version``, ...), ``model/`` (a CTranslate2 model) and ``sentencepiece.model``. An optional
  ``dragoman-pack.json`` beside them may add ``license``, ``quality`` and ``speed``.
* **Multilingual packs** (NLLB-200, M2M-100 converted with CTranslate2's converters):
  ``dragoman-pack.json`` with ``kind: "multilingual"``, the FLORES codes it covers, how language tokens
  are spelled (``token_style`` ``"flores"`` as NLLB's ``eng_Latn``, or ``"m2m"`` as ``__en__``), the
  SentencePiece file, the model's input limit and its licence (NLLB weights are CC-BY-NC-4.0).

Quality and speed ranks (1-5, higher is better) come from the manifest, with these defaults per kind:
Apertium 2/5 (rule-based, fast), Argos pair 3/3, multilingual 4/1.

Nothing in a pack directory is trusted, whether it was installed or copied in by hand: every manifest field
is type- and range-checked, manifests are read up to :data:`MAX_MANIFEST_BYTES`, the paths a manifest names
(``model``, ``sentencepiece``) must be relative and stay inside the pack, and the directory may hold only
folders, regular files and links that resolve inside the pack (no link out, no FIFO or device that would
block a reader), at most :data:`MAX_PACK_ENTRIES` of them. Whatever is wrong, :func:`read_manifest` raises
``PackIntegrityError`` (``PackUnsafe`` for content reaching outside the pack) and nothing else, so that the
store lists the directory as broken and every other pack keeps working.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dragoman.errors import PackIntegrityError, PackUnsafe, UnknownLanguage
from dragoman.languages.catalogue import resolve
from dragoman.models.types import PackKind

MANIFEST_NAME = "dragoman-pack.json"
ARGOS_METADATA = "metadata.json"
DEFAULT_RANKS: dict[str, tuple[int, int]] = {"apertium": (2, 5), "argos": (3, 3), "multilingual": (4, 1)}
DEFAULT_MAX_INPUT_TOKENS = {"argos": 256, "multilingual": 512}
TokenStyle = Literal["flores", "m2m", "none"]
#: Largest manifest (``dragoman-pack.json``, ``metadata.json``) read; real ones are a few hundred bytes.
MAX_MANIFEST_BYTES = 1024 * 1024
#: Files, folders and links a pack directory may hold (a converted model has a handful).
MAX_PACK_ENTRIES = 10_000
#: Bounds of ``max_input_tokens`` (CTranslate2 models take 256 to 1024; 65536 is far beyond any).
MAX_INPUT_TOKENS_RANGE = (1, 65_536)
#: First bytes of a LICENSE file read for its first line.
LICENSE_HEAD_BYTES = 4096
#: Characters of that line kept (a hub licence names its repo: ``mit (from the model card of OWNER/REPO)``).
LICENSE_LINE_CHARS = 200
#: How a model that states no licence starts its licence text.
UNKNOWN_LICENSE = "unknown"
#: A pack id is a directory name: the same rule the installer applies.
PACK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")


@dataclass(frozen=True)
class PackManifest:
    id: str
    kind: PackKind
    version: str
    license: str
    languages: tuple[str, ...]  # FLORES codes
    pairs: tuple[tuple[str, str], ...]  # (source, target) FLORES pairs the pack translates
    quality: int
    speed: int
    model_dir: str = "model"
    sentencepiece: str = "sentencepiece.model"
    target_sentencepiece: str | None = None  # a separate target-side model (OPUS-MT style)
    token_style: TokenStyle = "none"
    lang_tokens: tuple[tuple[str, str], ...] = ()  # explicit FLORES -> token overrides
    max_input_tokens: int = 256
    description: str = ""

    def token_for(self, flores: str) -> str:
        """The language token of a multilingual model for a FLORES code."""
        for code, token in self.lang_tokens:
            if code == flores:
                return token
        if self.token_style == "flores":
            return flores
        if self.token_style == "m2m":
            from dragoman.languages.catalogue import get

            return f"__{get(flores).bcp47.split('-')[0]}__"
        raise PackIntegrityError(f"pack {self.id} has no language token for {flores}")


def _read_head(path: Path, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of a regular file (never opens a FIFO or device: it could block)."""
    st = path.stat()
    if not stat.S_ISREG(st.st_mode):
        raise PackUnsafe(f"{path} is not a regular file; a pack holds only files and folders")
    with path.open("rb") as handle:
        return handle.read(limit + 1)


def _load_json(path: Path) -> dict[str, Any]:
    try:
        raw = _read_head(path, MAX_MANIFEST_BYTES)
    except FileNotFoundError as exc:
        raise PackIntegrityError(f"{path} is missing") from exc
    except OSError as exc:
        raise PackIntegrityError(f"{path} cannot be read: {exc}") from exc
    if len(raw) > MAX_MANIFEST_BYTES:
        raise PackIntegrityError(f"{path} is over {MAX_MANIFEST_BYTES} bytes; not a pack manifest")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise PackIntegrityError(f"{path} is not valid JSON: {type(exc).__name__}: {exc}") from exc
    if not isinstance(data, dict):
        raise PackIntegrityError(f"{path} must hold a JSON object")
    return data


def _rank(data: dict[str, Any], key: str, default: int, where: Path) -> int:
    value = data.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 5:
        raise PackIntegrityError(f"{where}: {key} must be an integer from 1 to 5, got {value!r}")
    return value


def _text(data: dict[str, Any], key: str, default: str, where: Path) -> str:
    """A string field (numbers are taken as their text, as ``package_version: 1.9`` is common)."""
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise PackIntegrityError(f"{where}: {key} must be a string, got {type(value).__name__}")
    return str(value)


def _max_tokens(data: dict[str, Any], default: int, where: Path) -> int:
    value = data.get("max_input_tokens", default)
    low, high = MAX_INPUT_TOKENS_RANGE
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise PackIntegrityError(
            f"{where}: max_input_tokens must be an integer from {low} to {high}, got {value!r}"
        )
    return value


def _inner_path(data: dict[str, Any], key: str, default: str, where: Path) -> str:
    """A path the manifest names inside the pack: relative, without '..', no drive, no NUL."""
    value = data.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise PackIntegrityError(f"{where}: {key} must be a relative path inside the pack, got {value!r}")
    normal = value.replace("\\", "/")
    parts = [p for p in normal.split("/") if p not in ("", ".")]
    if "\0" in value or normal.startswith("/") or re.match(r"^[A-Za-z]:", normal) or ".." in parts:
        raise PackUnsafe(
            f"{where}: {key} {value!r} points outside the pack (absolute or with '..'); "
            "a pack's files must lie inside its directory"
        )
    if not parts:
        raise PackIntegrityError(f"{where}: {key} must name a file or folder inside the pack, got {value!r}")
    return "/".join(parts)


def _pack_id(value: Any, where: Path) -> str:
    if not isinstance(value, str) or not PACK_ID.match(value):
        raise PackIntegrityError(
            f"{where}: pack id {value!r} is not a safe directory name "
            "(letters, digits, '.', '_', '-', '+'; at most 128)"
        )
    return value


def check_contained(directory: Path) -> None:
    """Refuse a directory holding links that resolve outside it, or anything but folders and regular files.

    Walks without following links; each link must resolve (whole chain) inside the directory's real path and
    end at a folder or a regular file. Raises PackUnsafe, or PackIntegrityError when there are more than
    :data:`MAX_PACK_ENTRIES` entries or a folder cannot be read.
    """
    real_root = os.path.realpath(directory)
    count = 0

    def fail(exc: OSError) -> None:
        raise PackIntegrityError(f"{exc.filename or directory} cannot be read: {exc.strerror or exc}")

    for top, dirs, files in os.walk(directory, onerror=fail):
        for name in (*dirs, *files):
            count += 1
            if count > MAX_PACK_ENTRIES:
                raise PackIntegrityError(f"{directory} holds more than {MAX_PACK_ENTRIES} files and folders")
            path = os.path.join(top, name)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                target = os.path.realpath(path)
                if os.path.commonpath([real_root, target]) != real_root:
                    rel = os.path.relpath(path, directory)
                    raise PackUnsafe(
                        f"{directory}: {rel} is a link to {target}, outside the pack; refused "
                        "(a pack's files must lie inside its directory)"
                    )
                try:
                    st = os.stat(path)
                except OSError as exc:
                    rel = os.path.relpath(path, directory)
                    raise PackIntegrityError(
                        f"{directory}: {rel} is a dangling link ({exc.strerror})"
                    ) from exc
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                rel = os.path.relpath(path, directory)
                raise PackUnsafe(
                    f"{directory}: {rel} is a special file (FIFO, socket or device); a pack holds only "
                    "files and folders"
                )


def _flores(code: Any, where: Path, field: str) -> str:
    if not isinstance(code, str):
        raise PackIntegrityError(f"{where}: {field} must be a language code, got {code!r}")
    try:
        return resolve(code)
    except UnknownLanguage as exc:
        raise PackIntegrityError(f"{where}: {field} {code!r} is not a known language: {exc.message}") from exc


def read_license(directory: Path, extra: dict[str, Any] | None = None, *, noun: str = "pack") -> str:
    """A model's licence: ``extra["license"]`` (a pack's ``dragoman-pack.json``), else the first line of its
    ``LICENSE`` file (what an install from the Hugging Face Hub writes, the card's licence with
    non-commercial ones marked ``NON-COMMERCIAL``), else ``unknown (the NOUN states none)``.

    Every kind reads its licence here: translation packs, speech recognition models and voices. A model
    installed before its kind showed licences has its ``LICENSE`` file read the same way, or is unknown.
    """
    value = (extra or {}).get("license")
    if isinstance(value, str) and value.strip():
        return value.strip()
    for name in ("LICENSE", "LICENSE.txt", "LICENSE.md", "license.txt"):
        path = directory / name
        if path.is_file():
            head = _read_head(path, LICENSE_HEAD_BYTES)[:LICENSE_HEAD_BYTES]
            first = head.decode("utf-8", errors="replace").strip().splitlines()
            return first[0][:LICENSE_LINE_CHARS] if first else "see LICENSE"
    return f"{UNKNOWN_LICENSE} (the {noun} states none)"


def _check_files(directory: Path, model_dir: str, sp_files: list[str], pack_id: str) -> None:
    model = directory / model_dir
    if not (model / "model.bin").is_file():
        raise PackIntegrityError(f"pack {pack_id}: {model}/model.bin is missing (not a CTranslate2 model)")
    for name in sp_files:
        if not (directory / name).is_file():
            raise PackIntegrityError(f"pack {pack_id}: SentencePiece model {directory / name} is missing")


def read_manifest(directory: Path) -> PackManifest:
    """Read and check a pack directory (structure only; the model is not loaded).

    Raises PackIntegrityError (PackUnsafe for content reaching outside the pack) and nothing else.
    """
    try:
        return _read_manifest(directory)
    except PackIntegrityError:
        raise
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise PackIntegrityError(
            f"{directory} cannot be read as a pack: {type(exc).__name__}: {exc}"
        ) from exc


def _read_manifest(directory: Path) -> PackManifest:
    if not directory.is_dir():
        raise PackIntegrityError(f"{directory} is not a directory")
    check_contained(directory)
    extra = _load_json(directory / MANIFEST_NAME) if (directory / MANIFEST_NAME).is_file() else {}
    kind = extra.get("kind", "argos" if (directory / ARGOS_METADATA).is_file() else None)
    if kind == "argos":
        return _read_argos(directory, extra)
    if kind == "multilingual":
        return _read_multilingual(directory, extra)
    raise PackIntegrityError(
        f"{directory} is not a pack: it needs {ARGOS_METADATA} (Argos layout) or {MANIFEST_NAME} "
        'with "kind": "multilingual"'
    )


def _read_argos(directory: Path, extra: dict[str, Any]) -> PackManifest:
    meta_path = directory / ARGOS_METADATA
    meta = _load_json(meta_path)
    extra_path = directory / MANIFEST_NAME  # where the optional fields of ``extra`` come from
    source = _flores(meta.get("from_code"), meta_path, "from_code")
    target = _flores(meta.get("to_code"), meta_path, "to_code")
    version = _text(meta, "package_version", _text(extra, "version", "0", extra_path), meta_path)
    pack_id = _pack_id(extra.get("id") or f"argos-{meta.get('from_code')}-{meta.get('to_code')}", extra_path)
    sp = _inner_path(extra, "sentencepiece", "sentencepiece.model", extra_path)
    target_sp = (
        _inner_path(extra, "target_sentencepiece", "", extra_path)
        if extra.get("target_sentencepiece") is not None
        else None
    )  # OPUS-MT models have one per side (source.spm, target.spm)
    _check_files(directory, "model", [sp, *([target_sp] if target_sp else [])], pack_id)
    quality, speed = DEFAULT_RANKS["argos"]
    return PackManifest(
        id=pack_id,
        kind="argos",
        version=version,
        license=read_license(directory, extra),
        languages=(source, target),
        pairs=((source, target),),
        quality=_rank(extra, "quality", quality, extra_path),
        speed=_rank(extra, "speed", speed, extra_path),
        sentencepiece=sp,
        target_sentencepiece=target_sp,
        max_input_tokens=_max_tokens(extra, DEFAULT_MAX_INPUT_TOKENS["argos"], extra_path),
        description=_text(meta, "description", "", meta_path),
    )


def _read_multilingual(directory: Path, data: dict[str, Any]) -> PackManifest:
    where = directory / MANIFEST_NAME
    if not data.get("id"):
        raise PackIntegrityError(f"{where}: id is required")
    pack_id = _pack_id(data.get("id"), where)
    codes = data.get("languages")
    if not isinstance(codes, list) or len(codes) < 2:
        raise PackIntegrityError(f"{where}: languages must list at least two language codes")
    languages = tuple(dict.fromkeys(_flores(c, where, "languages") for c in codes))
    style = data.get("token_style", "flores")
    if style not in ("flores", "m2m"):
        raise PackIntegrityError(f"{where}: token_style must be 'flores' or 'm2m', got {style!r}")
    tokens_raw = data.get("lang_tokens", {})
    if not isinstance(tokens_raw, dict):
        raise PackIntegrityError(f"{where}: lang_tokens must be an object")
    if not all(isinstance(v, str) and v for v in tokens_raw.values()):
        raise PackIntegrityError(f"{where}: lang_tokens must map language codes to token strings")
    lang_tokens = tuple((_flores(k, where, "lang_tokens"), str(v)) for k, v in tokens_raw.items())
    sp = _inner_path(data, "sentencepiece", "sentencepiece.model", where)
    model_dir = _inner_path(data, "model", "model", where)
    _check_files(directory, model_dir, [sp], pack_id)
    quality, speed = DEFAULT_RANKS["multilingual"]
    return PackManifest(
        id=pack_id,
        kind="multilingual",
        version=_text(data, "version", "0", where),
        license=read_license(directory, data),
        languages=languages,
        pairs=tuple((s, t) for s in languages for t in languages if s != t),
        quality=_rank(data, "quality", quality, where),
        speed=_rank(data, "speed", speed, where),
        model_dir=model_dir,
        sentencepiece=sp,
        token_style=style,
        lang_tokens=lang_tokens,
        max_input_tokens=_max_tokens(data, DEFAULT_MAX_INPUT_TOKENS["multilingual"], where),
        description=_text(data, "description", "", where),
    )
