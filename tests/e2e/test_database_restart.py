"""PostgreSQL restarts while jobs run: the web answers 503 with a clear message meanwhile (a page and
the API), the node's worker reconnects, its heartbeats resume, the reaper declares no node lost for an
outage shorter than E31_NODE_LOST_S, and the jobs end succeeded with one record each.

Everything here is the test's own: a PostgreSQL cluster (tests/pg.py) migrated by `manage.py migrate`,
a Redis server, a node worker, a platform worker (all kinds in one process) and a beat on them, and the
real web server (gunicorn, the project's config) on a loopback port. The test reads the database through
its own psycopg connection.
"""

import contextlib
import http.cookiejar
import json
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime

import docker
import psycopg
import pytest
from django.conf import settings

from e31site.middleware import DATABASE_AWAY
from tests.conftest import ROOT, worker_env
from tests.pg import PostgresCluster
from tests.redis_server import private_broker
from tests.workers import NodeWorker, _die_with_parent, one_platform_worker, start_gunicorn, stop_process, wait_until
from worker.sandbox.docker import NAMESPACE_LABEL, NODE_LABEL

pytestmark = [pytest.mark.docker, pytest.mark.celery, pytest.mark.gunicorn]

NODE = "pgr"
LOST_S = 30  # E31_NODE_LOST_S: the outage below lasts a few seconds
PASSWORD = "a password long enough for the validators"
SETUP = """
from jobs.models import RuntimeImage
from teams.people import add_member, create_team, token_for
from worker.runtime_images import RECIPES
team, _ = create_team("night")
user = add_member("ada", team=team, password={password!r})
for name, recipe in RECIPES.items():
    RuntimeImage.objects.update_or_create(name=name, defaults={{"reference": recipe.reference}})
print("TOKEN", token_for(user))
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def manage(env: dict[str, str], *argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


class Web:
    """gunicorn e31site.wsgi as `make run` starts it, on a free loopback port; a client with a cookie jar."""

    def __init__(self, env: dict[str, str], log_path):
        self.port = free_port()
        with open(log_path, "ab") as log:
            self.process = start_gunicorn(self.port, env=env, log=log)
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        wait_until(lambda: self.status("/login/") == 200 or self.process.poll() is not None, 60, message="gunicorn")
        assert self.process.poll() is None, f"gunicorn ended; see {log_path}"

    def call(self, path: str, *, data: bytes | None = None, headers: dict | None = None) -> tuple[int, dict, str]:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, headers=headers or {})
        try:
            with self.opener.open(request, timeout=30) as response:
                return response.status, dict(response.headers), response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read().decode()
        except OSError:
            return 0, {}, ""

    def status(self, path: str) -> int:
        return self.call(path)[0]

    def log_in(self, username: str, password: str) -> None:
        page = self.call("/login/")[2]
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert token, "the login form has its CSRF token"
        form = urllib.parse.urlencode({"username": username, "password": password, "csrfmiddlewaretoken": token[1]})
        status, _, _ = self.call("/login/", data=form.encode(), headers={"Referer": f"http://127.0.0.1:{self.port}/"})
        assert status == 200 and self.status("/jobs/") == 200, "logged in"

    def stop(self) -> None:
        stop_process(self.process)


@pytest.fixture
def private_stack(built_images):
    name = f"{settings.E31_SANDBOX_NAMESPACE}-{NODE}"
    cluster = PostgresCluster(name)
    try:
        cluster.start()
        with private_broker(name) as broker, contextlib.ExitStack() as stopped:
            env = worker_env(
                DATABASE_URL=cluster.create_database("e31"), CELERY_BROKER_URL=broker.url, E31_CACHE_URL=broker.url,
                E31_NODE_NAME=NODE, E31_NODE_CPUS="0,1", E31_HEARTBEAT_S="1", E31_NODE_LOST_S=str(LOST_S),
                E31_SCHEDULE_EVERY_S="2", E31_SCRATCH_DIR=str(settings.VAR_DIR / f"scratch-{NODE}"),
            )  # fmt: skip
            manage(env, "migrate", "--no-input", "-v", "0")
            token = manage(env, "shell", "-c", SETUP.format(password=PASSWORD)).split("TOKEN ")[1].strip()
            log_dir = ROOT / "var" / "log"
            platform = one_platform_worker(env=env, log_path=log_dir / f"test-platform-{name}.log").start(wait=False)
            stopped.callback(platform.stop)
            worker = NodeWorker(NODE, env=env, log_path=log_dir / f"test-celery-{name}.log").start()
            stopped.callback(worker.stop)
            platform.wait_ready()
            with open(log_dir / f"test-beat-{name}.log", "ab") as log:
                beat = subprocess.Popen(
                    [sys.executable, "-m", "celery", "-A", "e31site", "beat", "-l", "info",
                     "-s", str(cluster.root / "beat-schedule")],
                    cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True, preexec_fn=_die_with_parent,
                )  # fmt: skip
            stopped.callback(lambda: (beat.terminate(), beat.wait(20)))
            web = Web(env, log_dir / f"test-gunicorn-{name}.log")
            stopped.callback(web.stop)
            yield cluster, worker, platform, web, token
    finally:
        cluster.remove()


def containers_running() -> list:
    client = docker.from_env()
    try:
        labels = [f"{NAMESPACE_LABEL}={settings.E31_SANDBOX_NAMESPACE}", f"{NODE_LABEL}={NODE}"]
        return client.containers.list(filters={"label": labels, "status": "running"})
    finally:
        client.close()


def query(cluster: PostgresCluster, sql: str, *params) -> list[tuple]:
    with psycopg.connect(cluster.url("e31")) as conn:
        return conn.execute(sql, params).fetchall()


def test_postgresql_restarts_while_jobs_run_and_nothing_is_lost(private_stack):
    cluster, worker, platform, web, token = private_stack
    api = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
    web.log_in("ada", PASSWORD)
    ids = []
    for i in range(2):
        body = {"name": f"through the restart {i}", "team": "night", "image": "busybox", "cpus": 1,
                "memory_mb": 64, "time_limit_s": 120, "command": ["sh", "-c", "sleep 8; echo done"]}  # fmt: skip
        status, _, answer = web.call("/api/v1/jobs/", data=json.dumps(body).encode(), headers=api)
        assert status == 201, answer
        ids.append(json.loads(answer)["id"])

    def stages() -> list[str]:
        return [json.loads(web.call(f"/api/v1/jobs/{job_id}/", headers=api)[2])["stage"] for job_id in ids]

    wait_until(lambda: stages() == ["run", "run"], 60, 0.2, message="both jobs to be claimed")
    wait_until(lambda: len(containers_running()) == 2, 60, 0.2, message="both containers to run")

    offset = worker.log_path.stat().st_size
    cluster.stop()
    down_at = datetime.now(UTC)
    status, headers, page = web.call("/jobs/")
    assert (status, headers.get("Retry-After")) == (503, "5") and DATABASE_AWAY in page, page[:500]
    status, headers, answer = web.call(f"/api/v1/jobs/{ids[0]}/", headers=api)
    assert (status, json.loads(answer or "{}")) == (503, {"detail": DATABASE_AWAY}), answer[:500]
    # Down for a few seconds: until the node has missed three heartbeats.
    missed = lambda: worker.log_since(offset).count("heartbeat failed") >= 3  # noqa: E731
    wait_until(missed, 30, 0.2, message="three heartbeats to fail")
    cluster.start()
    up_at, up_offset = datetime.now(UTC), platform.log_path.stat().st_size

    wait_until(
        lambda: query(cluster, "SELECT last_heartbeat > %s FROM pool_node WHERE name = %s", up_at, NODE) == [(True,)],
        30, 0.2, message="a heartbeat after the restart",
    )  # fmt: skip
    wait_until(lambda: stages() == ["release", "release"], 120, 0.5, message="both jobs to be released")
    for job_id in ids:
        job = json.loads(web.call(f"/api/v1/jobs/{job_id}/", headers=api)[2])
        assert (job["outcome"], job["exit_code"], job["attempt"]) == ("succeeded", 0, 1), job
    records = query(cluster, "SELECT job_id::text, count(*) FROM accounting_record GROUP BY job_id ORDER BY 1")
    assert records == sorted((job_id, 1) for job_id in ids)
    # A reaper pass ran after the outage and lost no node.
    wait_until(lambda: platform.log_since(up_offset).count("worker.reap") > 2, 30, 0.5, message="reaper passes")
    assert query(cluster, "SELECT state FROM pool_node WHERE name = %s", NODE) == [("active",)]
    assert query(cluster, "SELECT count(*) FROM pool_nodestatechange WHERE at > %s", down_at) == [(0,)]
    assert query(cluster, "SELECT count(*) FROM jobs_jobevent WHERE event = 'lose'") == [(0,)]
    assert worker.alive()
    assert web.status("/jobs/") == 200
