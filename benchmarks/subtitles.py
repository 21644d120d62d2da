"""Subtitles (issue 15): dragoman's transcription against faster-whisper called directly, the real-time
factor, the word error rate per language and the share of cues that obey the subtitle rules, in one run.

    python benchmarks/subtitles.py            # six languages, 5 alternated rounds
    python benchmarks/subtitles.py --quick    # a smoke run: 2 rounds, English and Spanish

The test set is made first, as the tests make it (dragoman.testing.media.make_speech_media): per language,
three sentences spoken by the embedded voices (SVOX Pico in en, es, de, fr, it; espeak-ng in nl) with 1 s of
silence and low noise (-40 dBFS) between them, in an MP4 (AAC audio, H.264 test video). The model is the
embedded Whisper base (int8 on the CPU, the engine's threads), beam 5, VAD on, word timestamps, the
language given.

1. **Time, side by side**: each round runs the sides over the whole set, in alternating order:
   - ``dragoman``: :func:`dragoman.pipelines.subtitles.recognise_file` (probe, decode with PyAV, recognise,
     word timings snapped onto the speech) and :func:`~dragoman.pipelines.subtitles.caption_track` (cues);
   - ``faster-whisper``: ``faster_whisper.decode_audio`` on the same file and ``WhisperModel.transcribe``
     of the same model object with the same options, its segments read to the end.
   and the same two on the same decoded samples (recognition alone). The overhead is the paired ratio of
   the CPU seconds this process spent per round (target: at most 10%; CPU time, because other work on a
   shared machine moves wall times several-fold); the real-time factor is wall seconds per second of audio
   (below 1 is faster than real time).
2. **Word error rate per language** (word-level Levenshtein on normalised text,
   :func:`dragoman.speech.asr.score.word_error_rate`) of each side's transcript against the sentences said.
3. **Timing**: how far each sentence's first word starts from where its voice starts (and its last word
   ends from where it stops), median and worst, for both sides.
4. **Cue rules** (:func:`dragoman.media.cues.rule_violations`: 2 lines of 42 characters, 1-7 s, 20
   characters a second, 80 ms gaps): the share of dragoman's cues that break none, against faster-whisper's
   raw segments taken as cues (each segment's span, its text wrapped in lines the same way).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness as harness

SENTENCES: dict[str, tuple[str, ...]] = {
    "en": (
        "The old man bought a red car yesterday.",
        "My sister opened the blue door this morning.",
        "When the rain stopped in the afternoon, the children ran outside and played football in the park "
        "until dinner.",
    ),
    "es": (
        "El viejo compró un coche rojo ayer.",
        "Mi hermana abrió la puerta azul esta mañana.",
        "Cuando paró la lluvia por la tarde, los niños salieron a jugar al fútbol en el parque.",
    ),
    "de": (
        "Der alte Mann kaufte gestern ein rotes Auto.",
        "Meine Schwester öffnete heute Morgen die blaue Tür.",
        "Als der Regen am Nachmittag aufhörte, spielten die Kinder im Park Fußball.",
    ),
    "fr": (
        "Le vieil homme a acheté une voiture rouge hier.",
        "Ma sœur a ouvert la porte bleue ce matin.",
        "Quand la pluie s'est arrêtée, les enfants sont sortis jouer au football dans le parc.",
    ),
    "it": (
        "Il vecchio ha comprato una macchina rossa ieri.",
        "Mia sorella ha aperto la porta blu stamattina.",
        "Quando la pioggia si è fermata, i bambini sono usciti a giocare a calcio nel parco.",
    ),
    "nl": (
        "De oude man kocht gisteren een rode auto.",
        "Mijn zus opende vanmorgen de blauwe deur.",
        "Toen de regen ophield, gingen de kinderen buiten voetballen in het park.",
    ),
}


class Item:
    def __init__(self, language: str, path: Path, clips: list[Any], seconds: float) -> None:
        self.language = language
        self.path = path
        self.clips = clips
        self.seconds = seconds
        self.dragoman: Any = None  # (transcript, track)
        self.direct: Any = None  # list of faster-whisper segments


def make_set(folder: Path, languages: list[str]) -> list[Item]:
    from dragoman.media.probe import probe
    from dragoman.testing.media import make_speech_media

    items = []
    for code in languages:
        path = folder / f"speech-{code}.mp4"
        clips = make_speech_media(path, [(code, s) for s in SENTENCES[code]], gap=1.0, noise_db=-40.0)
        items.append(Item(code, path, clips, probe(path).duration))
    return items


def edges(words: list[tuple[float, float]], clips: list[Any]) -> list[float]:
    """|first word start - voice start| and |last word end - voice end| per sentence (nearest words)."""

    def nearest(start: float, end: float) -> Any:
        return min(clips, key=lambda c: max(0.0, float(c.start) - end, start - float(c.end)))

    out: list[float] = []
    for clip in clips:
        mine = [w for w in words if nearest(*w) is clip]
        if mine:
            out += [abs(mine[0][0] - clip.start), abs(mine[-1][1] - clip.end)]
        else:
            out += [float("inf"), float("inf")]
    return out


def share_obeying(cues: list[Any]) -> tuple[int, int]:
    from dragoman.media.cues import rule_violations

    good = sum(
        1
        for i, cue in enumerate(cues)
        if not rule_violations(cue, cues[i + 1] if i + 1 < len(cues) else None)
    )
    return good, len(cues)


def main(argv: list[str] | None = None) -> int:
    parser = harness.parser(__doc__, rounds=5, quick_rounds=2)
    args = parser.parse_args(argv)
    rounds = harness.rounds_of(args)

    from faster_whisper import decode_audio

    from dragoman.media.cues import Cue, wrap_lines
    from dragoman.pipelines.subtitles import caption_track, recognise_file
    from dragoman.settings import Settings
    from dragoman.speech.asr import Recognizer, TranscribeOptions
    from dragoman.speech.asr.score import word_error_rate

    languages = ["en", "es"] if args.quick else list(SENTENCES)
    folder = Path(tempfile.mkdtemp(prefix="dragoman-bench-subtitles-"))
    settings = Settings.from_env()
    recognizer = Recognizer(settings)
    started = time.perf_counter()
    loaded = recognizer.load()
    print(
        f"model {loaded.model_id} ({loaded.device}, {loaded.compute_type}, {loaded.threads} threads; "
        f"loaded in {time.perf_counter() - started:.1f} s); {os.cpu_count()} CPUs; {rounds} rounds"
    )
    items = make_set(folder, languages)
    audio_seconds = sum(i.seconds for i in items)
    print(
        f"test set: {len(items)} media files ({', '.join(languages)}), {audio_seconds:.1f} s of audio in all"
    )
    model = loaded.model

    def dragoman_side() -> None:
        for item in items:
            _, transcript = recognise_file(item.path, recognizer, TranscribeOptions(language=item.language))
            item.dragoman = (transcript, caption_track(transcript))

    def direct_side() -> None:
        for item in items:
            samples = decode_audio(str(item.path), sampling_rate=16000)
            segments, _ = model.transcribe(
                samples, language=item.language, beam_size=5, vad_filter=True, word_timestamps=True
            )
            item.direct = list(segments)

    from dragoman.media.audio import Audio
    from dragoman.media.decode import decode_audio as dragoman_decode

    samples = {item.language: dragoman_decode(item.path, rate=16000).samples for item in items}
    texts: dict[str, dict[str, str]] = {"ours": {}, "theirs": {}}

    def dragoman_samples() -> None:
        for item in items:
            audio = Audio(samples[item.language], 16000)
            heard = recognizer.transcribe(audio, TranscribeOptions(language=item.language))
            texts["ours"][item.language] = heard.text

    def direct_samples() -> None:
        for item in items:
            segments, _ = model.transcribe(
                samples[item.language],
                language=item.language,
                beam_size=5,
                vad_filter=True,
                word_timestamps=True,
            )
            texts["theirs"][item.language] = " ".join(s.text.strip() for s in segments)

    sides = {
        "dragoman": dragoman_side,
        "faster-whisper": direct_side,
        "dragoman (samples)": dragoman_samples,
        "faster-whisper (samples)": direct_samples,
    }
    walls: dict[str, list[float]] = {name: [] for name in sides}

    def timed(name: str) -> Any:
        def run() -> float:
            wall, cpu = time.perf_counter(), time.process_time()
            sides[name]()
            walls[name].append(time.perf_counter() - wall)
            return time.process_time() - cpu

        return run

    # CPU seconds of this process (every thread) for the overhead: other work on a shared machine moves wall
    # times by several times over, but hardly the CPU this process spends
    rows = harness.alternate_measured({name: timed(name) for name in sides}, rounds, warmup=1)
    print(f"\n1. transcription of the whole set ({rounds} alternated rounds, medians with min-max)")
    print("   files: probe + decode + recognise (dragoman also builds cues); samples: the same decoded audio")
    for name in rows.names:
        cpu = rows.spread(name)
        wall = harness.Spread.of(walls[name][1:])
        print(
            f"  {name:<25} CPU {cpu.text('.2f', ' s')}; wall {wall.text('.2f', ' s')}, real-time factor "
            f"{wall.scaled(1 / audio_seconds).text('.3f')}"
        )
    for a, b in (("dragoman", "faster-whisper"), ("dragoman (samples)", "faster-whisper (samples)")):
        ratio = rows.ratio(a, b)
        overhead = ratio.median - 1
        mark = "within" if overhead <= 0.10 else "OVER"
        print(f"  CPU {a} / {b}: {harness.ratio_text(ratio)} ({overhead:+.1%}; {mark} the 10% target)")
    same = sum(texts["ours"][k] == texts["theirs"].get(k) for k in texts["ours"])
    print(
        f"  the same decoded audio gave the same text on both sides in {same}/{len(texts['ours'])} languages"
    )

    print("\n2. word error rate per language (dragoman | faster-whisper direct)")
    ours_all: list[float] = []
    theirs_all: list[float] = []
    for item in items:
        said = " ".join(SENTENCES[item.language])
        ours = word_error_rate(said, item.dragoman[0].text)
        theirs = word_error_rate(said, " ".join(s.text.strip() for s in item.direct))
        ours_all.append(ours)
        theirs_all.append(theirs)
        print(f"  {item.language}: {ours:6.1%} | {theirs:6.1%}   heard: {item.dragoman[0].text[:90]}")
    print(f"  mean: {statistics.fmean(ours_all):6.1%} | {statistics.fmean(theirs_all):6.1%}")

    print("\n3. sentence edges: |first word - voice start|, |last word - voice end| (median, worst; seconds)")
    ours_e: list[float] = []
    theirs_e: list[float] = []
    for item in items:
        ours_e += edges([(w.start, w.end) for w in item.dragoman[0].words], item.clips)
        theirs_e += edges([(w.start, w.end) for s in item.direct for w in (s.words or ())], item.clips)
    within = sum(e <= 0.3 for e in ours_e), sum(e <= 0.3 for e in theirs_e)
    print(
        f"  dragoman        median {statistics.median(ours_e):.3f}, worst {max(ours_e):.3f}; "
        f"{within[0]}/{len(ours_e)} within 0.3 s"
    )
    print(
        f"  faster-whisper  median {statistics.median(theirs_e):.3f}, worst {max(theirs_e):.3f}; "
        f"{within[1]}/{len(theirs_e)} within 0.3 s"
    )

    print("\n4. cues that obey every rule (dragoman's cues | faster-whisper's raw segments as cues)")
    ours_n = theirs_n = ours_t = theirs_t = 0
    for item in items:
        good, total = share_obeying(list(item.dragoman[1].cues))
        raw = [
            Cue(float(s.start), float(s.end), wrap_lines(s.text.strip()))
            for s in item.direct
            if s.text.strip()
        ]
        raw_good, raw_total = share_obeying(raw)
        ours_n, ours_t, theirs_n, theirs_t = (
            ours_n + good,
            ours_t + total,
            theirs_n + raw_good,
            theirs_t + raw_total,
        )
        print(f"  {item.language}: {good}/{total} | {raw_good}/{raw_total}")
    print(
        f"  all: {ours_n}/{ours_t} = {ours_n / max(1, ours_t):.0%} | "
        f"{theirs_n}/{theirs_t} = {theirs_n / max(1, theirs_t):.0%}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
