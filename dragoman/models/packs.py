"""MT packs as a model kind: the store in ``settings.engine.packs_dir``, install from the Argos index,
status info.

The kind supplies what is particular to packs (:func:`dragoman.models.manifest.read_manifest` as the
structural check, :class:`PackInfo` as the info, the Argos index for names like ``en:es``); storing,
installing, verifying and removing are the generic code of :mod:`dragoman.models.store` and
:mod:`dragoman.models.install`. The on-disk layout is the one packs have always had: ``<packs_dir>/<id>``.
"""

from __future__ import annotations

from pathlib import Path

from dragoman.models.index import fetch_index, is_index_name, pick
from dragoman.models.install import Download, ModelIndex, install_model
from dragoman.models.kind import ModelKind
from dragoman.models.manifest import ARGOS_METADATA, MANIFEST_NAME, PackManifest, read_manifest
from dragoman.models.store import ModelStore, dir_size
from dragoman.models.types import PackInfo
from dragoman.progress import ProgressCallback
from dragoman.settings import Settings

INSTALL_HINT = (
    "install one with `dragoman packs install NAME_OR_PATH_OR_URL` (`dragoman packs available` lists)"
)


def pack_info(manifest: PackManifest, path: Path, *, loaded: bool = False) -> PackInfo:
    """The status view of an installed pack."""
    return PackInfo(
        id=manifest.id,
        kind=manifest.kind,
        languages=manifest.languages,
        pairs=manifest.pairs,
        path=str(path),
        size_bytes=dir_size(path),
        version=manifest.version,
        license=manifest.license,
        quality=manifest.quality,
        speed=manifest.speed,
        loaded=loaded,
    )


def _info(manifest: PackManifest, path: Path) -> PackInfo:
    return pack_info(manifest, path)


#: Translation packs: Argos pair packs and multilingual (NLLB-200, M2M-100) CTranslate2 packs.
MT: ModelKind[PackManifest, PackInfo] = ModelKind(
    name="mt",
    noun="pack",
    read=read_manifest,
    info=_info,
    markers=(MANIFEST_NAME, ARGOS_METADATA),
    command="dragoman packs",
    install_hint=INSTALL_HINT,
)


class PackStore(ModelStore[PackManifest, PackInfo]):
    """The packs installed in ``settings.engine.packs_dir``; every call reads the directory afresh."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(MT, settings.engine.packs_dir)
        self.settings = settings


def argos_index(settings: Settings) -> ModelIndex:
    """The Argos package index (``settings.engine.argos_index_url``) as the MT kind's index."""

    def resolve(name: str) -> Download:
        entry = pick(fetch_index(settings), name, where=f"the Argos index {settings.engine.argos_index_url}")
        return Download(entry.links, entry.sha256)

    return ModelIndex(
        names="an index name (translate-en_es, en:es)",
        listing="dragoman packs available",
        matches=is_index_name,
        resolve=resolve,
    )


def install(
    source: str | Path,
    settings: Settings,
    *,
    sha256: str | None = None,
    progress: ProgressCallback | None = None,
    replace: bool = False,
) -> PackManifest:
    """Install a pack from a directory, an archive file, an http(s) URL or an Argos index name.

    See :func:`dragoman.models.install.install_model`; the size limit is ``settings.engine.max_pack_bytes``.
    """
    return install_model(
        PackStore(settings),
        source,
        max_bytes=settings.engine.max_pack_bytes,
        sha256=sha256,
        progress=progress,
        replace=replace,
        index=argos_index(settings),
    )
