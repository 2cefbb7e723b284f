"""Which teams a person may see: the one place every team-scoped query starts from."""

from typing import TypeAlias

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet
from django.http import HttpRequest
from rest_framework.request import Request

from teams.models import Team

AnyUser: TypeAlias = User | AnonymousUser


class SignedInRequest(HttpRequest):
    """A request only a person reaches, for annotations only: request.user is no AnonymousUser."""

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
