"""A schedule on the real stack: two `celery beat` processes (as two machines each running one by mistake),
the suite's Celery workers (its node and its platform workers), PostgreSQL, a real container. Each planned
minute is one run and one job, submitted within 60 s of its planned time, and the job runs to the end."""

import os
import signal
import subprocess
import sys
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from jobs.models import Job, Outcome
from schedules.models import Schedule, ScheduleRun
from tests.conftest import ROOT, wait_for_release, worker_env
from tests.factories import schedule_of
from tests.workers import _die_with_parent, wait_until

pytestmark = [pytest.mark.docker, pytest.mark.celery]

EVERY_S = 2  # E31_SCHEDULES_EVERY_S of the beats: a pass every 2 s from each


@pytest.fixture
def two_beats(stack, tmp_path):
    """Two beat processes, each with its own schedule file; stopped at the end, even on failure."""
    beats = []
    try:
        for n in (1, 2):
            log_path = ROOT / "var" / "log" / f"test-beat-{settings.E31_SANDBOX_NAMESPACE}-{n}.log"
            log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(log_path, "ab") as log:
                beats.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "celery",
                            "-A",
                            "e31site",
                            "beat",
                            "-l",
                            "info",
                            "-s",
                            str(tmp_path / f"beat-{n}"),
                            "--pidfile",
                            str(tmp_path / f"beat-{n}.pid"),
                        ],
                        cwd=ROOT,
                        env=worker_env(E31_SCHEDULES_EVERY_S=str(EVERY_S)),
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        preexec_fn=_die_with_parent,
                    )  # fmt: skip
                )
        yield beats
    finally:
        for beat in beats:
            os.killpg(beat.pid, signal.SIGTERM)
        for beat in beats:
            try:
                beat.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(beat.pid, signal.SIGKILL)
                beat.wait(5)
        Schedule.objects.update(paused=True)  # a pass the worker still has queued records nothing more


def due_passes_done(worker) -> int:
    """The due passes the suite's schedules worker has finished since it started."""
    return sum(
        1 for line in worker.log_since(worker.offset).splitlines() if "schedules.due[" in line and "succeeded" in line
    )


def test_two_beats_submit_each_planned_minute_once_and_on_time(two_beats, platform_plane, member, team):
    job = {
        "name": "every minute",
        "image": "busybox",
        "command": ["true"],
        "cpus": 1,
        "memory_mb": 64,
        "time_limit_s": 30,
    }
    schedule = schedule_of(member, team, cron="* * * * *", time_zone="UTC", now=timezone.now(), job=job)
    first = schedule.next_run_at
    assert first is not None

    run = wait_until(
        lambda: ScheduleRun.objects.filter(schedule=schedule, planned_at=first).select_related("job").first(),
        75, interval=0.5, message=f"the run planned at {first:%H:%M}",
    )  # fmt: skip
    assert run.status == "submitted" and run.job is not None
    assert wait_for_release(run.job, 60).outcome == Outcome.SUCCEEDED

    # Both beats go on sending passes: once the worker has done a few more, nothing was recorded twice.
    done = due_passes_done(platform_plane["schedules"])
    wait_until(lambda: due_passes_done(platform_plane["schedules"]) >= done + 4, 30, message="four more due passes")
    runs = list(ScheduleRun.objects.filter(schedule=schedule).select_related("job").order_by("planned_at"))
    assert [r.planned_at for r in runs] == [first + timedelta(minutes=n) for n in range(len(runs))]
    assert all(r.status == "submitted" and r.job is not None for r in runs)
    assert all((r.job.submitted_at - r.planned_at).total_seconds() < 60 for r in runs if r.job is not None)
    assert Job.objects.count() == len({r.job_id for r in runs}) == len(runs)


def test_a_team_at_its_caps_all_due_at_once_leaves_another_teams_trivial_job_its_pace(
    stack, worker_process, member, team, outsider, other_team, images
):
    """As one team's schedules at E31_TEAM_MAX_SCHEDULES, all due in the same minute, are recorded by the
    suite's worker, another team's trivial job goes from submit to release within 3 s; the schedule past the cap
    is a 409 naming the setting, and the runs past E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE are refused."""
    from e31site.celery import app
    from e31site.envvars import VARIABLES
    from tests.conftest import api_client_for
    from tests.factories import submit_job

    most, allowed = settings.E31_TEAM_MAX_SCHEDULES, VARIABLES["E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE"].default
    due = timezone.now().replace(second=0, microsecond=0)
    for n in range(most):
        schedule_of(member, team, name=f"s{n:03}", cron=f"{due.minute} {due.hour} * * *", time_zone="UTC",
                    next_run_at=due)  # fmt: skip
    job = {"name": "one more", "image": "busybox", "command": ["true"], "cpus": 1, "memory_mb": 64, "time_limit_s": 30}
    past = api_client_for(member).post("/api/v1/schedules/", {"name": "x", "cron": "@daily", "job": job}, format="json")
    assert past.status_code == 409 and "E31_TEAM_MAX_SCHEDULES" in past.json()["detail"]

    app.send_task("schedules.due")
    theirs = submit_job(outsider, other_team, image=images["busybox"], name="trivial", command=["true"])
    released = wait_for_release(theirs, 30)

    assert released.outcome == Outcome.SUCCEEDED
    assert (released.released_at - released.submitted_at).total_seconds() < 3

    def recorded() -> int:
        app.send_task("schedules.due")  # as beat would: a pass that reached its time bound leaves the rest
        return ScheduleRun.objects.filter(schedule__team=team).count()

    wait_until(lambda: recorded() == most, 120, interval=3, message=f"the {most} runs recorded")
    runs = ScheduleRun.objects.filter(schedule__team=team)
    assert runs.filter(status="submitted").count() == allowed
    refused = runs.filter(status="refused")
    assert refused.count() == most - allowed
    assert all("E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE" in r.reason for r in refused)
