"""SRT and WebVTT: cue text translated; numbering, timings, settings and header blocks untouched."""

from __future__ import annotations

import codecs
import re
from pathlib import Path

import pysrt
import pytest
import webvtt
from support import needs_apertium

from dragoman.documents import handlers
from dragoman.documents.subtitles import SrtHandler, WebVttHandler, distribute, split_lines
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


@pytest.mark.parametrize("encoding", ["utf-32", "utf-32-be", "utf-16"])
def test_utf32_and_utf16_files_with_a_bom_are_read_as_such(tmp_path: Path, encoding: str) -> None:
    text = "1\n00:00:01,000 --> 00:00:02,000\nCafé crème.\n"
    data = text.encode(encoding) if encoding != "utf-32-be" else codecs.BOM_UTF32_BE + text.encode(encoding)
    out = run(tmp_path, SrtHandler(), data, Upper(), "u.srt")
    assert out.decode("utf-32" if "32" in encoding else encoding) == text.replace(
        "Café crème.", "CAFÉ CRÈME."
    )


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


# --- sentences over cues, cue boundaries, real-world files (issue 11, items 4 and 5) ----------------------


class Rot13(Upper):
    """Changes every letter, as a translation does (tags and braces kept)."""

    def one(self, text: str) -> str:
        parts = PROTECTED.split(text)
        out = [codecs.encode(parts[0], "rot13")]
        for kept, part in zip(PROTECTED.findall(text), parts[1:], strict=True):
            out += [kept, codecs.encode(part, "rot13")]
        return "".join(out)


class Fixed(Upper):
    """Answers every text with ``answer``."""

    def __init__(self, answer: str) -> None:
        super().__init__()
        self.answer = answer

    def one(self, text: str) -> str:
        return self.answer


SENTENCE = (
    "3\n00:00:48,061 --> 00:00:51,588\nIl fut un temps,\navant l'existence du câble,\n\n"
    "4\n00:00:53,166 --> 00:00:56,533\noù le présentateur local\nrégnait en maître.\n\n"
    "5\n00:00:59,272 --> 00:01:03,003\nOù on croyait\ntout ce qui se disait à la télé.\n"
)


def test_sentence_over_cues_is_translated_whole_and_laid_back_over_them(tmp_path: Path) -> None:
    fake = Upper()
    out = run(tmp_path, SrtHandler(), SENTENCE.encode(), fake, "s.srt").decode()
    assert fake.calls == [
        [
            "Il fut un temps, avant l'existence du câble, où le présentateur local régnait en maître.",
            "Où on croyait tout ce qui se disait à la télé.",  # ends a sentence: its own unit
        ]
    ]
    # Each cue keeps its timing and gets the same words back (an even split of its lines)
    cues = [block.splitlines() for block in out.strip().split("\n\n")]
    sources = [block.splitlines() for block in SENTENCE.strip().split("\n\n")]
    assert [c[:2] for c in cues] == [c[:2] for c in sources]
    assert [" ".join(c[2:]) for c in cues] == [" ".join(c[2:]).upper() for c in sources]
    assert all(len(c) == 4 for c in cues)


def test_translated_words_are_shared_in_proportion_and_never_leave_a_cue_empty(tmp_path: Path) -> None:
    source = (
        "1\n00:00:01,000 --> 00:00:02,000\nThe weather today is\n\n2\n00:00:02,500 --> 00:00:04,000\ngood.\n"
    )
    answer = "Das Wetter ist heute wirklich gut."  # 6 words for cues of 20 and 5 characters
    out = run(tmp_path, SrtHandler(), source.encode(), Fixed(answer), "p.srt").decode()
    assert out.splitlines()[2] == "Das Wetter ist heute wirklich" and out.splitlines()[6] == "gut."
    assert distribute("a", [5, 5]) is None  # too short to share: the cues go one by one
    assert distribute("我回家了，然后我看见他。", [10, 10]) == ["我回家了，然", "后我看见他。"]
    assert distribute("a b c d", [100, 1, 1]) == ["a b", "c", "d"]
    fake = Fixed("Ja.")
    out = run(tmp_path, SrtHandler(), source.encode(), fake, "q.srt").decode()
    assert fake.calls == [["The weather today is good."], ["The weather today is", "good."]]
    assert out.count("Ja.") == 2


def test_what_is_not_joined(tmp_path: Path) -> None:
    source = (
        "1\n00:00:01,000 --> 00:00:02,000\n- Where is the\n- Here\n\n"  # dialogue
        "2\n00:00:02,000 --> 00:00:03,000\nhouse <b>now</b>\n\n"  # markup other than whole-line style
        "3\n00:00:03,000 --> 00:00:04,000\nA TITLE\n\n"
        "4\n00:00:04,000 --> 00:00:05,000\nThe next line\n\n\n\n"  # a capital after no punctuation
        "5\n00:00:05,000 --> 00:00:06,000\n<i>the italic</i>\n<i>lines go</i>\n\n"
        "6\n00:00:06,000 --> 00:00:07,000\n<i>on here.</i>\n"  # joined: wrapped alike
    )
    fake = Upper()
    out = run(tmp_path, SrtHandler(), source.encode(), fake, "n.srt").decode()
    assert fake.calls == [
        [
            "- Where is the",
            "- Here",
            "house <b>now</b>",
            "A TITLE",
            "The next line",
            "the italic lines go on here.",
        ]
    ]
    assert "<i>THE ITALIC</i>\n<i>LINES GO</i>\n\n6\n00:00:06,000 --> 00:00:07,000\n<i>ON HERE.</i>\n" in out


VTT_NO_BLANKS = (
    "WEBVTT\n\n"
    "00:04:46.470 --> 00:05:04.080 align:start position:0%\nyeah\nwhat\n"
    "00:05:04.080 --> 00:05:05.069 align:start position:0%\nthis will happen\n"
    "00:05:06.000 --> 00:05:07.000\n00:05:07.000 --> 00:05:08.000\nAnd this.\n"
)


def test_webvtt_timing_line_without_a_blank_line_before_it_starts_a_cue(tmp_path: Path) -> None:
    fake = Upper()
    out = run(tmp_path, WebVttHandler(), VTT_NO_BLANKS.encode(), fake, "y.vtt").decode()
    assert fake.calls == [["yeah what this will happen", "And this."]]
    timings = [line for line in VTT_NO_BLANKS.splitlines() if "-->" in line]
    assert [line for line in out.splitlines() if "-->" in line] == timings
    captions = webvtt.from_string(out).captions
    assert [c.text for c in captions] == ["YEAH\nWHAT", "THIS WILL HAPPEN", "", "AND THIS."]


def test_srt_cue_without_a_blank_line_before_it(tmp_path: Path) -> None:
    source = "1\n00:00:01,000 --> 00:00:02,000\nFirst cue.\n2\n00:00:02,000 --> 00:00:03,000\nSecond cue.\n"
    fake = Upper()
    out = run(tmp_path, SrtHandler(), source.encode(), fake, "z.srt").decode()
    assert fake.calls == [["First cue.", "Second cue."]]
    assert out == source.replace("First cue.", "FIRST CUE.").replace("Second cue.", "SECOND CUE.")


REAL_SUBTITLES = Path(__file__).parent.parent / "data" / "real" / "subtitles"
REAL = sorted(p.name for p in REAL_SUBTITLES.iterdir() if p.suffix in (".srt", ".vtt"))


def _parsed(path: Path) -> list[tuple[str, str, str, str]]:
    """(identifier, start, end, text) of each cue, as webvtt-py or pysrt reads the file."""
    if path.suffix == ".vtt":
        return [(c.identifier or "", c.start, c.end, c.text) for c in webvtt.read(str(path)).captions]
    items = pysrt.open(str(path), encoding="utf-8-sig")
    return [(str(c.index), str(c.start), str(c.end), c.text) for c in items]


@pytest.mark.parametrize("name", REAL)
def test_real_subtitles_keep_every_cue_and_timing(tmp_path: Path, name: str) -> None:
    """webvtt-py and pysrt read the same cues with the same identifiers and timings in the translation, each
    with text where the source had text (none of it the source's), and sentences over cues sent whole."""
    source = REAL_SUBTITLES / name
    output = tmp_path / f"out{source.suffix}"
    handler = WebVttHandler() if source.suffix == ".vtt" else SrtHandler()
    fake = Rot13()
    handler.translate(source, output, fake, None)
    before, after = _parsed(source), _parsed(output)
    assert [cue[:3] for cue in after] == [cue[:3] for cue in before]
    for old, new in zip(before, after, strict=True):
        assert bool(new[3].strip()) == bool(old[3].strip()), (old, new)
        if re.search(r"[A-Za-z]{3}", re.sub(r"<[^>]*>|\{[^}]*\}", "", old[3])):
            assert new[3] != old[3], (old, new)
    assert not any("-->" in text for text in fake.calls[0])
    data, written = source.read_bytes(), output.read_bytes()
    bom = b"\xef\xbb\xbf"
    assert written.startswith(bom) == data.startswith(bom)  # a BOM stays, or stays away
    if b"\r\n" in data:  # CRLF files stay CRLF
        assert b"\n" not in written.replace(b"\r\n", b"")


def test_real_sentences_over_cues_are_joined(tmp_path: Path) -> None:
    """865 Netflix cues, 278 of them parts of sentences that run over two or more cues."""
    source = REAL_SUBTITLES / "webvtt-py-netflix-chicas-del-cable-es.vtt"
    fake = Upper()
    WebVttHandler().translate(source, tmp_path / "out.vtt", fake, None)
    texts = fake.calls[0]
    assert len(texts) < 865 - 50  # fewer units than cues: the sentences were joined (786 here)
    assert sum(1 for t in texts if t.count(" ") > 12) > 50


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


# --- SubStation escapes in SRT: \N (forced break), \n (soft break), \h (hard space) ------------------------

ESCAPED_SRT = (
    "1\r\n00:00:01,000 --> 00:00:03,200\r\n{\\an8}Previously on\\Nthe night shift...\r\n\r\n"
    "2\r\n00:00:03,400 --> 00:00:05,000\r\nI told you\\h-\\hnever again.\r\n\r\n"
    "3\r\n00:00:05,500 --> 00:00:07,000\r\nMeet me at\\h\\h10\\hpm,\r\nand bring the map.\r\n\r\n"
    "4\r\n00:00:07,100 --> 00:00:09,000\r\n\\h\\h\\hwhere the road \\N ends\r\n\r\n"
    "5\r\n00:00:09,500 --> 00:00:11,000\r\n- Who is there?\\h\r\n- Nobody\\nat all.\r\n\r\n"
    "6\r\n00:00:11,500 --> 00:00:13,000\r\n<i>Keep\\hquiet</i>\r\n"
)


def _escapes(text: str) -> list[str]:
    return re.findall(r"[ \t]*(?:\\[Nnh])+[ \t]*", text)


@pytest.mark.parametrize("fake", [Upper(), Rot13()], ids=["upper", "rot13"])
def test_substation_escapes_pass_through_as_placeholders(tmp_path: Path, fake: Upper) -> None:
    """\\N, \\n and \\h reach the engine as placeholders (never as letters it could change: an upper-casing
    engine made \\h into \\H, a letter-changing one \\N into \\A) and come back exactly as they were, with
    the spaces the source had around them; the file still parses with the same cues and timings."""
    from dragoman.pipelines.dub.lines import parse_subtitles

    out = run(tmp_path, SrtHandler(), ESCAPED_SRT.encode("utf-8"), fake, "escapes.srt").decode("utf-8")
    sent = [text for call in fake.calls for text in call]
    assert not any("\\" in text.replace("{\\an8}", "") for text in sent), sent
    assert any("<" in text and "/>" in text and "an8" in text for text in sent)
    assert _escapes(out) == _escapes(ESCAPED_SRT)
    assert not re.search(r"<\d+/>", out)
    assert "\\H" not in out and "\\A" not in out
    # the text around them was translated
    if isinstance(fake, Rot13):
        assert "Cerivbhfyl ba\\Ngur avtug fuvsg" in out and "\\h\\h\\hjurer gur ebnq \\N raqf" in out
    else:
        assert "PREVIOUSLY ON\\NTHE NIGHT SHIFT..." in out and "<i>KEEP\\hQUIET</i>" in out
    # a cue with an escape is not joined with the next one (cue 3 ends with a comma, cue 4 starts lower-case)
    assert not any("MAP" in t.upper() and "ROAD" in t.upper() for t in sent)
    # the project's reader and pysrt read the same cues and timings
    before, after = parse_subtitles(ESCAPED_SRT), parse_subtitles(out)
    assert [(c.start, c.end, len(c.lines)) for c in after] == [(c.start, c.end, len(c.lines)) for c in before]
    (tmp_path / "source.srt").write_text(ESCAPED_SRT, encoding="utf-8", newline="")
    old_items = pysrt.open(str(tmp_path / "source.srt"), encoding="utf-8")
    new_items = pysrt.open(str(tmp_path / "out.srt"), encoding="utf-8")
    assert [(c.index, str(c.start), str(c.end)) for c in new_items] == [
        (c.index, str(c.start), str(c.end)) for c in old_items
    ]
    assert [c.text.count("\\") for c in new_items] == [c.text.count("\\") for c in old_items]


def test_escapes_lost_or_spaced_by_the_engine_come_back_as_the_source_had_them() -> None:
    from dragoman.documents.subtitles import _mask, _unmask

    masked, stamps = _mask("Previously on\\Nthe show", [0])
    assert masked == "Previously on <1/> the show" and stamps == {1: "\\N"}
    assert _unmask("Anteriormente en <1/> el programa", stamps) == "Anteriormente en\\Nel programa"
    assert _unmask("Anteriormente en<1/>el programa", stamps) == "Anteriormente en\\Nel programa"
    assert _unmask("Anteriormente en el programa", stamps) == "Anteriormente en el programa\\N"
    masked, stamps = _mask("\\h\\hwhere the road \\N ends<00:00:01.500>now", [4])
    assert masked == "<5/> where the road <6/> ends<7/>now"
    assert _unmask("<5/> donde el camino <6/> termina<7/>ahora", stamps) == (
        "\\h\\hdonde el camino \\N termina<00:00:01.500>ahora"
    )


@needs_apertium
def test_escapes_through_apertium(tmp_path: Path) -> None:
    source = tmp_path / "escapes.srt"
    source.write_bytes(ESCAPED_SRT.encode("utf-8"))
    with Engine(Settings.from_env()) as engine:
        result = files.translate_file(engine, source, "es")
    out = result.output_path.read_text(encoding="utf-8")
    assert _escapes(out) == _escapes(ESCAPED_SRT), out
    assert not re.search(r"<\d+/>", out) and "\\H" not in out
    timings = [line for line in out.splitlines() if "-->" in line]
    assert timings == [line for line in ESCAPED_SRT.splitlines() if "-->" in line]
