"""The format handlers, most specific first: containers and binary formats are recognised by their
content before the text formats, which are told apart by suffix once the content is known to be text."""

from __future__ import annotations

import functools

from dragoman.formats.base import FormatHandler


@functools.cache
def all_handlers() -> list[FormatHandler]:
    from dragoman.formats.plaintext import PlainTextHandler

    handlers: list[FormatHandler] = []
    handlers.append(PlainTextHandler())
    return handlers
