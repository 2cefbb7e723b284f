"""How DockerSandbox.wait reads a container's end from the engine (no engine needed)."""

from types import SimpleNamespace

from worker.sandbox import docker as docker_sandbox
from worker.sandbox.base import KILLED
from worker.sandbox.docker import DockerSandbox


def sandbox_seeing(*states: dict) -> tuple[DockerSandbox, list[dict]]:
    """A sandbox whose engine answers `states` to successive inspects (the last one again after)."""
    seen: list[dict] = []

    def inspect_container(handle):
        state = states[min(len(seen), len(states) - 1)]
        seen.append(state)
        return {"State": state}

    api = SimpleNamespace(wait=lambda handle, timeout: None, inspect_container=inspect_container, kill=lambda h: None)
    return DockerSandbox(SimpleNamespace(api=api)), seen


def test_an_oom_flag_that_trails_the_exit_is_waited_for(monkeypatch):
    monkeypatch.setattr(docker_sandbox.time, "sleep", lambda s: None)
    sandbox, seen = sandbox_seeing(
        {"ExitCode": KILLED, "OOMKilled": False}, {"ExitCode": KILLED, "OOMKilled": False},
        {"ExitCode": KILLED, "OOMKilled": True},
    )  # fmt: skip

    exited = sandbox.wait("c", timeout=1)

    assert exited is not None and exited.oom_killed and exited.exit_code == KILLED and len(seen) == 3


def test_a_plain_exit_is_read_once():
    sandbox, seen = sandbox_seeing({"ExitCode": 1, "OOMKilled": False})

    exited = sandbox.wait("c", timeout=1)

    assert exited is not None and not exited.oom_killed and exited.exit_code == 1 and len(seen) == 1


def test_a_kill_without_the_oom_flag_is_a_kill_once_the_wait_is_over(monkeypatch):
    clock = iter(range(0, 1000))
    monkeypatch.setattr(docker_sandbox.time, "monotonic", lambda: next(clock) * 0.5)
    monkeypatch.setattr(docker_sandbox.time, "sleep", lambda s: None)
    sandbox, seen = sandbox_seeing({"ExitCode": KILLED, "OOMKilled": False})

    exited = sandbox.wait("c", timeout=1)

    # The first look, then one each half second of the clock until OOM_FLAG_WAIT_S (2 s) is over.
    assert exited is not None and not exited.oom_killed and len(seen) == 4


def test_a_container_this_sandbox_stopped_is_read_once():
    sandbox, seen = sandbox_seeing({"ExitCode": KILLED, "OOMKilled": False})
    sandbox.stop("c")  # a time limit or a cancel: the kill is ours, not the memory limit's

    exited = sandbox.wait("c", timeout=1)

    assert exited is not None and not exited.oom_killed and len(seen) == 1
