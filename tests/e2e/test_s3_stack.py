"""A node that shares only the S3 store with the web: a real worker process stages its job's data from S3,
returns the outputs and the log there; and a store that is gone when it stages fails the job saying so."""

import hashlib
import os

import pytest
from django.conf import settings
from django.utils import timezone

from jobs.models import Job, Outcome, Stage
from jobs.storage.store import data_key, log_key, output_key
from pool.models import Node
from pool.nodes import set_state
from tests.conftest import ROOT, api_client_for, wait_for_release, worker_env
from tests.factories import submit_job
from tests.s3 import BUCKET, S3Server
from tests.workers import NodeWorker

pytestmark = [pytest.mark.docker, pytest.mark.celery]

NODE = "s3n"
COMMAND = "sha256sum /data/in.bin | cut -d' ' -f1 > /output/sum.txt && cp /data/in.bin /output/copy.bin && echo staged"


@pytest.fixture
def s3_node(transactional_db, images, settings, request, platform):
    """A factory: the S3 store for the web (this process) and a node worker of its own on `server`, beside the
    suite's platform workers."""
    started: list[NodeWorker] = []

    def start(server: S3Server, prefix: str) -> NodeWorker:
        settings.STORAGES = server.storages(settings.STORAGES, location=prefix)
        env = worker_env(
            E31_NODE_CPUS="0", E31_HEARTBEAT_S="1", E31_SCRATCH_DIR=str(settings.VAR_DIR / f"scratch-{NODE}"),
            E31_STORE_DIR="/nonexistent/no-store-here", **server.env(location=prefix),
        )  # fmt: skip
        log_path = ROOT / "var" / "log" / f"test-celery-{settings.E31_SANDBOX_NAMESPACE}-{NODE}.log"
        started.append(NodeWorker(NODE, env=env, log_path=log_path).start())
        # Only this node takes the test's jobs (another worker of the suite may have registered its own).
        for other in Node.objects.exclude(name=NODE).filter(state=Node.State.ACTIVE):
            set_state(other, Node.State.DRAINING, now=timezone.now())
        return started[-1]

    yield start
    for worker in started:
        worker.stop()
    Job.objects.exclude(stage=Stage.RELEASE).delete()  # a failed test's job: its node is gone


def keys(server: S3Server, prefix: str) -> set[str]:
    listed = server.client().list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return {entry["Key"].removeprefix(prefix) for entry in listed.get("Contents", [])}


def test_a_node_stages_from_s3_and_returns_its_outputs_and_log_there(s3_server, s3_node, member, team):
    prefix = f"{settings.E31_SANDBOX_NAMESPACE}/e2e-stack"
    s3_node(s3_server, prefix)
    content = os.urandom(3 * 1024 * 1024 + 11)
    sha256 = hashlib.sha256(content).hexdigest()

    job = submit_job(member, team, image="busybox", command=COMMAND, files={"in.bin": content})
    job = wait_for_release(job, 120)

    assert (job.outcome, job.exit_code) == (Outcome.SUCCEEDED, 0), job.reason
    assert job.active_hold is None and job.holds.get().node.name == NODE
    assert {(o.path, o.size) for o in job.output_files.all()} == {("copy.bin", len(content)), ("sum.txt", 65)}
    stored = keys(s3_server, f"{prefix}/")
    assert {data_key(job.pk, "in.bin"), output_key(job.pk, "copy.bin"), log_key(job.pk)} <= stored
    api = api_client_for(member)
    assert b"".join(api.get(f"/api/v1/jobs/{job.pk}/outputs/sum.txt").streaming_content) == f"{sha256}\n".encode()
    copy = api.get(f"/api/v1/jobs/{job.pk}/outputs/copy.bin")
    assert hashlib.sha256(b"".join(copy.streaming_content)).hexdigest() == sha256
    assert b"staged" in api.get(f"/api/v1/jobs/{job.pk}/logs/?offset=0").content


def test_a_store_gone_when_the_node_stages_fails_the_job_with_the_reason(s3_node, member, team, settings):
    server = S3Server(ROOT / "var" / "log" / f"test-s3-{settings.E31_SANDBOX_NAMESPACE}-gone.log").start()
    try:
        settings.STORAGES = server.storages(settings.STORAGES, location="gone")
        job = submit_job(member, team, image="busybox", command=COMMAND, files={"in.bin": b"data\n"})
        server.kill()  # before any node took it: the node that does finds no store
        s3_node(server, "gone")

        job = wait_for_release(job, 180)
    finally:
        server.kill()

    assert job.outcome == Outcome.FAILED and job.started_at is not None and job.exit_code is None
    staging = "/data/in.bin could not be staged: the store failed: it did not answer"
    assert job.reason == f"the node could not run the job: {staging}"
    assert not job.output_files.exists()
