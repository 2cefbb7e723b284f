"""The private scratch folder of one run on its node: the job's staged data (mounted read-only at
/data), its /output folder and its log file. Made when the run starts, removed when it ends."""

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings
from django.core.files.storage import default_storage

from jobs.models import DataFile
from jobs.store import data_key


class Scratch:
    """The private folder of one run on the node: data/ (mounted read-only) and output/."""

    def __init__(self, job_id: object, *, uid: int):
        self.root = Path(settings.E31_SCRATCH_DIR) / str(job_id)
        self.data = self.root / "data"
        self.output = self.root / "output"
        self.log = self.root / "log.txt"
        self.uid = uid

    def prepare(self, files: Iterable[DataFile]) -> None:
        """Copy the job's data from the store; only the job's uid may read it or write output."""
        Path(settings.E31_SCRATCH_DIR).mkdir(parents=True, exist_ok=True, mode=0o700)
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(mode=0o700)
        self.data.mkdir(mode=0o700)
        self.output.mkdir(mode=0o700)
        for data_file in files:
            target = self.data / data_file.name
            with default_storage.open(data_key(data_file.job_id, data_file.name), "rb") as src:
                with open(target, "xb") as dst:
                    shutil.copyfileobj(src, dst, 1024 * 1024)
            os.chmod(target, 0o400)
        self.data.chmod(0o500)
        self._own(self.data, self.output, *self.data.iterdir())
        self.log.touch(mode=0o600)

    def _own(self, *paths: Path) -> None:
        if os.geteuid() == 0:
            for path in paths:
                os.chown(path, self.uid, self.uid)

    def output_bytes(self) -> int:
        """What the job has written under /output so far (cheap enough to poll each second)."""
        total = 0
        for dirpath, dirnames, filenames in os.walk(self.output):
            for name in filenames + dirnames:
                try:
                    total += os.lstat(os.path.join(dirpath, name)).st_size
                except OSError:
                    pass
        return total

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
