"""The package root's public surface, and the README's Python example run as a user would run it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import needs_apertium

import dragoman

README = Path(__file__).resolve().parents[1] / "README.md"
PUBLIC = (
    "Detection",
    "DocumentResult",
    "DragomanError",
    "Engine",
    "GlossaryEntry",
    "Settings",
    "TranslateOptions",
    "TranslationResult",
    "translate_file",
)


def python_example() -> str:
    """The first ```python block under the README's "## Python" heading."""
    section = README.read_text(encoding="utf-8").split("\n## Python\n", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "the README's Python section has no ```python block"
    return found.group(1)


def test_the_root_exports_what_a_python_user_needs() -> None:
    assert sorted(dragoman.__all__) == sorted([*PUBLIC, "__version__"])
    for name in PUBLIC:
        assert getattr(dragoman, name) is not None, name
    with pytest.raises(AttributeError):
        dragoman.NoSuchThing  # noqa: B018


def test_importing_the_package_loads_no_engine() -> None:
    """`import dragoman` stays cheap: ctranslate2, PyMuPDF and the MCP SDK load only when used."""
    heavy = "('ctranslate2', 'pymupdf', 'mcp')"
    code = f"import sys, dragoman; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@needs_apertium
def test_the_readme_python_example_runs(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(python_example(), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "La casa" in done.stdout or "casa" in done.stdout.lower(), done.stdout
