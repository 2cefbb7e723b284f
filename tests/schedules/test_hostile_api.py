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


@pytest.mark.parametrize(
    ("line", "refused"), [("R * * * *", "'R' in the minute field"), ("0 0 1 * * *", "sixth field"),
                          ("0 1 * * 5#3", "'5#3' in the day-of-week field")],
)  # fmt: skip
def test_croniters_extensions_are_a_400_naming_what_was_refused(api, member, team, line, refused):
    made = api.post(URL, {"name": "n", "cron": line, "job": JOB}, format="json")
    schedule = schedule_of(member, team)
    changed = api.patch(f"{URL}{schedule.pk}/", {"cron": line}, format="json")

    assert (made.status_code, changed.status_code) == (400, 400)
    assert refused in made.json()["cron"][0] and refused in changed.json()["cron"][0]
    assert Schedule.objects.get().cron == "0 1 * * *"


def test_reboot_is_a_400_naming_it_and_yearly_is_taken(api, member, team):
    refused = api.post(URL, {"name": "n", "cron": "@reboot", "job": JOB}, format="json")
    made = api.post(URL, {"name": "y", "cron": "@yearly", "job": JOB, "time_zone": "UTC"}, format="json")

    assert refused.status_code == 400
    assert refused.json()["cron"][0].startswith("'@reboot' is refused: it runs when a machine starts")
    assert made.status_code == 201, made.json()
    assert made.json()["description"] == "At 00:00, on day 1 of the month, only in January"
    assert made.json()["next_runs"][0].endswith("-01-01T00:00:00+00:00")


def test_a_line_saved_before_the_checks_is_shown_and_cannot_be_resumed_until_replaced(api, client, member, team):
    schedule = schedule_of(member, team, paused=True)
    Schedule.objects.filter(pk=schedule.pk).update(cron="R * * * *")
    client.force_login(member)

    shown = api.get(f"{URL}{schedule.pk}/").json()
    page = client.get("/schedules/").content.decode()
    resumed = api.patch(f"{URL}{schedule.pk}/", {"paused": False}, format="json")
    on_the_page = client.post(f"/schedules/{schedule.pk}/resume/", follow=True).content.decode()

    assert shown["description"].startswith("Not taken: 'R * * * *' is not standard cron") and shown["next_runs"] == []
    assert "Not taken: &#x27;R * * * *&#x27; is not standard cron" in page
    assert resumed.status_code == 400 and "Give the schedule a standard line" in resumed.json()["cron"][0]
    assert "Not resumed: &#x27;R * * * *&#x27; is not standard cron" in on_the_page
    assert Schedule.objects.get().paused
    fixed = api.patch(f"{URL}{schedule.pk}/", {"paused": False, "cron": "@daily"}, format="json")
    assert fixed.status_code == 200 and fixed.json()["paused"] is False


@pytest.mark.parametrize(
    ("fields", "field"),
    [({"indices": "0-3", "max_running": 10**20}, "job.max_running"),
     ({"indices": "0-3", "stop_after_failures": 10**30}, "job.stop_after_failures"),
     ({"indices": "0-3", "max_running": 9223372036854775808}, "job.max_running")],
)  # fmt: skip
def test_an_overflowing_integer_in_the_job_is_a_400_naming_the_field_not_a_failing_run(api, fields, field):
    made = api.post(URL, {"name": "n", "cron": "@daily", "job": JOB | fields}, format="json")

    assert made.status_code == 400, made.json()
    assert field in made.json()
    assert not Schedule.objects.exists()
