"""A schedule's numbers past what their columns keep: a 400 naming the field, on POST and PATCH, never a 500."""

import pytest

from schedules.models import Schedule
from tests.factories import RuntimeImageFactory, schedule_of
from tests.schedules.test_api import JOB, URL

BIGINT_MAX = 9_223_372_036_854_775_807


@pytest.fixture(autouse=True)
def _image(db):
    RuntimeImageFactory(name="busybox")


@pytest.fixture
def no_500(api):
    api.raise_request_exception = False
    return api


@pytest.mark.parametrize("template", [2**63, 10**30])
def test_a_template_id_past_a_bigint_is_a_400_naming_it(no_500, member, team, template):
    made = no_500.post(URL, {"name": "n", "cron": "@daily", "template": template}, format="json")
    schedule = schedule_of(member, team)
    changed = no_500.patch(f"{URL}{schedule.pk}/", {"template": template}, format="json")

    said = [f"Ensure this value is less than or equal to {BIGINT_MAX}."]
    assert (made.status_code, made.json()) == (400, {"template": said})
    assert (changed.status_code, changed.json()) == (400, {"template": said})
    assert Schedule.objects.get().template is None


def test_a_template_id_under_one_is_a_400_naming_it(no_500):
    made = no_500.post(URL, {"name": "n", "cron": "@daily", "template": 0}, format="json")

    assert (made.status_code, made.json()) == (400, {"template": ["Ensure this value is greater than or equal to 1."]})


@pytest.mark.parametrize("deadline", [2**63, -(2**63) - 1])
def test_a_starting_deadline_past_a_bigint_either_way_is_a_400_naming_it(no_500, deadline):
    made = no_500.post(URL, {"name": "n", "cron": "@daily", "job": JOB, "starting_deadline_s": deadline}, format="json")

    assert made.status_code == 400 and list(made.json()) == ["starting_deadline_s"]
    assert not Schedule.objects.exists()
