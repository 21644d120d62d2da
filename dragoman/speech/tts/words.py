"""Word timings and per-word edits of a render (issue 14; spec 4.2: ``/api/v1/tts/jobs/:id/words`` and
``/edit``).

**Timings** (:func:`align_render`). No installed engine reports word events, so words are aligned against the
known text: the text is cut into sentences exactly as the synthesizer cuts it
(:func:`~dragoman.speech.tts.text.prepare`); the render is cut into as many sentences at its longest pauses
(the synthesizer puts a pause of its own between sentences); within a sentence, the boundary between two words
is placed where the words' share of the sentence's letters puts it, then moved to the quietest 10 ms frame
within ±40 % of a word's average length (words are usually separated by a dip in energy, often a silence);
finally each word's start and end are pulled in past silent frames at its edges. The timings are monotonic,
non-overlapping and inside the audio (the tests check); they are an alignment, not engine events — a word
boundary inside connected speech can be off by tens of milliseconds.

**Edits** (:func:`apply_edits`). An edit names a word by index and changes it: ``pitch_st`` (−12..12
semitones), ``speed`` (0.5..2.0, >1 faster), ``gain_db`` (−24..12), ``pause_ms`` (0..3000: silence inserted
after the word). Only the word's span is re-processed (pitch shift and WSOLA time stretch from
:mod:`dragoman.media.audio`, then gain) and spliced back with 10 ms linear crossfades *inside* the span, so
every sample before the span is unchanged and every sample after it is unchanged and shifted by the change in
length (the tests compare bytes). Edits apply last word first so each span is where the timings say; the
answer carries the new timings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dragoman.errors import InvalidRequest
from dragoman.media.audio import Audio, pitch_shift, time_stretch
from dragoman.speech.tts.engines import WordTiming
from dragoman.speech.tts.text import prepare

FloatArray = npt.NDArray[np.float64]

_HOP_S = 0.01
CROSSFADE_S = 0.01
PITCH_RANGE = (-12.0, 12.0)
SPEED_RANGE = (0.5, 2.0)
GAIN_RANGE = (-24.0, 12.0)
PAUSE_RANGE = (0.0, 3000.0)
MAX_EDITS = 1000


def _levels(audio: Audio) -> FloatArray:
    """Level (dB) of each 10 ms frame (non-overlapping)."""
    hop = max(1, round(_HOP_S * audio.rate))
    count = len(audio.samples) // hop
    if count == 0:
        return np.zeros(0)
    x = audio.samples[: count * hop].astype(np.float64).reshape(count, hop)
    levels: FloatArray = 10 * np.log10(np.mean(x * x, axis=1) + 1e-12)
    return levels


def _silent(levels: FloatArray) -> npt.NDArray[np.bool_]:
    if len(levels) == 0:
        return np.zeros(0, dtype=bool)
    peak = float(np.percentile(levels, 99))
    mask: npt.NDArray[np.bool_] = levels < peak - 40.0
    return mask


def _sentence_spans(audio: Audio, count: int) -> list[tuple[int, int]]:
    """``count`` frame ranges of ``audio``: cut at the ``count − 1`` longest silent runs (each cut in the
    middle of its run), leading and trailing silence left out."""
    levels = _levels(audio)
    silent = _silent(levels)
    n = len(levels)
    voiced = np.flatnonzero(~silent)
    if len(voiced) == 0:
        return [(0, n)] * count
    first, last = int(voiced[0]), int(voiced[-1]) + 1
    runs: list[tuple[int, int]] = []  # (length, middle) of inner silent runs
    i = first
    while i < last:
        if silent[i]:
            j = i
            while j < last and silent[j]:
                j += 1
            runs.append((j - i, (i + j) // 2))
            i = j
        else:
            i += 1
    cuts = sorted(m for _, m in sorted(runs, reverse=True)[: count - 1])
    while len(cuts) < count - 1:  # fewer pauses than sentences: split the rest evenly
        cuts.append(last)
    edges = [first, *cuts, last]
    return [(edges[k], edges[k + 1]) for k in range(count)]


def _align_sentence(
    levels: FloatArray, silent: npt.NDArray[np.bool_], span: tuple[int, int], words: list[str]
) -> list[tuple[int, int]]:
    start, end = span
    # pull the sentence in to its voiced frames
    while start < end - 1 and silent[start]:
        start += 1
    while end > start + 1 and silent[end - 1]:
        end -= 1
    frames = max(1, end - start)
    weights = np.array([max(1, sum(ch.isalnum() for ch in w)) for w in words], dtype=np.float64)
    shares = np.cumsum(weights) / weights.sum()
    avg = frames / len(words)
    reach = max(1, int(0.4 * avg))
    # each word keeps at least half its letters' share of the sentence's sounding frames (and 20 ms)
    sounding = np.concatenate([[0], np.cumsum(~silent[start:end])])  # sounding frames before start + i
    total = int(sounding[-1])
    least = np.maximum(2, (0.5 * weights / weights.sum() * total).astype(int))
    after = np.concatenate([np.cumsum(least[::-1])[::-1][1:], [0]])  # frames the later words need
    bounds = [start]
    for k, share in enumerate(shares[:-1]):
        nominal = start + int(np.searchsorted(sounding, share * total))
        need = sounding[bounds[-1] - start] + least[k]
        lo = max(start + int(np.searchsorted(sounding, need)), nominal - reach)
        hi = min(start + int(np.searchsorted(sounding, total - after[k], side="right")) - 1, nominal + reach)
        if hi <= lo:
            bounds.append(min(max(bounds[-1] + 1, nominal), end - 1) if end - 1 > bounds[-1] else bounds[-1])
            continue
        window = levels[lo : hi + 1]
        # the quietest frame; among equally quiet (silent) frames, the one nearest the nominal place
        quiet = float(window.min())
        near = np.flatnonzero(window <= quiet + 1.0) + lo
        bounds.append(int(near[np.argmin(np.abs(near - nominal))]))
    bounds.append(end)
    out: list[tuple[int, int]] = []
    for k in range(len(words)):
        a, b = bounds[k], max(bounds[k + 1], bounds[k])
        while a < b - 1 and silent[a]:
            a += 1
        while b > a + 1 and silent[b - 1]:
            b -= 1
        out.append((a, b))
    return out


def align_render(audio: Audio, text: str, language: str) -> tuple[WordTiming, ...]:
    """Word timings of a render of ``text`` (module docstring): one per word of the sentences the
    synthesizer spoke, monotonic, inside the audio."""
    sentences = [s.split() for s in prepare(text, language)]
    sentences = [s for s in sentences if s]
    if not sentences or len(audio.samples) == 0:
        return ()
    levels = _levels(audio)
    silent = _silent(levels)
    spans = _sentence_spans(audio, len(sentences))
    hop = _HOP_S
    timings: list[WordTiming] = []
    for words, span in zip(sentences, spans, strict=True):
        for word, (a, b) in zip(words, _align_sentence(levels, silent, span, words), strict=True):
            start = round(a * hop, 3)
            end = round(min(b * hop, audio.duration), 3)
            if timings and start < timings[-1].end:
                start = timings[-1].end
            timings.append(WordTiming(word, start, max(start, end)))
    return tuple(timings)


# ----- edits ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WordEdit:
    """A change to one word (ranges in the module docstring); neutral values change nothing."""

    index: int
    pitch_st: float = 0.0
    speed: float = 1.0
    gain_db: float = 0.0
    pause_ms: float = 0.0

    @property
    def neutral(self) -> bool:
        return self.pitch_st == 0 and self.speed == 1 and self.gain_db == 0 and self.pause_ms == 0


def _number(data: Mapping[str, object], key: str, default: float, bounds: tuple[float, float]) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(float(value)):
        raise InvalidRequest(f"edit field {key} must be a finite number")
    number = float(value)
    if not bounds[0] <= number <= bounds[1]:
        raise InvalidRequest(
            f"edit field {key} must be between {bounds[0]:g} and {bounds[1]:g}, not {number:g}"
        )
    return number


def parse_edits(body: object, words: Sequence[WordTiming]) -> list[WordEdit]:
    """The ``edits`` of an edit request (``{"edits": [{"index": 3, "pitch_st": 2, ...}]}``), checked against
    the ``words`` (an index out of range, a ``word`` that does not match, unknown fields: 400)."""
    if not isinstance(body, Mapping) or not isinstance(body.get("edits"), list) or not body["edits"]:
        raise InvalidRequest(
            'the body must be {"edits": [{"index": N, "pitch_st"|"speed"|"gain_db"|"pause_ms": …}]}'
        )
    items = body["edits"]
    if len(items) > MAX_EDITS:
        raise InvalidRequest(f"at most {MAX_EDITS} edits in one request")
    known = {"index", "word", "pitch_st", "speed", "gain_db", "pause_ms"}
    edits: dict[int, WordEdit] = {}
    for item in items:
        if not isinstance(item, Mapping):
            raise InvalidRequest("each edit must be an object")
        unknown = sorted(str(k) for k in item if k not in known)
        if unknown:
            raise InvalidRequest(f"unknown edit fields {unknown}; known: {sorted(known)}")
        index = item.get("index")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(words):
            raise InvalidRequest(f"edit index must be a word index from 0 to {len(words) - 1}")
        if "word" in item and item["word"] != words[index].word:
            raise InvalidRequest(f"word {index} is {words[index].word!r}, not {item['word']!r}")
        if index in edits:
            raise InvalidRequest(f"word {index} is edited twice in one request")
        edits[index] = WordEdit(
            index,
            pitch_st=_number(item, "pitch_st", 0.0, PITCH_RANGE),
            speed=_number(item, "speed", 1.0, SPEED_RANGE),
            gain_db=_number(item, "gain_db", 0.0, GAIN_RANGE),
            pause_ms=_number(item, "pause_ms", 0.0, PAUSE_RANGE),
        )
    return [edits[k] for k in sorted(edits)]


def _process(segment: Audio, edit: WordEdit) -> npt.NDArray[np.float32]:
    audio = segment
    if edit.pitch_st:
        audio = pitch_shift(audio, edit.pitch_st)
    if edit.speed != 1.0:
        audio = time_stretch(audio, 1.0 / edit.speed)
    samples = audio.samples.astype(np.float64)
    if edit.gain_db:
        samples = np.clip(samples * 10 ** (edit.gain_db / 20), -1.0, 1.0)
    return samples.astype(np.float32)


def _moved(word: WordTiming, seconds: float) -> WordTiming:
    return WordTiming(word.word, round(word.start + seconds, 4), round(word.end + seconds, 4))


def apply_edits(
    audio: Audio, words: Sequence[WordTiming], edits: Sequence[WordEdit]
) -> tuple[Audio, tuple[WordTiming, ...]]:
    """``audio`` with each edited word re-processed and spliced back (module docstring), and the timings
    after the edits."""
    samples = audio.samples
    timings = list(words)
    fade = max(1, round(CROSSFADE_S * audio.rate))
    pieces: list[npt.NDArray[np.float32]] = []
    done = 0  # samples of the input already in pieces
    shift = 0  # samples the output has gained so far (edits before the current word)
    ordered = sorted(edits, key=lambda e: e.index)
    for position, edit in enumerate(ordered):
        word = words[edit.index]
        a = min(len(samples), max(done, round(word.start * audio.rate)))
        b = min(len(samples), max(a, round(word.end * audio.rate)))
        if not edit.neutral:
            original = samples[a:b]
            new = original
            if (edit.pitch_st or edit.speed != 1.0 or edit.gain_db) and len(original):
                new = _process(Audio(original, audio.rate), edit)
                edge = min(fade, len(original) // 2, len(new) // 2)
                if edge > 0:
                    ramp = np.linspace(0.0, 1.0, edge, dtype=np.float32)
                    new = new.copy()
                    new[:edge] = original[:edge] * (1 - ramp) + new[:edge] * ramp
                    new[-edge:] = new[-edge:] * (1 - ramp) + original[-edge:] * ramp
            pause = np.zeros(round(edit.pause_ms / 1000 * audio.rate), dtype=np.float32)
            pieces += [samples[done:a], new, pause]
            done = b
            start = word.start + shift / audio.rate
            timings[edit.index] = WordTiming(
                word.word, round(start, 4), round((a + shift + len(new)) / audio.rate, 4)
            )
            shift += len(new) + len(pause) - len(original)
        else:
            timings[edit.index] = _moved(word, shift / audio.rate)
        # the words up to the next edit move by what the edits so far added
        stop = ordered[position + 1].index if position + 1 < len(ordered) else len(words)
        for k in range(edit.index + 1, stop):
            timings[k] = _moved(words[k], shift / audio.rate)
    pieces.append(samples[done:])
    samples = np.concatenate(pieces).astype(np.float32) if len(pieces) > 1 else samples
    return Audio(samples, audio.rate), tuple(timings)


def timings_to_json(words: Sequence[WordTiming]) -> list[dict[str, object]]:
    return [{"index": i, "word": w.word, "start": w.start, "end": w.end} for i, w in enumerate(words)]


def timings_from_json(data: Sequence[Mapping[str, object]]) -> tuple[WordTiming, ...]:
    out = []
    for item in data:
        start, end = item["start"], item["end"]
        assert isinstance(start, int | float) and isinstance(end, int | float)
        out.append(WordTiming(str(item["word"]), float(start), float(end)))
    return tuple(out)
