"""The database drops between a run's claim and its watch (reading its data files, starting its log): the
node waits for it instead of failing a run whose container is starting or already running."""

import psycopg
import pytest
from django.db import OperationalError

from accounting.models import Record
from jobs.models import Outcome
from jobs.storage import logs
from tests.conftest import run_here
from tests.factories import submit_job
from worker import database, runner

pytestmark = pytest.mark.docker


def dropping_once(monkeypatch, owner, name: str) -> list[str]:
    """`owner.name` raises a dropped connection the first time it is called, then works."""
    real, calls = getattr(owner, name), []

    def flaky(*args, **kwargs):
        calls.append(name)
        if len(calls) == 1:
            error = OperationalError("terminating connection due to administrator command")
            error.__cause__ = psycopg.errors.AdminShutdown("terminating connection due to administrator command")
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, flaky)
    monkeypatch.setattr(database.time, "sleep", lambda s: None)
    return calls


@pytest.mark.parametrize("owner, name", [(runner, "staged_files"), (logs, "end")])
def test_a_database_dropped_as_the_run_starts_is_waited_for(
    owner, name, transactional_db, member, team, local_node, images, monkeypatch
):
    calls = dropping_once(monkeypatch, owner, name)

    job = run_here(submit_job(member, team, image="busybox", command="echo ran"))

    assert (job.outcome, job.exit_code) == (Outcome.SUCCEEDED, 0), job.reason
    assert len(calls) >= 2 and Record.objects.filter(job=job).count() == 1
    assert logs.read_log(job.pk)[0].startswith(b"ran\n")
