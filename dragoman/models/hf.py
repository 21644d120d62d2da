"""Models from the Hugging Face Hub: ``hf:OWNER/REPO[/SUBDIR][@REVISION]`` as an install source (issue 17).

:func:`dragoman.models.install.install_model` hands such a source to :func:`stage`, which

1. asks the hub (``HfApi.model_info`` with file metadata, at ``HF_ENDPOINT``) what the revision holds: its
   commit, every file's size and hash (sha256 for LFS files, the git blob id for the others). A repo naming a
   file outside itself (absolute, ``..``, backslashes, control characters) is refused before anything is
   fetched; so is one whose declared sizes exceed the kind's limit;
2. downloads the files the model's kind needs (``snapshot_download`` with ``allow_patterns`` and the commit
   pinned) into huggingface_hub's own cache, which resumes an interrupted download and serves later installs;
   with ``HF_HUB_OFFLINE=1`` only the cache is read (``local_files_only``), and a copy not cached is an error
   saying so;
3. copies them into the install's staging folder, hashing each one and checking it against what the hub
   declared (sha256 or git blob id, and size; offline, against the blob name in the cache, which is that
   hash) and against the size limit, whatever the hub said;
4. lays the files out as the kind expects: a CTranslate2 translation model becomes a pack (``model/`` plus a
   ``dragoman-pack.json``: pair models, OPUS-MT style, take their languages from the card or the repo's name;
   NLLB / M2M-100 conversions are told by their vocabulary's language tokens); a faster-whisper model and a
   Piper voice keep their files;
5. reads the licence from the model card's front matter (``license:``), marks non-commercial ones as such,
   and writes it in the manifest (translation packs) and a ``LICENSE`` file, which every kind reads as its
   licence (:func:`dragoman.models.manifest.read_license`): ``engine_status`` shows it for packs and
   speech recognition models, the voice catalogue (``list_voices``) for voices.

The install then goes on like every other source: the kind's structural check, the install record, the
atomic rename under the store lock.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dragoman.errors import InvalidRequest, PackInstallError, PackIntegrityError, PackUnsafe
from dragoman.languages.catalogue import resolve
from dragoman.progress import ProgressCallback

log = logging.getLogger("dragoman.models.hf")

PREFIX = "hf:"
_OWNER_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")
#: A repo file name we accept: relative, '/'-separated, no '..', printable, no glob characters.
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.+=@,-][A-Za-z0-9_.+=@, -]*(/[A-Za-z0-9_.+=@,-][A-Za-z0-9_.+=@, -]*)*$")
MAX_REPO_FILES = 100_000
CARD = "README.md"
MAX_CARD_BYTES = 1024 * 1024
CHUNK = 1 << 20
#: Licence identifiers (or words in them) that forbid commercial use.
_NON_COMMERCIAL = re.compile(r"(^|[-_ ])nc([-_ ]|$)|non[-_ ]?commercial|noncommercial", re.IGNORECASE)

#: The files each kind needs from a repo (fnmatch patterns on the path relative to the repo or SUBDIR).
KIND_PATTERNS: dict[str, tuple[str, ...]] = {
    "mt": (
        "model.bin",
        "config.json",
        "shared_vocabulary.*",
        "source_vocabulary.*",
        "target_vocabulary.*",
        "*.spm",
        "sentencepiece*.model",
        "spm*.model",
        "source.model",
        "target.model",
        CARD,
    ),
    "asr": (
        "model.bin",
        "config.json",
        "tokenizer.json",
        "vocabulary.json",
        "vocabulary.txt",
        "preprocessor_config.json",
        CARD,
    ),
    "voice": ("*.onnx", "*.onnx.json", "MODEL_CARD", CARD),
}


@dataclass(frozen=True)
class HubSource:
    """A parsed ``hf:`` source."""

    repo: str
    revision: str | None
    subdir: str = ""

    @property
    def text(self) -> str:
        path = f"{self.repo}/{self.subdir}" if self.subdir else self.repo
        return f"{PREFIX}{path}" + (f"@{self.revision}" if self.revision else "")


@dataclass(frozen=True)
class HubFile:
    path: str  # relative to the repo
    size: int | None
    sha256: str | None  # LFS files
    blob_id: str | None  # git blob sha1 (non-LFS files)


@dataclass(frozen=True)
class Staged:
    """What :func:`stage` leaves in the staging folder."""

    folder: Path
    hashes: dict[str, str]  # path relative to folder -> sha256
    label: str  # hf:OWNER/REPO[/SUBDIR]@COMMIT
    license: str


def is_hub_source(text: str) -> bool:
    return text.startswith(PREFIX)


def parse(text: str) -> HubSource:
    """``hf:OWNER/REPO[/SUBDIR][@REVISION]``; InvalidRequest when it is not one."""
    body = text[len(PREFIX) :] if is_hub_source(text) else text
    path, _, revision = body.partition("@")
    parts = path.split("/")
    repo = "/".join(parts[:2])
    subdir = "/".join(parts[2:])
    bad_parts = "" in parts or ".." in parts
    if not _OWNER_REPO.match(repo) or (subdir and not _SAFE_NAME.match(subdir)) or bad_parts:
        raise InvalidRequest(
            f"{text!r} is not a Hugging Face source: write hf:OWNER/REPO, hf:OWNER/REPO@REVISION (a branch, "
            "tag or commit) or hf:OWNER/REPO/FOLDER@REVISION"
        )
    if revision and (not _REVISION.match(revision) or ".." in revision):
        raise InvalidRequest(f"{text!r}: revision {revision!r} is not a branch, tag or commit name")
    return HubSource(repo=repo, revision=revision or None, subdir=subdir)


def source_name(text: str) -> str:
    """The name an ``hf:`` source installs as when none is given: the folder or repo name."""
    source = parse(text)
    return (source.subdir or source.repo).rsplit("/", 1)[-1]


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def _endpoint() -> str:
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def _safe(name: str, repo: str) -> str:
    if not _SAFE_NAME.match(name) or ".." in name.split("/") or len(name) > 1000:
        raise PackUnsafe(
            f"hf:{repo} lists a file named {name[:200]!r}, which is not a plain relative path inside the "
            "repo; nothing was downloaded"
        )
    return name


def _wanted(rel: str, patterns: tuple[str, ...]) -> bool:
    from fnmatch import fnmatchcase

    return "/" not in rel and any(fnmatchcase(rel, p) for p in patterns)


def _hub_error(source: HubSource, exc: Exception) -> PackInstallError | InvalidRequest:
    from huggingface_hub import errors

    where = f"{source.text} ({_endpoint()})"
    if isinstance(exc, errors.RevisionNotFoundError):
        return InvalidRequest(
            f"{where}: the repo has no revision {source.revision!r}; give a branch, tag or commit it has"
        )
    if isinstance(exc, errors.GatedRepoError):
        return PackInstallError(
            f"{where}: the repo is gated; accept its terms on the hub and log in (hf auth login)"
        )
    if isinstance(exc, errors.RepositoryNotFoundError):
        return InvalidRequest(f"{where}: no such model repo (or it is private); check OWNER/REPO")
    if isinstance(exc, errors.LocalEntryNotFoundError):
        return PackInstallError(
            f"{source.text}: offline (HF_HUB_OFFLINE) and no copy of it is in the Hugging Face cache; "
            "install it once with a network connection first"
        )
    return PackInstallError(f"{where}: the hub could not be reached or failed: {type(exc).__name__}: {exc}")


def _listing(source: HubSource, max_bytes: int) -> tuple[str, list[HubFile]]:
    """The commit and files of the revision, as the hub declares them."""
    from huggingface_hub import HfApi

    try:
        info = HfApi(endpoint=_endpoint()).model_info(
            source.repo, revision=source.revision, files_metadata=True
        )
    except Exception as exc:  # the hub's errors, httpx's, OSError: all mean "could not ask"
        raise _hub_error(source, exc) from exc
    commit = str(info.sha or "")
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise PackInstallError(f"{source.text}: the hub answered no commit id for the revision ({commit!r})")
    siblings = list(info.siblings or [])
    if len(siblings) > MAX_REPO_FILES:
        raise PackIntegrityError(
            f"{source.text} lists {len(siblings)} files; refused (over {MAX_REPO_FILES})"
        )
    files = []
    for sib in siblings:
        name = _safe(str(sib.rfilename), source.repo)
        lfs = sib.lfs
        files.append(
            HubFile(
                path=name,
                size=int(lfs.size) if lfs is not None else (int(sib.size) if sib.size is not None else None),
                sha256=str(lfs.sha256).lower() if lfs is not None else None,
                blob_id=str(sib.blob_id).lower() if sib.blob_id and lfs is None else None,
            )
        )
    return commit, files


def _select(source: HubSource, files: list[HubFile], kind: str) -> list[HubFile]:
    prefix = f"{source.subdir}/" if source.subdir else ""
    patterns = tuple(p for p in KIND_PATTERNS[kind] if not (prefix and p == CARD))
    chosen = [  # the card is the repo's own, at its top, whatever the folder
        f
        for f in files
        if (f.path.startswith(prefix) and _wanted(f.path[len(prefix) :], patterns)) or f.path == CARD
    ]
    if not [f for f in chosen if f.path.rsplit("/", 1)[-1] != CARD]:
        raise PackIntegrityError(
            f"{source.text} holds none of the files a {kind} model needs ({', '.join(KIND_PATTERNS[kind])})"
        )
    return chosen


def _git_blob_sha1(path: Path) -> str:
    digest = hashlib.sha1(usedforsecurity=False)
    digest.update(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _cache_etag(path: Path) -> str | None:
    """The blob name a cached snapshot file links to (its sha256, or its git blob id), when it is a link."""
    if not path.is_symlink():
        return None
    name = Path(os.readlink(path)).name.lower()
    return name if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", name) else None


def _cache_dir() -> str | None:
    """huggingface_hub's cache, read from the environment now (the library reads it once, on import)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return os.path.join(os.environ["HF_HOME"], "hub")
    return None


def _download(source: HubSource, commit: str | None, names: list[str] | None) -> Path:
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(
            source.repo,
            revision=commit or source.revision,
            allow_patterns=names,
            endpoint=_endpoint(),
            cache_dir=_cache_dir(),
            local_files_only=_offline(),
            max_workers=2,
        )
    except Exception as exc:
        raise _hub_error(source, exc) from exc
    return Path(str(folder))


def _offline_files(source: HubSource, folder: Path, kind: str) -> list[HubFile]:
    found = []
    for top, _dirs, names in os.walk(folder):
        for name in names:
            rel = (Path(top) / name).relative_to(folder).as_posix()
            found.append(HubFile(path=_safe(rel, source.repo), size=None, sha256=None, blob_id=None))
    return _select(source, found, kind)


def _copy_checked(
    src: Path, dest: Path, want: HubFile, budget: list[int], report: ProgressCallback, label: str
) -> str:
    """Copy a cached file into staging, hashing it; checks size, sha256 / git blob id and the byte budget."""
    etag = _cache_etag(src)
    digest = hashlib.sha256()
    size = 0
    dest.parent.mkdir(parents=True, exist_ok=True)
    with src.open("rb") as handle, dest.open("wb") as out:
        while chunk := handle.read(CHUNK):
            size += len(chunk)
            budget[0] -= len(chunk)
            if budget[0] < 0:
                raise PackIntegrityError(
                    f"{label}: {want.path} takes the model over the size limit; refused (the hub declared "
                    f"{want.size} bytes for it)"
                )
            digest.update(chunk)
            out.write(chunk)
            report(size, want.size or 0, f"copying {want.path}")
    sha = digest.hexdigest()
    problems = []
    if want.size is not None and size != want.size:
        problems.append(f"{size} bytes where the hub declared {want.size}")
    if want.sha256 is not None and sha != want.sha256:
        problems.append(f"sha256 {sha} where the hub declared {want.sha256}")
    if want.blob_id is not None and _git_blob_sha1(dest) != want.blob_id:
        problems.append(f"git blob id differs from the hub's {want.blob_id}")
    if etag is not None and etag != (sha if len(etag) == 64 else _git_blob_sha1(dest)):
        problems.append(f"the cached blob {etag} does not hold what its name says (a damaged cache)")
    if problems:
        raise PackIntegrityError(
            f"{label}: {want.path} is not the file the hub published ({'; '.join(problems)}); nothing was "
            "installed. Delete it from the Hugging Face cache (hf cache rm) and retry"
        )
    return sha


def _front_matter(text: str) -> dict[str, Any]:
    if not text.startswith("---"):
        return {}
    try:
        from huggingface_hub import ModelCard

        card: Any = ModelCard(text, ignore_metadata_errors=True).data
        data = card.to_dict()
    except Exception as exc:  # a malformed card is no reason to refuse the model
        log.warning("the model card's front matter cannot be read: %s", exc)
        return {}
    return data if isinstance(data, dict) else {}


def licence(card: dict[str, Any], repo: str) -> str:
    """The licence a card states, non-commercial ones marked so; 'unknown' when it states none."""
    value = card.get("license")
    names = [str(v) for v in value] if isinstance(value, list) else ([str(value)] if value else [])
    if card.get("license_name"):
        names.append(str(card["license_name"]))
    if not names:
        return f"unknown (the model card of {repo} states none; check the repo before any use)"
    text = ", ".join(dict.fromkeys(names))
    if any(_NON_COMMERCIAL.search(n) for n in names):
        return f"{text} (NON-COMMERCIAL use only; from the model card of {repo})"
    return f"{text} (from the model card of {repo})"


def stage(
    text: str,
    kind: str,
    work: Path,
    *,
    max_bytes: int,
    report: ProgressCallback,
    pack_id: str | None = None,
) -> Staged:
    """Fetch an ``hf:`` source through the hub's cache into ``work`` and lay it out for ``kind``."""
    source = parse(text)
    if kind not in KIND_PATTERNS:
        raise InvalidRequest(f"models of kind {kind!r} cannot be installed from the Hugging Face Hub")
    if _offline():
        prefix = f"{source.subdir}/" if source.subdir else ""
        wanted = [prefix + p for p in KIND_PATTERNS[kind]] + ([CARD] if prefix else [])
        folder = _download(source, None, wanted)  # a snapshot's other files need not be cached
        commit = folder.name if re.fullmatch(r"[0-9a-f]{40}", folder.name) else (source.revision or "main")
        chosen = _offline_files(source, folder, kind)
    else:
        commit, files = _listing(source, max_bytes)
        chosen = _select(source, files, kind)
        declared = sum(f.size or 0 for f in chosen)
        if declared > max_bytes:
            raise PackIntegrityError(
                f"{source.text} declares {declared} bytes for its {kind} files, over the limit of "
                f"{max_bytes}; refused before downloading"
            )
        # The revision by name, so that the cache records it (refs/) for offline use; the snapshot must be the
        # commit the listing described.
        folder = _download(source, None, [f.path for f in chosen])
        if folder.name != commit:
            raise PackInstallError(
                f"{source.text} moved from commit {commit} to {folder.name} while it was being installed; "
                "retry"
            )
    label = HubSource(source.repo, commit, source.subdir).text  # what reinstalls exactly this model
    raw = work / "hub"
    budget = [max_bytes]
    prefix = f"{source.subdir}/" if source.subdir else ""
    for want in chosen:
        src = folder / want.path
        if not src.is_file():
            raise PackInstallError(f"{label}: {want.path} is missing from the downloaded snapshot; retry")
        rel = want.path[len(prefix) :] if want.path.startswith(prefix) else want.path
        _copy_checked(src, raw / rel, want, budget, report, label)
    card: dict[str, Any] = {}
    if (raw / CARD).is_file() and (raw / CARD).stat().st_size <= MAX_CARD_BYTES:
        card = _front_matter((raw / CARD).read_text(encoding="utf-8", errors="replace"))
    licence_text = licence(card, source.repo)
    (raw / "LICENSE").write_text(licence_text + "\n", encoding="utf-8")
    layouts: dict[str, Callable[[Path, Path, HubSource, str, str, dict[str, Any], str | None], None]] = {
        "mt": _layout_mt,
        "asr": _layout_plain,
        "voice": _layout_plain,
    }
    out = work / "hub-model"
    layouts[kind](raw, out, source, commit, licence_text, card, pack_id)
    return Staged(folder=out, hashes=dict(_hash_tree(out)), label=label, license=licence_text)


def _hash_tree(root: Path) -> Iterator[tuple[str, str]]:
    for top, _dirs, names in os.walk(root):
        for name in names:
            path = Path(top) / name
            digest = hashlib.sha256()
            with path.open("rb") as handle:
                while chunk := handle.read(CHUNK):
                    digest.update(chunk)
            yield path.relative_to(root).as_posix(), digest.hexdigest()


def _layout_plain(
    raw: Path, out: Path, source: HubSource, commit: str, lic: str, card: dict[str, Any], pack_id: str | None
) -> None:
    (raw / "VERSION").write_text(commit[:12] + "\n", encoding="utf-8")
    raw.rename(out)


# --- translation models ---------------------------------------------------------------------------------
_FLORES_TOKEN = re.compile(r"^[a-z]{3}_[A-Z][a-z]{3}$")
_M2M_TOKEN = re.compile(r"^__([a-z]{2,3})__$")
_PAIR_NAME = re.compile(r"(?:^|[-_])(?:opus-mt|mt)-(?:tc-big-|tc-)?([a-z]{2,3})-([a-z]{2,3})(?:$|[-_])")
MAX_VOCAB_BYTES = 64 * 1024 * 1024


def _vocabulary(raw: Path) -> list[str]:
    for name in ("shared_vocabulary", "source_vocabulary"):
        for suffix, parse_json in ((".json", True), (".txt", False)):
            path = raw / f"{name}{suffix}"
            if path.is_file() and path.stat().st_size <= MAX_VOCAB_BYTES:
                text = path.read_text(encoding="utf-8", errors="replace")
                if parse_json:
                    try:
                        data = json.loads(text)
                    except json.JSONDecodeError as exc:
                        raise PackIntegrityError(f"{path.name} is not JSON: {exc}") from exc
                    return [str(t) for t in data] if isinstance(data, list) else []
                return text.splitlines()
    return []


def _known(code: str) -> str | None:
    try:
        return resolve(code)
    except Exception:
        return None


def _card_languages(card: dict[str, Any]) -> list[str]:
    value = card.get("language")
    codes = [str(v) for v in value] if isinstance(value, list) else ([str(value)] if value else [])
    return [c for c in codes if _known(c)]


def _pack_id_for(source: HubSource, given: str | None) -> str:
    if given:
        return given
    name = re.sub(r"[^A-Za-z0-9._+-]", "-", f"hf-{source.repo.replace('/', '--')}")
    if source.subdir:
        name += "--" + re.sub(r"[^A-Za-z0-9._+-]", "-", source.subdir.replace("/", "--"))
    return name[:128]


def _layout_mt(
    raw: Path, out: Path, source: HubSource, commit: str, lic: str, card: dict[str, Any], pack_id: str | None
) -> None:
    if not (raw / "model.bin").is_file():
        raise PackIntegrityError(f"{source.text} has no model.bin: not a CTranslate2 translation model")
    vocab = _vocabulary(raw)
    flores = [t for t in vocab if _FLORES_TOKEN.match(t) and _known(t)]
    m2m = [m.group(1) for t in vocab if (m := _M2M_TOKEN.match(t)) and _known(m.group(1))]
    spm = [n for n in ("sentencepiece.bpe.model", "sentencepiece.model", "spm.model") if (raw / n).is_file()]
    spm += sorted(p.name for p in raw.glob("*.model") if p.name not in spm and p.name not in ("model.bin",))
    model = out / "model"
    model.mkdir(parents=True)
    tokenizer_files = {p.name for p in raw.glob("*.spm")} | {p.name for p in raw.glob("*.model")}
    for path in sorted(raw.iterdir()):
        target = out / path.name if path.name in tokenizer_files or path.name in ("LICENSE", CARD) else None
        path.rename(target or model / path.name)
    manifest: dict[str, Any] = {
        "id": _pack_id_for(source, pack_id),
        "version": commit[:12],
        "license": lic,
        "description": f"{source.text} at commit {commit}",
    }
    if flores or m2m:
        if not spm:
            raise PackIntegrityError(f"{source.text}: no SentencePiece model (sentencepiece.bpe.model) found")
        manifest.update(
            kind="multilingual",
            languages=list(dict.fromkeys(flores)) if flores else list(dict.fromkeys(m2m)),
            token_style="flores" if flores else "m2m",
            sentencepiece=spm[0],
        )
        if len(manifest["languages"]) < 2:
            raise PackIntegrityError(f"{source.text}: its vocabulary names fewer than two known languages")
    else:
        languages = _card_languages(card)
        if len(languages) != 2:
            found = _PAIR_NAME.search(source.repo.split("/", 1)[1].lower())
            languages = [found.group(1), found.group(2)] if found else []
        if len(languages) != 2 or not all(_known(c) for c in languages):
            raise PackIntegrityError(
                f"{source.text}: cannot tell its two languages (the card's `language:` lists none or many, "
                "and the repo name is not opus-mt-SRC-TGT)"
            )
        if (out / "source.spm").is_file():
            manifest["sentencepiece"] = "source.spm"
            if (out / "target.spm").is_file():
                manifest["target_sentencepiece"] = "target.spm"
        elif spm:
            manifest["sentencepiece"] = spm[0]
        else:
            raise PackIntegrityError(f"{source.text}: no SentencePiece model (source.spm) found")
        metadata = {
            "package_version": commit[:12],
            "from_code": languages[0],
            "to_code": languages[1],
            "description": manifest["description"],
        }
        (out / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
    (out / "dragoman-pack.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(raw, ignore_errors=True)
