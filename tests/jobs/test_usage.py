"""A running job's live use (jobs.lifecycle.usage): the cpu arithmetic between two readings of its cgroup, and
how a sample is kept on the job only while that run is at RUN."""

import threading
from datetime import UTC, datetime

import pytest
from django.db import connection, transaction
from django.utils import timezone

from jobs.lifecycle import actions
from jobs.lifecycle.actions import schedule_pass
from jobs.lifecycle.usage import Reading, Sample, clear_usage, cpu_percent, record_usage, sample_between
from jobs.models import Job, Outcome, Stage
from tests.factories import submit_job

AT = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def test_one_core_busy_for_the_whole_interval_is_100_percent():
    assert cpu_percent(Reading(10.0, 3.0, 50), Reading(15.0, 8.0, 50)) == 100.0


def test_two_cores_busy_is_200_percent_and_a_quarter_of_one_is_25():
    assert cpu_percent(Reading(0.0, 0.0, 0), Reading(4.0, 8.0, 0)) == 200.0
    assert cpu_percent(Reading(0.0, 100.0, 0), Reading(4.0, 101.0, 0)) == 25.0


def test_cpu_percent_is_rounded_to_a_tenth():
    assert cpu_percent(Reading(0.0, 0.0, 0), Reading(3.0, 1.0, 0)) == 33.3


def test_an_idle_interval_is_0_and_a_counter_that_went_back_counts_as_idle():
    assert cpu_percent(Reading(0.0, 5.0, 0), Reading(5.0, 5.0, 0)) == 0.0
    assert cpu_percent(Reading(0.0, 5.0, 0), Reading(5.0, 1.0, 0)) == 0.0


def test_no_time_between_two_readings_makes_no_sample():
    assert cpu_percent(Reading(7.0, 1.0, 0), Reading(7.0, 2.0, 0)) is None
    assert sample_between(Reading(7.0, 1.0, 0), Reading(7.0, 2.0, 0), at=AT) is None


def test_a_sample_holds_the_later_readings_memory_and_its_time():
    sample = sample_between(Reading(0.0, 0.0, 10), Reading(5.0, 2.5, 120), at=AT)
    assert sample == Sample(cpu_percent=50.0, memory_mb=120, at=AT)
    assert sample.as_json() == {"cpu_percent": 50.0, "memory_mb": 120, "at": "2026-12-04T12:00:00+00:00"}


SAMPLE = Sample(cpu_percent=97.5, memory_mb=42, at=AT)


@pytest.fixture
def running(member, team, local_node):
    job = submit_job(member, team)
    schedule_pass(now=timezone.now())
    job.refresh_from_db()
    assert actions.start_run(job, now=timezone.now())
    job.refresh_from_db()
    assert job.stage == Stage.RUN
    return job


def test_a_sample_is_kept_while_the_run_is_at_run(running):
    assert record_usage(running.pk, SAMPLE, attempt=running.attempt)
    running.refresh_from_db()
    assert running.usage_now == {"cpu_percent": 97.5, "memory_mb": 42, "at": "2026-12-04T12:00:00+00:00"}


def test_no_sample_is_kept_for_another_attempt_or_once_the_run_ended(running):
    assert not record_usage(running.pk, SAMPLE, attempt=running.attempt + 1)
    now = timezone.now()
    actions.finish_run(running, outcome=Outcome.SUCCEEDED, exit_code=0, reason="", now=now)
    assert not record_usage(running.pk, SAMPLE, attempt=running.attempt)
    assert Job.objects.get(pk=running.pk).usage_now is None


def test_the_run_s_end_forgets_its_last_sample(running):
    record_usage(running.pk, SAMPLE, attempt=running.attempt)
    actions.finish_run(running, outcome=Outcome.SUCCEEDED, exit_code=0, reason="", now=timezone.now())
    assert Job.objects.get(pk=running.pk).usage_now is None


def test_a_run_s_start_forgets_a_sample_an_earlier_attempt_left(member, team, local_node):
    job = submit_job(member, team)
    schedule_pass(now=timezone.now())
    Job.objects.filter(pk=job.pk).update(usage_now={"cpu_percent": 90.0, "memory_mb": 12, "at": "2026-01-01T00:00:00Z"})
    job.refresh_from_db()

    assert actions.start_run(job, now=timezone.now())
    assert Job.objects.get(pk=job.pk).usage_now is None


def test_clearing_forgets_the_last_sample(running):
    record_usage(running.pk, SAMPLE, attempt=running.attempt)
    clear_usage(running.pk)
    assert Job.objects.get(pk=running.pk).usage_now is None


@pytest.mark.django_db(transaction=True)
def test_a_sample_skips_a_row_a_transition_holds_instead_of_waiting_for_it(running):
    """The loop that watches the run samples: it must never stall behind a lock on the job's row."""
    locked, release = threading.Event(), threading.Event()

    def hold_the_row():
        try:
            with transaction.atomic():
                Job.objects.select_for_update().get(pk=running.pk)
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_row)
    holder.start()
    try:
        assert locked.wait(10)
        kept = record_usage(running.pk, SAMPLE, attempt=running.attempt)  # would block here if it waited
        assert not kept
    finally:
        release.set()
        holder.join(10)
    assert record_usage(running.pk, SAMPLE, attempt=running.attempt)
