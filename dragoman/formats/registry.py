"""The format handlers, most specific first: containers and binary formats are recognised by their
content before the text formats, which are told apart by suffix once the content is known to be text."""

from __future__ import annotations

import functools

from dragoman.formats.base import FormatHandler


@functools.cache
def all_handlers() -> list[FormatHandler]:
    from dragoman.formats.docx import DocxHandler
    from dragoman.formats.html import HtmlHandler
    from dragoman.formats.images import ImageHandler
    from dragoman.formats.markdown import MarkdownHandler
    from dragoman.formats.pdf import PdfHandler
    from dragoman.formats.plaintext import PlainTextHandler
    from dragoman.formats.pptx import PptxHandler
    from dragoman.formats.strings import JsonHandler, PoHandler, XliffHandler
    from dragoman.formats.subtitles import SrtHandler, WebVttHandler
    from dragoman.formats.xlsx import XlsxHandler

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
