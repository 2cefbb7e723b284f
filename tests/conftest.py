"""Personas, the pool, and the real stack (Docker, a Celery worker, a browser) for the tests."""

import os
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.models import Job, Stage
from jobs.scheduling import dispatch
from pool.nodes import detect_capacity, forget_pool_view, register
from teams.people import token_for
from tests.factories import TeamFactory, member_of
from tests.s3 import S3Server
from tests.webhooks.http_receiver import ALLOWED as RECEIVER_PORTS
from tests.workers import NodeWorker, Platform, purge_broker, quiesce_all, resume_all, wait_until

ROOT = Path(__file__).resolve().parent.parent
SENT: list[tuple] = []  # what in-process tests would have sent to the broker


def _kept(task, *, args=None, queue=None, eta=None) -> None:
    SENT.append((task, args, queue))


# --- personas -----------------------------------------------------------------------------------


@pytest.fixture
def one_per_core_hour(settings):
    """1 core-hour costs 1.00, memory and gpus nothing, no overhead: a record of n cpus held an hour costs n."""
    settings.E31_RATE_CORE_HOUR, settings.E31_RATE_GB_HOUR, settings.E31_RATE_GPU_HOUR = (
        Decimal("1"), Decimal("0"), Decimal("0"),
    )  # fmt: skip
    settings.E31_HOLD_OVERHEAD_S = 0


@pytest.fixture
def team(db):
    return TeamFactory(slug="red", name="Red team")


@pytest.fixture
def paris(team):
    """The team, in Paris's zone: the pages' moments, a review's night and a usage window read there."""
    team.time_zone = "Europe/Paris"
    team.full_clean()
    team.save(update_fields=["time_zone"])
    return team


@pytest.fixture
def other_team(db):
    return TeamFactory(slug="blue", name="Blue team")


@pytest.fixture
def member(team):
    return member_of(team, "alice")


@pytest.fixture
def teammate(team):
    return member_of(team, "bob")


@pytest.fixture
def outsider(other_team):
    return member_of(other_team, "eve")


@pytest.fixture
def operator(db):
    ops = TeamFactory(slug="ops", name="Operators")
    return member_of(ops, "olga", operator=True)


def api_client_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user)}")
    return client


@pytest.fixture
def api(member):
    return api_client_for(member)


@pytest.fixture
def outsider_api(outsider):
    return api_client_for(outsider)


@pytest.fixture
def operator_api(operator):
    return api_client_for(operator)


# --- the pool -----------------------------------------------------------------------------------


# The node the suite's worker process runs as. Tests that run jobs in this process hold them on
# `local_node` instead: the worker's watchdog sends again the runs held on its own node that no process
# of its own watches, and would take over the runs of this process's tests.
STACK_NODE = "stack"
STACK_MAX_PREEMPTIONS = 2  # the suite's worker processes' E31_MAX_PREEMPTIONS (worker_env)


@pytest.fixture
def local_node(db):
    """This machine as the node the tests that run jobs in this process (`run_here`) hold them on."""
    return register(settings.E31_NODE_NAME, detect_capacity(), now=timezone.now())


@pytest.fixture
def stack_node(db):
    """This machine as the node of the suite's worker process (`worker_process`)."""
    return register(STACK_NODE, detect_capacity(), now=timezone.now())


@pytest.fixture(autouse=True)
def _private_dirs(request, settings, tmp_path, monkeypatch):
    """Every in-process test gets its own store and scratch folder, and its messages to the broker
    are kept (in `SENT`) instead of sent: a worker process started for another test must not run
    its jobs. Tests on the real stack share the worker's folders and broker, as in production."""
    if request.node.get_closest_marker("celery") is None and "stack" not in request.fixturenames:
        monkeypatch.setattr(
            dispatch, "send", lambda task, *, args=None, queue=None, eta=None: SENT.append((task, args, queue))
        )
        # Nor do they share the broker's pending-pass marker: each request for a pass is kept (tests of
        # the coalescing itself, tests/jobs/test_dispatch.py, use a marker of their own).
        monkeypatch.setattr(dispatch, "claim_pending", lambda task: True)
    if "stack" in request.fixturenames:
        yield
        return
    default = settings.STORAGES["default"]
    settings.STORAGES = {**settings.STORAGES, "default": {**default, "OPTIONS": {"location": str(tmp_path / "store")}}}
    settings.E31_SCRATCH_DIR = tmp_path / "scratch"
    settings.E31_LEDGER_HEADS_FILE = tmp_path / "ledger-heads.log"  # the heads of this test's records only
    yield


@pytest.fixture(autouse=True)
def _fresh_throttles():
    """Each test starts with no API request counted against anyone (the counters live in the cache),
    and with no view of the pool an earlier test's nodes left in this process (pool.nodes.pool_nodes)."""
    from django.core.cache import cache

    cache.clear()
    forget_pool_view()


# --- Docker ---------------------------------------------------------------------------------------


def docker_available() -> bool:
    try:
        import docker

        docker.from_env(timeout=5).ping()
        return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def built_images(django_db_setup, django_db_blocker):
    """Make sure the runtime images exist on the engine (make test builds them; cached here)."""
    if not docker_available():
        pytest.fail("no Docker engine answers: run the suite with `make test`, which starts dockerd")
    import docker

    from worker.runtime_images import RECIPES

    client = docker.from_env()
    missing = [r.reference for r in RECIPES.values() if not client.images.list(name=r.reference)]
    if missing:
        pytest.fail(f"runtime images missing: {missing}; `make images` builds them")
    return RECIPES


@pytest.fixture
def images(db, built_images):
    from jobs.models import RuntimeImage

    return {
        name: RuntimeImage.objects.update_or_create(
            name=name, defaults={"reference": r.reference, "description": r.description}
        )[0]
        for name, r in built_images.items()
    }


def run_here(job: Job) -> Job:
    """Hold and run a job in this process, as the node's worker would: RENT, RUN, OUTPUT, RELEASE."""
    from jobs.lifecycle.actions import schedule_pass
    from worker import runner

    schedule_pass(now=timezone.now())
    job.refresh_from_db()
    assert job.stage == Stage.RENT, f"job was not held: {job.stage}"
    runner.run(job.pk, node_name=job.active_hold.node.name)
    job.refresh_from_db()
    return job


# --- a real Celery worker ---------------------------------------------------------------------------


def worker_env(**extra: str) -> dict[str, str]:
    """The environment of a worker process of this test run: the test database, this xdist worker's
    broker database, folders and container namespace."""
    from django.db import connection

    db = connection.settings_dict
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "e31site.settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "E31_VAR_DIR": str(settings.VAR_DIR),
        "E31_SANDBOX_NAMESPACE": settings.E31_SANDBOX_NAMESPACE,
        "E31_NODE_MEMORY_MB": str(settings.E31_NODE_MEMORY_MB),
        "E31_HEARTBEAT_S": str(settings.E31_HEARTBEAT_S),
        "E31_RESEND_AFTER_S": str(settings.E31_RESEND_AFTER_S),
        # A round of probes at each worker start would add jobs behind the back of every real-stack test;
        # the tests of the probes start their rounds themselves.
        "E31_PROBE_ON_START": "0",
        # The tests' webhook receivers listen on loopback, on ports of their own (tests/webhooks/http_receiver.py,
        # used by tests/e2e/test_webhooks_stack.py); no other test makes a webhook, so this reaches nothing else.
        "E31_WEBHOOK_ALLOWED_HOSTS": RECEIVER_PORTS,
        # A preempted job that ignores SIGTERM is killed this soon (tests/e2e/test_preemption_stack.py).
        "E31_PREEMPT_GRACE_S": "5",
        # A job preempted this often runs to its end: the test of the cap reaches it in a few preemptions.
        "E31_MAX_PREEMPTIONS": str(STACK_MAX_PREEMPTIONS),
        **extra,
    }


@pytest.fixture(scope="session")
def _platform_started(django_db_setup, django_db_blocker, built_images):
    """The platform workers, started (not yet ready: `platform_plane`, `worker_process` wait for them)."""
    purge_broker(settings.CELERY_BROKER_URL)  # messages left by earlier runs name jobs that no longer exist
    log_prefix = ROOT / "var" / "log" / f"test-platform-{settings.E31_SANDBOX_NAMESPACE}"
    plane = Platform(env=worker_env(), log_prefix=log_prefix).start(wait=False)
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def platform_plane(_platform_started):
    """The platform's plane as `make run` starts it: a real `celery worker --platform KIND` process for each kind
    of platform work (the scheduler pass, webhooks, mail, schedules, upkeep), on Redis and the test database. One
    per xdist worker, which the tests that run nodes of their own need too."""
    _platform_started.wait_ready()
    return _platform_started


@pytest.fixture
def platform(transactional_db, platform_plane):
    """The platform workers consuming for one test that runs nodes of its own, quiet again before its data is
    flushed (as `stack` leaves every worker)."""
    from e31site.celery import app

    platform_plane.resume(app)
    yield platform_plane
    platform_plane.quiesce(app)


@pytest.fixture(scope="session")
def worker_process(_platform_started, django_db_setup, django_db_blocker, built_images):
    """A real `celery worker` process on Redis, using the test database: node STACK_NODE, started beside the
    platform workers. One per xdist worker."""
    log_path = ROOT / "var" / "log" / f"test-celery-{settings.E31_SANDBOX_NAMESPACE}.log"
    worker = NodeWorker(STACK_NODE, env=worker_env(), log_path=log_path).start(wait=False)
    try:
        _platform_started.wait_ready()
        worker.wait_ready()
        yield worker
    finally:
        worker.stop()


@pytest.fixture
def stack(transactional_db, worker_process, stack_node, images):
    """The real stack for one test: committed data, the worker running, the node and images registered."""
    from e31site.celery import app
    from jobs.lifecycle.actions import cancel

    resume_all(app)
    yield
    # Leave nothing running behind the next test's back, and nothing that touches the database
    # while it is flushed.
    for job in Job.objects.exclude(stage=Stage.RELEASE):
        cancel(job, now=timezone.now())
    wait_until(lambda: not Job.objects.exclude(stage=Stage.RELEASE).exists(), 60, message="every job to be released")
    quiesce_all(app)


# --- the object store: a real S3 server on loopback --------------------------------------------------


@pytest.fixture(scope="session")
def s3_server():
    """moto in server mode, one per xdist worker, stopped when the session ends."""
    server = S3Server(ROOT / "var" / "log" / f"test-s3-{settings.E31_SANDBOX_NAMESPACE}.log").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_store(s3_server, settings, request):
    """This test's default store on the S3 server, under a key prefix of its own."""
    prefix = f"{settings.E31_SANDBOX_NAMESPACE}/{request.node.name}"[:200]
    settings.STORAGES = s3_server.storages(settings.STORAGES, location=prefix)
    return s3_server


def wait_for_release(job: Job, timeout: float = 90) -> Job:
    def released():
        job.refresh_from_db()
        return job.stage == Stage.RELEASE

    wait_until(released, timeout, message=f"job {job.pk} to be released (stage {job.stage})")
    return job


# --- a real browser ---------------------------------------------------------------------------------


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
]  # fmt: skip


@pytest.fixture(scope="session")
def browser():
    if not shutil.which(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium")
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # playwright's sync API runs an event loop
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
