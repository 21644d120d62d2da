"""Text before speech (issue 14): markup removal, normalisation and sentence splitting stay linear on hostile
input up to the 50,000-character limit (ratios only, tests/growth.py), and markup is never left to be read."""

from __future__ import annotations

import pytest
from growth import assert_linear, repeat

from dragoman.errors import InvalidRequest
from dragoman.speech.tts.text import prepare, strip_markup

#: 4 × N is just under the 50,000-character limit.
N = 12_000

ADVERSARIAL = {
    "unclosed comments": repeat("<!--"),
    "unclosed processing instructions": repeat("<?"),
    "unclosed doctype": repeat("<!DOCTYPE "),
    "unclosed attribute": repeat('<a b="'),
    "escaped comments": repeat("&lt;!--"),
    "abbreviations": repeat("Dr. "),
    "stops": repeat(". "),
    "digit groups": repeat("1,000,"),
    "dates": repeat("2024-01-01 "),
    "one long word": repeat("a"),
}


def _prepare(text: str) -> object:
    try:
        return prepare(text, "de")
    except InvalidRequest:  # nothing to say: refused, which is an answer too
        return None


def test_preparing_text_is_linear() -> None:
    assert_linear(_prepare, ADVERSARIAL, N)


@pytest.mark.parametrize(
    "text",
    [
        "<!-- <speak> -->Hi",
        "<?xml version='1.0'?><speak>Hi</speak>",
        "&lt;speak&gt;Hi&lt;/speak&gt;",
        "&amp;lt;speak&amp;gt;Hi",  # double-escaped: decoded once, it shows a tag, which is removed
        "<speak><voice name='x'><prosody rate='50%'>Hi</prosody></voice></speak>",
        "<SPEAK>Hi</SPEAK>",
        "<!DOCTYPE speak>Hi",
    ],
)
def test_no_tag_survives(text: str) -> None:
    left = strip_markup(text)
    assert left.split() == ["Hi"], left
