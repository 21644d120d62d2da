"""PDF layout scanners stay linear (issue 11, item 2): splitting a block into table cells and columns
(:func:`dragoman.documents._pdf_layout.columns`) on blocks of many rows, cells and scattered parts.
See ``tests/growth.py``: only growth ratios are compared, never absolute times."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from growth import assert_linear

from dragoman.documents import _pdf_layout


def _line(parts: list[tuple[float, str]], y: float) -> dict[str, Any]:
    spans = [
        {
            "text": text,
            "size": 10.0,
            "flags": 0,
            "font": "Helvetica",
            "color": 0,
            "bbox": (x, y - 8, x + 5 * len(text), y + 2),
            "origin": (x, y),
        }
        for x, text in parts
    ]
    box = (parts[0][0], y - 8, parts[-1][0] + 5 * len(parts[-1][1]), y + 2)
    return {"spans": spans, "dir": (1.0, 0.0), "bbox": box}


def _block(row: Callable[[int], list[tuple[float, str]]]) -> Callable[[str], object]:
    """Work on a block of one row per 10 characters of the input."""

    def work(text: str) -> object:
        lines = [_line(row(index), 100.0 + 12 * index) for index in range(len(text) // 10)]
        return _pdf_layout.columns(lines)

    return work


def test_splitting_blocks_into_cells_and_columns_is_linear() -> None:
    cases: dict[str, Callable[[int], list[tuple[float, str]]]] = {
        "table rows": lambda i: [(72.0, "Name"), (300.0, "A value in the second cell")],
        "narrow gaps": lambda i: [(72.0, "Key"), (72.0 + 15 + 5 * 3, "value")],  # 1.5 em: rows merged
        "scattered parts": lambda i: [(72.0 + 6.0 * i, "a"), (72.0 + 6.0 * i + 40, "b")],  # a column each
        "prose split at sentences": lambda i: [(72.0, "The house is red."), (162.0, "The garden")],
    }
    for name, row in cases.items():
        assert_linear(_block(row), {name: lambda n: "x" * n}, 4000)
