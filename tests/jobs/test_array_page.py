"""An array's page at /arrays/<id>/: its counts and the grid of its tasks (failures first), drawn in a
bounded number of queries however many tasks; another team's array is 404; cancel and resubmit failed."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.lifecycle.actions import schedule_pass
from jobs.models import Dependency, Job, JobArray, Outcome, Stage
from jobs.web import array_page
from jobs.web.array_page import array_for
from tests.factories import JobArrayFactory, array_tasks, run_to_release, submit_array_of
from tests.jobs.conftest import T0

ENDED = {outcome: (Stage.RELEASE, outcome) for outcome in Outcome.values}


@pytest.fixture
def me(client, member):
    client.force_login(member)
    return client


@pytest.fixture
def sweep(member, team, image):
    """Eight tasks: two failed ways, one running, one waiting, the rest succeeded or cancelled."""
    array = JobArrayFactory(team=team, submitted_by=member, name="lr sweep", max_running=2)
    states = [ENDED["succeeded"], ENDED["failed"], ENDED["succeeded"], (Stage.RUN, ""), (Stage.SUBMIT, ""),
              ENDED["out_of_memory"], ENDED["cancelled"], ENDED["succeeded"]]  # fmt: skip
    array_tasks(array, image, states)
    return array


def cells(page: str) -> list[tuple[str, str, str]]:
    """The grid's cells in order: (job id, index, words)."""
    return re.findall(r'<a href="/jobs/([0-9a-f-]+)/" title="task (\d+): ([^"]+)"></a>', page)


def test_the_page_shows_the_arrays_settings_stage_and_counts(me, sweep):
    response = me.get(f"/arrays/{sweep.pk}/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "lr sweep" in page and "array of 8" in page
    assert "at most 2 tasks hold compute" in page
    assert 'id="array-stage">submit<' in page  # a task still waits: the earliest stage a task is at
    counts = dict(re.findall(r'<li data-key="(\w+)">.*?<strong>(\d+)</strong></li>', page))
    assert counts == {"failed": "1", "out_of_memory": "1", "run": "1", "submit": "1", "cancelled": "1",
                      "succeeded": "3"}  # fmt: skip


def test_the_grid_has_a_cell_per_task_failures_first_each_linking_to_its_task(me, sweep):
    page = me.get(f"/arrays/{sweep.pk}/").content.decode()

    shown = cells(page)
    assert [(index, words) for _, index, words in shown] == [
        ("1", "failed"), ("5", "out of memory"), ("3", "running"), ("4", "waiting"), ("6", "cancelled"),
        ("0", "succeeded"), ("2", "succeeded"), ("7", "succeeded"),
    ]  # fmt: skip
    by_index = {str(job.array_index): str(job.pk) for job in sweep.tasks.all()}
    assert all(by_index[index] == pk for pk, index, _ in shown)
    # Each group says in words where its tasks are, and each cell carries a mark of its own (not colour alone).
    assert re.findall(r'<h3 class="task-group-h">([^<]+)</h3>', page)[:2] == ["failed · 1", "out of memory · 1"]
    assert '<div class="task-grid c-failed">' in page and '<div class="task-grid c-succeeded">' in page


def test_another_teams_array_is_404(client, outsider, sweep):
    client.force_login(outsider)

    assert client.get(f"/arrays/{sweep.pk}/").status_code == 404
    assert client.post(f"/arrays/{sweep.pk}/cancel/").status_code == 404
    assert client.post(f"/arrays/{sweep.pk}/resubmit/").status_code == 404


def test_an_unknown_array_is_404_and_the_page_needs_a_login(client, me, sweep):
    assert me.get("/arrays/00000000-0000-0000-0000-000000000000/").status_code == 404
    me.logout()
    assert me.get(f"/arrays/{sweep.pk}/")["Location"] == f"/login/?next=/arrays/{sweep.pk}/"


def test_cancel_shows_while_a_task_is_not_released_and_resubmit_while_some_failed(me, member, team, image, sweep):
    page = me.get(f"/arrays/{sweep.pk}/").content.decode()
    assert 'id="cancel-array"' in page and "Resubmit failed (2)" in page
    assert 'hx-confirm="Cancel every task of lr sweep not ended yet?"' in page

    done = JobArrayFactory(team=team, submitted_by=member, name="all good")
    array_tasks(done, image, [ENDED["succeeded"]] * 3)
    page = me.get(f"/arrays/{done.pk}/").content.decode()
    assert 'id="array-stage">release<' in page
    assert 'id="cancel-array"' not in page and 'id="resubmit-failed"' not in page


def test_the_array_page_shows_what_it_waits_for_and_what_waits_for_it(me, member, team, image, sweep):
    prepare = Job.objects.filter(array=sweep).first()
    upstream = JobArrayFactory(team=team, submitted_by=member, name="prepare shards")
    array_tasks(upstream, image, [ENDED["succeeded"]] * 2)
    evaluate = JobArrayFactory(team=team, submitted_by=member, name="evaluate")
    Dependency.objects.create(array=sweep, on_array=upstream, kind=Dependency.Kind.OK)
    Dependency.objects.create(array=evaluate, on_array=sweep, kind=Dependency.Kind.ANY)
    assert prepare is not None

    page = me.get(f"/arrays/{sweep.pk}/").content.decode()

    up = page[page.index('id="upstream"') : page.index("</ul>", page.index('id="upstream"'))]
    assert f'href="/arrays/{upstream.pk}/">prepare shards</a>' in up and "after ok" in up and "2 succeeded" in up
    down = page[page.index('id="downstream"') :]
    assert f'href="/arrays/{evaluate.pk}/">evaluate</a>' in down and "after any" in down


def test_an_array_stopped_just_after_the_page_read_it_shows_the_stop_that_cancelled_its_tasks(
    me, member, team, image, local_node, monkeypatch
):
    array = submit_array_of(member, team, range(3), max_running=1, stop_after_failures=1, image=image)
    schedule_pass(now=T0)
    run_to_release(Job.objects.get(array=array, array_index=0), now=T0, outcome=Outcome.FAILED, exit_code=1)

    def read_then_stopped(user, array_id):
        read = array_for(user, array_id)
        # The pass that settles the failure stops the array here: after the page read it, before it counts its tasks.
        schedule_pass(now=T0)
        return read

    monkeypatch.setattr(array_page, "array_for", read_then_stopped)
    page = me.get(f"/arrays/{array.pk}/").content.decode()

    assert 'id="array-stage">release<' in page
    counts = dict(re.findall(r'<li data-key="(\w+)">.*?<strong>(\d+)</strong></li>', page))
    assert counts == {"failed": "1", "cancelled": "2"}
    assert "<dt>Stopped</dt>" in page and " · 1 tasks failed (stop_after_failures=1)</dd>" in page


@pytest.mark.parametrize("size", [10, 1000])
def test_a_large_array_draws_in_a_bounded_number_of_queries(me, member, team, image, size,
                                                            django_assert_max_num_queries):  # fmt: skip
    array = JobArrayFactory(team=team, submitted_by=member, name="big")
    states = [ENDED["failed"] if i % 97 == 0 else ENDED["succeeded"] if i % 3 else (Stage.SUBMIT, "")
              for i in range(size)]  # fmt: skip
    array_tasks(array, image, states)

    with django_assert_max_num_queries(12):
        response = me.get(f"/arrays/{array.pk}/")

    assert response.status_code == 200 and len(cells(response.content.decode())) == size


def test_a_task_of_ten_thousand_is_a_small_cell(me, member, team, image):
    """The grid's weight is what a cell costs: a link and its title, no markup of its own per task."""
    array = JobArrayFactory(team=team, submitted_by=member, name="huge")
    array_tasks(array, image, [ENDED["succeeded"]] * 10_000)
    started = timezone.now()

    response = me.get(f"/arrays/{array.pk}/")

    assert response.status_code == 200
    assert len(response.content) < 10_000 * 90 + 20_000
    assert timezone.now() - started < timedelta(seconds=5)  # generous: a template loop took far longer


# --- cancel and resubmit (jobs.submit.arrays) --------------------------------------------------------


def test_cancel_asks_jobs_arrays_and_says_how_many(me, member, sweep):
    response = me.post(f"/arrays/{sweep.pk}/cancel/", follow=True)

    assert response.redirect_chain[-1][0] == f"/arrays/{sweep.pk}/"
    page = response.content.decode()
    assert re.search(r"Cancel asked for \d+ tasks? of lr sweep", page)
    assert not Job.objects.filter(array=sweep, stage=Stage.SUBMIT).exists()


def test_cancel_from_the_confirm_shows_the_page_again(me, sweep):
    response = me.post(f"/arrays/{sweep.pk}/cancel/", HTTP_HX_REQUEST="true")

    assert response["HX-Redirect"] == f"/arrays/{sweep.pk}/"


def test_resubmit_failed_makes_a_new_array_of_the_failed_indices_and_shows_it(me, member, sweep, local_node):
    response = me.post(f"/arrays/{sweep.pk}/resubmit/")

    again = JobArray.objects.exclude(pk=sweep.pk).get(resubmitted_from=sweep)
    assert response.status_code == 302 and response["Location"] == f"/arrays/{again.pk}/"
    assert sorted(again.tasks.values_list("array_index", flat=True)) == [1, 5]


def test_resubmit_with_nothing_failed_says_so(me, member, team, image):
    done = JobArrayFactory(team=team, submitted_by=member, name="all good")
    array_tasks(done, image, [ENDED["succeeded"]] * 2)

    response = me.post(f"/arrays/{done.pk}/resubmit/", follow=True)

    assert "nothing to resubmit" in response.content.decode()
    assert JobArray.objects.count() == 1


# --- the task table ------------------------------------------------------------------------------------


def task_rows(page: str) -> list[list[str]]:
    """The task table's rows as a person reads them: each cell's text."""
    body = re.search(r'<tbody id="task-rows">(.*?)</tbody>', page, re.S)
    assert body, "no task table"
    rows = re.findall(r"<tr data-place=.*?</tr>", body[1], re.S)
    return [[re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in rows]  # fmt: skip


def test_the_task_table_shows_each_tasks_index_outcome_exit_code_last_line_run_time_and_attempts(me, sweep):
    Job.objects.filter(array=sweep, array_index=1).update(
        exit_code=3, failure_excerpt="Traceback (most recent call last):\nValueError: lr too high",
        started_at=T0, finished_at=T0 + timedelta(seconds=166),
    )  # fmt: skip

    page = me.get(f"/arrays/{sweep.pk}/").content.decode()

    assert re.findall(r'<th scope="col">([^<]+)</th>', page.split('id="task-table"')[1].split("</thead>")[0]) == [
        "Task", "Outcome", "Exit code", "Last log line", "Run time", "Attempts"]  # fmt: skip
    shown = task_rows(page)
    assert shown[0] == ["lr sweep[1]", "failed", "3", "ValueError: lr too high", "2 m 46 s", "1"]
    assert [row[0] for row in shown] == [f"lr sweep[{i}]" for i in (1, 5, 3, 4, 6, 0, 2, 7)]  # failures first
    assert shown[-1] == ["lr sweep[7]", "succeeded", "—", "", "—", "1"]


def test_the_task_table_filters_by_outcome_with_links_that_need_no_script(me, sweep):
    page = me.get(f"/arrays/{sweep.pk}/").content.decode()
    links = dict(re.findall(r'<a href="\?outcome=(\w+)#task-table"[^>]*>([^<]+) <strong>', page))
    assert links == {"failed": "failed", "out_of_memory": "out of memory", "run": "running", "submit": "waiting",
                     "cancelled": "cancelled", "succeeded": "succeeded"}  # fmt: skip

    failed = me.get(f"/arrays/{sweep.pk}/?outcome=out_of_memory").content.decode()
    succeeded = me.get(f"/arrays/{sweep.pk}/?outcome=succeeded").content.decode()

    assert [row[:2] for row in task_rows(failed)] == [["lr sweep[5]", "out of memory"]]
    assert [row[0] for row in task_rows(succeeded)] == ["lr sweep[0]", "lr sweep[2]", "lr sweep[7]"]
    assert 'aria-current="page">succeeded <strong>3</strong>' in succeeded
    assert len(cells(succeeded)) == 8  # the grid keeps every task


def test_a_bad_outcome_filter_is_400_and_says_so(me, sweep):
    response = me.get(f"/arrays/{sweep.pk}/?outcome=fine")

    assert response.status_code == 400
    page = response.content.decode()
    assert "The outcome filter has a bad value." in page and task_rows(page) == []
    assert "hx-trigger" not in live_div(page)  # a bad address is not asked again every few seconds


def test_the_task_table_is_paged(me, member, team, image, monkeypatch):
    monkeypatch.setattr(array_page, "TASKS_PAGE_SIZE", 3)
    array = JobArrayFactory(team=team, submitted_by=member, name="paged")
    array_tasks(array, image, [ENDED["succeeded"]] * 7)

    first = me.get(f"/arrays/{array.pk}/").content.decode()
    last = me.get(f"/arrays/{array.pk}/?page=3").content.decode()

    assert [row[0] for row in task_rows(first)] == ["paged[0]", "paged[1]", "paged[2]"]
    assert [row[0] for row in task_rows(last)] == ["paged[6]"] and "7–7 of 7" in last
    assert me.get(f"/arrays/{array.pk}/?page=4").status_code == 404


# --- the live part, polled while a task has not ended ---------------------------------------------------


def poll(client, url: str, key: str | None = None):
    """The live part's poll as htmx sends it: with the key of what it shows, once it has one."""
    return client.get(url, headers={"HX-Request": "true", **({"X-E31-Shown": key} if key else {})})


def live_div(page: str) -> str:
    found = re.search(r'<div id="array-live"([^>]*)>', page)
    assert found, "no live part"
    return found[1]


def shown(page: str) -> str:
    found = re.search(r'"X-E31-Shown": "([0-9a-f]{16})"', live_div(page))
    assert found, "the live part sends no key"
    return found[1]


def test_an_unfinished_array_polls_its_live_part_at_the_pages_own_address(me, sweep):
    page = me.get(f"/arrays/{sweep.pk}/?outcome=succeeded&page=1").content.decode()

    live = live_div(page)
    assert f'hx-get="/arrays/{sweep.pk}/?outcome=succeeded&amp;page=1"' in live
    assert 'hx-trigger="every 5s"' in live and 'hx-swap="outerHTML"' in live
    assert shown(page)
    assert '<p id="array-status" class="visually-hidden" aria-live="polite"></p>' in page
    assert "<script>" not in page and "style=" not in page  # the CSP allows neither inline


def test_a_big_array_polls_less_often(me, sweep):
    JobArray.objects.filter(pk=sweep.pk).update(size=4000)  # a changed poll sends a link per task

    assert 'hx-trigger="every 20s"' in live_div(me.get(f"/arrays/{sweep.pk}/").content.decode())


def test_the_poll_answers_the_live_part_alone_with_the_same_filter_and_page(me, sweep):
    response = poll(me, f"/arrays/{sweep.pk}/?outcome=succeeded")

    page = response.content.decode()
    assert response.status_code == 200 and "HX-Request" in response["Vary"]
    assert "<h1>" not in page and "<html" not in page and live_div(page)
    assert [row[0] for row in task_rows(page)] == ["lr sweep[0]", "lr sweep[2]", "lr sweep[7]"]
    assert 'aria-current="page">succeeded <strong>3</strong>' in page
    assert len(cells(page)) == 8  # the grid, every task
    status = '<p id="array-status" class="visually-hidden" aria-live="polite" hx-swap-oob="true">'
    assert f"{status}lr sweep: 6 of 8 tasks ended.</p>" in page


def test_the_poll_is_204_while_nothing_changed_then_shows_a_task_that_ended(me, member, team, image, local_node):
    array = submit_array_of(member, team, range(3), image=image, name="sweep")
    schedule_pass(now=T0)
    url = f"/arrays/{array.pk}/"
    key = shown(me.get(url).content.decode())
    assert poll(me, url, key).status_code == 204

    run_to_release(Job.objects.get(array=array, array_index=1), now=T0, outcome=Outcome.FAILED, exit_code=2)
    response = poll(me, url, key)

    page = response.content.decode()
    assert response.status_code == 200
    assert task_rows(page)[0][:3] == ["sweep[1]", "failed", "2"]
    assert "Resubmit failed (1)" in page and ">sweep: 1 of 3 tasks ended.</p>" in page
    assert shown(page) != key and poll(me, url, shown(page)).status_code == 204


def test_an_unchanged_poll_reads_the_counts_alone(me, member, team, image, django_assert_max_num_queries):
    array = JobArrayFactory(team=team, submitted_by=member, name="big")
    array_tasks(array, image, [(Stage.RUN, "")] * 500 + [ENDED["succeeded"]] * 500)
    url = f"/arrays/{array.pk}/"
    key = shown(me.get(url).content.decode())

    with django_assert_max_num_queries(4) as captured:  # the session, the user, the array, its counts
        assert poll(me, url, key).status_code == 204

    assert not any("array_index" in query["sql"] for query in captured.captured_queries)  # no grid, no table


def test_a_retry_shows_though_another_tasks_step_evens_out_the_counts(me, member, team, image):
    array = JobArrayFactory(team=team, submitted_by=member, name="even")
    array_tasks(array, image, [(Stage.RUN, ""), (Stage.SUBMIT, "")])
    url = f"/arrays/{array.pk}/"
    key = shown(me.get(url).content.decode())

    # Task 0 failed and went back to wait as its second attempt while task 1 started: still one running, one waiting.
    Job.objects.filter(array=array, array_index=0).update(stage=Stage.SUBMIT, attempt=2)
    Job.objects.filter(array=array, array_index=1).update(stage=Stage.RUN)
    response = poll(me, url, key)

    assert response.status_code == 200
    assert [row[0] + " " + row[1] for row in task_rows(response.content.decode())] == ["even[1] run", "even[0] submit"]


def test_the_poll_stops_with_286_and_the_last_state_once_every_task_has_ended(me, member, team, image, local_node):
    array = submit_array_of(member, team, range(2), image=image, name="pair")
    schedule_pass(now=T0)
    url = f"/arrays/{array.pk}/"
    key = shown(me.get(url).content.decode())
    for task in Job.objects.filter(array=array):
        run_to_release(task, now=T0)

    response = poll(me, url, key)

    page = response.content.decode()
    assert response.status_code == 286  # htmx stops polling, and swaps this last answer in
    assert 'id="array-stage">release<' in page and ">pair: 2 of 2 tasks ended.</p>" in page
    assert live_div(page) == "" and 'id="cancel-array"' not in page
    assert live_div(me.get(url).content.decode()) == ""  # the page, loaded again, does not poll


def test_a_poll_for_a_page_its_tasks_have_left_shows_the_last_page_there_is(me, member, team, image, monkeypatch):
    monkeypatch.setattr(array_page, "TASKS_PAGE_SIZE", 2)
    array = JobArrayFactory(team=team, submitted_by=member, name="moving")
    array_tasks(array, image, [(Stage.RUN, "")] * 3)
    url = f"/arrays/{array.pk}/?outcome=run&page=2"
    key = shown(me.get(url).content.decode())
    Job.objects.filter(array=array, array_index=2).update(stage=Stage.RELEASE, outcome=Outcome.SUCCEEDED)

    response = poll(me, url, key)

    assert response.status_code == 200
    assert [row[0] for row in task_rows(response.content.decode())] == ["moving[0]", "moving[1]"]
    assert me.get(url).status_code == 404  # the page itself, asked for a page that is no more, says so


def test_another_teams_array_is_404_to_its_poll(client, outsider, sweep):
    client.force_login(outsider)

    assert poll(client, f"/arrays/{sweep.pk}/").status_code == 404
