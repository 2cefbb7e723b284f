"""The isolation probes, and their judges: plain functions of what a run left, so tested without a container."""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.formats import outcome_label
from jobs.models import Outcome

SCRIPT = (Path(__file__).with_name("probe_script.py")).read_text()
DECOY_MARKER = "E31-" + "DECOY-"  # the decoy's secret starts with it (the probe looks for it)

PASSED, FAILED, INCONCLUSIVE = "passed", "failed", "inconclusive"


@dataclass(frozen=True)
class Seen:
    """What one probe job left, as the host reads it after its release."""

    report: dict[str, str]  # the `key=value` lines of its log (the last value of a key)
    lines: list[tuple[str, str]]  # every `key=value` line, in order
    log: str
    outcome: str
    exit_code: int | None
    reason: str
    outputs: dict[str, bytes]  # collected output path → content
    cpu_set: list[int]  # the cores its hold named
    memory_mb: int
    runtime: str
    uids: range  # the uids a run may have
    pids_limit: int
    output_files: int  # the cap on output files, and the entries /output may hold beyond them
    output_entries: int
    forbidden: list[str] = field(default_factory=list)  # host paths and ids it must not learn
    decoy_secret: str = ""
    beside_decoy: bool | None = None  # None: no decoy in this round
    node_cpus: int = 0  # the cores the node lends (0: not known)
    decoy_ran: str = ""  # when the decoy and the probe ran, "HH:MM:SS–HH:MM:SS" ("" when it did not start)
    probe_ran: str = ""


@dataclass(frozen=True)
class Verdict:
    verdict: str
    evidence: str


Judge = Callable[[Seen], Verdict]


@dataclass(frozen=True)
class Probe:
    name: str
    boundary: str  # in plain words, as /isolation/ says it
    mechanism: str  # what enforces it
    judge: Judge
    memory_mb: int = 64
    time_limit_s: int = 60
    expect: str | None = Outcome.SUCCEEDED  # how a run that reached its end ends; None: the judge decides

    def verdict(self, seen: Seen) -> Verdict:
        if self.expect is not None and seen.outcome != self.expect:
            return Verdict(
                FAILED,
                f"the probe ended {outcome_label(seen.outcome) if seen.outcome else 'without an outcome'} "
                f"(exit {seen.exit_code}), not {outcome_label(self.expect)}: "
                f"{seen.reason or 'no reason'}; its log ends: {seen.log[-600:]!r}",
            )
        return self.judge(seen)


def _verdict(ok: bool, tried: str, saw: str) -> Verdict:
    return Verdict(PASSED if ok else FAILED, f"tried: {tried}. saw: {saw}")


def refused(value: str) -> bool:
    return value.startswith("refused") or value.startswith("no answer")


def judge_network(seen: Seen) -> Verdict:
    attempts = {k: v for k, v in seen.report.items() if k.startswith(("tcp_", "dns_"))}
    interfaces = seen.report.get("interfaces", "")
    only_lo = interfaces.startswith("unreadable") or set(interfaces.split(",")) <= {"lo", "none"}
    no_route = seen.report.get("routes", "0") in ("0",) or seen.report.get("routes", "").startswith("unreadable")
    ok = len(attempts) >= 5 and all(refused(v) for v in attempts.values()) and only_lo and no_route
    return _verdict(
        ok,
        "TCP to 127.0.0.1 ports 8000 (web), 5432 (PostgreSQL), 6379 (Redis), 53, and a DNS query to the "
        "loopback resolver",
        "; ".join(f"{k} {v}" for k, v in attempts.items())
        + f"; interfaces {interfaces}; routes {seen.report.get('routes')}",
    )


def judge_staged_data(seen: Seen) -> Verdict:
    secret_seen = bool(seen.decoy_secret) and (
        seen.decoy_secret in seen.log or any(seen.decoy_secret.encode() in data for data in seen.outputs.values())
    )
    found = seen.report.get("found", "")
    tried = (
        "to find the staged data of a decoy job running beside it: every file it can read outside the image, "
        "and every other process's environment, command line and root folder"
    )
    saw = f"read {seen.report.get('files_read', '?')} files; found {found}"
    if found != "none" or secret_seen:
        return _verdict(False, tried, saw + ("; the decoy's secret is in its log" if secret_seen else ""))
    if seen.beside_decoy is False:
        return Verdict(INCONCLUSIVE, f"tried: {tried}. saw: {saw}; but the decoy did not run at the same time "
                                     f"({apart(seen)})")  # fmt: skip
    return _verdict(True, tried, saw + ", while the decoy ran beside it")


def apart(seen: Seen) -> str:
    """Why the decoy and the probe did not overlap, in words true for the node's core count."""
    if seen.node_cpus == 1:
        return "a node with one core cannot run both"
    when = f"the decoy ran {seen.decoy_ran or 'not at all'}, the probe {seen.probe_ran or 'not at all'}"
    return f"{when}, on this node of {seen.node_cpus} cores" if seen.node_cpus > 1 else when


def judge_fs_write(seen: Seen) -> Verdict:
    attempts = {k: v for k, v in seen.report.items() if k.startswith(("write ", "append ", "mkdir ", "chmod "))}
    ok = len(attempts) >= 7 and all(refused(v) for v in attempts.values())
    return _verdict(ok, "to write the root filesystem (/, /etc, /usr, the world-writable /var/tmp) and /data "
                        "(a new file, its own file, "
                        "a folder, its mode)", "; ".join(f"{k} {v}" for k, v in attempts.items()))  # fmt: skip


def judge_capabilities(seen: Seen) -> Verdict:
    gvisor = seen.runtime == "runsc"
    sets = {k: seen.report.get(k, "") for k in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb")}
    # gVisor's /proc shows no CapAmb and no NoNewPrivs line; the other sets it shows are its kernel's.
    empty = all(re.fullmatch(r"0+", v or "x") or (gvisor and k == "CapAmb" and v == "absent") for k, v in sets.items())
    no_new = seen.report.get("NoNewPrivs") == "1" or (gvisor and seen.report.get("NoNewPrivs") == "absent")
    names = ("setuid0", "chown_root", "raw_socket", "mknod", "read_disk", "sethostname")
    attempts = {k: seen.report.get(k, "") for k in names}
    # gVisor lets a job make a device node in its own memory filesystem; opening one reaches no host device.
    needed = {k: v for k, v in attempts.items() if not (gvisor and k == "mknod")}
    ok = empty and no_new and all(refused(v) for v in needed.values())
    return _verdict(
        ok,
        "setuid(0), chown to root, a raw socket, a device node for the host's disk and reading it, sethostname",
        ", ".join(f"{k} {v}" for k, v in sets.items())
        + f", NoNewPrivs {seen.report.get('NoNewPrivs')}; "
        + "; ".join(f"{k} {v}" for k, v in attempts.items()),
    )


def judge_root(seen: Seen) -> Verdict:
    try:
        ids = [int(seen.report[k]) for k in ("uid", "euid", "gid")]
        groups = [int(g) for g in seen.report.get("groups", "none").split(",") if g != "none"]
    except (KeyError, ValueError):
        return Verdict(FAILED, f"the probe did not report its ids: {seen.log[-400:]!r}")
    ok = 0 not in ids + groups and ids[0] in seen.uids
    return _verdict(
        ok,
        "to run as root",
        f"uid {ids[0]}, euid {ids[1]}, gid {ids[2]}, groups {seen.report.get('groups')}; "
        f"the run's uid range is {seen.uids.start}-{seen.uids.stop - 1}",
    )


def _cpus(text: str) -> list[int]:
    try:
        return sorted(int(c) for c in text.split(",") if c)
    except ValueError:
        return []


def judge_cpuset(seen: Seen) -> Verdict:
    before, after = _cpus(seen.report.get("affinity", "")), _cpus(seen.report.get("affinity_after", ""))
    allowed = seen.report.get("cpus_allowed", "")
    held = sorted(seen.cpu_set)
    if seen.runtime == "runsc":
        # gVisor numbers the cores it gives the job from 0; the host pins the sandbox to the held ones.
        ok = len(before) == len(after) == len(held)
    else:
        ok = before == after == held and allowed != "absent"
    return _verdict(
        ok,
        "to run on every core of the machine (sched_setaffinity to all)",
        f"held cores {held}; affinity {before}, after asking for all {after} ({seen.report.get('set_all')}); "
        f"Cpus_allowed_list {allowed}",
    )


def judge_memory(seen: Seen) -> Verdict:
    reached = max((int(v) for k, v in seen.lines if k == "allocated_mb" and v.isdigit()), default=0)
    # The kernel's OOM killer ends the job: the runner names the outcome from the engine's report. An engine
    # that lost the OOM event (Docker 20.10 with containerd's event after the exit, or none) reports only a
    # SIGKILL the platform did not send: the limit held all the same, which is what the probe asks.
    killed = seen.outcome == Outcome.OUT_OF_MEMORY or (
        seen.outcome == Outcome.FAILED
        and seen.exit_code == SIGKILLED
        and seen.reason == f"exited with code {SIGKILLED}"
    )
    ok = killed and "survived" not in seen.report and reached <= seen.memory_mb + 16
    return _verdict(
        ok,
        f"to allocate {3 * seen.memory_mb} MB with a limit of {seen.memory_mb} MB",
        f"allocated {reached} MB, then the job ended {outcome_label(seen.outcome)} ({seen.reason})",
    )


SIGKILLED = 137  # a process ended by SIGKILL, as a shell and the engine report it


def judge_pids(seen: Seen) -> Verdict:
    forked = int(seen.report.get("forked", "-1") or -1)
    stopped = seen.report.get("stopped", "")
    ok = 0 <= forked < seen.pids_limit and stopped == "EAGAIN"
    return _verdict(
        ok,
        f"to start {seen.pids_limit + 32} processes with a limit of {seen.pids_limit}",
        f"started {forked}, then fork said {stopped}",
    )


def judge_output_links(seen: Seen) -> Verdict:
    leaked = [p for p, data in seen.outputs.items() if p != "real.txt" or b"root:" in data]
    named = [f"{n} (symlink)" for n in ("passwd", "host-root", "shadow")] + [
        f"{n} (hardlink)" for n in ("twin-a.txt", "twin-b.txt")
    ]
    ok = not leaked and "real.txt" in seen.outputs and all(n in seen.reason for n in named)
    return _verdict(
        ok,
        "symlinks to /etc/passwd, /etc/shadow and /, a hardlinked pair, and a hardlink to its own data, in /output",
        f"collected {sorted(seen.outputs) or 'nothing'}; refused: {seen.reason or 'nothing'}; "
        f"hardlink to /data {seen.report.get('hardlink_data')}",
    )


DEVICES_OK = {"null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts/ptmx", "console"}
# gVisor's own devices, served by its kernel in user space: none of them is the host's.
DEVICES_OK_GVISOR = DEVICES_OK | {"fuse", "net/tun"}
HOST_PROCESSES = {"dockerd", "containerd", "systemd", "init", "celery", "postgres", "redis-server", "sshd", "python"}


def judge_host_view(seen: Seen) -> Verdict:
    names = set(seen.report.get("process_names", "").split(","))
    sockets = {k[len("exists ") :]: v for k, v in seen.report.items() if k.startswith("exists ")}
    devices = [d for d in seen.report.get("devices", "").split(",") if d and d != "none"]
    allowed = DEVICES_OK_GVISOR if seen.runtime == "runsc" else DEVICES_OK
    strange = [d for d in devices if d.endswith(":block") or d.rsplit(":", 1)[0] not in allowed]
    processes = int(seen.report.get("processes", "999") or 999)
    host_names = sorted(names & (HOST_PROCESSES - {"python"}))
    ok = (
        bool(sockets) and processes <= 5 and not host_names and all(v == "no" for v in sockets.values()) and not strange
    )
    return _verdict(
        ok,
        "to see the host's processes, the Docker and containerd sockets and device nodes",
        f"{processes} processes ({seen.report.get('process_names')}); "
        + "; ".join(f"{k} {'present' if v == 'yes' else 'absent'}" for k, v in sockets.items())
        + f"; devices {', '.join(devices) or 'none'}"
        + (f"; not allowed: {', '.join(strange)}" if strange else ""),
    )


def judge_mountinfo(seen: Seen) -> Verdict:
    text = "\n".join(v for k, v in seen.lines if k.startswith("line "))
    learned = sorted({term for term in seen.forbidden if term and term in text})
    data = [v for k, v in seen.lines if k == "line /proc/self/mountinfo" and " /data " in v]
    ok = bool(text) and not learned
    return _verdict(
        ok,
        "to learn host paths from /proc/self/mountinfo, /proc/1/mountinfo and /proc/self/cgroup",
        (f"they name {', '.join(learned)}" if learned else "no folder of the node, store or job id")
        + f"; /data is mounted as: {data[0] if data else 'not shown'}",
    )


def judge_inodes(seen: Seen) -> Verdict:
    made = {k[len("created ") :]: int(v) for k, v in seen.report.items() if k.startswith("created ") and v.isdigit()}
    stopped = {k[len("stopped ") :]: v for k, v in seen.report.items() if k.startswith("stopped ")}
    # /output is a tmpfs of the caps' inode count; / and /data refuse any file.
    ok = (
        made.get("/output", 1 << 30) <= seen.output_entries
        and stopped.get("/output") == "ENOSPC"
        and made.get("/") == 0
        and made.get("/data") == 0
        and "/output filled up" in seen.reason
    )
    writable = {k[len("writable ") :]: v for k, v in seen.report.items() if k.startswith("writable ")}
    return _verdict(
        ok,
        f"to create {seen.output_files + 200} files in /output and /tmp, and files in / and /data",
        "; ".join(
            f"{folder}: {made.get(folder)} made, then {stopped.get(folder)}"
            for folder in ("/output", "/tmp", "/", "/data")
        )
        + f" (/output may hold {seen.output_entries} entries); writable mounts: "
        + ", ".join(f"{k} {v}" for k, v in sorted(writable.items())),
    )


# fmt: off
PROBES: list[Probe] = [
    Probe("staged-data", "A job reads only its own data: not the data staged for a job running beside it.",
        "each run's data is copied into a private folder (mode 0700) on a filesystem of its own, and only that one "
        "is mounted, read-only, at /data; other jobs' folders are not in its mount namespace",
        judge_staged_data, memory_mb=128),
    Probe("network", "A job has no network: not the web, the database, the broker, nor any DNS.",
        "the container is given no network (network_mode none): its only interface is its own loopback; the engine "
        "runs with no bridge and no iptables rules, so none can be given", judge_network),
    Probe("fs-write", "A job cannot change its image or its data.",
        "the root filesystem is mounted read-only, and /data is a read-only mount of a filesystem the node made "
        "read-only once the data was staged", judge_fs_write),
    Probe("capabilities", "A job holds no privilege.",
        "every Linux capability is dropped and no-new-privileges is set, so no setuid program can raise it",
        judge_capabilities),
    Probe("root", "A job never runs as root.",
        "the container runs as an unprivileged uid of its own, from a range (E31_JOB_UID_BASE: base + its first "
        "held core), so two runs on a node never share one", judge_root),
    Probe("cpuset", "A job runs only on the cores held for it.",
        "the container is pinned to the held core ids (cpuset); two holds never share a core", judge_cpuset),
    Probe("memory", "A job cannot use more memory than it asked for.",
        "a hard memory limit with no swap beyond it (memory = memory+swap); past it the kernel kills the job, which "
        "ends out_of_memory", judge_memory, expect=None),
    Probe("pids", "A job cannot start more processes than its limit (no fork bomb).",
        "a pids limit on the container's cgroup (E31_PIDS_LIMIT); under gVisor its kernel holds the job's processes "
        "to it (RLIMIT_NPROC) and the cgroup leaves room for the sandbox's own threads", judge_pids,
        # Under gVisor each process's pages are the sandbox's own, and a forked python holds its copied pages
        # until it execs sleep: on a slow machine many are between the two at once. Its system calls also
        # go through the sandbox's kernel, so forking past the limit takes minutes on a busy machine.
        memory_mb=512, time_limit_s=300,
    ),
    Probe("output-links", "A job's outputs cannot carry a host file out through a symlink or a hardlink.",
        "outputs are collected by the host without following links: symlinks, hardlinks, devices, fifos and sockets "
        "are refused, each file opened with O_NOFOLLOW and checked to be the inode listed", judge_output_links),
    Probe("host-view", "A job cannot see the host's processes, the Docker socket or the host's devices.",
        "a private pid namespace, no socket mounted, and only the harmless device nodes (null, zero, random…)",
        judge_host_view),
    Probe("mountinfo", "A job cannot learn the host's folders from its mounts.",
        "/data and /output are filesystems of their own (tmpfs named e31-data and e31-output), not bind mounts of "
        "host folders, and the container has its own cgroup namespace; under gVisor every mount is its own",
        judge_mountinfo),
    Probe("inodes", "A job cannot fill the host's disk with files.",
        "the root filesystem and /data are read-only; /output is a tmpfs whose inode count is the output file cap, "
        "/tmp a small tmpfs: nothing the job writes reaches the host's disk",
        judge_inodes, expect=Outcome.FAILED),  # filling /output past the cap fails the job, as it should
]
# fmt: on
BY_NAME = {probe.name: probe for probe in PROBES}


def parse_report(log: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    lines = []
    for line in log.splitlines():
        key, sep, value = line.partition("=")
        if sep and key and not key.startswith(" "):
            lines.append((key.strip(), value.strip()))
    return dict(lines), lines
