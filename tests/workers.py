"""Real `celery worker` processes, a node of the pool (`NodeWorker`) or a platform worker (`PlatformWorker`, the
platform's plane as `make run` starts it: `Platform`): the one helper the tests and the benchmarks start them with.

A worker started here dies with the process that started it, even when that process is killed
with SIGKILL (the kernel sends the worker SIGQUIT, Celery's cold shutdown), so a benchmark or a test
run stopped half-way never leaves a worker consuming the next run's broker. Before a test's data is
flushed, `quiesce_all` stops every worker consuming and waits until none runs a task: a scheduler
pass caught by the flush's TRUNCATE would deadlock with it.
"""

import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Self

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
PR_SET_PDEATHSIG = 1
RUNNING: list["CeleryWorker"] = []


def _die_with_parent() -> None:
    # Runs in the child between fork and exec; the setting survives exec.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGQUIT)


def wait_until(
    predicate: Callable[[], object], timeout: float = 60, interval: float = 0.2, message: str = ""
) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message or 'a condition'}")


def purge_broker(url: str) -> None:
    """Drop everything in the broker's Redis database: messages left by an earlier run name jobs
    that no longer exist, and a worker would run them against this run's database."""
    import redis

    redis.Redis.from_url(url).flushdb()


class CeleryWorker:
    """One `celery -A e31site worker` process, `label` in its hostname, logging to `log_path`."""

    def __init__(self, label: str, *, env: dict[str, str], log_path: Path, loglevel: str = "info"):
        self.label = label
        self.env = env
        self.log_path = log_path
        self.loglevel = loglevel
        self.hostname = f"e31-{label}-{os.getpid()}@{socket.gethostname()}"
        self.process: subprocess.Popen | None = None
        self.consuming = True

    @property
    def queues(self) -> list[str]:
        raise NotImplementedError

    def options(self) -> list[str]:
        """What the worker's command line adds to the options every worker of the tests has."""
        return []

    def start(self, *, wait: bool = True) -> Self:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "e31site", "worker", "-l", self.loglevel, "--without-gossip",
                 "--without-mingle", "--without-heartbeat", "-n", self.hostname, *self.options()],
                cwd=ROOT, env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_parent,
            )  # fmt: skip
        RUNNING.append(self)
        self.consuming = True
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 60) -> None:
        wait_until(
            lambda: "ready." in self.log_since(self.offset) or not self.alive(),
            timeout,
            message=f"the celery worker {self.label} to start",
        )
        assert self.alive(), f"the celery worker {self.label} died; see {self.log_path}"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_since(self, offset: int = 0) -> str:
        if not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")

    def kill(self) -> None:
        """SIGKILL the worker and its children: no shutdown, no clean-up, as when a machine dies."""
        self._signal(signal.SIGKILL, wait=10)

    def stop(self) -> None:
        """Warm shutdown (SIGTERM); SIGKILL if it does not end within 20 s."""
        try:
            self._signal(signal.SIGTERM, wait=20)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL, wait=5)

    def shut_down(self, timeout: float = 120) -> None:
        """SIGTERM to the worker's main process only, as systemd's KillMode=mixed: a warm shutdown, which
        lets the running tasks finish (a SIGTERM to its pool processes would end them at once)."""
        process = self.process
        if process is None:
            return
        process.terminate()
        process.wait(timeout)
        self.process = None
        if self in RUNNING:
            RUNNING.remove(self)

    def _signal(self, sig: int, *, wait: float) -> None:
        process = self.process
        if process is None:
            return
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass
        process.wait(wait)
        self.process = None
        if self in RUNNING:
            RUNNING.remove(self)

    def quiesce(self, app, timeout: float = 60) -> None:
        """Stop consuming, then wait until no task is active or reserved."""
        if not self.alive():
            return
        for queue in self.queues:
            app.control.cancel_consumer(queue, destination=[self.hostname], reply=True, timeout=5)
        self.consuming = False

        def idle() -> bool:
            inspect = app.control.inspect(destination=[self.hostname], timeout=2)
            active, reserved = inspect.active() or {}, inspect.reserved() or {}
            return not active.get(self.hostname) and not reserved.get(self.hostname)

        wait_until(idle, timeout, 0.1, message=f"the celery worker {self.label} to finish its tasks")

    def resume(self, app) -> None:
        if not self.alive() or self.consuming:
            return
        for queue in self.queues:
            app.control.add_consumer(queue, destination=[self.hostname], reply=True, timeout=5)
        self.consuming = True


class NodeWorker(CeleryWorker):
    """A node's worker, node `node`: its own queue only."""

    def __init__(self, node: str, *, env: dict[str, str], log_path: Path, loglevel: str = "info"):
        super().__init__(node, env={**env, "E31_NODE_NAME": node}, log_path=log_path, loglevel=loglevel)
        self.node = node

    @property
    def queues(self) -> list[str]:
        return [f"node.{self.node}"]


class PlatformWorker(CeleryWorker):
    """A platform worker of `kinds` (`--platform`), `concurrency` threads, as `make run` starts them; `label` (in its
    hostname) tells apart two of the same kinds."""

    def __init__(
        self, kinds: list[str], *, concurrency: int, env: dict[str, str], log_path: Path, loglevel: str = "info",
        label: str = "",
    ):  # fmt: skip
        super().__init__(label or "platform-" + "-".join(kinds), env=env, log_path=log_path, loglevel=loglevel)
        self.kinds, self.concurrency = kinds, concurrency

    @property
    def queues(self) -> list[str]:
        return [settings.E31_PLATFORM_QUEUES[kind] for kind in self.kinds]

    def options(self) -> list[str]:
        return ["--platform", ",".join(self.kinds), *make_run_platform_pool(), "-c", str(self.concurrency)]


class Platform:
    """The platform's plane as `make run` starts it: a worker for each kind of platform work, with its
    concurrency (the Makefile's PLATFORM_WORKERS), logging to `<log_prefix>-<kind>.log`."""

    def __init__(self, *, env: dict[str, str], log_prefix: Path, loglevel: str = "info"):
        log_for = lambda kind: log_prefix.with_name(f"{log_prefix.name}-{kind}.log")  # noqa: E731
        self.workers = {
            kind: PlatformWorker([kind], concurrency=threads, env=env, log_path=log_for(kind), loglevel=loglevel)
            for kind, threads in make_run_platform().items()
        }

    def __getitem__(self, kind: str) -> PlatformWorker:
        return self.workers[kind]

    def start(self, *, wait: bool = True) -> "Platform":
        for worker in self.workers.values():
            worker.start(wait=False)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self) -> None:
        for worker in self.workers.values():
            worker.wait_ready()

    def stop(self) -> None:
        for worker in self.workers.values():
            worker.stop()

    def quiesce(self, app) -> None:
        for worker in self.workers.values():
            worker.quiesce(app)

    def resume(self, app) -> None:
        for worker in self.workers.values():
            worker.resume(app)


def one_platform_worker(*, env: dict[str, str], log_path: Path) -> PlatformWorker:
    """All the platform's work in one worker process, for a test's private stack (its own broker or database)
    that needs the platform's passes but not their separation: a thread for each kind."""
    kinds = make_run_platform()
    return PlatformWorker(list(kinds), concurrency=len(kinds), env=env, log_path=log_path)


def quiesce_all(app) -> None:
    for worker in list(RUNNING):
        worker.quiesce(app)


def resume_all(app) -> None:
    for worker in list(RUNNING):
        worker.resume(app)


def make_run_gunicorn() -> tuple[str, str]:
    """The config file and the number of worker processes of the Makefile's `run` target."""
    line = next(line for line in (ROOT / "Makefile").read_text().splitlines() if "gunicorn e31site.wsgi" in line)
    config, workers = re.search(r" -c (\S+)", line), re.search(r" -w (\d+)", line)
    assert config and workers, f"make run's gunicorn line changed: {line}"
    return config[1], workers[1]


def make_run_platform() -> dict[str, int]:
    """The platform workers of the Makefile's `run` target: each kind and its concurrency."""
    line = next(line for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("PLATFORM_WORKERS"))
    pairs = re.findall(r"(\w+):(\d+)", line.split("=", 1)[1])
    assert pairs, f"make run's PLATFORM_WORKERS changed: {line}"
    return {kind: int(threads) for kind, threads in pairs}


def make_run_platform_pool() -> list[str]:
    """The pool option of the Makefile's platform workers (`-P threads`)."""
    line = next(line for line in (ROOT / "Makefile").read_text().splitlines() if "--platform" in line)
    pool = re.search(r" (-P \S+)", line)
    assert pool, f"make run's platform worker line changed: {line}"
    return pool[1].split()


def start_gunicorn(port: int, *, env: dict[str, str], log) -> subprocess.Popen:
    """`gunicorn e31site.wsgi` as `make run` starts it (its config and processes) on a loopback port,
    dying with the process that started it."""
    config, workers = make_run_gunicorn()
    return subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "e31site.wsgi", "-c", config, "-b", f"127.0.0.1:{port}", "-w", workers],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True, preexec_fn=_die_with_parent,
    )  # fmt: skip


def stop_process(process: subprocess.Popen, grace: float = 30) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds."""
    process.terminate()
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def concurrently(*work: Callable[[], object], timeout: float = 60) -> list[BaseException]:
    """Run each piece of work in a thread of its own, all released at once; return what they raised. Each
    thread closes its database connection (the test database is dropped later)."""
    errors: list[BaseException] = []
    start = threading.Barrier(len(work))

    def run(piece: Callable[[], object]) -> None:
        try:
            start.wait()
            piece()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(piece,), daemon=True) for piece in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(t.is_alive() for t in threads), "a thread is stuck (deadlock?)"
    return errors
