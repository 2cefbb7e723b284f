"""Test data, made through the domain functions where a rule is involved."""

import email.message
import hashlib
from collections.abc import Sequence
from datetime import datetime, timedelta

import factory
import time_machine
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import FileResponse
from django.utils import timezone

from accounting.meter import Usage
from jobs.lifecycle import actions
from jobs.lifecycle.actions import schedule_pass
from jobs.lifecycle.history import REAPER
from jobs.models import Dependency, Job, JobArray, Outcome, OutputFile, RuntimeImage, Stage
from jobs.storage import logs
from jobs.storage.store import save_output
from jobs.submit.arrays import ArrayRequest
from jobs.submit.declaration import Declaration
from jobs.submit.service import submit
from pool import nodes as pool_nodes_module
from pool.models import Node, Queue
from pool.nodes import Capacity, register
from teams.models import Team
from teams.people import add_member


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team
        django_get_or_create = ["slug"]

    slug = factory.Sequence(lambda n: f"team-{n}")
    name = factory.LazyAttribute(lambda t: t.slug.title())


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ["username"]

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw-for-tests-1")  # hashed before the row is written: no second save


def member_of(team: Team, username: str, *, operator: bool = False):
    return add_member(username, team=team, password="pw-for-tests-1", operator=operator)


class RuntimeImageFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = RuntimeImage
        django_get_or_create = ["name"]

    name = "busybox"
    reference = "e31/busybox:1"
    description = "BusyBox"


def upload(name: str, content: bytes | str) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content.encode() if isinstance(content, str) else content)


def submit_job(user, team, *, files: dict[str, bytes | str] | None = None, key: str = "", **request):
    """Submit a job as `user` for `team` through jobs.submit.service, with small defaults."""
    job, _ = submit(declared(team, files=files, **request), user=user, idempotency_key=key)
    return job


def waiting_on_upstreams(user, team, *, count: int, image=None) -> list[Job]:
    """`count` jobs, each held back until its own upstream (a job held on a node) succeeds, its wait reason
    naming it by id; the pool must have room for `count` jobs of one core."""
    upstreams = [submit_job(user, team, image=image, name=f"upstream {i}") for i in range(count)]
    schedule_pass()
    assert not Job.objects.filter(pk__in=[u.pk for u in upstreams], stage=Stage.SUBMIT).exists(), "no room"
    return [
        submit_job(user, team, image=image, name=f"downstream {i}", after=[(Dependency.Kind.OK, upstream)])
        for i, upstream in enumerate(upstreams)
    ]


def submit_array_of(user, team, indices, *, max_running=None, stop_after_failures=None, files=None, **request):
    """Submit an array as `user` for `team` through jobs.submit.service, with submit_job's defaults."""
    array = ArrayRequest(list(indices), max_running=max_running, stop_after_failures=stop_after_failures)
    made, _ = submit(declared(team, files=files, **request), user=user, array=array)
    return made


def declared(team, *, files: dict[str, bytes | str] | None = None, **request) -> Declaration:
    image = request.pop("image", None) or RuntimeImageFactory()
    if isinstance(image, str):
        image = RuntimeImage.objects.get(name=image)
    command = request.pop("command", ["true"])
    declaration = Declaration(
        team=team,
        name=request.pop("name", f"job at {timezone.now():%H:%M:%S.%f}"),
        image=image,
        command=command if isinstance(command, list) else ["sh", "-c", command],
        env=request.pop("env", {}),
        cpus=request.pop("cpus", 1),
        memory_mb=request.pop("memory_mb", 64),
        gpus=request.pop("gpus", 0),
        time_limit_s=request.pop("time_limit_s", 30),
        output_patterns=request.pop("outputs", []),
        max_retries=request.pop("max_retries", 0),
        files=[(name, upload(name, content)) for name, content in (files or {}).items()],
        isolation=request.pop("isolation", "standard"),
        retry_on=request.pop("retry_on", ["node_lost"]),
        retry_memory_factor=request.pop("retry_memory_factor", 1.0),
        retry_delay_s=request.pop("retry_delay_s", 0),
        after=request.pop("after", ()),
        inputs=request.pop("inputs", ()),
        queue=request.pop("queue", None),
        constraint=request.pop("constraint", ""),
        preemptable=request.pop("preemptable", True),
    )
    assert not request, f"unknown job fields: {request}"
    return declaration


def run_to_release(
    job: Job,
    *,
    now,
    outcome: str = Outcome.SUCCEEDED,
    reason: str = "",
    exit_code: int | None = 0,
    usage: Usage | None = None,
) -> Job:
    """A held job through RUN and OUTPUT to RELEASE at `now`, as its node's worker would move it."""
    assert actions.start_run(job, now=now), f"{job} is not held"
    actions.finish_run(job, outcome=outcome, exit_code=exit_code, reason=reason, now=now)
    return actions.release(job, outcome=outcome, reason=reason, exit_code=exit_code, now=now, usage=usage)


# Output names a job may keep although each is awkward somewhere: in a URL, a header, the store, HTML.
ODD_OUTPUT_NAMES = [
    "..\\x",
    "back\\slash.txt",
    "100% done.txt",
    "a%5Cb.txt",  # what a backslash is escaped to in the store: still an output of its own
    "what?.txt",
    "#hash",
    'it\'s "quoted".txt',
    "<b>&amp;</b>.html",
    "semi;colon,comma=eq+plus.txt",
    " leading and trailing .txt ",
    "ünïcødé/日本語.txt",
    "emoji 😀.txt",
    "-dash",
    "~tilde:colon@at",
]


def store_output(job: Job, path: str, content: bytes) -> OutputFile:
    """An output collected for `job`, as the node's worker keeps it: in the store, and its row."""
    save_output(job.pk, path, ContentFile(content))
    return OutputFile.objects.create(job=job, path=path, size=len(content), sha256=hashlib.sha256(content).hexdigest())


def download_name(response: FileResponse) -> str | None:
    """The file name a download's Content-Disposition gives (either of its RFC 6266 forms)."""
    header = email.message.EmailMessage()
    header["Content-Disposition"] = response["Content-Disposition"]
    return header["Content-Disposition"].params.get("filename")  # get_filename() would strip spaces


def ended_job(
    user,
    team,
    *,
    outcome: str,
    at: datetime,
    waited: timedelta = timedelta(minutes=2),
    ran: timedelta = timedelta(minutes=10),
    exit_code: int | None = None,
    reason: str = "",
    usage: Usage | None = None,
    log: bytes = b"",
    log_notes: Sequence[str] = (),
    **request,
) -> Job:
    """A job that ended with `outcome` at `at`: submitted `waited + ran` before (the clock moved there
    with time-machine), held after `waited`, run for `ran`, released at `at`, through the domain's
    actions. Rejected and cancelled jobs end before they are held. The pool must have room."""
    submitted = at - waited - ran
    request.setdefault("time_limit_s", max(30, int(ran.total_seconds())))  # the meter stops at the limit
    with time_machine.travel(submitted, tick=False):
        job = submit_job(user, team, **request)
    if outcome == Outcome.REJECTED:
        return actions.reject(job, reason=reason or "can never be held", now=at)
    if outcome == Outcome.CANCELLED and not ran:
        return actions.cancel(job, now=at, acting_user=user)
    schedule_pass(now=submitted + waited)
    job.refresh_from_db()
    assert job.stage == "rent", f"the pool had no room for {job}"
    assert actions.start_run(job, now=submitted + waited)
    if outcome == Outcome.NODE_LOST:
        hold = job.active_hold
        assert hold is not None
        return actions.release_lost(job, node_name=hold.node.name, last_heartbeat=at, now=at, actor=REAPER)
    code = exit_code if exit_code is not None else (0 if outcome == Outcome.SUCCEEDED else None)
    actions.finish_run(job, outcome=outcome, exit_code=code, reason=reason, now=at)
    if log:
        logs.append(job.pk, 0, log)  # written while it ran: the release seals it
    return actions.release(
        job, outcome=outcome, reason=reason, exit_code=code, now=at, usage=usage, log_notes=log_notes
    )


def registered_elsewhere(name: str, capacity: Capacity, monkeypatch) -> Node:
    """A node another machine's worker registers: this process's view of the pool
    (pool.nodes.pool_nodes) does not hear of it."""
    with monkeypatch.context() as patch:
        patch.setattr(pool_nodes_module, "forget_pool_view", lambda: None)
        return register(name, capacity, now=timezone.now())


def frozen_monotonic(monkeypatch) -> list[float]:
    """pool.nodes' clock, stopped: a view of the pool it keeps stays fresh however slow the test runs.
    Returns the one-element list holding the time, to move it by hand."""
    clock = [1000.0]
    monkeypatch.setattr(pool_nodes_module.time, "monotonic", lambda: clock[0])
    return clock


class JobArrayFactory(factory.django.DjangoModelFactory):
    """An array's row alone: its tasks are made by the test (bulk_create, or jobs.submit.service.submit)."""

    class Meta:
        model = JobArray

    name = factory.Sequence(lambda n: f"sweep {n}")
    size = 0
    submitted_by = factory.SubFactory(UserFactory)
    submitted_at = factory.LazyFunction(timezone.now)


def array_tasks(array: JobArray, image, states: list[tuple[str, str]], *, at: datetime | None = None) -> list[Job]:
    """Tasks of `array` at the given (stage, outcome), submitted (and, if released, released) at `at`, in one
    INSERT: what a page shows of a large array, not how its tasks got there. Each task carries its array's name,
    as a submitted one does (jobs.submit.arrays)."""
    now = at or timezone.now()
    made = Job.objects.bulk_create(
        Job(team=array.team, submitted_by=array.submitted_by, name=array.name, image=image,
            command=["true"], cpus=1, memory_mb=64, time_limit_s=30, submitted_at=now, array=array, array_index=i,
            stage=stage, outcome=outcome, released_at=now if stage == Stage.RELEASE else None)
        for i, (stage, outcome) in enumerate(states)
    )  # fmt: skip
    JobArray.objects.filter(pk=array.pk).update(size=len(states))
    array.size = len(states)
    return made


# --- webhooks -------------------------------------------------------------------------------------


def webhook_of(team: Team, user, url: str, events: Sequence[str] = ("job.released",)):
    """A webhook of `team` made as the API makes it (the allow list must allow `url`); returns it and its secret."""
    from webhooks.actions import create_webhook

    return create_webhook(team, url=url, events=events, user=user, now=timezone.now())


# --- the morning digest (issue 23) -------------------------------------------------------------------


def digest_reader(team: Team, username: str, *, email: str | None = None):
    """A member of `team` with an e-mail address: who the digest goes to."""
    user = member_of(team, username)
    user.email = email if email is not None else f"{username}@example.test"
    user.save(update_fields=["email"])
    return user


def schedule_run_of(team: Team, user, *, status: str, reason: str, planned_at: datetime, name: str = "nightly"):
    """A run of a schedule of `team` recorded as `status` (missed, refused...) at its planned time, as the
    schedules' due pass records it: the digest only reads them."""
    from schedules.models import Schedule, ScheduleRun

    schedule, _ = Schedule.objects.get_or_create(
        team=team, name=name,
        defaults={"cron": "0 1 * * *", "time_zone": team.time_zone, "job": {"command": ["true"]}, "created_by": user,
                  "created_at": planned_at, "changed_at": planned_at},
    )  # fmt: skip
    return ScheduleRun.objects.create(
        schedule=schedule, planned_at=planned_at, status=status, reason=reason, recorded_at=planned_at
    )


# --- schedules (issue 23) ---------------------------------------------------------------------------


def schedule_of(
    user, team: Team, *, cron: str = "0 1 * * *", job: dict | None = None, template=None, now: datetime | None = None,
    **fields,
):  # fmt: skip
    """A schedule as schedules.changes.create leaves it: its next run the first planned after `now`."""
    from schedules.models import Schedule
    from schedules.runs import first_planned

    at = now or timezone.now()
    if job is None and template is None:
        job = {
            "name": "nightly",
            "image": "busybox",
            "command": ["true"],
            "cpus": 1,
            "memory_mb": 64,
            "time_limit_s": 30,
        }
    schedule = Schedule(
        team=team, name=fields.pop("name", "nightly"), cron=cron, time_zone=fields.pop("time_zone", team.time_zone),
        template=template, job=job, created_by=user, created_at=at, changed_at=at, **fields,
    )  # fmt: skip
    if "next_run_at" not in fields:
        schedule.next_run_at = first_planned(schedule, now=at)
    schedule.save()
    return schedule


def pool_default_queue() -> Queue:
    """The default queue the migrations make; a test that flushed the database (a live server's) removed it."""
    return Queue.objects.get_or_create(is_default=True, defaults={"name": "batch"})[0]
