"""Which teams a person may see: the one place every team-scoped query starts from."""

from django.db.models import QuerySet

from teams.models import Team


def teams_of(user) -> QuerySet[Team]:
    if not user.is_authenticated:
        return Team.objects.none()
    return Team.objects.filter(membership__user=user)


def is_operator(user) -> bool:
    return bool(user.is_authenticated and user.is_staff)
