"""What the stronger sandbox costs: the same jobs in a container under runc and under runsc (gVisor,
ptrace platform), with the isolation flags the sandbox sets (worker/sandbox/docker.py), the median
of several runs each.

- trivial: `true` in busybox (create, start, wait, remove: the start-up cost);
- cpu: a pure-Python loop of fixed work (6,000,000 turns, `--loop`; few system calls: what gVisor leaves at
  native speed);
- syscalls: 200,000 one-byte reads and writes (`dd bs=1`, `--syscalls`), where gVisor's ptrace platform pays
  most.

Prints each job's median under runc (the anchor) and under runsc, and the ratio runsc/runc, last. Needs
dockerd with runsc registered (scripts/services.sh start). No database.
"""

import argparse
import statistics
import time

import docker


def jobs(loop: int, syscalls: int) -> dict[str, tuple[str, list[str]]]:
    cpu_loop = f"n = 0\nfor i in range({loop}):\n    n += i * i % 7\nprint(n)"
    return {
        "trivial": ("e31/busybox:1", ["true"]),
        "cpu": ("e31/python:3", ["python3", "-c", cpu_loop]),
        "syscalls": ("e31/busybox:1", ["dd", "if=/dev/zero", "of=/dev/null", "bs=1", f"count={syscalls}"]),
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
    parser.add_argument("--loop", type=int, default=6_000_000, help="turns of the cpu job's loop")
    parser.add_argument("--syscalls", type=int, default=200_000, help="one-byte copies of the syscalls job")
    args = parser.parse_args()
    client = docker.from_env(timeout=300)
    runtimes = client.info().get("Runtimes", {})
    if "runsc" not in runtimes:
        raise SystemExit("dockerd has no runsc runtime: scripts/services.sh start registers it")
    medians: dict[tuple[str, str], float] = {}
    chosen = jobs(args.loop, args.syscalls)
    for job, (image, command) in chosen.items():
        for runtime in ("runc", "runsc"):
            run_once(client, runtime, image, command)  # warm the page cache and the engine
            times = [run_once(client, runtime, image, command) for _ in range(args.runs)]
            medians[job, runtime] = statistics.median(times)
            print(f"{job} under {runtime}: median {medians[job, runtime]:.3f} s (min {min(times):.3f}, "
                  f"max {max(times):.3f}, {args.runs} runs)")  # fmt: skip
    for job in chosen:
        print(f"{job}_runc_s: {medians[job, 'runc']:.3f} s")
        print(f"{job}_runsc_s: {medians[job, 'runsc']:.3f} s")
        print(f"{job}_ratio: {medians[job, 'runsc'] / medians[job, 'runc']:.2f} (runsc / runc)")


if __name__ == "__main__":
    main()
