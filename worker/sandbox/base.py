"""The sandbox interface: the only way the system touches a container engine."""

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from jobs.lifecycle.usage import Reading


@dataclass(frozen=True)
class RunSpec:
    job_id: str
    node: str
    image: str
    command: list[str]
    env: dict[str, str]
    cpu_set: list[int]
    memory_mb: int
    gpu_ids: list[str]
    data_dir: Path
    output_dir: Path
    uid: int
    pids_limit: int
    tmpfs_mb: int
    labels: dict[str, str] = field(default_factory=dict)
    attempt: int = 1
    runtime: str = "runc"  # the engine's container runtime: runc, or runsc (gVisor) for isolation=strong

    @property
    def run_key(self) -> str:
        return run_key(self.job_id, self.attempt)


def run_key(job_id: object, attempt: int) -> str:
    """One run of one job: the attempts of a job never share a container name, a cgroup or a lock."""
    return f"{job_id}-{attempt}"


KILLED = 128 + 9  # the exit code of a main process killed by SIGKILL (as the OOM killer does)
STDOUT, STDERR = 1, 2  # the stream a frame of a container's log came from (the engine's stream ids)
LogFrame = tuple[int, bytes]  # (STDOUT or STDERR, the bytes)


class EngineGone(RuntimeError):
    """The node's container engine does not answer: its runs cannot be followed, stopped or read through it."""


ENGINE_GONE = "the node's container engine stopped answering"
ENGINE_PING_S = 5.0  # how long one ping waits for the engine (Sandbox.answers sends a few)


@dataclass(frozen=True)
class Exit:
    exit_code: int | None
    oom_killed: bool


@dataclass(frozen=True)
class Metered:
    cpu_seconds: float = 0.0
    memory_peak_mb: int | None = None


class Sandbox(Protocol):
    def run(self, spec: RunSpec) -> str:
        """Create and start the container; return its handle."""

    def wait(self, handle: str, timeout: float) -> Exit | None:
        """The exit of the container, or None if it still runs after `timeout` seconds."""

    def stop(self, handle: str) -> None:
        """Kill the container now."""

    def terminate(self, handle: str) -> None:
        """Ask the container to stop (SIGTERM to its main process): it may write what it has, then exit."""

    def logs(self, handle: str) -> Iterator[LogFrame]:
        """Its stdout and stderr from the start until it ends, each piece with the stream it came from."""

    def usage(self, handle: str) -> Metered:
        """What it used, read after it ended."""

    def reading(self, run_key: str) -> Reading | None:
        """What the run has used so far and uses now, cheap enough every few seconds; None when unreadable."""

    def remove(self, handle: str) -> None:
        """Remove the container and what the engine kept of it."""

    def find(self, *, node: str, run_key: str) -> str | None:
        """A run's container on this node, by its labels; one made but never started is removed instead."""

    def forget(self, run_key: str) -> Metered:
        """What a run whose container is gone used, read from its cgroup, which is then removed."""

    def answers(self, timeout: float) -> bool:
        """Whether the engine answers a ping within `timeout` seconds (a few pings, if it is only slow)."""

    def kill_run(self, run_key: str) -> int:
        """Kill every process of a run through its cgroup, without the engine (one that is gone); return how many."""

    def runtimes(self) -> set[str]:
        """The container runtimes the engine can run a container with (runc, runsc…)."""

    def orphans(self, *, node: str, keep: set[str]) -> list[str]:
        """Remove containers of this node whose run (RunSpec.run_key) is not in `keep`; return them."""
