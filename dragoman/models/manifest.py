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
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dragoman.errors import PackIntegrityError, UnknownLanguage
from dragoman.languages.catalogue import resolve
from dragoman.models.types import PackKind

MANIFEST_NAME = "dragoman-pack.json"
ARGOS_METADATA = "metadata.json"
DEFAULT_RANKS: dict[str, tuple[int, int]] = {"apertium": (2, 5), "argos": (3, 3), "multilingual": (4, 1)}
DEFAULT_MAX_INPUT_TOKENS = {"argos": 256, "multilingual": 512}
TokenStyle = Literal["flores", "m2m", "none"]


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


def _load_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise PackIntegrityError(f"{path} is missing") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PackIntegrityError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise PackIntegrityError(f"{path} must hold a JSON object")
    return data


def _rank(data: dict[str, Any], key: str, default: int, where: Path) -> int:
    value = data.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 5:
        raise PackIntegrityError(f"{where}: {key} must be an integer from 1 to 5, got {value!r}")
    return value


def _flores(code: Any, where: Path, field: str) -> str:
    if not isinstance(code, str):
        raise PackIntegrityError(f"{where}: {field} must be a language code, got {code!r}")
    try:
        return resolve(code)
    except UnknownLanguage as exc:
        raise PackIntegrityError(f"{where}: {field} {code!r} is not a known language: {exc.message}") from exc


def _read_license(directory: Path, extra: dict[str, Any]) -> str:
    value = extra.get("license")
    if isinstance(value, str) and value.strip():
        return value.strip()
    for name in ("LICENSE", "LICENSE.txt", "LICENSE.md", "license.txt"):
        path = directory / name
        if path.is_file():
            first = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
            return first[0][:120] if first else "see LICENSE"
    return "unknown (the pack states none)"


def _check_files(directory: Path, model_dir: str, sp_files: list[str], pack_id: str) -> None:
    model = directory / model_dir
    if not (model / "model.bin").is_file():
        raise PackIntegrityError(f"pack {pack_id}: {model}/model.bin is missing (not a CTranslate2 model)")
    for name in sp_files:
        if not (directory / name).is_file():
            raise PackIntegrityError(f"pack {pack_id}: SentencePiece model {directory / name} is missing")


def read_manifest(directory: Path) -> PackManifest:
    """Read and check a pack directory (structure only; the model is not loaded)."""
    if not directory.is_dir():
        raise PackIntegrityError(f"{directory} is not a directory")
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
    source = _flores(meta.get("from_code"), meta_path, "from_code")
    target = _flores(meta.get("to_code"), meta_path, "to_code")
    version = str(meta.get("package_version", extra.get("version", "0")))
    pack_id = str(extra.get("id") or f"argos-{meta.get('from_code')}-{meta.get('to_code')}")
    sp = str(extra.get("sentencepiece", "sentencepiece.model"))
    _check_files(directory, "model", [sp], pack_id)
    quality, speed = DEFAULT_RANKS["argos"]
    return PackManifest(
        id=pack_id,
        kind="argos",
        version=version,
        license=_read_license(directory, extra),
        languages=(source, target),
        pairs=((source, target),),
        quality=_rank(extra, "quality", quality, meta_path),
        speed=_rank(extra, "speed", speed, meta_path),
        sentencepiece=sp,
        max_input_tokens=int(extra.get("max_input_tokens", DEFAULT_MAX_INPUT_TOKENS["argos"])),
        description=str(meta.get("description", "")),
    )


def _read_multilingual(directory: Path, data: dict[str, Any]) -> PackManifest:
    where = directory / MANIFEST_NAME
    pack_id = data.get("id")
    if not isinstance(pack_id, str) or not pack_id.strip():
        raise PackIntegrityError(f"{where}: id is required")
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
    lang_tokens = tuple((_flores(k, where, "lang_tokens"), str(v)) for k, v in tokens_raw.items())
    sp = str(data.get("sentencepiece", "sentencepiece.model"))
    model_dir = str(data.get("model", "model"))
    _check_files(directory, model_dir, [sp], pack_id)
    quality, speed = DEFAULT_RANKS["multilingual"]
    return PackManifest(
        id=pack_id,
        kind="multilingual",
        version=str(data.get("version", "0")),
        license=_read_license(directory, data),
        languages=languages,
        pairs=tuple((s, t) for s in languages for t in languages if s != t),
        quality=_rank(data, "quality", quality, where),
        speed=_rank(data, "speed", speed, where),
        model_dir=model_dir,
        sentencepiece=sp,
        token_style=style,
        lang_tokens=lang_tokens,
        max_input_tokens=int(data.get("max_input_tokens", DEFAULT_MAX_INPUT_TOKENS["multilingual"])),
        description=str(data.get("description", "")),
    )
