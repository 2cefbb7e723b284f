"""Which teams a person may see: the one place every team-scoped query starts from."""

import logging
import uuid
import zoneinfo
from collections.abc import Mapping
from datetime import tzinfo
from typing import TypeAlias

from django.contrib.auth.models import AnonymousUser, User
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from redis.exceptions import RedisError
from rest_framework.request import Request

from teams.models import Team

log = logging.getLogger(__name__)

AnyUser: TypeAlias = User | AnonymousUser

SESSION_ZONE = "zone"
SESSION_ZONES_VERSION = "zones_version"  # the version of the zones (ZONES_VERSION) the kept zone was found under
ZONES_VERSION = "teams:zones-version"  # the cache's key


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
    """Their first team's (by slug), else the site's."""
    team = teams_of(user).order_by("slug").first()
    return team.zone if team is not None else timezone.get_default_timezone()


def zones_version() -> str | None:
    """One word in the cache, made anew when a zone changes; None when the cache is away: pages keep their zone."""
    try:
        return cache.get_or_set(ZONES_VERSION, lambda: uuid.uuid4().hex, timeout=None)
    except RedisError as error:
        log.warning("the zones' version is not readable (%s): pages keep the zone of their session", error)
        return None


def zones_changed() -> None:
    """A team's zone or members change: after the commit, so no page finds the old zone under the new version."""
    transaction.on_commit(lambda: cache.delete(ZONES_VERSION), robust=True)


def remember_zone(request: HttpRequest, user: AnyUser) -> tzinfo:
    """The zone kept in the session, so a page pays a cache read, not a query. The version is read first: a change
    committed meanwhile is found again on the next page."""
    version = zones_version()
    zone = zone_of(user)
    request.session[SESSION_ZONE] = str(zone)
    request.session[SESSION_ZONES_VERSION] = version
    return zone


def page_zone(request: HttpRequest) -> tzinfo:
    """The zone kept in the session, found again when the zones changed since, or for an older session."""
    name = request.session.get(SESSION_ZONE)
    version = zones_version()
    if name is None or (version is not None and request.session.get(SESSION_ZONES_VERSION) != version):
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
    """Of the person's `teams` by slug: the one named, or their only team; else a ValidationError."""

    if slug:
        if slug not in teams:
            raise ValidationError(f"You are not a member of team {slug!r}.")
        return teams[slug]
    if len(teams) == 1:
        return next(iter(teams.values()))
    raise ValidationError(several if teams else none)


def is_operator(user: AnyUser) -> bool:
    return bool(user.is_authenticated and user.is_staff)
