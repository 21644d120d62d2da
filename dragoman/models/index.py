"""The Argos Translate package index: fetch it, parse it, pick the package a name asks for.

The index (``settings.engine.argos_index_url``, by default argospm-index's ``index.json``) is a JSON list of
objects such as::

    {"code": "translate-en_es", "type": "translate", "package_version": "1.9", "argos_version": "1.9",
     "from_code": "en", "from_name": "English", "to_code": "es", "to_name": "Spanish",
     "links": ["https://.../translate-en_es-1_9.argosmodel"]}

``code`` is missing from old entries (it is then ``translate-{from}_{to}``); a checksum, when an entry
carries one (``sha256``, or ``checksum`` as ``"sha256:HEX"`` or bare hex), is checked on download.
Names that select a package: the package code (``translate-en_es``) or a pair: ``en:es``, the spelling every
message suggests, as it survives a shell unquoted (``en->es`` is a redirect there); ``en->es``, ``en→es``
and ``en=>es`` (quoted) are read too. Each side may be any code or name
:func:`dragoman.languages.catalogue.resolve` knows, BCP-47 tags such as ``pt-BR`` included (hence no ``-``
separator).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import httpx

from dragoman.errors import IndexTooLarge, InvalidRequest, PackInstallError, UnknownLanguage
from dragoman.models._fetch import Pace, Transfer, fetch
from dragoman.settings import Settings

log = logging.getLogger("dragoman.packs.index")

INDEX_TIMEOUT_SECONDS = 30.0  # per read
#: The whole index fetch; and its size (the real index is about 100 KB).
INDEX_DEADLINE_SECONDS = 60.0
MAX_INDEX_BYTES = 16 * 1024 * 1024
_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")
# no ':', '/' or backslash in a side: a URL (https://...) or a Windows path (C:\\...) is no pair
_PAIR = re.compile(r"^\s*([^\s>→:/\\]+?)\s*(?::|->|→|=>)\s*([^\s>→:/\\]+)\s*$")
_CODE = re.compile(r"^translate-[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$", re.IGNORECASE)


@dataclass(frozen=True)
class IndexEntry:
    """One package of the index."""

    code: str
    from_code: str
    to_code: str
    version: str
    links: tuple[str, ...]
    from_name: str = ""
    to_name: str = ""
    argos_version: str = ""
    type: str = "translate"
    sha256: str | None = None

    @property
    def pair(self) -> str:
        return f"{self.from_code}:{self.to_code}"

    def to_dict(self) -> dict[str, object]:
        return {
            "code": self.code,
            "from_code": self.from_code,
            "from_name": self.from_name,
            "to_code": self.to_code,
            "to_name": self.to_name,
            "version": self.version,
            "links": list(self.links),
            "sha256": self.sha256,
            "install": f"dragoman packs install {self.code}",
        }


def version_key(version: str) -> tuple[tuple[int, str], ...]:
    """Sort key for versions like ``1.9`` < ``1.10`` < ``2.0``; a non-numeric part sorts low."""
    return tuple((int(p), "") if p.isdigit() else (-1, p) for p in re.split(r"[._\-+]", version.strip()) if p)


def _sha256_of(item: dict[str, Any]) -> str | None:
    for key in ("sha256", "checksum", "hash"):
        value = item.get(key)
        if isinstance(value, str):
            hexpart = value.split(":", 1)[1] if value.lower().startswith("sha256:") else value
            if _HEX64.match(hexpart.strip()):
                return hexpart.strip().lower()
    return None


def parse_index(data: Any, *, where: str = "the index") -> list[IndexEntry]:
    """Every usable entry of a decoded index; entries without codes or links are skipped."""
    if isinstance(data, dict) and isinstance(data.get("packages"), list):
        data = data["packages"]
    if not isinstance(data, list):
        raise PackInstallError(f"{where} is not an Argos package index (expected a JSON list of packages)")
    entries: list[IndexEntry] = []
    for item in data:
        if not isinstance(item, dict):
            continue
        from_code, to_code = item.get("from_code"), item.get("to_code")
        links = item.get("links")
        if not isinstance(from_code, str) or not isinstance(to_code, str) or not from_code or not to_code:
            continue
        if not isinstance(links, list) or not all(isinstance(u, str) for u in links) or not links:
            log.debug("index entry %s->%s has no links; skipped", from_code, to_code)
            continue
        code = item.get("code")
        entries.append(
            IndexEntry(
                code=code if isinstance(code, str) and code else f"translate-{from_code}_{to_code}",
                from_code=from_code,
                to_code=to_code,
                version=str(item.get("package_version", "0")),
                links=tuple(links),
                from_name=str(item.get("from_name", "")),
                to_name=str(item.get("to_name", "")),
                argos_version=str(item.get("argos_version", "")),
                type=str(item.get("type", "translate")),
                sha256=_sha256_of(item),
            )
        )
    return entries


def _local_path(url: str) -> Path | None:
    parsed = urlparse(url)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme in ("",) or (len(parsed.scheme) == 1 and url[1:2] == ":"):
        return Path(url).expanduser()
    return None


def fetch_index(settings: Settings, *, timeout: float = INDEX_TIMEOUT_SECONDS) -> list[IndexEntry]:
    """Download and parse ``settings.engine.argos_index_url`` (http(s), ``file://`` or a local path).

    Bounded: at most :data:`MAX_INDEX_BYTES` (IndexTooLarge beyond, whatever the server declares) and
    :data:`INDEX_DEADLINE_SECONDS` in all (DownloadTimedOut), besides ``timeout`` per read.
    """
    url = settings.engine.argos_index_url
    local = _local_path(url)
    hint = (
        "check DRAGOMAN_ARGOS_INDEX_URL, or install from a file or URL with "
        "`dragoman packs install PATH_OR_URL`"
    )

    def too_big(size: int) -> IndexTooLarge:
        return IndexTooLarge(
            f"the Argos package index {url} is over {MAX_INDEX_BYTES} bytes ({size} sent or declared); "
            f"refused, it is not a package index; {hint}"
        )

    if local is not None:
        try:
            with local.open("rb") as handle:
                raw = handle.read(MAX_INDEX_BYTES + 1)
        except OSError as exc:
            raise PackInstallError(f"cannot read the Argos package index {url}: {exc}") from exc
        if len(raw) > MAX_INDEX_BYTES:
            raise too_big(len(raw))
    else:
        body = bytearray()

        def check(response: httpx.Response, state: Transfer) -> None:
            if response.status_code != 200:
                raise PackInstallError(
                    f"the Argos package index {url} answered HTTP {response.status_code}; {hint}"
                )

        def sink(chunk: bytes, state: Transfer) -> None:
            body.extend(chunk)

        pace = Pace(deadline=INDEX_DEADLINE_SECONDS, read_timeout=timeout)
        what = "fetching the Argos package index"
        fetch(url, pace=pace, limit=MAX_INDEX_BYTES, sink=sink, too_big=too_big, check=check, what=what)
        raw = bytes(body)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise PackInstallError(f"the Argos package index {url} is not valid JSON: {exc}") from exc
    return parse_index(data, where=f"the Argos package index {url}")


def newest(entries: list[IndexEntry]) -> list[IndexEntry]:
    """One entry per package code, the newest version, sorted by pair."""
    best: dict[str, IndexEntry] = {}
    for entry in entries:
        key = entry.code.lower()
        if key not in best or version_key(entry.version) > version_key(best[key].version):
            best[key] = entry
    return sorted(best.values(), key=lambda e: (e.from_code, e.to_code, e.code))


def available(settings: Settings) -> list[IndexEntry]:
    """The translation packages of the index, newest version of each."""
    return newest([e for e in fetch_index(settings) if e.type == "translate"])


def is_index_name(source: str) -> bool:
    """True when ``source`` reads as a package code or a pair rather than a path or URL."""
    return bool(_CODE.match(source.strip()) or _PAIR.match(source))


def _same_language(a: str, b: str) -> bool:
    if a.lower() == b.lower():
        return True
    from dragoman.languages.catalogue import resolve

    try:
        return bool(resolve(a) == resolve(b))
    except UnknownLanguage:
        return False


def pick(entries: list[IndexEntry], name: str, *, where: str = "the Argos index") -> IndexEntry:
    """The newest entry ``name`` selects (a package code or ``src:tgt``); InvalidRequest if none."""
    entries = [e for e in entries if e.type == "translate"]
    wanted = name.strip()
    pair = _PAIR.match(wanted)
    if pair:
        src, tgt = pair.group(1), pair.group(2)
        matches = [e for e in entries if _same_language(e.from_code, src) and _same_language(e.to_code, tgt)]
    else:
        matches = [e for e in entries if e.code.lower() == wanted.lower()]
        src = wanted.split("-", 1)[-1].split("_", 1)[0] if _CODE.match(wanted) else wanted
    if matches:
        return max(matches, key=lambda e: version_key(e.version))
    nearby = sorted({e.pair for e in entries if _same_language(e.from_code, src)})
    hint = (
        f"packages from {src}: {', '.join(nearby)}" if nearby else f"{len(newest(entries))} packages listed"
    )
    raise InvalidRequest(
        f"no package {wanted!r} in {where} ({hint}); name one as translate-xx_yy or xx:yy, see "
        "`dragoman packs available`, or install a file or URL with `dragoman packs install PATH_OR_URL`"
    )
