"""Test files are imported by their base name (pytest's rootdir import mode, no packages under tests/): two
files with one name in different folders stop the whole run at collection. Caught here, by name."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path


def test_every_test_file_has_its_own_base_name() -> None:
    places: defaultdict[str, list[str]] = defaultdict(list)
    root = Path(__file__).parent
    for path in root.rglob("test_*.py"):
        places[path.name].append(str(path.relative_to(root)))
    assert {name: where for name, where in places.items() if len(where) > 1} == {}
