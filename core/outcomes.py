"""How a job ended: the one vocabulary shared by the jobs (their `outcome`) and the records."""

from django.db import models


class Outcome(models.TextChoices):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    OUT_OF_MEMORY = "out_of_memory"
    CANCELLED = "cancelled"
    NODE_LOST = "node_lost"
    REJECTED = "rejected"
    # Stopped to give its cores to a job of a higher queue, then put back in the queue in its place.
    PREEMPTED = "preempted"
