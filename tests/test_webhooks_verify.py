"""dragoman.webhooks: the receivers' verify() and the signing it checks, against standardwebhooks."""

from __future__ import annotations

import hashlib
import hmac
import json
import time

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError as StandardError

from dragoman.errors import WebhookVerificationError
from dragoman.webhooks import new_secret, sign, verify

BODY = json.dumps(
    {"id": "evt_1", "event": "job.done", "created": 1, "job_id": "j1", "result": "héllo"}
).encode()


@pytest.fixture
def secret() -> str:
    return new_secret()


def test_new_secret_is_a_standard_webhooks_secret(secret: str) -> None:
    assert secret.startswith("whsec_")
    Webhook(secret)  # the library takes it
    assert new_secret() != secret


def test_signed_delivery_verifies_with_both_checks(secret: str) -> None:
    now = int(time.time())
    headers = sign(BODY, secret, now, "evt_1")
    assert headers["Content-Type"] == "application/json"
    assert headers["X-Service-Timestamp"] == headers["webhook-timestamp"] == str(now)
    assert headers["webhook-id"] == "evt_1"
    expected = hmac.new(secret.encode(), BODY, hashlib.sha256).hexdigest()
    assert headers["X-Service-Signature"] == f"sha256={expected}"  # spec 6: hex HMAC of the raw body
    assert Webhook(secret).verify(BODY, headers) == json.loads(BODY)  # the library agrees
    assert verify(BODY, headers, secret) == json.loads(BODY)
    lowered = {k.lower(): v for k, v in headers.items()}
    assert verify(BODY, lowered, secret)["job_id"] == "j1"


def test_wrong_secret_refused(secret: str) -> None:
    headers = sign(BODY, secret, int(time.time()), "evt_1")
    with pytest.raises(WebhookVerificationError):
        verify(BODY, headers, new_secret())


def test_tampered_body_refused(secret: str) -> None:
    headers = sign(BODY, secret, int(time.time()), "evt_1")
    with pytest.raises(WebhookVerificationError, match="X-Service-Signature"):
        verify(BODY.replace(b"j1", b"j2"), headers, secret)


@pytest.mark.parametrize(
    "missing",
    ["X-Service-Signature", "X-Service-Timestamp", "webhook-id", "webhook-timestamp", "webhook-signature"],
)
def test_missing_header_refused(secret: str, missing: str) -> None:
    headers = sign(BODY, secret, int(time.time()), "evt_1")
    del headers[missing]
    with pytest.raises(WebhookVerificationError) as info:
        verify(BODY, headers, secret)
    assert info.value.status == 400
    assert info.value.code == "invalid_webhook_signature"


def test_old_timestamp_refused(secret: str) -> None:
    now = time.time()
    headers = sign(BODY, secret, int(now) - 301, "evt_1")
    with pytest.raises(WebhookVerificationError, match="older"):
        verify(BODY, headers, secret, now=now)
    assert verify(BODY, sign(BODY, secret, int(now) - 299, "evt_1"), secret, now=now)


def test_future_timestamp_refused(secret: str) -> None:
    now = time.time()
    with pytest.raises(WebhookVerificationError, match="future"):
        verify(BODY, sign(BODY, secret, int(now) + 400, "evt_1"), secret, now=now)


def test_tolerance_is_configurable(secret: str) -> None:
    now = time.time()
    headers = sign(BODY, secret, int(now) - 100, "evt_1")
    with pytest.raises(WebhookVerificationError):
        verify(BODY, headers, secret, tolerance=60, now=now)
    assert verify(BODY, headers, secret, tolerance=120, now=now)


def test_replay_with_fresh_timestamp_refused(secret: str) -> None:
    """A captured body and signatures, replayed later with fresh timestamp headers: the X-Service-Signature
    alone would pass (it covers the body only); the Standard Webhooks signature covers the timestamp."""
    captured_at = int(time.time()) - 3600
    headers = sign(BODY, secret, captured_at, "evt_1")
    fresh = str(int(time.time()))
    replayed = {**headers, "X-Service-Timestamp": fresh, "webhook-timestamp": fresh}
    with pytest.raises(StandardError):
        Webhook(secret).verify(BODY, replayed)
    with pytest.raises(WebhookVerificationError, match="webhook-signature"):
        verify(BODY, replayed, secret)
    only_ours = {k: v for k, v in replayed.items() if not k.startswith("webhook-")}
    with pytest.raises(WebhookVerificationError):  # stripping the Standard headers does not help
        verify(BODY, only_ours, secret)


def test_mismatched_timestamps_refused(secret: str) -> None:
    now = int(time.time())
    headers = sign(BODY, secret, now, "evt_1")
    headers["X-Service-Timestamp"] = str(now - 10)
    with pytest.raises(WebhookVerificationError, match="differ"):
        verify(BODY, headers, secret)


def test_other_event_id_refused(secret: str) -> None:
    headers = sign(BODY, secret, int(time.time()), "evt_1")
    headers["webhook-id"] = "evt_2"
    with pytest.raises(WebhookVerificationError):
        verify(BODY, headers, secret)


def test_garbage_headers_refused_not_crashing(secret: str) -> None:
    headers = sign(BODY, secret, int(time.time()), "evt_1")
    for name, value in [
        ("X-Service-Timestamp", "yesterday"),
        ("X-Service-Signature", "sha256=zz\u00e9"),
        ("webhook-signature", "v1"),
        ("webhook-signature", "v2,abc v1,@@@"),
    ]:
        with pytest.raises(WebhookVerificationError):
            verify(BODY, {**headers, name: value}, secret)


def test_several_signatures_one_valid_accepted(secret: str) -> None:
    headers = sign(BODY, secret, int(time.time()), "evt_1")
    headers["webhook-signature"] = "v1,AAAA " + headers["webhook-signature"]
    assert verify(BODY, headers, secret)


def test_non_object_body_refused(secret: str) -> None:
    body = b"[1, 2]"
    with pytest.raises(WebhookVerificationError, match="object"):
        verify(body, sign(body, secret, int(time.time()), "evt_1"), secret)


def test_text_body_is_a_type_error(secret: str) -> None:
    with pytest.raises(TypeError):
        verify(BODY.decode(), {}, secret)  # type: ignore[arg-type]
