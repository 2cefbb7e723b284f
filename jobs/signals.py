"""What other apps hear of a job's life (notify, webhooks), without jobs importing them: sent inside the
transaction that made it so, a receiver only writes rows (an outbox), never sends (docs/reference/notifications.md)."""

from django.dispatch import Signal

# kwargs: job (released: stage, outcome, reason, exit_code, released_at set). Sent for array tasks too.
job_released = Signal()
# kwargs: array (its released_at set: every task released), at (that time).
array_released = Signal()
