"""A second real Docker engine on this host: a `dockerd` of its own (its socket, data, exec root,
pid file and containerd), as a node on another machine has, for the tests of nodes that share
nothing but PostgreSQL, Redis and the store.

It starts its own containerd under its exec root, so nothing of the main engine's is shared. Like
the main engine (scripts/services.sh) it has no bridge and no iptables, and gVisor's runsc as a
second runtime when the main engine's configuration registers it. It dies with the process that
started it (SIGKILL), and logs to var/log/.
"""

import ctypes
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import docker

from tests.workers import stop_process, wait_until

PR_SET_PDEATHSIG = 1
MAIN_CONFIG = Path(os.environ.get("E31_DOCKERD_CONFIG", "/etc/docker/daemon.json"))


def _die_with_parent() -> None:
    # Runs in the child between fork and exec; dockerd's own containerd dies with dockerd in turn.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def main_runtimes() -> dict:
    """The runtimes the main engine's configuration registers (runsc, by scripts/services.sh)."""
    try:
        return json.loads(MAIN_CONFIG.read_text()).get("runtimes", {})
    except (OSError, ValueError):
        return {}


class Engine:
    """One `dockerd` with everything of its own under a short temporary folder (a unix socket's path
    is limited to 108 bytes, and containerd's sockets live under the exec root)."""

    def __init__(self, log_path: Path, *, name: str = "engine2"):
        self.root = Path(tempfile.mkdtemp(prefix=f"e31-{name}-", dir="/tmp"))
        self.socket = self.root / "docker.sock"
        self.log_path = log_path
        self.process: subprocess.Popen | None = None
        self.config = self.root / "daemon.json"
        self.config.write_text(json.dumps({"runtimes": main_runtimes()}))

    @property
    def host(self) -> str:
        return f"unix://{self.socket}"

    def client(self, timeout: float = 60) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.host, timeout=timeout)

    def answers(self) -> bool:
        try:
            return bool(self.client(timeout=3).ping())
        except Exception:
            return False

    def start(self, timeout: float = 60) -> "Engine":
        # The containerd of a killed dockerd is gone, but its pid may live on as a zombie: dockerd would
        # wait for that containerd to answer instead of starting its own.
        (self.root / "exec" / "containerd" / "containerd.pid").unlink(missing_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                ["dockerd", "--host", self.host, "--data-root", str(self.root / "data"),
                 "--exec-root", str(self.root / "exec"), "--pidfile", str(self.root / "docker.pid"),
                 "--bridge=none", "--iptables=false", "--ip-masq=false", "--config-file", str(self.config)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent,
            )  # fmt: skip
        wait_until(
            lambda: self.answers() or self.process.poll() is not None, timeout, 0.2, message="the second dockerd"
        )
        assert self.answers(), f"the second dockerd did not start; see {self.log_path}"
        return self

    def kill(self) -> None:
        """SIGKILL dockerd, as when it crashes: its containers' shims live on, nothing answers on its socket."""
        if self.process is not None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
            self.process = None

    def stop(self) -> None:
        """SIGTERM (dockerd stops its containers and its containerd), SIGKILL after 30 s."""
        if self.process is None:
            return
        stop_process(self.process)
        self.process = None

    def remove(self) -> None:
        """Stop it, unmount what it mounted and delete its folder."""
        self.stop()
        for mounted in ("exec", "data"):  # dockerd mounts its roots on themselves, and a killed one leaves them
            subprocess.run(["umount", "-R", "-l", str(self.root / mounted)], capture_output=True, check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def load_images(self, references: list[str], source: docker.DockerClient) -> float:
        """Copy images from another engine (`docker save | docker load`, streamed); return the seconds it took."""
        started = time.monotonic()
        api = self.client(timeout=600).api
        for reference in references:
            stream = source.api.get_image(reference)
            for _ in api.load_image(stream):
                pass
        missing = [r for r in references if not self.client().images.list(name=r)]
        assert not missing, f"images not loaded into the second engine: {missing}"
        return time.monotonic() - started
