"""A job name's run history (jobs.web.runs and `{% run_strip %}`): the last 30 released runs of the same name in
the same team, oldest first, each with its outcome, run time and cost, each a link; the current one marked."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.template import Context, Template
from django.test.utils import CaptureQueriesContext

from accounting.meter import Usage
from accounting.models import Record
from jobs.models import Outcome
from jobs.web import runs
from tests.factories import ended_job, submit_job
from tests.jobs.conftest import T0


@pytest.fixture
def nightly(member, team, image, local_node):
    """32 runs of "nightly" an hour apart, every fourth failed; the oldest first."""
    return [
        ended_job(member, team, outcome=Outcome.FAILED if i % 4 == 3 else Outcome.SUCCEEDED, at=T0 + timedelta(hours=i),
                  exit_code=1 if i % 4 == 3 else None, name="nightly", image=image, usage=Usage(cpu_seconds=1.0))
        for i in range(32)
    ]  # fmt: skip


def strip_html(job, strips=None) -> str:
    return Template("{% load runs %}{% run_strip job strips %}").render(Context({"job": job, "strips": strips}))


def test_the_strip_is_the_last_30_runs_oldest_first(nightly):
    strip = runs.strip_of(nightly[-1])

    assert [run.id for run in strip] == [job.pk for job in nightly[-30:]]
    assert [run.outcome for run in strip[-5:]] == ["failed", "succeeded", "succeeded", "succeeded", "failed"]
    assert runs.STRIP_LENGTH == 30


def test_only_runs_of_the_same_name_and_team_released(nightly, member, team, other_team, outsider, image):
    ended_job(member, team, outcome=Outcome.FAILED, at=T0 + timedelta(days=3), name="nightly2", image=image)
    ended_job(outsider, other_team, outcome=Outcome.FAILED, at=T0 + timedelta(days=3), name="nightly", image=image)
    submit_job(member, team, image=image, name="nightly")  # waiting: not a run of the strip yet

    strip = runs.strip_of(nightly[0])

    assert [run.id for run in strip] == [job.pk for job in nightly[-30:]]


def test_each_run_has_its_run_time_and_its_records_cost(nightly):
    run = runs.strip_of(nightly[-2])[-2]
    records = Record.objects.filter(job=nightly[-2])

    assert run.run_time == timedelta(minutes=10)
    assert run.cost == sum((r.cost for r in records), Decimal(0)) and run.cost > 0
    assert run.outcome_label == "succeeded"


def test_a_run_never_held_has_no_cost(member, team, image, local_node):
    job = ended_job(member, team, outcome=Outcome.REJECTED, at=T0, name="too big", image=image)

    (run,) = runs.strip_of(job)

    assert run.cost is None and run.run_time is None


def test_many_names_are_one_query(nightly, member, team, other_team, outsider, image):
    other = ended_job(outsider, other_team, outcome=Outcome.FAILED, at=T0, name="weekly", image=image)
    keys = [(team.pk, "nightly"), (other_team.pk, "weekly"), (team.pk, "weekly"), (team.pk, "never ran")]

    with CaptureQueriesContext(connection) as queries:
        found = runs.strips(keys)

    assert len(queries) == 1
    assert len(found[(team.pk, "nightly")]) == 30 and [r.id for r in found[(other_team.pk, "weekly")]] == [other.pk]
    assert found[(team.pk, "weekly")] == [] and found[(team.pk, "never ran")] == []


def test_the_strip_links_each_run_and_marks_the_current_one(nightly):
    current = nightly[-5]  # a failed run
    html = strip_html(current)

    links = re.findall(r'<a class="run outcome-(\w+)( current)?" href="/jobs/([^"]+)/"', html)
    assert [job_id for _, _, job_id in links] == [str(job.pk) for job in nightly[-30:]]
    assert [(outcome, mark) for outcome, mark, job_id in links if job_id == str(current.pk)] == [("failed", " current")]
    assert html.count('aria-current="true"') == 1
    # Not by colour alone: each says its outcome, run time and cost.
    assert re.search(r'aria-label="failed, run time 10 m 00 s, cost \d+\.\d\d EUR, ended [^"]+ \(this run\)"', html)
    assert 'title="succeeded · 10 m 00 s · ' in html


def test_a_strip_read_before_is_used_not_read_again(nightly, django_assert_num_queries):
    strips = runs.strips([(nightly[-1].team_id, "nightly")])

    with django_assert_num_queries(0):
        html = strip_html(nightly[-1], strips)

    assert html.count('class="run ') == 30


def test_a_name_with_no_released_run_shows_no_strip(member, team, image):
    assert strip_html(submit_job(member, team, image=image, name="first time")).strip() == ""


def test_a_run_alone_is_no_history(member, team, image, local_node):
    job = ended_job(member, team, outcome=Outcome.FAILED, at=T0, name="once", image=image, exit_code=1)

    assert [run.id for run in runs.strip_of(job)] == [job.pk] and strip_html(job).strip() == ""


def test_a_database_without_lateral_finds_the_same_runs(nightly, member, team, other_team, outsider, image):
    """SQLite, the local default, ranks each name's runs by a window instead: same rows, same order."""
    ended_job(outsider, other_team, outcome=Outcome.FAILED, at=T0, name="nightly", image=image)
    keys = [(team.pk, "nightly"), (other_team.pk, "nightly"), (team.pk, "never ran")]

    def by_key(rows):
        return sorted((tuple(row[:2]), row[2], row[7]) for row in rows)

    ranked = runs._ranked(sorted(keys), runs.STRIP_LENGTH)
    assert by_key(ranked) == by_key(runs._lateral(sorted(keys), runs.STRIP_LENGTH))
    assert len([row for row in ranked if tuple(row[:2]) == (team.pk, "nightly")]) == 30


def test_the_strip_escapes_what_it_shows(member, team, image, local_node):
    name = '<script>alert("x")</script>'
    for i in range(2):
        job = ended_job(member, team, outcome=Outcome.FAILED, at=T0 + timedelta(hours=i), name=name, image=image)

    html = strip_html(job)

    assert "<script>" not in html and "&lt;script&gt;" in html and html.count('class="run ') == 2
