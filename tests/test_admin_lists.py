"""The admin's lists, as an operator reads raw data on a laptop: search and filters on every model, few columns
on the records (the cost among them, no sideways scrolling), jobs, holds and records read-only."""

import re

import pytest
from django.contrib import admin
from django.utils import timezone

from accounting.models import Record
from jobs.lifecycle.actions import cancel, schedule_pass
from jobs.models import Job
from pool.models import Hold
from tests.factories import submit_job

MOST_RECORD_COLUMNS = 6  # with the checkbox, what a 1280 px screen shows without scrolling sideways


@pytest.fixture
def released(member, team, local_node):
    job = submit_job(member, team, name="a job with a rather long name to see the columns hold")
    schedule_pass(now=timezone.now())
    return cancel(job, now=timezone.now())


@pytest.mark.parametrize("model_admin", admin.site._registry.values(), ids=lambda a: a.model._meta.label)
def test_every_model_has_search_and_filters(model_admin):
    assert model_admin.search_fields, f"{model_admin.model._meta.label} has no search"
    assert model_admin.list_filter, f"{model_admin.model._meta.label} has no filters"


@pytest.mark.parametrize("model", [Job, Hold, Record])
def test_jobs_holds_and_records_are_read_only(rf, operator, model):
    model_admin = admin.site._registry[model]
    request = rf.get("/admin/")
    request.user = operator

    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)


def test_the_records_list_shows_the_cost_in_few_columns(client, operator, released):
    client.force_login(operator)
    record = Record.objects.get(job=released)

    page = client.get("/admin/accounting/record/").content.decode()

    headers = re.findall(r'<th scope="col"[^>]*class="[^"]*column-(\w+)', page)
    assert "cost" in headers and len(headers) <= MOST_RECORD_COLUMNS, headers
    assert f"{record.cost}" in page or f"{record.cost:.6f}" in page


@pytest.mark.parametrize(
    "page, query",
    [("accounting/record", "rather long"), ("jobs/job", "rather long"), ("pool/hold", "rather long"),
     ("pool/node", "local"), ("teams/membership", "alice"), ("jobtemplates/jobtemplate", "x")],
)  # fmt: skip
def test_search_answers_on_each_list(client, operator, released, page, query):
    client.force_login(operator)

    response = client.get(f"/admin/{page}/", {"q": query})

    assert response.status_code == 200
    if page != "jobtemplates/jobtemplate":
        assert "0 results" not in response.content.decode()
