"""API tokens: random keys kept hashed, and the DRF authentication that accepts `Authorization: Token <key>`."""

import hashlib
import math
import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed, ErrorDetail, Throttled
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from core import ratelimit
from teams.access import is_operator
from teams.models import ApiToken

PREFIX_CHARS = 8


def digest(key: str) -> str:
    """One sha256, not a slow password hash: a key of 256 random bits cannot be guessed from it anyway."""
    return hashlib.sha256(key.encode()).hexdigest()


def create_token(user: User, *, name: str = "") -> str:
    return issue_token(user, name=name)[1]


def issue_token(user: User, *, name: str = "") -> tuple[ApiToken, str]:
    key = secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name, digest=digest(key), prefix=key[:PREFIX_CHARS], created_at=timezone.now()
    )
    return token, key


def tokens_for(user: User) -> QuerySet[ApiToken]:
    """Their own; an operator's, everyone's."""
    tokens = ApiToken.objects.select_related("user").order_by("-created_at", "-id")
    return tokens if is_operator(user) else tokens.filter(user=user)


def revocable_token(user: User, token_id: int | str) -> ApiToken:
    return get_object_or_404(tokens_for(user), pk=token_id)


def user_for_key(key: str) -> User | None:
    try:
        return User.objects.get(api_tokens__digest=digest(key))  # digest is unique: one person or none
    except User.DoesNotExist:
        return None


class UnknownToken(AuthenticationFailed):
    """A well-formed key that matches no token: the one failure counted."""

    def __init__(self, key: str) -> None:
        super().__init__("Invalid token.")
        self.key = key


class LockedOut(Throttled):
    """429 for an unknown token from a locked-out address or prefix, saying the lockout's minutes."""

    def __init__(self, wait: float, minutes: int) -> None:
        super().__init__(wait=wait)
        left = math.ceil(wait / 60)
        message = (
            f"Too many unknown tokens from this address or with this key's first characters: unknown tokens are "
            f"refused for {minutes} minutes (this lockout ends in {left} minute{'s' if left != 1 else ''}). "
            f"A valid token is always accepted."
        )
        # A dict detail is the body as it is: the minutes stay a JSON number.
        self.detail = {"detail": ErrorDetail(message, code=self.default_code), "lockout_minutes": minutes}  # type: ignore[dict-item]


class FailedTokenThrottle(BaseThrottle):
    """Unknown tokens counted per address and per key prefix (one key guessed from many addresses); a full
    window locks them out. Asked only after the lookup failed, so a valid token is never refused."""

    scope = "failed_token"

    def __init__(self) -> None:
        self.window = ratelimit.Window.parse(settings.E31_API_THROTTLE_RATES[self.scope])  # checked at start-up
        self.minutes: int = settings.E31_API_FAILED_TOKEN_LOCKOUT_MIN
        self.lockout = ratelimit.Window(1, self.minutes * 60)  # one event: the lockout, while it lasts

    def _keys(self, request: Request, key: str) -> list[str]:
        # The prefix hashed, so the keys in Redis hold nothing of a key that may be someone's real one.
        prefix = digest(key[:PREFIX_CHARS])[:16]
        return [f"{self.scope}:address:{self.get_ident(request)}", f"{self.scope}:prefix:{prefix}"]

    def locked_for(self, request: Request, key: str) -> float:
        if self.window is None:
            return 0.0
        return max(ratelimit.wait(f"{name}:lockout", self.lockout) for name in self._keys(request, key))

    def record_failure(self, request: Request, key: str) -> None:
        if self.window is None:
            return
        for name in self._keys(request, key):
            if ratelimit.add(name, self.window):
                ratelimit.add(f"{name}:lockout", self.lockout)


class HashedTokenAuthentication(TokenAuthentication):
    def authenticate(self, request: Request) -> tuple[User, None] | None:
        try:
            return super().authenticate(request)
        except UnknownToken as exc:
            throttle = FailedTokenThrottle()
            wait = throttle.locked_for(request, exc.key)
            if wait:
                raise LockedOut(wait, throttle.minutes) from None
            throttle.record_failure(request, exc.key)
            raise

    def authenticate_credentials(self, key: str) -> tuple[User, None]:
        user = user_for_key(key)
        if user is None:
            raise UnknownToken(key)
        if not user.is_active:
            raise AuthenticationFailed("User inactive or deleted.")
        return user, None


class BearerTokenAuthentication(HashedTokenAuthentication):
    """The same key as `Authorization: Bearer <key>`, what clients generated from the document send by default."""

    keyword = "Bearer"


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = BearerTokenAuthentication
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "An API token, the same as `Token <key>`."}
