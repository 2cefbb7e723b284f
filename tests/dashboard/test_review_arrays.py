"""The morning review with arrays and pipelines: an array is one row with its counts (not a card per task),
jobs linked by dependencies are one line with the step where the chain broke and what was cancelled after
it, and the running and waiting parts show an array as one row; in a bounded number of queries."""

import re
import zoneinfo
from datetime import datetime, timedelta

import pytest
import time_machine

from jobs.models import Dependency, Outcome, Stage
from tests.factories import JobArrayFactory, array_tasks, ended_job

PARIS = zoneinfo.ZoneInfo("Europe/Paris")
MORNING = datetime(2030, 3, 12, 8, 30, tzinfo=PARIS)
EVENING = datetime(2030, 3, 11, 18, 0, tzinfo=PARIS)
OK, ANY = Dependency.Kind.OK, Dependency.Kind.ANY
SUCCEEDED, FAILED, CANCELLED = (
    (Stage.RELEASE, Outcome.SUCCEEDED),
    (Stage.RELEASE, Outcome.FAILED),
    (Stage.RELEASE, Outcome.CANCELLED),
)


def look(client, user, path: str = "/") -> str:
    with time_machine.travel(MORNING, tick=False):
        client.force_login(user)
        response = client.get(path)
    assert response.status_code == 200
    return response.content.decode()


def job_cards(page: str) -> list[str]:
    return re.findall(r'<a class="job-link" href="/jobs/[^"]+/"><strong>([^<]*)</strong>', page)


def section(page: str, tag: str) -> str:
    start = page.index(f'<ol class="ended" id="{tag}"')
    return page[start : page.index("\n</ol>", start)]


def array_at(member, team, image, name: str, states, *, hours: int):
    array = JobArrayFactory(team=team, submitted_by=member, name=name, submitted_at=EVENING)
    array_tasks(array, image, states, at=EVENING + timedelta(hours=hours))
    return array


@pytest.fixture
def sweep(member, paris, image):
    """Twenty tasks ended overnight: seventeen succeeded, three failed."""
    return array_at(member, paris, image, "lr sweep", [SUCCEEDED] * 17 + [FAILED] * 3, hours=2)


@pytest.fixture
def broken(member, paris, image, local_node):
    """prepare fails → train (an array, after ok) and evaluate (after ok on train) are cancelled."""
    prepare = ended_job(member, paris, outcome=Outcome.FAILED, at=EVENING + timedelta(hours=1), exit_code=2,
                        reason="exit code 2", name="prepare", log=b"reading shards\nKeyError: 'label'\n")  # fmt: skip
    train = array_at(member, paris, image, "train", [CANCELLED] * 4, hours=1)
    evaluate = ended_job(member, paris, outcome=Outcome.CANCELLED, at=EVENING + timedelta(hours=1), ran=timedelta(0),
                         name="evaluate")  # fmt: skip
    Dependency.objects.bulk_create([
        Dependency(array=train, on_job=prepare, kind=OK), Dependency(job=evaluate, on_array=train, kind=OK),
    ])  # fmt: skip
    return {"prepare": prepare, "train": train, "evaluate": evaluate}


def test_an_array_is_one_row_with_its_counts_not_a_card_per_task(client, member, sweep, local_node):
    lone = ended_job(member, sweep.team, outcome=Outcome.SUCCEEDED, at=EVENING + timedelta(hours=3), name="lone")

    page = look(client, member)

    assert job_cards(page) == ["lone"]  # an ordinary job keeps its card; no task has one
    rows = section(page, "arrays")
    assert rows.count('<li class="ended-array') == 1
    assert f'href="/arrays/{sweep.pk}/"><strong>lr sweep</strong></a> <span class="muted">array of 20</span>' in rows
    counts = dict(re.findall(r'<li data-key="(\w+)">.*?</span>[^<]*<strong>(\d+)</strong></li>', rows))
    assert counts == {"failed": "3", "succeeded": "17"}
    assert 'class="ended-array failure"' in rows  # a task failed: marked as the failed cards are
    assert '21 jobs <span class="muted">(1 alone · 1 array)</span>' in page and lone.name in page  # its 20 tasks too


def test_a_broken_pipeline_is_one_line_naming_where_it_broke_and_what_was_cancelled(client, member, broken):
    page = look(client, member)

    assert job_cards(page) == []  # its jobs are in its line, not cards of their own
    lines = section(page, "pipelines")
    assert lines.count('<li class="ended-pipeline') == 1 and 'class="ended-pipeline failure"' in lines
    steps = re.findall(r'<li(?: class="broke")? data-state="(\w+)"><a href="/(\w+)/[^"]+/">([^<]+)</a>', lines)
    assert steps == [("failed", "jobs", "prepare"), ("cancelled", "arrays", "train"),
                     ("cancelled", "jobs", "evaluate")]  # fmt: skip
    assert '<li class="broke" data-state="failed">' in lines
    assert (
        'Broke at <strong class="broke-at">prepare</strong>: failed, exit code <strong class="exit-code">2</strong>'
        in (lines)
    )
    assert 'cancelled after it: <span class="cancelled-after">train, evaluate</span>' in lines
    assert "</strong> · exit code 2" not in lines  # its reason is not its exit code said twice
    assert "KeyError: &#x27;label&#x27;" in lines  # the broken step's own last lines
    assert "1 pipeline" in page


def test_a_pipeline_that_broke_at_an_array_counts_its_tasks(client, member, paris, image, local_node):
    prepare = ended_job(member, paris, outcome=Outcome.SUCCEEDED, at=EVENING + timedelta(hours=1), name="prepare")
    train = array_at(member, paris, image, "train", [SUCCEEDED, FAILED, FAILED], hours=2)
    evaluate = ended_job(member, paris, outcome=Outcome.CANCELLED, at=EVENING + timedelta(hours=2), ran=timedelta(0),
                         name="evaluate")  # fmt: skip
    Dependency.objects.bulk_create([
        Dependency(array=train, on_job=prepare, kind=OK), Dependency(job=evaluate, on_array=train, kind=OK),
    ])  # fmt: skip

    lines = section(look(client, member), "pipelines")

    assert 'Broke at <strong class="broke-at">train</strong>: 2 failed, 1 succeeded of 3' in lines
    assert '<span class="cancelled-after">evaluate</span>' in lines
    assert '<li data-state="succeeded"><a href="/jobs/' in lines  # prepare, before it, succeeded


def test_a_pipeline_that_succeeded_or_still_runs_says_so(client, member, paris, image, local_node):
    a = ended_job(member, paris, outcome=Outcome.SUCCEEDED, at=EVENING + timedelta(hours=1), name="extract")
    b = ended_job(member, paris, outcome=Outcome.SUCCEEDED, at=EVENING + timedelta(hours=2), name="load")
    Dependency.objects.create(job=b, on_job=a, kind=ANY)
    c = ended_job(member, paris, outcome=Outcome.SUCCEEDED, at=EVENING + timedelta(hours=3), name="fetch")
    d = array_at(member, paris, image, "score", [SUCCEEDED, (Stage.RUN, ""), (Stage.SUBMIT, "")], hours=4)
    Dependency.objects.create(array=d, on_job=c, kind=OK)

    lines = section(look(client, member), "pipelines")

    assert "Every step succeeded." in lines and "Now at <strong>score</strong>: waiting." in lines
    assert "failure" not in lines


def test_broken_pipelines_and_failed_arrays_come_first(client, member, paris, image, broken, sweep):
    fine = array_at(member, paris, image, "all good", [SUCCEEDED] * 2, hours=9)  # the latest, but no failure

    page = look(client, member)

    arrays = re.findall(r'class="array-link" href="/arrays/[^"]+/"><strong>([^<]+)<', section(page, "arrays"))
    assert arrays == ["lr sweep", "all good"] and fine.name == "all good"


def test_an_array_runs_and_waits_as_one_row(client, member, paris, image):
    array = JobArrayFactory(team=paris, submitted_by=member, name="grid search", submitted_at=MORNING, max_running=2)
    array_tasks(array, image, [(Stage.RUN, "")] * 2 + [(Stage.SUBMIT, "")] * 30, at=MORNING - timedelta(minutes=5))

    for path in ("/", "/review/now/"):
        page = look(client, member, path)
        assert f'id="running-array-{array.pk}" href="/arrays/{array.pk}/">grid search</a>' in page
        assert "2 of 32 tasks running" in page and "30 of 32 tasks waiting" in page
        assert not re.search(r'id="(running|waiting)-[0-9a-f]{8}-', page)  # no row per task
        assert "grid search[" not in page


def test_another_teams_arrays_and_pipelines_are_not_in_my_review(client, outsider, broken, sweep):
    page = look(client, outsider)

    assert 'id="pipelines"' not in page and 'id="arrays"' not in page and "lr sweep" not in page


@pytest.mark.parametrize("count", [1, 8])
def test_pipelines_and_arrays_keep_the_reviews_query_count(
    client, member, paris, image, local_node, count, django_assert_max_num_queries
):
    for n in range(count):
        first = ended_job(member, paris, outcome=Outcome.FAILED, at=EVENING + timedelta(minutes=n + 1), name=f"p{n}")
        middle = array_at(member, paris, image, f"a{n}", [CANCELLED] * 50, hours=1)
        last = array_at(member, paris, image, f"b{n}", [CANCELLED] * 5, hours=1)
        Dependency.objects.bulk_create([
            Dependency(array=middle, on_job=first, kind=OK), Dependency(array=last, on_array=middle, kind=OK),
        ])  # fmt: skip
        array_at(member, paris, image, f"alone {n}", [SUCCEEDED] * 100 + [FAILED], hours=3)
        ended_job(member, paris, outcome=Outcome.SUCCEEDED, at=EVENING + timedelta(hours=4, minutes=n), name=f"j{n}")

    with time_machine.travel(MORNING, tick=False):
        client.force_login(member)
        with django_assert_max_num_queries(19):  # as the review without them (tests/dashboard/test_review.py)
            response = client.get("/")

    page = response.content.decode()
    assert page.count('<li class="ended-pipeline') == count and page.count('<li class="ended-array') == count
    assert len(job_cards(page)) == count
