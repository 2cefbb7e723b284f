"""/templates/: operators define templates (everyone sees them), a team's templates are its members' only
(another team's is 404); a member fills in the parameters and, within the bounds, the request, and the job
is submitted through the one submission path (jobs.submit.forms.JobForm); anyone saves a job of theirs as a team
template."""

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.utils.html import escape
from hypothesis import given
from hypothesis import strategies as st

from accounting.models import Budget, BudgetUnit
from core.when import BAD_DURATION
from jobs.models import Job, RuntimeImage
from jobtemplates.models import JobTemplate
from tests.factories import RuntimeImageFactory, submit_job
from tests.jobs.test_hostile_fields import PROPERTY, assert_no_500, hostile_text


@pytest.fixture
def image(db):
    return RuntimeImageFactory(name="python", reference="e31/python:3", description="Python 3")


@pytest.fixture
def pool(local_node):
    return local_node


@pytest.fixture
def retrain(image, operator):
    return JobTemplate.objects.create(
        name="retrain", image=image, command="python3 /data/train.py --epochs {epochs} --label {label}",
        defaults={"epochs": "5"}, env={"MODE": "fast"}, output_patterns=["model.json"],
        cpus=1, cpus_max=2, memory_mb=256, memory_mb_max=512, time_limit_s=600, time_limit_s_max=3600,
        created_by=operator,
    )  # fmt: skip


@pytest.fixture
def blue_template(image, other_team):
    return JobTemplate.objects.create(team=other_team, name="blue only", image=image, command="echo {x}")


@pytest.fixture
def me(client, member):
    client.force_login(member)
    return client


def run(me, template, **fields):
    data = {"name": "from the template", "cpus": 1, "memory_mb": 256, "gpus": 0, "time_limit_s": 600, **fields}
    return me.post(f"/templates/{template.pk}/", data)


def test_the_list_shows_the_operators_templates_and_my_teams_not_another_teams(me, retrain, blue_template):
    page = me.get("/templates/").content.decode()

    assert "retrain" in page and "{epochs}" in page
    assert "blue only" not in page


def test_another_teams_template_is_404(me, blue_template, pool):
    assert me.get(f"/templates/{blue_template.pk}/").status_code == 404
    assert run(me, blue_template, param_x="hi").status_code == 404
    assert not Job.objects.exists()


def test_the_form_asks_only_for_the_parameters_and_the_request(me, retrain):
    page = me.get(f"/templates/{retrain.pk}/").content.decode()

    assert 'name="param_epochs"' in page and ">\n5</textarea>" in page and 'name="param_label"' in page
    assert 'name="command"' not in page and 'name="image"' not in page
    assert 'name="cpus"' in page and 'max="2"' in page


def test_a_member_submits_a_job_from_a_template(me, member, team, retrain, pool):
    response = run(me, retrain, param_epochs="50", param_label="nightly run; rm -rf /")

    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    # Each value is one argument, whatever it contains: no shell word of it becomes another argument.
    assert job.command == ["python3", "/data/train.py", "--epochs", "50", "--label", "nightly run; rm -rf /"]
    assert (job.team, job.submitted_by, job.image.name) == (team, member, "python")
    assert (job.env, job.output_patterns, job.name) == ({"MODE": "fast"}, ["model.json"], "from the template")


HOSTILE_VALUES = [
    "$(id -u)",
    "`id`",
    'it\'s "quoted"',
    "a  b c",
    "line 1\nline 2",
    "; rm -rf /",
    "{label}",
    "--help",
    "",
]


@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_a_value_is_one_whole_argument_whatever_it_holds(me, image, pool, value):
    echo = JobTemplate.objects.create(
        name="echo", image=image, command="printf '[%s]\\n' {msg} --", defaults={"msg": ""}
    )

    response = run(me, echo, param_msg=value.replace("\n", "\r\n"))  # as a browser sends a textarea's lines

    assert response.status_code == 302, response.content.decode()
    assert Job.objects.get().command == ["printf", "[%s]\\n", value, "--"]


def test_a_shell_script_takes_a_value_as_a_positional_parameter(me, image, pool):
    hello = JobTemplate.objects.create(name="hello", image=image, command="""sh -c 'echo hello "$1"' sh {msg}""")

    run(me, hello, param_msg="$(id -u) 'x'")

    assert Job.objects.get().command == ["sh", "-c", 'echo hello "$1"', "sh", "$(id -u) 'x'"]


@pytest.mark.parametrize(
    "command", ["sh -c 'echo hello {msg}'", "python3 -c 'print(\"{msg}\")'", "train --label={msg}", "echo {msg}.txt"]
)
def test_a_parameter_inside_a_longer_argument_is_refused_where_the_template_is_defined(image, command):
    template = JobTemplate(name="t", image=image, command=command)

    with pytest.raises(ValidationError) as refused:
        template.full_clean()

    said = refused.value.message_dict["command"][0]
    assert "{msg} is inside the argument" in said and """sh -c 'echo hello "$1"' sh {msg}""" in said


def test_a_template_with_a_parameter_inside_a_script_cannot_run(me, image, pool):
    attack = JobTemplate.objects.create(name="hello", image=image, command="sh -c 'echo hello {msg}'")  # past clean

    response = run(me, attack, param_msg="$(id -u)")

    assert response.status_code == 400 and "This template cannot run: {msg} is inside the argument" in (
        response.content.decode().replace("&#x27;", "'")
    )
    assert not Job.objects.exists()


def test_doubled_braces_are_literal_braces(me, image, pool):
    braces = JobTemplate.objects.create(name="b", image=image, command="awk '{{print $1}}' {{x}} {x}")

    run(me, braces, param_x="v")

    assert braces.parameters == ["x"] and Job.objects.get().command == ["awk", "{print $1}", "{x}", "v"]


def test_the_default_fills_a_parameter_left_empty(me, retrain, pool):
    run(me, retrain, param_epochs="", param_label="x")

    assert Job.objects.get().command[3] == "5"


def test_a_request_over_the_templates_bounds_is_refused_with_the_field_named(me, retrain, pool):
    response = run(me, retrain, param_label="x", cpus=3, memory_mb=4096)

    assert response.status_code == 400
    page = response.content.decode()
    assert "less than or equal to 2" in page and "less than or equal to 512" in page
    assert ">\nx</textarea>" in page  # what was typed is kept
    assert not Job.objects.exists()


def test_a_time_limit_reads_with_units_as_the_job_forms_within_the_templates_bound(me, retrain, pool):
    assert run(me, retrain, param_label="x", time_limit_s="1h").status_code == 302
    assert Job.objects.get().time_limit_s == 3600

    over = run(me, retrain, param_label="x", time_limit_s="1h1s")
    unread = run(me, retrain, param_label="x", time_limit_s="soon")

    assert over.status_code == unread.status_code == 400 and Job.objects.count() == 1
    assert "less than or equal to 3600" in over.content.decode()
    assert escape(BAD_DURATION) in unread.content.decode()


def test_a_missing_parameter_is_refused(me, retrain, pool):
    response = run(me, retrain, param_epochs="5")

    assert response.status_code == 400 and b"This field is required" in response.content
    assert not Job.objects.exists()


def test_what_the_submission_path_refuses_is_shown_on_the_template_form(me, image, pool):
    huge = JobTemplate.objects.create(name="huge", image=image, command="true", cpus=1)

    response = run(me, huge, cpus=10_000 // 100)  # more cores than any node: JobForm says it can never be held

    assert response.status_code == 400 and b"can never be held" in response.content
    assert not Job.objects.exists()


def test_a_run_over_the_budget_is_refused_on_the_form_in_the_apis_words(me, team, retrain, pool, settings):
    settings.E31_HOLD_OVERHEAD_S = 0  # worst cases of whole hours, for readable figures
    Budget.objects.create(team=team, unit=BudgetUnit.CORE_HOURS, monthly=Decimal("1"))

    response = run(me, retrain, param_label="x", cpus=2, time_limit_s=3600)  # 2 core-hours at worst

    page = response.content.decode()
    assert response.status_code == 402 and "Over budget: team red" in page and "1.00 core-hours more" in page
    assert ">\nx</textarea>" in page  # what was typed is kept
    assert not Job.objects.exists()


def test_the_same_form_sent_twice_submits_once(me, retrain, pool):
    run(me, retrain, param_label="x", submission="a" * 32)
    run(me, retrain, param_label="x", submission="a" * 32)

    assert Job.objects.count() == 1


def test_a_member_saves_a_job_of_theirs_as_a_team_template(me, member, team, teammate, image):
    job = submit_job(member, team, image=image, name="my job", command=["python3", "-c", "print({x})"], cpus=2)
    assert f'action="/jobs/{job.pk}/save-template/"' in me.get(f"/jobs/{job.pk}/").content.decode()  # one click

    response = me.post(f"/jobs/{job.pk}/save-template/", {"name": "my template"})

    template = JobTemplate.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/templates/{template.pk}/"
    assert (template.team, template.name, template.cpus, template.created_by) == (team, "my template", 2, member)
    assert (template.parameters, template.defaults) == ([], {})  # the braces of the command are literal
    assert "Saved my job as the template my template" in me.get(response["Location"]).content.decode()
    me.force_login(teammate)
    assert "my template" in me.get("/templates/").content.decode()


def test_a_template_name_with_a_control_character_or_bidi_control_is_refused(me, member, team, image):
    job = submit_job(member, team, image=image, name="my job")

    response = me.post(f"/jobs/{job.pk}/save-template/", {"name": "fine\u202eexe.txt"}, follow=True)

    assert "Not saved" in response.content.decode() and "U+202E" in response.content.decode()
    assert not JobTemplate.objects.exists()
    with pytest.raises(ValidationError) as refused:  # as the admin checks it
        JobTemplate(name="a\x1b[2Jb", image=image, command="true").full_clean()
    assert "U+001B" in str(refused.value.message_dict["name"])


def test_a_saved_template_runs_the_jobs_command_unchanged(me, member, team, image, pool):
    job = submit_job(member, team, image=image, name="braces", command=["python3", "-c", "print({x}, 'a b')"])
    me.post(f"/jobs/{job.pk}/save-template/")
    template = JobTemplate.objects.get()

    run(me, template, name="again")

    assert Job.objects.get(name="again").command == ["python3", "-c", "print({x}, 'a b')"]


def test_a_job_whose_command_is_too_long_for_a_template_is_not_saved_and_says_why(me, member, team, image):
    job = submit_job(member, team, image=image, name="quotes", command=["echo", "'" * 4000])  # 5 characters each

    response = me.post(f"/jobs/{job.pk}/save-template/", follow=True)

    assert response.redirect_chain == [(f"/jobs/{job.pk}/", 302)]
    assert "Not saved: its command, written as a template&#x27;s, is 20007 characters" in response.content.decode()
    assert not JobTemplate.objects.exists()


def test_another_teams_job_cannot_be_saved(me, outsider, other_team, image):
    job = submit_job(outsider, other_team, image=image)

    assert me.post(f"/jobs/{job.pk}/save-template/").status_code == 404
    assert me.get(f"/jobs/{job.pk}/save-template/").status_code == 405
    assert not JobTemplate.objects.exists()


def test_an_operators_template_runs_for_the_members_team(me, member, team, retrain, pool):
    run(me, retrain, param_label="x")

    assert Job.objects.get().team == team


def test_nobody_signed_in_is_sent_to_log_in(client, retrain):
    assert client.get("/templates/").status_code == 302
    assert client.get(f"/templates/{retrain.pk}/").status_code == 302


def test_a_templates_defaults_must_fit_its_bounds(image):
    template = JobTemplate(name="t", image=image, command="echo {a}", cpus=4, cpus_max=2, defaults={"b": "1"})

    with pytest.raises(ValidationError) as refused:
        template.full_clean()

    assert "cpus" in refused.value.message_dict
    assert RuntimeImage.objects.count() == 1


RUN_FIELDS = [
    "name", "team", "param_epochs", "param_label", "cpus", "memory_mb", "gpus", "time_limit_s",
    "indices", "max_running", "max_retries", "retry_on", "retry_memory_factor", "retry_delay_s",
]  # fmt: skip


@PROPERTY
@given(
    changes=st.dictionaries(
        st.sampled_from(RUN_FIELDS),
        hostile_text,
        min_size=1,
        max_size=3,
    )
)
def test_no_value_of_a_template_runs_fields_gets_a_500(me, retrain, pool, changes):
    me.raise_request_exception = False

    assert_no_500(run(me, retrain, **{"param_label": "x", **changes}))
