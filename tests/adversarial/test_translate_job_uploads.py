"""Hostile uploads to the hosted ``translate`` job kind (issue 12, B2): bombs are refused for good (413) when
counted and when translated, a file name cannot steer where exports are stored, and sniffing stays linear
in a head made of zip signatures.
"""

from __future__ import annotations

import dataclasses
import io
import struct
import zipfile
import zlib
from pathlib import Path
from typing import Any

import docx
import pytest
from growth import assert_linear

from dragoman.errors import DocumentTooLarge, FileTooLarge
from dragoman.pipelines import exports
from dragoman.progress import JobContext
from dragoman.service import translation_jobs as tj
from dragoman.service.jobs import JobRecord
from dragoman.service.storage import Storage
from dragoman.testing.fakes import UpperTranslator


class _UpperEngine:
    """The engine's document side as the handler uses it (``translate_many``, ``detect``), upper-casing:
    enough to run a document job with no pack."""

    provenance = "server"

    def __init__(self) -> None:
        self.upper = UpperTranslator()

    def translate_many(self, texts: Any, options: Any, *, context: Any = None) -> list[Any]:
        @dataclasses.dataclass
        class Result:
            translation: str
            warnings: tuple[str, ...] = ()

        return [Result(t) for t in self.upper(list(texts))]


def _job(params: dict[str, Any]) -> JobRecord:
    values: dict[str, Any] = {f.name: None for f in dataclasses.fields(JobRecord)}
    values.update(id="job-1", kind="translate", status="active", params=params, artifacts={})
    return JobRecord(**values)


def _run(storage: Storage, data: bytes, filename: str, mime: str) -> Any:
    storage.put_bytes("uploads/u/file", data)
    params = {"upload": "uploads/u/file", "filename": filename, "mime": mime, "src": "en", "tgt": "es"}
    handler = tj.make_translate_handler(_UpperEngine())  # type: ignore[arg-type]
    return handler(_job(params), JobContext(), storage)


def _png_header(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width`` x ``height`` pixels (a decompression bomb's first bytes)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")
    )


def _inflating_docx() -> bytes:
    """A DOCX of a few hundred KB with an entry that inflates 1000 times (to 32 MiB)."""
    base = io.BytesIO()
    docx.Document().save(base)
    out = io.BytesIO()
    with zipfile.ZipFile(base) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
        dst.writestr("word/media/pad.bin", b"\x00" * (32 << 20))
    return out.getvalue()


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    return Storage.local(tmp_path / "files")


def test_a_pixel_bomb_is_refused_when_counted_and_when_translated(tmp_path: Path, storage: Storage) -> None:
    bomb = _png_header(60_000, 60_000)  # 3.6 gigapixels in a few bytes
    path = tmp_path / "bomb.png"
    path.write_bytes(bomb)
    with pytest.raises(FileTooLarge) as counted:
        tj.count_document_chars(path, tj.PNG)
    assert counted.value.status == 413
    with pytest.raises(FileTooLarge) as translated:
        _run(storage, bomb, "bomb.png", tj.PNG)
    assert translated.value.status == 413  # < 500: the runner fails it for good, no retry
    assert storage.list("exports") == []


def test_a_zip_bomb_docx_is_refused_when_counted_and_when_translated(
    tmp_path: Path, storage: Storage
) -> None:
    data = _inflating_docx()
    assert len(data) < 2_000_000 and tj.sniff_mime(data) == tj.DOCX
    path = tmp_path / "bomb.docx"
    path.write_bytes(data)
    with pytest.raises(DocumentTooLarge):
        tj.count_document_chars(path, tj.DOCX)
    with pytest.raises(DocumentTooLarge):
        _run(storage, data, "bomb.docx", tj.DOCX)
    assert storage.list("exports") == []


@pytest.mark.parametrize(
    "filename",
    [
        "../../../etc/passwd.docx",
        "..\\..\\win.docx",
        "/abs/path/x.docx",
        "..docx",
        "(((.docx",
        "\x00\n.docx",
        "",
    ],
)
def test_a_file_name_cannot_steer_where_exports_go(
    storage: Storage, filename: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(exports, "soffice", lambda: None)  # the PDF is laid out here (quicker)
    document = docx.Document()
    document.add_paragraph("The house is red.")
    data = io.BytesIO()
    document.save(data)
    outcome = _run(storage, data.getvalue(), filename, tj.DOCX)
    assert outcome.result == "THE HOUSE IS RED."
    for key in outcome.artifacts.values():
        assert key.startswith("exports/job-1/") and key.count("/") == 2 and ".." not in key.split("/")
    assert {o.key for o in storage.list("")} == {"uploads/u/file", *outcome.artifacts.values()}


def test_sniffing_a_head_of_zip_signatures_is_linear() -> None:
    def make(n: int) -> str:
        return ("PK\x03\x04" + "\x00" * 22 + "\x01\x00" + "\x00\x00" + "w") * (n // 31 + 1)

    assert_linear(lambda head: tj.sniff_mime(head.encode("latin-1")), {"zip signatures": make}, 20_000)
