import uuid
from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models

from core.outcomes import Outcome
from jobs.storage.store import blob_key, data_key
from pool.preemption import not_preemptable

if TYPE_CHECKING:
    from accounting.rates import Estimate
    from pool.models import Hold

__all__ = [
    "HELD_STAGES", "STARTED_STAGES", "DataFile", "Dependency", "Input", "Isolation", "Job", "JobArray", "JobEvent",
    "JobQuerySet", "LogChunk", "LogSpan", "Outcome", "OutputFile", "RuntimeImage", "Settle", "Stage", "StoredBlob",
]  # fmt: skip

# What a job retries on when it names nothing: a lost node, as before retry rules existed.
DEFAULT_RETRY_ON = ["node_lost"]


def default_retry_on() -> list[str]:
    return list(DEFAULT_RETRY_ON)


class Isolation(models.TextChoices):
    """How strong a boundary a job runs in (docs/isolation.md): the container runtime its node uses."""

    STANDARD = "standard", "standard (runc: namespaces, cgroups, no capabilities)"
    STRONG = "strong", "strong (gVisor: a kernel of its own in user space)"


class RuntimeImage(models.Model):
    """A registered runtime: jobs name it; only registered images can run."""

    name = models.SlugField(unique=True, max_length=64)
    reference = models.CharField(max_length=255, help_text="the docker image reference")
    description = models.CharField(max_length=500, blank=True)
    requires_strong_isolation = models.BooleanField(
        default=False, help_text="every job of this image runs with isolation=strong (gVisor)"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Stage(models.TextChoices):
    SUBMIT = "submit"
    RENT = "rent"
    RUN = "run"
    OUTPUT = "output"
    RELEASE = "release"


# The stages of a job holding compute on a node: held, running, its outputs being collected.
HELD_STAGES = (Stage.RENT, Stage.RUN, Stage.OUTPUT)
# The stages of a job whose container started: its node runs it or collects its outputs.
STARTED_STAGES = (Stage.RUN, Stage.OUTPUT)


class JobQuerySet(models.QuerySet["Job"]):
    """Jobs by where they are in their life (jobs.transitions): the stage groups, named once."""

    def waiting(self) -> "JobQuerySet":
        """Submitted, not held yet (held back by a dependency or a delay included)."""
        return self.filter(stage=Stage.SUBMIT)

    def held(self) -> "JobQuerySet":
        return self.filter(stage__in=HELD_STAGES)

    def started(self) -> "JobQuerySet":
        return self.filter(stage__in=STARTED_STAGES)

    def ended(self) -> "JobQuerySet":
        return self.filter(stage=Stage.RELEASE)

    def live(self) -> "JobQuerySet":
        """Not ended yet: waiting or held."""
        return self.exclude(stage=Stage.RELEASE)


class JobArray(models.Model):
    """Many tasks of one declaration, told apart by their index (Slurm's --array), each a Job of its own."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey("teams.Team", on_delete=models.PROTECT, related_name="arrays")
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=200)
    size = models.PositiveIntegerField()
    # At most this many tasks hold compute at once; None: as many as the pool gives.
    max_running = models.PositiveIntegerField(null=True, blank=True)
    # After this many failed tasks the rest are cancelled (Kubernetes' maxFailedIndexes); None: never.
    stop_after_failures = models.PositiveIntegerField(null=True, blank=True)
    submitted_at = models.DateTimeField()
    # Set once the rest of its tasks were cancelled (by a member, its failures or a dependency), and why.
    stopped_at = models.DateTimeField(null=True, blank=True)
    stop_reason = models.TextField(blank=True, default="")
    resubmitted_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # Its tasks wait for its dependencies (jobs.lifecycle.chains): none is let go before they are met.
    waiting_on_dependencies = models.BooleanField(default=False)
    # When its last task was released (set by the scheduler pass that saw it).
    released_at = models.DateTimeField(null=True, blank=True)
    idempotency_key = models.CharField(max_length=255, blank=True, default="")
    # The sha256 of what was declared (indices included), so a key sent again with another request is told apart.
    request_fingerprint = models.CharField(max_length=64, blank=True, default="")
    # Not stored: the worst case of all its tasks its submission was checked against; whether this
    # submission made it (False: an Idempotency-Key sent again returned it).
    submitted_estimate: "Estimate | None" = None
    created: bool = True

    class Meta:
        ordering = ["-submitted_at"]
        indexes = [models.Index(fields=["team", "-submitted_at"], name="job_array_team_submitted")]
        constraints = [
            models.UniqueConstraint(
                fields=["submitted_by", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="one_array_per_idempotency_key",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.size} tasks)"


class Job(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey("teams.Team", on_delete=models.PROTECT, related_name="jobs")
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=200)
    image = models.ForeignKey(RuntimeImage, on_delete=models.PROTECT, related_name="jobs")
    command = models.JSONField(help_text="argv list")
    env = models.JSONField(default=dict, blank=True)
    cpus = models.PositiveSmallIntegerField()
    memory_mb = models.PositiveIntegerField()
    gpus = models.PositiveSmallIntegerField(default=0)
    time_limit_s = models.PositiveIntegerField()
    output_patterns = models.JSONField(default=list, blank=True)
    # A job that ends as `retry_on` names goes back to the queue while attempts remain (jobs.lifecycle.retries).
    max_retries = models.PositiveSmallIntegerField(default=0)
    retry_on = models.JSONField(default=default_retry_on, blank=True, help_text="outcomes and exit codes")
    retry_memory_factor = models.FloatField(default=1.0)
    retry_delay_s = models.PositiveIntegerField(default=0)
    # The attempts before this one, as each ended ({attempt, outcome, exit_code, reason, memory_mb, held_at,
    # released_at}); the current attempt is the job's own fields.
    past_attempts = models.JSONField(default=list, blank=True)
    # A task of an array, and its index there.
    # Found by the unique constraint on (array, array_index): no index of its own.
    array = models.ForeignKey(
        JobArray, null=True, blank=True, on_delete=models.CASCADE, related_name="tasks", db_index=False
    )
    array_index = models.PositiveIntegerField(null=True, blank=True)
    # Waiting, but not for the pool: for its dependencies, or for its array's max_running to let it go. The
    # scheduler reads only jobs not held back, so a long held-back array costs a pass nothing.
    held_back = models.BooleanField(default=False)
    # A retry waits for its delay: no pass holds it before then.
    not_before = models.DateTimeField(null=True, blank=True)
    isolation = models.CharField(max_length=16, choices=Isolation.choices, default=Isolation.STANDARD)
    # Run only on this node (the isolation probes, which check one node): None, any node.
    pinned_node = models.ForeignKey(
        "pool.Node", null=True, blank=True, on_delete=models.SET_NULL, related_name="pinned_jobs"
    )
    attempt = models.PositiveSmallIntegerField(default=1)
    # Pool policy: the queue it waits in (None: made before queues, served as the default queue), the node
    # features it needs (pool.features), and whether a higher queue's job may preempt it.
    queue = models.ForeignKey("pool.Queue", null=True, blank=True, on_delete=models.PROTECT, related_name="jobs")
    constraint = models.CharField(max_length=200, blank=True, default="")
    preemptable = models.BooleanField(default=True)
    # Attempts ended by preemption: they do not count against max_retries.
    preemptions = models.PositiveSmallIntegerField(default=0)
    # The job that asked for this one's cores while it runs; its node stops it (SIGTERM, grace) and requeues it.
    preempted_by = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # The earlier job a person submitted again (the browser's resubmit, POST /api/v1/jobs/{id}/resubmit/).
    # Found from the earlier job by the partial index job_resubmitted_from: most jobs are no resubmit.
    resubmitted_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="resubmissions", db_index=False
    )
    idempotency_key = models.CharField(max_length=255, blank=True, default="")
    # The sha256 of what was declared, so a key sent again with another request is told from a retry.
    request_fingerprint = models.CharField(max_length=64, blank=True, default="")

    stage = models.CharField(max_length=16, choices=Stage.choices, default=Stage.SUBMIT)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, blank=True, default="")
    exit_code = models.IntegerField(null=True, blank=True)
    reason = models.TextField(blank=True, default="")
    # The last stderr lines (or log lines) of an ended job, kept at its release so a review says why it ended.
    failure_excerpt = models.TextField(blank=True, default="")
    # What the node last sampled of the running container's cgroup ({cpu_percent, memory_mb, at}); None
    # when not running.
    usage_now = models.JSONField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Where a waiting job stands as the last scheduler pass found it (1 is next), and why.
    queue_position = models.PositiveIntegerField(null=True, blank=True)
    wait_reason = models.CharField(max_length=300, blank=True, default="")
    expected_start = models.DateTimeField(null=True, blank=True)

    submitted_at = models.DateTimeField(db_index=True)
    held_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    released_at = models.DateTimeField(null=True, blank=True)
    # Retention (jobs.storage.retention): when its files were deleted, and until when a member pinned them.
    files_deleted_at = models.DateTimeField(null=True, blank=True)
    pinned_until = models.DateTimeField(null=True, blank=True)
    # Not stored: the worst case a submission was checked against, shown in its answer.
    submitted_estimate: "Estimate | None" = None
    # Not stored: Prefetch to_attr of jobs.api.serializers.shown_relations.
    shown_holds: "list[Hold]"
    shown_data_files: "list[DataFile]"
    shown_dependencies: "list[Dependency]"
    shown_inputs: "list[Input]"
    shown_resubmissions: "list[Job]"  # jobs.lifecycle.resubmits.shown_resubmissions

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-submitted_at"]
        # Each index costs every submission and stage change: no index is a prefix of another but team's own,
        # which a list's count scans alone; `stage` avoids db_index, whose second LIKE index no query uses.
        indexes = [
            models.Index(fields=["stage"], name="job_stage"),
            # The review (what ended since) and the list's filters by outcome and stage, per team.
            models.Index(fields=["team", "-released_at"], include=["stage", "outcome"], name="job_team_released"),
            # The list's own order, so a deep page is walked, not sorted.
            models.Index(fields=["team", "-submitted_at", "-id"], name="job_team_submitted_id"),
            models.Index(fields=["team", "outcome", "-submitted_at"], name="job_team_outcome_submitted"),
            models.Index(fields=["team", "stage", "-submitted_at"], name="job_team_stage_submitted"),
            # The operator panel's recent failures of every team: released jobs by release time.
            models.Index(fields=["released_at"], name="job_released", condition=models.Q(stage="release")),
            # The queue the scheduler reads: waiting jobs not held back.
            models.Index(
                fields=["submitted_at"], name="job_queue", condition=models.Q(stage="submit", held_back=False)
            ),
            # An array's tasks not released yet, and those of them let go (jobs.lifecycle.chains).
            models.Index(fields=["array"], name="job_array_live", condition=~models.Q(stage="release")),
            models.Index(
                fields=["array"],
                name="job_array_let_go",
                condition=~models.Q(stage="release") & models.Q(held_back=False),
            ),
            # The next held-back task of an array its max_running lets go.
            models.Index(
                fields=["array", "array_index"], name="job_array_held_back", condition=models.Q(held_back=True)
            ),
            # A job's resubmissions (jobs.lifecycle.resubmits), read by its page and the API's lists.
            models.Index(
                fields=["resubmitted_from"],
                name="job_resubmitted_from",
                condition=models.Q(resubmitted_from__isnull=False),
            ),
            # A name's run history (jobs.web.runs): its team's last runs of that name, read thirty at a time.
            models.Index(
                fields=["team", "name", "-released_at"],
                name="job_team_name_released",
                condition=models.Q(stage="release"),
            ),
        ]
        constraints = [
            # Also the array's tasks in index order.
            models.UniqueConstraint(fields=["array", "array_index"], name="one_task_per_array_index"),
            models.UniqueConstraint(
                fields=["submitted_by", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="one_job_per_idempotency_key",
            ),
        ]

    def __str__(self) -> str:
        # Its name alone: the admin links it to its page, which shows its id; names need not be unique.
        return self.name

    @property
    def is_released(self) -> bool:
        return self.stage == Stage.RELEASE

    @property
    def display_name(self) -> str:
        """How a list names it: a task by its array's name and its index, `sweep[3]`; a job alone by its name."""
        return self.name if self.array_index is None else f"{self.name}[{self.array_index}]"

    @property
    def run_time(self) -> timedelta | None:
        """From its run's start to its end; None until the run has ended (or when it never ran)."""
        return self.finished_at - self.started_at if self.started_at and self.finished_at else None

    @property
    def data_files_by_name(self) -> list["DataFile"]:
        """Its prefetched data files in code point order, whatever the database's collation says."""
        return sorted(self.shown_data_files, key=lambda f: f.name)

    @property
    def active_hold(self) -> "Hold | None":
        return self.holds.filter(released_at__isnull=True).select_related("node").first()

    @property
    def last_hold(self) -> "Hold | None":
        return self.holds.select_related("node").order_by("-held_at").first()

    @property
    def not_preemptable(self) -> str:
        """Why a higher queue's job may not stop it now ("" when it may), as the pass decides (pool.preemption)."""
        return not_preemptable(declared=self.preemptable, queue=self.queue, preemptions=self.preemptions)


class Dependency(models.Model):
    """A job (or an array, for all its tasks) waits for another job or array of its team to end (Slurm's
    --dependency); jobs.lifecycle.chains decides when it is met, or can never be."""

    class Kind(models.TextChoices):
        OK = "ok", "after it succeeds"
        ANY = "any", "after it ends, however"
        NOT_OK = "not_ok", "after it ends without succeeding"

    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.CASCADE, related_name="dependencies")
    array = models.ForeignKey(JobArray, null=True, blank=True, on_delete=models.CASCADE, related_name="dependencies")
    on_job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.CASCADE, related_name="dependents")
    on_array = models.ForeignKey(JobArray, null=True, blank=True, on_delete=models.CASCADE, related_name="dependents")
    kind = models.CharField(max_length=8, choices=Kind.choices)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(job__isnull=True) ^ models.Q(array__isnull=True), name="dependency_of_one"
            ),
            models.CheckConstraint(
                condition=models.Q(on_job__isnull=True) ^ models.Q(on_array__isnull=True), name="dependency_on_one"
            ),
        ]

    @property
    def upstream_id(self) -> uuid.UUID:
        return self.on_job_id or self.on_array_id  # type: ignore[return-value]


class Settle(models.Model):
    """A released job or array task whose chain the next scheduler pass settles (jobs.lifecycle.chains): written in
    the release's transaction, so no dependent and no held-back task is ever forgotten."""

    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    array = models.ForeignKey(JobArray, null=True, blank=True, on_delete=models.CASCADE, related_name="+")


class Input(models.Model):
    """Outputs of an earlier job of the team that a job (or every task of an array) reads at
    /data/from/<job id>/<path>: those matching `glob`, staged by its node without a download."""

    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.CASCADE, related_name="inputs")
    array = models.ForeignKey(JobArray, null=True, blank=True, on_delete=models.CASCADE, related_name="inputs")
    from_job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="read_by")
    glob = models.CharField(max_length=512)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(job__isnull=True) ^ models.Q(array__isnull=True), name="input_of_one"
            )
        ]


class StoredBlob(models.Model):
    """Data bytes kept once per owner (a team, or the operators) by their sha256 (jobs.storage.blobs); the row
    outlives its bytes (`present`), so it is the lock that keeping and freeing the bytes take."""

    team = models.ForeignKey(
        "teams.Team",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="None: the operators'.",
    )
    sha256 = models.CharField(max_length=64)
    size = models.BigIntegerField(default=0)
    # The bytes are in the store at `key`; counted in the team's store quota only then.
    present = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "sha256"], condition=models.Q(team__isnull=False), name="stored_blob_once_per_team"
            ),
            models.UniqueConstraint(
                fields=["sha256"], condition=models.Q(team__isnull=True), name="stored_blob_once_for_operators"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.sha256[:12]} of {self.team or 'the operators'}"

    @property
    def key(self) -> str:
        return blob_key(self.team_id, self.sha256)


class DataFile(models.Model):
    """A file staged for one job, seen by it at /data/<name>: the job's own upload, or a stored blob (a
    template's file) it names rather than copies."""

    # Found by the unique constraint below, which leads with the job: no index of its own.
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="data_files", db_index=False)
    name = models.CharField(max_length=255)
    size = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    # Set: the bytes are the blob's (not the job's own, so not deleted with them nor counted again).
    blob = models.ForeignKey(StoredBlob, null=True, blank=True, on_delete=models.PROTECT, related_name="data_files")

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["job", "name"], name="data_file_names_unique_per_job")]

    def __str__(self) -> str:
        return f"/data/{self.name}"

    @property
    def stored_key(self) -> str:
        return self.blob.key if self.blob is not None else data_key(self.job_id, self.name)


class OutputFile(models.Model):
    # Found by the unique constraint below, which leads with the job: no index of its own.
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="output_files", db_index=False)
    path = models.CharField(max_length=1024)
    size = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["path"]
        constraints = [models.UniqueConstraint(fields=["job", "path"], name="output_paths_unique_per_job")]

    def __str__(self) -> str:
        return self.path


class LogChunk(models.Model):
    """Live log bytes, so any web server can tail a job running on any node."""

    # Found by the unique constraint below, which leads with the job: no index of its own.
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="log_chunks", db_index=False)
    offset = models.BigIntegerField()
    data = models.BinaryField()

    class Meta:
        ordering = ["offset"]
        constraints = [models.UniqueConstraint(fields=["job", "offset"], name="log_chunk_offsets_unique")]


class LogSpan(models.Model):
    """Bytes [start, end) of a job's log from its stderr or the platform: never guessed from a line's `[e31]`."""

    class Stream(models.TextChoices):
        STDERR = "err", "the job's stderr"
        SYSTEM = "sys", "the platform"

    # Found by the unique constraint below, which leads with the job: no index of its own.
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="log_spans", db_index=False)
    start = models.BigIntegerField()
    end = models.BigIntegerField()
    stream = models.CharField(max_length=3, choices=Stream.choices, default=Stream.STDERR)

    class Meta:
        ordering = ["start"]
        constraints = [models.UniqueConstraint(fields=["job", "start"], name="log_span_starts_unique")]


class JobEvent(models.Model):
    """One change of a job, written in the change's transaction; never changed once written."""

    # Found by the index below, which leads with the job: no index of its own.
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events", db_index=False)
    at = models.DateTimeField()
    # The transition's event (jobs.transitions.Event), or "submit" for the job's making.
    event = models.CharField(max_length=16)
    stage = models.CharField(max_length=16, choices=Stage.choices)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, blank=True, default="")
    attempt = models.PositiveSmallIntegerField()
    # A username, "scheduler", "reaper" or "node <name>"; `actor_user` tells a person from a look-alike name.
    actor = models.CharField(max_length=200)
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["job", "at", "id"], name="job_event_job_at")]

    def __str__(self) -> str:
        return f"{self.job_id} attempt {self.attempt}: {self.event} → {self.stage} by {self.actor}"
