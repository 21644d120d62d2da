"""The Apertium backend: system ``.mode`` pipelines kept warm, one null-flushed block per segment.

A ``.mode`` file is one shell pipeline (``lt-proc ... | apertium-tagger -g $2 ... | ... | lt-proc $1 ...``).
As apertium-apy does, we run its commands ourselves, each stage with ``-z`` (flush on ``\\0``; vislcg3 and
a few tools take no ``-z``), ``$1`` as ``-g`` (generation with unknown-word marks) and ``$2`` as nothing.
The stages are one chain of subprocesses, started once (about 200 ms) and kept running; a call writes
each segment as a block ending in ``\\0`` and reads one ``\\0``-terminated block back per segment.
Each block ends in a superblank holding a sequence number (``[17]``), checked on the way back, so that a
stray ``\\0`` (stages flush one when a stage before them dies) can never shift answers between segments.

We deformat ourselves instead of ``apertium-destxt``: the stream's special characters are escaped with a
backslash, ``* # ~`` (unknown-word and post-generation marks) and runs of whitespace holding a newline are
written as superblanks ``[...]``, and every :class:`Protected` span becomes a superblank holding its
``output``, which the pipeline carries through untouched (the final sequence superblank also matters:
the analyser drops a last token with no blank after it). The output is reformatted: superblank
brackets removed, escapes undone, unknown-word marks (``*`` unknown word, ``@`` not in the bilingual
dictionary, ``#`` form not generated) stripped and the marked words reported (:class:`ApertiumOutput`).

Formatted spans from documents (``<1>big</1>``) travel as word-bound blanks where Apertium has them
(3.8: ``apertium-wblank-attach``/``-detach`` stages are added as ``apertium-wblank-mode`` adds them), so
the formatting moves with its words when Apertium reorders them (see ``_apertium_inline``). The process
chain itself is ``_apertium_pipeline.Pipeline``.

A segment the pipeline breaks on (Debian's ukr-rus tagger aborts on ``Литва``; hbs-mkd swallows
``Crna Gora`` and answers nothing) does not fail the batch: a stage that exits is seen at once, a pipeline
whose stages all sit idle with a block unanswered within ``SILENT_SECONDS``; the answers read so far are
kept, the pipeline restarts and the first unanswered segment is sent alone. When it breaks the pipeline
alone too and an empty block then passes (so the pipeline works), the segment is returned **as written**,
marked ``untranslated`` and counted in the batch's ``untranslated_segments`` note (a result warning), the
way a translation service leaves what it cannot translate in place rather than failing the request; the
one-shot ``apertium`` command is no fallback (it prints nothing, or crashes, on the same input). The other
segments go on as a batch. A pipeline that breaks on an empty block too is broken: BackendError, as before;
one that keeps working without answering for ``timeout`` seconds: EngineTimeout, as before.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import threading
import weakref
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dragoman.errors import (
    BackendError,
    EngineTimeout,
    InvalidRequest,
    PipelineBroken,
    PipelineStuck,
    UnsupportedPair,
    map_exceptions,
)
from dragoman.languages.catalogue import resolve
from dragoman.limits import APERTIUM_BATCH_SEGMENTS
from dragoman.probes import Refreshing, mtime, run_program
from dragoman.translation.backends._apertium_inline import bind_words, close_tags, spans_whole, unbind_words
from dragoman.translation.backends._apertium_pipeline import INSTALL_HINT, Pipeline, PipelinePool
from dragoman.translation.backends._serbian import cyrl_to_latn, latn_to_cyrl
from dragoman.translation.types import BatchOutput, Pieces, Protected, add_notes

log = logging.getLogger("dragoman.translation.apertium")

DEFAULT_TIMEOUT = 30.0
#: The note (:class:`BatchOutput`) counting the segments left as written because the pipeline broke on them.
UNTRANSLATED_SEGMENTS = "untranslated_segments"
#: Tools that take no ``-z`` (apertium-apy's list); everything else in a mode gets it.
_NO_NULL_FLUSH = re.compile(r"(vislcg3|cg-mwesplit|hfst-tokeni[sz]e|divvun-suggest|apertium-wblank-\w+)$")
# Apertium 3.8's word-bound blank stages, placed as `apertium-wblank-mode` places them: attach after the
# analyser, detach before the generator. With them, formatted words keep their formatting when reordered.
WBLANK_ATTACH, WBLANK_DETACH = "apertium-wblank-attach", "apertium-wblank-detach"
_GENERATOR = "\x00generator\x00"
# Deformatting: a whitespace run holding a line break, a run of mark characters, or one escaped character.
_SPECIAL = re.compile(r"[\\\[\]^$/@<>{}]")
_DEFORMAT = re.compile(r"(\s*[\n\r\x0b\x0c\x85\u2028\u2029]\s*)|([*#~]+)|([\\\[\]^$/@<>{}])")
# Reformatting: an escape, a superblank, a mark, or a run of plain text.
_REFORMAT = re.compile(r"\\(.)|\[((?:[^\]\\]|\\.)*)\]|([*#@])|([^\\\[*#@]+)|(.)", re.S)
_UNESCAPE = re.compile(r"\\(.)", re.S)
_WORD = re.compile(r"[\w'’·-]+")
_SPACES = re.compile(r"  +")
#: Apertium's analysis tags (``<prn><obj><p3>``, ``<n>``, ``<vblex>``) after an unknown-word mark, as the
#: stream escapes them: ``lt-proc -g`` writes a lexical unit it cannot generate whose lemma is empty (a
#: dropped pronoun) as ``#<prn>``, and debug generation writes ``#lemma<n><sg>``. Never text.
_LEAKED_TAGS = re.compile(
    r"((?<![ \t])[ \t]*+)(?<!\\)([*#@])([^\s\\\[\]<>*#@]*+)(?:\\<[a-z][a-z0-9_]*(?:-[a-z0-9_]+)*\\>)+"
)
_AFTER_DROPPED = frozenset(" \t\n.,;:!?)]}»”’")
#: How much of a ``.mode`` file discovery reads for the files it names (a real one is under 2 kB).
MAX_MODE_FILE_CHARS = 64 * 1024
_MODE_NAME = re.compile(r"([^-_@]+)-([^-_@]+)(?:[_@](.+))?")


@dataclass(frozen=True)
class ApertiumMode:
    """One installed translation direction: ``eng-spa.mode`` or a variant such as ``es-pt_BR.mode``."""

    name: str  # the file's stem: "eng-spa", "es-pt_BR"
    source: str  # FLORES code
    target: str  # FLORES code
    variant: str | None  # "BR", "valencia_uni"; None for the base mode, the pair's default
    path: Path
    #: The pack's name when it is not the stem: Serbo-Croatian modes name the FLORES language they serve
    #: ("hbs-eng" read as Croatian is "hrv-eng", "eng-hbs_SR" is "eng-srp").
    label: str | None = None
    #: The variant is a language of its own (``hbs_HR`` writes Croatian): a pack, not a variant of one.
    standard: bool = False
    #: Script conversions around the pipeline (Serbian: Cyrillic read as Latin, Latin written as Cyrillic).
    script_in: str | None = None
    script_out: str | None = None

    @property
    def pack_id(self) -> str:
        return f"apertium-{self.label or self.name}"

    @property
    def is_pack(self) -> bool:
        """Whether the mode is a pack of its own: the pair's base mode or a language standard's."""
        return self.variant is None or self.standard


@dataclass(frozen=True)
class ApertiumOutput:
    """One translated segment: clean text, and the words Apertium left untranslated (marks stripped)."""

    text: str
    unknown_words: tuple[str, ...] = ()
    #: The pipeline broke on this segment (a stage crashed or swallowed it): ``text`` is the source as
    #: written, and ``untranslated_segments`` in the batch's notes counts it.
    untranslated: bool = False


def parse_mode_name(stem: str) -> tuple[str, str, str | None] | None:
    """``"eng-cat_valencia"`` -> ``("eng_Latn", "cat_Latn", "valencia")``; None when it is no pair."""
    m = _MODE_NAME.fullmatch(stem)
    if m is None:
        return None
    try:
        source, target = resolve(m.group(1)), resolve(m.group(2))
    except InvalidRequest:
        return None
    return None if source == target else (source, target, m.group(3))


def discover_modes(dirs: Sequence[Path]) -> list[ApertiumMode]:
    """Every ``.mode`` file in ``dirs`` whose name is ``SRC-TGT[_variant]`` with known languages.

    A name found in several directories is taken from the first. Sorted by pair, base mode first.
    """
    found: dict[str, ApertiumMode] = {}
    stems: dict[str, Path] = {}
    for directory in dirs:
        try:
            paths = sorted(p for p in directory.glob("*.mode") if p.is_file())
        except OSError as exc:
            log.debug("cannot list Apertium modes in %s: %s", directory, exc)
            continue
        for path in paths:
            if path.stem in stems:
                log.debug("Apertium mode %s: %s is shadowed by %s", path.stem, path, stems[path.stem])
                continue
            modes = expand_mode(path.stem, path)
            if not modes:
                log.debug(
                    "skipping Apertium mode %s: its name is not SRC-TGT[_variant] of known languages", path
                )
                continue
            if path.stem in UNUSABLE_MODES:
                log.debug("skipping Apertium mode %s: %s", path, UNUSABLE_MODES[path.stem])
                continue
            missing = _missing_file(path)
            if missing is not None:
                # Debian's apertium-eo-ca ships ca-eo.mode without the ca-eo data: a pipeline that cannot run.
                log.debug("skipping Apertium mode %s: it needs %s, which is not installed", path, missing)
                continue
            stems[path.stem] = path
            for mode in modes:
                found.setdefault(mode.label or mode.name, mode)
    return sorted(
        found.values(),
        key=lambda m: (m.source, m.target, not m.is_pack, m.variant or "", m.label or m.name),
    )


_HBS_ENG = "Debian's apertium-hbs-eng 0.5.1 writes no Serbo-Croatian from English (every word marked)"
_MKD_HBS = "Debian's apertium-hbs-mkd 0.1.1 writes Serbo-Croatian lemmas uninflected (`biti velik clitic`)"
_RUS_TAGGER = "apertium-tagger 3.8 crashes (SIGSEGV) on the Russian tagger data of Debian's pair: no output"
#: Modes Debian installs that cannot give a usable translation (checked by tests/translation/
#: test_apertium_reach.py, which fails when one of them starts working): never offered as packs.
UNUSABLE_MODES: dict[str, str] = {
    "eng-hbs": _HBS_ENG,
    "eng-hbs_BS": _HBS_ENG,
    "eng-hbs_HR": _HBS_ENG,
    "eng-hbs_SR": _HBS_ENG,
    "mkd-hbs_BS": _MKD_HBS,
    "mkd-hbs_HR": _MKD_HBS,
    "mkd-hbs_SR": _MKD_HBS,
    "rus-bel": _RUS_TAGGER,
    "rus-ukr": _RUS_TAGGER,
}

_ABSOLUTE_PATH = re.compile(r"""(?<![\w.])(/[^\s'"|;&<>]+)""")


def _missing_file(path: Path) -> str | None:
    """The first absolute path a ``.mode`` file names that does not exist; None when all do (or it is
    unreadable: running it reports that)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            text = f.read(MAX_MODE_FILE_CHARS)
    except OSError:
        return None
    for m in _ABSOLUTE_PATH.finditer(text):
        if locate_data(m.group(1)) is None:
            return m.group(1)
    return None


_PAIR_DIR = re.compile(r"apertium-([a-z]+(?:_[A-Za-z]+)?)-([a-z]+(?:_[A-Za-z]+)?)")


def locate_data(name: str) -> str | None:
    """``name`` (a path a ``.mode`` file names) where it is installed; None when it is nowhere.

    Debian's apertium-eo-ca and apertium-eo-es ship ``ca-eo.mode`` and ``es-eo.mode`` naming
    ``/usr/share/apertium/apertium-eo-ca/...`` while installing the files under ``apertium-ca-eo/``: a
    missing file is looked for in the pair's directory with the two codes swapped."""
    if os.path.exists(name):
        return name
    path = Path(name)
    m = _PAIR_DIR.fullmatch(path.parent.name)
    if m is None:
        return None
    swapped = path.parent.with_name(f"apertium-{m.group(2)}-{m.group(1)}") / path.name
    return str(swapped) if swapped.exists() else None


#: Apertium's Serbo-Croatian (``hbs``): its analysers read Croatian, Bosnian and Serbian in Latin script
#: (Serbian Cyrillic is transliterated first); its generators write one standard per variant, in Latin
#: script (``hbs_SR``'s output is written in Cyrillic, the script FLORES-200 has Serbian in).
HBS = "hbs"
_HBS_SOURCES: tuple[tuple[str, str | None], ...] = (
    ("hrv_Latn", None),
    ("bos_Latn", None),
    ("srp_Cyrl", "Cyrl"),
)
_HBS_TARGETS: dict[str, tuple[str, str | None]] = {
    "HR": ("hrv_Latn", None),
    "BS": ("bos_Latn", None),
    "SR": ("srp_Cyrl", "Cyrl"),
}


def expand_mode(stem: str, path: Path) -> list[ApertiumMode]:
    """The translation directions one ``.mode`` file serves: one, or one per Serbo-Croatian standard
    (``hbs-eng`` reads Croatian, Bosnian and Serbian; ``eng-hbs_HR`` writes Croatian; the bare
    ``eng-hbs``, whose standard is none in particular, serves none). Empty when it is no pair."""
    parsed = parse_mode_name(stem)
    if parsed is not None:
        return [ApertiumMode(stem, parsed[0], parsed[1], parsed[2], path)]
    m = _MODE_NAME.fullmatch(stem)
    if m is None or HBS not in (m.group(1), m.group(2)):
        return []
    src, tgt, variant = m.group(1), m.group(2), m.group(3)
    if src == HBS:
        try:
            target = resolve(tgt)
        except InvalidRequest:
            return []
        return [
            ApertiumMode(
                stem, flores, target, variant, path, label=_relabel(stem, src, flores), script_in=script
            )
            for flores, script in _HBS_SOURCES
            if flores != target
        ]
    if variant not in _HBS_TARGETS:
        return []
    flores, script = _HBS_TARGETS[variant]
    try:
        source = resolve(src)
    except InvalidRequest:
        return []
    if source == flores:
        return []
    label = _relabel(stem, f"{tgt}_{variant}", flores)
    return [ApertiumMode(stem, source, flores, variant, path, label=label, standard=True, script_out=script)]


def _relabel(stem: str, code: str, flores: str) -> str:
    src, tgt = stem.split("-", 1)
    lang3 = flores.split("_", 1)[0]
    return f"{lang3}-{tgt}" if src == code else f"{src}-{lang3}"


#: The dpkg database: its mtime changes with every package installed, upgraded or removed.
DPKG_STATUS = Path("/var/lib/dpkg/status")
#: How long the version found is trusted when neither lt-proc nor the dpkg database changed, in seconds.
VERSION_TTL_SECONDS = 300.0


def _probe_version() -> str | None:
    for cmd in (["dpkg-query", "-W", "-f=${Version}", "apertium"], ["lt-proc", "-v"]):
        done = run_program(*cmd)
        if done is None:
            continue
        out = (done.stdout or done.stderr).strip()
        if done.returncode == 0 and out:
            return out.splitlines()[0].removeprefix("lt-proc ")
    return None


def _version_stamp(version: str | None) -> Hashable:
    binary = shutil.which("lt-proc")
    return (binary, mtime(binary), mtime(DPKG_STATUS))


_VERSION: Refreshing[str | None] = Refreshing(_probe_version, stamp=_version_stamp, ttl=VERSION_TTL_SECONDS)


def apertium_version() -> str | None:
    """The installed Apertium version (dpkg's, else lttoolbox's ``lt-proc -v``); None when absent.

    Asked once and kept until ``lt-proc`` or the dpkg database changes (an ``apt-get install`` while a
    server runs is seen), or :func:`refresh_version` is called.
    """
    return _VERSION.get()


def refresh_version() -> None:
    """Forget the Apertium version found: the next :func:`apertium_version` asks again."""
    _VERSION.refresh()


def apertium_status(
    modes: Sequence[ApertiumMode], modes_dirs: Sequence[Path], enabled: bool
) -> dict[str, Any]:
    """Apertium as ``dragoman status`` shows it: binary, version, where modes are looked for, the pairs
    (``eng_Latn->spa_Latn``) and variants (``oci-cat_gascon``) found, the installed modes left out because
    Debian ships them broken (``left_out``: stem -> why), and whether it is enabled."""
    left_out: dict[str, str] = {}
    for directory in modes_dirs:
        for stem, why in UNUSABLE_MODES.items():
            if stem not in left_out and (directory / f"{stem}.mode").is_file():
                left_out[stem] = why
    return {
        "binary": shutil.which("lt-proc"),
        "version": apertium_version(),
        "modes_dirs": [str(p) for p in modes_dirs],
        "pairs": sorted(f"{m.source}->{m.target}" for m in modes if m.is_pack),
        "variants": sorted(m.path.stem for m in modes if not m.is_pack),
        "left_out": dict(sorted(left_out.items())),
        "enabled": enabled,
    }


def mode_commands(path: Path) -> list[list[str]]:
    """The stages of a ``.mode`` file as argument lists, ready to run with null flush."""
    commands: list[list[str]] = [[]]
    # UnicodeDecodeError and shlex's unbalanced quotes are ValueErrors: BackendError, as OSErrors are
    with map_exceptions(f"cannot read the Apertium pipeline in {path}", hint="reinstall the pair"):
        text = path.read_text(encoding="utf-8").strip()
        lexer = shlex.shlex(
            text.replace("$1", _GENERATOR).replace("$2", ""), posix=True, punctuation_chars="|"
        )
        lexer.whitespace_split = True
        for token in lexer:
            if token == "|":
                commands.append([])
            else:
                commands[-1].append(token)
    if not all(commands):
        raise BackendError(f"Apertium mode file {path} holds an empty pipeline stage; reinstall the pair")
    generator = next((i for i, argv in enumerate(commands) if _GENERATOR in argv), None)
    commands = [["-g" if arg == _GENERATOR else _located(arg) for arg in argv] for argv in commands]
    if (
        generator is not None
        and generator > 0
        and shutil.which(WBLANK_ATTACH) is not None
        and shutil.which(WBLANK_DETACH) is not None
    ):
        commands = [
            commands[0],
            [WBLANK_ATTACH],
            *commands[1:generator],
            [WBLANK_DETACH],
            *commands[generator:],
        ]
    return [_null_flushed(argv) for argv in commands]


def _located(arg: str) -> str:
    return (locate_data(arg) or arg) if arg.startswith("/") else arg


def _null_flushed(argv: list[str]) -> list[str]:
    if "-z" in argv or _NO_NULL_FLUSH.search(os.path.basename(argv[0])):
        return argv
    return [argv[0], "-z", *argv[1:]]


def _superblank(text: str) -> str:
    return "[" + _SPECIAL.sub(lambda m: "\\" + m.group(0), text) + "]"


def _deformat_text(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        return "\\" + m.group(3) if m.group(3) else _superblank(m.group(0))

    return _DEFORMAT.sub(one, text)


@dataclass(frozen=True)
class _Prepared:
    """A segment split into its outer whitespace and the block to send (None: nothing to translate)."""

    lead: str
    trail: str
    block: bytes | None  # the deformatted core, without its end marker
    fixed: str  # the core as it stands, used when there is nothing to translate
    collapse_spaces: bool  # the source has no double spaces, so dropped words' blanks may be merged


def _prepare(pieces: Pieces) -> _Prepared:
    items: list[str | Protected] = []
    for piece in pieces:
        piece = piece.replace("\0", "") if isinstance(piece, str) else piece
        if isinstance(piece, str) and items and isinstance(items[-1], str):
            items[-1] += piece
        elif (piece.output if isinstance(piece, Protected) else piece) != "":  # empty spans add nothing
            items.append(piece)
    lead = trail = ""
    if items and isinstance(items[0], str):
        stripped = items[0].lstrip()
        lead, items[0] = items[0][: len(items[0]) - len(stripped)], stripped
    if items and isinstance(items[-1], str):
        stripped = items[-1].rstrip()
        trail, items[-1] = items[-1][len(stripped) :], stripped
    items = [p for p in items if p != ""]
    fixed = "".join(p.output if isinstance(p, Protected) else p for p in items)
    plain = "".join(p for p in items if isinstance(p, str))
    if not plain.strip():
        return _Prepared(lead, trail, None, fixed, False)
    body = "".join(
        _superblank(p.output.replace("\0", "")) if isinstance(p, Protected) else _deformat_text(p)
        for p in items
    )
    block = body.encode("utf-8", "replace")
    return _Prepared(lead, trail, block, fixed, not any("  " in p for p in items if isinstance(p, str)))


def _drop_tags(raw: str) -> str:
    """``raw`` without the analysis tags that leaked after an unknown-word mark (``#\\<prn\\>``, or
    ``#word\\<n\\>\\<sg\\>`` in debug generation); the blank before a dropped unit goes with it when a
    blank or a punctuation mark follows."""
    if "\\<" not in raw:
        return raw

    def one(m: re.Match[str]) -> str:
        if m.group(3):  # a marked word with its tags: the word stays
            return m.group(1) + m.group(2) + m.group(3)
        after = raw[m.end() : m.end() + 1]
        return "" if after and after in _AFTER_DROPPED else m.group(1)

    return _LEAKED_TAGS.sub(one, raw)


def reformat(
    raw: str, *, collapse_spaces: bool = False, rewrite: Callable[[str], str] | None = None
) -> ApertiumOutput:
    """Apertium stream text -> clean text and the words that carried an unknown-word mark.

    Analysis tags that leak from the generator after a mark (``#<prn>``) are dropped: never text.
    ``rewrite`` changes the text outside superblanks (a script conversion), never a protected span."""
    parts: list[str] = []  # plain text and superblank contents, alternating (plain first and last)
    plain: list[str] = []
    unknown: list[str] = []
    marked = False
    for m in _REFORMAT.finditer(_drop_tags(raw)):
        escaped, blank, mark, text, other = m.groups()
        if marked and text is not None and (word := _WORD.match(text)):
            unknown.append(word.group(0))
        marked = mark is not None
        if blank:
            parts += ["".join(plain), _UNESCAPE.sub(r"\1", blank)]
            plain.clear()
        elif blank is None and mark is None:
            plain.append(escaped or text or other or "")
    parts.append("".join(plain))
    if collapse_spaces:
        parts[::2] = [_SPACES.sub(" ", p) for p in parts[::2]]
    if rewrite is not None:
        parts[::2] = [rewrite(p) for p in parts[::2]]
    parts[0] = parts[0].lstrip()
    parts[-1] = parts[-1].rstrip()
    return ApertiumOutput("".join(parts), tuple(unknown))


class _Owner:
    """A backend's key in the pipeline pool (not the backend itself, which the pool must not keep alive)."""


def _notes_of(out: ApertiumOutput) -> dict[str, int]:
    """One segment's notes: the words it left unknown, and whether it was left as written."""
    notes = {"unknown_words": len(out.unknown_words)} if out.unknown_words else {}
    if out.untranslated:
        notes[UNTRANSLATED_SEGMENTS] = 1
    return notes


class ApertiumBackend:
    """One Apertium mode behind a warm pipeline; one request at a time, restarted when it dies.

    The pipeline lives in ``pool`` (a :class:`PipelinePool` shared by an engine's Apertium backends, which
    bounds how many run and closes idle ones); without one, the backend has a pool of its own holding one
    pipeline. A pipeline closed by the pool starts again at the next call.
    """

    #: The pipeline serves one call at a time, and a call's round trip through a dozen stage processes
    #: costs little more for eight segments than for one: the engine's batcher merges concurrent callers'
    #: segments into one stream (one call at a time: ``parallel_calls``), which about doubles the rate at 8
    #: callers (``benchmarks/daemon.py --batching-off``, README "Measured").
    coalesces = True
    parallel_calls = 1
    batch_segments = APERTIUM_BATCH_SEGMENTS

    def __init__(
        self,
        mode: ApertiumMode,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        start: bool = True,
        pool: PipelinePool | None = None,
    ) -> None:
        self.mode = mode
        self.pack_id = mode.pack_id
        self.timeout = timeout
        self._commands = mode_commands(mode.path)
        self._lock = threading.Lock()
        self._pool = pool if pool is not None else PipelinePool(max_pipelines=1)
        self._owner = _Owner()
        self._closed = False
        self._finalizer = weakref.finalize(self, self._pool.discard, self._owner)
        if start:
            with self._lock, self._pool.use(self._owner, self._start, self.timeout):
                pass

    @property
    def pids(self) -> tuple[int, ...]:
        """Process ids of the running stages (empty when none runs)."""
        return self._pool.pids(self._owner)

    def translate_batch(self, batch: Sequence[Pieces], source: str, target: str) -> BatchOutput:
        """The translations, and ``unknown_words`` in the notes: how many words were left untranslated."""
        outputs = self.translate_batch_detailed(batch, source, target)
        each = tuple(_notes_of(out) for out in outputs)
        notes: dict[str, int] = {}
        for own in each:
            add_notes(notes, own)
        return BatchOutput(tuple(out.text for out in outputs), notes, each)

    def translate_batch_detailed(
        self, batch: Sequence[Pieces], source: str, target: str
    ) -> list[ApertiumOutput]:
        """Translate each segment through the one running pipeline; marks stripped, unknown words listed."""
        if (source, target) != (self.mode.source, self.mode.target):
            raise UnsupportedPair(
                f"pack {self.pack_id} translates {self.mode.source}->{self.mode.target}, "
                f"not {source}->{target}; route the request through a pack for that pair"
            )
        original = batch
        if self.mode.script_in == "Cyrl":
            batch = [tuple(cyrl_to_latn(p) if isinstance(p, str) else p for p in pieces) for pieces in batch]
        rewrite = latn_to_cyrl if self.mode.script_out == "Cyrl" else None
        prepared = [_prepare(pieces) for pieces in batch]
        todo = [(p, p.block) for p in prepared if p.block is not None]
        # Formatted spans (<n>...</n>) go as word-bound blanks, which move with their words; a segment
        # whose span comes back split or lost is translated again with the tags as superblanks.
        wordbound = any(argv[0] == WBLANK_ATTACH for argv in self._commands)
        bound = [bind_words(block.decode("utf-8")) if wordbound else ("", ()) for _, block in todo]
        sent = [
            body.encode("utf-8") if ids else block
            for (_, block), (body, ids) in zip(todo, bound, strict=True)
        ]
        texts: dict[int, ApertiumOutput] = {}
        retry: list[int] = []
        failed = ApertiumOutput("", (), untranslated=True)
        for i, ((prep, _), (_, ids), answer) in enumerate(zip(todo, bound, self._run(sent), strict=True)):
            if answer is None:
                texts[i] = failed
                continue
            decoded = answer.decode("utf-8", "replace")
            out = reformat(
                unbind_words(decoded) if ids else decoded,
                collapse_spaces=prep.collapse_spaces,
                rewrite=rewrite,
            )
            if ids:
                out = ApertiumOutput(close_tags(out.text), out.unknown_words)
                if not spans_whole(out.text, ids):
                    retry.append(i)
                    continue
            texts[i] = out
        for i, answer in zip(retry, self._run([todo[i][1] for i in retry]) if retry else [], strict=True):
            texts[i] = (
                failed
                if answer is None
                else reformat(
                    answer.decode("utf-8", "replace"),
                    collapse_spaces=todo[i][0].collapse_spaces,
                    rewrite=rewrite,
                )
            )
        done = iter(texts[i] for i in range(len(todo)))
        outputs: list[ApertiumOutput] = []
        for prep, pieces in zip(prepared, original, strict=True):
            out = next(done) if prep.block is not None else ApertiumOutput(prep.fixed)
            if out.untranslated:  # the source as written (before any script conversion)
                as_written = _prepare(pieces)
                outputs.append(
                    ApertiumOutput(as_written.lead + as_written.fixed + as_written.trail, (), True)
                )
                continue
            outputs.append(ApertiumOutput(prep.lead + out.text + prep.trail, out.unknown_words))
        return outputs

    def _start(self) -> Pipeline:
        log.debug("starting Apertium pipeline %s from %s", self.pack_id, self.mode.path)
        return Pipeline(self._commands, self.mode.name)

    def _run(self, blocks: list[bytes]) -> list[bytes | None]:
        """Each block's answer through the warm pipeline; None for a block the pipeline cannot translate.

        When the pipeline breaks (a stage exits: seen at once; or every stage sits idle with a block
        unanswered: a stage swallowed it, seen within ``SILENT_SECONDS``), the answers already read are
        kept, the pipeline is restarted and the first unanswered block is sent alone (even when it was:
        the pipeline may have been broken before it came, as when a stage was killed); if it fails alone
        too, an empty block is sent on a fresh pipeline: when that one comes back, the pipeline works and
        the block is what breaks it (None: the caller leaves it untranslated); when it does not, the
        pipeline is broken (BackendError). The other blocks go on as a batch again."""
        if not blocks:
            return []
        with self._lock:
            if self._closed:
                raise BackendError(f"Apertium backend {self.pack_id} is closed; load the pack again")
            results: list[bytes | None] = []
            while len(results) < len(blocks):
                answered: list[bytes] = []
                problem = self._attempt(blocks[len(results) :], answered)
                results += answered
                if problem is None:
                    break
                alone: list[bytes] = []
                if self._attempt([blocks[len(results)]], alone) is None:
                    results += alone
                    continue
                problem = self._attempt([b""], []) or ""
                if problem:
                    raise BackendError(
                        f"Apertium pipeline {self.pack_id} failed twice ({problem}); check that `apertium "
                        f"{self.mode.name}` works in a shell, or {INSTALL_HINT}"
                    )
                log.warning(
                    "Apertium %s cannot translate a segment of %d bytes (its pipeline breaks on it); the "
                    "segment is left as written",
                    self.pack_id,
                    len(blocks[len(results)]),
                )
                results.append(None)
            return results

    def _attempt(self, blocks: list[bytes], answered: list[bytes]) -> str | None:
        """One exchange on the warm pipeline (started when none runs); answers appended to ``answered``.
        None when every block came back; else what broke (the pipeline was dropped and is stopped)."""
        with self._pool.use(self._owner, self._start, self.timeout) as pipe:
            try:
                pipe.exchange(blocks, self.timeout, answered)
                return None
            except PipelineStuck:
                self._pool.drop(self._owner, pipe)
                pipe.kill()
                raise EngineTimeout(
                    f"Apertium {self.pack_id} returned nothing for {self.timeout:g} s; its pipeline "
                    "was killed and restarts on the next call; retry with shorter segments"
                ) from None
            except PipelineBroken as exc:
                self._pool.drop(self._owner, pipe)
                problem = f"{exc}: {pipe.failure()}"
                log.warning("Apertium %s failed (%s); restarting", self.pack_id, problem)
                return problem

    def close(self) -> None:
        """Stop the pipeline's processes; later calls raise BackendError."""
        with self._lock:
            self._closed = True
            self._pool.discard(self._owner, kill=False)
        self._finalizer.detach()
