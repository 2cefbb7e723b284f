"""Which teams a person may see: the one place every team-scoped query starts from."""

import zoneinfo
from collections.abc import Mapping
from datetime import tzinfo
from typing import TypeAlias

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from rest_framework.request import Request

from teams.models import Team

AnyUser: TypeAlias = User | AnonymousUser

SESSION_ZONE = "zone"


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


def zone_of(user: AnyUser) -> tzinfo:
    """The zone a person reads and types moments in on the pages: their first team's (by slug), else the site's."""
    team = teams_of(user).order_by("slug").first()
    return team.zone if team is not None else timezone.get_default_timezone()


def remember_zone(request: HttpRequest, user: AnyUser) -> tzinfo:
    """Keep the person's zone in their session at sign-in, so no page pays a query for it; a team's new zone
    shows from its members' next sign-in."""
    zone = zone_of(user)
    request.session[SESSION_ZONE] = str(zone)
    return zone


def page_zone(request: HttpRequest) -> tzinfo:
    """The zone the pages show and read moments in: the one kept at sign-in (found again for an older session)."""
    name = request.session.get(SESSION_ZONE)
    if name is None:
        return remember_zone(request, request.user)
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return remember_zone(request, request.user)


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
