"""Alembic migrations of the hosted service's schema (one schema for SQLite and PostgreSQL)."""
