"""Subtitle writers checked with parsers nobody here wrote (pysrt, webvtt-py) and with ffmpeg/ffprobe; the
ffmpeg runner's errors, timeout and cancellation."""

from __future__ import annotations

import html
import json
import subprocess
import threading
import time
from pathlib import Path

import pysrt
import pytest
import webvtt
from hypothesis import given, settings
from hypothesis import strategies as st

from dragoman.errors import (
    Cancelled,
    EngineTimeout,
    InvalidRequest,
    MediaToolError,
    MediaToolUnavailable,
)
from dragoman.media.cues import Cue, Word, build_cues
from dragoman.media.ffmpeg import ffmpeg_binary, ffprobe_binary, iso639_2, mux_subtitles, run_ffmpeg
from dragoman.media.subtitle_files import (
    SUBTITLE_FORMATS,
    render,
    srt_timestamp,
    vtt_timestamp,
    write_bilingual_srt,
    write_srt,
    write_txt,
    write_vtt,
)
from dragoman.progress import JobContext

CUES = [
    Cue(0.5, 2.0, ("Hello there,", "my friend.")),
    Cue(2.5, 4.25, ("Fish & chips <b>not</b> a tag",)),
    Cue(3661.0015, 3662.9996, ("An hour later.",)),
]


def test_timestamps() -> None:
    assert srt_timestamp(0) == "00:00:00,000"
    assert srt_timestamp(3661.0015) == "01:01:01,002"
    assert vtt_timestamp(59.9996) == "00:01:00.000"
    assert srt_timestamp(-1.0) == "00:00:00,000"
    assert srt_timestamp(360000.0) == "100:00:00,000"
    with pytest.raises(InvalidRequest):
        srt_timestamp(float("nan"))


def test_srt_read_back_by_pysrt() -> None:
    text = write_srt(CUES)
    assert text.endswith("\n") and text.startswith("1\n00:00:00,500 --> 00:00:02,000\nHello there,\n")
    parsed = pysrt.from_string(text)
    assert [item.index for item in parsed] == [1, 2, 3]
    assert [item.text.split("\n") for item in parsed] == [list(c.lines) for c in CUES]
    assert [(item.start.ordinal, item.end.ordinal) for item in parsed] == [
        (500, 2000),
        (2500, 4250),
        (3661002, 3663000),
    ]


def test_vtt_read_back_by_webvtt_py() -> None:
    text = write_vtt(CUES)
    assert text.startswith("WEBVTT\n\n00:00:00.500 --> 00:00:02.000\n")
    parsed = webvtt.from_string(text).captions
    assert [(c.start, c.end) for c in parsed] == [
        ("00:00:00.500", "00:00:02.000"),
        ("00:00:02.500", "00:00:04.250"),
        ("01:01:01.002", "01:01:03.000"),
    ]
    # the raw text escapes what WebVTT would read as markup; unescaped, it is the cue's text
    assert "&amp;" in parsed[1].text and "&lt;b&gt;" in parsed[1].text
    assert [html.unescape(c.text).split("\n") for c in parsed] == [list(c.lines) for c in CUES]


_NASTY = st.sampled_from(["-->", "\n", "", " ", "<i>", "&", "1", "00:00:01,000 --> 00:00:02,000", "é", "中"])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.text(min_size=0, max_size=12), _NASTY, st.floats(0.05, 3), st.floats(0, 2)),
        max_size=25,
    )
)
def test_any_text_stays_parseable(items: list[tuple[str, str, float, float]]) -> None:
    """Whatever the words hold (blank lines, timing lines, tags, control characters), both parsers read
    exactly the cues written, with their times."""
    words, t = [], 0.0
    for text, nasty, length, gap in items:
        t += gap
        words.append(Word(text + nasty, t, t + length))
        t += length
    cues = [c for c in build_cues(words) if c.text.strip()]
    srt = pysrt.from_string(write_srt(cues))
    vtt = webvtt.from_string(write_vtt(cues)).captions
    written = [c for c in cues if "".join(c.lines).strip()]
    assert len(srt) == len(vtt) == len(written)
    for cue, item, block in zip(written, srt, vtt, strict=True):
        assert item.start.ordinal == round(cue.start * 1000)
        assert block.start == vtt_timestamp(cue.start)
        assert item.text.strip()
        assert "-->" not in item.text and "-->" not in block.text


def test_txt_is_prose_with_paragraphs() -> None:
    cues = [
        Cue(0.0, 1.0, ("Hello there,",)),
        Cue(1.1, 2.0, ("my friend.", "How are you?")),
        Cue(2.1, 3.0, ("Fine",)),
        Cue(6.0, 7.0, ("Later.",)),
    ]
    assert write_txt(cues) == "Hello there, my friend. How are you?\nFine\n\nLater.\n"
    assert write_txt([]) == "" and write_srt([]) == "" and write_vtt([]) == "WEBVTT\n"


def test_bilingual_srt_pairs_each_cue() -> None:
    target = [Cue(9, 9.5, ("Hola,", "amigo mío.")), Cue(9, 9.5, ("Pescado",)), Cue(9, 9.5, ("Una hora.",))]
    parsed = pysrt.from_string(write_bilingual_srt(CUES, target))
    assert parsed[0].text == "Hello there,\nmy friend.\nHola,\namigo mío."
    assert (parsed[0].start.ordinal, parsed[0].end.ordinal) == (500, 2000)  # the source's timing
    with pytest.raises(InvalidRequest):
        write_bilingual_srt(CUES, target[:2])
    assert render("bilingual_srt", target, CUES) == write_bilingual_srt(CUES, target)
    for fmt in SUBTITLE_FORMATS[:3]:
        assert render(fmt, CUES).endswith("\n")
    with pytest.raises(InvalidRequest):
        render("bilingual_srt", target)
    with pytest.raises(InvalidRequest):
        render("ass", CUES)


def _ffprobe_streams(path: Path) -> list[dict[str, object]]:
    out = subprocess.run(
        [ffprobe_binary(), "-v", "error", "-show_streams", "-of", "json", str(path)],
        capture_output=True,
        check=True,
        timeout=30,
    ).stdout
    streams: list[dict[str, object]] = json.loads(out)["streams"]
    return streams


@pytest.mark.parametrize("suffix", ["mp4", "mkv"])
def test_srt_muxed_by_ffmpeg_and_seen_by_ffprobe(tmp_path: Path, suffix: str) -> None:
    video = tmp_path / f"in.{suffix}"
    run_ffmpeg(
        ["-f", "lavfi", "-i", "testsrc=size=64x48:rate=10:duration=5", "-f", "lavfi"]
        + ["-i", "sine=duration=5", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", str(video)],
        timeout=60,
    )
    english, spanish = tmp_path / "in.en.srt", tmp_path / "in.es.srt"
    english.write_text(write_srt(CUES[:2]), encoding="utf-8")
    spanish.write_text(write_srt([Cue(0.5, 2.0, ("Hola,", "amigo mío."))]), encoding="utf-8")
    out = mux_subtitles(video, {"en": english, "es": spanish}, tmp_path / f"out.{suffix}")
    streams = _ffprobe_streams(out)
    subtitles = [s for s in streams if s["codec_type"] == "subtitle"]
    assert [s["codec_name"] for s in subtitles] == (["mov_text"] * 2 if suffix == "mp4" else ["subrip"] * 2)
    tags = [s.get("tags") for s in subtitles]
    assert [t["language"] for t in tags if isinstance(t, dict)] == ["eng", "spa"]
    assert {s["codec_type"] for s in streams} == {"video", "audio", "subtitle"}
    # the text comes back out as SubRip, readable by pysrt
    back = tmp_path / "back.srt"
    run_ffmpeg(["-i", str(out), "-map", "0:s:1", str(back)], timeout=30)
    assert pysrt.open(str(back))[0].text == "Hola,\namigo mío."
    assert not list(tmp_path.glob(".*partial*"))


def test_mux_refuses_a_container_without_text_subtitles(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest):
        mux_subtitles(tmp_path / "a.mp4", {"en": tmp_path / "a.srt"}, tmp_path / "out.avi")
    assert iso639_2("es") == "spa" and iso639_2("pt-BR") == "por" and iso639_2("not a tag!") == "und"


def test_ffmpeg_errors_are_typed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(MediaToolError) as caught:
        run_ffmpeg(["-i", str(tmp_path / "missing.mp4"), str(tmp_path / "x.wav")], timeout=30)
    assert caught.value.status == 502 and "missing.mp4" in caught.value.message
    with pytest.raises(MediaToolError):  # a failed mux leaves no output, nor a partial file
        mux_subtitles(tmp_path / "none.mp4", {"en": tmp_path / "none.srt"}, tmp_path / "out.mp4")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MediaToolUnavailable) as missing:
        ffmpeg_binary()
    assert missing.value.status == 503 and "apt-get install ffmpeg" in missing.value.message


ENDLESS = ["-f", "lavfi", "-i", "sine=frequency=440", "-f", "null", "-"]  # never ends by itself


def test_ffmpeg_timeout_kills_it() -> None:
    started = time.monotonic()
    with pytest.raises(EngineTimeout):
        run_ffmpeg(ENDLESS, timeout=0.6)
    assert time.monotonic() - started < 10


def test_ffmpeg_cancelled_is_killed() -> None:
    context = JobContext.of()
    timer = threading.Timer(0.5, context.cancel.cancel)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(Cancelled):
            run_ffmpeg(ENDLESS, timeout=120, context=context)
    finally:
        timer.cancel()
    assert time.monotonic() - started < 10


def test_arrows_and_blank_lines_in_text_cannot_make_a_timing_line() -> None:
    cue = Cue(1.0, 2.0, ("a ----> b --> c", "", "00:00:05,000 --> 00:00:06,000"))
    for text in (write_srt([cue]), write_vtt([cue])):
        assert text.count("-->") == 1  # the cue's own timing line only
    assert pysrt.from_string(write_srt([cue]))[0].text == "a -> b -> c\n00:00:05,000 -> 00:00:06,000"
