"""A stand-in Piper voice for tests: a few hundred bytes of ONNX with Piper's signature.

``input [1,T] int64``, ``input_lengths [1] int64``, ``scales [3] float32`` → ``output [1,1,1,N] float32``,
a 220 Hz tone (amplitude 0.3) of ``N = floor(T × 256 × length_scale)`` samples at 22,050 Hz, so the real
loading, phonemizing and running code of :mod:`dragoman.speech.tts.engines.piper` is exercised and length
follows ``length_scale`` as a Piper voice's does. Built with ``onnx.helper`` (``onnx``: a dev dependency).
"""

from __future__ import annotations

import json
from pathlib import Path

SAMPLE_RATE = 22050
HOP = 256
TONE_HZ = 220.0
#: The phonemes the stand-in's map knows: Piper's specials, punctuation, ASCII and common IPA letters.
_SYMBOLS = (
    ["_", "^", "$", " ", "!", "'", "(", ")", ",", "-", ".", ":", ";", "?"]
    + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    + list("æçðøħŋœǀǁǂǃɐɑɒɓɔɕɖɗɘəɚɛɜɞɟɠɡɢɣɤɥɦɧɨɪɫɬɭɮɯɰɱɲɳɴɵɶɸɹɺɻɽɾʀʁʂʃʄʈʉʊʋʌʍʎʏʐʑʒʔʕʘʙʛʜʝʟʡʢˈˌːˑ̩̃")
    + ["θ", "χ", "ᵻ", "ⱱ", "\u0303"]
)


def phoneme_id_map() -> dict[str, list[int]]:
    seen: dict[str, list[int]] = {}
    for sym in _SYMBOLS:
        if sym not in seen:
            seen[sym] = [len(seen)]
    return seen


def standin_model_bytes() -> bytes:
    """The stand-in's ONNX model."""
    import onnx
    from onnx import TensorProto, helper

    def const(name: str, value: float | int, dtype: int) -> onnx.NodeProto:
        return helper.make_node(
            "Constant", [], [name], value=helper.make_tensor(name + "_v", dtype, [], [value])
        )

    nodes = [
        helper.make_node("Shape", ["input"], ["shape"]),
        const("one_i", 1, TensorProto.INT64),
        helper.make_node("Gather", ["shape", "one_i"], ["t_len"], axis=0),
        helper.make_node("Cast", ["t_len"], ["t_f"], to=TensorProto.FLOAT),
        const("hop", float(HOP), TensorProto.FLOAT),
        helper.make_node("Gather", ["scales", "one_i"], ["length_scale"], axis=0),
        helper.make_node("Mul", ["t_f", "hop"], ["t_hop"]),
        helper.make_node("Mul", ["t_hop", "length_scale"], ["n_f"]),
        helper.make_node("Floor", ["n_f"], ["n_floor"]),
        const("zero_f", 0.0, TensorProto.FLOAT),
        const("one_f", 1.0, TensorProto.FLOAT),
        helper.make_node("Range", ["zero_f", "n_floor", "one_f"], ["t"]),
        const("omega", 2.0 * 3.141592653589793 * TONE_HZ / SAMPLE_RATE, TensorProto.FLOAT),
        helper.make_node("Mul", ["t", "omega"], ["phase"]),
        helper.make_node("Sin", ["phase"], ["wave"]),
        const("amp", 0.3, TensorProto.FLOAT),
        helper.make_node("Mul", ["wave", "amp"], ["scaled"]),
        helper.make_node(
            "Constant",
            [],
            ["out_shape"],
            value=helper.make_tensor("out_shape_v", TensorProto.INT64, [4], [1, 1, 1, -1]),
        ),
        helper.make_node("Reshape", ["scaled", "out_shape"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "piper_standin",
        [
            helper.make_tensor_value_info("input", TensorProto.INT64, [1, "T"]),
            helper.make_tensor_value_info("input_lengths", TensorProto.INT64, [1]),
            helper.make_tensor_value_info("scales", TensorProto.FLOAT, [3]),
        ],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1, 1, "N"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="dragoman")
    model.ir_version = 8
    onnx.checker.check_model(model)
    data: bytes = model.SerializeToString()
    return data


def standin_config(*, language: str = "en_US", espeak_voice: str = "en-us") -> dict[str, object]:
    family, _, region = language.partition("_")
    return {
        "audio": {"sample_rate": SAMPLE_RATE, "quality": "x_low"},
        "espeak": {"voice": espeak_voice},
        "inference": {"noise_scale": 0.667, "length_scale": 1.0, "noise_w": 0.8},
        "phoneme_type": "espeak",
        "phoneme_map": {},
        "phoneme_id_map": phoneme_id_map(),
        "num_symbols": len(phoneme_id_map()),
        "num_speakers": 1,
        "speaker_id_map": {},
        "piper_version": "1.0.0",
        "language": {"code": language, "family": family, "region": region},
        "dataset": "standin",
    }


def write_standin_voice(
    folder: Path,
    voice_id: str = "en_US-standin-x_low",
    *,
    language: str = "en_US",
    espeak_voice: str = "en-us",
) -> Path:
    """Write ``<folder>/<voice_id>.onnx`` and its ``.onnx.json``; returns the .onnx path."""
    folder.mkdir(parents=True, exist_ok=True)
    model = folder / f"{voice_id}.onnx"
    model.write_bytes(standin_model_bytes())
    config = standin_config(language=language, espeak_voice=espeak_voice)
    (folder / f"{voice_id}.onnx.json").write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    return model


def expected_samples(n_ids: int, length_scale: float) -> int:
    """What the stand-in renders for ``n_ids`` phoneme ids at ``length_scale``."""
    return int(n_ids * HOP * length_scale)
