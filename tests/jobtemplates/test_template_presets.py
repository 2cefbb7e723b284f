"""A template presets an array's indices, its max_running and the retry rules: shown on its card and run
page as the run form's initial values, changeable there; with indices, a run is an array."""

import pytest
from django.core.exceptions import ValidationError

from jobs.models import Job, JobArray
from jobtemplates.models import JobTemplate
from tests.factories import RuntimeImageFactory, submit_job


@pytest.fixture
def image(db):
    return RuntimeImageFactory(name="python", reference="e31/python:3", description="Python 3")


@pytest.fixture
def me(client, member):
    client.force_login(member)
    return client


@pytest.fixture
def sweep(image, team):
    return JobTemplate.objects.create(
        team=team, name="sweep", image=image, command="python3 /data/train.py --seed {seed}",
        defaults={"seed": "1"}, array_indices="0-3", max_running=2, max_retries=1,
        retry_on=["out_of_memory", "137"], retry_memory_factor=2.0, retry_delay_s=30,
    )  # fmt: skip


def run(me, template, **fields):
    data = {"name": "from the template", "cpus": 1, "memory_mb": 256, "gpus": 0, "time_limit_s": 600, **fields}
    return me.post(f"/templates/{template.pk}/", data)


PRESETS = {
    "indices": "0-3",
    "max_running": "2",
    "max_retries": "1",
    "retry_on": "out_of_memory, 137",
    "retry_memory_factor": "2.0",
    "retry_delay_s": "30",
}  # fmt: skip  (the run form's values of `sweep`)


def test_the_run_page_shows_the_presets_as_the_forms_values(me, sweep):
    page = me.get(f"/templates/{sweep.pk}/").content.decode()

    for name, value in PRESETS.items():
        assert f'name="{name}" value="{value}"' in page, name
    assert "The template runs an array" in page
    card = me.get("/templates/").content.decode()
    assert "an array of tasks 0-3 · 1 retry" in card


def test_a_run_of_a_template_with_indices_is_an_array_with_its_rules(me, sweep, local_node):
    response = run(me, sweep, **PRESETS)

    array = JobArray.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/arrays/{array.pk}/"
    assert (array.size, array.max_running, array.name) == (4, 2, "from the template")
    task = Job.objects.get(array=array, array_index=3)
    assert task.command == ["python3", "/data/train.py", "--seed", "1"]
    assert (task.max_retries, task.retry_on, task.retry_memory_factor, task.retry_delay_s) == (
        1, ["out_of_memory", "137"], 2.0, 30,
    )  # fmt: skip


def test_a_run_changes_the_presets_and_without_indices_is_one_job(me, sweep, local_node):
    response = run(me, sweep, **{**PRESETS, "indices": "", "max_retries": "3", "retry_on": ""})

    job = Job.objects.get()
    assert response["Location"] == f"/jobs/{job.pk}/" and job.array_id is None
    assert (job.max_retries, job.retry_on) == (3, ["node_lost"])


def test_the_same_array_run_sent_twice_submits_once(me, sweep, local_node):
    sent = {**PRESETS, "submission": "b" * 32}

    assert run(me, sweep, **sent)["Location"] == run(me, sweep, **sent)["Location"]
    assert JobArray.objects.count() == 1 and Job.objects.count() == 4


def test_bad_indices_or_retry_rules_are_said_at_their_fields(me, sweep, local_node):
    response = run(me, sweep, **{**PRESETS, "indices": "3-1", "retry_on": "sometimes"})

    assert response.status_code == 400 and not Job.objects.exists()
    page = response.content.decode()
    assert '<div class="error" id="id_indices_error"><p>&#x27;3-1&#x27;: a range runs' in page
    assert '<div class="error" id="id_retry_on_error"><p>&#x27;sometimes&#x27; is neither an exit code' in page
    assert 'name="max_running" value="2"' in page  # the rest kept as sent


@pytest.mark.parametrize(
    ("preset", "field"),
    [
        ({"array_indices": "9-0"}, "array_indices"),
        ({"max_running": 0}, "max_running"),
        ({"retry_on": ["sometimes"]}, "retry_on"),
        ({"retry_on": "137"}, "retry_on"),
        ({"retry_memory_factor": 0.5}, "retry_memory_factor"),
        ({"max_retries": 10_000}, "max_retries"),
    ],
)
def test_a_templates_presets_are_checked_where_it_is_defined(image, preset, field):
    with pytest.raises(ValidationError) as refused:  # as the admin checks it
        JobTemplate(name="t", image=image, command="true", **preset).full_clean()

    assert field in refused.value.message_dict


def test_a_job_saved_as_a_template_keeps_its_retry_rules(me, member, team, image):
    job = submit_job(member, team, image=image, name="retried", max_retries=2, retry_on=["137"], retry_delay_s=5)

    me.post(f"/jobs/{job.pk}/save-template/")

    template = JobTemplate.objects.get()
    assert (template.max_retries, template.retry_on, template.retry_delay_s) == (2, ["137"], 5)
    plain = submit_job(member, team, image=image, name="plain")
    me.post(f"/jobs/{plain.pk}/save-template/", {"name": "plain template"})
    assert JobTemplate.objects.get(name="plain template").retry_on == []  # the default: node_lost


def test_the_admin_shows_and_edits_the_presets(client, operator, sweep):
    client.force_login(operator)

    page = client.get(f"/admin/jobtemplates/jobtemplate/{sweep.pk}/change/").content.decode()

    assert "An array and retries: presets of a run" in page
    assert 'name="array_indices" value="0-3"' in page and 'name="retry_delay_s" value="30"' in page
