"""Shared set-up for the benchmarks: a throw-away PostgreSQL database, migrated, dropped at exit."""

import atexit
import contextlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ADMIN_URL = os.environ.get("BENCH_ADMIN_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
# The Redis database of the benchmark's broker: one no other worker consumes (test suites take theirs).
BROKER_DB = int(os.environ.get("BENCH_REDIS_DB", "15"))
# Two runs at once on one machine (two suites' smoke tests) keep apart by BENCH_ID: each its own databases and
# its containers' namespace (BENCH_REDIS_DB, each its own broker).
BENCH_ID = os.environ.get("BENCH_ID", "")
NAMESPACE = f"e31bench{BENCH_ID}"


def throwaway_database(name: str) -> str:
    """Create database `name` (dropping a leftover) as a copy of the migrated template, point Django at it,
    migrate what the template lacks; drop it at exit."""
    import psycopg

    def run(sql: str) -> None:
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            conn.execute(sql)

    name = f"{name}_{BENCH_ID}" if BENCH_ID else name
    template = migrated_template()
    run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    run(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    url = database_url(name)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "e31site.settings")

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)  # nothing to apply, unless a package brought one; post_migrate runs

    def drop() -> None:
        from django.db import connections

        connections.close_all()
        run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    atexit.register(drop)
    return url


def database_url(name: str) -> str:
    return ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"


TEMPLATE_PREFIX = "e31_bench_migrated_"


def migrated_template() -> str:
    """A database migrated once for these migrations, kept between runs, which every bench's database is
    copied from: migrating a new database takes longer than most benches' own work at a quick size."""
    import hashlib

    import psycopg

    digest = hashlib.sha256()
    for path in sorted(ROOT.glob("*/migrations/*.py")):
        digest.update(f"{path.relative_to(ROOT)}\n".encode() + path.read_bytes())
    template = TEMPLATE_PREFIX + digest.hexdigest()[:16]
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [template]).fetchone():
            return template
        building = f"{template}_{os.getpid()}"
        conn.execute(f'CREATE DATABASE "{building}"')
    try:
        # In a process of its own: this one's Django is set up later, on the bench's own database.
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "e31site.settings", "DATABASE_URL": database_url(building)}
        subprocess.run([sys.executable, "manage.py", "migrate", "--no-input", "-v0"], cwd=ROOT, env=env, check=True)
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [template]).fetchone():
                conn.execute(f'ALTER DATABASE "{building}" RENAME TO "{template}"')  # another run may have been first
            names = [row[0] for row in conn.execute("SELECT datname FROM pg_database").fetchall()]
            for old in names:  # the templates of earlier migrations; one in use is left for the next time
                if re.fullmatch(TEMPLATE_PREFIX + "[0-9a-f]{16}", old) and old != template:
                    with contextlib.suppress(psycopg.Error):
                        conn.execute(f'DROP DATABASE IF EXISTS "{old}"')
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{building}" WITH (FORCE)')
    return template


def machine() -> str:
    import platform

    cpu = "unknown cpu"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), cpu)
    except OSError:
        pass
    return f"{platform.node()}: {os.cpu_count()} cores ({cpu}), Python {platform.python_version()}"


def cpu_by_process(groups: dict[int, str] | None = None) -> dict[str, float]:
    """CPU seconds (user + system) used so far by every process on this machine, summed by command name
    (postgres, redis-server, ...), or by the name `groups` gives a process or its parent (a server and
    its workers, this process): read before and after a run, the difference says where its CPU went."""
    groups = groups or {}
    tick = os.sysconf("SC_CLK_TCK")
    used: dict[str, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        name, fields = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        name = groups.get(int(entry.name)) or groups.get(int(fields[1])) or name  # fields[1]: the parent
        used[name] = used.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return used


class Timer:
    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start


def start_worker(*, node: str = "local", cpus: str = "", concurrency: int = 4, broker_db: int = BROKER_DB):
    """Start a real Celery worker as the node, beside the platform workers as `make run` starts them (the scheduler
    passes run there), on the benchmark database; they die with this process. Returns the node's worker, the last
    one started (tests.workers.RUNNING[-1]).

    The broker database is emptied first: a bench killed half-way leaves its tasks behind, naming
    jobs of a database that was dropped.
    """
    from tests.workers import NodeWorker, Platform, purge_broker

    broker = f"redis://127.0.0.1:6379/{broker_db}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "e31site.settings",
        "CELERY_BROKER_URL": broker,
        "E31_NODE_CPUS": cpus,
        "E31_SANDBOX_NAMESPACE": NAMESPACE,
        "E31_WORKER_CONCURRENCY": str(concurrency),
        "E31_VAR_DIR": str(ROOT / "var" / "bench"),
        # The benches measure a team's runs: a node proving itself first would wait for the probes' image
        # (a fresh database has none registered), then run the probes beside the jobs measured.
        "E31_PROBE_ON_START": "0",
    }
    for name in ("CELERY_BROKER_URL", "E31_VAR_DIR", "E31_SANDBOX_NAMESPACE"):
        os.environ[name] = env[name]
    purge_broker(broker)
    # At info, so that each says when it is ready: a bench must not time their start-up.
    platform = Platform(env=env, log_prefix=ROOT / "var" / "log" / "bench-platform").start(wait=False)
    atexit.register(platform.stop)
    worker = NodeWorker(node, env=env, log_path=ROOT / "var" / "log" / f"bench-worker-{node}.log", loglevel="warning")
    worker.start(wait=False)
    atexit.register(worker.stop)
    from pool.models import Node

    deadline = time.monotonic() + 60
    while not Node.objects.filter(name=node).exists():
        if not worker.alive() or time.monotonic() > deadline:
            raise SystemExit(f"the worker did not start; see {worker.log_path}")
        time.sleep(0.2)
    platform.wait_ready()
    return worker


def real_stack(database: str, *, broker_db: int = BROKER_DB):
    """A throw-away database, a real worker as the node, a team and a member to submit as, and the
    busybox image (built if missing). Returns (team, user, image)."""
    # Before Django reads its settings (once, at set-up): this process must send its tasks to the
    # worker's broker, not to the default one another worker may be consuming.
    os.environ["CELERY_BROKER_URL"] = f"redis://127.0.0.1:6379/{broker_db}"
    throwaway_database(database)
    from teams.people import add_member, create_team
    from worker.runtime_images import build

    team, _ = create_team("bench")
    user = add_member("bench", team=team)
    image, _ = build("busybox")
    start_worker(broker_db=broker_db)
    return team, user, image


def submit_trivial(team, user, image, name: str):
    """Submit `true` in busybox, 1 core: the trivial job of the benchmarks."""
    from jobs.submit.declaration import Declaration
    from jobs.submit.service import submit

    declaration = Declaration(team=team, name=name, image=image, command=["true"], env={}, cpus=1, memory_mb=64,
                              gpus=0, time_limit_s=60, output_patterns=[])  # fmt: skip
    job, _ = submit(declaration, user=user)
    return job
