"""The Docker Engine backend, the only place Docker is called: every isolation rule of a running job."""

import logging
import os
import signal
import struct
import time
from collections.abc import Iterator
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path

import docker
from django.conf import settings
from docker.errors import APIError, NotFound
from docker.types import DeviceRequest, LogConfig, Mount, Ulimit
from requests.exceptions import ConnectionError as RequestsConnectionError
from requests.exceptions import ReadTimeout

from jobs.lifecycle.usage import Reading
from worker.sandbox.base import ENGINE_PING_S, KILLED, STDERR, STDOUT, EngineGone, Exit, LogFrame, Metered, RunSpec

log = logging.getLogger(__name__)

JOB_LABEL = "e31.job"
RUN_LABEL = "e31.run"  # job id and attempt
NODE_LABEL = "e31.node"
NAMESPACE_LABEL = "e31.namespace"
# The engine keeps a container's log on its own disk too: bound it so a chatty job cannot fill it.
LOG_CONFIG = LogConfig(type="json-file", config={"max-size": "20m", "max-file": "1"})
LOG_FRAME_HEADER = struct.Struct(">BxxxL")  # a frame of the engine's log stream: stream id, length
OOM_FLAG_WAIT_S = 2.0
RUNSC = "runsc"  # gVisor's runtime, as dockerd names it (scripts/services.sh registers it)
RUNSC_TASKS_PER_PROCESS, RUNSC_OWN_TASKS = 16, 256  # a gVisor sandbox's host tasks (docs/isolation.md)
ENGINE_PINGS = 3  # pings left unanswered before the engine is taken for gone
UNREACHABLE = (RequestsConnectionError, ReadTimeout, FileNotFoundError, ConnectionRefusedError)


# The engine API version the sandbox speaks (Docker 20.10's, the first with private cgroup namespaces):
# fixed, not asked of the engine, so a client made while the engine is away does not fail.
API_VERSION = "1.41"


def engine_client(timeout: float = 60) -> docker.DockerClient:
    """A client of this node's engine: DOCKER_HOST when set (a node on an engine of its own), else the default."""
    return docker.from_env(timeout=timeout, version=API_VERSION)


class DockerSandbox:
    def __init__(self, client: docker.DockerClient | None = None):
        self.client = client or engine_client()
        self.namespace = settings.E31_SANDBOX_NAMESPACE
        self.stopped: set[str] = set()  # containers this sandbox killed: no OOM flag to wait for

    def cgroup_parent(self, run_key: str) -> str:
        # A parent cgroup per run outlives the container, so its cpu usage can be read after exit.
        return f"/{self.namespace}/{run_key}"

    def container_config(self, spec: RunSpec) -> dict:
        """The keyword arguments of containers.create: the isolation rules, in one place."""
        labels = {NAMESPACE_LABEL: self.namespace, **spec.labels}
        config = {
            "image": spec.image,
            "command": spec.command,
            "name": f"{self.namespace}-{spec.node}-{spec.run_key}",
            "environment": spec.env,
            "user": f"{spec.uid}:{spec.uid}",
            "working_dir": "/output",
            "detach": True,
            # runc, or runsc (gVisor: the job's system calls meet a kernel of its own, in user space).
            "runtime": spec.runtime,
            "labels": {JOB_LABEL: spec.job_id, RUN_LABEL: spec.run_key, NODE_LABEL: spec.node, **labels},
            # No network at all.
            "network_mode": "none",
            "network_disabled": True,
            # Data in read-only, output to its own folder (worker.scratch), nothing else of the host.
            "mounts": [
                Mount("/data", str(spec.data_dir), type="bind", read_only=True),
                Mount("/output", str(spec.output_dir), type="bind", read_only=False),
            ],
            "read_only": True,
            # runc gives a tmpfs the mode of the folder it covers (0755 in an image built without a
            # sticky /tmp), so mode=1777 alone may leave /tmp unwritable: the job's uid owns it instead.
            "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={spec.tmpfs_mb}m,mode=1777,uid={spec.uid},gid={spec.uid}"},
            # No privilege.
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "ipc_mode": "private",
            # Its own cgroup namespace: /proc/self/cgroup shows "/", not the node's path naming the job.
            "cgroupns": "private",
            "privileged": False,
            # Only the held compute.
            "cpuset_cpus": ",".join(str(c) for c in spec.cpu_set),
            "mem_limit": f"{spec.memory_mb}m",
            "memswap_limit": f"{spec.memory_mb}m",
            "pids_limit": spec.pids_limit,
            "cgroup_parent": self.cgroup_parent(spec.run_key),
            "log_config": LOG_CONFIG,
        }
        if spec.runtime == RUNSC:
            # gVisor's kernel takes host tasks of its own for each of the job's processes: the cgroup's
            # limit leaves it room, and RLIMIT_NPROC holds the job's processes to theirs inside.
            config["pids_limit"] = spec.pids_limit * RUNSC_TASKS_PER_PROCESS + RUNSC_OWN_TASKS
            config["ulimits"] = [Ulimit(name="nproc", soft=spec.pids_limit, hard=spec.pids_limit)]
        if spec.gpu_ids:
            config["device_requests"] = [DeviceRequest(device_ids=list(spec.gpu_ids), capabilities=[["gpu"]])]
        return config

    def run(self, spec: RunSpec) -> str:
        prepare_cpuset_parent(Path(settings.E31_CGROUP_ROOT), self.cgroup_parent(spec.run_key))
        try:  # the engine's own words make the reason the team reads, not its URL and container id
            container = self.client.containers.create(**self.container_config(spec))
        except APIError as exc:
            # No container to remove later: its parent cgroup, made above, goes now.
            remove_cgroups(Path(settings.E31_CGROUP_ROOT), self.cgroup_parent(spec.run_key))
            raise RuntimeError(f"the container could not be created: {exc.explanation or exc}") from exc
        try:
            container.start()
        except Exception as exc:
            # e.g. the command is not in the image: the caller never gets a handle, so clean up here.
            self.remove(container.id)
            if isinstance(exc, APIError):
                raise RuntimeError(f"the container did not start: {exc.explanation or exc}") from exc
            raise
        return container.id

    def wait(self, handle: str, timeout: float) -> Exit | None:
        try:
            self.client.api.wait(handle, timeout=timeout)
        except (ReadTimeout, RequestsConnectionError):
            # A wait that timed out looks the same as an engine that is gone: a ping tells them apart.
            if not self.answers(ENGINE_PING_S):
                raise EngineGone("the container engine does not answer") from None
            return None
        state = self.client.api.inspect_container(handle)["State"]
        oom_killed = bool(state.get("OOMKilled"))
        if state.get("ExitCode") == KILLED and not oom_killed and handle not in self.stopped:
            oom_killed = self._late_oom(handle, state)
        return Exit(exit_code=state.get("ExitCode"), oom_killed=oom_killed)

    def _late_oom(self, handle: str, state: dict) -> bool:
        """dockerd sets OOMKilled only when the OOM event beats the exit's; a later one is kept as an "oom" event."""
        settled_by = time.monotonic() + OOM_FLAG_WAIT_S
        since = _epoch(state.get("StartedAt") or "")
        while True:
            if state.get("OOMKilled") or self._oom_event_since(handle, since):
                return True
            if time.monotonic() >= settled_by:
                return False
            time.sleep(0.1)
            state = self.client.api.inspect_container(handle)["State"]

    def _oom_event_since(self, handle: str, since: int) -> bool:
        filters = {"container": handle, "event": "oom"}
        try:
            # `until` now: the engine answers from the events it keeps, without waiting for more.
            found = self.client.api.events(since=since, until=f"{time.time():.9f}", filters=filters, decode=True)
            return any(True for _ in found)
        except (APIError, RequestsConnectionError, ReadTimeout) as exc:
            log.warning("the events of container %s could not be read: %s", handle, exc)
            return False

    def stop(self, handle: str) -> None:
        self._signal(handle, "SIGKILL")

    def terminate(self, handle: str) -> None:
        self._signal(handle, "SIGTERM")

    def _signal(self, handle: str, name: str) -> None:
        self.stopped.add(handle)  # its end is ours: no OOM flag to wait for
        try:
            self.client.api.kill(handle, signal=name)
        except APIError as exc:  # gone, or already stopped
            log.debug("%s to %s: %s", name, handle, exc)
        except UNREACHABLE as exc:  # the engine is gone: the caller kills the run through its cgroup
            log.warning("%s to %s: the container engine does not answer: %s", name, handle, exc)

    def logs(self, handle: str) -> Iterator[LogFrame]:
        # docker-py's `logs` drops the frames' stream ids, so they are read here as its own helper reads them.
        api = self.client.api
        params = {"stdout": 1, "stderr": 1, "follow": 1, "timestamps": 0, "tail": "all"}
        response = api._get(api._url("/containers/{0}/logs", handle), params=params, stream=True)
        api._raise_for_status(response)
        api._disable_socket_timeout(api._get_raw_response_socket(response))
        try:
            while True:
                header = response.raw.read(LOG_FRAME_HEADER.size)
                if len(header) < LOG_FRAME_HEADER.size:
                    break
                stream_id, length = LOG_FRAME_HEADER.unpack(header)
                if not length:
                    continue
                data = response.raw.read(length)
                if not data:
                    break
                yield (STDERR if stream_id == STDERR else STDOUT), data
        finally:
            response.close()

    def usage(self, handle: str) -> Metered:
        run_key = self.client.api.inspect_container(handle)["Config"]["Labels"][RUN_LABEL]
        return read_cgroup_usage(Path(settings.E31_CGROUP_ROOT), self.cgroup_parent(run_key))

    def reading(self, run_key: str) -> Reading | None:
        # The run's parent cgroup holds its container under runc and runsc alike: no call to the engine.
        return read_cgroup_now(Path(settings.E31_CGROUP_ROOT), self.cgroup_parent(run_key))

    def remove(self, handle: str) -> None:
        self.stopped.discard(handle)
        run_key = None
        try:
            with suppress(NotFound):
                run_key = self.client.api.inspect_container(handle)["Config"]["Labels"].get(RUN_LABEL)
                self.client.api.remove_container(handle, force=True, v=True)
        except UNREACHABLE as exc:  # the engine is gone: the node removes its orphans when it answers again
            log.warning("remove %s: the container engine does not answer: %s", handle, exc)
        if run_key:
            remove_cgroups(Path(settings.E31_CGROUP_ROOT), self.cgroup_parent(run_key))

    def find(self, *, node: str, run_key: str) -> str | None:
        labels = [f"{NAMESPACE_LABEL}={self.namespace}", f"{NODE_LABEL}={node}", f"{RUN_LABEL}={run_key}"]
        for container in self.client.api.containers(all=True, filters={"label": labels}):
            try:
                state = self.client.api.inspect_container(container["Id"])["State"]
            except NotFound:  # removed since it was listed
                continue
            if state.get("Status") == "created":
                # Its watcher died between create and start: waiting on it would report exit code 0.
                self.remove(container["Id"])
                continue
            return container["Id"]
        return None

    def forget(self, run_key: str) -> Metered:
        root, parent = Path(settings.E31_CGROUP_ROOT), self.cgroup_parent(run_key)
        metered = read_cgroup_usage(root, parent)
        remove_cgroups(root, parent)
        return metered

    def answers(self, timeout: float) -> bool:
        # A busy engine answers late, not never: a ping that times out is sent again (ENGINE_PINGS in all)
        # before a healthy run is killed for it; a socket that refuses says the engine is gone at once.
        api = self.client.api
        for _ in range(ENGINE_PINGS):
            try:
                return api._result(api._get(api._url("/_ping"), timeout=timeout)) == "OK"
            except ReadTimeout:
                continue
            except (*UNREACHABLE, APIError, OSError):
                return False
        return False

    def kill_run(self, run_key: str) -> int:
        return kill_cgroup(Path(settings.E31_CGROUP_ROOT), self.cgroup_parent(run_key))

    def runtimes(self) -> set[str]:
        # As dockerd lists them: runc, and those registered in daemon.json (scripts/services.sh: runsc).
        try:
            return set(self.client.info().get("Runtimes") or {})
        except UNREACHABLE as exc:
            raise EngineGone(f"the container engine does not answer: {exc}") from exc

    def orphans(self, *, node: str, keep: set[str]) -> list[str]:
        labels = [f"{NAMESPACE_LABEL}={self.namespace}", f"{NODE_LABEL}={node}"]
        removed = []
        for container in self.client.containers.list(all=True, filters={"label": labels}):
            run_key = container.labels.get(RUN_LABEL, "")
            if run_key not in keep:
                self.remove(container.id)
                removed.append(run_key)
        return removed


def _epoch(started_at: str) -> int:
    """The whole second (unix time) an engine's RFC 3339 timestamp falls in; 0 when it names none."""
    try:
        return int(datetime.fromisoformat(started_at[:19]).replace(tzinfo=UTC).timestamp())
    except ValueError:
        return 0


def read_cgroup_usage(root: Path, parent: str) -> Metered:
    """CPU seconds and peak memory of a job's parent cgroup (v1 or v2); zeros when unreadable."""
    rel = parent.strip("/")
    v1_cpu = root / "cpuacct" / rel / "cpuacct.usage"
    if v1_cpu.exists():
        return Metered(int(v1_cpu.read_text()) / 1e9, _read_mb(root / "memory" / rel / "memory.max_usage_in_bytes"))
    if (root / rel / "cpu.stat").exists():
        return Metered(_stat(root / rel, "usage_usec", name="cpu.stat") / 1e6, _read_mb(root / rel / "memory.peak"))
    return Metered()


def read_cgroup_now(root: Path, parent: str) -> Reading | None:
    """CPU seconds so far and memory in use now (less reclaimable page cache); None when unreadable."""
    rel = parent.strip("/")
    clock = time.monotonic()
    try:
        v1_cpu = root / "cpuacct" / rel / "cpuacct.usage"
        if v1_cpu.exists():
            cpu_seconds = int(v1_cpu.read_text()) / 1e9
            memory = root / "memory" / rel
            in_use = int((memory / "memory.usage_in_bytes").read_text()) - _stat(memory, "total_inactive_file")
        else:
            cpu_seconds = _stat(root / rel, "usage_usec", name="cpu.stat") / 1e6
            in_use = int((root / rel / "memory.current").read_text()) - _stat(root / rel, "inactive_file")
    except (OSError, ValueError):
        return None
    return Reading(clock=clock, cpu_seconds=cpu_seconds, memory_mb=max(in_use, 0) // (1024 * 1024))


def _stat(folder: Path, key: str, *, name: str = "memory.stat") -> int:
    for line in (folder / name).read_text().splitlines():
        field, _, value = line.partition(" ")
        if field == key:
            return int(value)
    return 0


def prepare_cpuset_parent(root: Path, parent: str) -> None:
    """Fill in the v1 cpuset of the run's parent cgroups from their parents: runsc, unlike runc, does not."""
    cpuset = root / "cpuset"
    if not (cpuset / "cpuset.cpus").exists():
        return  # cgroup v2, or no cpuset controller: nothing to fill in
    path = cpuset
    try:
        for part in parent.strip("/").split("/"):
            above, path = path, path / part
            path.mkdir(exist_ok=True)
            for name in ("cpuset.cpus", "cpuset.mems"):
                if not (path / name).read_text().strip():
                    (path / name).write_text((above / name).read_text())
    except OSError as exc:  # a worker without root: the engine makes the cgroups (runc does fill them in)
        log.debug("could not prepare the cpuset cgroup %s: %s", path, exc)


def _read_mb(path: Path) -> int | None:
    try:
        return int(path.read_text().strip()) // (1024 * 1024)
    except (OSError, ValueError):
        return None


def kill_cgroup(root: Path, parent: str) -> int:
    """SIGKILL every process of the run's cgroups; how many were signalled (v2's cgroup.kill counts as 1)."""
    rel = parent.strip("/")
    if (root / rel / "cgroup.kill").exists():
        with suppress(OSError):
            (root / rel / "cgroup.kill").write_text("1")
            return 1
        return 0
    pids: set[int] = set()
    for controller in ("pids", "memory"):
        for procs in (root / controller / rel).glob("**/cgroup.procs"):
            with suppress(OSError, ValueError):
                pids.update(int(line) for line in procs.read_text().split())
    killed = 0
    for pid in pids:
        with suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed


def remove_cgroups(root: Path, parent: str) -> None:
    """Remove the job's empty parent cgroups (every v1 controller, or the v2 folder)."""
    rel = parent.strip("/")
    candidates = [root / rel] + [c / rel for c in root.iterdir() if c.is_dir()] if root.is_dir() else []
    for path in candidates:
        with suppress(OSError):  # not empty, or gone
            path.rmdir()
