"""Who may see a team's accounting: its members, and operators (every team). Others get 404."""

from django.http import Http404

from teams.access import AnyUser, is_operator, teams_of
from teams.models import Team


def team_for(user: AnyUser, slug: str) -> Team:
    teams = Team.objects.all() if is_operator(user) else teams_of(user)
    team = teams.filter(slug=slug).first()
    if team is None:
        raise Http404("No such team.")
    return team
