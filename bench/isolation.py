"""What the stronger sandbox costs: the same jobs in a container under runc and under runsc (gVisor,
ptrace platform), with the isolation flags the sandbox sets (worker/sandbox/docker.py), the median
of several runs each.

- trivial: `true` in busybox (create, start, wait, remove: the start-up cost);
- cpu: a pure-Python loop of fixed work (few system calls: what gVisor leaves at native speed);
- syscalls: 200,000 one-byte reads and writes (`dd bs=1`), where gVisor's ptrace platform pays most.

Prints each median and the ratio runsc/runc, the headline `*_ratio` figures last. Needs dockerd with
runsc registered (scripts/services.sh start). No database.
"""

import argparse
import statistics
import time

import docker

CPU_LOOP = "n = 0\nfor i in range(6_000_000):\n    n += i * i % 7\nprint(n)"
JOBS = {
    "trivial": ("e31/busybox:1", ["true"]),
    "cpu": ("e31/python:3", ["python3", "-c", CPU_LOOP]),
    "syscalls": ("e31/busybox:1", ["dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=200000"]),
}


def run_once(client: docker.DockerClient, runtime: str, image: str, command: list[str]) -> float:
    pids = 256
    extra = {"pids_limit": pids}
    if runtime == "runsc":  # as the sandbox sets it: room for gVisor's own threads, the job held by RLIMIT_NPROC
        extra = {"pids_limit": pids * 16 + 256, "ulimits": [docker.types.Ulimit(name="nproc", soft=pids, hard=pids)]}
    started = time.perf_counter()
    container = client.containers.create(
        image, command, runtime=runtime, network_mode="none", read_only=True, cap_drop=["ALL"],
        user="10001:10001", security_opt=["no-new-privileges"], ipc_mode="private", cgroupns="private",
        cpuset_cpus="0", mem_limit="256m", memswap_limit="256m", tmpfs={"/tmp": "rw,nosuid,nodev,size=64m"},
        **extra,
    )  # fmt: skip
    try:
        container.start()
        result = container.wait()
        assert result["StatusCode"] == 0, (runtime, command, container.logs()[-500:])
        return time.perf_counter() - started
    finally:
        container.remove(force=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    client = docker.from_env(timeout=300)
    runtimes = client.info().get("Runtimes", {})
    if "runsc" not in runtimes:
        raise SystemExit("dockerd has no runsc runtime: scripts/services.sh start registers it")
    medians: dict[tuple[str, str], float] = {}
    for job, (image, command) in JOBS.items():
        for runtime in ("runc", "runsc"):
            run_once(client, runtime, image, command)  # warm the page cache and the engine
            times = [run_once(client, runtime, image, command) for _ in range(args.runs)]
            medians[job, runtime] = statistics.median(times)
            print(f"{job}_{runtime}_s: {medians[job, runtime]:.3f} s (min {min(times):.3f}, max {max(times):.3f})")
    for job in JOBS:
        print(f"{job}_ratio: {medians[job, 'runsc'] / medians[job, 'runc']:.2f} (runsc / runc)")


if __name__ == "__main__":
    main()
