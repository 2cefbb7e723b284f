"""A private redis-server for the tests that lose the broker: on a free loopback port, without
persistence (a restart loses every queue), dying with the test process."""

import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis
from django.conf import settings
from django.utils import timezone

from e31site.celery import app
from jobs.models import Job, Stage
from jobs.scheduling import dispatch
from pool.models import Node
from pool.nodes import set_state
from tests.conftest import worker_env
from tests.workers import ROOT, NodeWorker, _die_with_parent, one_platform_worker, wait_until


class RedisServer:
    """A redis-server process on a loopback port, without persistence: a restart loses the queues."""

    def __init__(self, log_path: Path):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                ["/usr/bin/redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", str(self.log_path.parent)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent,
            )  # fmt: skip
        client = self.client()
        wait_until(lambda: self._answers(client), 20, message=f"redis-server on port {self.port}")

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_connect_timeout=1)

    @staticmethod
    def _answers(client: redis.Redis) -> bool:
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            return False

    def flushall(self) -> None:
        """Everything the broker holds is gone (queues, unacknowledged messages, kombu's bindings), the
        server and its connections stay."""
        self.client().flushall()

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)


@contextmanager
def private_broker(name: str) -> Iterator[RedisServer]:
    """A started RedisServer logging to var/log/test-redis-<name>.log, killed at the end."""
    log_dir = ROOT / "var" / "log"
    log_dir.mkdir(parents=True, exist_ok=True)
    server = RedisServer(log_dir / f"test-redis-{name}.log")
    server.start()
    try:
        yield server
    finally:
        server.kill()


@contextmanager
def only_node_on(broker: RedisServer, node: str, monkeypatch, **env: str) -> Iterator[NodeWorker]:
    """Node `node`, a worker process of its own on `broker`, beside a platform worker of its own there (all kinds
    in one process), and the only active node: the test's messages and its pending passes' markers
    (jobs.scheduling.dispatch) go to that broker. A failed test's jobs are deleted at the end: their node is gone."""
    log_path = ROOT / "var" / "log" / f"test-celery-{settings.E31_SANDBOX_NAMESPACE}-{node}.log"
    env = worker_env(
        CELERY_BROKER_URL=broker.url, E31_NODE_NAME=node, E31_HEARTBEAT_S="1",
        E31_SCRATCH_DIR=str(settings.VAR_DIR / f"scratch-{node}"), **env,
    )  # fmt: skip

    def send(task: str, *, args: list[str] | None = None, queue: str | None = None, eta=None) -> None:
        with app.connection_for_write(broker.url) as conn:
            app.send_task(task, args=args or [], queue=queue, eta=eta, connection=conn)

    monkeypatch.setattr(dispatch, "send", send)
    monkeypatch.setattr(settings, "CELERY_BROKER_URL", broker.url)
    platform_log = log_path.with_name(f"test-platform-{settings.E31_SANDBOX_NAMESPACE}-{node}.log")
    platform = one_platform_worker(env=env, log_path=platform_log).start(wait=False)
    worker = NodeWorker(node, env=env, log_path=log_path).start(wait=False)
    try:
        platform.wait_ready()
        worker.wait_ready()
        for other in Node.objects.exclude(name=node).filter(state=Node.State.ACTIVE):
            set_state(other, Node.State.DRAINING, now=timezone.now())
        yield worker
    finally:
        worker.stop()
        platform.stop()
        Job.objects.exclude(stage=Stage.RELEASE).delete()
