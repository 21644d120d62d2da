"""ffmpeg and ffprobe (GPL builds on Debian) run as programs, never linked into our process.

:func:`run_ffmpeg` runs one command: an argument list (no shell), ``-nostdin -hide_banner -v error``
prepended, stdout and stderr captured, in its own process group, killed whole when the timeout passes or
the job is cancelled (checked every :data:`POLL_SECONDS`), with typed errors: ffmpeg not installed is
:class:`~dragoman.errors.MediaToolUnavailable`, a failed run a :class:`~dragoman.errors.MediaToolError`
quoting the end of its stderr, a run past its timeout an :class:`~dragoman.errors.EngineTimeout`.

:func:`mux_subtitles` adds subtitle tracks (SubRip files) to a video without re-encoding it: ``mov_text``
in MP4/MOV/M4V, ``srt`` in Matroska, ``webvtt`` in WebM, each track tagged with its language (ISO 639-2).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from dragoman.errors import (
    EngineTimeout,
    InvalidRequest,
    MediaToolError,
    MediaToolUnavailable,
)
from dragoman.progress import JobContext

#: Seconds between two checks of a running command's job for cancellation.
POLL_SECONDS = 0.2
#: Bytes of stderr quoted in an error.
_STDERR_TAIL = 600
#: Subtitle codec for each container that can carry text subtitles.
SUBTITLE_CODECS: dict[str, str] = {
    ".mp4": "mov_text",
    ".m4v": "mov_text",
    ".mov": "mov_text",
    ".mkv": "srt",
    ".webm": "webvtt",
}


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise MediaToolUnavailable(
            f"{name} is not installed (or not on PATH): install ffmpeg "
            "(Debian/Ubuntu: apt-get install ffmpeg; macOS: brew install ffmpeg)"
        )
    return found


def ffmpeg_binary() -> str:
    """The path of the ``ffmpeg`` program; :class:`MediaToolUnavailable` when it is not installed."""
    return _binary("ffmpeg")


def ffprobe_binary() -> str:
    """The path of the ``ffprobe`` program; :class:`MediaToolUnavailable` when it is not installed."""
    return _binary("ffprobe")


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def run_program(
    argv: Sequence[str], *, timeout: float, context: JobContext | None = None, what: str = ""
) -> bytes:
    """Run ``argv`` (ffmpeg or ffprobe), return its stdout (see the module docstring)."""
    what = what or Path(argv[0]).name
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        except OSError as exc:
            raise MediaToolUnavailable(f"{what}: cannot start {argv[0]}: {exc.strerror or exc}") from exc
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    proc.wait(timeout=POLL_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    if context is not None:
                        context.check()
                    if time.monotonic() > deadline:
                        raise EngineTimeout(
                            f"{what}: {Path(argv[0]).name} took longer than {timeout:.3g} s and was stopped"
                        ) from None
        except BaseException:  # cancelled, past the timeout, interrupted: the whole group goes
            _kill(proc)
            raise
        err.seek(0)
        tail = err.read().decode("utf-8", "replace").strip()[-_STDERR_TAIL:]
        if proc.returncode != 0:
            raise MediaToolError(f"{what}: {Path(argv[0]).name} exited with status {proc.returncode}: {tail}")
        out.seek(0)
        return out.read()


def run_ffmpeg(args: Sequence[str], *, timeout: float, context: JobContext | None = None) -> bytes:
    """``ffmpeg -nostdin -hide_banner -v error ARGS``; returns its stdout."""
    return run_program(
        [ffmpeg_binary(), "-nostdin", "-hide_banner", "-v", "error", *args],
        timeout=timeout,
        context=context,
        what="ffmpeg",
    )


def iso639_2(language: str) -> str:
    """The three-letter (ISO 639-2/T) code containers tag a track's language with (``es`` → ``spa``);
    ``und`` (undetermined) for a tag that names no language."""
    import langcodes

    try:
        code = langcodes.Language.get(language).to_alpha3()
    except (LookupError, ValueError):
        return "und"
    return code or "und"


def mux_subtitles(
    video: str | Path,
    tracks: Mapping[str, str | Path],
    out: str | Path,
    *,
    timeout: float = 600.0,
    context: JobContext | None = None,
) -> Path:
    """``video`` with ``tracks`` (language → SubRip file) added as subtitle streams, written to ``out``
    (the container named by its suffix: see :data:`SUBTITLE_CODECS`). Video and audio are copied, not
    re-encoded; subtitles already in ``video`` are dropped. ``out`` is written whole or not at all."""
    video, out = Path(video), Path(out)
    codec = SUBTITLE_CODECS.get(out.suffix.lower())
    if codec is None:
        raise InvalidRequest(
            f"cannot put subtitles in {out.name}: use one of {', '.join(sorted(SUBTITLE_CODECS))}"
        )
    if not tracks:
        raise InvalidRequest("no subtitle tracks to add")
    args: list[str] = ["-y", "-i", str(video)]
    for path in tracks.values():
        args += ["-i", str(path)]
    args += ["-map", "0:v?", "-map", "0:a?"]
    for index in range(len(tracks)):
        args += ["-map", f"{index + 1}:s:0"]
    args += ["-c:v", "copy", "-c:a", "copy", "-c:s", codec]
    for index, language in enumerate(tracks):
        args += [f"-metadata:s:s:{index}", f"language={iso639_2(language)}"]
    partial = out.with_name(f".{out.name}.partial{out.suffix}")
    try:
        run_ffmpeg([*args, str(partial)], timeout=timeout, context=context)
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
    return out
