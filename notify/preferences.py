"""A person's mail choices: read with their defaults, changed, and all stopped by the unsubscribe link."""

from django.conf import settings
from django.contrib.auth.models import User

from notify.models import Preference


def preference_of(user: User) -> Preference:
    return Preference.objects.filter(user=user).first() or Preference(user=user)


def unsubscribe(user_id: int) -> None:
    """No outcome mailed, no digest (budget warnings follow it); an account deleted since gets no row."""
    if User.objects.filter(pk=user_id).exists():
        Preference.objects.update_or_create(user_id=user_id, defaults={"email_on": [], "digest": False})


def mail_is_on() -> bool:
    return bool(settings.EMAIL_HOST)


def set_preferences(user: User, *, email_on: list[str], digest: bool, digest_hour: int) -> Preference:
    kept = list(dict.fromkeys(email_on))
    found, _ = Preference.objects.update_or_create(
        user=user, defaults={"email_on": kept, "digest": digest, "digest_hour": digest_hour}
    )
    return found
