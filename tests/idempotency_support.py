"""The idempotency store's tests' fixture (issue 13): ``db``, the service database at the ``db_url``
fixture's URL (SQLite and PostgreSQL), migrated to head and disposed afterwards. A test module takes it by
importing :func:`migrated_db_fixture` (pytest finds it under the name ``db``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from accounts_support import migrated_db

from dragoman.service.db import Database


@pytest.fixture(name="db")
def migrated_db_fixture(db_url: str) -> Iterator[Database]:
    """The migrated service database of this test (``db_url``'s backend)."""
    with migrated_db(db_url) as database:
        yield database
