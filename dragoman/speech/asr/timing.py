"""Word timings moved onto the speech itself (issue 15).

Whisper's word timestamps (cross-attention alignment) start the first word of a stretch of speech where
its decoding window starts, not where the voice does: without VAD that is 0.0 s; with faster-whisper's VAD
it is the speech chunk's start, which the VAD pads by 400 ms (``VadOptions.speech_pad_ms``) so that the
decoder hears the onset. Measured on synthesised sentences placed at known times: the first word of each
sentence began 0.25-0.40 s before the voice, and the last word before a pause ended 0.15-0.35 s before
the voice stopped (the alignment's last token ends early).

:func:`speech_regions` runs faster-whisper's Silero VAD again with no padding and a short minimum silence
(about 15 ms a second of audio on 2 cores), which finds where the voice starts and stops within about
40 ms (starts) and 140 ms (ends, on the late side). :func:`snap_words` then moves only the words at those
edges: a word that begins in non-speech and reaches into a speech region starts where the region starts;
the last word of a speech region whose end falls short of the region's end is extended to it (by at most
:data:`MAX_EXTEND` seconds, never into the next word). Words inside speech keep Whisper's times; a word
lying wholly in non-speech (a VAD miss) is left as it is. A word that reaches across a silence of
:data:`SPLIT_GAP` or more is moved onto the side holding more of it. Order is kept and no word overlaps the
next.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from dragoman.media.cues import Word

#: Silence (ms) that separates two speech regions; Whisper's VAD uses 2000, which keeps sentences together.
MIN_SILENCE_MS = 150
#: The most a word's end is moved later to reach the end of its speech region (seconds).
MAX_EXTEND = 0.5
#: A word reaching across a silence at least this long (seconds) is moved onto the side holding more of it:
#: Whisper base sometimes starts a sentence's first word in the pause before it (1 s early, seen in German).
SPLIT_GAP = 0.3
#: A word keeps at least this long after its start moved later (seconds).
MIN_WORD = 0.02


def speech_regions(samples: Any, rate: int = 16_000) -> list[tuple[float, float]]:
    """Where the voice is in ``samples`` (mono float32 at 16 kHz), as (start, end) seconds, unpadded."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    if len(samples) == 0:
        return []
    options = VadOptions(speech_pad_ms=0, min_silence_duration_ms=MIN_SILENCE_MS, min_speech_duration_ms=0)
    found = get_speech_timestamps(samples, options, sampling_rate=rate)
    return [(int(r["start"]) / rate, int(r["end"]) / rate) for r in found if r["end"] > r["start"]]


def snap_words(words: Sequence[Word], regions: Sequence[tuple[float, float]]) -> list[Word]:
    """``words`` with starts moved to the speech onset and ends to the speech end where they fall in
    non-speech at a region's edge (see the module docstring). Linear in words and regions."""
    if not regions:
        return list(words)
    starts = [r[0] for r in regions]
    out: list[Word] = []
    for index, word in enumerate(words):
        start, end = word.start, word.end
        # the region holding the start, or the first one after it
        k = bisect.bisect_right(starts, start) - 1
        inside = k >= 0 and regions[k][0] <= start < regions[k][1]
        if not inside:
            following = k + 1
            if following < len(regions) and regions[following][0] < end - MIN_WORD:
                start = regions[following][0]
        else:
            # a word bridging a silence of SPLIT_GAP or more belongs to the side holding more of it
            j = bisect.bisect_right(starts, end - MIN_WORD) - 1
            if j > k and regions[j][0] - regions[k][1] >= SPLIT_GAP:
                if end - regions[j][0] > regions[k][1] - start:
                    start = regions[j][0]
                else:
                    end = regions[k][1]
        # the region holding the end: extend the region's last word to its end
        k = bisect.bisect_right(starts, end) - 1
        if k >= 0 and regions[k][0] < end < regions[k][1]:
            limit = regions[k][1]
            if index + 1 < len(words):
                limit = min(limit, words[index + 1].start)
            if limit > end and (index + 1 == len(words) or words[index + 1].start >= regions[k][1]):
                end = min(limit, end + MAX_EXTEND)
        if out and start < out[-1].end:
            start = max(start, min(out[-1].end, end))
        out.append(
            Word(word.text, start, max(end, start), word.probability)
            if (start, end)
            != (
                word.start,
                word.end,
            )
            else word
        )
    return out
