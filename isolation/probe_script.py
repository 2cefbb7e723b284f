"""The program every isolation probe job runs as its data: it prints `key=value` lines and the host judges them."""

import errno
import json
import os
import socket
import stat
import sys
import time
from contextlib import suppress


def say(key, value):
    print(f"{key}={value}", flush=True)


def why(exc):
    return errno.errorcode.get(getattr(exc, "errno", None) or 0, type(exc).__name__)


def attempt(key, action, *args, done="done"):
    try:
        action(*args)
        say(key, done)
    except (OSError, AttributeError) as exc:  # AttributeError: a call this Python lacks
        say(key, f"refused {why(exc)}")


def write(path, mode):
    with open(path, mode) as f:
        f.write("x")


def status_fields():
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    return fields


def network():
    try:
        say("interfaces", ",".join(sorted(os.listdir("/sys/class/net"))) or "none")
    except OSError as exc:
        say("interfaces", f"unreadable {why(exc)}")
    try:
        with open("/proc/net/route") as routes:
            say("routes", len(routes.read().splitlines()[1:]))
    except OSError as exc:
        say("routes", f"unreadable {why(exc)}")
    # The web, PostgreSQL, Redis and DNS on loopback: the job's own, or the host's were the sandbox to leak.
    for port in (8000, 5432, 6379, 53):
        conn = socket.socket()
        conn.settimeout(2)
        try:
            conn.connect(("127.0.0.1", port))
            say(f"tcp_{port}", "reached")
        except OSError as exc:
            say(f"tcp_{port}", f"refused {why(exc)}")
        finally:
            conn.close()
    # A DNS query for the root's NS records, to every loopback nameserver the job may know.
    servers = ["127.0.0.1"]
    with suppress(OSError), open("/etc/resolv.conf") as conf:
        for line in conf:
            parts = line.split()
            if parts[:1] == ["nameserver"] and parts[1:2] and parts[1].startswith("127."):
                servers.append(parts[1])
    query = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x01"
    for server in dict.fromkeys(servers):
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.settimeout(2)
        try:
            udp.sendto(query, (server, 53))
            udp.recvfrom(512)
            say(f"dns_{server}", "answered")
        except OSError as exc:
            say(f"dns_{server}", f"no answer {why(exc)}")
        finally:
            udp.close()


SKIP = {"/proc", "/sys", "/dev"}
IMAGE = ("/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/var/lib/dpkg", "/var/cache")


def staged_data():
    marker = ("E31-" + "DECOY-").encode()  # never whole in this file, or the probe would find itself
    root_dev = os.stat("/").st_dev
    found, read = [], 0
    for top, dirs, files in os.walk("/", onerror=lambda exc: None):
        dirs[:] = [d for d in dirs if os.path.join(top, d) not in SKIP]
        for name in files:
            path = os.path.join(top, name)
            try:
                st = os.lstat(path)
                # The image's own files are the same for every job: read what is not the image.
                if not stat.S_ISREG(st.st_mode) or (st.st_dev == root_dev and path.startswith(IMAGE)):
                    continue
                with open(path, "rb") as f:
                    read += 1
                    if marker in f.read(1 << 20):
                        found.append(path)
            except OSError:
                continue
    # Other processes: their environment, command line and root folder.
    for pid in (p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
        for part in ("environ", "cmdline"):
            with suppress(OSError), open(f"/proc/{pid}/{part}", "rb") as f:
                if marker in f.read():
                    found.append(f"/proc/{pid}/{part}")
        with suppress(OSError):
            for name in os.listdir(f"/proc/{pid}/root/data"):
                with open(f"/proc/{pid}/root/data/{name}", "rb") as f:
                    if marker in f.read(1 << 20):
                        found.append(f"/proc/{pid}/root/data/{name}")
    say("files_read", read)
    say("found", json.dumps(found) if found else "none")
    for path in found[:3]:
        with open(path, "rb") as f:
            say("content", f.read(200).decode(errors="replace").strip())


def fs_write():
    # /var/tmp is world-writable in the image: only the read-only root filesystem keeps it unchanged.
    for path in ("/probe-root", "/etc/probe", "/usr/probe", "/var/tmp/probe", "/data/probe-new"):
        attempt(f"write {path}", write, path, "w", done="written")
    for name in os.listdir("/data"):
        attempt(f"append /data/{name}", write, f"/data/{name}", "a", done="written")
    attempt("mkdir /data/sub", os.mkdir, "/data/sub")
    attempt("chmod /data", os.chmod, "/data", 0o777)


def read_first(path):
    with open(path, "rb") as f:
        return f.read(512)


def capabilities():
    fields = status_fields()
    for key in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb", "NoNewPrivs"):
        say(key, fields.get(key, "absent"))
    open("/tmp/owned", "w").close()
    attempts = {
        "setuid0": lambda: os.setuid(0),
        "chown_root": lambda: os.chown("/tmp/owned", 0, 0),
        "raw_socket": lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close(),
        # A node for the host's first disk (virtio 254:0, SCSI 8:0), then reading it.
        "mknod": lambda: os.mknod("/tmp/disk", stat.S_IFBLK | 0o600, os.makedev(254, 0)),
        "read_disk": lambda: read_first("/tmp/disk"),
        "sethostname": lambda: socket.sethostname("probe"),
    }
    for name, action in attempts.items():
        attempt(name, action)


def root():
    say("uid", os.getuid())
    say("euid", os.geteuid())
    say("gid", os.getgid())
    say("groups", ",".join(str(g) for g in os.getgroups()) or "none")


def cpuset():
    say("affinity", ",".join(str(c) for c in sorted(os.sched_getaffinity(0))))
    say("cpus_allowed", status_fields().get("Cpus_allowed_list", "absent"))
    # Every core there is: the kernel keeps only those allowed.
    attempt("set_all", os.sched_setaffinity, 0, range(1024), done="accepted")
    say("affinity_after", ",".join(str(c) for c in sorted(os.sched_getaffinity(0))))
    say("cpu_count", os.cpu_count())


def memory():
    limit = int(os.environ["MEMORY_MB"])
    chunks = []
    for step in range(1, 3 * limit // 16 + 1):
        chunks.append(bytearray(16 << 20))  # touched: bytearray zero-fills every page
        say("allocated_mb", step * 16)
    say("survived", "yes")


def pids():
    limit = int(os.environ["PIDS_LIMIT"])
    children, stopped = [], "no"
    for _ in range(limit + 32):
        try:
            pid = os.fork()
        except OSError as exc:
            stopped = why(exc)
            break
        if pid == 0:
            try:
                os.execv("/bin/sleep", ["sleep", "60"])
            finally:
                os._exit(1)
        children.append(pid)
    say("forked", len(children))
    say("stopped", stopped)
    for pid in children:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


def output_links():
    os.chdir("/output")
    with open("real.txt", "w") as f:
        f.write("a real output\n")
    for name, target in (("passwd", "/etc/passwd"), ("host-root", "/"), ("shadow", "/etc/shadow")):
        os.symlink(target, name)
    with open("twin-a.txt", "w") as f:
        f.write("twin\n")
    os.link("twin-a.txt", "twin-b.txt")
    attempt("hardlink_data", os.link, "/data/probe.py", "data-link")
    say("made", "real.txt passwd host-root shadow twin-a.txt twin-b.txt")


def host_view():
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    names = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            names.append("?")
    say("processes", len(pids))
    say("process_names", ",".join(sorted(set(names))))
    for path in ("/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock", "/var/run/docker"):
        say(f"exists {path}", "yes" if os.path.lexists(path) else "no")
    devices = []
    for top, dirs, files in os.walk("/dev"):
        for name in files + dirs:
            path = os.path.join(top, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if stat.S_ISBLK(mode):
                devices.append(f"{path[5:]}:block")
            elif stat.S_ISCHR(mode):
                devices.append(f"{path[5:]}:char")
    say("devices", ",".join(sorted(devices)) or "none")


def mountinfo():
    for path in ("/proc/self/mountinfo", "/proc/1/mountinfo", "/proc/self/cgroup"):
        try:
            with open(path) as f:
                for line in f:
                    say(f"line {path}", line.rstrip("\n"))
        except OSError as exc:
            say(f"line {path}", f"unreadable {why(exc)}")
    say("hostname", socket.gethostname())


def inodes():
    want = int(os.environ["OUTPUT_FILES"]) + 200
    for folder, most in (("/output", want), ("/tmp", want), ("/", 5), ("/data", 5)):
        made, stopped = 0, "no"
        try:
            for i in range(most):
                open(f"{folder.rstrip('/')}/i{i}", "x").close()
                made += 1
        except OSError as exc:
            stopped = why(exc)
        say(f"created {folder}", made)
        say(f"stopped {folder}", stopped)
    with open("/proc/mounts") as mounts:
        for line in mounts:
            source, point, fstype, options = line.split()[:4]
            if options.split(",")[0] == "rw":
                say(f"writable {point}", fstype)


def decoy():
    """The job beside the staged-data probe, holding a secret in its data."""
    time.sleep(float(os.environ.get("DECOY_S", "10")))
    say("decoy", "done")


if __name__ == "__main__":
    started = time.monotonic()
    globals()[sys.argv[1].replace("-", "_")]()
    say("probe_seconds", round(time.monotonic() - started, 2))
