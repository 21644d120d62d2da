"""The format handlers, most specific first: containers and binary formats are recognised by their
content before the text formats, which are told apart by suffix once the content is known to be text."""

from __future__ import annotations

import functools

from dragoman.documents.base import FormatHandler


@functools.cache
def all_handlers() -> list[FormatHandler]:
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
