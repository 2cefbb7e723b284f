"""The submit form's "More" section: an array's indices, the jobs to wait for and the retry rules, folded
until one is set or in error; an array sent through the page makes its tasks and goes to the array."""

import re
import uuid

import pytest

from jobs.models import Dependency, Job, JobArray
from tests.factories import submit_job


@pytest.fixture
def me(client, member):
    client.force_login(member)
    return client


def declared(**changes) -> dict:
    form = {"name": "sweep", "image": "busybox", "command": "true", "cpus": "1", "memory_mb": "64",
            "time_limit_s": "60", "submission": uuid.uuid4().hex}  # fmt: skip
    return {**form, **changes}


def more_section(page: str) -> str:
    start = page.index('<details class="fold more" id="more"')
    return page[start : page.index("</details>", start)]


def test_the_form_shows_the_more_section_folded(me, image):
    page = me.get("/jobs/new/").content.decode()

    more = more_section(page)
    assert more.startswith('<details class="fold more" id="more">')  # no `open`
    for name in ("indices", "max_running", "stop_after_failures", "after_ok", "after_any", "after_not_ok",
                 "inputs_from", "max_retries", "retry_on", "retry_memory_factor", "retry_delay_s"):  # fmt: skip
        assert f'name="{name}"' in more, name
    assert page.count('name="max_retries"') == 1  # moved there, not shown twice


def test_an_earlier_job_with_retry_rules_opens_the_more_section_on_resubmit(me, member, team, image):
    plain = submit_job(member, team, image=image, name="plain")
    retried = submit_job(member, team, image=image, name="retried", max_retries=2, retry_on=["out_of_memory"])

    assert 'id="more">' in me.get(f"/jobs/{plain.pk}/resubmit/").content.decode()
    page = me.get(f"/jobs/{retried.pk}/resubmit/").content.decode()
    assert 'id="more" open>' in page and 'value="out_of_memory"' in page


def test_an_array_submitted_through_the_page_creates_its_tasks_and_goes_to_the_array(me, image, local_node):
    response = me.post("/jobs/new/", declared(indices="0-3", max_running="2", stop_after_failures="1"))

    array = JobArray.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/arrays/{array.pk}/"
    assert (array.size, array.max_running, array.stop_after_failures) == (4, 2, 1)
    tasks = Job.objects.filter(array=array).order_by("array_index")
    assert [t.array_index for t in tasks] == [0, 1, 2, 3]
    assert [t.held_back for t in tasks] == [False, False, True, True]
    assert tasks[3].env["E31_ARRAY_INDEX"] == "3" and tasks[3].name == "sweep"


def test_an_array_sent_by_htmx_goes_there_by_a_client_redirect(me, image, local_node):
    response = me.post("/jobs/new/", declared(indices="1,3"), HTTP_HX_REQUEST="true")

    array = JobArray.objects.get()
    assert response.status_code == 200 and response["HX-Redirect"] == f"/arrays/{array.pk}/"


def test_an_array_form_sent_twice_submits_one_array(me, image, local_node):
    sent = declared(indices="0-9")

    first = me.post("/jobs/new/", sent)
    second = me.post("/jobs/new/", sent, follow=True)

    array = JobArray.objects.get()
    assert first["Location"] == f"/arrays/{array.pk}/" and second.redirect_chain[0][0] == f"/arrays/{array.pk}/"
    assert Job.objects.count() == 10
    assert me.post("/jobs/new/", {**sent, "name": "sweep, fixed"}).status_code == 302  # edited: another array
    assert JobArray.objects.count() == 2


def test_without_indices_the_form_submits_one_job_as_before(me, image, local_node):
    response = me.post("/jobs/new/", declared(indices="", max_running="", retry_on="", retry_memory_factor="1.0"))

    job = Job.objects.get()
    assert response["Location"] == f"/jobs/{job.pk}/" and job.array_id is None and not JobArray.objects.exists()


BAD_INDICES = [
    ("5-1", "'5-1': a range runs from the lower index to the higher."),
    ("a-b", "'a-b' is not an index or a range such as 0-99 or 0-20:5."),
]


@pytest.mark.parametrize(("indices", "error"), BAD_INDICES)
def test_bad_indices_are_a_field_error_and_keep_the_other_values(me, image, local_node, indices, error):
    response = me.post("/jobs/new/", declared(name="kept name", indices=indices, max_running="3", retry_on="137"))

    assert response.status_code == 400 and not Job.objects.exists()
    page = response.content.decode()
    assert 'id="more" open>' in page
    field = page[page.index('class="field field-indices invalid"') :]
    assert re.search(r'<div class="error" id="id_indices_error"><p>([^<]*)</p>', field)[1] == error.replace(
        "'", "&#x27;"
    )
    assert '<a href="#id_indices">Array indices</a>' in page  # in the summary too
    assert 'value="kept name"' in page and 'name="max_running" value="3"' in page and 'value="137"' in page


def test_a_dependency_on_an_unknown_id_is_a_field_error_shown_on_the_page(me, image, local_node, outsider, other_team):
    unknown = uuid.uuid4()
    theirs = submit_job(outsider, other_team, image=image, name="theirs")

    response = me.post("/jobs/new/", declared(after_ok=str(unknown), inputs_from=f"{theirs.pk}:*.csv"))

    assert response.status_code == 400 and not Job.objects.filter(name="sweep").exists()
    page = response.content.decode()
    assert 'id="more" open>' in page
    assert f"No job or array of team red has the id {unknown}." in page
    assert f"No job of team red has the id {theirs.pk}." in page
    assert '<a href="#id_after_ok">After success of</a>' in page


def test_a_dependency_on_a_teams_job_waits_for_it(me, member, team, image, local_node):
    upstream = submit_job(member, team, image=image, name="prepare")

    response = me.post("/jobs/new/", declared(after_ok=str(upstream.pk), max_retries="1", retry_on="137, failed"))

    job = Job.objects.get(name="sweep")
    assert response["Location"] == f"/jobs/{job.pk}/"
    assert job.held_back and job.retry_on == ["137", "failed"]
    assert Dependency.objects.get(job=job).on_job == upstream


@pytest.mark.parametrize("rule", ["9" * 5000, "²", "256"])
def test_an_exit_code_of_any_length_or_digit_is_a_field_error_not_a_500(me, image, local_node, rule):
    response = me.post("/jobs/new/", declared(retry_on=rule))

    assert response.status_code == 400 and "is neither an exit code (0 to 255)" in response.content.decode()


def test_the_worst_case_of_an_array_says_its_tasks(me, image, local_node):
    asked = {"cpus": "1", "memory_mb": "256", "time_limit_s": "600", "image": image.name}

    assert (
        "× 4 tasks</strong>, if each task holds"
        in me.get("/jobs/estimate/", {**asked, "indices": "0-3"}).content.decode()
    )
    for one in ("", "5-1", "7"):
        assert "tasks" not in me.get("/jobs/estimate/", {**asked, "indices": one}).content.decode()
    page = me.post("/jobs/new/", declared(indices="0-9:2", after_ok="nope")).content.decode()
    assert "× 5 tasks" in page  # shown again with the form's errors
