"""The sandbox: the only place the system touches a container engine (Docker, through its SDK)."""

import os
from functools import cache

from worker.sandbox.base import ENGINE_GONE, EngineGone, Exit, Metered, RunSpec, Sandbox, run_key
from worker.sandbox.docker import DockerSandbox

__all__ = ["ENGINE_GONE", "EngineGone", "Exit", "Metered", "RunSpec", "Sandbox", "get_sandbox", "run_key"]


@cache
def get_sandbox() -> Sandbox:
    return DockerSandbox()


# A pool process forked from the worker's main process (where the node's start and heartbeat may have
# made the sandbox) must not share its engine client: their requests would cross on one socket.
os.register_at_fork(after_in_child=get_sandbox.cache_clear)
