"""On the real stack: a job run by a real Celery worker in a real container, its end written to the outbox by that
node's worker and mailed by a real platform worker to the SMTP server on loopback. The suite's workers have no SMTP
server set, so this test runs a node and a mail worker of its own that have one, while the suite's node and mail
worker stop consuming and its node is drained."""

import pytest
from django.utils import timezone

from e31site.celery import app
from jobs.models import Job, Outcome
from notify.models import Mail
from pool.models import Node
from pool.nodes import set_state
from tests.conftest import ROOT, STACK_NODE, wait_for_release, worker_env
from tests.workers import NodeWorker, PlatformWorker, make_run_platform, wait_until

pytestmark = [pytest.mark.docker, pytest.mark.celery]

NODE = "mailer"


@pytest.fixture
def mailing_node(stack, worker_process, platform_plane, smtp_server, settings):
    """A node (NODE) and a mail worker whose settings send mail through `smtp_server`; the suite's idle."""
    worker_process.quiesce(app)
    platform_plane["mail"].quiesce(app)
    set_state(Node.objects.get(name=STACK_NODE), Node.State.DRAINING, now=timezone.now(), reason="a mail test")
    env = worker_env(
        EMAIL_HOST="127.0.0.1", EMAIL_PORT=str(smtp_server.port), DEFAULT_FROM_EMAIL="e31@e31.example",
        E31_SITE_URL="https://e31.example", E31_SCRATCH_DIR=str(settings.VAR_DIR / f"scratch-{NODE}"),
    )  # fmt: skip
    log_dir = ROOT / "var" / "log"
    node = NodeWorker(NODE, env=env, log_path=log_dir / f"test-celery-{settings.E31_SANDBOX_NAMESPACE}-{NODE}.log")
    mail = PlatformWorker(
        ["mail"], concurrency=make_run_platform()["mail"], env=env,
        log_path=log_dir / f"test-platform-{settings.E31_SANDBOX_NAMESPACE}-{NODE}.log", label=NODE,
    )  # fmt: skip
    try:
        for worker in (node.start(wait=False), mail.start(wait=False)):
            worker.wait_ready()
        wait_until(lambda: Node.objects.filter(name=NODE, state=Node.State.ACTIVE).exists(), 30, message="its node")
        yield node
    finally:
        for worker in (node, mail):
            worker.quiesce(app)
            worker.stop()
        Node.objects.filter(name=NODE, holds__isnull=True).delete()
        set_state(Node.objects.get(name=STACK_NODE), Node.State.ACTIVE, now=timezone.now())
        platform_plane["mail"].resume(app)
        worker_process.resume(app)


def test_a_failed_jobs_mail_arrives_through_the_real_worker(mailing_node, smtp_server, api, member):
    member.email = "alice@e31.example"
    member.save(update_fields=["email"])
    response = api.post(
        "/api/v1/jobs/",
        {"name": "nightly-train", "image": "busybox", "command": "sh -c 'echo loading; echo broke >&2; exit 4'",
         "cpus": "1", "memory_mb": "64", "time_limit_s": "60"},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    job = wait_for_release(Job.objects.get(pk=response.json()["id"]), 90)
    assert (job.outcome, job.exit_code) == (Outcome.FAILED, 4)
    assert job.active_hold is None and job.holds.get().node.name == NODE

    inbox = smtp_server.handler
    wait_until(lambda: inbox.messages, 30, message="the mail to reach the SMTP server")

    [message] = inbox.messages
    assert message["Subject"] == f"failed: nightly-train (job {str(job.pk)[:8]})"
    assert message["To"] == "alice@e31.example"
    assert str(message["List-Unsubscribe"]).strip().startswith("<https://e31.example/account/notifications/unsub")
    body = message.get_content()
    assert "Exit code:  4" in body and "  loading" in body and "  broke" in body
    mail = Mail.objects.get()
    assert mail.sent_at is not None and mail.attempts == 1
