"""Hostile Authorization headers against the hosted service's authenticate() (issue 12; spec 5, 7.1): every
malformed, wrong, revoked or rotated-away key is a 401 Unauthorized, never another exception, never an echo
of what was sent; the secret is compared in constant time (hmac.compare_digest) whether or not the key id
exists."""

from __future__ import annotations

import hmac
from collections.abc import Iterator

import pytest
from accounts_support import new_key
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from dragoman.errors import Unauthorized
from dragoman.service import accounts, migrate
from dragoman.service.db import Database, api_keys


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    database = Database(db_url)  # SQLite and PostgreSQL (the db_url fixture)
    migrate.upgrade(database)
    try:
        yield database
    finally:
        accounts.clear_auth_cache(database)
        database.dispose()


def _variants(key: str) -> dict[str, str | None]:
    prefix, key_id, secret = key[:9], key[9:21], key[22:]
    other = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    return {
        "none": None,
        "empty": "",
        "bearer only": "Bearer ",
        "no scheme": key,
        "basic scheme": f"Basic {key}",
        "wrong prefix": f"Bearer sk_live_{key_id}_{secret}",
        "other mode's prefix": f"Bearer svc_test_{key_id}_{secret}",
        "unknown prefix word": f"Bearer svc_prod_{key_id}_{secret}",
        "upper-case id": f"Bearer {prefix}{key_id.upper()}_{secret}",
        "short id": f"Bearer {prefix}{key_id[:-1]}_{secret}",
        "unknown id": f"Bearer {prefix}{'0' * 12}_{secret}",
        "wrong secret": f"Bearer {prefix}{key_id}_{other}",
        "truncated secret": f"Bearer {prefix}{key_id}_{secret[:-1]}",
        "secret with a suffix": f"Bearer {key}x",
        "10 KB header": f"Bearer {key}{'A' * 10_240}",
        "10 KB of spaces before": "Bearer " + " " * 10_240 + key,
        "non-ASCII digits in the id": f"Bearer {prefix}{'٣' * 12}_{secret}",
        "non-ASCII secret": f"Bearer {prefix}{key_id}_{secret[:-1]}é",
        "full-width letters": f"Bearer ｓｖｃ_live_{key_id}_{secret}",
        "NUL inside": f"Bearer {key}\x00",
        "header injection": f"Bearer {key}\r\nX-Admin: 1",
        "two keys": f"Bearer {key} {key}",
        "lone surrogate": f"Bearer {prefix}{key_id}_{secret[:-1]}\udc80",
    }


def test_every_malformed_or_wrong_key_is_401_and_echoes_nothing(db: Database) -> None:
    _, key = new_key(db)
    for name, header in _variants(key).items():
        with pytest.raises(Unauthorized) as refused:
            accounts.authenticate(db, header)
        assert refused.value.status == 401 and refused.value.code == "unauthorized", name
        assert key[22:] not in refused.value.message and "A" * 50 not in refused.value.message, name
    assert accounts.authenticate(db, f"Bearer {key}").key_id == key[9:21]  # the good key still works


def test_revoked_and_rotated_away_keys_are_401(db: Database) -> None:
    revoked_info, revoked = new_key(db)
    rotated_info, rotated = new_key(db)
    for good in (revoked, rotated):
        accounts.authenticate(db, f"Bearer {good}")  # cached
    accounts.revoke_key(db, revoked_info.key_id)
    replacement = accounts.rotate_key(db, rotated_info.key_id)
    for gone in (revoked, rotated):
        with pytest.raises(Unauthorized):
            accounts.authenticate(db, f"Bearer {gone}")
    assert accounts.authenticate(db, f"Bearer {replacement.key}").key_id == replacement.key_id


def test_a_key_whose_stored_mode_differs_is_401(db: Database) -> None:
    info, key = new_key(db, mode="test")
    with db.write() as conn:  # a live key string whose row says test: the mode is part of the key
        conn.execute(api_keys.update().where(api_keys.c.id == info.key_id).values(mode="live"))
    accounts.clear_auth_cache(db)
    with pytest.raises(Unauthorized):
        accounts.authenticate(db, f"Bearer {key}")


def test_the_secret_is_compared_in_constant_time_for_known_and_unknown_ids(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, key = new_key(db)
    with db.read() as conn:
        stored = conn.execute(select(api_keys.c.secret_hash)).scalar_one()
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    variants = _variants(key)
    for name in ("wrong secret", "unknown id"):
        with pytest.raises(Unauthorized):
            accounts.authenticate(db, variants[name])
    assert len(calls) == 2
    assert calls[0][0] == stored.encode()  # the known id: against its hash
    assert calls[1][0] != stored.encode() and len(calls[1][0]) == 64  # an unknown id: against a dummy hash


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    header=st.one_of(
        st.none(), st.text(max_size=400), st.text(max_size=80).map(lambda t: f"Bearer svc_live_{t}")
    )
)
def test_any_header_is_a_key_or_a_401_never_another_exception(db: Database, header: str | None) -> None:
    try:
        accounts.authenticate(db, header)
    except Unauthorized as refused:
        assert refused.status == 401
