"""What teams does when something happens elsewhere: a sign-in keeps the person's zone in their session."""

from typing import Any

from django.contrib.auth.signals import user_logged_in
from django.http import HttpRequest

from teams.access import remember_zone


def on_signed_in(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    if request is not None and hasattr(request, "session"):  # a sign-in outside a request keeps no session
        remember_zone(request, user)


def connect() -> None:
    user_logged_in.connect(on_signed_in, dispatch_uid="teams.remember_zone")
