"""Arrays: one declaration run as many tasks, each a job of its own (its own hold, outputs, record and
events) that knows its index from E31_ARRAY_INDEX. Its data is stored once, as blobs every task names."""

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import User

from jobs.lifecycle import actions, chains
from jobs.models import DataFile, Dependency, Job, JobArray
from jobs.storage import blobs
from jobs.submit.declaration import Declaration, OwnPart

ARRAY_ENV = ("E31_ARRAY_INDEX", "E31_ARRAY_SIZE", "E31_ARRAY_ID")
INSERT_BATCH = 2000  # rows a statement inserts at most, so a 10,000-task array is five INSERTs a table


@dataclass(frozen=True)
class ArrayRequest:
    """What an array declares besides its tasks' job (None: no limit)."""

    indices: Sequence[int]
    max_running: int | None = None
    stop_after_failures: int | None = None

    def part(self, declaration: Declaration) -> "ArrayPart":
        return ArrayPart(declaration, self)


class ArrayPart(OwnPart[JobArray]):
    """An array's own part of jobs.submit.service.submit: its data stored once as blobs every task names; tasks
    beyond `max_running`, or all while dependencies are unmet, held back until jobs.lifecycle.chains lets them go."""

    model = JobArray

    def __init__(self, declaration: Declaration, request: ArrayRequest) -> None:
        super().__init__(declaration)
        self.request = request
        self.tasks = len(request.indices)

    def fingerprint(self) -> str:
        r = self.request
        text = json.dumps([self.declaration.fingerprint, list(r.indices), r.max_running, r.stop_after_failures])
        return hashlib.sha256(text.encode()).hexdigest()

    def row(self, *, user: User, now: datetime, key: str, fingerprint: str, dependencies: list[Dependency]) -> JobArray:
        r = self.request
        array = JobArray(
            team=self.declaration.team, submitted_by=user, name=self.declaration.name, size=len(r.indices),
            max_running=r.max_running, stop_after_failures=r.stop_after_failures, submitted_at=now,
            idempotency_key=key, request_fingerprint=fingerprint,
        )  # fmt: skip
        array.waiting_on_dependencies = bool(dependencies)
        self.dependencies = dependencies
        return array

    def store(self, made: JobArray) -> None:
        self.written = blobs.write(self.declaration.team, self.declaration.files)

    def claim(self, *, now: datetime) -> None:
        declared = self.declaration
        self.named = [*blobs.keep(declared.team, self.written, now=now, kind="data files"), *declared.named_blobs]
        super().claim(now=now)

    def save(self, made: JobArray, *, user: User, now: datetime) -> list[Job]:
        made.save(force_insert=True)
        tasks = self._tasks(made, user=user, now=now)
        Job.objects.bulk_create(tasks, batch_size=INSERT_BATCH)
        files = [DataFile(job=t, name=n, size=b.size, sha256=b.sha256, blob=b) for t in tasks for n, b in self.named]
        DataFile.objects.bulk_create(files, batch_size=INSERT_BATCH)
        return tasks

    def again(self, made: JobArray) -> JobArray:
        made.created = False
        return made

    def _tasks(self, array: JobArray, *, user: User, now: datetime) -> list[Job]:
        """Its tasks' rows, not saved: each a job of the declaration that knows its index from its env."""
        indices, dependencies = self.request.indices, self.dependencies
        words = chains.held_back_words(dependencies) if dependencies else chains.max_running_words(array)
        same = self.declaration.job_columns()
        free = 0 if array.waiting_on_dependencies else (array.max_running or len(indices))
        size = str(len(indices))
        return [
            Job(
                **{
                    **same,
                    "env": {
                        **self.declaration.env,
                        "E31_ARRAY_INDEX": str(index),
                        "E31_ARRAY_SIZE": size,
                        "E31_ARRAY_ID": str(array.pk),
                    },
                },
                array=array,
                array_index=index,
                submitted_by=user,
                submitted_at=now,
                held_back=n >= free,
                wait_reason=words if n >= free else "",
            )  # fmt: skip
            for n, index in enumerate(indices)
        ]


def cancel_array(array: JobArray, *, now: datetime, acting_user: User | None = None) -> int:
    """Every task not yet released ends cancelled: those waiting at once, a running one by its node."""
    who = acting_user.get_username() if acting_user is not None else "the platform"
    return actions.stop_array(array, reason=f"cancelled with its array by {who}", now=now, acting_user=acting_user)
