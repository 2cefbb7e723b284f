"""The private scratch folder of one run on its node: staged data (read-only at /data), /output and
the log file. As root, `data/` is a tmpfs of its own, so the container's mountinfo names no host path,
and `output/` a tmpfs sized to the output caps, so the kernel holds the job to them (its pages count
against the job's memory); without root both are plain folders and the run polls /output's size."""

import ctypes
import errno
import logging
import os
import shutil
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

from django.conf import settings

from jobs.lifecycle.inputs import Staged
from jobs.storage.store import fetch
from pool.nodes import ScratchSpace

log = logging.getLogger(__name__)

# Entries of /output besides its files (folders and whatever collection refuses); with two inodes
# more (the root, and a spare), only a job past the caps fills it.
OUTPUT_FOLDERS = 64
PAGE = os.sysconf("SC_PAGESIZE")
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT = 1, 2, 4, 32
MNT_DETACH, UMOUNT_NOFOLLOW = 2, 8
OUTPUT_FS, DATA_FS = "e31-output", "e31-data"  # the source names of the tmpfs mounts in /proc/mounts
_libc = ctypes.CDLL(None, use_errno=True)


class ScratchError(RuntimeError):
    """Staging failed; the message is in the job's terms (no host path)."""


def may_mount() -> bool:
    return os.geteuid() == 0


class Scratch:
    """The private folder of one run on the node: data/ (mounted read-only) and output/."""

    def __init__(self, job_id: object, *, uid: int):
        self.root = Path(settings.E31_SCRATCH_DIR) / str(job_id)
        self.data, self.output, self.log = self.root / "data", self.root / "output", self.root / "log.txt"
        self.uid = uid
        self.confined = may_mount()  # the kernel holds /output to the caps, or the run must poll it
        self.mounted = self.data_mounted = False

    def prepare(self, files: Iterable[Staged]) -> None:
        """Stream the job's data from the store, checked against its sha256; only the job's uid reads it."""
        Path(settings.E31_SCRATCH_DIR).mkdir(parents=True, exist_ok=True, mode=0o700)
        self.remove()  # what an earlier run of this job on this node left, its /output mount too
        for folder in (self.root, self.data, self.output):
            folder.mkdir(mode=0o700)
        files = list(files)
        folders = folders_of(files)
        if self.confined:
            self._mount_output()
            self._mount_data(files, folders)
        for name in folders:
            try:
                (self.data / name).mkdir(mode=0o700)
            except OSError as exc:
                raise ScratchError(f"/data/{name} could not be made: {exc.strerror or exc}") from exc
        for staged in files:
            target = self.data / staged.name
            if staged.gone:
                raise ScratchError(f"/data/{staged.name} could not be staged: {staged.gone}")
            try:
                with open(target, "xb") as dst:
                    size, sha256 = fetch(staged.key, dst)  # streamed; StoreUnavailable says the store failed
            except OSError as exc:
                raise ScratchError(f"/data/{staged.name} could not be staged: {exc.strerror or exc}") from exc
            if size != staged.size:  # a transfer cut short can end like a whole one
                raise ScratchError(
                    f"/data/{staged.name} could not be staged: the store gave {size} bytes of its {staged.size}"
                )
            if staged.sha256 and sha256 != staged.sha256:
                raise ScratchError(
                    f"/data/{staged.name} could not be staged: the store gave other bytes than were uploaded "
                    f"(sha256 {sha256[:12]}…, not {staged.sha256[:12]}…)"
                )
            os.chmod(target, 0o400)
        for name in reversed(folders):  # the deepest first, while its parent may still be written
            (self.data / name).chmod(0o500)
        self.data.chmod(0o500)
        self._own(self.data, self.output, *(self.data / name for name in folders), *(self.data / f.name for f in files))
        if self.data_mounted:
            self._seal_data()
        self.log.touch(mode=0o600)

    def restore_outputs(self, files: Iterable[Staged]) -> None:
        """Put a preempted attempt's outputs back under /output, the job's to change."""
        for kept in files:
            target = self.output / kept.name
            if not target.resolve().is_relative_to(self.output.resolve()):
                raise ScratchError(f"/output/{kept.name} could not be restored: it is not under /output")
            folders = [self.output / part for part in Path(kept.name).parents if str(part) != "."]
            for folder in reversed(folders):
                folder.mkdir(mode=0o700, exist_ok=True)
            try:
                with open(target, "xb") as dst:
                    fetch(kept.key, dst)  # streamed; StoreUnavailable says the store failed
            except OSError as exc:
                raise ScratchError(f"/output/{kept.name} could not be restored: {exc.strerror or exc}") from exc
            self._own(*folders, target)

    def _own(self, *paths: Path) -> None:
        if os.geteuid() == 0:
            for path in paths:
                os.chown(path, self.uid, self.uid)

    def output_caps(self) -> tuple[int, int]:
        """The output tmpfs's size and inodes: a page per inode above the cap, as tmpfs counts whole pages."""
        inodes = settings.E31_OUTPUT_MAX_FILES + OUTPUT_FOLDERS + 2
        return settings.E31_OUTPUT_TOTAL_MAX_BYTES + inodes * PAGE, inodes

    def _mount_output(self) -> None:
        size, inodes = self.output_caps()
        options = f"size={size},nr_inodes={inodes},mode=0700,uid={self.uid},gid={self.uid}"
        _mount(OUTPUT_FS, self.output, 0, options, "/output could not be given its own filesystem")
        self.mounted = True

    def _mount_data(self, files: list[Staged], folders: list[str]) -> None:
        inodes = len(files) + len(folders) + 2
        size = sum(-(-f.size // PAGE) * PAGE for f in files) + inodes * PAGE
        options = f"size={size},nr_inodes={inodes},mode=0700"
        _mount(DATA_FS, self.data, 0, options, "/data could not be given its own filesystem")
        self.data_mounted = True

    def _seal_data(self) -> None:
        """Make the staged data's filesystem read-only: not even a root process can change it now."""
        _mount(DATA_FS, self.data, MS_REMOUNT | MS_RDONLY, None, "/data could not be made read-only")

    def output_full(self) -> str:
        """Which output cap the job ran into ("" when none)."""
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
        total = 0
        for dirpath, dirnames, filenames in os.walk(self.output):
            for name in filenames + dirnames:
                with suppress(OSError):
                    total += os.lstat(os.path.join(dirpath, name)).st_size
        return total

    def remove(self) -> None:
        remove_folder(self.root)
        self.mounted = self.data_mounted = False


def folders_of(files: list[Staged]) -> list[str]:
    """The sub-folders of /data the files are staged in, parents first; a name leaving /data is refused."""
    folders: dict[str, None] = {}
    for staged in files:
        parts = staged.name.split("/")
        if staged.name.startswith("/") or any(part in ("", ".", "..") for part in parts):
            raise ScratchError(f"/data/{staged.name} could not be staged: not a path inside /data")
        for depth in range(1, len(parts)):
            folders.setdefault("/".join(parts[:depth]))
    return list(folders)


def space() -> ScratchSpace:
    """The scratch disk's free space and floor, reported with each heartbeat for the scheduler."""
    folder = Path(settings.E31_SCRATCH_DIR).absolute()
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    return ScratchSpace(
        free_mb=shutil.disk_usage(folder).free // (1024 * 1024), min_free_mb=settings.E31_SCRATCH_MIN_FREE_MB
    )


def _mount(source: str, target: Path, flags: int, options: str | None, failed: str) -> None:
    data = options.encode() if options is not None else None
    if _libc.mount(source.encode(), os.fsencode(target), b"tmpfs", flags | MS_NOSUID | MS_NODEV, data) != 0:
        raise ScratchError(f"{failed}: {os.strerror(ctypes.get_errno())}")


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
    """Remove the scratch folders left by a crash, but those of the job ids in `keep`; return the removed."""
    root = Path(settings.E31_SCRATCH_DIR)
    if not root.is_dir():
        return []
    removed = []
    for folder in sorted(root.iterdir()):
        if folder.name in keep or not folder.is_dir():
            continue
        remove_folder(folder)
        removed.append(folder.name)
    return removed


def remove_folder(folder: Path) -> None:
    unmount(folder / "output")
    unmount(folder / "data")
    shutil.rmtree(folder, ignore_errors=True)
