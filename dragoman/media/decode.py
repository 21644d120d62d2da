"""Audio out of any media file libav reads, decoded in process with PyAV: mono float32 at a chosen rate.

:func:`decode_audio` decodes the first audio stream whole (what speech recognition takes);
:func:`iter_audio` yields it in chunks of bounded size (for work that streams, such as dubbing). Both resample
with libswresample (``AudioResampler(format="flt", layout="mono", rate=rate)``: channels are mixed down),
check ``context`` for cancellation and the deadline about every :data:`CHECK_SECONDS` of audio, and type
libav's errors. Memory is the output (``decode_audio``: a buffer grown as the audio comes, never sized from
the header alone, which may lie) or one chunk (``iter_audio``). Work is linear in the duration.

A stream that is corrupt part of the way through gives the audio up to the damage (libav skips what it
cannot decode); a file with no audio stream is a :class:`~dragoman.errors.NoAudioStream`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from dragoman.errors import EmptyMedia, MediaFormatError, NoAudioStream
from dragoman.media.audio import Audio, FloatArray
from dragoman.media.probe import open_container
from dragoman.progress import JobContext

#: Seconds of audio decoded between two checks of the job's cancellation and deadline (and progress reports).
CHECK_SECONDS = 10.0
#: Seconds of audio the first buffer of :func:`decode_audio` holds (it doubles as needed).
_FIRST_BUFFER_SECONDS = 60.0


def _audio_stream(container: Any, path: Path) -> Any:
    streams = container.streams.audio
    if not streams:
        kinds = ", ".join(str(s.type) for s in container.streams) or "nothing"
        raise NoAudioStream(f"{path.name} has no audio stream (it holds {kinds}): nothing to transcribe")
    stream = streams[0]
    stream.thread_type = "AUTO"
    return stream


def _frames(path: Path, rate: int, context: JobContext | None) -> Iterator[FloatArray]:
    """The first audio stream of ``path`` as mono float32 arrays at ``rate`` Hz, in decoder-sized pieces."""
    import av
    from av.audio.resampler import AudioResampler

    with open_container(path) as container:
        stream = _audio_stream(container, path)
        total = container.duration / 1_000_000 if container.duration else 0.0
        resampler = AudioResampler(format="flt", layout="mono", rate=rate)
        since_check = 0
        done = 0
        step = int(CHECK_SECONDS * rate)
        try:
            for packet in container.demux(stream):
                try:
                    frames = packet.decode()
                except av.InvalidDataError:
                    continue  # a damaged packet: skip it, as ffmpeg does
                for frame in frames:
                    for out in resampler.resample(frame):
                        samples = out.to_ndarray().reshape(-1).astype(np.float32, copy=False)
                        since_check += len(samples)
                        done += len(samples)
                        yield samples
                if context is not None and since_check >= step:
                    since_check = 0
                    context.report(int(done * 1000 / rate), int(total * 1000), "decoding")
            for out in resampler.resample(None):
                yield out.to_ndarray().reshape(-1).astype(np.float32, copy=False)
        except av.FFmpegError as exc:
            raise MediaFormatError(f"decoding the audio of {path.name} failed: {exc}") from exc


def decode_audio(
    path: str | Path,
    *,
    rate: int = 16000,
    max_seconds: float | None = None,
    context: JobContext | None = None,
) -> Audio:
    """The first audio stream of ``path``, mono float32 at ``rate`` Hz; at most ``max_seconds`` of it (the
    rest is not decoded). :class:`EmptyMedia` when it holds no samples at all."""
    path = Path(path)
    limit = None if max_seconds is None else max(0, int(max_seconds * rate))
    buffer = np.empty(int(_FIRST_BUFFER_SECONDS * rate), dtype=np.float32)
    filled = 0
    for samples in _frames(path, rate, context):
        piece = samples if limit is None else samples[: max(0, limit - filled)]
        if filled + len(piece) > len(buffer):
            grown = np.empty(max(2 * len(buffer), filled + len(piece)), dtype=np.float32)
            grown[:filled] = buffer[:filled]
            buffer = grown
        buffer[filled : filled + len(piece)] = piece
        filled += len(piece)
        if limit is not None and filled >= limit:
            break
    if filled == 0:
        raise EmptyMedia(f"{path.name} holds no audio samples")
    # a tight copy when much of the buffer is unused, else a view (the rest is at most half of it)
    samples_out = buffer[:filled].copy() if filled < len(buffer) // 2 else buffer[:filled]
    return Audio(samples_out, rate)


def iter_audio(
    path: str | Path,
    rate: int = 16000,
    chunk_seconds: float = 30.0,
    *,
    context: JobContext | None = None,
) -> Iterator[Audio]:
    """The first audio stream of ``path`` in chunks of ``chunk_seconds`` (the last one shorter), mono
    float32 at ``rate`` Hz. Memory: one chunk, whatever the file's length."""
    path = Path(path)
    size = max(1, int(chunk_seconds * rate))
    pending: list[FloatArray] = []
    held = 0
    for samples in _frames(path, rate, context):
        pending.append(samples)
        held += len(samples)
        while held >= size:
            joined = np.concatenate(pending)
            yield Audio(joined[:size].copy(), rate)
            rest = joined[size:]
            pending = [rest] if len(rest) else []
            held = len(rest)
    if held:
        yield Audio(np.concatenate(pending), rate)
