"""Which teams a person may see: the one place every team-scoped query starts from."""

from typing import TypeAlias

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet
from django.http import HttpRequest
from rest_framework.request import Request

from teams.models import Team

# Whoever a request is from: a person of the site's user model (auth.User), or nobody signed in.
AnyUser: TypeAlias = User | AnonymousUser


class SignedInRequest(HttpRequest):
    """A request only a person reaches (a login_required view, an admin action). For annotations only:
    it tells the type checker that request.user is no AnonymousUser; no request is made of this class."""

    user: User


class SignedInAPIRequest(Request):
    """An API request past IsAuthenticated (or a stricter permission); for annotations, as SignedInRequest."""

    user: User


def teams_of(user: AnyUser) -> QuerySet[Team]:
    if not user.is_authenticated:
        return Team.objects.none()
    return Team.objects.filter(membership__user=user)


def is_operator(user: AnyUser) -> bool:
    return bool(user.is_authenticated and user.is_staff)
