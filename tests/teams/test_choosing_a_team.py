"""teams.access.chosen_team: the team a request is for, the one rule of the job form, the schedules API and
the webhooks form and API, each keeping its own words."""

import pytest
from django.core.exceptions import ValidationError

from teams.access import chosen_team
from teams.models import Team

RED, BLUE = Team(slug="red", name="Red team"), Team(slug="blue", name="Blue team")


def refusal(teams: dict[str, Team], slug: str | None, **words: str) -> list[str]:
    with pytest.raises(ValidationError) as refused:
        chosen_team(teams, slug, **words)
    return refused.value.messages


def test_the_named_team_or_the_only_one():
    assert chosen_team({"red": RED, "blue": BLUE}, "blue") is BLUE
    assert chosen_team({"red": RED}, None) is RED
    assert chosen_team({"red": RED}, "") is RED


def test_a_team_not_ones_own_none_or_several_is_refused_in_words():
    assert refusal({"red": RED}, "blue") == ["You are not a member of team 'blue'."]
    assert refusal({}, None) == ["You are not a member of any team."]
    assert refusal({"red": RED, "blue": BLUE}, None) == ["Choose a team: you are a member of several."]


def test_the_caller_words_none_and_several_its_way():
    words = {"none": "You are not in any team.", "several": "Choose a team."}
    assert refusal({}, None, **words) == ["You are not in any team."]
    assert refusal({"red": RED, "blue": BLUE}, None, **words) == ["Choose a team."]
