"""Arrays (jobs.submit.arrays, jobs.lifecycle.chains): tasks that are jobs of their own, let go within max_running,
stopped
after their failures, cancelled and resubmitted whole."""

from datetime import timedelta

import pytest

from accounting.models import Record
from jobs.lifecycle import actions
from jobs.lifecycle.actions import schedule_pass
from jobs.lifecycle.array_state import counts, stage_of
from jobs.models import DataFile, Job, JobEvent, Outcome, Stage, StoredBlob
from jobs.submit.again import NothingToResubmit, resubmit_array
from jobs.submit.arrays import cancel_array
from tests.factories import run_to_release, submit_array_of
from tests.jobs.conftest import T0

LATER = T0 + timedelta(minutes=1)


def tasks(array) -> list[Job]:
    return list(Job.objects.filter(array=array).order_by("array_index"))


def test_each_task_is_a_job_that_knows_its_index_and_names_the_data_stored_once(member, team, image):
    array = submit_array_of(member, team, [0, 5, 10], image=image, files={"in.csv": "a,b\n"})

    found = tasks(array)
    assert [t.array_index for t in found] == [0, 5, 10]
    assert [t.env["E31_ARRAY_INDEX"] for t in found] == ["0", "5", "10"]
    assert {t.env["E31_ARRAY_SIZE"] for t in found} == {"3"} and {t.env["E31_ARRAY_ID"] for t in found} == {
        str(array.pk)
    }
    files = DataFile.objects.filter(job__array=array)
    assert files.count() == 3 and len({f.blob_id for f in files}) == 1
    assert StoredBlob.objects.filter(team=team).count() == 1
    assert JobEvent.objects.filter(job__array=array, event="submit").count() == 3
    assert array.size == 3 and stage_of(array) == Stage.SUBMIT and counts(array) == {Stage.SUBMIT: 3}


def test_max_running_lets_only_that_many_tasks_be_held_and_the_next_go_as_one_ends(member, team, image, local_node):
    array = submit_array_of(member, team, range(5), max_running=2, image=image)
    first = tasks(array)
    assert [t.held_back for t in first] == [False, False, True, True, True]
    assert "at most 2 tasks" in first[2].wait_reason

    holds = schedule_pass(now=T0)
    assert sorted(Job.objects.get(pk=h.job_id).array_index for h in holds) == [0, 1]

    run_to_release(Job.objects.get(array=array, array_index=0), now=LATER)
    holds = schedule_pass(now=LATER)
    assert [Job.objects.get(pk=h.job_id).array_index for h in holds] == [2]
    assert Job.objects.filter(array=array, stage__in=[Stage.RENT, Stage.RUN]).count() == 2


def test_an_array_is_released_once_every_task_is(member, team, image, local_node):
    array = submit_array_of(member, team, range(2), image=image)
    schedule_pass(now=T0)
    for task in tasks(array):
        run_to_release(task, now=LATER)
    schedule_pass(now=LATER)

    array.refresh_from_db()
    assert stage_of(array) == Stage.RELEASE and counts(array) == {Outcome.SUCCEEDED: 2}
    assert array.released_at == LATER


def test_cancel_ends_every_task_not_released_and_only_those_that_held_compute_have_records(
    member, team, image, local_node
):
    array = submit_array_of(member, team, range(4), max_running=2, image=image)
    schedule_pass(now=T0)
    done, running = tasks(array)[:2]
    run_to_release(done, now=LATER)
    assert actions.start_run(running, now=LATER)

    cancel_array(array, now=LATER, acting_user=member)

    found = {t.array_index: t for t in tasks(array)}
    assert found[0].outcome == Outcome.SUCCEEDED
    assert found[1].stage == Stage.RUN and found[1].cancel_requested  # its node stops it
    assert all(found[i].outcome == Outcome.CANCELLED for i in (2, 3))
    assert "cancelled with its array by alice" in found[2].reason
    assert Record.objects.filter(job_id__in=[found[2].pk, found[3].pk]).count() == 0
    assert Record.objects.filter(job_id=found[0].pk).count() == 1
    schedule_pass(now=LATER)  # nothing is let go of a stopped array
    assert Job.objects.filter(array=array, stage=Stage.RENT).count() == 0


def test_stop_after_failures_cancels_the_rest(member, team, image, local_node):
    array = submit_array_of(member, team, range(5), max_running=2, stop_after_failures=2, image=image)
    schedule_pass(now=T0)
    for task in tasks(array)[:2]:
        run_to_release(task, now=LATER, outcome=Outcome.FAILED, exit_code=1)

    schedule_pass(now=LATER)

    found = tasks(array)
    assert [t.outcome for t in found] == [Outcome.FAILED] * 2 + [Outcome.CANCELLED] * 3
    assert "2 tasks failed (stop_after_failures=2)" in found[4].reason
    array.refresh_from_db()
    assert array.stopped_at == LATER


def test_resubmit_failed_runs_the_failed_indices_again_with_the_same_data(member, team, image, local_node):
    array = submit_array_of(member, team, range(3), image=image, files={"in.csv": "x"})
    a, b, c = tasks(array)
    for task, outcome in ((a, Outcome.SUCCEEDED), (b, Outcome.FAILED), (c, Outcome.OUT_OF_MEMORY)):
        schedule_pass(now=T0)  # this machine's node may hold only one or two at once
        run_to_release(task, now=LATER, outcome=outcome, exit_code=0 if outcome == Outcome.SUCCEEDED else 1)

    again = resubmit_array(array, only="failed", user=member)

    assert [t.array_index for t in tasks(again)] == [1, 2] and again.size == 2
    assert again.resubmitted_from == array
    assert {f.blob_id for f in DataFile.objects.filter(job__array__in=[array, again])} == {
        DataFile.objects.filter(job=a).get().blob_id
    }


def test_resubmitting_an_array_without_failures_says_so(member, team, image, local_node):
    array = submit_array_of(member, team, range(1), image=image)
    schedule_pass(now=T0)
    run_to_release(tasks(array)[0], now=LATER)

    with pytest.raises(NothingToResubmit):
        resubmit_array(array, only="failed", user=member)
