"""Probe rounds run in this process, as a node's worker would run them, and the isolation rules a
test can take away from the sandbox to see a probe fail without it."""

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import connection
from django.utils import timezone
from docker.types import Mount

from isolation import checks
from isolation.models import ProbeRound
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, Stage
from tests.workers import wait_until
from worker import outputs, runner, scratch
from worker.sandbox.docker import DockerSandbox


def run_round_here(round: ProbeRound, *, timeout: float = 300) -> ProbeRound:
    """Hold and run the round's jobs in this process (each in a thread, as a worker runs several at
    once) until all are released; then judge the round."""
    ids = [r.job_id for r in round.results.all()] + ([round.decoy_id] if round.decoy_id else [])
    started: set = set()
    threads: list[threading.Thread] = []
    errors: list[BaseException] = []

    def run(job_id, node_name: str) -> None:
        try:
            runner.run(job_id, node_name=node_name)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    def step() -> bool:
        schedule_pass(now=timezone.now())
        for job in Job.objects.filter(pk__in=ids, stage=Stage.RENT).exclude(pk__in=started):
            started.add(job.pk)
            thread = threading.Thread(target=run, args=(job.pk, job.active_hold.node.name))
            thread.start()
            threads.append(thread)
        return not Job.objects.filter(pk__in=ids).exclude(stage=Stage.RELEASE).exists()

    try:
        wait_until(step, timeout, 0.2, message="every probe job to be released")
    finally:
        for thread in threads:
            thread.join(120)
    assert not errors, errors
    assert checks.judge_round(round, now=timezone.now())
    round.refresh_from_db()
    return round


def verdicts(round: ProbeRound) -> dict[str, str]:
    return {r.probe: r.verdict for r in round.results.all()}


def evidence(round: ProbeRound) -> dict[str, str]:
    return {r.probe: f"{r.verdict}: {r.evidence}" for r in round.results.all()}


# --- the rules, each taken away by itself -------------------------------------------------------------


def _without_keys(*keys: str, **replaced: object) -> Callable[[dict], None]:
    def change(config: dict) -> None:
        for key in keys:
            config.pop(key, None)
        config.update(replaced)

    return change


CONFIG_RULES: dict[str, Callable[[dict], None]] = {
    # probe → the container configuration without the rule that keeps it in
    "network": _without_keys("network_disabled", network_mode="host"),
    "fs-write": _without_keys(read_only=False),
    "capabilities": _without_keys("cap_drop"),
    "root": _without_keys("user"),
    "cpuset": _without_keys("cpuset_cpus"),
    "memory": _without_keys("mem_limit", "memswap_limit"),
    "pids": _without_keys("pids_limit", "ulimits"),
    "host-view": _without_keys(pid_mode="host"),
}


def _naive_collect(output_dir: Path, patterns: list[str], limits: outputs.Limits) -> outputs.Collection:
    """Output collection without its link rules: follows symlinks, takes hardlinks."""
    import hashlib

    found = outputs.Collection()
    for path in sorted(output_dir.rglob("*")):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        rel = str(path.relative_to(output_dir))
        found.files.append(outputs.Collected(rel, len(data), hashlib.sha256(data).hexdigest(), path))
    return found


@contextmanager
def without_rule(probe: str, monkeypatch) -> Iterator[str]:
    """Take away the one rule that keeps probe `probe` in, for the block; yield what was taken."""
    if probe in CONFIG_RULES:
        change = CONFIG_RULES[probe]
        original = DockerSandbox.container_config

        def weakened(self: DockerSandbox, spec) -> dict:
            config = original(self, spec)
            change(config)
            return config

        monkeypatch.setattr(DockerSandbox, "container_config", weakened)
        yield f"container configuration without the {probe} rule"
    elif probe == "staged-data":
        # Two rules keep another job's data out, each enough alone: only its own folder is mounted, and
        # every run has its own uid (its folders are 0700). Both go: every run's data folder mounted in
        # every job (the probe's once the decoy's is staged), and one uid for all.
        original = DockerSandbox.container_config

        def with_others(self: DockerSandbox, spec) -> dict:
            config = original(self, spec)
            root = Path(settings.E31_SCRATCH_DIR)

            def others() -> list[Path]:
                return [d for d in root.glob("*/data") if d.parent.name != spec.job_id and any(d.iterdir())]

            if spec.command[-1] == "staged-data":
                wait_until(others, 30, message="the decoy's data to be staged")
            for folder in others():
                config["mounts"].append(
                    Mount(f"/others/{folder.parent.name}", str(folder), type="bind", read_only=True)
                )
            return config

        monkeypatch.setattr(DockerSandbox, "container_config", with_others)
        monkeypatch.setattr(runner, "job_uid", lambda cpu_set: settings.E31_JOB_UID_BASE)
        yield "every run's data folder mounted in every job, and one uid for every run"
    elif probe == "output-links":
        monkeypatch.setattr(runner.outputs, "collect", _naive_collect)
        yield "output collection that follows links"
    elif probe == "mountinfo":
        monkeypatch.setattr(scratch.Scratch, "_mount_data", lambda self, files: None)
        yield "/data bind-mounted from the node's scratch folder"
    elif probe == "inodes":
        monkeypatch.setattr(scratch, "may_mount", lambda: False)
        yield "/output a folder of the node's disk"
    else:
        raise KeyError(probe)
    monkeypatch.undo()
