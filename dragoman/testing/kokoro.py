"""A stand-in Kokoro model for tests: a few hundred bytes of ONNX with Kokoro's signature, a voices ``.npz``
and Kokoro-82M's vocabulary.

``tokens [1,n] int64``, ``style [1,256] float32``, ``speed [1] float32`` → ``audio [N] float32``: a 220 Hz
tone of ``N = floor(n × 600 / speed)`` samples at 24 kHz whose amplitude is ``style[0][0]``. The voices give
style row *k* the value ``0.1 + k / 2000`` in that place, so a test reads which row the engine chose (the row
for the token count) off the amplitude, and the length off the token count and speed. The real loading,
validating, phonemising (espeak-ng) and running code of :mod:`dragoman.models.kokoro` and
:mod:`dragoman.speech.tts.engines.kokoro` is exercised. Built with ``onnx.helper`` (``onnx``: a dev
dependency).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

SAMPLE_RATE = 24000
HOP = 600
TONE_HZ = 220.0
ROWS = 510
STYLE_DIM = 256
#: Kokoro-82M's ``config.json`` "vocab" (Apache-2.0), as kokoro-onnx ships it: symbols, then their ids.
_VOCAB_SYMBOLS = (
    ";:,.!?—…\u0022()“” \u0303ʣʥʦʨᵝ\uab67AIOQSTWYᵊabcdefhijklmnopqrst"
    "uvwxyzɑɐɒæβɔɕçɖðʤəɚɛɜɟɡɥɨɪʝɯɰŋɳɲɴøɸθœɹɾɻʁɽʂʃʈʧʊʋʌɣɤχʎʒʔˈˌːʰʲ↓→↗↘ᵻ"
)
_VOCAB_IDS = (
    1,
    2,
    3,
    4,
    5,
    6,
    9,
    10,
    11,
    12,
    13,
    14,
    15,
    16,
    17,
    18,
    19,
    20,
    21,
    22,
    23,
    24,
    25,
    31,
    33,
    35,
    36,
    39,
    41,
    42,
    43,
    44,
    45,
    46,
    47,
    48,
    50,
    51,
    52,
    53,
    54,
    55,
    56,
    57,
    58,
    59,
    60,
    61,
    62,
    63,
    64,
    65,
    66,
    67,
    68,
    69,
    70,
    71,
    72,
    75,
    76,
    77,
    78,
    80,
    81,
    82,
    83,
    85,
    86,
    87,
    90,
    92,
    99,
    101,
    102,
    103,
    110,
    111,
    112,
    113,
    114,
    115,
    116,
    118,
    119,
    120,
    123,
    125,
    126,
    128,
    129,
    130,
    131,
    132,
    133,
    135,
    136,
    138,
    139,
    140,
    142,
    143,
    147,
    148,
    156,
    157,
    158,
    162,
    164,
    169,
    171,
    172,
    173,
    177,
)
VOICES = ("af_standin", "am_standin", "bf_standin", "ff_standin", "em_standin")


def vocab() -> dict[str, int]:
    return dict(zip(_VOCAB_SYMBOLS, _VOCAB_IDS, strict=True))


def row_amplitude(row: int) -> float:
    """The amplitude the stand-in renders with style row ``row``."""
    return 0.1 + row / 2000


def row_of(amplitude: float) -> int:
    """Which style row gave a render of peak ``amplitude``."""
    return round((amplitude - 0.1) * 2000)


def standin_model_bytes(
    *,
    token_input: str = "tokens",
    style_dim: int = STYLE_DIM,
    output: str = "audio",
    int_speed: bool = False,
) -> bytes:
    """The stand-in's ONNX model (the keywords make wrong signatures for tests; ``token_input="input_ids"``
    with ``int_speed`` is the signature of newer exports, whose ``speed`` is int32)."""
    import onnx
    from onnx import TensorProto, helper

    def const(name: str, value: float | int, dtype: int) -> onnx.NodeProto:
        return helper.make_node(
            "Constant", [], [name], value=helper.make_tensor(name + "_v", dtype, [], [value])
        )

    nodes = [
        helper.make_node("Shape", [token_input], ["shape"]),
        const("one_i", 1, TensorProto.INT64),
        const("zero_i", 0, TensorProto.INT64),
        helper.make_node("Gather", ["shape", "one_i"], ["n"], axis=0),
        helper.make_node("Cast", ["n"], ["n_f"], to=TensorProto.FLOAT),
        const("hop", float(HOP), TensorProto.FLOAT),
        helper.make_node("Cast", ["speed"], ["speed_f"], to=TensorProto.FLOAT),
        helper.make_node("Gather", ["speed_f", "zero_i"], ["speed_s"], axis=0),
        helper.make_node("Mul", ["n_f", "hop"], ["n_hop"]),
        helper.make_node("Div", ["n_hop", "speed_s"], ["n_samples"]),
        helper.make_node("Floor", ["n_samples"], ["n_floor"]),
        const("zero_f", 0.0, TensorProto.FLOAT),
        const("one_f", 1.0, TensorProto.FLOAT),
        helper.make_node("Range", ["zero_f", "n_floor", "one_f"], ["t"]),
        const("omega", 2.0 * 3.141592653589793 * TONE_HZ / SAMPLE_RATE, TensorProto.FLOAT),
        helper.make_node("Mul", ["t", "omega"], ["phase"]),
        helper.make_node("Sin", ["phase"], ["wave"]),
        helper.make_node("Gather", ["style", "zero_i"], ["style_row"], axis=0),
        helper.make_node("Gather", ["style_row", "zero_i"], ["amp"], axis=0),
        helper.make_node("Mul", ["wave", "amp"], [output]),
    ]
    graph = helper.make_graph(
        nodes,
        "kokoro_standin",
        [
            helper.make_tensor_value_info(token_input, TensorProto.INT64, [1, "n"]),
            helper.make_tensor_value_info("style", TensorProto.FLOAT, [1, style_dim]),
            helper.make_tensor_value_info(
                "speed", TensorProto.INT32 if int_speed else TensorProto.FLOAT, [1]
            ),
        ],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, ["N"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="dragoman")
    model.ir_version = 8
    onnx.checker.check_model(model)
    data: bytes = model.SerializeToString()
    return data


def voices_bytes(
    names: tuple[str, ...] = VOICES, *, rows: int = ROWS, shape: tuple[int, ...] | None = None
) -> bytes:
    """A voices ``.npz``: each voice float32 ``[rows, 1, 256]`` with row *k* starting ``0.1 + k / 2000``
    (``shape`` makes a wrong one for tests)."""
    import numpy as np

    arrays = {}
    for name in names:
        style = np.zeros(shape or (rows, 1, STYLE_DIM), dtype=np.float32)
        if shape is None:
            style[:, 0, 0] = [row_amplitude(k) for k in range(rows)]
        arrays[name] = style
    out = io.BytesIO()
    np.savez(out, **arrays)  # type: ignore[arg-type]
    return out.getvalue()


def write_standin_kokoro(
    folder: Path, model_id: str = "kokoro-standin-v1.0", *, voices: tuple[str, ...] = VOICES
) -> Path:
    """Write ``<folder>/<model_id>.onnx``, ``voices-v1.0.bin`` and ``config.json``; returns the .onnx."""
    folder.mkdir(parents=True, exist_ok=True)
    model = folder / f"{model_id}.onnx"
    model.write_bytes(standin_model_bytes())
    (folder / "voices-v1.0.bin").write_bytes(voices_bytes(voices))
    config = {"n_token": 178, "style_dim": 128, "vocab": vocab()}
    (folder / "config.json").write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    return model


def expected_samples(n_tokens: int, speed: float) -> int:
    """What the stand-in renders for ``n_tokens`` tokens (the two pads included) at ``speed``."""
    return int(n_tokens * HOP / speed)
