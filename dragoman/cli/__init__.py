"""The ``dragoman`` command line: ``dragoman.cli.main.main`` is its entry point."""

from __future__ import annotations

from dragoman.cli.main import main

__all__ = ["main"]
