"""The API under load: submissions per second, and the job list's p95 with 100,000 jobs.

Against gunicorn (3 workers) with the production settings (DJANGO_DEBUG=0, PostgreSQL, the Redis
cache) on loopback, from concurrent clients in this process's threads (`Loopback`, a lean HTTP
client, so the clients take little of the two cores the server runs on). Submissions are small (a
100-byte data file) and nothing runs them: no worker consumes the benchmark's broker, so this
measures the API, the database and the store, not the scheduler's passes. The list's page is a
morning's: 50 released jobs, each with its hold and its record. The anchors, measured in the same
run on the same server: the lightest authenticated write (POST /api/v1/tokens/: authentication, the
throttle, one INSERT) and read (GET /api/v1/tokens/ with one row).

    .venv/bin/python bench/api.py [--submissions 600] [--jobs 100000] [--clients 6]

Prints the headline figures last, each beside its anchor and the ratio: `submissions_per_s` beside
`anchor_token_creates_per_s`, `api_list_p95_ms` and `api_list_filtered_p95_ms` beside
`anchor_token_list_p95_ms`.
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import BROKER_DB, ROOT, cpu_by_process, machine, throwaway_database  # noqa: E402

JSON = "application/json"
DATA = b"a,b\n" + b"1,2\n" * 24  # 100 bytes


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_gunicorn(port: int, workers: int) -> subprocess.Popen:
    var = ROOT / "var" / "bench-api"
    shutil.rmtree(var / "store", ignore_errors=True)  # the jobs of earlier runs (their database is gone)
    var.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "e31site.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "bench-" + uuid.uuid4().hex,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "E31_VAR_DIR": str(var),
        "DATABASE_CONN_MAX_AGE": "60",
        # The rates are for people; the benchmark is many requests of one person.
        "E31_API_RATE_USER": "1000000/min",
    }
    (ROOT / "var" / "log").mkdir(parents=True, exist_ok=True)
    log = open(ROOT / "var" / "log" / "bench-api-gunicorn.log", "ab")  # noqa: SIM115 (kept open for the server)
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "e31site.wsgi", "-c", "e31site/gunicorn_conf.py", "-w",
         str(workers), "-b", f"127.0.0.1:{port}", "--access-logfile", "-", "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/api/schema/", timeout=2)
            return server
        except httpx.TransportError:
            time.sleep(0.3)
    server.kill()
    raise SystemExit("gunicorn did not start; see var/log/bench-api-gunicorn.log")


class Loopback:
    """The benchmark's HTTP client: requests encoded once, each sent on a connection of its own and read
    to its end (`Connection: close`, as gunicorn's sync workers close every connection anyway).

    The clients share the two cores with the server: httpx spent 1.3–2 ms of CPU on each request,
    a sixth of what a submission costs the server, so it measured the client as much as the server.
    This costs a tenth of that; what it does not do (redirects, chunked bodies, keep-alive) no
    request here needs."""

    def __init__(self, port: int, token: str) -> None:
        self.address = ("127.0.0.1", port)
        self.head = f"Host: 127.0.0.1:{port}\r\nAuthorization: Token {token}\r\nConnection: close\r\n"

    def encode(self, method: str, path: str, body: bytes = b"", content_type: str = "") -> bytes:
        head = f"{method} {path} HTTP/1.1\r\n{self.head}"
        if body or method == "POST":
            head += f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        return (head + "\r\n").encode() + body

    def send(self, request: bytes) -> tuple[int, bytes]:
        """The status and body of the answer to an encoded request."""
        with socket.create_connection(self.address, timeout=60) as sock:
            sock.sendall(request)
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        answer = b"".join(chunks)
        head, _, body = answer.partition(b"\r\n\r\n")
        return int(head.split(b" ", 2)[1]), body


def hammer(http: Loopback, clients: int, total: int, request) -> tuple[float, list[float]]:
    """`total` requests spread over `clients` threads; `request(i)` is the i-th encoded request. Returns
    (seconds, the latencies in ms). Any answer but 2xx stops the benchmark."""
    latencies: list[float] = []
    errors: list[str] = []
    counter = iter(range(total))
    lock = threading.Lock()

    def client() -> None:
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            encoded = request(i)
            start = time.perf_counter()
            status, body = http.send(encoded)
            elapsed = (time.perf_counter() - start) * 1000
            if not 200 <= status < 300:
                errors.append(f"{status} {body[:200]!r}")
                return
            with lock:
                latencies.append(elapsed)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - began
    if errors:
        raise SystemExit(f"requests failed: {errors[:3]}")
    return seconds, latencies


def cpu_split(used: dict[str, float], count: int) -> str:
    """Where a request's CPU went, in ms: the web server, the database, Redis, this process's clients."""
    parts = {"gunicorn": "gunicorn", "postgres": "PostgreSQL", "redis-server": "Redis", "clients": "the clients"}
    shown = [f"{used.get(name, 0.0) * 1000 / count:.2f} ms {label}" for name, label in parts.items()]
    rest = sum(v for name, v in used.items() if name not in parts)
    return ", ".join([*shown, f"{rest * 1000 / count:.2f} ms other"])


class PassesTaking:
    """What a consuming worker does to the nudges' marker (jobs.scheduling.dispatch): each pass takes it as it
    starts. Nothing consumes the benchmark's broker, so without this one nudge would leave per marker
    expiry instead of one per pass. A pass of a small queue takes a few tens of ms: taken every
    `every_s`, as if passes ran back to back at that length."""

    def __init__(self, every_s: float) -> None:
        self.every_s, self.stop = every_s, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "PassesTaking":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        from jobs.scheduling.dispatch import schedule_request_taken

        while not self.stop.wait(self.every_s):
            schedule_request_taken()


def p95(latencies: list[float]) -> float:
    return statistics.quantiles(latencies, n=100)[94]


def bulk_jobs(team, user, image, count: int) -> None:
    """`count` released jobs, a minute apart, each with its hold on the bench node and its record, as
    the morning's list shows them; made straight in the database (the list is measured, not the run)."""
    import hashlib

    from django.utils import timezone

    from accounting.models import Record
    from accounting.rates import settings_rate
    from jobs.models import Job, Outcome, Stage
    from pool.models import Hold, Node

    now, node, prev = timezone.now(), Node.objects.get(name="bench"), "0" * 64
    outcomes = [Outcome.SUCCEEDED] * 8 + [Outcome.FAILED, Outcome.TIMED_OUT]
    held_for, cost = Decimal("5.000"), settings_rate().cost(cpus=1, memory_mb=64, gpus=0, held_seconds=Decimal(5))
    jobs, holds, records = [], [], []
    for i in range(count):
        at, outcome = now - timedelta(minutes=count - i), outcomes[i % len(outcomes)]
        released = at + timedelta(seconds=5)
        job = Job(
            id=uuid.uuid4(), team=team, submitted_by=user, name=f"nightly {i}", image=image, command=["true"], env={},
            cpus=1, memory_mb=64, time_limit_s=60, stage=Stage.RELEASE, outcome=outcome, exit_code=0,
            submitted_at=at, held_at=at, started_at=at, finished_at=at, released_at=released,
        )  # fmt: skip
        hold = Hold(id=uuid.uuid4(), job=job, node=node, cpu_set=[i % 4], memory_mb=64, held_at=at,
                    released_at=released, runtime="runc")  # fmt: skip
        digest = hashlib.sha256(f"{i}{prev}".encode()).hexdigest()
        records.append(Record(
            id=uuid.uuid4(), hold=hold, job=job, team=team, node=node.name, cpu_set=hold.cpu_set, cpus=1,
            memory_mb=64, gpus=0, gpu_ids=[], held_at=at, released_at=released, held_seconds=held_for,
            cpu_seconds=held_for, memory_peak_mb=32, cost=cost, outcome=outcome, sequence=i + 1, prev_hash=prev,
            hash=digest,
        ))  # fmt: skip
        prev = digest
        jobs.append(job)
        holds.append(hold)
    Job.objects.bulk_create(jobs, batch_size=5000)
    Hold.objects.bulk_create(holds, batch_size=5000)
    Record.objects.bulk_create(records, batch_size=5000)


def main() -> None:
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per request
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submissions", type=int, default=600)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--lists", type=int, default=400)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--warm-up", type=int, default=60, help="requests before anything is timed")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--pass-s", type=float, default=0.05, help="a scheduler pass's length (PassesTaking)")
    parser.add_argument(
        "--list-clients", type=int, default=1, help="clients of the list's p95 (1: the latency one script sees)"
    )
    args = parser.parse_args()

    broker = f"redis://127.0.0.1:6379/{BROKER_DB}"
    os.environ["CELERY_BROKER_URL"] = broker  # nothing consumes it: the submissions only wait
    from tests.workers import purge_broker

    purge_broker(broker)
    url = throwaway_database("e31bench_api")
    os.environ["DATABASE_URL"] = url
    from django.db.models import F
    from django.utils import timezone

    from jobs.models import Job, RuntimeImage
    from pool.nodes import Capacity, register
    from teams.people import add_member, create_team
    from teams.tokens import create_token

    team, _ = create_team("bench")
    user = add_member("bench", team=team)
    token = create_token(user, name="bench")
    image, _ = RuntimeImage.objects.get_or_create(name="busybox", defaults={"reference": "e31/busybox:1"})
    register("bench", Capacity(cpu_ids=[0, 1, 2, 3], memory_mb=8192, gpu_ids=[]), now=timezone.now())

    port = free_port()
    server = start_gunicorn(port, args.workers)
    http = Loopback(port, token)
    try:
        # Warm every gunicorn worker (imports, connections) before anything is timed.
        tokens_list = http.encode("GET", "/api/v1/tokens/")
        hammer(http, args.clients, args.warm_up, lambda i: tokens_list)

        # The multipart body is encoded once (by httpx) and only the name changes.
        body = httpx.Request("POST", f"http://127.0.0.1:{port}/", data={
            "name": "bench @@@@@@", "image": "busybox", "command": "true", "cpus": "1", "memory_mb": "64",
            "time_limit_s": "60",
        }, files={"data": ("train.csv", DATA)})  # fmt: skip
        submission = http.encode("POST", "/api/v1/jobs/", body.read(), body.headers["Content-Type"])

        def submit(i: int) -> bytes:
            return submission.replace(b"@@@@@@", b"%06d" % i)

        def make_token(i: int) -> bytes:
            return http.encode("POST", "/api/v1/tokens/", json.dumps({"name": f"anchor {i}"}).encode(), JSON)

        anchor_write_s, _ = hammer(http, args.clients, args.submissions, make_token)
        groups = {server.pid: "gunicorn", os.getpid(): "clients"}
        cpu_before = cpu_by_process(groups)
        with PassesTaking(args.pass_s):
            submit_s, submit_ms = hammer(http, args.clients, args.submissions, submit)
        cpu_used = {name: used - cpu_before.get(name, 0.0) for name, used in cpu_by_process(groups).items()}
        assert Job.objects.count() == args.submissions

        # The list is measured as a team sees it in the morning: its newest jobs released, with their holds
        # and records. The submissions above, still waiting, go back before them.
        Job.objects.update(submitted_at=F("submitted_at") - timedelta(days=400))
        bulk_jobs(team, user, image, args.jobs - args.submissions)
        from django.db import connection

        with connection.cursor() as cursor:
            # As autovacuum leaves a table that grew over months (it vacuums after inserts too, since
            # PostgreSQL 13): statistics, and a visibility map that lets the count scan the index alone.
            # Done here, not left to autovacuum to do halfway through the measurement.
            cursor.execute("VACUUM ANALYZE")
        total = Job.objects.count()
        readers = args.list_clients
        anchor_read, job_list = http.encode("GET", "/api/v1/tokens/?q=bench"), http.encode("GET", "/api/v1/jobs/")
        filtered = http.encode("GET", "/api/v1/jobs/?outcome=failed&q=nightly")
        _, anchor_read_ms = hammer(http, readers, args.lists, lambda i: anchor_read)
        _, list_ms = hammer(http, readers, args.lists, lambda i: job_list)
        _, filtered_ms = hammer(http, readers, args.lists, lambda i: filtered)
        loaded_s, loaded_ms = hammer(http, args.clients, args.lists, lambda i: job_list)
    finally:
        server.terminate()
        server.wait(timeout=30)
        purge_broker(broker)

    submissions_per_s = args.submissions / submit_s
    anchor_per_s = args.submissions / anchor_write_s
    print(machine())
    print(f"gunicorn -w {args.workers}, {args.clients} client threads, DJANGO_DEBUG=0, PostgreSQL, loopback")
    print(f"submissions: {args.submissions} with one 100-byte file, p95 {p95(submit_ms):.1f} ms each")
    print("CPU per submission: " + cpu_split(cpu_used, args.submissions))
    print(f"jobs in the database: {total}")
    loaded = f"{p95(loaded_ms):.1f} ms, {args.lists / loaded_s:.1f} lists/s"
    print(f"list p95 with {readers} client(s) below; with {args.clients}: {loaded}")
    print(f"anchor_token_creates_per_s: {anchor_per_s:.1f} requests/s")
    print(f"submissions_per_s: {submissions_per_s:.1f} submissions/s")
    print(f"submission_to_anchor_ratio: {submissions_per_s / anchor_per_s:.2f}")
    print(f"anchor_token_list_p95_ms: {p95(anchor_read_ms):.1f} ms")
    print(f"api_list_p95_ms: {p95(list_ms):.1f} ms")
    print(f"list_to_anchor_ratio: {p95(list_ms) / p95(anchor_read_ms):.2f}")
    print(f"api_list_filtered_p95_ms: {p95(filtered_ms):.1f} ms")
    print(f"filtered_list_to_anchor_ratio: {p95(filtered_ms) / p95(anchor_read_ms):.2f}")


if __name__ == "__main__":
    main()
