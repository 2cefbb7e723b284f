"""The schedules API against a careless or hostile caller: every value it cannot keep is a 400 naming the
field, never a 500."""

import pytest

from schedules.models import Schedule
from tests.factories import RuntimeImageFactory, schedule_of
from tests.schedules.test_api import JOB, URL


@pytest.fixture(autouse=True)
def _image(db):
    RuntimeImageFactory(name="busybox")


@pytest.mark.parametrize("deadline", [2**31, 10**12])
def test_a_starting_deadline_beyond_a_year_is_a_400_not_a_500(api, member, team, deadline):
    made = api.post(URL, {"name": "n", "cron": "@daily", "job": JOB, "starting_deadline_s": deadline}, format="json")
    schedule = schedule_of(member, team)
    changed = api.patch(f"{URL}{schedule.pk}/", {"starting_deadline_s": deadline}, format="json")

    assert (made.status_code, changed.status_code) == (400, 400)
    assert "less than or equal to 31622400" in made.json()["starting_deadline_s"][0]
    assert Schedule.objects.get().starting_deadline_s is None


def test_a_starting_deadline_of_a_year_is_taken(api):
    made = api.post(URL, {"name": "n", "cron": "@daily", "job": JOB, "starting_deadline_s": 31_622_400}, format="json")

    assert made.status_code == 201, made.json()
    assert made.json()["starting_deadline_s"] == 31_622_400
