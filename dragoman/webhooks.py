"""Webhook signatures of the hosted service: :func:`verify` for receivers, :func:`sign` for the sender.

Every delivery carries two signatures over the same raw body (HOSTED.md, Webhooks; spec 6):

- the spec's ``X-Service-Signature: sha256=<hex>``, the HMAC-SHA256 of the raw body keyed with the webhook
  secret as it is shown (the whole ``whsec_…`` string, UTF-8), with ``X-Service-Timestamp`` (Unix seconds of
  the attempt, an integer);
- the `Standard Webhooks <https://www.standardwebhooks.com/>`_ headers ``webhook-id`` (the event's stable id),
  ``webhook-timestamp`` (the same Unix seconds) and ``webhook-signature: v1,<base64>``, the HMAC-SHA256 of
  ``{id}.{timestamp}.{body}`` keyed with the base64-decoded part of the secret after ``whsec_``, so receivers
  may use the ``standardwebhooks`` library (``Webhook(secret).verify(body, headers)``).

The spec's signature covers the body only, so a captured delivery replayed with a fresh
``X-Service-Timestamp`` would pass it; the Standard Webhooks signature covers the timestamp and the event id
too. :func:`verify` therefore checks both signatures and both timestamps: a receiver using it rejects
replays. Each attempt of a delivery is signed afresh (a retry carries its own timestamp; the body and the
event id stay the same, so a receiver de-duplicates on ``webhook-id`` or the body's ``id``).

This module is on the ground floor: it imports nothing of dragoman but :mod:`dragoman.errors`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Mapping
from typing import Any

from dragoman.errors import WebhookVerificationError

#: Deliveries whose timestamp is further than this from the receiver's clock are refused (spec 6: 5 minutes).
TOLERANCE_SECONDS = 300
SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    """A fresh webhook secret, ``whsec_`` and the base64 of 32 random bytes (the Standard Webhooks form)."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def _standard_key(secret: str) -> bytes:
    """The Standard Webhooks signing key: the base64 after ``whsec_`` decoded (as the library does)."""
    body = secret[len(SECRET_PREFIX) :] if secret.startswith(SECRET_PREFIX) else secret
    try:
        key = base64.b64decode(body + "==")
    except (binascii.Error, ValueError):
        key = b""
    if not key:
        raise WebhookVerificationError("the webhook secret is not a whsec_<base64> secret")
    return key


def service_signature(body: bytes, secret: str) -> str:
    """The ``X-Service-Signature`` value: ``sha256=`` and the hex HMAC-SHA256 of ``body``."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def standard_signature(body: bytes, secret: str, timestamp: int, event_id: str) -> str:
    """The ``webhook-signature`` value: ``v1,`` and the base64 HMAC-SHA256 of ``{id}.{timestamp}.{body}``."""
    signed = f"{event_id}.{timestamp}.".encode() + body
    digest = hmac.new(_standard_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def sign(body: bytes, secret: str, timestamp: int, event_id: str) -> dict[str, str]:
    """The headers of one delivery attempt of ``body`` (the raw JSON bytes) at ``timestamp`` (Unix s)."""
    return {
        "Content-Type": "application/json",
        "X-Service-Signature": service_signature(body, secret),
        "X-Service-Timestamp": str(int(timestamp)),
        "webhook-id": event_id,
        "webhook-timestamp": str(int(timestamp)),
        "webhook-signature": standard_signature(body, secret, int(timestamp), event_id),
    }


def _timestamp(value: str | None, name: str, now: float, tolerance: float) -> int:
    if not value:
        raise WebhookVerificationError(f"the {name} header is missing")
    try:
        stamp = int(value.strip())
    except ValueError:
        raise WebhookVerificationError(f"the {name} header is not Unix seconds: {value[:40]!r}") from None
    if stamp < now - tolerance:
        raise WebhookVerificationError(f"the {name} is older than {tolerance:g} seconds (a replay?)")
    if stamp > now + tolerance:
        raise WebhookVerificationError(f"the {name} is more than {tolerance:g} seconds in the future")
    return stamp


def verify(
    body: bytes,
    headers: Mapping[str, str],
    secret: str,
    *,
    tolerance: float = TOLERANCE_SECONDS,
    now: float | None = None,
) -> dict[str, Any]:
    """Check a delivery before acting on it; return its payload (the parsed JSON object).

    ``body`` is the raw request body exactly as received (before any JSON parsing), ``headers`` the request's
    headers (any case), ``secret`` the key's webhook secret (``whsec_…``). Both signatures must match
    (compared in constant time) and both timestamps be within ``tolerance`` seconds of ``now`` (default: the
    clock). Raises :class:`~dragoman.errors.WebhookVerificationError` otherwise (answer it with a 400: the
    service does not retry a 4xx other than 408 and 429).
    """
    if not isinstance(body, bytes | bytearray | memoryview):
        raise TypeError("verify() takes the raw body as bytes")
    raw = bytes(body)
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    clock = time.time() if now is None else now

    given = lower.get("x-service-signature", "").strip()
    if not given:
        raise WebhookVerificationError("the X-Service-Signature header is missing")
    if not hmac.compare_digest(given.encode("utf-8", "replace"), service_signature(raw, secret).encode()):
        raise WebhookVerificationError("the X-Service-Signature does not match the body")
    service_stamp = _timestamp(lower.get("x-service-timestamp"), "X-Service-Timestamp", clock, tolerance)

    event_id = lower.get("webhook-id", "")
    if not event_id:
        raise WebhookVerificationError("the webhook-id header is missing")
    stamp = _timestamp(lower.get("webhook-timestamp"), "webhook-timestamp", clock, tolerance)
    if stamp != service_stamp:
        raise WebhookVerificationError("X-Service-Timestamp and webhook-timestamp differ")
    expected = standard_signature(raw, secret, stamp, event_id).encode()
    offered = lower.get("webhook-signature", "").split()
    if not offered:
        raise WebhookVerificationError("the webhook-signature header is missing")
    if not any(hmac.compare_digest(sig.encode("utf-8", "replace"), expected) for sig in offered):
        raise WebhookVerificationError("the webhook-signature does not match the body, id and timestamp")

    try:
        payload = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        raise WebhookVerificationError("the body is not JSON") from None
    if not isinstance(payload, dict):
        raise WebhookVerificationError("the body is not a JSON object")
    return payload
