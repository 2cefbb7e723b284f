from functools import cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from jobs.sandbox.base import Exit, Metered, RunSpec, Sandbox

__all__ = ["Exit", "Metered", "RunSpec", "Sandbox", "get_sandbox"]


@cache
def get_sandbox() -> Sandbox:
    if settings.E31_SANDBOX == "docker":
        from jobs.sandbox.docker import DockerSandbox

        return DockerSandbox()
    raise ImproperlyConfigured(f"unknown E31_SANDBOX {settings.E31_SANDBOX!r}")
