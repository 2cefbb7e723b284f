"""A delivery's signature: HMAC-SHA256 of "<timestamp>.<body>" with the webhook's secret, as Stripe signs
(the timestamp inside what is signed, so a receiver can refuse an old delivery played again)."""

import hashlib
import hmac
import secrets


def new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    signed = f"{timestamp}.".encode() + body
    return "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
