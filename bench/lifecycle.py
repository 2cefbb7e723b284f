"""Lifecycle overhead: one trivial job (`true` in busybox) from submit to release, median over 20,
beside a raw `docker run --rm` of the same image with the same isolation flags.

Prints the headline figures last: `lifecycle_recorded_s` beside its anchor `raw_sdk_run_s`, and
`lifecycle_s`, `lifecycle_overhead_s` and `lifecycle_vs_raw_ratio` beside theirs, `raw_docker_run_s`.
Needs dockerd, Redis and PostgreSQL (make test or make run start them).
"""

import argparse
import statistics
import subprocess
import time

from _setup import Timer, machine, real_stack, submit_trivial


def raw_docker_run(image: str) -> float:
    flags = [
        "--rm", "--network", "none", "--read-only", "--tmpfs", "/tmp:rw,nosuid,nodev,size=64m",
        "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--ipc", "private",
        "--user", "10001:10001", "--cpuset-cpus", "0", "--memory", "64m", "--memory-swap", "64m",
        "--pids-limit", "256", "--log-opt", "max-size=20m",
    ]  # fmt: skip
    with Timer() as timer:
        subprocess.run(["docker", "run", *flags, image, "true"], check=True, capture_output=True)
    return timer.seconds


def raw_sdk_run(client, image: str) -> float:
    """The same container through the docker SDK: create, start, wait, remove (no CLI start-up)."""
    with Timer() as timer:
        container = client.containers.create(
            image, ["true"], network_mode="none", read_only=True, cap_drop=["ALL"], user="10001:10001",
            security_opt=["no-new-privileges"], ipc_mode="private", cpuset_cpus="0", mem_limit="64m",
            memswap_limit="64m", pids_limit=256, tmpfs={"/tmp": "rw,nosuid,nodev,size=64m"},
        )  # fmt: skip
        container.start()
        container.wait()
        container.remove(force=True)
    return timer.seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    team, user, image = real_stack("e31_bench_lifecycle")

    import docker

    from jobs.models import Job, Stage

    client = docker.from_env()
    raw, sdk, recorded, wall = [], [], [], []
    for i in range(args.runs + 1):  # the first round warms caches and is not counted
        raw_s = raw_docker_run(image.reference)
        sdk_s = raw_sdk_run(client, image.reference)
        with Timer() as timer:
            job = submit_trivial(team, user, image, f"trivial {i}")
            deadline = time.monotonic() + 60
            while not Job.objects.filter(pk=job.pk, stage=Stage.RELEASE).exists():
                if time.monotonic() > deadline:
                    raise SystemExit(f"job {job.pk} was not released in 60 s")
                time.sleep(0.005)
        job.refresh_from_db()
        assert job.outcome == "succeeded", job.reason
        if i:
            raw.append(raw_s)
            sdk.append(sdk_s)
            wall.append(timer.seconds)
            recorded.append((job.released_at - job.submitted_at).total_seconds())
    print(machine())
    print(f"{args.runs} runs; lifecycle = wall clock from calling submit to seeing the job released")
    print(f"lifecycle p90: {statistics.quantiles(wall, n=10)[-1]:.3f} s")
    print(f"raw_sdk_run_s: {statistics.median(sdk):.3f} s (the same container through the SDK, no CLI)")
    print(f"lifecycle_recorded_s: {statistics.median(recorded):.3f} s (submitted_at → released_at)")
    print(f"lifecycle_recorded_vs_sdk_ratio: {statistics.median(recorded) / statistics.median(sdk):.2f}")
    print(f"raw_docker_run_s: {statistics.median(raw):.3f} s")
    print(f"lifecycle_s: {statistics.median(wall):.3f} s")
    print(f"lifecycle_overhead_s: {statistics.median(wall) - statistics.median(raw):.3f} s")
    print(f"lifecycle_vs_raw_ratio: {statistics.median(wall) / statistics.median(raw):.2f}")


if __name__ == "__main__":
    main()
