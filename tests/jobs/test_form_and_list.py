"""The submission form's help (time limits with units, the pool beside the request, every bad pattern,
the field that can never be held) and the job list at /jobs/ (sorting, cards); the pages' query counts
with 1,000 jobs."""

import html
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from core.when import BAD_DURATION
from jobs.models import Job, Outcome
from jobs.submit.forms import JobForm
from tests.factories import ended_job, store_output, submit_job


@pytest.fixture
def me(client, member):
    client.force_login(member)
    return client


def declared(**changes) -> dict:
    form = {"name": "n", "image": "busybox", "command": "true", "cpus": "1", "memory_mb": "64", "time_limit_s": "60"}
    form.update(changes)
    return form


@pytest.mark.parametrize(("text", "seconds"), [("600", 600), ("1h30m", 5400), ("1d", 86400)])
def test_a_time_limit_is_read_with_its_units(member, image, text, seconds):
    form = JobForm(declared(time_limit_s=text), user=member)

    assert form.is_valid(), form.errors
    assert form.cleaned_data["time_limit_s"] == seconds


@pytest.mark.parametrize("text", ["soon", "2x", "h", "-5", "1.5h"])
def test_an_unreadable_time_limit_is_refused(member, image, text):
    form = JobForm(declared(time_limit_s=text), user=member)

    assert not form.is_valid() and form.errors["time_limit_s"] == [BAD_DURATION]


def test_a_time_limit_in_hours_is_still_held_to_the_maximum(member, image, settings):
    settings.E31_TIME_LIMIT_MAX_S = 3600

    assert JobForm(declared(time_limit_s="1h"), user=member).is_valid()
    assert not JobForm(declared(time_limit_s="61m"), user=member).is_valid()


def test_every_bad_output_pattern_is_reported(member, image):
    form = JobForm(declared(outputs="good.json\n/etc/passwd\n../up\nfine/*.csv\na/../b"), user=member)

    assert not form.is_valid()
    errors = form.errors["outputs"]
    assert len(errors) == 3 and all(bad in " ".join(errors) for bad in ("/etc/passwd", "../up", "a/../b"))


def test_can_never_be_held_is_marked_on_the_field_that_causes_it(me, image, local_node):
    response = me.post("/jobs/new/", declared(memory_mb=str(local_node.memory_mb + 1)))

    assert response.status_code == 400
    page = response.content.decode()
    memory = page[page.index('class="field field-memory_mb') :]
    memory = memory[: memory.index('<div class="field ')]
    assert f"Can never be held: the largest node has {local_node.memory_mb}." in memory
    cpus = page[page.index('class="field field-cpus') :]
    assert "Can never be held" not in cpus[: cpus.index('<div class="field ')]


def test_the_form_shows_the_largest_node_what_is_free_and_the_images(me, image, local_node):
    page = me.get("/jobs/new/").content.decode()

    assert f"Largest node: <strong>{len(local_node.cpu_ids)} cpu · {local_node.memory_mb} MB" in page
    assert "Free now on one node at most" in page
    assert f"<dt><code>{image.name}</code></dt><dd>{image.description}</dd>" in page
    assert "data-drop-zone" in page and 'id="upload-progress"' in page and 'hx-encoding="multipart/form-data"' in page


def test_a_form_sent_by_htmx_goes_to_the_job_by_a_client_redirect(me, image, local_node):
    response = me.post("/jobs/new/", declared(), HTTP_HX_REQUEST="true")

    job = Job.objects.get()
    assert response.status_code == 200 and response["HX-Redirect"] == f"/jobs/{job.pk}/"


def test_a_form_sent_by_htmx_with_errors_comes_back_400_keeping_what_was_typed(me, image, local_node):
    response = me.post("/jobs/new/", declared(name="kept name", cpus="0"), HTTP_HX_REQUEST="true")

    assert response.status_code == 400 and 'value="kept name"' in response.content.decode()


# --- the list -------------------------------------------------------------------------------------


def names_listed(response) -> list[str]:
    assert response.status_code == 200
    return re.findall(
        r'<td data-label="Job"><a href="/jobs/[^"]+/" id="row-[^"]+">([^<]*)</a></td>', response.content.decode()
    )


def test_the_list_sorts_by_a_column_both_ways_and_keeps_the_filters(me, member, team, image):
    for name in ["b", "c", "a"]:
        submit_job(member, team, image=image, name=name)

    assert names_listed(me.get("/jobs/?sort=name")) == ["a", "b", "c"]
    assert names_listed(me.get("/jobs/?sort=-name")) == ["c", "b", "a"]
    header = me.get("/jobs/?sort=name&stage=waiting").content.decode()
    assert 'aria-sort="ascending"><a href="?sort=-name&amp;stage=waiting">Job ↑</a>' in header


def test_a_bad_sort_is_400(me, db):
    assert me.get("/jobs/?sort=password").status_code == 400


def test_the_list_filters_by_outcome_user_and_time(me, member, teammate, team, image, local_node):
    now = timezone.now()
    ended_job(member, team, outcome=Outcome.FAILED, at=now - timedelta(days=2), name="old failure")
    ended_job(teammate, team, outcome=Outcome.FAILED, at=now - timedelta(minutes=5), name="bobs failure")
    ended_job(member, team, outcome=Outcome.SUCCEEDED, at=now - timedelta(minutes=5), name="fine")

    assert sorted(names_listed(me.get("/jobs/?outcome=failed"))) == ["bobs failure", "old failure"]
    assert names_listed(me.get("/jobs/?outcome=failed&user=bob")) == ["bobs failure"]
    since = (now - timedelta(days=1)).date().isoformat()
    assert names_listed(me.get(f"/jobs/?outcome=failed&since={since}")) == ["bobs failure"]


@pytest.fixture
def a_night(member, team, image, local_node):
    """One job of each way a night's jobs end, named after it."""
    now = timezone.now()
    for outcome in [Outcome.SUCCEEDED, Outcome.FAILED, Outcome.OUT_OF_MEMORY, Outcome.TIMED_OUT, Outcome.CANCELLED]:
        ended_job(member, team, outcome=outcome, at=now - timedelta(minutes=5), name=f"night {outcome}")


def test_the_list_takes_several_outcomes_at_once(me, a_night):
    response = me.get("/jobs/?outcome=failed&outcome=out_of_memory")

    assert sorted(names_listed(response)) == ["night failed", "night out_of_memory"]
    page = response.content.decode()
    ticked = re.findall(r'<input type="checkbox" name="outcome" value="(\w+)"[^>]* checked>', page)
    assert sorted(ticked) == ["failed", "out_of_memory"]  # the form says what is shown


def test_not_succeeded_is_one_link_from_the_list(me, a_night):
    page = me.get("/jobs/").content.decode()
    href = re.search(r'<a href="([^"]*)" >not succeeded</a>', page)

    assert href, "no 'not succeeded' link on /jobs/"
    response = me.get("/jobs/" + html.unescape(href[1]))
    assert sorted(names_listed(response)) == [
        "night cancelled", "night failed", "night out_of_memory", "night timed_out"
    ]  # fmt: skip
    assert 'class="on" aria-current="page">not succeeded</a>' in response.content.decode()


def test_an_unknown_outcome_among_several_is_a_form_error(me, a_night):
    response = me.get("/jobs/?outcome=failed&outcome=ok")

    assert response.status_code == 400
    page = response.content.decode()
    assert "Outcome (outcome): Select a valid choice. ok is not one of the available choices." in page
    assert names_listed_anyway(page) == []


def names_listed_anyway(page: str) -> list[str]:
    return re.findall(r'<td data-label="Job"><a href="/jobs/[^"]+/" id="row-[^"]+">([^<]*)</a></td>', page)


def test_every_row_carries_its_outcome_for_the_phone_cards(me, member, team, image, local_node):
    ended_job(member, team, outcome=Outcome.TIMED_OUT, at=timezone.now(), name="slow")

    page = me.get("/jobs/").content.decode()

    assert '<table class="jobs cards">' in page
    assert '<td data-label="Outcome"><span class="outcome outcome-timed_out">timed out</span></td>' in page


# --- query counts -----------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 1000])
def test_the_pages_query_counts_do_not_grow_with_the_jobs(
    me, member, team, image, local_node, count, django_assert_max_num_queries
):
    now = timezone.now()
    outcomes = [Outcome.SUCCEEDED, Outcome.FAILED, Outcome.OUT_OF_MEMORY, Outcome.CANCELLED]
    for i in range(count):
        job = ended_job(member, team, outcome=outcomes[i % 4], at=now - timedelta(minutes=i % 600), name=f"job {i}")
        if i < 60:
            store_output(job, "out.txt", b"x")
    submit_job(member, team, image=image, name="waiting")

    with django_assert_max_num_queries(17):  # with the night summed first
        assert me.get("/", {"since": (now - timedelta(days=1)).isoformat()}).status_code == 200
    with django_assert_max_num_queries(8):
        assert me.get("/jobs/", {"outcome": "failed", "page": "last"}).status_code == 200
    with django_assert_max_num_queries(20):
        assert me.get(f"/jobs/{job.pk}/").status_code == 200
