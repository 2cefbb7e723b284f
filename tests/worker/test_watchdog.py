"""The node's watchdog (run by each heartbeat): a run held here that no process watches is sent to
the node's queue again, and what runs that are over left on the node's disk is removed."""

import os
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from jobs.lifecycle import actions
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, Stage
from tests.conftest import SENT
from tests.factories import submit_job
from worker import watchdog
from worker.runlock import RunLock, is_watched
from worker.scratch import Scratch, remove_folder


@pytest.fixture(autouse=True)
def _nothing_sent_yet(monkeypatch):
    monkeypatch.setattr(watchdog, "_sent", {})
    SENT.clear()


def held(job: Job, *, now=None) -> Job:
    schedule_pass(now=now or timezone.now())
    job.refresh_from_db()
    assert job.stage == Stage.RENT
    return job


def running(job: Job) -> Job:
    held(job)
    assert actions.start_run(job, now=timezone.now())
    return job


def runs_sent() -> list[tuple[str, str]]:
    return [(args[0], queue) for task, args, queue in SENT if task == "worker.run"]


def key(job: Job) -> str:
    return f"{job.pk}-{job.attempt}"


def test_a_run_held_here_that_no_process_watches_is_sent_again_to_the_nodes_queue(member, team, local_node):
    job = running(submit_job(member, team))

    assert watchdog.look_after_runs(local_node, now=timezone.now()) == [key(job)]

    assert runs_sent() == [(str(job.pk), local_node.queue)]


def test_a_run_sent_again_is_not_sent_once_more_at_every_beat(member, team, local_node):
    job = running(submit_job(member, team))
    watchdog.look_after_runs(local_node, now=timezone.now())

    assert watchdog.look_after_runs(local_node, now=timezone.now()) == []

    assert runs_sent() == [(str(job.pk), local_node.queue)]


def test_a_watched_run_is_left_to_its_watcher(member, team, local_node):
    job = running(submit_job(member, team))
    lock = RunLock(key(job))
    assert lock.acquire()
    try:
        assert is_watched(key(job))
        assert watchdog.look_after_runs(local_node, now=timezone.now()) == []
    finally:
        lock.release()
    assert not is_watched(key(job))


def test_a_held_run_that_has_not_started_after_a_while_is_sent_again(member, team, local_node):
    now = timezone.now()
    late = held(submit_job(member, team, name="held a minute ago"), now=now - timedelta(minutes=1))
    held(submit_job(member, team, name="held just now"), now=now)

    assert watchdog.look_after_runs(local_node, now=now) == [key(late)]


def test_a_held_run_is_sent_again_once_it_waited_the_resend_interval_and_not_before(member, team, local_node, settings):
    settings.E31_RESEND_AFTER_S = 20
    now = timezone.now()
    job = held(submit_job(member, team), now=now - timedelta(seconds=10))

    assert watchdog.look_after_runs(local_node, now=now) == []
    assert watchdog.look_after_runs(local_node, now=now + timedelta(seconds=11)) == [key(job)]


def test_a_run_sent_again_is_sent_once_more_after_the_resend_interval(member, team, local_node, settings):
    settings.E31_RESEND_AFTER_S = 1
    job = running(submit_job(member, team))
    watchdog.look_after_runs(local_node, now=timezone.now())
    watchdog._sent[key(job)] -= 1  # as if a second went by

    assert watchdog.look_after_runs(local_node, now=timezone.now()) == [key(job)]


def test_a_released_run_is_not_sent(member, team, local_node):
    job = running(submit_job(member, team))
    actions.cancel(job, now=timezone.now())  # asks its watcher: still running
    actions.finish_run(job, outcome="cancelled", exit_code=None, reason="", now=timezone.now())
    actions.release(job, outcome="cancelled", reason="", now=timezone.now())

    assert watchdog.look_after_runs(local_node, now=timezone.now()) == []


def scratch_of(name: str, *, age_s: float) -> Path:
    folder = Path(settings.E31_SCRATCH_DIR) / name
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "train.csv").write_text("secret")
    then = time.time() - age_s
    os.utime(folder, (then, then))
    return folder


def test_the_scratch_folder_a_run_that_is_over_left_behind_is_removed(member, team, local_node):
    over = submit_job(member, team, name="over")
    actions.cancel(over, now=timezone.now())
    left = scratch_of(str(over.pk), age_s=120)

    watchdog.look_after_runs(local_node, now=timezone.now())

    assert not left.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root may mount a run's filesystems")
def test_a_left_scratch_folders_filesystems_are_unmounted_and_the_folder_removed(member, team, local_node):
    over = submit_job(member, team, name="over")
    actions.cancel(over, now=timezone.now())
    left = Scratch(over.pk, uid=os.geteuid())
    left.prepare([])  # its watcher died after the release, before it removed the folder
    then = time.time() - 120
    os.utime(left.root, (then, then))

    try:
        watchdog.look_after_runs(local_node, now=timezone.now())
        mounted = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
        gone = not left.root.exists()
    finally:
        remove_folder(left.root)  # nothing stays mounted, whatever the watchdog did

    assert gone and str(left.output) not in mounted and str(left.data) not in mounted


def test_scratch_folders_of_active_watched_or_new_runs_and_other_files_are_kept(member, team, local_node):
    active = running(submit_job(member, team, name="running here"))
    watched_over = submit_job(member, team, name="released, its watcher still cleaning up")
    actions.cancel(watched_over, now=timezone.now())
    lock = RunLock(key(watched_over))
    assert lock.acquire()
    kept = [
        scratch_of(str(active.pk), age_s=120),
        scratch_of(str(watched_over.pk), age_s=120),
        scratch_of("00000000-0000-0000-0000-000000000001", age_s=1),  # made a moment ago
        scratch_of("not-a-job", age_s=120),
    ]
    try:
        watchdog.look_after_runs(local_node, now=timezone.now())
    finally:
        lock.release()

    assert [folder.exists() for folder in kept] == [True] * 4
