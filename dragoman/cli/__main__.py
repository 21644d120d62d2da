"""``python -m dragoman.cli``: the same as the ``dragoman`` command."""

from __future__ import annotations

import sys

from dragoman.cli.main import main

sys.exit(main())
