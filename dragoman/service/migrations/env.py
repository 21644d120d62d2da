"""Alembic's environment: run by :func:`dragoman.service.migrate.upgrade` with a connection in its config."""

from __future__ import annotations

from alembic import context

from dragoman.service.db import metadata


def run() -> None:
    connection = context.config.attributes["connection"]
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite alters tables by copying them
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


try:
    context.config  # noqa: B018 - set only while Alembic runs this file
except AttributeError:  # imported outside Alembic (a test importing every module): nothing to run
    pass
else:
    run()
