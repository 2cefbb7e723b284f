"""API tokens: random keys kept hashed, and the DRF authentication that accepts `Authorization: Token <key>`.

A key is 256 random bits, so one sha256 (not a slow password hash) is enough to make the stored digest
useless to whoever reads the database. Failed token authentications are throttled per address, before
the lookup, since DRF's own throttles run only after authentication succeeded.
"""

import hashlib
import secrets

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed, Throttled
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from core import ratelimit
from teams.access import is_operator
from teams.models import ApiToken

PREFIX_CHARS = 8


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_token(user: User, *, name: str = "") -> str:
    """A new key for `user`; only its digest is stored, so this is the one time it can be read."""
    return issue_token(user, name=name)[1]


def issue_token(user: User, *, name: str = "") -> tuple[ApiToken, str]:
    """A new named token for `user` and its key (shown this once)."""
    key = secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name, digest=digest(key), prefix=key[:PREFIX_CHARS], created_at=timezone.now()
    )
    return token, key


def tokens_for(user: User) -> QuerySet[ApiToken]:
    """The tokens a person may see and revoke: their own; an operator's, everyone's."""
    tokens = ApiToken.objects.select_related("user").order_by("-created_at", "-id")
    return tokens if is_operator(user) else tokens.filter(user=user)


def revocable_token(user: User, token_id: int | str) -> ApiToken:
    """One token `user` may revoke; another person's (to a non-operator) or a missing one is Http404."""
    return get_object_or_404(tokens_for(user), pk=token_id)


def revoke(token: ApiToken) -> None:
    """Revoke a token: its key stops working at once (only its digest was kept, and it goes)."""
    token.delete()


def user_for_key(key: str) -> User | None:
    try:
        return User.objects.get(api_tokens__digest=digest(key))  # digest is unique: one person or none
    except User.DoesNotExist:
        return None


class FailedTokenThrottle(BaseThrottle):
    """Failed token authentications per client address, in a sliding window (the rate `failed_token` of
    E31_API_THROTTLE_RATES), counted where every web server sees them (core.ratelimit)."""

    scope = "failed_token"

    def __init__(self) -> None:
        self.window = ratelimit.Window.parse(settings.E31_API_THROTTLE_RATES[self.scope])  # checked at start-up
        self.retry_after = 0.0

    def _key(self, request: Request) -> str:
        return f"throttle_{self.scope}_{self.get_ident(request)}"

    def blocked(self, request: Request) -> bool:
        """Whether this address failed too often lately (`retry_after` then says for how long).

        Asked before the lookup, and a failure recorded after it: racing guesses from one address may
        pass the limit by those in flight, which a 256-bit key makes worthless to a guesser."""
        if self.window is None:
            return False
        self.retry_after = ratelimit.wait(self._key(request), self.window)
        return self.retry_after > 0

    def record_failure(self, request: Request) -> None:
        if self.window is not None:
            ratelimit.add(self._key(request), self.window)


class HashedTokenAuthentication(TokenAuthentication):
    """`Authorization: Token <key>`, checked against the stored digests (teams.models.ApiToken)."""

    def authenticate(self, request: Request) -> tuple[User, None] | None:
        throttle = FailedTokenThrottle()
        if throttle.blocked(request):
            raise Throttled(wait=throttle.retry_after)
        try:
            return super().authenticate(request)
        except AuthenticationFailed:
            throttle.record_failure(request)
            raise

    def authenticate_credentials(self, key: str) -> tuple[User, None]:
        user = user_for_key(key)
        if user is None:
            raise AuthenticationFailed("Invalid token.")
        if not user.is_active:
            raise AuthenticationFailed("User inactive or deleted.")
        return user, None
