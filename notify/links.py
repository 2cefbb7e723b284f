"""The link that stops a person's mail, signed so it works without signing in and cannot be made for someone
else."""

from django.contrib.auth.models import User
from django.core import signing
from django.urls import reverse

from core.site import site_url

SALT = "notify.unsubscribe"


def unsubscribe_token(user: User) -> str:
    return signing.dumps(user.pk, salt=SALT, compress=True)


def user_of_token(token: str) -> int | None:
    try:
        value = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        return None
    return value if isinstance(value, int) else None


def unsubscribe_url(user: User) -> str:
    return site_url(reverse("notify:unsubscribe", args=[unsubscribe_token(user)]))
