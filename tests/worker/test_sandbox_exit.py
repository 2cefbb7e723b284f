"""How DockerSandbox.wait reads a container's end from the engine (no engine needed)."""

from types import SimpleNamespace

from worker.sandbox import docker as docker_sandbox
from worker.sandbox.base import KILLED
from worker.sandbox.docker import DockerSandbox


def sandbox_seeing(*states: dict, oom_events: list[list[dict]] = ()) -> tuple[DockerSandbox, list[dict]]:
    """A sandbox whose engine answers `states` to successive inspects (the last one again after), and
    `oom_events` to successive asks for the container's "oom" events (none once they run out)."""
    seen: list[dict] = []
    asked: list[dict] = []

    def inspect_container(handle):
        state = states[min(len(seen), len(states) - 1)]
        seen.append(state)
        return {"State": state}

    def events(since, until, filters, decode):
        asked.append({"since": since, "filters": filters})
        return iter(oom_events[len(asked) - 1] if len(asked) <= len(oom_events) else [])

    api = SimpleNamespace(
        wait=lambda handle, timeout: None,
        inspect_container=inspect_container,
        kill=lambda h, signal: None,
        events=events,
    )
    sandbox = DockerSandbox(SimpleNamespace(api=api))
    sandbox.asked = asked  # type: ignore[attr-defined]
    return sandbox, seen


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


def test_an_oom_event_that_trails_the_exit_is_an_oom_kill_though_the_flag_never_comes(monkeypatch):
    # Docker 20.10 sets OOMKilled only when the runtime's OOM event comes before the exit's; one that
    # comes after is kept only as an "oom" event of the container.
    monkeypatch.setattr(docker_sandbox.time, "sleep", lambda s: None)
    killed = {"ExitCode": KILLED, "OOMKilled": False, "StartedAt": "2026-12-04T22:19:36.109377123Z"}
    sandbox, seen = sandbox_seeing(killed, oom_events=[[], [{"Action": "oom"}]])

    exited = sandbox.wait("c", timeout=1)

    assert exited is not None and exited.oom_killed and exited.exit_code == KILLED and len(seen) == 2
    assert sandbox.asked[0] == {"since": 1796422776, "filters": {"container": "c", "event": "oom"}}


def test_a_container_this_sandbox_stopped_is_not_asked_for_oom_events():
    sandbox, seen = sandbox_seeing({"ExitCode": KILLED, "OOMKilled": False}, oom_events=[[{"Action": "oom"}]])
    sandbox.stop("c")

    exited = sandbox.wait("c", timeout=1)

    assert exited is not None and not exited.oom_killed and sandbox.asked == []
