"""Zip containers (DOCX, PPTX, XLSX): refuse zip bombs before reading, parse XML parts safely, and write
a copy of the container with some parts replaced.

:func:`open_zip` checks the central directory only (nothing is decompressed): entry count, the total
declared uncompressed size, for large entries the compression ratio, and the ratio of the whole container
once it expands past :data:`~dragoman.limits.ZIP_RATIO_FLOOR_BYTES` (many small entries each under the
per-entry check). ``zipfile`` never returns more bytes than an entry declares (a lying entry fails its CRC
check), so the declared sizes bound what is read. :func:`read_part` counts the markup one container's
parts hold against :class:`~dragoman.documents._bounds.MarkupBudget` (bytes, checked on the declared size
before reading, and tags, counted before parsing): a part that passes the zip bounds but would parse into
gigabytes is refused with a 413. :func:`parse_xml` refuses DTDs and never resolves entities or reaches the
network.
:func:`content_types`, :func:`main_part` and :func:`sniff_container` find a package's parts by content
type, refuse Strict Open XML and OLE files (encrypted or legacy Office files) with a message saying what to
do. :func:`rewrite_zip` copies every entry in its original order and compression, replacing the bytes of
the entries it is given.
"""

from __future__ import annotations

import re
import weakref
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from lxml import etree  # type: ignore[import-untyped]

from dragoman.documents._bounds import MarkupBudget
from dragoman.errors import DocumentFormatError, DocumentTooLarge
from dragoman.limits import MAX_ZIP_RATIO, ZIP_RATIO_FLOOR_BYTES

#: Bounds on a container's central directory.
MAX_ENTRIES = 20_000
MAX_TOTAL_UNCOMPRESSED = 1 << 30  # 1 GiB
MAX_RATIO = 200  # uncompressed / compressed, checked on entries above RATIO_FLOOR
RATIO_FLOOR = 1 << 20  # 1 MiB
#: Bound on one XML part read for sniffing.
SNIFF_PART_LIMIT = 4 << 20

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
ZIP_MAGIC = b"PK\x03\x04"
CONTENT_TYPES = "[Content_Types].xml"

#: What reading a corrupt entry raises (zlib.error is no OSError).
_READ_ERRORS = (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, zlib.error)

_CORRUPT = (zipfile.BadZipFile, EOFError, NotImplementedError, zlib.error)

_PARSER = etree.XMLParser(
    resolve_entities=False, no_network=True, load_dtd=False, dtd_validation=False, huge_tree=False
)


def check_entries(archive: zipfile.ZipFile, name: str) -> None:
    """Raise :class:`DocumentTooLarge` (413) when the container is over a bound: too many entries, an
    entry or the whole expanding too far (a possible zip bomb)."""
    infos = archive.infolist()
    if len(infos) > MAX_ENTRIES:
        raise DocumentTooLarge(
            f"{name}: the container holds {len(infos)} entries (limit {MAX_ENTRIES}); refused as a possible "
            "zip bomb. Check where the file comes from, or split the document"
        )
    total = compressed = 0
    for info in infos:
        total += info.file_size
        compressed += info.compress_size
        if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
            raise DocumentTooLarge(
                f"{name}: entry {info.filename} expands {info.file_size / max(info.compress_size, 1):.0f} "
                f"times (limit {MAX_RATIO}); refused as a possible zip bomb. Check where the file comes from"
            )
    if total > MAX_TOTAL_UNCOMPRESSED:
        raise DocumentTooLarge(
            f"{name}: the container expands to {total / 1e6:.0f} MB (limit "
            f"{MAX_TOTAL_UNCOMPRESSED / 1e6:.0f} MB); refused as a possible zip bomb. Split the document"
        )
    if total > ZIP_RATIO_FLOOR_BYTES and total > MAX_ZIP_RATIO * max(compressed, 1):
        raise DocumentTooLarge(
            f"{name}: the container expands {total / max(compressed, 1):.0f} times as a whole (to "
            f"{total / 1e6:.0f} MB; limit {MAX_ZIP_RATIO} times past {ZIP_RATIO_FLOOR_BYTES / 1e6:.0f} MB); "
            "refused as a possible zip bomb. Check where the file comes from"
        )


def open_zip(path: Path, kind: str) -> zipfile.ZipFile:
    """Open ``path`` as a checked zip container; ``kind`` (".docx") names the format in messages.

    An OLE compound file (an encrypted Office document or a legacy binary one) and a corrupt zip get a
    :class:`DocumentFormatError` that says what to do.
    """
    try:
        with path.open("rb") as handle:
            head = handle.read(8)
    except OSError as exc:
        raise DocumentFormatError(f"{path.name}: cannot read the file ({exc})") from exc
    if head.startswith(OLE_MAGIC):
        legacy = {".docx": ".doc", ".pptx": ".ppt", ".xlsx": ".xls"}.get(kind, "Office 97-2003")
        raise DocumentFormatError(
            f"{path.name} is an encrypted (password-protected) {kind} or a legacy {legacy} file (an OLE "
            f"compound file, not a zip); remove the password or save it as {kind} in an office suite "
            f"(e.g. `soffice --headless --convert-to {kind.lstrip('.')} FILE`), then translate the copy"
        )
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError) as exc:
        raise DocumentFormatError(
            f"{path.name} is not a readable {kind} (corrupt or truncated zip container: {exc}); check the "
            "file or save it again"
        ) from exc
    try:
        check_entries(archive, path.name)
    except DocumentFormatError:
        archive.close()
        raise
    return archive


#: The markup each open container has read so far, and the parts counted (each part once).
_BUDGETS: weakref.WeakKeyDictionary[zipfile.ZipFile, tuple[MarkupBudget, set[str]]] = (
    weakref.WeakKeyDictionary()
)


def read_part(archive: zipfile.ZipFile, name: str, source_name: str) -> bytes:
    """The bytes of one part, counted against the container's markup bounds (413 beyond them)."""
    budget, counted = _BUDGETS.setdefault(archive, (MarkupBudget(source_name), set()))
    if name not in counted:
        try:
            budget.check_size(archive.getinfo(name).file_size, name)
        except KeyError:
            pass  # reading it raises the error that says so
    try:
        data = archive.read(name)
    except _READ_ERRORS as exc:
        raise DocumentFormatError(
            f"{source_name}: entry {name} cannot be read (corrupt container: {exc}); save the file again"
        ) from exc
    if name not in counted:
        budget.charge(data, name)
        counted.add(name)
    return data


def parse_xml(data: bytes, part: str, source_name: str) -> etree._Element:
    """Parse one XML part safely (no DTD, no entities, no network)."""
    if b"<!DOCTYPE" in data[:4096] or b"<!ENTITY" in data[:65536]:
        raise DocumentFormatError(
            f"{source_name}: part {part} declares a DTD, which Office documents never do; refused"
        )
    try:
        return etree.fromstring(data, _PARSER)
    except etree.XMLSyntaxError as exc:
        raise DocumentFormatError(
            f"{source_name}: part {part} is not well-formed XML ({exc}); the file is corrupt, save it again"
        ) from exc


def serialize_xml(root: etree._Element) -> bytes:
    return bytes(etree.tostring(root, xml_declaration=True, encoding="UTF-8", standalone=True))


def content_types(archive: zipfile.ZipFile, source_name: str) -> dict[str, str]:
    """Part name (without the leading slash) -> content type, from ``[Content_Types].xml``."""
    if CONTENT_TYPES not in archive.namelist():
        raise DocumentFormatError(
            f"{source_name} is a zip but not an Office Open XML document (no {CONTENT_TYPES}); check the file"
        )
    root = parse_xml(read_part(archive, CONTENT_TYPES, source_name), CONTENT_TYPES, source_name)
    defaults: dict[str, str] = {}
    overrides: dict[str, str] = {}
    for child in root:
        tag = etree.QName(child).localname
        if tag == "Default":
            defaults[child.get("Extension", "").lower()] = child.get("ContentType", "")
        elif tag == "Override":
            overrides[child.get("PartName", "").lstrip("/")] = child.get("ContentType", "")
    types: dict[str, str] = {}
    for name in archive.namelist():
        if name.endswith("/"):
            continue
        if name in overrides:
            types[name] = overrides[name]
        else:
            types[name] = defaults.get(name.rsplit(".", 1)[-1].lower(), "")
    return types


def sniff_ooxml(head: bytes, path: Path, main_types: tuple[str, ...]) -> bool:
    """True when ``path`` is a zip whose ``[Content_Types].xml`` names one of ``main_types``."""
    if not head.startswith(ZIP_MAGIC):
        return False
    try:
        with zipfile.ZipFile(path) as archive:
            info = archive.getinfo(CONTENT_TYPES)
            if info.file_size > SNIFF_PART_LIMIT:
                return False
            data = archive.read(info)
    except (KeyError, *_READ_ERRORS):
        return False
    return any(t.encode() in data for t in main_types)


def main_part(
    archive: zipfile.ZipFile,
    types: Mapping[str, str],
    main_types: tuple[str, ...],
    source_name: str,
    kind: str,
    suffix: str,
) -> str:
    """The name of the package's main part (``kind``: "Word document"); a typed error when there is none or
    when it is Strict Open XML (other namespaces, which the handlers do not read)."""
    name = next((n for n, t in types.items() if t in main_types), None)
    if name is None:
        raise DocumentFormatError(
            f"{source_name} is an Office file but not a {kind} (it has no main {kind} part); check the "
            "file type"
        )
    if b"http://purl.oclc.org/ooxml/" in read_part(archive, name, source_name)[:4096]:
        raise DocumentFormatError(
            f"{source_name} is saved as Strict Open XML, which is not supported; save it again as an "
            f"ordinary {suffix} (e.g. `soffice --headless --convert-to {suffix.lstrip('.')} FILE`) and "
            "translate that"
        )
    return name


def natural_key(name: str) -> tuple[str | int, ...]:
    """Sort key putting ``slide2.xml`` before ``slide10.xml``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def sniff_container(
    head: bytes, path: Path, main_types: tuple[str, ...], suffixes: tuple[str, ...], legacy: tuple[str, ...]
) -> bool:
    """A handler's sniff: its content type inside a zip; or, under one of its names, content it can only
    refuse with a helpful message (an OLE file: encrypted or legacy; a zip that does not open)."""
    suffix = path.suffix.lower()
    if head.startswith(OLE_MAGIC):
        return suffix in suffixes or suffix in legacy
    if sniff_ooxml(head, path, main_types):
        return True
    if head.startswith(ZIP_MAGIC) and suffix in suffixes:
        try:
            with zipfile.ZipFile(path):
                return False  # a readable zip of another kind: let the caller say which
        except (zipfile.BadZipFile, OSError, ValueError):
            return True
    return False


def rewrite_zip(
    archive: zipfile.ZipFile, output: Path, replaced: Mapping[str, bytes], source_name: str
) -> None:
    """Write every entry of ``archive`` to ``output`` in order, with ``replaced`` entries' new bytes."""
    try:
        _rewrite(archive, output, replaced)
    except _CORRUPT as exc:
        raise DocumentFormatError(
            f"{source_name}: an entry cannot be copied (corrupt container: {exc}); save the file again"
        ) from exc


def _rewrite(archive: zipfile.ZipFile, output: Path, replaced: Mapping[str, bytes]) -> None:
    with zipfile.ZipFile(output, "w") as out:
        for info in archive.infolist():
            new = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            new.external_attr = info.external_attr
            new.create_system = info.create_system
            data = replaced.get(info.filename)
            if data is None:
                new.compress_type = info.compress_type
                with (
                    archive.open(info) as src,
                    out.open(new, "w", force_zip64=info.file_size > 1 << 31) as dst,
                ):
                    _copy(src, dst)
            else:
                new.compress_type = zipfile.ZIP_DEFLATED
                out.writestr(new, data)


def _copy(src: IO[bytes], dst: IO[bytes]) -> None:
    while chunk := src.read(1 << 20):
        dst.write(chunk)
