"""Who may see which schedule: its team's members; anyone else gets 404."""

from django.db.models import QuerySet
from django.http import Http404

from schedules.models import Schedule
from teams.access import AnyUser, teams_of


def visible_schedules(user: AnyUser) -> QuerySet[Schedule]:
    return Schedule.objects.filter(team__in=teams_of(user))


def schedule_for(user: AnyUser, schedule_id: int | str) -> Schedule:
    try:
        return (
            visible_schedules(user).select_related("team", "template", "created_by", "runner").get(pk=int(schedule_id))
        )
    except (Schedule.DoesNotExist, ValueError):
        raise Http404("No such schedule.") from None
