"""The links a mail carries: to the site (E31_SITE_URL) and to stop the person's mail, signed so a link
works without signing in and cannot be made for someone else."""

from django.conf import settings
from django.contrib.auth.models import User
from django.core import signing
from django.urls import reverse

SALT = "notify.unsubscribe"


def site_url(path: str) -> str:
    """`path` (from reverse) as people reach the site."""
    return settings.E31_SITE_URL + path


def unsubscribe_token(user: User) -> str:
    return signing.dumps(user.pk, salt=SALT, compress=True)


def user_of_token(token: str) -> int | None:
    """The id of the person the token was made for; None when it was not made here."""
    try:
        value = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        return None
    return value if isinstance(value, int) else None


def unsubscribe_url(user: User) -> str:
    return site_url(reverse("notify:unsubscribe", args=[unsubscribe_token(user)]))
