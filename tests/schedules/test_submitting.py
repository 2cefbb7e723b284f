"""A schedule's run is declared by the API's own forms, as its creator: what they would accept is submitted,
and what they would refuse is refused with their reason (or the budget's, or why the template or member is gone)."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from accounting.models import Budget, BudgetUnit
from jobs.models import Job, JobArray, RuntimeImage
from jobtemplates.models import JobTemplate
from schedules.submitting import Refused, problems, submit_run
from teams.models import Membership
from tests.factories import RuntimeImageFactory, schedule_of

AT = datetime(2026, 3, 2, 1, 0, tzinfo=UTC)
JOB = {"name": "nightly", "image": "busybox", "command": ["sh", "-c", "echo hi"], "cpus": 1, "memory_mb": 64,
       "time_limit_s": 60}  # fmt: skip


@pytest.fixture(autouse=True)
def _image(db):
    RuntimeImageFactory(name="busybox")


def template_of(team, **fields) -> JobTemplate:
    image = RuntimeImage.objects.get(name="busybox")
    values = {"name": "report", "image": image, "command": "echo {who}", "defaults": {"who": "world"}} | fields
    return JobTemplate.objects.create(team=team, **values)


def test_a_job_declaration_is_submitted_as_declared_by_its_creator(member, team):
    schedule = schedule_of(member, team, job=JOB | {"env": {"A": "1"}, "cpus": 1})

    job = submit_run(schedule, planned_at=AT)

    assert isinstance(job, Job)
    job.refresh_from_db()
    assert (job.name, job.command, job.env, job.memory_mb, job.time_limit_s) == (
        "nightly", ["sh", "-c", "echo hi"], {"A": "1"}, 64, 60,
    )  # fmt: skip
    assert (job.team, job.submitted_by, job.image.name) == (team, member, "busybox")


def test_a_declaration_with_indices_submits_an_array(member, team):
    schedule = schedule_of(member, team, job=JOB | {"indices": "0-2", "max_running": 2})

    array = submit_run(schedule, planned_at=AT)

    assert isinstance(array, JobArray)
    assert (array.size, array.max_running, array.team, array.submitted_by) == (3, 2, team, member)
    assert sorted(Job.objects.filter(array=array).values_list("array_index", flat=True)) == [0, 1, 2]


def test_a_template_runs_with_its_own_values_and_default_parameters(member, team):
    schedule = schedule_of(member, team, template=template_of(team, memory_mb=128))

    job = submit_run(schedule, planned_at=AT)

    assert isinstance(job, Job)
    assert (job.name, job.command, job.memory_mb, job.team) == ("report", ["echo", "world"], 128, team)


def test_an_operators_template_runs_for_the_schedules_team(member, team, other_team):
    Membership.objects.create(team=other_team, user=member)  # so the form would need to be told which team
    schedule = schedule_of(member, team, template=template_of(None))

    assert submit_run(schedule, planned_at=AT).team == team


def test_a_template_with_presets_of_indices_submits_an_array(member, team):
    schedule = schedule_of(member, team, template=template_of(team, array_indices="1,3"))

    array = submit_run(schedule, planned_at=AT)

    assert isinstance(array, JobArray) and array.size == 2


def test_problems_of_a_valid_declaration_are_none_and_nothing_is_submitted(member, team):
    assert problems(team=team, user=member, template=None, job=JOB) == {}
    assert problems(team=team, user=member, template=template_of(team), job=None) == {}
    assert not Job.objects.exists()


def test_problems_are_the_forms_errors_by_field(member, team):
    found = problems(team=team, user=member, template=None, job=JOB | {"cpus": 0, "time_limit_s": "soon"})

    assert set(found) == {"job.cpus", "job.time_limit_s"}
    assert "greater than or equal to 1" in found["job.cpus"][0]


def test_a_command_and_a_script_both_given_is_an_error_of_the_job(member, team):
    found = problems(team=team, user=member, template=None, job=JOB | {"script": "echo hi"})

    assert found == {"job.script": ["Give a command or a script, not both: empty one of them."]}


@pytest.mark.parametrize(
    ("extra", "field", "words"),
    [
        ({"data": "x"}, "job.data", "sends no files"),
        ({"colour": "red"}, "job.colour", "Not a field of a job."),
        ({"team": "blue"}, "job.team", "runs its jobs for that team"),
    ],
)
def test_fields_a_schedule_cannot_send_are_refused(member, team, extra, field, words):
    found = problems(team=team, user=member, template=None, job=JOB | extra)

    assert list(found) == [field] and words in found[field][0]


def test_neither_or_both_of_template_and_job_is_an_error(member, team):
    assert list(problems(team=team, user=member, template=None, job=None)) == ["template"]
    assert list(problems(team=team, user=member, template=template_of(team), job=JOB)) == ["template"]
    assert list(problems(team=team, user=member, template=None, job=["echo"])) == ["job"]  # type: ignore[arg-type]


def test_a_template_whose_parameter_has_no_default_is_refused(member, team):
    found = problems(team=team, user=member, template=template_of(team, defaults={}), job=None)

    assert found == {
        "template": ["The template's parameters who have no default: a schedule runs it with its defaults."]
    }


def test_another_teams_template_is_refused(member, team, other_team):
    assert (
        "not one of the team red's"
        in problems(team=team, user=member, template=template_of(other_team), job=None)["template"][0]
    )


def test_a_run_over_the_budget_is_refused_with_the_budgets_words(member, team, settings):
    settings.E31_RATE_CORE_HOUR = Decimal("1")
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("0.01"))
    schedule = schedule_of(member, team, job=JOB | {"time_limit_s": 3600})

    with pytest.raises(Refused, match="^Over budget: team red's budget"):
        submit_run(schedule, planned_at=AT)
    assert not Job.objects.exists()


def test_a_run_whose_creator_left_the_team_is_refused(member, team):
    schedule = schedule_of(member, team)
    Membership.objects.filter(user=member, team=team).delete()

    with pytest.raises(Refused, match="Its runner alice is no longer a member of the team red."):
        submit_run(schedule, planned_at=AT)


def test_a_template_run_whose_creator_left_the_team_is_refused(member, team):
    schedule = schedule_of(member, team, template=template_of(None))
    Membership.objects.filter(user=member, team=team).delete()

    with pytest.raises(Refused, match="no longer a member"):
        submit_run(schedule, planned_at=AT)


def test_a_run_whose_template_was_deleted_is_refused(member, team):
    template = template_of(team)
    schedule = schedule_of(member, team, template=template)
    template.delete()
    schedule.refresh_from_db()

    with pytest.raises(Refused, match="Its template was deleted"):
        submit_run(schedule, planned_at=AT)


def test_a_run_whose_image_is_gone_is_refused_naming_it(member, team):
    schedule = schedule_of(member, team, job=JOB | {"image": "old"})
    RuntimeImageFactory(name="other")

    with pytest.raises(Refused, match=r"^job.image: The image old is not registered \(any more\).$"):
        submit_run(schedule, planned_at=AT)


def test_a_run_whose_creator_is_disabled_is_refused(member, team):
    schedule = schedule_of(member, team)
    member.is_active = False
    member.save()

    with pytest.raises(Refused, match="account is disabled"):
        submit_run(schedule, planned_at=AT)
