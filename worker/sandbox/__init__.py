"""The sandbox: the only place the system touches a container engine (Docker, through its SDK)."""

from functools import cache

from worker.sandbox.base import Exit, Metered, RunSpec, Sandbox
from worker.sandbox.docker import DockerSandbox

__all__ = ["Exit", "Metered", "RunSpec", "Sandbox", "get_sandbox"]


@cache
def get_sandbox() -> Sandbox:
    return DockerSandbox()
