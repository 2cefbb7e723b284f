"""The schedules API: declare, read, change, pause, delete a schedule, and read its runs."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.utils import timezone

from accounting.models import Budget, BudgetUnit
from jobs.models import JobArray, Outcome, RuntimeImage
from jobtemplates.models import JobTemplate
from schedules.models import RunStatus, Schedule, ScheduleEvent, ScheduleRun
from tests.conftest import api_client_for
from tests.factories import RuntimeImageFactory, array_tasks, ended_job, schedule_of

JOB = {"name": "nightly", "image": "busybox", "command": ["sh", "-c", "echo hi"], "cpus": 1, "memory_mb": 64,
       "time_limit_s": 60}  # fmt: skip
URL = "/api/v1/schedules/"
FIELDS = {
    "id", "name", "team", "cron", "description", "time_zone", "template", "job", "concurrency",
    "starting_deadline_s", "paused", "next_runs", "last_run", "forecast", "created_by", "runner", "created_at",
    "changed_at",
}  # fmt: skip


@pytest.fixture(autouse=True)
def _image(db):
    RuntimeImageFactory(name="busybox")


def template_of(team, **fields) -> JobTemplate:
    image = RuntimeImage.objects.get(name="busybox")
    values = {"name": "report", "image": image, "command": "echo {who}", "defaults": {"who": "world"}} | fields
    return JobTemplate.objects.create(team=team, **values)


@time_machine.travel(datetime(2026, 3, 2, 12, 0, tzinfo=UTC), tick=False)
def test_create_answers_201_with_the_sentence_and_five_next_runs_in_its_zone(api, member, team):
    answer = api.post(URL, {"name": "nightly", "cron": "0 1 * * *", "job": JOB, "time_zone": "Europe/Berlin"},
                      format="json")  # fmt: skip

    assert answer.status_code == 201, answer.json()
    body = answer.json()
    assert set(body) == FIELDS
    assert body["description"] == "At 01:00 every day"
    assert body["next_runs"] == [f"2026-03-{day:02d}T01:00:00+01:00" for day in range(3, 8)]
    assert (body["team"], body["created_by"], body["concurrency"], body["paused"]) == ("red", "alice", "allow", False)
    assert (body["job"], body["template"], body["last_run"]) == (JOB, None, None)
    schedule = Schedule.objects.get(pk=body["id"])
    assert schedule.next_run_at == datetime(2026, 3, 3, 0, 0, tzinfo=UTC)
    assert ScheduleEvent.objects.get(schedule=schedule).action == "created"


def test_time_zone_defaults_to_the_teams(api, team):
    team.time_zone = "America/New_York"
    team.save()

    answer = api.post(URL, {"name": "n", "cron": "@nightly", "job": JOB}, format="json")

    assert answer.status_code == 201
    assert answer.json()["time_zone"] == "America/New_York"
    assert answer.json()["next_runs"][0].endswith(("-05:00", "-04:00"))


def test_create_from_a_template_of_the_team(api, team):
    template = template_of(team)

    answer = api.post(URL, {"name": "report", "cron": "@daily", "template": template.pk}, format="json")

    assert answer.status_code == 201, answer.json()
    assert (answer.json()["template"], answer.json()["job"]) == (template.pk, None)


@pytest.mark.parametrize("what", [{}, {"job": JOB, "template": "T"}])
def test_exactly_one_of_template_and_job(api, team, what):
    if what:
        what["template"] = template_of(team).pk

    answer = api.post(URL, {"name": "n", "cron": "@daily", **what}, format="json")

    assert answer.status_code == 400
    assert "exactly one of template and job" in answer.json()["non_field_errors"][0]


def test_a_bad_cron_line_is_a_400_saying_why(api):
    answer = api.post(URL, {"name": "n", "cron": "0 1 * *", "job": JOB}, format="json")

    assert answer.status_code == 400
    assert "five fields" in answer.json()["cron"][0]


def test_an_unknown_time_zone_is_a_400(api):
    answer = api.post(URL, {"name": "n", "cron": "@daily", "job": JOB, "time_zone": "Mars/Olympus"}, format="json")

    assert answer.status_code == 400
    assert "IANA" in answer.json()["time_zone"][0]


def test_a_declaration_the_job_form_refuses_is_a_400_by_field(api):
    answer = api.post(URL, {"name": "n", "cron": "@daily", "job": JOB | {"image": "nope"}}, format="json")

    assert answer.status_code == 400
    assert any(key.startswith("job") for key in answer.json()), answer.json()
    assert not Schedule.objects.exists()


def test_a_name_with_a_control_character_is_refused(api):
    answer = api.post(URL, {"name": "a\x1b[2Jb", "cron": "@daily", "job": JOB}, format="json")

    assert answer.status_code == 400
    assert "U+001B" in answer.json()["name"][0]


def test_another_teams_template_is_refused_at_its_field_without_saying_it_exists(api, other_team):
    theirs = api.post(URL, {"name": "n", "cron": "@daily", "template": template_of(other_team).pk}, format="json")
    none = api.post(URL, {"name": "n", "cron": "@daily", "template": 999999}, format="json")

    assert theirs.status_code == none.status_code == 400
    assert theirs.json() == none.json() == {"template": ["No template you can see has this id."]}


def test_a_member_of_several_teams_names_the_team(api, member, other_team):
    other_team.membership_set.create(user=member)

    unnamed = api.post(URL, {"name": "n", "cron": "@daily", "job": JOB}, format="json")
    assert unnamed.status_code == 400
    assert unnamed.json() == {"team": ["Choose a team: you are a member of several."]}
    answer = api.post(URL, {"name": "n", "cron": "@daily", "job": JOB, "team": "blue"}, format="json")
    assert answer.status_code == 201
    assert answer.json()["team"] == "blue"


def test_another_teams_schedule_answers_404_to_every_operation(outsider_api, member, team):
    schedule = schedule_of(member, team)
    one = f"{URL}{schedule.pk}/"

    assert outsider_api.get(one).status_code == 404
    assert outsider_api.patch(one, {"paused": True}, format="json").status_code == 404
    assert outsider_api.delete(one).status_code == 404
    assert outsider_api.get(f"{one}runs/").status_code == 404
    assert outsider_api.get(URL).json()["count"] == 0
    assert Schedule.objects.filter(pk=schedule.pk, paused=False).exists()


def test_no_token_is_401_and_put_is_not_allowed(client, api, member, team):
    schedule = schedule_of(member, team)

    assert client.get(URL).status_code == 401
    assert api.put(f"{URL}{schedule.pk}/", {"name": "x"}, format="json").status_code == 405


def test_list_is_paged_without_a_query_per_schedule(api, member, team, local_node, django_assert_max_num_queries):
    for number in range(8):
        made = schedule_of(member, team, name=f"s{number}")
        ScheduleRun.objects.create(
            schedule=made, planned_at=timezone.now(), status=RunStatus.SUBMITTED,
            job=ended_job(member, team, outcome=Outcome.FAILED, at=timezone.now()), recorded_at=timezone.now(),
        )  # fmt: skip

    with django_assert_max_num_queries(20):
        answer = api.get(URL)

    assert answer.status_code == 200
    body = answer.json()
    assert body["count"] == 8
    assert [s["name"] for s in body["results"]] == [f"s{n}" for n in range(8)]
    assert body["results"][0]["last_run"]["outcome"] == "failed"


def test_patch_a_cron_line_replans_and_keeps_the_change_as_an_event(api, member, teammate, team):
    schedule = schedule_of(member, team)

    answer = api_client_for(teammate).patch(f"{URL}{schedule.pk}/", {"cron": "30 2 * * *"}, format="json")

    assert answer.status_code == 200, answer.json()
    assert answer.json()["description"] == "At 02:30 every day"
    schedule.refresh_from_db()
    assert (schedule.next_run_at.hour, schedule.next_run_at.minute) == (2, 30)
    event = ScheduleEvent.objects.get(schedule=schedule, action="changed")
    assert (event.actor, event.changes) == (teammate, {"cron": ["0 1 * * *", "30 2 * * *"]})


def test_patch_template_replaces_the_job(api, member, team):
    schedule = schedule_of(member, team)
    template = template_of(team)

    answer = api.patch(f"{URL}{schedule.pk}/", {"template": template.pk}, format="json")

    assert answer.status_code == 200, answer.json()
    assert (answer.json()["template"], answer.json()["job"]) == (template.pk, None)


def test_patch_paused_pauses_and_resumes(api, member, team):
    schedule = schedule_of(member, team)

    assert api.patch(f"{URL}{schedule.pk}/", {"paused": True}, format="json").json()["paused"] is True
    assert api.patch(f"{URL}{schedule.pk}/", {"paused": False}, format="json").json()["paused"] is False

    actions = list(
        ScheduleEvent.objects.filter(schedule=schedule).order_by("at", "pk").values_list("action", flat=True)
    )
    assert actions == ["paused", "resumed"]


def test_patch_a_bad_value_changes_nothing(api, member, team):
    schedule = schedule_of(member, team)

    answer = api.patch(f"{URL}{schedule.pk}/", {"cron": "@reboot", "name": "x"}, format="json")

    assert answer.status_code == 400
    schedule.refresh_from_db()
    assert (schedule.cron, schedule.name) == ("0 1 * * *", "nightly")


def test_delete_answers_204_and_keeps_the_event_by_name(api, member, team):
    schedule = schedule_of(member, team, name="gone")

    assert api.delete(f"{URL}{schedule.pk}/").status_code == 204

    assert not Schedule.objects.exists()
    event = ScheduleEvent.objects.get(action="deleted")
    assert (event.schedule_name, event.actor, event.team) == ("gone", member, team)


def test_runs_newest_first_with_job_or_array_status_and_reason(api, member, team, local_node):
    schedule = schedule_of(member, team)
    at = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=at)
    array = JobArray.objects.create(team=team, submitted_by=member, name="a", size=0, submitted_at=at)
    array_tasks(array, RuntimeImage.objects.get(), [("release", "succeeded"), ("release", "failed")])
    JobArray.objects.filter(pk=array.pk).update(released_at=at)
    rows = [
        (at, RunStatus.SUBMITTED, {"job": job}, ""),
        (at + timedelta(days=1), RunStatus.SUBMITTED, {"array": array}, ""),
        (at + timedelta(days=2), RunStatus.REFUSED, {}, "Over budget: …"),
        (at + timedelta(days=3), RunStatus.MISSED, {}, "later than 60 s"),
    ]
    for planned, status, made, reason in rows:
        ScheduleRun.objects.create(schedule=schedule, planned_at=planned, status=status, reason=reason,
                                   recorded_at=planned, **made)  # fmt: skip

    body = api.get(f"{URL}{schedule.pk}/runs/").json()

    assert body["count"] == 4
    runs = body["results"]
    assert [r["status"] for r in runs] == ["missed", "refused", "submitted", "submitted"]
    assert set(runs[0]) == {"planned_at", "status", "job", "array", "reason", "outcome"}
    assert (runs[0]["reason"], runs[0]["job"]) == ("later than 60 s", None)
    assert (runs[2]["job"], runs[2]["array"], runs[2]["outcome"]) == (str(array.pk), str(array.pk), "failed")
    assert (runs[3]["job"], runs[3]["array"], runs[3]["outcome"]) == (str(job.pk), None, "succeeded")


def test_an_unknown_id_is_404(api):
    assert api.get(f"{URL}999999/").status_code == 404


def test_a_teammate_sees_it_too(member, teammate, team):
    schedule = schedule_of(member, team)

    response = api_client_for(teammate).get(f"{URL}{schedule.pk}/")

    body = response.json()
    assert response.status_code == 200
    assert (body["id"], body["name"], body["cron"]) == (schedule.pk, "nightly", "0 1 * * *")


def test_the_forecast_sits_beside_the_teams_budget(api, member, team):
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("50.00"))

    body = api.post(URL, {"name": "n", "cron": "@hourly", "job": JOB}, format="json").json()

    forecast = body["forecast"]
    assert forecast["unit"] == "money" and forecast["runs_left"] > 0
    assert Decimal(forecast["total"]) == Decimal(forecast["per_run"]) * forecast["runs_left"]
    assert forecast["budget"]["limit"] == "50.00" and forecast["budget"]["spent"] == "0"


def test_a_paused_schedule_forecasts_nothing(api):
    body = api.post(URL, {"name": "n", "cron": "@hourly", "job": JOB, "paused": True}, format="json").json()

    assert body["paused"] is True and body["forecast"]["runs_left"] == 0
    assert ScheduleEvent.objects.get().action == "created"
