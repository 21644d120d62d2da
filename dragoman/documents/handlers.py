"""The format handlers, most specific first: containers and binary formats are recognised by their
content before the text formats, which are told apart by suffix once the content is known to be text.
:func:`find_handler` decides a file's format by its content, :func:`output_path` where its translation
goes."""

from __future__ import annotations

import functools
from pathlib import Path

from dragoman.documents.base import FormatHandler, check_size, read_head, unsupported
from dragoman.errors import DocumentFormatError, InvalidRequest
from dragoman.languages.catalogue import get, resolve


@functools.cache
def all_handlers() -> list[FormatHandler]:
    """Every format handler, most specific first (containers before the text formats)."""
    from dragoman.documents.docx import DocxHandler
    from dragoman.documents.html import HtmlHandler
    from dragoman.documents.images import ImageHandler
    from dragoman.documents.markdown import MarkdownHandler
    from dragoman.documents.pdf import PdfHandler
    from dragoman.documents.plaintext import PlainTextHandler
    from dragoman.documents.pptx import PptxHandler
    from dragoman.documents.strings import JsonHandler, PoHandler, XliffHandler
    from dragoman.documents.subtitles import SrtHandler, WebVttHandler
    from dragoman.documents.xlsx import XlsxHandler

    handlers: list[FormatHandler] = []
    handlers.append(PdfHandler())
    handlers.append(DocxHandler())
    handlers.append(PptxHandler())
    handlers.append(XlsxHandler())
    handlers.append(ImageHandler())
    handlers.extend(
        [
            MarkdownHandler(),
            HtmlHandler(),
            SrtHandler(),
            WebVttHandler(),
            PoHandler(),
            XliffHandler(),
            JsonHandler(),
        ]
    )
    handlers.append(PlainTextHandler())
    return handlers


def supported_suffixes() -> list[str]:
    return sorted({s for h in all_handlers() for s in h.suffixes})


def find_handler(path: Path) -> FormatHandler:
    """The handler for a file, decided by its content; a suffix that claims another format is a 415."""
    check_size(path)
    head = read_head(path)
    known = all_handlers()
    matching = [h for h in known if h.sniff(head, path)]
    suffix = path.suffix.lower()
    claimed = [h for h in known if suffix in h.suffixes]
    for handler in matching:
        if suffix in handler.suffixes:
            return handler
    if claimed and matching:
        raise DocumentFormatError(
            f"{path.name} is named like {claimed[0].name} but its content is {matching[0].name}; "
            "rename it or check the file"
        )
    if claimed:
        raise DocumentFormatError(
            f"{path.name} is named like {claimed[0].name} but its content is not (corrupt, encrypted or "
            "another format)"
        )
    if matching:
        return matching[0]
    raise unsupported(path, f"'{suffix or 'no extension'}' content", supported_suffixes())


def default_output(path: Path, target: str) -> Path:
    """``NAME.<target>.EXT`` beside the input, the target as its BCP-47 tag (``report.es.docx``)."""
    tag = get(resolve(target)).bcp47
    return path.with_name(f"{path.stem}.{tag}{path.suffix}")


def output_path(source: Path, output: str | Path | None, target: str) -> Path:
    """Where a translation of ``source`` goes: ``output``, else :func:`default_output`; never the input."""
    out = Path(output).expanduser().absolute() if output is not None else default_output(source, target)
    if out.resolve() == source.resolve():
        raise InvalidRequest(f"the output path {out} is the input file; the input is never overwritten")
    return out
