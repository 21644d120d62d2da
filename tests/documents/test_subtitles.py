"""SRT and WebVTT: cue text translated; numbering, timings, settings and header blocks untouched."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import needs_apertium

from dragoman.documents import handlers
from dragoman.documents.subtitles import SrtHandler, WebVttHandler, split_lines
from dragoman.errors import DocumentFormatError
from dragoman.pipelines import translate_file as files
from dragoman.settings import Settings
from dragoman.testing.fakes import UpperTranslator
from dragoman.translation.engine import Engine

PROTECTED = re.compile(r"<[^<>]*>|\{[^{}]*\}")


class Upper(UpperTranslator):
    protected = PROTECTED


class Longer(Upper):
    def one(self, text: str) -> str:
        return super().one(text).replace(" ", " very ")


SRT = (
    "1\r\n00:00:01,000 --> 00:00:03,500\r\nThe house is red\r\nand the dog is big.\r\n\r\n"
    "2\r\n00:00:04,000 --> 00:00:06,000 X1:10 X2:20 Y1:5 Y2:9\r\n"
    "- Where is the dog?\r\n- In the <i>garden</i>.\r\n\r\n"
    "3\r\n00:00:07,000 --> 00:00:08,000\r\n{\\an8}<i>A long sentence\r\nin italics.</i>\r\n\r\n"
    "4\r\n00:00:09,000 --> 00:00:10,000\r\n♪ 123 ♪\r\n"
)
TIMING = re.compile(r"^\d\d:\d\d:\d\d,\d\d\d --> .*$|^\d+$")


def run(tmp_path: Path, handler: SrtHandler | WebVttHandler, data: bytes, fake: Upper, name: str) -> bytes:
    source = tmp_path / name
    source.write_bytes(data)
    output = tmp_path / f"out{source.suffix}"
    handler.translate(source, output, fake, None)
    return output.read_bytes()


def test_srt_numbers_and_timings_untouched_text_translated(tmp_path: Path) -> None:
    fake = Upper()
    out = run(tmp_path, SrtHandler(), SRT.encode("utf-8"), fake, "a.srt").decode("utf-8")
    before, after = SRT.split("\r\n"), out.split("\r\n")
    assert len(before) == len(after)
    for old, new in zip(before, after, strict=True):
        if TIMING.match(old) or not old or old == "♪ 123 ♪":
            assert new == old
        else:
            assert new == fake.one(old)
    assert fake.calls == [
        [
            "The house is red and the dog is big.",
            "- Where is the dog?",
            "- In the <i>garden</i>.",
            "{\\an8}<i>A long sentence in italics.</i>",
        ]
    ]


def test_joined_cue_is_split_again_into_even_lines(tmp_path: Path) -> None:
    source = "1\n00:00:01,000 --> 00:00:02,000\nThe house is red\nand the garden is big.\n"
    out = run(tmp_path, SrtHandler(), source.encode(), Longer(), "b.srt").decode()
    lines = out.splitlines()
    assert lines[:2] == ["1", "00:00:01,000 --> 00:00:02,000"] and len(lines) == 4
    assert " ".join(lines[2:]) == Longer().one("The house is red and the garden is big.")
    assert abs(len(lines[2]) - len(lines[3])) <= 12


def test_split_lines() -> None:
    assert split_lines("one two three four", 2) == ["one two", "three four"]
    assert split_lines("single", 3) == ["single"]
    assert split_lines('a <font color="red">b c</font> d', 2) == ['a <font color="red">b', "c</font> d"]
    assert split_lines("aaaaaaaaaa b c d e", 2) == ["aaaaaaaaaa", "b c d e"]
    assert split_lines("a b c d e f", 3) == ["a b", "c d", "e f"]


def test_legacy_encoded_srt_is_kept_in_its_encoding(tmp_path: Path) -> None:
    data = "1\n00:00:01,000 --> 00:00:02,000\nCafé crème.\n".encode("cp1252")
    out = run(tmp_path, SrtHandler(), data, Upper(), "c.srt")
    assert out.decode("cp1252") == "1\n00:00:01,000 --> 00:00:02,000\nCAFÉ CRÈME.\n"


VTT = """WEBVTT - Test file
Kind: captions

NOTE This is a note
that spans lines

STYLE
::cue { color: yellow }

intro
00:00:01.000 --> 00:00:03.000 align:start line:90%
<v Roger>The house is red.

00:04.000 --> 00:06.000
The <00:00:04.500>dog is <b>big</b>.
"""


def test_webvtt_header_blocks_and_settings_untouched(tmp_path: Path) -> None:
    fake = Upper()
    out = run(tmp_path, WebVttHandler(), VTT.encode(), fake, "d.vtt").decode()
    assert out == VTT.replace("The house is red.", "THE HOUSE IS RED.").replace(
        "The <00:00:04.500>dog is <b>big</b>.", "THE <00:00:04.500>DOG IS <b>BIG</b>."
    )
    assert len(fake.calls[0]) == 2 and "<00:00:04.500>" not in fake.calls[0][1]  # timestamps masked


def test_sniffing_and_bad_files(tmp_path: Path) -> None:
    vtt = tmp_path / "x.vtt"
    vtt.write_text("00:01.000 --> 00:02.000\nNo header\n", encoding="utf-8")
    with pytest.raises(DocumentFormatError):
        handlers.find_handler(vtt)
    srt = tmp_path / "x.srt"
    srt.write_text("just some words, no cues\n", encoding="utf-8")
    with pytest.raises(DocumentFormatError):
        handlers.find_handler(srt)
    srt.write_text(SRT, encoding="utf-8")
    assert handlers.find_handler(srt).name == "srt"
    with pytest.raises(DocumentFormatError, match="WEBVTT"):
        run(tmp_path, WebVttHandler(), b"1\n00:01.000 --> 00:02.000\nHi\n", Upper(), "y.vtt")


@needs_apertium
def test_end_to_end_through_apertium(tmp_path: Path) -> None:
    source = tmp_path / "film.srt"
    source.write_text(SRT, encoding="utf-8")
    with Engine(Settings.from_env()) as engine:
        result = files.translate_file(engine, source, "es")
    out = result.output_path.read_text(encoding="utf-8")
    assert result.output_path.name == "film.es.srt" and result.format == "srt"
    assert "casa" in out and "<i>" in out and "{\\an8}" in out
    timings = [line for line in out.splitlines() if "-->" in line]
    assert timings == [line for line in SRT.splitlines() if "-->" in line]
