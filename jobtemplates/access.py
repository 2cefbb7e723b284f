"""Who may see which template: the operators' (no team) are everyone's, a team's its members' only."""

from django.db.models import Q, QuerySet
from django.http import Http404

from jobtemplates.models import JobTemplate
from teams.access import AnyUser, teams_of


def visible_templates(user: AnyUser) -> QuerySet[JobTemplate]:
    if not user.is_authenticated:
        return JobTemplate.objects.none()
    return JobTemplate.objects.filter(Q(team__isnull=True) | Q(team__in=teams_of(user)))


def template_for(user: AnyUser, template_id: int) -> JobTemplate:
    try:
        return visible_templates(user).select_related("image", "team").get(pk=template_id)
    except JobTemplate.DoesNotExist:
        raise Http404("No such template.") from None
