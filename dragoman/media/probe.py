"""What a media file holds: its container, streams and duration, read with PyAV (libav, in process).

:func:`probe` refuses, with typed errors, what cannot be worked on: a file over the size limit
(:class:`~dragoman.errors.FileTooLarge`, checked before the file is opened), a file that is not media or is
corrupt (:class:`~dragoman.errors.MediaFormatError`): a still image, a file whose content is of another type
than its name says (a PNG or a WAV named ``.mp4``), an audio stream whose header declares an impossible
sample rate; and media that lasts no time at all (:class:`~dragoman.errors.EmptyMedia`). It does not
require an audio stream (``has_audio`` says; the recogniser's callers use :func:`require_audio`).

The duration is what the packets really cover, not only what the header declares: the packets from ten
seconds before the declared end to the end of the file are read (demuxed, not decoded), and every packet
from the start when none is found there. A header that declares more than the file holds (a truncated
download, a forged duration) or less (to be billed less) is not believed: the packets' span is the duration
when it differs from the header's by more than :data:`DURATION_SLACK_S` seconds or 1%. Credits are billed on
this duration, and decoding reads the same packets, so a file is billed for what it holds.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dragoman.errors import (
    EmptyMedia,
    FileTooLarge,
    MediaFormatError,
    NoAudioStream,
    file_error,
)
from dragoman.media.audio import MAX_RATE, MIN_RATE

StreamKind = Literal["audio", "video", "subtitle", "data"]

#: Container names (as libav's demuxers call themselves) that a file name's suffix promises. A known suffix
#: whose file is read by another demuxer lies about its type.
SUFFIX_FORMATS: dict[str, frozenset[str]] = {
    ".mp4": frozenset({"mov,mp4,m4a,3gp,3g2,mj2"}),
    ".m4a": frozenset({"mov,mp4,m4a,3gp,3g2,mj2"}),
    ".m4v": frozenset({"mov,mp4,m4a,3gp,3g2,mj2"}),
    ".mov": frozenset({"mov,mp4,m4a,3gp,3g2,mj2"}),
    ".3gp": frozenset({"mov,mp4,m4a,3gp,3g2,mj2"}),
    ".mkv": frozenset({"matroska,webm"}),
    ".mka": frozenset({"matroska,webm"}),
    ".webm": frozenset({"matroska,webm"}),
    ".mp3": frozenset({"mp3"}),
    ".wav": frozenset({"wav", "w64"}),
    ".ogg": frozenset({"ogg"}),
    ".oga": frozenset({"ogg"}),
    ".opus": frozenset({"ogg"}),
    ".flac": frozenset({"flac"}),
    ".aac": frozenset({"aac"}),
    ".avi": frozenset({"avi"}),
    ".ts": frozenset({"mpegts"}),
    ".mts": frozenset({"mpegts"}),
    ".mpg": frozenset({"mpeg"}),
    ".mpeg": frozenset({"mpeg"}),
    ".wma": frozenset({"asf"}),
    ".wmv": frozenset({"asf"}),
    ".flv": frozenset({"flv"}),
    ".aiff": frozenset({"aiff"}),
    ".aif": frozenset({"aiff"}),
    ".amr": frozenset({"amr"}),
}
#: Seconds before the declared end from which a long file's packets are read to measure its duration.
TAIL_SECONDS = 10.0
#: Seconds the packets may differ from the declared duration before the header is not believed (codec
#: padding and priming make them differ by tens of milliseconds in honest files).
DURATION_SLACK_S = 0.5
#: Demuxers of still images and text: never media to transcribe, whatever the name.
_NOT_MEDIA = ("_pipe", "image2", "tty", "srt", "webvtt", "ass", "lrc", "subviewer", "jacosub", "mpl2")


@dataclass(frozen=True)
class StreamInfo:
    """One stream: its index in the file, kind, codec, and what is known of its duration and shape."""

    index: int
    kind: StreamKind
    codec: str
    duration: float | None = None
    sample_rate: int | None = None
    channels: int | None = None
    width: int | None = None
    height: int | None = None
    #: A still picture attached to the file (an MP3's or M4A's cover art: a video stream of one frame with
    #: libav's ``attached_pic`` disposition), not a video: :attr:`MediaInfo.has_video` leaves it out.
    attached_pic: bool = False


@dataclass(frozen=True)
class MediaInfo:
    """A probed file: ``container`` is libav's demuxer name, ``duration`` seconds the packets cover (see
    the module docstring), ``declared_duration`` what the header says (None when it says nothing)."""

    path: Path
    container: str
    duration: float
    size_bytes: int
    streams: tuple[StreamInfo, ...]
    declared_duration: float | None = None

    @property
    def has_audio(self) -> bool:
        return any(s.kind == "audio" for s in self.streams)

    @property
    def has_video(self) -> bool:
        """Whether a moving picture is there: cover art (``attached_pic``) is not video, so an MP3 with a
        cover is dubbed, muxed and billed as audio."""
        return any(s.kind == "video" and not s.attached_pic for s in self.streams)

    @property
    def audio(self) -> StreamInfo | None:
        """The first audio stream (the one decoded), or None."""
        return next((s for s in self.streams if s.kind == "audio"), None)


def open_container(path: Path) -> Any:
    """``av.open(path)`` with libav's errors typed: a missing or unreadable file is a
    :class:`~dragoman.errors.FileAccessError`, anything libav cannot read a :class:`MediaFormatError`."""
    import av

    try:
        return av.open(str(path), metadata_errors="ignore")
    except (FileNotFoundError, PermissionError, IsADirectoryError) as exc:
        raise file_error(exc, f"reading {path.name}") from exc
    except av.FFmpegError as exc:
        raise MediaFormatError(f"{path.name} is not audio or video that can be read: {_reason(exc)}") from exc
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise MediaFormatError(f"{path.name} cannot be read as media: {exc}") from exc


def _reason(exc: BaseException) -> str:
    text = getattr(exc, "strerror", None) or str(exc)
    return str(text).split(": '")[0]


def _kind(stream_type: str) -> StreamKind:
    if stream_type in ("audio", "video", "subtitle"):
        return stream_type  # type: ignore[return-value]
    return "data"


def _seconds(value: Any, time_base: Any) -> float | None:
    if value is None or time_base is None:
        return None
    return float(value * time_base)


def _attached_pic(stream: Any) -> bool:
    """Whether libav marks ``stream`` as attached cover art (disposition ``attached_pic``)."""
    from av.stream import Disposition

    try:
        return bool(int(stream.disposition) & int(Disposition.attached_pic))
    except (AttributeError, TypeError, ValueError):
        return False


def _stream_info(stream: Any) -> StreamInfo:
    ctx = stream.codec_context
    kind = _kind(stream.type)
    codec = getattr(ctx, "name", None) or "unknown"
    duration = _seconds(stream.duration, stream.time_base)
    if kind == "audio":
        layout = getattr(ctx, "layout", None)
        channels = getattr(layout, "nb_channels", None) if layout is not None else None
        return StreamInfo(stream.index, kind, codec, duration, ctx.sample_rate or None, channels)
    if kind == "video":
        return StreamInfo(
            stream.index,
            kind,
            codec,
            duration,
            width=ctx.width or None,
            height=ctx.height or None,
            attached_pic=_attached_pic(stream),
        )
    return StreamInfo(stream.index, kind, codec, duration)


def check_size(path: Path, max_bytes: int | None) -> int:
    """The size of ``path`` in bytes; :class:`FileTooLarge` when over ``max_bytes``."""
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        raise file_error(exc, f"reading {path.name}") from exc
    if not path.is_file():
        raise MediaFormatError(f"{path.name} is not a regular file")
    if max_bytes is not None and size > max_bytes:
        raise FileTooLarge(
            f"{path.name} is {size / 1e6:.1f} MB, over the {max_bytes / 1e6:.0f} MB limit of one media file"
        )
    return size


def _check_type(path: Path, container: str) -> None:
    if any(container.endswith(marker) or container == marker.strip("_") for marker in _NOT_MEDIA):
        raise MediaFormatError(f"{path.name} is not audio or video (it reads as {container})")
    promised = SUFFIX_FORMATS.get(path.suffix.lower())
    if promised is not None and container not in promised:
        raise MediaFormatError(
            f"{path.name} is named {path.suffix} but its content is {container}: "
            "give the file the name of what it is"
        )


def _packet_span(container: Any) -> tuple[float, float] | None:
    """The earliest start and the latest end (seconds) of the packets ``container`` yields from where it
    stands to the end of the file, or None when it yields none with a time."""
    import av

    first = math.inf
    last = -math.inf
    try:
        for packet in container.demux():
            if packet.pts is None or packet.time_base is None:
                continue
            start = float(packet.pts * packet.time_base)
            end = start + float((packet.duration or 0) * packet.time_base)
            first = min(first, start)
            last = max(last, end)
    except av.FFmpegError:
        pass  # corrupt or cut short past here: what was read so far is what the file holds
    if last == -math.inf:
        return None
    return first, last


def _measured(container: Any, path: Path, declared: float | None) -> float | None:
    """Seconds the packets of ``path`` cover, or None when no packet has a time. A long file is read from
    :data:`TAIL_SECONDS` before its declared end (a seek, then the packets to the end of the file); when
    nothing is found there (the file ends before its header says), every packet is read from the start."""
    import av

    origin = container.start_time / 1_000_000 if container.start_time is not None else 0.0
    if declared is not None and declared > 2 * TAIL_SECONDS:
        try:
            container.seek(int((origin + declared - TAIL_SECONDS) * 1_000_000), backward=True)
            span = _packet_span(container)
        except av.FFmpegError:
            span = None
        if span is not None and span[1] >= origin + declared - TAIL_SECONDS:
            return max(0.0, span[1] - origin)
    with open_container(path) as again:
        span = _packet_span(again)
    return None if span is None else max(0.0, span[1] - span[0])


def probe(path: str | Path, *, max_bytes: int | None = None) -> MediaInfo:
    """What ``path`` holds (see the module docstring for the checks and the errors)."""
    path = Path(path)
    size = check_size(path, max_bytes)
    if size == 0:
        raise MediaFormatError(f"{path.name} is empty (0 bytes)")
    with open_container(path) as container:
        name = str(container.format.name)
        _check_type(path, name)
        streams = tuple(_stream_info(s) for s in container.streams)
        declared = container.duration / 1_000_000 if container.duration is not None else None
        if declared is None or declared <= 0:
            declared = max((s.duration or 0.0 for s in streams), default=0.0) or None
        if not streams:
            raise EmptyMedia(f"{path.name} holds no audio or video streams")
        for stream in streams:
            if stream.kind == "audio" and not MIN_RATE <= (stream.sample_rate or 0) <= MAX_RATE:
                raise MediaFormatError(
                    f"{path.name}: audio stream {stream.index} declares a sample rate of "
                    f"{stream.sample_rate} Hz (a corrupt header: audio is {MIN_RATE}..{MAX_RATE} Hz)"
                )
        measured = _measured(container, path, declared)
    if measured is None:
        duration = 0.0
    elif declared is None or abs(measured - declared) > max(DURATION_SLACK_S, 0.01 * declared):
        duration = measured  # a header that says more (or less) than the packets hold is not believed
    else:
        duration = declared
    if duration <= 0:
        raise EmptyMedia(f"{path.name} lasts 0 seconds: there is nothing to hear")
    return MediaInfo(path, name, duration, size, streams, declared)


def require_audio(info: MediaInfo) -> StreamInfo:
    """The first audio stream of ``info``; :class:`NoAudioStream` when it has none."""
    audio = info.audio
    if audio is None:
        kinds = ", ".join(f"{s.kind} ({s.codec})" for s in info.streams) or "nothing"
        raise NoAudioStream(f"{info.path.name} has no audio stream (it holds {kinds}): nothing to transcribe")
    return audio
