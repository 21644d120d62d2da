"""Plain text (``.txt``): the whole text through the engine, which keeps paragraphs, line breaks and
surrounding whitespace exactly. UTF-8 (with or without BOM) and UTF-16 with a BOM are read; the output
keeps the input's encoding and line endings."""

from __future__ import annotations

import codecs
from pathlib import Path

from dragoman.documents.base import DocumentReport, TextTranslator
from dragoman.errors import DocumentFormatError
from dragoman.progress import ProgressCallback

_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def text_encoding(head: bytes) -> str | None:
    """The encoding of text content, or None when the bytes are not text (NULs, invalid UTF-8)."""
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return encoding
    if b"\x00" in head:
        return None
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a character cut at the end of the sniffed bytes
            return None
    return "utf-8"


def read_text(path: Path) -> tuple[str, str]:
    """The text of a file and its encoding; a typed error when it is not text."""
    data = path.read_bytes()
    encoding = text_encoding(data[:8192])
    if encoding is None:
        raise DocumentFormatError(f"{path.name} is not UTF-8 or UTF-16 text")
    try:
        return data.decode(encoding), encoding
    except UnicodeDecodeError as exc:
        raise DocumentFormatError(f"{path.name} is not valid {encoding} text: {exc}") from exc


class PlainTextHandler:
    name = "txt"
    suffixes: tuple[str, ...] = (".txt", ".text", "")

    def sniff(self, head: bytes, path: Path) -> bool:
        return text_encoding(head) is not None

    def translate(
        self, source: Path, output: Path, translate: TextTranslator, progress: ProgressCallback | None
    ) -> DocumentReport:
        text, encoding = read_text(source)
        [translated] = translate([text])
        output.write_bytes(translated.encode(encoding))
        return DocumentReport(
            segments=1 if text.strip() else 0,
            characters=len(text),
            extracted_text=text,
            translated_text=translated,
        )
