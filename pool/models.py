import uuid

from django.conf import settings
from django.db import models

from core.formats import moment


class Node(models.Model):
    """A machine of the pool: the cores, memory and GPUs its worker lends, and its state."""

    class State(models.TextChoices):
        ACTIVE = "active"
        # Registered, but takes only the isolation probes pinned to it until a round of them passes.
        PROVING = "proving"
        DRAINING = "draining"
        OFFLINE = "offline"

    name = models.SlugField(unique=True, max_length=100)
    state = models.CharField(max_length=16, choices=State.choices, default=State.ACTIVE)
    cpu_ids = models.JSONField(default=list, help_text="host core ids this node lends")
    memory_mb = models.PositiveIntegerField()
    gpu_ids = models.JSONField(default=list, blank=True, help_text="device ids this node lends")
    registered_at = models.DateTimeField()
    last_heartbeat = models.DateTimeField()
    # Who last drained or resumed it, and when (None: the system, e.g. a node declared lost).
    state_changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    state_changed_at = models.DateTimeField(null=True, blank=True)
    # Why it is in its state: the reason of its last NodeStateChange, kept here for the panel and the API.
    state_reason = models.CharField(max_length=300, blank=True, default="")
    # Free scratch space at its last heartbeat (None: not reported), and the floor below which it takes no job.
    scratch_free_mb = models.PositiveBigIntegerField(null=True, blank=True)
    scratch_min_free_mb = models.PositiveIntegerField(default=0)
    # Labels a job's `constraint` asks for (Slurm's node Features): E31_NODE_FEATURES, or set in the admin.
    features = models.JSONField(default=list, blank=True, help_text="labels such as bigmem, nvme, gpu-h100")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def cpus(self) -> int:
        return len(self.cpu_ids)

    @property
    def gpus(self) -> int:
        return len(self.gpu_ids)

    @property
    def short_of_scratch(self) -> bool:
        return self.scratch_free_mb is not None and self.scratch_free_mb < self.scratch_min_free_mb

    @property
    def queue(self) -> str:
        return queue_for(self.name)


def queue_for(node_name: str) -> str:
    return f"node.{node_name}"


class Hold(models.Model):
    """Compute held for one attempt of one job: exact cores, memory and gpus on one node."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    job = models.ForeignKey("jobs.Job", on_delete=models.PROTECT, related_name="holds")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="holds")
    attempt = models.PositiveSmallIntegerField(default=1)
    cpu_set = models.JSONField()
    memory_mb = models.PositiveIntegerField()
    gpu_ids = models.JSONField(default=list, blank=True)
    held_at = models.DateTimeField()
    released_at = models.DateTimeField(null=True, blank=True)
    # The container runtime its run used (runc, runsc), shown beside the record.
    runtime = models.CharField(max_length=32, blank=True, default="")

    class Meta:
        ordering = ["-held_at"]
        # The active holds (the operator panel's meters, usage now, each node's count), oldest first.
        indexes = [models.Index(fields=["held_at"], name="hold_active", condition=models.Q(released_at__isnull=True))]
        constraints = [
            models.UniqueConstraint(
                fields=["job"], condition=models.Q(released_at__isnull=True), name="one_active_hold_per_job"
            )
        ]

    def __str__(self) -> str:
        return f"{self.node.name}:{self.cpu_set_text}"

    @property
    def cpu_set_text(self) -> str:
        return ",".join(str(c) for c in self.cpu_set)


class HeldCore(models.Model):
    """A core while held: its unique constraint makes double-booking impossible, whatever the scheduler does."""

    node = models.ForeignKey(Node, on_delete=models.PROTECT)
    core = models.PositiveIntegerField()
    hold = models.ForeignKey(Hold, on_delete=models.CASCADE, related_name="cores")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["node", "core"], name="a_core_is_held_once")]


class HeldGpu(models.Model):
    node = models.ForeignKey(Node, on_delete=models.PROTECT)
    device = models.CharField(max_length=64)
    hold = models.ForeignKey(Hold, on_delete=models.CASCADE, related_name="gpus")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["node", "device"], name="a_gpu_is_held_once")]


# The most a node state change's reason keeps: the panel's form, the API and the history agree.
REASON_MAX = 300


class NodeStateChange(models.Model):
    """One change of a node's state, who made it (None: the system) and why: the node's history."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="state_changes")
    from_state = models.CharField(max_length=16, choices=Node.State.choices)
    to_state = models.CharField(max_length=16, choices=Node.State.choices)
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    at = models.DateTimeField()
    reason = models.CharField(max_length=REASON_MAX)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.node}: {self.from_state} → {self.to_state} at {moment(self.at)}"


class Queue(models.Model):
    """Where a job waits, as Slurm's QOS or an AWS Batch job queue: a higher priority is served first, may
    preempt lower queues' jobs (preempts_lower), and caps what one team runs in it at once."""

    name = models.SlugField(unique=True, max_length=50)
    description = models.CharField(max_length=300, blank=True, default="")
    priority = models.IntegerField(default=0, help_text="higher is served first; fair-share orders jobs within a queue")
    teams = models.ManyToManyField(
        "teams.Team", blank=True, related_name="queues", help_text="the teams that may use it; none: every team"
    )
    max_running_cores_per_team = models.PositiveIntegerField(
        null=True, blank=True, help_text="cores one team's jobs in this queue may hold at once; empty: no limit"
    )
    max_running_jobs_per_team = models.PositiveIntegerField(
        null=True, blank=True, help_text="jobs of one team this queue may hold compute for at once; empty: no limit"
    )
    preempts_lower = models.BooleanField(
        default=False, help_text="its jobs that cannot be held take the cores of preemptable jobs of lower queues"
    )
    preemptable = models.BooleanField(default=True, help_text="its jobs may be preempted by higher queues' jobs")
    opt_out_allowed = models.BooleanField(
        default=False, help_text="a job here may ask not to be preempted (preemptable=false)"
    )
    is_default = models.BooleanField(
        default=False, help_text="the queue of a job that names none, unless its team has its own"
    )
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    changed_at = models.DateTimeField(null=True, blank=True)
    # Not a column: the teams it names, when the query that read it found them (with_team_ids).
    read_team_ids: frozenset[int] | None = None

    class Meta:
        ordering = ["-priority", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_default"], condition=models.Q(is_default=True), name="one_default_queue"
            )
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def preempts(self) -> bool:
        """A preempting queue left with no teams preempts nobody until an operator names them."""
        return self.preempts_lower and bool(self.team_ids)

    def preempts_for(self, team_id: int) -> bool:
        """A team taken out of the queue keeps its jobs waiting there, but they preempt nobody."""
        return self.preempts and team_id in self.team_ids

    @property
    def team_ids(self) -> frozenset[int]:
        """The teams that may use it (none: every team), as with_team_ids read them if it did."""
        if self.read_team_ids is None:
            return frozenset(team.pk for team in self.teams.all())
        return self.read_team_ids


def with_team_ids(queues: models.QuerySet[Queue]) -> list[Queue]:
    """`queues` with the teams each names (Queue.team_ids), in one query of a row per queue and team."""
    found: dict[int, Queue] = {}
    named: dict[int, set[int]] = {}
    for queue in queues.annotate(named_team=models.F("teams")):
        found.setdefault(queue.pk, queue)
        named.setdefault(queue.pk, set()).update([queue.named_team] if queue.named_team is not None else [])
    for pk, kept in found.items():
        kept.read_team_ids = frozenset(named[pk])
    return list(found.values())


class TeamQueue(models.Model):
    """A team's own default queue: its jobs that name no queue go there."""

    team = models.OneToOneField("teams.Team", on_delete=models.CASCADE, related_name="default_queue")
    queue = models.ForeignKey(Queue, on_delete=models.PROTECT, related_name="default_for")

    def __str__(self) -> str:
        return f"{self.team} → {self.queue}"


class MaintenanceWindow(models.Model):
    """A time some nodes (or all) are kept for maintenance, as Slurm's MAINT reservation: no job is held
    there whose time limit runs into it; at its start the nodes drain, at its end they resume."""

    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    reason = models.CharField(max_length=REASON_MAX)
    nodes = models.ManyToManyField(Node, blank=True, related_name="maintenance_windows", help_text="none: every node")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()
    # Set by the pass of beat that drained its nodes at its start, and resumed them at its end.
    drained_at = models.DateTimeField(null=True, blank=True)
    resumed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["starts_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(ends_at__gt=models.F("starts_at")), name="window_ends_after_start"
            )
        ]

    def __str__(self) -> str:
        return f"{moment(self.starts_at)}–{moment(self.ends_at)}: {self.reason}"
