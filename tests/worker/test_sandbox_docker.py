"""The isolation promise, checked from inside real containers on the Docker engine.

Each job is held by the scheduler and run in this process through worker.runner.run (what the node's
Celery task calls); the job itself reports what it can see and do, and the host checks what was left.
"""

import hashlib
import os
import re
import socket
import subprocess
import threading
from pathlib import Path
from urllib.parse import quote

import docker
import pytest
from django.conf import settings
from django.core.files.storage import default_storage
from django.db import connection
from django.utils import timezone

from accounting.models import Record
from core.cpusets import parse_cpu_list
from jobs.lifecycle import actions
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, Outcome, Stage
from jobs.storage.logs import read_log
from jobs.storage.store import data_key
from tests.conftest import api_client_for, run_here, wait_until
from tests.factories import RuntimeImageFactory, submit_job
from worker import node, outputs, runner, scratch
from worker.sandbox import RunSpec
from worker.sandbox.docker import JOB_LABEL, NAMESPACE_LABEL, DockerSandbox, remove_cgroups

pytestmark = pytest.mark.docker

REDIS = ("127.0.0.1", 6379)


@pytest.fixture(scope="module")
def engine():
    return docker.from_env(timeout=30)


@pytest.fixture
def ready(member, team, local_node, images):
    """A member of a team, this machine as the node, and the runtime images registered."""
    return member, team


def containers_of(engine, job, **filters) -> list:
    return engine.containers.list(all=True, filters={"label": f"{JOB_LABEL}={job.pk}", **filters})


def log_of(job) -> str:
    return read_log(job.pk)[0].decode(errors="replace")


def report(job) -> dict[str, str]:
    """The `key=value` lines a job printed."""
    lines = (line.partition("=") for line in log_of(job).splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, _, value in lines}


def mounts_under(folder: Path) -> list[str]:
    """The mount points of this machine at or below `folder`."""
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [point for point in points if point == str(folder) or point.startswith(f"{folder}/")]


def assert_no_host_paths(job) -> None:
    """The job's reason speaks in the job's terms: no folder of the node, no key of the store."""
    for host_term in (str(settings.E31_SCRATCH_DIR), str(settings.VAR_DIR), f"jobs/{job.pk}", "Errno"):
        assert host_term not in job.reason, (host_term, job.reason)


def assert_released_and_cleaned(engine, job, outcome: str) -> Record:
    """Released with `outcome`, one record for its one hold, and nothing of the run left on the node."""
    assert job.stage == Stage.RELEASE
    assert job.outcome == outcome, (job.outcome, job.reason, log_of(job)[-2000:])
    records = list(Record.objects.filter(job=job))
    assert len(records) == 1 and records[0].outcome == outcome
    assert containers_of(engine, job) == [], "the job's container was left behind"
    assert not (Path(settings.E31_SCRATCH_DIR) / str(job.pk)).exists(), "the scratch folder was left behind"
    assert mounts_under(Path(settings.E31_SCRATCH_DIR) / str(job.pk)) == [], "its /output filesystem was left mounted"
    parent = DockerSandbox(engine).cgroup_parent(f"{job.pk}-{job.attempt}").strip("/")
    left = [p for p in Path(settings.E31_CGROUP_ROOT).glob(f"*/{parent}") if p.exists()]
    assert left == [], f"the job's cgroups were left behind: {left}"
    return records[0]


# --- no network ------------------------------------------------------------------------------------


PROBE_REDIS = """
import os, socket
print("interfaces=" + ",".join(sorted(os.listdir("/sys/class/net"))))
devs = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
print("netdev=" + ",".join(sorted(devs)))
s = socket.socket()
s.settimeout(3)
try:
    s.connect(("127.0.0.1", 6379))
    s.sendall(b"PING\\r\\n")
    print("redis=reached " + s.recv(64).decode(errors="replace").strip())
except OSError as exc:
    print(f"redis=refused {type(exc).__name__}")
"""


def test_job_has_no_network(ready, engine):
    # Redis really listens on the host's loopback: the job must not reach it.
    with socket.create_connection(REDIS, timeout=3) as redis:
        redis.sendall(b"PING\r\n")
        assert redis.recv(64).startswith(b"+PONG")

    job = run_here(submit_job(*ready, image="python", command=["python3", "/data/probe.py"],
                              files={"probe.py": PROBE_REDIS}))  # fmt: skip

    assert_released_and_cleaned(engine, job, Outcome.SUCCEEDED)
    seen = report(job)
    assert seen["redis"].startswith("refused"), seen
    assert seen["interfaces"] == "lo" and seen["netdev"] == "lo", seen


def test_job_cannot_reach_the_host_with_busybox_nc(ready, engine):
    job = run_here(submit_job(*ready, command="echo PING | nc -w 2 127.0.0.1 6379 && echo nc=open || echo nc=closed"))

    assert_released_and_cleaned(engine, job, Outcome.SUCCEEDED)
    assert report(job)["nc"] == "closed", log_of(job)
    assert "PONG" not in log_of(job)


# --- data --------------------------------------------------------------------------------------------


SHOW_DATA = (
    'echo "files=$(ls -A /data | tr "\\n" " ")"; echo "content=$(cat /data/*)"; '
    "touch /data/new 2>/dev/null && echo data_write=ok || echo data_write=refused; "
    'echo "data_mount=$(awk \'$2 == "/data" {print $4}\' /proc/mounts)"; '
    "test -e /var/run/docker.sock && echo socket=present || echo socket=absent"
)


def test_data_holds_only_this_jobs_files_read_only(ready, engine):
    first = submit_job(*ready, command=SHOW_DATA, files={"a.csv": "alpha"})
    second = submit_job(*ready, command=SHOW_DATA, files={"b.csv": "beta", "c.csv": "gamma"})

    first, second = run_here(first), run_here(second)

    for job in (first, second):
        assert_released_and_cleaned(engine, job, Outcome.SUCCEEDED)
    one, two = report(first), report(second)
    assert one["files"] == "a.csv" and one["content"] == "alpha", one
    assert two["files"] == "b.csv c.csv" and two["content"] == "betagamma", two
    for seen in (one, two):
        assert seen["data_write"] == "refused"
        assert seen["data_mount"].split(",")[0] == "ro", seen
        assert seen["socket"] == "absent"


# --- the container itself ----------------------------------------------------------------------------


def test_root_filesystem_is_read_only_and_tmp_is_a_small_tmpfs(ready, engine, settings):
    settings.E31_TMPFS_MB = 1
    job = run_here(submit_job(*ready, command=(
        "echo \"root_mount=$(awk '$2 == \"/\" {print $4}' /proc/mounts)\"; "
        "echo \"tmp_mount=$(awk '$2 == \"/tmp\" {print $3\",\"$4}' /proc/mounts)\"; "
        "echo hi > /tmp/small && echo tmp_write=ok; "
        "head -c 2097152 /dev/zero > /tmp/big 2>/dev/null && echo tmp_big=ok || echo tmp_big=refused; "
        "touch /made-by-job 2>/dev/null && echo root_write=ok || echo root_write=refused"
    )))  # fmt: skip

    assert_released_and_cleaned(engine, job, Outcome.SUCCEEDED)
    seen = report(job)
    assert seen["root_mount"].split(",")[0] == "ro", seen
    fstype, _, options = seen["tmp_mount"].partition(",")
    assert fstype == "tmpfs" and "size=1024k" in options.split(","), seen
    assert seen["tmp_write"] == "ok" and seen["tmp_big"] == "refused" and seen["root_write"] == "refused", seen


def test_job_runs_unprivileged_without_capabilities(ready, engine):
    job = run_here(submit_job(*ready, command=(
        'echo "uid=$(id -u)"; echo "gid=$(id -g)"; '
        "grep -E '^(CapEff|CapPrm|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status | tr -d ' \\t' | tr : ="
    )))  # fmt: skip

    assert_released_and_cleaned(engine, job, Outcome.SUCCEEDED)
    seen = report(job)
    assert seen["uid"] == str(runner.job_uid(job.last_hold.cpu_set)) and seen["uid"] != "0", seen
    assert seen["gid"] != "0"
    for capabilities in ("CapEff", "CapPrm", "CapBnd", "CapAmb"):
        assert int(seen[capabilities], 16) == 0, (capabilities, seen)
    assert seen["NoNewPrivs"] == "1"


@pytest.mark.django_db(transaction=True)
def test_two_jobs_held_at_once_run_pinned_to_their_own_disjoint_cores(ready, engine, local_node):
    if len(local_node.cpu_ids) < 2:
        pytest.skip("needs a node with two cores")
    show = "grep Cpus_allowed_list /proc/self/status | tr -d ' \\t' | tr : =; sleep 30"
    jobs = [submit_job(*ready, command=show, cpus=1) for _ in range(2)]
    schedule_pass(now=timezone.now())
    holds = [job.active_hold for job in jobs]
    assert all(holds), "both jobs should be held at once"
    seen_together, errors = [], []

    def run(job):
        try:
            runner.run(job.pk, node_name=local_node.name)
        finally:
            connection.close()

    def cancel_both_once_both_run():
        # Neither job ends by itself before this has seen both running: run one after the other,
        # the first would hold its 30 s and this would give up.
        try:
            wait_until(
                lambda: all(containers_of(engine, j, status="running") and "Cpus" in log_of(j) for j in jobs),
                20,
                message="both jobs running at once",
            )
            seen_together.append(True)
        except Exception as exc:  # reported by the test below
            errors.append(exc)
        finally:
            for job in jobs:
                actions.cancel(Job.objects.get(pk=job.pk), now=timezone.now())
            connection.close()

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    threads.append(threading.Thread(target=cancel_both_once_both_run))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert seen_together and not errors, errors
    for job in jobs:
        job.refresh_from_db()
        assert_released_and_cleaned(engine, job, Outcome.CANCELLED)
    pinned = [parse_cpu_list(report(job)["Cpus_allowed_list"]) for job in jobs]
    assert pinned == [sorted(hold.cpu_set) for hold in holds]
    assert not set(pinned[0]) & set(pinned[1])


# --- limits -----------------------------------------------------------------------------------------


def test_memory_limit_ends_the_job_out_of_memory(ready, engine):
    job = run_here(submit_job(*ready, image="python", memory_mb=64,
                              command=["python3", "-c", "x = b'x' * (256 << 20); print('allocated')"]))  # fmt: skip

    record = assert_released_and_cleaned(engine, job, Outcome.OUT_OF_MEMORY)
    assert "memory limit of 64 MB" in job.reason
    assert "allocated" not in log_of(job)
    assert record.memory_mb == 64


def test_a_child_killed_by_the_memory_limit_is_named_and_the_main_exit_code_kept(ready, engine):
    job = run_here(submit_job(*ready, image="python", memory_mb=64, command=[
        "sh", "-c", "python3 -c \"x = b'x' * (256 << 20)\"; echo child_exit=$?; echo main=alive"
    ]))  # fmt: skip

    assert_released_and_cleaned(engine, job, Outcome.OUT_OF_MEMORY)
    assert report(job) == {"child_exit": "137", "main": "alive"}
    assert job.exit_code == 0
    assert job.reason == "a process of the job was killed by the memory limit of 64 MB; the main process exited 0"


def test_outputs_count_against_the_jobs_memory_and_the_reason_says_so(ready, engine):
    job = run_here(submit_job(*ready, memory_mb=64, command="head -c 200000000 /dev/zero > /output/big.bin"))

    assert_released_and_cleaned(engine, job, Outcome.OUT_OF_MEMORY)
    held = re.fullmatch(r"killed by the memory limit of 64 MB; its files under /output held (\d+) MB of that memory",
                        job.reason)  # fmt: skip
    assert held and 32 <= int(held[1]) <= 64, job.reason


def test_time_limit_kills_the_job(ready, engine):
    job = run_here(submit_job(*ready, command="echo started; sleep 8; echo still running; sleep 30", time_limit_s=2))

    # Not killed, `sleep 30` would end succeeded; killed late, the log would say it was still running.
    assert_released_and_cleaned(engine, job, Outcome.TIMED_OUT)
    assert "time limit of 2s" in job.reason
    assert "started" in log_of(job) and "still running" not in log_of(job)


def test_fork_bomb_is_contained_by_the_pids_limit(ready, engine, settings):
    settings.E31_PIDS_LIMIT = 32
    # `exec` needs no fork, so the job stays alive (and bombing) until its time limit.
    job = run_here(submit_job(*ready, time_limit_s=3, command=(
        "echo pids_max=$(cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max 2>/dev/null); "
        "bomb() { bomb | bomb & }; bomb; exec sleep 30"
    )))  # fmt: skip

    assert_released_and_cleaned(engine, job, Outcome.TIMED_OUT)
    assert "time limit of 3s" in job.reason
    assert report(job)["pids_max"] == "32"
    assert "can't fork" in log_of(job), "the bomb should have hit the pids limit"
    # The host is unharmed: it can still start processes.
    assert subprocess.run(["true"], timeout=10).returncode == 0


def test_nonzero_exit_fails_with_its_code_and_logs_both_streams(ready, engine):
    job = run_here(submit_job(*ready, command="echo to-stdout; echo to-stderr >&2; exit 3"))

    assert_released_and_cleaned(engine, job, Outcome.FAILED)
    assert job.exit_code == 3 and "exited with code 3" in job.reason
    log = log_of(job)
    assert "to-stdout" in log and "to-stderr" in log


def test_missing_command_fails_and_leaves_no_container(ready, engine):
    job = run_here(submit_job(*ready, command=["/no/such/program"]))

    assert_released_and_cleaned(engine, job, Outcome.FAILED)
    assert job.reason.startswith("the node could not run the job: the container did not start:")
    assert "/no/such/program" in job.reason and "http+docker" not in job.reason


def test_unregistered_engine_image_fails_without_a_pull(ready, engine):
    image = RuntimeImageFactory(name="vanished", reference="e31/vanished:0")
    job = run_here(submit_job(*ready, image=image))

    assert_released_and_cleaned(engine, job, Outcome.FAILED)
    assert "could not be created" in job.reason and "e31/vanished:0" in job.reason
    assert not engine.images.list(name="e31/vanished")


# --- outputs ----------------------------------------------------------------------------------------


def test_outputs_are_collected_without_following_links(ready, engine):
    job = run_here(submit_job(*ready, command=(
        "cd /output && printf 'result %s' 42 > result.txt && "
        "ln -s /etc/passwd passwd && ln -s /etc etc && echo twin > original.txt && ln original.txt twin.txt && "
        "mkfifo pipe && mkdir -p sub && echo nested > sub/nested.txt"
    )))  # fmt: skip

    assert_released_and_cleaned(engine, job, Outcome.SUCCEEDED)
    collected = {o.path: o.sha256 for o in job.output_files.all()}
    assert collected == {
        "result.txt": hashlib.sha256(b"result 42").hexdigest(),
        "sub/nested.txt": hashlib.sha256(b"nested\n").hexdigest(),
    }
    for refused in ("passwd (symlink)", "etc (symlink)", "original.txt (hardlink)", "twin.txt (hardlink)",
                    "pipe (fifo)"):  # fmt: skip
        assert refused in job.reason, (refused, job.reason)
    assert "root:" not in log_of(job)


def test_output_names_that_are_not_utf8_are_refused_and_the_hold_released(ready, engine, local_node):
    bad = "x$(printf '\\377')"
    job = run_here(submit_job(*ready, command=(
        f'cd /output && echo ok > good.txt && echo bad > "{bad}.txt" && ln -s /etc/passwd "{bad}.lnk"'
    )))  # fmt: skip

    assert_released_and_cleaned(engine, job, Outcome.SUCCEEDED)
    assert [o.path for o in job.output_files.all()] == ["good.txt"]
    assert "x\\xff.txt (name is not UTF-8)" in job.reason and "x\\xff.lnk (symlink)" in job.reason
    assert not local_node.holds.filter(released_at__isnull=True).exists()


def test_output_over_the_file_cap_fails_the_job(ready, engine, settings):
    settings.E31_OUTPUT_FILE_MAX_BYTES = 1000
    job = run_here(submit_job(*ready, command="head -c 2000 /dev/zero > /output/big.bin"))

    assert_released_and_cleaned(engine, job, Outcome.FAILED)
    assert "big.bin" in job.reason and "per-file cap of 1000" in job.reason
    assert not job.output_files.exists()


def test_a_job_creating_400000_files_is_stopped_by_the_kernel_at_the_file_cap(ready, engine, settings, tmp_path):
    settings.E31_OUTPUT_MAX_FILES = 20
    host = os.statvfs(tmp_path)  # the host filesystem the scratch folder is on
    lowest = [host.f_ffree]
    running = threading.Event()

    def watch_host_inodes():
        while not running.wait(0.05):
            lowest[0] = min(lowest[0], os.statvfs(tmp_path).f_ffree)

    watcher = threading.Thread(target=watch_host_inodes)
    watcher.start()
    try:
        job = run_here(submit_job(*ready, time_limit_s=60, command=(
            "i=0; while [ $i -lt 400000 ] && true > /output/f$i; do i=$((i+1)); done; echo created=$i"
        )))  # fmt: skip
    finally:
        running.set()
        watcher.join(10)

    assert_released_and_cleaned(engine, job, Outcome.FAILED)
    assert report(job)["created"] == str(20 + scratch.OUTPUT_FOLDERS + 1), "one past the caps, then ENOSPC"
    assert "No space left on device" in log_of(job)
    # Other suites share this disk: anything near 400,000 would be the job's files, not theirs.
    assert host.f_ffree - lowest[0] < 5000, f"the host lost {host.f_ffree - lowest[0]} inodes"
    assert job.exit_code == 0 and job.reason == (
        "/output filled up while the job ran (at most 20 output files, and 64 folders besides): "
        "creating more failed with 'No space left on device'; more than 20 output files"
    )
    assert job.output_files.count() == 20


def test_a_job_writing_past_the_byte_cap_gets_enospc_and_fails_saying_so(ready, engine, settings):
    settings.E31_OUTPUT_TOTAL_MAX_BYTES = 1 << 20
    settings.E31_OUTPUT_MAX_FILES = 20
    job = run_here(submit_job(*ready, command=(
        "head -c 8388608 /dev/zero > /output/big.bin; echo head_exit=$?; "
        "echo more > /output/after.txt; echo after_exit=$?; echo size=$(wc -c < /output/big.bin)"
    )))  # fmt: skip

    assert_released_and_cleaned(engine, job, Outcome.FAILED)
    seen = report(job)
    assert seen["head_exit"] != "0" and seen["after_exit"] != "0", seen
    assert int(seen["size"]) < (1 << 20) + 100 * 4096, "the kernel held the file near the cap"
    assert job.exit_code == 0 and job.reason == (
        "/output filled up while the job ran (the output cap is 1048576 bytes): writing more failed with "
        "'No space left on device'; outputs total more than the cap of 1048576 bytes"
    )


def test_without_root_output_is_a_plain_folder_and_a_job_past_the_cap_is_killed(ready, engine, settings, monkeypatch):
    # Local development without privileges: no filesystem of its own, the watch loop polls instead.
    monkeypatch.setattr(scratch, "may_mount", lambda: False)
    settings.E31_OUTPUT_TOTAL_MAX_BYTES = 1_000_000
    job = run_here(submit_job(*ready, time_limit_s=30,
                              command="while :; do head -c 65536 /dev/zero >> /output/grow.bin; done"))  # fmt: skip

    # Not killed for its output, the loop would run to its time limit and end timed_out.
    assert_released_and_cleaned(engine, job, Outcome.FAILED)
    assert "wrote more than the output cap of 1000000 bytes and was killed" in job.reason
    assert not job.output_files.exists()


ODD_ENTRIES = (
    "cd /output && echo good > good.txt && echo b > 'back\\slash.txt' && echo x > '..\\x' && "
    "echo n > \"$(printf 'new\\nline.txt')\" && echo e > \"$(printf 'esc\\033[31m')\" && "
    # Deeper than the host allows (4096 bytes): short steps in here, one long path on the host.
    "n=$(printf '%0250d' 0) && for i in $(seq 17); do mkdir $n && cd $n; done && echo deep > bottom.txt; "
    "echo done=yes"
)


def test_odd_output_entries_are_refused_one_by_one_and_the_rest_kept(ready, engine):
    member, _ = ready
    job = run_here(submit_job(*ready, command=ODD_ENTRIES))

    assert_released_and_cleaned(engine, job, Outcome.SUCCEEDED)
    assert sorted(o.path for o in job.output_files.all()) == ["..\\x", "back\\slash.txt", "good.txt"]
    deep = "/".join(["0" * 250] * 4)
    assert job.reason == (
        "refused outputs: esc\\x1b[31m (name has control characters), new\\nline.txt (name has control "
        f"characters), {deep}/ (folder too deep: no path below it fits in {outputs.PATH_MAX_BYTES} bytes)"
    )
    assert_no_host_paths(job)
    assert report(job)["done"] == "yes", "the log was kept"
    api = api_client_for(member)
    for name, content in (("..\\x", b"x\n"), ("back\\slash.txt", b"b\n"), ("good.txt", b"good\n")):
        response = api.get(f"/api/v1/jobs/{job.pk}/outputs/{quote(name)}")
        assert response.status_code == 200 and b"".join(response.streaming_content) == content, name


def test_data_that_cannot_be_staged_fails_the_job_in_its_own_terms(ready, engine):
    job = submit_job(*ready, files={"train.csv": "a,b"})
    default_storage.delete(data_key(job.pk, "train.csv"))  # lost from the store before the run

    job = run_here(job)

    assert_released_and_cleaned(engine, job, Outcome.FAILED)
    assert job.reason == (
        "the node could not run the job: /data/train.csv could not be staged: No such file or directory"
    )
    assert_no_host_paths(job)


# --- cancel, metering, clean-up ---------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_cancel_while_running_stops_the_job(ready, engine):
    job = submit_job(*ready, command="echo started; sleep 30", time_limit_s=60)
    errors = []

    def cancel_once_running():
        try:
            wait_until(lambda: containers_of(engine, job, status="running"), 20, message="the container to run")
            actions.cancel(Job.objects.get(pk=job.pk), now=timezone.now())
        except Exception as exc:  # reported by the test below
            errors.append(exc)
        finally:
            connection.close()

    canceller = threading.Thread(target=cancel_once_running)
    canceller.start()
    job = run_here(job)
    canceller.join(30)

    assert not errors, errors
    assert_released_and_cleaned(engine, job, Outcome.CANCELLED)
    assert job.reason == "cancelled while running"


BUSY = """
import time
end = time.process_time() + 1.2
while time.process_time() < end:
    pass
"""


def test_cpu_time_is_metered_into_the_record(ready, engine):
    job = run_here(submit_job(*ready, image="python", command=["python3", "/data/busy.py"], files={"busy.py": BUSY}))

    record = assert_released_and_cleaned(engine, job, Outcome.SUCCEEDED)
    assert 1.0 < record.cpu_seconds < 10
    assert record.memory_peak_mb is not None and record.memory_peak_mb > 0


def test_worker_start_removes_what_a_crashed_run_left_and_keeps_what_a_held_run_needs(ready, engine):
    crashed, waiting = submit_job(*ready), submit_job(*ready)
    schedule_pass(now=timezone.now())
    assert actions.start_run(Job.objects.get(pk=crashed.pk), now=timezone.now())
    left = {job: scratch.Scratch(job.pk, uid=runner.job_uid(job.active_hold.cpu_set)) for job in (crashed, waiting)}
    for folder in left.values():
        folder.prepare([])
    (left[crashed].output / "model.json").write_text("{}")
    try:
        node.start_node()  # the worker of this node starts again after a crash

        crashed.refresh_from_db()
        assert crashed.outcome == Outcome.NODE_LOST
        assert mounts_under(left[crashed].root) == [] and not left[crashed].root.exists()
        # Still held here: the watchdog sends its run again, which will use (and first clear) this folder.
        assert sorted(mounts_under(left[waiting].root)) == [str(left[waiting].data), str(left[waiting].output)]
    finally:
        for folder in left.values():
            folder.remove()


def test_orphaned_containers_are_removed_and_nothing_else(engine, tmp_path, settings):
    # Namespaces of this test alone: a sweep must not touch what tests running beside it started.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    namespaces = [f"{settings.E31_SANDBOX_NAMESPACE}-{role}-{worker}" for role in ("sweep", "bystander")]
    sandboxes = []
    for namespace in namespaces:
        settings.E31_SANDBOX_NAMESPACE = namespace
        sandboxes.append(DockerSandbox(engine))
    sandbox, bystander = sandboxes

    def leave_behind(owner: DockerSandbox, job_id: str) -> str:
        folder = tmp_path / job_id
        (folder / "data").mkdir(parents=True)
        (folder / "output").mkdir()
        return owner.run(spec_for(job_id, folder, command=["sleep", "30"]))

    started = [(sandbox, leave_behind(sandbox, "orphan-1")), (sandbox, leave_behind(sandbox, "kept-1")),
               (bystander, leave_behind(bystander, "other-1"))]  # fmt: skip
    (_, orphan), (_, kept), (_, other) = started
    try:
        removed = sandbox.orphans(node=settings.E31_NODE_NAME, keep={"kept-1-1"})  # job kept-1, attempt 1

        # Containers an earlier, crashed run of this test left behind are orphans too.
        assert "orphan-1-1" in removed and "kept-1-1" not in removed and "other-1-1" not in removed
        assert engine.containers.list(all=True, filters={"id": orphan}) == []
        assert engine.containers.get(kept).status == "running"
        assert engine.containers.get(other).status == "running"
    finally:
        for owner, handle in started:
            owner.remove(handle)
        for namespace in namespaces:
            remove_cgroups(Path(settings.E31_CGROUP_ROOT), f"/{namespace}")
    for namespace in namespaces:
        assert engine.containers.list(all=True, filters={"label": f"{NAMESPACE_LABEL}={namespace}"}) == []


def test_two_attempts_of_a_job_on_one_engine_do_not_collide(engine, tmp_path, settings):
    # A retry held on the same engine while the lost attempt's container still exists.
    settings.E31_SANDBOX_NAMESPACE = f"{settings.E31_SANDBOX_NAMESPACE}-attempts"
    sandbox = DockerSandbox(engine)
    folder = tmp_path / "job"
    (folder / "data").mkdir(parents=True)
    (folder / "output").mkdir()
    first = sandbox.run(spec_for("job-x", folder, command=["sleep", "30"], attempt=1))
    try:
        second = sandbox.run(spec_for("job-x", folder, command=["sleep", "30"], attempt=2))
        try:
            assert sandbox.orphans(node=settings.E31_NODE_NAME, keep={"job-x-2"}) == ["job-x-1"]
            assert engine.containers.get(second).status == "running"
        finally:
            sandbox.remove(second)
    finally:
        sandbox.remove(first)
    remove_cgroups(Path(settings.E31_CGROUP_ROOT), f"/{settings.E31_SANDBOX_NAMESPACE}")
    assert (
        engine.containers.list(all=True, filters={"label": f"{NAMESPACE_LABEL}={settings.E31_SANDBOX_NAMESPACE}"}) == []
    )


# --- configuration ------------------------------------------------------------------------------------


def spec_for(job_id: str, folder: Path, **fields) -> RunSpec:
    values = {
        "job_id": job_id,
        "node": settings.E31_NODE_NAME,
        "image": "e31/busybox:1",
        "command": ["true"],
        "env": {},
        "cpu_set": [0],
        "memory_mb": 64,
        "gpu_ids": [],
        "data_dir": folder / "data",
        "output_dir": folder / "output",
        "uid": 10001,
        "pids_limit": 64,
        "tmpfs_mb": 16,
        **fields,
    }
    return RunSpec(**values)


def test_container_config_holds_every_isolation_rule(engine, tmp_path):
    config = DockerSandbox(engine).container_config(
        spec_for("j-1", tmp_path, cpu_set=[1, 3], memory_mb=512, gpu_ids=["0", "1"], pids_limit=99)
    )

    (gpus,) = config["device_requests"]
    assert gpus["DeviceIDs"] == ["0", "1"] and gpus["Capabilities"] == [["gpu"]]
    assert gpus["Count"] == 0, "a count (-1: all) would ask for more than the held devices"
    assert config["network_mode"] == "none" and config["network_disabled"] is True
    assert not {"volumes", "devices", "cap_add", "pid_mode", "userns_mode"} & set(config)
    assert config["cap_drop"] == ["ALL"] and config["ipc_mode"] == "private"
    assert config["read_only"] is True and config["privileged"] is False
    assert config["security_opt"] == ["no-new-privileges"]
    assert config["user"] == "10001:10001"
    assert config["cpuset_cpus"] == "1,3"
    assert config["mem_limit"] == config["memswap_limit"] == "512m"
    assert config["pids_limit"] == 99
    tmpfs = config["tmpfs"]["/tmp"].split(",")
    assert {"size=16m", "nosuid", "nodev", "uid=10001", "gid=10001"} <= set(tmpfs) and list(config["tmpfs"]) == ["/tmp"]
    assert config["labels"][JOB_LABEL] == "j-1"
    assert [(m["Target"], m["Source"], m["ReadOnly"]) for m in config["mounts"]] == [
        ("/data", str(tmp_path / "data"), True),
        ("/output", str(tmp_path / "output"), False),
    ]


def test_container_config_without_gpus_requests_no_devices(engine, tmp_path):
    config = DockerSandbox(engine).container_config(spec_for("j-2", tmp_path))

    assert "device_requests" not in config and "devices" not in config
