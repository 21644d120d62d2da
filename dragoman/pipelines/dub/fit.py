"""Fitting a dub line to its slot (issue 16).

A line is first rendered at its voice's own pace. When it is longer than its slot it is rendered again,
faster, up to the upper bound of the natural speed range (``DubOptions.natural_speed``); still too long, it
borrows the silence after its slot, up to :data:`BORROW_MARGIN` seconds before the next line starts; still
too long, it is compressed by time-stretching that keeps its pitch (WSOLA,
:func:`~dragoman.media.audio.time_stretch`) by at most ``max_stretch``; what is left overlaps the next line.
A line whose speed times compression exceeds the natural range's upper bound is *beyond the natural range*
(flagged, listed in the warnings). A line much
shorter than its slot (under :data:`SLOW_BELOW` of it) is rendered slower, down to the lower bound of the
natural range, so it fills more of it. A line always starts where its original starts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dragoman.media.audio import Audio, time_stretch
from dragoman.pipelines.dub.types import DubOptions

#: Seconds kept free before the next line when a line borrows the silence after its slot.
BORROW_MARGIN = 0.1
#: A line shorter than this share of its slot is rendered slower (within the natural range).
SLOW_BELOW = 0.85
#: Speeds closer than this to the current one are not worth a second render.
_SPEED_STEP = 0.02


@dataclass(frozen=True)
class Fitted:
    """A fitted line: its audio, the synthesis speed, the time-stretch compression after it (1.0: none;
    1.2: 20% shorter), whether that went beyond the natural range, and the seconds spent rendering and
    stretching."""

    audio: Audio
    speed: float
    stretch: float
    beyond_natural: bool
    render_seconds: float = 0.0
    stretch_seconds: float = 0.0


def room_for(start: float, end: float, next_start: float | None, media_end: float) -> float:
    """The seconds a line starting at ``start`` may last before it overlaps the next line: its slot, or up
    to :data:`BORROW_MARGIN` before the next line (or the media's end), whichever is longer."""
    limit = media_end if next_start is None else min(media_end, next_start - BORROW_MARGIN)
    return max(end - start, limit - start, 0.0)


def fit_line(
    render: Callable[[float], Audio],
    slot_seconds: float,
    room_seconds: float,
    options: DubOptions,
    *,
    clock: Callable[[], float] | None = None,
) -> Fitted:
    """Fit the line ``render(speed)`` speaks into ``slot_seconds``, borrowing up to ``room_seconds`` (module
    docstring). At most two renders and one stretch."""
    import time

    now = clock or time.perf_counter
    low, high = options.natural_speed
    began = now()
    audio = render(1.0)
    speed = 1.0
    natural = audio.duration
    slot = max(slot_seconds, 1e-3)
    room = max(room_seconds, slot)
    if natural > slot:
        wanted = min(high, natural / slot * 1.01)  # a hair faster: renders do not scale exactly
        if wanted - 1.0 >= _SPEED_STEP:
            speed = wanted
            audio = render(speed)
    elif natural < SLOW_BELOW * slot and low < 1.0:
        wanted = max(low, natural / slot)
        if 1.0 - wanted >= _SPEED_STEP:
            faster = render(wanted)
            if faster.duration <= slot:
                speed, audio = wanted, faster
    rendered = now()
    if audio.duration <= room or audio.duration == 0:
        return Fitted(audio, speed, 1.0, False, rendered - began, 0.0)
    stretch = min(options.max_stretch, audio.duration / room)
    stretched = time_stretch(audio, 1.0 / stretch)
    beyond = speed * stretch > high + 1e-6
    return Fitted(stretched, speed, stretch, beyond, rendered - began, now() - rendered)
