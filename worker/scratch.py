"""The private scratch folder of one run on its node: the job's staged data (mounted read-only at
/data), its /output folder and its log file. Made when the run starts, removed when it ends.

When the worker is root, `data/` is a filesystem of its own too (a tmpfs named `e31-data`, sized to
the staged files and made read-only once they are in), so the mount the container gets names no
folder of the host: in /proc/self/mountinfo its root is `/` and its source `e31-data`, where a bind
mount of a folder would show that folder's host path (the scratch folder, the job's id, the var
folder). The staged data then lives in the node's memory for the run.

When the worker is root, `output/` is a filesystem of its own (a tmpfs) whose size and inode count
are the output caps, so the kernel holds a job to them while it runs: writing or creating past them
fails with ENOSPC, and the host's disk never sees the job's files. Its pages are charged to the
memory cgroup of the job's processes that write them: outputs count against the job's memory.
Without root (local development) `output/` is a plain folder, as before, and the run's watch loop
polls its size (docs/architecture.md, "Isolation").
"""

import ctypes
import errno
import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings
from django.core.files.storage import default_storage

from jobs.models import DataFile
from jobs.store import data_key
from pool.nodes import ScratchSpace

log = logging.getLogger(__name__)

# Entries of /output besides the output files the job may keep: its folders (and whatever else the
# collection refuses). The tmpfs has two inodes more: its root, and one so that a job within the caps
# never fills it, and a full /output means the job went past them.
OUTPUT_FOLDERS = 64
PAGE = os.sysconf("SC_PAGESIZE")
MS_NOSUID, MS_NODEV = 2, 4
MNT_DETACH, UMOUNT_NOFOLLOW = 2, 8
OUTPUT_FS = "e31-output"  # the source name of every output tmpfs in /proc/mounts
DATA_FS = "e31-data"  # and of every staged data tmpfs
MS_RDONLY, MS_REMOUNT = 1, 32
_libc = ctypes.CDLL(None, use_errno=True)


class ScratchError(RuntimeError):
    """Staging failed; the message is in the job's terms (no host path)."""


def may_mount() -> bool:
    return os.geteuid() == 0


class Scratch:
    """The private folder of one run on the node: data/ (mounted read-only) and output/."""

    def __init__(self, job_id: object, *, uid: int):
        self.root = Path(settings.E31_SCRATCH_DIR) / str(job_id)
        self.data = self.root / "data"
        self.output = self.root / "output"
        self.log = self.root / "log.txt"
        self.uid = uid
        # Whether the kernel holds /output to the caps (a tmpfs of its own), or the run must poll it.
        self.confined = may_mount()
        self.mounted = False
        self.data_mounted = False

    def prepare(self, files: Iterable[DataFile]) -> None:
        """Copy the job's data from the store; only the job's uid may read it or write output."""
        Path(settings.E31_SCRATCH_DIR).mkdir(parents=True, exist_ok=True, mode=0o700)
        self.remove()  # what an earlier run of this job on this node left, its /output mount too
        self.root.mkdir(mode=0o700)
        self.data.mkdir(mode=0o700)
        self.output.mkdir(mode=0o700)
        files = list(files)
        if self.confined:
            self._mount_output()
            self._mount_data(files)
        for data_file in files:
            target = self.data / data_file.name
            try:
                with default_storage.open(data_key(data_file.job_id, data_file.name), "rb") as src:
                    with open(target, "xb") as dst:
                        shutil.copyfileobj(src, dst, 1024 * 1024)
            except OSError as exc:
                raise ScratchError(f"/data/{data_file.name} could not be staged: {exc.strerror or exc}") from exc
            os.chmod(target, 0o400)
        self.data.chmod(0o500)
        self._own(self.data, self.output, *self.data.iterdir())
        if self.data_mounted:
            self._seal_data()
        self.log.touch(mode=0o600)

    def _own(self, *paths: Path) -> None:
        if os.geteuid() == 0:
            for path in paths:
                os.chown(path, self.uid, self.uid)

    def output_caps(self) -> tuple[int, int]:
        """The size in bytes and the inode count of the output tmpfs.

        The size leaves a page per inode above the total cap: tmpfs counts whole pages (a 10-byte file
        takes 4 KiB), so outputs within the caps always fit, and a full /output means the job went
        past them."""
        inodes = settings.E31_OUTPUT_MAX_FILES + OUTPUT_FOLDERS + 2
        return settings.E31_OUTPUT_TOTAL_MAX_BYTES + inodes * PAGE, inodes

    def _mount_output(self) -> None:
        size, inodes = self.output_caps()
        options = f"size={size},nr_inodes={inodes},mode=0700,uid={self.uid},gid={self.uid}"
        flags = MS_NOSUID | MS_NODEV
        if _libc.mount(OUTPUT_FS.encode(), os.fsencode(self.output), b"tmpfs", flags, options.encode()) != 0:
            code = ctypes.get_errno()
            raise ScratchError(f"/output could not be given its own filesystem: {os.strerror(code)}")
        self.mounted = True

    def _mount_data(self, files: list[DataFile]) -> None:
        """A tmpfs for the staged data, just big enough: its pages, and a page per inode besides."""
        inodes = len(files) + 2
        size = sum(-(-f.size // PAGE) * PAGE for f in files) + inodes * PAGE
        options = f"size={size},nr_inodes={inodes},mode=0700"
        if _libc.mount(DATA_FS.encode(), os.fsencode(self.data), b"tmpfs", MS_NOSUID | MS_NODEV, options.encode()):
            code = ctypes.get_errno()
            raise ScratchError(f"/data could not be given its own filesystem: {os.strerror(code)}")
        self.data_mounted = True

    def _seal_data(self) -> None:
        """Make the staged data's filesystem read-only: not even a root process can change it now."""
        flags = MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV
        if _libc.mount(DATA_FS.encode(), os.fsencode(self.data), b"tmpfs", flags, None) != 0:
            code = ctypes.get_errno()
            raise ScratchError(f"/data could not be made read-only: {os.strerror(code)}")

    def output_full(self) -> str:
        """Which output cap the job ran into while it ran ("" when none), in the job's terms."""
        if not self.mounted:
            return ""
        fs = os.statvfs(self.output)
        if fs.f_ffree == 0:
            return (
                f"/output filled up while the job ran (at most {settings.E31_OUTPUT_MAX_FILES} output files, "
                f"and {OUTPUT_FOLDERS} folders besides): creating more failed with 'No space left on device'"
            )
        if fs.f_bfree == 0:
            return (
                f"/output filled up while the job ran (the output cap is {settings.E31_OUTPUT_TOTAL_MAX_BYTES} "
                "bytes): writing more failed with 'No space left on device'"
            )
        return ""

    def output_memory_mb(self) -> int:
        """The memory the job's files under /output hold (0 when /output is a plain folder)."""
        if not self.mounted:
            return 0
        fs = os.statvfs(self.output)
        return (fs.f_blocks - fs.f_bfree) * fs.f_frsize // (1024 * 1024)

    def output_bytes(self) -> int:
        """What the job has written under /output so far (polled only when /output is a plain folder)."""
        total = 0
        for dirpath, dirnames, filenames in os.walk(self.output):
            for name in filenames + dirnames:
                try:
                    total += os.lstat(os.path.join(dirpath, name)).st_size
                except OSError:
                    pass
        return total

    def remove(self) -> None:
        """Unmount /output's and /data's filesystems (their files are freed with them), then delete the folder."""
        unmount(self.output)
        unmount(self.data)
        self.mounted = self.data_mounted = False
        shutil.rmtree(self.root, ignore_errors=True)


def space() -> ScratchSpace:
    """The free space of the disk the scratch folders are on (the nearest folder of E31_SCRATCH_DIR
    that exists), and the floor this node keeps (E31_SCRATCH_MIN_FREE_MB): reported with each heartbeat,
    so the scheduler holds nothing on a node below it (pool.placement)."""
    folder = Path(settings.E31_SCRATCH_DIR).absolute()
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    return ScratchSpace(
        free_mb=shutil.disk_usage(folder).free // (1024 * 1024), min_free_mb=settings.E31_SCRATCH_MIN_FREE_MB
    )


def unmount(path: Path) -> bool:
    """Detach the filesystem mounted at `path`; False when none is (or this worker may not)."""
    # MNT_DETACH: a container that somehow still has it keeps its view; the host's is gone at once.
    if _libc.umount2(os.fsencode(path), MNT_DETACH | UMOUNT_NOFOLLOW) == 0:
        return True
    code = ctypes.get_errno()
    if code not in (errno.EINVAL, errno.ENOENT, errno.EPERM, errno.ENOTDIR):
        log.warning("could not unmount %s: %s", path, os.strerror(code))
    return False


def remove_leftovers(*, keep: set[str]) -> list[str]:
    """Remove the scratch folders (and /output mounts) of runs no worker is running, after a crash.

    `keep`: the job ids whose folders may still be in use (jobs still held). Returns the removed ids."""
    root = Path(settings.E31_SCRATCH_DIR)
    if not root.is_dir():
        return []
    removed = []
    for folder in sorted(root.iterdir()):
        if folder.name in keep or not folder.is_dir():
            continue
        unmount(folder / "output")
        unmount(folder / "data")
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder.name)
    return removed
