"""``dragoman eval`` and ``dragoman.pipelines.evaluate`` (issue 17): scores equal sacreBLEU's called
directly, the pack and route used, typed errors for bad test set files, and the benchmark's term check."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import pytest
import sacrebleu
from support import needs_apertium

from dragoman.cli import main
from dragoman.errors import (
    EngineTimeout,
    FileAccessError,
    FileTooLarge,
    InvalidRequest,
    LimitExceeded,
    UnsupportedPair,
)
from dragoman.limits import MAX_TEXT_CHARS
from dragoman.pipelines import evaluate as ev
from dragoman.translation.engine import Engine
from dragoman.translation.types import TranslateOptions, TranslationResult

SOURCES = ["The house is red.", "I would like a cup of coffee.", "The server did not respond in time."]
REFERENCES = ["La casa es roja.", "Me gustaría una taza de café.", "El servidor no respondió a tiempo."]
BENCHMARK = Path(__file__).resolve().parent.parent / "benchmarks" / "quality.py"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(path: Path, lines: Sequence[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    return write(tmp_path / "src.en", SOURCES), write(tmp_path / "ref.es", REFERENCES)


@pytest.fixture
def tiny_pack(packs_dir: Path, tiny_argos_pack: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The tiny en->es pack installed, Apertium off: the only route is the pack."""
    shutil.copytree(tiny_argos_pack, packs_dir / "translate-en_es")
    monkeypatch.setenv("DRAGOMAN_APERTIUM", "0")
    return "argos-en-es"


class FakeEngine:
    """What :func:`evaluate` needs of an engine: ``translate_many``, answering ``rewrite(text)``."""

    def __init__(self, rewrite: dict[str, str]) -> None:
        self.rewrite = rewrite
        self.calls: list[tuple[list[str], str | None]] = []

    def translate_many(
        self,
        texts: Sequence[str],
        options: TranslateOptions,
        *,
        context: object = None,
        pack: str | None = None,
    ) -> list[TranslationResult]:
        self.calls.append((list(texts), pack))
        taken = TranslateOptions("spa_Latn", "eng_Latn", "best")
        return [
            TranslationResult(
                self.rewrite.get(t, t),
                "eng_Latn",
                "spa_Latn",
                "on-device",
                0.01,
                route=("fake:e->s",),
                options=taken,
            )
            for t in texts
        ]


# ----- scores ------------------------------------------------------------------------------------------
def test_scores_equal_sacrebleu_called_directly() -> None:
    hyps = ["La casa está roja.", "Quiero una taza de café.", "El servidor no contestó a tiempo."]
    got = ev.score(hyps, REFERENCES, "es")
    assert got.chrf == pytest.approx(sacrebleu.corpus_chrf(hyps, [REFERENCES]).score)
    assert got.bleu == pytest.approx(sacrebleu.corpus_bleu(hyps, [REFERENCES]).score)
    assert 0 < got.bleu < got.chrf < 100
    assert got.chrf_signature.startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:")
    assert "tok:13a" in got.bleu_signature


def test_bleu_tokenises_chinese_as_chinese() -> None:
    got = ev.score(["我喜欢茶。"], ["我喜欢喝茶。"], "zh")
    assert "tok:zh" in got.bleu_signature
    assert got.bleu == pytest.approx(
        sacrebleu.corpus_bleu(["我喜欢茶。"], [["我喜欢喝茶。"]], tokenize="zh").score
    )


def test_evaluate_with_a_fake_engine(files: tuple[Path, Path]) -> None:
    perfect = FakeEngine(dict(zip(SOURCES, REFERENCES, strict=True)))
    data = ev.read_parallel(*files)
    result = ev.evaluate(perfect, data, source="en", target="es", pack="fake")  # type: ignore[arg-type]
    assert result.scores.chrf == pytest.approx(100) and result.scores.bleu == pytest.approx(100)
    assert result.route == ("fake:e->s",) and result.sentences == 3 and result.pack == "fake"
    # one warm-up sentence, then the whole set in one call, both restricted to the pack
    assert perfect.calls == [([SOURCES[0]], "fake"), (SOURCES, "fake")]
    copying = FakeEngine({})
    result = ev.evaluate(copying, data, source="en", target="es")  # type: ignore[arg-type]
    assert result.scores.chrf == pytest.approx(sacrebleu.corpus_chrf(SOURCES, [REFERENCES]).score)
    assert result.hypotheses == tuple(SOURCES)


# ----- the command -------------------------------------------------------------------------------------
def test_eval_a_pack_matches_sacrebleu(
    capsys: pytest.CaptureFixture[str], files: tuple[Path, Path], tiny_pack: str, tmp_path: Path
) -> None:
    hyps = tmp_path / "hyps.txt"
    code, out, err = run(
        capsys, "eval", "--pack", tiny_pack, "--src", str(files[0]), "--ref", str(files[1]), "--json",
        "--hypotheses", str(hyps),
    )  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    assert data["route"] == ["argos-en-es:eng_Latn->spa_Latn"] and data["pack"] == tiny_pack
    assert (data["source"], data["target"], data["tier"], data["sentences"]) == (
        "eng_Latn",
        "spa_Latn",
        "best",
        3,
    )
    written = hyps.read_text(encoding="utf-8").splitlines()
    assert len(written) == 3
    assert data["chrf"] == pytest.approx(sacrebleu.corpus_chrf(written, [REFERENCES]).score, abs=0.006)
    assert data["bleu"] == pytest.approx(sacrebleu.corpus_bleu(written, [REFERENCES]).score, abs=0.006)
    assert data["chrf_signature"].startswith("nrefs:1|") and "tok:13a" in data["bleu_signature"]
    assert data["seconds_per_sentence"] > 0
    # the text form: scores with signatures, the route, the time per sentence
    code, out, err = run(
        capsys, "eval", "--from", "en", "--to", "es", "--src", str(files[0]), "--ref", str(files[1])
    )
    assert code == 0, err
    assert "chrF" in out and "nrefs:1" in out and "argos-en-es" in out and "ms/sentence" in out
    # an existing hypotheses file is kept unless --overwrite
    code, _, err = run(
        capsys,
        "eval",
        "--pack",
        tiny_pack,
        "--src",
        str(files[0]),
        "--ref",
        str(files[1]),
        "--hypotheses",
        str(hyps),
    )
    assert code == 2 and "--overwrite" in err


@needs_apertium
def test_pack_restricts_the_route(
    capsys: pytest.CaptureFixture[str], files: tuple[Path, Path], packs_dir: Path, tiny_argos_pack: Path
) -> None:
    """With Apertium eng-spa and the tiny pack both installed, --pack picks which one is measured."""
    shutil.copytree(tiny_argos_pack, packs_dir / "translate-en_es")
    src, ref = str(files[0]), str(files[1])
    routes = {}
    for pack in ("argos-en-es", "apertium-eng-spa"):
        code, out, err = run(capsys, "eval", "--pack", pack, "--src", src, "--ref", ref, "--json")
        assert code == 0, err
        routes[pack] = json.loads(out)
    assert routes["argos-en-es"]["route"] == ["argos-en-es:eng_Latn->spa_Latn"]
    assert routes["apertium-eng-spa"]["route"] == ["apertium-eng-spa:eng_Latn->spa_Latn"]
    assert routes["apertium-eng-spa"]["chrf"] > routes["argos-en-es"]["chrf"] + 20  # real vs gibberish
    with Engine() as engine:
        with pytest.raises(UnsupportedPair, match="does not translate"):
            engine.translate_many(["Hola."], TranslateOptions("en", "es"), pack="argos-en-es")


def test_pack_errors(capsys: pytest.CaptureFixture[str], files: tuple[Path, Path], tiny_pack: str) -> None:
    src, ref = str(files[0]), str(files[1])
    code, _, err = run(capsys, "eval", "--pack", "nope", "--src", src, "--ref", ref, "--json")
    assert code == 2 and json.loads(err)["code"] == "pack_not_installed"
    code, _, err = run(capsys, "eval", "--pack", tiny_pack, "--from", "es", "--to", "en", "--src", src,
                       "--ref", ref, "--json")  # fmt: skip
    assert code == 2 and json.loads(err)["code"] == "unsupported_pair"
    code, _, err = run(capsys, "eval", "--src", src, "--ref", ref, "--json")
    assert code == 2 and "--pack ID" in json.loads(err)["error"]
    code, _, err = run(capsys, "eval", "--pack", tiny_pack, "--src", src, "--json")
    assert code == 2 and "--testset" in json.loads(err)["error"]


# ----- bad files: typed errors, before any translation --------------------------------------------------
def _bad(tmp_path: Path, src: bytes, ref: bytes) -> tuple[str, str]:
    (tmp_path / "bad.src").write_bytes(src)
    (tmp_path / "bad.ref").write_bytes(ref)
    return str(tmp_path / "bad.src"), str(tmp_path / "bad.ref")


@pytest.mark.parametrize(
    ("src", "ref", "code", "words"),
    [
        (b"one\ntwo\n", b"uno\n", "invalid_request", "has 2 lines"),
        (b"", b"", "invalid_request", "is empty"),
        (b"\n \n", b"\n \n", "invalid_request", "is empty"),
        (b"caf\xe9\n", b"caf\xc3\xa9\n", "invalid_request", "not UTF-8"),
        (b"ok\n", b"\xff\xfe\n", "invalid_request", "not UTF-8"),
        (b"a" * (MAX_TEXT_CHARS + 1) + b"\n", b"b\n", "limit_exceeded", "characters"),
        (b"x\n" * (ev.MAX_EVAL_LINES + 1), b"y\n" * (ev.MAX_EVAL_LINES + 1), "limit_exceeded", "lines"),
    ],
    ids=["line-counts", "empty", "blank", "latin1-source", "binary-reference", "huge-line", "too-many-lines"],
)
def test_bad_files_are_typed_errors(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    tiny_pack: str,
    src: bytes,
    ref: bytes,
    code: str,
    words: str,
) -> None:
    s, r = _bad(tmp_path, src, ref)
    status, out, err = run(capsys, "eval", "--pack", tiny_pack, "--src", s, "--ref", r, "--json")
    error = json.loads(err)
    assert status == 2 and out == "" and error["code"] == code and words in error["error"], error


def test_huge_and_missing_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ev, "MAX_EVAL_FILE_BYTES", 10)
    s, r = _bad(tmp_path, b"one two three four\n", b"uno\n")
    with pytest.raises(FileTooLarge, match="at most 10 bytes"):
        ev.read_parallel(s, r)
    with pytest.raises(FileAccessError, match="no such file"):
        ev.read_parallel(tmp_path / "missing", r)


def test_lines_are_read_as_written(tmp_path: Path) -> None:
    """A byte-order mark, CRLF endings and a missing final newline change nothing; an inner blank line
    stays a line (aligned with its reference)."""
    s, r = _bad(tmp_path, b"\xef\xbb\xbfone\r\n\r\nthree", b"uno\n\ntres\n")
    data = ev.read_parallel(s, r)
    assert data.sources == ("one", "", "three") and data.references == ("uno", "", "tres")
    s, r = _bad(tmp_path, b"x" * (MAX_TEXT_CHARS + 1), b"y")  # a huge last line without its newline
    with pytest.raises(LimitExceeded):
        ev.read_parallel(s, r)


# ----- sacreBLEU's named test sets ----------------------------------------------------------------------
def test_testset_names(monkeypatch: pytest.MonkeyPatch, files: tuple[Path, Path]) -> None:
    with pytest.raises(InvalidRequest, match="no test set"):
        ev.load_testset("no-such-set", "en", "es")
    with pytest.raises(InvalidRequest, match="has no pair"):
        ev.load_testset("wmt20", "ca", "gl")
    from sacrebleu import utils

    # fetched by sacreBLEU: here its download is replaced by the local files
    monkeypatch.setattr(utils, "get_source_file", lambda name, pair: str(files[0]))
    monkeypatch.setattr(utils, "get_reference_files", lambda name, pair: [str(files[1])])
    data = ev.load_testset("wmt13", "en", "es")
    assert data.name == "wmt13:en-es" and data.sources == tuple(SOURCES)

    def offline(name: str, pair: str) -> str:
        raise SystemExit(1)  # what sacreBLEU does when a download fails

    monkeypatch.setattr(utils, "get_source_file", offline)
    with pytest.raises(InvalidRequest, match="internet"):
        ev.load_testset("wmt13", "en", "es")


# ----- the benchmark's term check ------------------------------------------------------------------------
def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _benchmark() -> ModuleType:
    """benchmarks/quality.py, loaded from its file (benchmarks/ is not put on sys.path: its mcp.py would
    hide the mcp package); the ``_harness`` it imports is loaded first under that name."""
    if "_harness" not in sys.modules:
        _load("_harness", BENCHMARK.parent / "_harness.py")
    return _load("_bench_quality", BENCHMARK)


def test_term_normalisation_and_scores() -> None:
    quality = _benchmark()
    assert quality.normalise("  Côte d'Ivoire ") == quality.normalise("cote d ivoire") == "cote d ivoire"
    assert quality.term_scores(
        ["Alemania", "francés", "Reino  Unido"], ["Alemania", "Francés", "Reino Unido"]
    ) == (
        pytest.approx(100 / 3),
        pytest.approx(100),
    )


def test_project_test_set_is_aligned() -> None:
    quality = _benchmark()
    counts = {code: len(ev.read_parallel(quality.DATA / "en.txt", quality.DATA / f"{code}.txt").sources)
              for code in quality.LANGUAGES}  # fmt: skip
    assert set(counts.values()) == {44}


@pytest.mark.skipif(
    not Path("/usr/share/locale/es/LC_MESSAGES/iso_3166-1.mo").is_file(), reason="no iso-codes"
)
def test_iso_codes_terms() -> None:
    quality = _benchmark()
    pairs = dict(quality.term_pairs("en", "es"))
    assert pairs["Germany"] == "Alemania" and pairs["Spain"] == "España" and len(pairs) > 300
    es_ca = dict(quality.term_pairs("es", "ca"))
    assert es_ca["Alemania"] == "Alemanya"


# ----- the benchmark's term-only routes: pack directions outside the test set ---------------------------
def _fake_locales(root: Path, *, both: Sequence[str], countries: Sequence[str]) -> Path:
    """A locale folder in which ``both`` translate both iso-codes lists and ``countries`` only the first."""
    for locale in [*both, *countries]:
        folder = root / locale / "LC_MESSAGES"
        folder.mkdir(parents=True)
        (folder / "iso_3166-1.mo").write_bytes(b"")
        if locale in both:
            (folder / "iso_639-3.mo").write_bytes(b"")
    return root


def test_flores_codes_map_to_iso_codes_locales(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quality = _benchmark()
    both = ["hr", "sr", "sr@latin", "bs", "nb", "nn", "ms", "br", "oc", "ast", "sc", "pl", "fr", "es"]
    monkeypatch.setattr(quality, "LOCALE_DIR", _fake_locales(tmp_path, both=both, countries=["an", "frp"]))
    expected = {
        "hrv_Latn": "hr",
        "srp_Cyrl": "sr",
        "srp_Latn": "sr@latin",
        "bos_Latn": "bs",
        "nob_Latn": "nb",
        "nno_Latn": "nn",
        "zsm_Latn": "ms",
        "arg_Latn": "an",
        "bre_Latn": "br",
        "oci_Latn": "oc",
        "ast_Latn": "ast",
        "srd_Latn": "sc",
        "frp_Latn": "frp",
        "eng_Latn": "en",  # English: the names themselves, no catalogue needed
        "szl_Latn": None,  # no catalogue in this folder
        "deu_Latn": None,
        "xxx_Latn": None,  # not a FLORES-200 code
    }
    assert {code: quality.iso_locale(code) for code in expected} == expected
    assert quality.reference_note("hr", "en") == ""
    assert quality.reference_note("fr", "frp") == "countries only"
    assert quality.reference_note("an", "es") == "countries only"
    assert quality.reference_note("pl", None) == quality.reference_note(None, "en") == "no reference"


class _TermEngine:
    """Packs and a translation that answers each term from a table (unknown terms come back unchanged)."""

    def __init__(self, packs: dict[str, tuple[tuple[str, str], ...]], table: dict[str, str]) -> None:
        self._packs = packs
        self.table = table
        self.calls: list[tuple[str, str, str | None]] = []

    def packs(self) -> list[object]:
        return [type("Pack", (), {"id": k, "pairs": v})() for k, v in self._packs.items()]

    def translate_many(
        self, texts: list[str], options: TranslateOptions, *, pack: str | None = None
    ) -> list[object]:
        self.calls.append((str(options.source), options.target, pack))
        return [type("Result", (), {"translation": self.table.get(t, t)})() for t in texts]


def test_term_only_directions_leave_out_the_test_set_routes() -> None:
    quality = _benchmark()
    engine = _TermEngine(
        {
            "apertium-eng-spa": (("eng_Latn", "spa_Latn"),),
            "apertium-pol-szl": (("pol_Latn", "szl_Latn"),),
            "apertium-hrv-eng": (("hrv_Latn", "eng_Latn"),),
        },
        {},
    )
    by_flores = {v: k for k, v in quality.LANGUAGES.items()}
    assert quality._term_only_directions(engine, by_flores) == [
        ("hr", "en", "hrv_Latn", "eng_Latn", "apertium-hrv-eng"),
        ("pl", "szl", "pol_Latn", "szl_Latn", "apertium-pol-szl"),
    ]


def test_a_language_without_iso_codes_gets_a_no_reference_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    quality = _benchmark()
    monkeypatch.setattr(quality, "LOCALE_DIR", _fake_locales(tmp_path, both=["pl"], countries=[]))
    engine = _TermEngine({}, {})
    row = quality._term_only_row(
        engine,
        ("pl", "szl", "pol_Latn", "szl_Latn", "apertium-pol-szl"),
        tier="best",
        terms=True,
        quick=False,
    )
    assert engine.calls == []  # nothing to compare with: nothing translated
    assert row["note"] == "no reference: iso-codes has no szl locale" and "terms" not in row
    quality.print_term_table([row], tier="best")
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == (
        "| pl-szl | apertium-pol-szl | pl > - | - | - | - | - | no reference: iso-codes has no szl locale |"
    )
    assert lines[-3].startswith("| pair | pack | iso-codes | terms | exact % | normalised % |")


@pytest.mark.skipif(
    not Path("/usr/share/locale/hr/LC_MESSAGES/iso_3166-1.mo").is_file(), reason="no iso-codes"
)
def test_a_term_only_row_scores_through_its_own_pack(capsys: pytest.CaptureFixture[str]) -> None:
    quality = _benchmark()
    terms = quality.term_pairs("hr", "en")
    wrong = terms[0][0]
    table = dict(terms) | {wrong: "wrong"}
    engine = _TermEngine({}, table)
    row = quality._term_only_row(
        engine, ("hr", "en", "hrv_Latn", "eng_Latn", "apertium-hrv-eng"), tier="best", terms=True, quick=False
    )
    assert set(engine.calls) == {("hrv_Latn", "eng_Latn", "apertium-hrv-eng")}
    assert row["terms"] == len(terms) > 300 and row["note"] == "" and row["locales"] == "hr > en"
    right = sum(table[a] == b for a, b in terms)
    assert right < len(terms)
    assert row["terms_exact"] == round(100 * right / len(terms), 1) <= row["terms_normalised"] < 100
    quality.print_term_table([row], tier="best")
    assert (
        capsys.readouterr()
        .out.splitlines()[-1]
        .startswith(f"| hr-en | apertium-hrv-eng | hr > en | {len(terms)} |")
    )


class _StuckEngine(_TermEngine):
    """Answers nothing for any call that holds ``stuck`` (as Apertium hbs-mkd does for some names)."""

    def __init__(self, table: dict[str, str], stuck: str) -> None:
        super().__init__({}, table)
        self.stuck = stuck

    def translate_many(
        self, texts: list[str], options: TranslateOptions, *, pack: str | None = None
    ) -> list[object]:
        if self.stuck in texts:
            self.calls.append((str(options.source), options.target, pack))
            raise EngineTimeout(f"Apertium {pack} returned nothing for 30 s; its pipeline was killed")
        return super().translate_many(texts, options, pack=pack)


@pytest.mark.skipif(
    not Path("/usr/share/locale/bs/LC_MESSAGES/iso_3166-1.mo").is_file(), reason="no iso-codes"
)
def test_a_term_a_route_fails_on_counts_as_a_miss_and_the_row_says_which() -> None:
    quality = _benchmark()
    terms = quality.term_pairs("bs", "mk")
    stuck = terms[100][0]
    engine = _StuckEngine(dict(terms), stuck)
    row = quality._term_only_row(
        engine, ("bs", "mk", "bos_Latn", "mkd_Cyrl", "apertium-bos-mkd"), tier="best", terms=True, quick=False
    )
    right = sum(a != stuck for a, _ in terms)
    assert row["terms"] == len(terms) and row["terms_exact"] == round(100 * right / len(terms), 1)
    assert (
        row["note"] == (f"1 failed (EngineTimeout: `{stuck}`), counted as misses; time not comparable")
        and row["ms_per_term"] == "-"
    )
    # a warm-up, the whole list, each group once, then the failing group's terms one a call
    groups = len(range(0, len(terms), quality.RETRY_CHUNK))
    assert len(engine.calls) == 1 + 1 + groups + quality.RETRY_CHUNK
