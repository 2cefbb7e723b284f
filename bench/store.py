"""The store (issue 24): a 250 MB data file uploaded and staged through an S3 store (moto's server on loopback,
started here) against the file-system store, in the same run; and a node's staging against `cp`.

Measured, medians of three runs, each on a fresh key:
- upload: what the web does with an upload once Django has spooled its body to a temporary file
  (jobs.storage.store.save_upload: the sha256 pass and the write to the store; to S3 in parts), and the most the
  process's resident memory grew meanwhile (a whole file in memory would show as 250 MB);
- staging: worker.scratch.Scratch.prepare of that one file (streamed from the store into /data, a tmpfs
  when run as root, with the sha256 checked), in MB/s;
- the anchor: `cp` of the file-system store's copy of the same file to /dev/shm (a tmpfs, as /data is).

Prints the headline figures last. Run (as root, for /data's tmpfs): .venv/bin/python bench/store.py [--mb N]
"""

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path

from _setup import ROOT, Timer, machine

VAR = ROOT / "var" / "bench-store"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "e31site.settings")
os.environ.setdefault("E31_VAR_DIR", str(VAR))

import django  # noqa: E402

django.setup()

from django.core.files import File  # noqa: E402
from django.test.utils import override_settings  # noqa: E402

from jobs.lifecycle.inputs import Staged  # noqa: E402
from jobs.storage.store import data_key, delete_stored, save_upload  # noqa: E402
from tests.s3 import S3Server  # noqa: E402
from worker.scratch import Scratch  # noqa: E402

MB = 1024 * 1024
RUNS = 3


class PeakRss:
    """The most this process's resident memory grew over its start while the block ran (sampled every 10 ms)."""

    def __enter__(self):
        self.base = self.peak = self._rss()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self) -> None:
        while not self.done.wait(0.01):
            self.peak = max(self.peak, self._rss())

    @staticmethod
    def _rss() -> int:
        with open("/proc/self/status") as status:
            line = next(line for line in status if line.startswith("VmRSS:"))
        return int(line.split()[1]) * 1024

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()
        self.grew_mb = (self.peak - self.base) / MB


def one_run(source: Path, size: int, sha256: str, fs_location: Path) -> tuple[float, float, float, Path]:
    """Upload then stage the file through the current store: (upload s, upload's memory growth MB, staging s,
    where the file-system store keeps it)."""
    job_id = uuid.uuid4()
    with open(source, "rb") as handle, PeakRss() as memory, Timer() as upload:
        assert save_upload(job_id, "in.bin", File(handle, name="in.bin")) == (size, sha256)
    scratch = Scratch(job_id, uid=os.geteuid())
    try:
        with Timer() as staging:
            scratch.prepare([Staged("in.bin", data_key(job_id, "in.bin"), size, sha256)])
    finally:
        scratch.remove()
    return upload.seconds, memory.grew_mb, staging.seconds, fs_location / data_key(job_id, "in.bin")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=250)
    args = parser.parse_args()
    size = args.mb * MB
    VAR.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="e31-bench-store-", dir=VAR))
    fs_location, scratch_dir = work / "store", work / "scratch"
    source = work / "upload.bin"
    with open(source, "wb") as out:  # what Django's upload handler left in its temporary file
        for _ in range(args.mb):
            out.write(os.urandom(MB))
    sha256 = hashlib.sha256(source.read_bytes()).hexdigest()
    server = S3Server(VAR / "moto.log").start()
    fs = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(fs_location)}}
    }
    s3 = server.storages(fs, location="bench")
    print(machine())
    print(f"file: {args.mb} MB; runs: {RUNS}; running as {'root (/data a tmpfs)' if os.geteuid() == 0 else 'a user'}")
    figures: dict[str, list[float]] = {}
    try:
        for run in range(RUNS):
            for name, storages in (("fs", fs), ("s3", s3)):
                with override_settings(STORAGES=storages, E31_SCRATCH_DIR=scratch_dir):
                    upload_s, grew_mb, staging_s, kept = one_run(source, size, sha256, fs_location)
                    if name == "fs":  # the anchor: cp of the very file the store keeps, to a tmpfs
                        target = Path("/dev/shm") / f"e31-bench-store-{os.getpid()}.bin"
                        with Timer() as cp:
                            subprocess.run(["cp", str(kept), str(target)], check=True)
                        target.unlink()
                        figures.setdefault("cp_s", []).append(cp.seconds)
                    delete_stored(uuid.UUID(kept.parent.parent.name))
                figures.setdefault(f"upload_{name}_s", []).append(upload_s)
                figures.setdefault(f"upload_{name}_rss_mb", []).append(grew_mb)
                figures.setdefault(f"staging_{name}_s", []).append(staging_s)
                said = f"upload {upload_s:.2f} s (memory +{grew_mb:.0f} MB), staging {staging_s:.2f} s"
                print(f"run {run + 1} {name}: {said}")
            print(f"run {run + 1} cp: {figures['cp_s'][-1]:.2f} s")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    med = {name: statistics.median(values) for name, values in figures.items()}
    mb_s = {name: args.mb / med[f"{name}_s"] for name in ("staging_fs", "staging_s3", "cp")}
    print(f"upload_fs_s: {med['upload_fs_s']:.2f} s")
    print(f"upload_s3_s: {med['upload_s3_s']:.2f} s")
    print(f"upload_fs_rss_growth_mb: {med['upload_fs_rss_mb']:.0f} MB")
    print(f"upload_s3_rss_growth_mb: {med['upload_s3_rss_mb']:.0f} MB")
    print(f"upload_s3_vs_fs_ratio: {med['upload_s3_s'] / med['upload_fs_s']:.2f}")
    print(f"staging_fs_mb_s: {mb_s['staging_fs']:.0f} MB/s")
    print(f"staging_s3_mb_s: {mb_s['staging_s3']:.0f} MB/s")
    print(f"staging_s3_vs_fs_ratio: {med['staging_s3_s'] / med['staging_fs_s']:.2f}")
    print(f"cp_mb_s: {mb_s['cp']:.0f} MB/s")
    print(f"staging_fs_vs_cp_ratio: {med['staging_fs_s'] / med['cp_s']:.2f}")
    print(f"staging_s3_vs_cp_ratio: {med['staging_s3_s'] / med['cp_s']:.2f}")


if __name__ == "__main__":
    main()
