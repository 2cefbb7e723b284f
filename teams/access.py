"""Which teams a person may see: the one place every team-scoped query starts from."""

from collections.abc import Mapping
from typing import TypeAlias

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ValidationError
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


def chosen_team(
    teams: Mapping[str, Team],
    slug: str | None,
    *,
    none: str = "You are not a member of any team.",
    several: str = "Choose a team: you are a member of several.",
) -> Team:
    """The team a request is for, of the person's `teams` by slug: the one it names, or their only team; a
    ValidationError (worded by the caller's `none` and `several`) when that is not one of them."""
    if slug:
        if slug not in teams:
            raise ValidationError(f"You are not a member of team {slug!r}.")
        return teams[slug]
    if len(teams) == 1:
        return next(iter(teams.values()))
    raise ValidationError(several if teams else none)


def is_operator(user: AnyUser) -> bool:
    return bool(user.is_authenticated and user.is_staff)
