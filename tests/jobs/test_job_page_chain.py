"""A job's page and its chain: a task links to its array, the page shows what the job waits for and what
waits for it (with how, and where each stands), and a retried job's attempts."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Dependency, Input, Job, Outcome, Stage
from jobs.submit.arrays import ArrayRequest
from jobs.submit.declaration import Declaration
from jobs.submit.service import submit
from jobs.web import pipelines
from tests.factories import JobArrayFactory, array_tasks, ended_job, submit_job

OK, ANY, NOT_OK = Dependency.Kind.OK, Dependency.Kind.ANY, Dependency.Kind.NOT_OK


@pytest.fixture
def me(client, member):
    client.force_login(member)
    return client


@pytest.fixture
def night(member, team, image, local_node):
    """prepare (succeeded) → train, a 3-task array (after ok, reading prepare's shards) → evaluate (after ok
    on train), with report (after any on evaluate) and alert (after not ok on train)."""
    at = timezone.now() - timedelta(hours=1)
    prepare = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=at, name="prepare")
    train = JobArrayFactory(team=team, submitted_by=member, name="train")
    array_tasks(train, image, [(Stage.RELEASE, Outcome.SUCCEEDED), (Stage.RELEASE, Outcome.FAILED), (Stage.RUN, "")])
    evaluate = submit_job(member, team, image=image, name="evaluate")
    report = submit_job(member, team, image=image, name="report")
    alert = submit_job(member, team, image=image, name="alert")
    Dependency.objects.bulk_create([
        Dependency(array=train, on_job=prepare, kind=OK),
        Dependency(job=evaluate, on_array=train, kind=OK),
        Dependency(job=report, on_job=evaluate, kind=ANY),
        Dependency(job=alert, on_array=train, kind=NOT_OK),
    ])  # fmt: skip
    Input.objects.create(array=train, from_job=prepare, glob="shards/*.parquet")
    return {"prepare": prepare, "train": train, "evaluate": evaluate, "report": report, "alert": alert}


def part(page: str, tag: str) -> str:
    start = page.index(f'id="{tag}"')
    return page[start : page.index("</ul>", start)]


def test_a_task_links_to_its_array(me, night):
    task = Job.objects.get(array=night["train"], array_index=1)

    page = me.get(f"/jobs/{task.pk}/").content.decode()

    link = f'task 1 of array <a href="/arrays/{night["train"].pk}/">train</a>'
    assert link in page


def test_a_task_waits_for_what_its_array_waits_for_and_reads_its_inputs(me, night):
    task = Job.objects.get(array=night["train"], array_index=0)

    page = me.get(f"/jobs/{task.pk}/").content.decode()

    up = part(page, "upstream")
    assert f'href="/jobs/{night["prepare"].pk}/">prepare</a>' in up
    assert '<span class="dep-kind">after ok</span>' in up
    assert '<span class="outcome outcome-succeeded">succeeded</span>' in up
    assert "reads <code>shards/*.parquet</code>" in up
    # What waits for its array waits for it too: evaluate after ok, alert after not ok, both waiting.
    down = part(page, "downstream")
    names = re.findall(r'href="/jobs/[^"]+/">(\w+)</a>\s*<span class="dep-kind">([^<]+)</span>', down)
    assert names == [("evaluate", "after ok"), ("alert", "after not ok")]
    assert down.count('<span class="stage stage-submit">waiting</span>') == 2


def test_a_job_shows_the_array_it_waits_for_with_its_counts(me, night):
    page = me.get(f"/jobs/{night['evaluate'].pk}/").content.decode()

    up = part(page, "upstream")
    assert f'href="/arrays/{night["train"].pk}/">train</a> <span class="muted">array of 3</span>' in up
    assert '<span class="stage stage-run">running</span>' in up  # a task still runs
    assert "1 failed · 1 running · 1 succeeded" in up
    down = part(page, "downstream")
    assert f'href="/jobs/{night["report"].pk}/">report</a>' in down and "after any" in down


def test_an_upstream_job_shows_who_reads_its_outputs(me, night):
    page = me.get(f"/jobs/{night['prepare'].pk}/").content.decode()

    assert 'id="upstream"' not in page
    down = part(page, "downstream")
    assert f'href="/arrays/{night["train"].pk}/">train</a>' in down
    assert "after ok" in down and "reads <code>shards/*.parquet</code>" in down


def test_a_job_with_no_chain_has_no_pipeline_part(me, member, team, image):
    job = submit_job(member, team, image=image, name="alone")

    page = me.get(f"/jobs/{job.pk}/").content.decode()

    assert 'id="pipeline"' not in page and "of array" not in page


def test_the_chain_is_read_in_a_fixed_number_of_queries(night, member, team, image, django_assert_num_queries):
    # Many upstream arrays cost no more than one: their counts come in one query.
    for n in range(5):
        more = JobArrayFactory(team=team, submitted_by=member, name=f"more {n}")
        array_tasks(more, image, [(Stage.RELEASE, Outcome.SUCCEEDED)] * 2)
        Dependency.objects.create(job=night["evaluate"], on_array=more, kind=ANY)

    with django_assert_num_queries(3):
        up = pipelines.upstream_of(night["evaluate"])
    with django_assert_num_queries(2):  # no array downstream: no counts to read
        down = pipelines.downstream_of(night["evaluate"])

    assert len(up) == 6 and [step.job.name for step in down if step.job] == ["report"]


# --- attempts --------------------------------------------------------------------------------------


def test_a_retried_jobs_attempts_are_a_table_with_the_current_one_last(me, member, team, image, local_node):
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now() - timedelta(minutes=1), name="big")
    Job.objects.filter(pk=job.pk).update(attempt=2, memory_mb=128, past_attempts=[{
        "attempt": 1, "outcome": "out_of_memory", "exit_code": 137, "reason": "killed by the memory limit",
        "memory_mb": 64, "held_at": "2030-01-01T02:00:00+00:00", "released_at": "2030-01-01T02:05:00+00:00",
    }])  # fmt: skip

    page = me.get(f"/jobs/{job.pk}/").content.decode()

    table = page[page.index('id="attempts"') : page.index("</table>", page.index('id="attempts"'))]
    rows = re.findall(r'<tr(?: aria-current="true")? data-attempt="(\d)">(.*?)</tr>', table, re.S)
    assert [n for n, _ in rows] == ["1", "2"]
    first, current = rows[0][1], rows[1][1]
    assert "out of memory" in first and ">137<" in first and "killed by the memory limit" in first
    assert "64 MB" in first and 'datetime="2030-01-01T02:00:00+00:00"' in first
    assert "(this one)" in current and "succeeded" in current and "128 MB" in current


def test_a_job_run_once_has_no_attempts_table(me, member, team, image, local_node):
    job = ended_job(member, team, outcome=Outcome.FAILED, at=timezone.now() - timedelta(minutes=1), name="once")

    assert 'id="attempts"' not in me.get(f"/jobs/{job.pk}/").content.decode()


def test_a_chain_submitted_through_the_domain_shows_on_both_ends(me, member, team, image, local_node):
    """As jobs.submit.service and jobs.submit.arrays write it: reading an upstream's outputs is one step, after ok."""
    prepare = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now() - timedelta(minutes=5),
                        name="prepare")  # fmt: skip
    declaration = Declaration(team=team, name="train", image=image, command=["true"], env={}, cpus=1, memory_mb=64,
                              gpus=0, time_limit_s=30, output_patterns=[], inputs=[(prepare, "shards/*")])  # fmt: skip
    train, _created = submit(declaration, user=member, array=ArrayRequest([0, 1, 2], max_running=1))
    task = Job.objects.get(array=train, array_index=2)

    up = part(me.get(f"/jobs/{task.pk}/").content.decode(), "upstream")
    down = part(me.get(f"/jobs/{prepare.pk}/").content.decode(), "downstream")

    assert up.count("<li ") == 1 and "prepare</a>" in up and "after ok" in up and "reads <code>shards/*</code>" in up
    assert down.count("<li ") == 1 and f'href="/arrays/{train.pk}/">train</a>' in down


def test_a_job_retried_after_its_node_was_lost_shows_both_attempts(me, member, team, image, local_node):
    job = ended_job(member, team, outcome=Outcome.NODE_LOST, at=timezone.now() - timedelta(minutes=1),
                    name="lost once", max_retries=1)  # fmt: skip
    job.refresh_from_db()
    assert job.attempt == 2 and job.stage == Stage.SUBMIT  # the default rule retries on node_lost

    page = me.get(f"/jobs/{job.pk}/").content.decode()

    rows = re.findall(r'data-attempt="(\d)">(.*?)</tr>', page, re.S)
    assert [n for n, _ in rows] == ["1", "2"]
    assert "node lost" in rows[0][1] and "64 MB" in rows[0][1] and "<time" in rows[0][1]
    assert "waiting" in rows[1][1] and "(this one)" in rows[1][1]
