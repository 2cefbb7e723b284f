"""The job page's history: every change as a timeline, oldest first, with who acted, per attempt."""

import re
from datetime import timedelta

import pytest
import time_machine

from jobs.lifecycle import actions
from jobs.lifecycle.history import REAPER
from jobs.models import Stage
from jobs.web.figures import figures
from tests.factories import submit_job
from tests.jobs.conftest import T0, collecting, held, released, running

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def me(client, member):
    client.force_login(member)
    return client


def history_rows(html: str) -> list[tuple[str, str, str]]:
    """(attempt, stage, actor) of each event the page's history lists, in its order."""
    section = html[html.index('id="history"') : html.index("</ol>", html.index('id="history"'))]
    rows = re.findall(r'data-stage="(\w+)" data-attempt="(\d+)">.*?<span class="actor">([^<]*)</span>', section, re.S)
    return [(attempt, stage, actor) for stage, attempt, actor in rows]


def test_the_page_shows_each_change_oldest_first_with_who_acted(me, member, team, image, local_node):
    job = released(collecting(running(held(submit_job(member, team, image=image)))))
    node = f"node {local_node.name}"

    html = me.get(f"/jobs/{job.pk}/").content.decode()

    assert history_rows(html) == [
        ("1", "submit", "alice"), ("1", "rent", "scheduler"), ("1", "run", node),
        ("1", "output", node), ("1", "release", node),
    ]  # fmt: skip
    assert "Attempt 1" not in html  # one attempt: no headings


def test_a_retried_job_shows_each_attempt_apart(me, member, team, image, local_node):
    job = submit_job(member, team, image=image, max_retries=1)
    running(held(job))
    actions.release_lost(job, node_name=local_node.name, last_heartbeat=T0, now=T0 + timedelta(seconds=2), actor=REAPER)
    job.refresh_from_db()
    held(job, now=T0 + timedelta(seconds=3))

    html = me.get(f"/jobs/{job.pk}/").content.decode()

    assert [(a, s) for a, s, _ in history_rows(html)] == [
        ("1", "submit"), ("1", "rent"), ("1", "run"), ("1", "submit"), ("2", "rent"),
    ]  # fmt: skip
    assert html.index("<strong>Attempt 1</strong>") < html.index("<strong>Attempt 2</strong>")
    assert "node_lost" in html and "was lost" in html


def test_the_polled_part_brings_the_new_events(me, job_at, teammate):
    job = job_at(Stage.RUN)
    actions.cancel(job, now=T0 + timedelta(seconds=5), acting_user=teammate)

    html = me.get(f"/jobs/{job.pk}/live/", **HTMX).content.decode()

    assert history_rows(html)[-1] == ("1", "run", "bob")
    assert "cancel asked" in html


def test_a_retried_jobs_steps_are_its_current_attempts_as_its_history_has_them(me, member, team, image, local_node):
    with time_machine.travel(T0 - timedelta(seconds=30), tick=False):
        job = submit_job(member, team, image=image, max_retries=1)
    running(held(job))
    actions.release_lost(
        job, node_name=local_node.name, last_heartbeat=T0, now=T0 + timedelta(seconds=40), actor=REAPER
    )
    job.refresh_from_db()
    held(job, now=T0 + timedelta(seconds=45))

    html = me.get(f"/jobs/{job.pk}/").content.decode()

    assert ">Steps of attempt 2</h2>" in html
    stepper = html[html.index('class="steps"') : html.index("</ol>", html.index('class="steps"'))]
    steps = dict(
        re.findall(r'data-step="(\w+)"[^>]*>\s*<strong>\w+</strong>\s*<span><time datetime="([^"]+)"', stepper)
    )
    assert steps == {
        "submit": (T0 + timedelta(seconds=40)).isoformat(),
        "rent": (T0 + timedelta(seconds=45)).isoformat(),
    }
    assert all(f'datetime="{at}"' in html[html.index('id="history"') :] for at in steps.values())
    assert '<span class="took-words">queue wait </span>5 s' in html  # the second wait, not the first attempt's run
    assert figures(job).queue_wait == timedelta(seconds=30)  # submitted to the first hold
